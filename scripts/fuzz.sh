#!/usr/bin/env bash
# Build the libFuzzer targets (CMake -DTSR_FUZZ=ON with clang: every tests/fuzz/<name>_fuzz.cpp,
# -fsanitize=fuzzer,address,undefined, the implementation compiled once for all of them)
# and run each for N seconds (default 20) on a copy of its seed corpus tests/fuzz/corpus/<name>/.
#   scripts/fuzz.sh [seconds-per-target] [names...]      (names: gguf graph tokenizer ...; default all)
# Any crash, sanitizer report, leak, hang (-timeout) or single allocation over 64 MiB fails
# the run; the reproducer is left in build-fuzz/<name>/ (crash-*, leak-*, timeout-*, oom-*).
# A found input, once fixed, joins tests/fuzz/corpus/<name>/ as regress-<what>.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
shift || true
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for src in tests/fuzz/*_fuzz.cpp; do
    n=$(basename "$src" .cpp)
    names+=("${n%_fuzz}")
  done
fi
out=build-fuzz
CC=clang CXX=clang++ cmake -S . -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTSR_FUZZ=ON \
  -DTSR_BUILD_TESTS=OFF -DTSR_BUILD_EXAMPLES=OFF -DTSR_BUILD_BENCH=OFF -DTSR_VULKAN=OFF -DTSR_CUDA=OFF >/dev/null
targets=()
for n in "${names[@]}"; do targets+=("${n}_fuzz"); done
cmake --build "$out" -j"${TSR_JOBS:-$(nproc)}" --target "${targets[@]}"

for n in "${names[@]}"; do
  run="$out/$n"
  rm -rf "$run"
  mkdir -p "$run/corpus"
  if [ -d "tests/fuzz/corpus/$n" ]; then cp tests/fuzz/corpus/"$n"/* "$run/corpus/" 2>/dev/null || true; fi
  echo "=== fuzz $n: ${secs}s"
  # libFuzzer's exit status decides; the log tail shows its final stats (or the finding)
  if ! (cd "$run" && UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 \
        "../tests/fuzz/${n}_fuzz" -max_total_time="$secs" -max_len=65536 -malloc_limit_mb=64 -rss_limit_mb=2048 \
        -timeout=10 -print_final_stats=1 corpus >log.txt 2>&1); then
    tail -n 60 "$run/log.txt"
    echo "fuzz $n: FINDING, reproducer in $run/ (run it: $out/tests/fuzz/${n}_fuzz $run/<file>)"
    exit 1
  fi
  grep -E "^stat::(number_of_executed_units|new_units_added)|cov: .*DONE|Done [0-9]+ runs" "$run/log.txt" | tail -n 3
  grep -Eo "cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9]+[a-zA-Z]*" "$run/log.txt" | tail -n 1
done
echo "fuzz: ${names[*]}: ${secs}s each without findings"
