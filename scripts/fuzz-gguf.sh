#!/usr/bin/env bash
# Build the GGUF libFuzzer target (clang, -fsanitize=fuzzer,address,undefined) and run it
# for N seconds (default 60) on a copy of the seed corpus tests/fuzz/corpus.
#   scripts/fuzz-gguf.sh [seconds]
# Any crash, sanitizer report, leak, or single allocation over 64 MiB (a file of at most
# 64 KiB must never make the parser allocate that much) fails the run; the reproducer is
# left in build-fuzz/ (crash-*, leak-*, oom-*).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
out=build-fuzz
mkdir -p "$out"
CXX=${CXX_FUZZ:-clang++}
"$CXX" -std=c++17 -O1 -g -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -Iinclude -Iexamples/run -Ibackends/cpu \
  tests/fuzz/gguf_fuzz.cpp -o "$out/gguf_fuzz" -pthread
rm -rf "$out/corpus"
mkdir -p "$out/corpus"
cp tests/fuzz/corpus/* "$out/corpus/"
cd "$out"
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 \
  ./gguf_fuzz -max_total_time="$secs" -max_len=65536 -malloc_limit_mb=64 -rss_limit_mb=2048 \
  -timeout=10 -print_final_stats=1 corpus 2>&1 | tail -n 25
echo "fuzz-gguf: ${secs}s without findings"
