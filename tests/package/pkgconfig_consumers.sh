#!/usr/bin/env bash
# Build and run the consumers of an installed tessera through pkg-config alone: the C++
# consumer (tessera, and tessera-vulkan when installed) and a C99 program linked by the C
# compiler with one C++ implementation file. The prefix must have been moved after the
# install: the .pc files are relocatable and must not name any absolute prefix.
# CMake's package test (check_install.cmake) runs it; meson's (scripts/check-meson-package.sh)
# checks that meson installs the same files.   Usage: pkgconfig_consumers.sh PC_DIR WORK_DIR
# (CC / CXX: the compilers)
set -euo pipefail
pcdir=$1
work=$2
here=$(cd "$(dirname "$0")" && pwd)
cxx=${CXX:-c++}
cc=${CC:-cc}
mkdir -p "$work"
run() {
  if ! "$@" >"$work/last.log" 2>&1; then
    cat "$work/last.log"
    echo "FAILED: $*" >&2
    exit 1
  fi
}
if grep -lE '^[a-z]+=/' "$pcdir"/*.pc; then echo "FAILED: a .pc file names an absolute path" >&2; exit 1; fi
export PKG_CONFIG_PATH=$pcdir
# The C consumer: its implementation file compiled by the C++ compiler with tessera.pc's
# flags, the program linked by the C compiler with its libraries.
# shellcheck disable=SC2046  # the flags are words
run "$cxx" -std=c++17 -c "$here/consumer/impl.cpp" $(pkg-config --cflags tessera) -o "$work/impl.o"
# shellcheck disable=SC2046
run "$cc" -std=c99 -Wall -Wextra -pedantic -Werror "$here/consumer/main_c.c" "$work/impl.o" \
  $(pkg-config --cflags --libs tessera) -o "$work/consumer-c"
run "$work/consumer-c"
# The C++ consumer, through tessera-vulkan.pc (which requires tessera.pc) when installed:
# one compile of the implementation each (tessera.pc alone is the C consumer's).
pc=tessera
[ -f "$pcdir/tessera-vulkan.pc" ] && pc=tessera-vulkan
# shellcheck disable=SC2046
run "$cxx" -std=c++17 "$here/consumer/main.cpp" $(pkg-config --cflags --libs $pc) -o "$work/consumer-cxx"
run "$work/consumer-cxx"
checked="tessera (C99), $pc (C++)"
echo "ok: pkg-config consumers built and ran: $checked"
