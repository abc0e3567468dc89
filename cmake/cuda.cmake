# TSR_CUDA: AUTO (on when nvcc is found), ON (an error without nvcc) or OFF. Sets
# TSR_HAVE_CUDA and, when on, enables the CUDA language and finds the toolkit here, at the
# top level: a language enabled in one folder is not usable from the others (tests/cuda
# compiles a .cu file too). Architectures: CMAKE_CUDA_ARCHITECTURES, default 80;86;89;90.
set(TSR_HAVE_CUDA OFF)
if(NOT TSR_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(TSR_HAVE_CUDA ON)
  elseif(TSR_CUDA STREQUAL "ON")
    message(FATAL_ERROR "tessera: TSR_CUDA=ON but no CUDA compiler (nvcc) was found")
  endif()
endif()
if(TSR_HAVE_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
    set(CMAKE_CUDA_ARCHITECTURES "80;86;89;90")
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
endif()
