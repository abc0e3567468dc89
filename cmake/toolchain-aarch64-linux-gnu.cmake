# Cross-compile for aarch64 Linux (the NEON kernel path) with Debian's g++-aarch64-linux-gnu;
# ctest runs the programs under qemu-user. Used by scripts/test-aarch64.sh:
#   cmake -S . -B build-test-aarch64 --toolchain cmake/toolchain-aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(TSR_AARCH64_SYSROOT /usr/aarch64-linux-gnu CACHE PATH "aarch64 libraries for qemu-user")
set(CMAKE_FIND_ROOT_PATH ${TSR_AARCH64_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L ${TSR_AARCH64_SYSROOT})
