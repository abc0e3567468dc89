# Run with cmake -P: install tessera as a user does (prefix chosen at install time),
# check the installed layout, then build and run consumers against it:
#   1. CMake find_package(tessera CONFIG), core only, with Vulkan and CUDA made unfindable
#      (a CPU-only consumer needs neither);
#   2. COMPONENTS vulkan (when this build has the Vulkan backend), and the same request with
#      Vulkan unfindable must fail with a message;
#   3. pkg-config alone, after moving the prefix (relocatable): tests/package/
#      pkgconfig_consumers.sh (C99 linked by the C compiler; C++ through tessera-vulkan.pc when
#      installed, else tessera.pc).
# Inputs: TSR_SOURCE_DIR, TSR_WORK_DIR, TSR_GENERATOR, TSR_VULKAN (ON/OFF), TSR_CC, TSR_CXX, and
# TSR_PART: "install" (the install and its layout), "cmake" (1 and 2) or "pkgconfig" (3), three
# ctest tests: the consumers' two parts (each compiles the implementation 2-3 times) run side
# by side after the install (a ctest fixture), where one test ran them all in turn.
set(prefix ${TSR_WORK_DIR}/prefix)
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}")
  endif()
  message(STATUS "ok: ${ARGN}")
endfunction()

if(TSR_PART STREQUAL "install")
file(REMOVE_RECURSE ${TSR_WORK_DIR})
# ---- install with the prefix given at install time only
run(${CMAKE_COMMAND} -S ${TSR_SOURCE_DIR} -B ${TSR_WORK_DIR}/tessera -G ${TSR_GENERATOR}
    -DTSR_BUILD_TESTS=OFF -DTSR_BUILD_EXAMPLES=OFF -DTSR_BUILD_BENCH=OFF -DTSR_VULKAN=${TSR_VULKAN} -DTSR_CUDA=OFF)
run(${CMAKE_COMMAND} --install ${TSR_WORK_DIR}/tessera --prefix ${prefix})

# ---- layout: everything under include/tessera/, backends in their own folders
file(GLOB top RELATIVE ${prefix}/include ${prefix}/include/*)
if(NOT top STREQUAL "tessera")
  message(FATAL_ERROR "include/ must hold only tessera/, it holds: ${top}")
endif()
foreach(f tessera/tessera.h tessera/backend.h tessera/alloc.h tessera/gguf.h tessera/sched.h tessera/impl/core_internal.h
          tessera/cpu/tessera-cpu.h)
  if(NOT EXISTS ${prefix}/include/${f})
    message(FATAL_ERROR "not installed: include/${f}")
  endif()
endforeach()
if(TSR_VULKAN AND NOT EXISTS ${prefix}/include/tessera/vulkan/tessera-vulkan.h)
  message(FATAL_ERROR "not installed: include/tessera/vulkan/tessera-vulkan.h")
endif()
endif()

if(TSR_PART STREQUAL "cmake")
# ---- 1. CMake, core only, Vulkan and CUDA unfindable
run(${CMAKE_COMMAND} -S ${TSR_SOURCE_DIR}/tests/package/consumer -B ${TSR_WORK_DIR}/consumer -G ${TSR_GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_DISABLE_FIND_PACKAGE_Vulkan=ON -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON)
# With the Vulkan component installed, 2 builds and runs the same program through
# tessera::tessera (+ tessera::vulkan) and the pkg-config C consumer compiles the
# implementation without Vulkan: configuring (find_package and its targets resolve with
# Vulkan unfindable) is what is left to check here, and saves a compile of the implementation.
if(NOT TSR_VULKAN)
  run(${CMAKE_COMMAND} --build ${TSR_WORK_DIR}/consumer)
  run(${TSR_WORK_DIR}/consumer/consumer)
endif()

# ---- 2. the vulkan component
if(TSR_VULKAN)
  run(${CMAKE_COMMAND} -S ${TSR_SOURCE_DIR}/tests/package/consumer -B ${TSR_WORK_DIR}/consumer-vk -G ${TSR_GENERATOR}
      -DCMAKE_PREFIX_PATH=${prefix} -DTSR_WANT_VULKAN=ON)
  run(${CMAKE_COMMAND} --build ${TSR_WORK_DIR}/consumer-vk)
  run(${TSR_WORK_DIR}/consumer-vk/consumer)
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${TSR_SOURCE_DIR}/tests/package/consumer -B ${TSR_WORK_DIR}/consumer-novk
      -G ${TSR_GENERATOR} -DCMAKE_PREFIX_PATH=${prefix} -DTSR_WANT_VULKAN=ON -DCMAKE_DISABLE_FIND_PACKAGE_Vulkan=ON
      RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc EQUAL 0 OR NOT out MATCHES "vulkan")
    message(FATAL_ERROR "COMPONENTS vulkan without Vulkan should fail naming it (rc ${rc}):\n${out}")
  endif()
  message(STATUS "ok: COMPONENTS vulkan without Vulkan fails: it says so")
endif()
endif()

if(TSR_PART STREQUAL "pkgconfig")
# ---- 3./4. pkg-config, from a moved prefix
# its own install, then moved: the cmake part reads ${prefix} meanwhile
set(moved ${TSR_WORK_DIR}/moved-prefix)
file(REMOVE_RECURSE ${TSR_WORK_DIR}/pc-prefix ${moved})
run(${CMAKE_COMMAND} --install ${TSR_WORK_DIR}/tessera --prefix ${TSR_WORK_DIR}/pc-prefix)
file(RENAME ${TSR_WORK_DIR}/pc-prefix ${moved})
set(ENV{CC} ${TSR_CC})
set(ENV{CXX} ${TSR_CXX})
run(bash ${TSR_SOURCE_DIR}/tests/package/pkgconfig_consumers.sh ${moved}/share/pkgconfig ${TSR_WORK_DIR}/pc)
endif()
