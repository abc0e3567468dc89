# Reads scripts/sources.txt (the one file list meson and scripts/amalgamate.py read too):
#   TSR_FILES_<part>   every file of the part (core, cpu, vulkan, cuda), repository-relative
#   TSR_SOURCES_<part> its files of kind `source` (compiled on their own)
# and defines tsr_install_part(part) and tsr_install_pkgconfig(template).
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/scripts/sources.txt)
file(STRINGS ${PROJECT_SOURCE_DIR}/scripts/sources.txt _tsr_lines REGEX "^[a-z]")
foreach(_line IN LISTS _tsr_lines)
  string(REGEX REPLACE "[ \t]+" ";" _f "${_line}")
  list(GET _f 0 _part)
  list(GET _f 1 _kind)
  list(GET _f 2 _path)
  list(APPEND TSR_FILES_${_part} ${_path})
  if(_kind STREQUAL "source")
    list(APPEND TSR_SOURCES_${_part} ${_path})
  endif()
endforeach()

# Install every file of a part: include/tessera/X -> <includedir>/tessera/X,
# backends/<part>/X -> <includedir>/tessera/<part>/X.
function(tsr_install_part part)
  foreach(path IN LISTS TSR_FILES_${part})
    get_filename_component(dir ${path} DIRECTORY)
    if(dir MATCHES "^include/tessera")
      string(REGEX REPLACE "^include/" "" sub "${dir}")
    else()
      string(REGEX REPLACE "^backends/" "tessera/" sub "${dir}")
    endif()
    install(FILES ${PROJECT_SOURCE_DIR}/${path} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/${sub} COMPONENT ${part})
  endforeach()
endfunction()

# A relocatable pkg-config file: every path is relative to ${pcfiledir}, so the installed
# tree works wherever it is installed or moved to (cmake --install --prefix P included).
function(tsr_install_pkgconfig template)
  set(pcdir ${CMAKE_INSTALL_DATADIR}/pkgconfig)
  file(RELATIVE_PATH TSR_PC_INCLUDEDIR /x/${pcdir} /x/${CMAKE_INSTALL_INCLUDEDIR})
  file(RELATIVE_PATH TSR_PC_LIBDIR /x/${pcdir} /x/${CMAKE_INSTALL_LIBDIR})
  string(REGEX REPLACE "\\.in$" "" out ${template})
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${template} ${PROJECT_BINARY_DIR}/${out} @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/${out} DESTINATION ${pcdir})
endfunction()
