#!/usr/bin/env bash
# Build the libFuzzer targets (CMake -DTSR_FUZZ=ON with clang: every tests/fuzz/<name>_fuzz.cpp,
# -fsanitize=fuzzer,address,undefined, the implementation compiled once for all of them)
# and run each for N seconds (default 20) on a copy of its seed corpus tests/fuzz/corpus/<name>/,
# as many at once as there are cores (TSR_JOBS).
#   scripts/fuzz.sh [seconds-per-target] [names...]      (names: gguf graph tokenizer ...; default all)
# Any crash, sanitizer report, leak, hang (-timeout) or single allocation over 64 MiB fails
# the run; the reproducer is left in build-fuzz/<name>/ (crash-*, leak-*, timeout-*, oom-*).
# A found input, once fixed, joins tests/fuzz/corpus/<name>/ as regress-<what>.
#   scripts/fuzz.sh --build-only [names...]   builds the targets, runs nothing
#   scripts/fuzz.sh --no-build seconds [names...]   runs what an earlier --build-only built
# (CI builds them beside its previous stages: the build is one long compile, a core idle.)
# TSR_FUZZ_OPT=0 builds them at -O0 (default 1): a third of the compile, for short runs.
set -euo pipefail
cd "$(dirname "$0")/.."
step=all
case "${1:-}" in
  --build-only) step=build; shift ;;
  --no-build) step=run; shift ;;
esac
secs=20
if [ "$step" != build ]; then
  secs=${1:-20}
  shift || true
fi
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for src in tests/fuzz/*_fuzz.cpp; do
    n=$(basename "$src" .cpp)
    names+=("${n%_fuzz}")
  done
fi
out=build-fuzz
if [ "$step" != run ]; then
  CC=clang CXX=clang++ cmake -S . -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTSR_FUZZ=ON -DTSR_FUZZ_OPT="${TSR_FUZZ_OPT:-1}" \
    -DTSR_BUILD_TESTS=OFF -DTSR_BUILD_EXAMPLES=OFF -DTSR_BUILD_BENCH=OFF -DTSR_VULKAN=OFF -DTSR_CUDA=OFF >/dev/null
  targets=()
  for n in "${names[@]}"; do targets+=("${n}_fuzz"); done
  cmake --build "$out" -j"${TSR_JOBS:-$(nproc)}" --target "${targets[@]}"
  [ "$step" = build ] && exit 0
fi
for n in "${names[@]}"; do
  [ -x "$out/tests/fuzz/${n}_fuzz" ] || { echo "fuzz: $out/tests/fuzz/${n}_fuzz is not built (scripts/fuzz.sh --build-only)" >&2; exit 1; }
done

# One target on a fresh copy of its corpus; writes $out/<name>/status (ok or FINDING).
# libFuzzer's exit status decides; log.txt has its final stats (or the finding).
fuzz_one() {
  local n=$1 run="$out/$1"
  rm -rf "$run"
  mkdir -p "$run/corpus"
  if [ -d "tests/fuzz/corpus/$n" ]; then cp tests/fuzz/corpus/"$n"/* "$run/corpus/" 2>/dev/null || true; fi
  if (cd "$run" && UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 \
        "../tests/fuzz/${n}_fuzz" -max_total_time="$secs" -max_len=65536 -malloc_limit_mb=64 -rss_limit_mb=2048 \
        -timeout=10 -print_final_stats=1 corpus >log.txt 2>&1); then
    echo ok >"$run/status"
  else
    echo FINDING >"$run/status"
  fi
}

# The targets are single-threaded: run as many at once as there are cores.
parallel=${TSR_JOBS:-$(nproc)}
echo "=== fuzz ${names[*]}: ${secs}s each, $parallel at a time"
for n in "${names[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do wait -n || true; done
  fuzz_one "$n" &
done
wait

failed=0
for n in "${names[@]}"; do
  run="$out/$n"
  if [ "$(cat "$run/status" 2>/dev/null)" != ok ]; then
    tail -n 60 "$run/log.txt"
    echo "fuzz $n: FINDING, reproducer in $run/ (run it: $out/tests/fuzz/${n}_fuzz $run/<file>)"
    failed=1
    continue
  fi
  runs=$(grep -Eo "^stat::number_of_executed_units: +[0-9]+" "$run/log.txt" | grep -Eo "[0-9]+$")
  echo "fuzz $n: $runs runs, $(grep -Eo "DONE +cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9]+[a-zA-Z]*" "$run/log.txt" | tail -n 1)"
done
[ "$failed" = 0 ] || exit 1
echo "fuzz: ${names[*]}: ${secs}s each without findings"
