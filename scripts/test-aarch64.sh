#!/usr/bin/env bash
# Cross-compile the CPU backend tests for aarch64 (NEON path) and run them under qemu-user.
# Needs g++-aarch64-linux-gnu and qemu-user (qemu-aarch64). Usage: scripts/test-aarch64.sh [catch args]
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
flags=(-std=c++17 -O2 -Wall -Wextra -Werror -Iinclude -Ibackends/cpu -I"$out/include")
[ -f "$out/catch_main.o" ] || "$CXX" "${flags[@]}" -c tests/support/catch_main.cpp -o "$out/catch_main.o"
objs=("$out/catch_main.o")
for src in tests/cpu/*.cpp; do
  obj="$out/$(basename "$src" .cpp).o"
  "$CXX" "${flags[@]}" -c "$src" -o "$obj"
  objs+=("$obj")
done
"$CXX" "${objs[@]}" -o "$out/test_cpu" -pthread
echo "test-aarch64: running $out/test_cpu under $QEMU"
"$QEMU" -L "$SYSROOT" "$out/test_cpu" "${@:-~[.big]}"
