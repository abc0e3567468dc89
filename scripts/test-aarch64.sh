#!/usr/bin/env bash
# Cross-compile the CPU backend tests and test_backend_ops (the NEON path against the
# scalar path on the shared op table) for aarch64 and run them under qemu-user.
# Needs g++-aarch64-linux-gnu and qemu-user (qemu-aarch64). Usage: scripts/test-aarch64.sh [catch args for test_cpu]
set -euo pipefail
cd "$(dirname "$0")/.."
CXX=${TSR_AARCH64_CXX:-aarch64-linux-gnu-g++}
QEMU=${TSR_QEMU:-qemu-aarch64}
SYSROOT=${TSR_AARCH64_SYSROOT:-/usr/aarch64-linux-gnu}
for tool in "$CXX" "$QEMU"; do
  command -v "$tool" >/dev/null || { echo "test-aarch64: $tool not found (apt-get install g++-aarch64-linux-gnu qemu-user)"; exit 1; }
done
out=build-test-aarch64
mkdir -p "$out/include/catch2"
# Catch2 v2 is header-only: copy the header so the cross compiler never sees host system headers.
cp /usr/include/catch2/catch.hpp "$out/include/catch2/"
flags=(-std=c++17 -O2 -Wall -Wextra -Werror -Iinclude -Ibackends/cpu -Itests/support -I"$out/include")
[ -f "$out/catch_main.o" ] || "$CXX" "${flags[@]}" -c tests/support/catch_main.cpp -o "$out/catch_main.o"
# compile: one object per source, named <prefix><source name>.o
compile() {
  local prefix=$1 src; shift
  for src in "$@"; do "$CXX" "${flags[@]}" -c "$src" -o "$out/$prefix$(basename "$src" .cpp).o"; done
}
compile support_ tests/support/test_support.cpp tests/support/backend_support.cpp
compile cpu_ tests/cpu/*.cpp
compile ops_ tests/backend_ops/*.cpp
common=("$out/catch_main.o" "$out"/support_*.o)
"$CXX" "$out"/cpu_*.o "${common[@]}" -o "$out/test_cpu" -pthread
"$CXX" "$out"/ops_*.o "${common[@]}" -o "$out/test_backend_ops" -pthread
echo "test-aarch64: running $out/test_cpu under $QEMU"
"$QEMU" -L "$SYSROOT" "$out/test_cpu" "${@:-~[.big]}"
echo "test-aarch64: running $out/test_backend_ops under $QEMU"
"$QEMU" -L "$SYSROOT" "$out/test_backend_ops"
