#!/usr/bin/env bash
# Build the GGUF libFuzzer target (CMake -DTSR_FUZZ=ON with clang: -fsanitize=fuzzer,
# address,undefined) and run it for N seconds (default 60) on a copy of the seed corpus
# tests/fuzz/corpus.
#   scripts/fuzz-gguf.sh [seconds]
# Any crash, sanitizer report, leak, or single allocation over 64 MiB (a file of at most
# 64 KiB must never make the parser allocate that much) fails the run; the reproducer is
# left in build-fuzz/ (crash-*, leak-*, oom-*).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
out=build-fuzz
CC=clang CXX=clang++ cmake -S . -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTSR_FUZZ=ON \
  -DTSR_BUILD_TESTS=OFF -DTSR_BUILD_EXAMPLES=OFF -DTSR_BUILD_BENCH=OFF -DTSR_VULKAN=OFF -DTSR_CUDA=OFF >/dev/null
cmake --build "$out" --target gguf_fuzz
rm -rf "$out/corpus"
mkdir -p "$out/corpus"
find tests/fuzz/corpus -maxdepth 1 -type f -exec cp {} "$out/corpus/" \;  # the GGUF seeds; corpus/<name>/ belong to other targets
cd "$out"
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 \
  ./tests/fuzz/gguf_fuzz -max_total_time="$secs" -max_len=65536 -malloc_limit_mb=64 -rss_limit_mb=2048 \
  -timeout=10 -print_final_stats=1 corpus 2>&1 | tail -n 25
echo "fuzz-gguf: ${secs}s without findings"
