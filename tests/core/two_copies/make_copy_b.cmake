# Make copy B of tessera for the two-copies test: the committed single header with an
# internal struct changed (its layout differs from copy A's), as a second vendored copy
# of another version would. Run with cmake -DIN=single.h -DOUT=copy.h -P make_copy_b.cmake.
file(READ ${IN} text)
foreach(s "struct gallocr {" "struct gguf_ctx {" "struct pool_allocator {")
  string(FIND "${text}" "${s}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "make_copy_b: '${s}' not found in ${IN}")
  endif()
  string(REPLACE "${s}" "${s}\n    char copy_b_changed_layout[136] = {};" text "${text}")
endforeach()
file(WRITE ${OUT} "${text}")
