#!/usr/bin/env bash
# Quick start 2: build everything and pass every test.
#
#   1. generated files are current (embedded SPIR-V, the committed single headers, the
#      runner's Unicode tables)
#   2. CMake + g++ Release: every test, example and benchmark (Vulkan, CUDA when nvcc is
#      there); ctest (incl. install + consumers, include orders, two TSR_STATIC copies); the
#      implementation compiles under g++ -O0 with ASan + UBSan (a user's debug build)
#   3. meson + clang (-O1) with AddressSanitizer + UndefinedBehaviorSanitizer, the
#      implementation compiled from the committed single header (include/single): every
#      test under meson test; meson consumers
#   4. CMake + clang with ThreadSanitizer: the threading tests
#   5. aarch64 cross build (CMake toolchain file), NEON tests under qemu-user
#   6. libFuzzer targets (tests/fuzz/*_fuzz.cpp: gguf, graph, tokenizer, ...) for
#      TSR_FUZZ_SECONDS each (default 10, two at a time on 2 cores), on their seed
#      corpora (scripts/fuzz.sh); built in the background during stages 4 and 5
#
# One build per compiler covers each check: g++ builds and runs everything optimized
# (stage 2); clang builds everything again with the sanitizers, through meson and from the
# single header (stage 3). (Stages 3 and 4 used to be two builds: meson + clang without
# sanitizers, then CMake + g++ with them; together they took ~500 s of this script's ~1100.)
#
# TSR_TEST_STAGES="2 4" runs only those stages. Build folders: build-test-*.
# Prints each stage's time as it ends and a table of all of them at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
jobs=${TSR_JOBS:-$(nproc)}
stages=${TSR_TEST_STAGES:-"1 2 3 4 5 6"}
want() { [[ " $stages " == *" $1 "* ]]; }
t_all=$SECONDS
t_stage=$SECONDS
current=""
report=()
finish() {
  if [ -n "$current" ]; then
    local dt=$(( SECONDS - t_stage ))
    echo "=== [$(( SECONDS - t_all ))s] done in ${dt}s: $current"
    report+=("| $current | $dt |")
  fi
}
stage() { finish; current="$*"; t_stage=$SECONDS; echo; echo "=== [$(( SECONDS - t_all ))s] $current"; }
summary() {
  finish
  current=""
  echo
  echo "| stage | seconds |"
  echo "|---|---:|"
  printf '%s\n' "${report[@]}"
  echo "| total | $(( SECONDS - t_all )) |"
}
trap 'rc=$?; if [ $rc -ne 0 ]; then echo "FAILED in stage: $current"; summary; fi' EXIT

# Stage 1 checks the generated files; the build stages then skip their copy of the SPIR-V
# check (it regenerates every shader: ~15 s a stage)
skip_generated=""
meson_skip_generated=""
if want 1; then
  skip_generated="-E ^vulkan_shaders_current$"
  meson_skip_generated="--no-suite generated"
  stage "1. generated files are current"
  scripts/gen-vulkan-shaders.sh --check
  python3 scripts/amalgamate.py --check
  python3 scripts/gen-unicode-tables.py --check
fi

if want 2; then
  stage "2. CMake + g++ Release: build and ctest"
  # one CUDA architecture keeps CI fast (users get 80;86;89;90 by default)
  CC=gcc CXX=g++ cmake -S . -B build-test-gcc -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
  cmake --build build-test-gcc -j"$jobs"
  # a user's g++ debug build with the sanitizers compiles too (stage 3's are clang's): g++
  # -fsanitize=undefined has refused constant expressions and pragmas clang accepts. It runs
  # beside ctest, whose last half minute is the package consumers' compiles.
  g++ -std=c++17 -O0 -fsanitize=address,undefined -Wall -Wextra -Werror -Iinclude -Ibackends/cpu \
    -c tests/support/tessera_impl.cpp -o build-test-gcc/impl-gcc-asan-ubsan.o &
  gcc_sanitized=$!
  ctest --test-dir build-test-gcc --output-on-failure -j"$jobs" $skip_generated
  wait $gcc_sanitized
fi

if want 3; then
  stage "3. meson + clang (-O1) with ASan + UBSan, implementation from the single header: build and meson test"
  rm -rf build-test-meson
  # the package_meson test runs scripts/check-meson-package.sh (subproject consumer,
  # meson install = CMake install, pkg-config consumers); stage 2 builds CUDA already,
  # and the structure tests (include orders, two copies, the single header alone: each
  # compiles the whole implementation again, and only what compiles and links is in
  # question there).
  # -O1 -g1: half the compile time of -O2 -g with the sanitizers, line numbers kept.
  # -fno-sanitize=enum: the C API takes its enums from C callers, where any int is a valid
  # value; tessera checks them, and the tests pass out-of-range ones on purpose. vptr: tessera
  # has no virtual functions, and the check cost ~8% of the two implementation compiles.
  # pointer-overflow: ~20% of those compiles; it stays on in the fuzzers (stage 6), where
  # hostile offsets come in.
  # -Dbench=false: nothing runs the benchmarks here, and stage 2 builds them with -Werror
  # (~20 s of this stage on 2 cores).
  san="-g1 -fno-sanitize-recover=undefined -fno-sanitize=enum,vptr,pointer-overflow"
  CC=clang CXX=clang++ meson setup build-test-meson . -Dcuda=disabled -Doptimization=1 -Ddebug=false \
    -Dc_args="$san" -Dcpp_args="$san" \
    -Db_sanitize=address,undefined -Db_lundef=false -Dsingle_header=true -Dstructure_tests=false -Dbench=false >/dev/null
  meson compile -C build-test-meson -j "$jobs"
  # MALLOC_PERTURB_=0: meson would fill every allocation (the CPU tests' large buffers) with
  # a random byte pattern, which makes them 20x slower and tests nothing tessera relies on.
  # lavapipe keeps allocations LeakSanitizer cannot see (tests/vulkan/lsan.supp says which).
  # Large blocks are where ASan's time went (page faults, slow on a VM): quarantine_size_mb=16
  # (default 256): freed blocks still wait before reuse, but the tests' 130 MiB tensors pass
  # straight through instead of each new one being fresh pages (the Vulkan test 47 -> 17 s);
  # no_huge_pages_for_shadow=0: a block's shadow (1/8 of it, written at every malloc) may sit
  # on huge pages (a 64 MiB block 54 -> 15 ms; cpu_mul_mat 19 -> 12 s). Detection is the same.
  MALLOC_PERTURB_=0 TSR_JOBS=$jobs ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:quarantine_size_mb=16:no_huge_pages_for_shadow=0 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 LSAN_OPTIONS=suppressions=$PWD/tests/vulkan/lsan.supp \
    meson test -C build-test-meson --print-errorlogs --num-processes "$jobs" --timeout-multiplier 4 \
    $meson_skip_generated
fi

# Stage 6's build runs beside stages 4 and 5, on one job: it is one long compile (the
# instrumented implementation) that left a core idle for ~70 s when it ran in its own stage.
# At -O0 (TSR_FUZZ_OPT): 30 s of compile against 94, for 10-second runs that start from the
# seed corpora either way.
fuzz_build=""
fuzz_opt=${TSR_FUZZ_OPT:-0}
if want 6 && { want 4 || want 5; }; then
  echo
  echo "=== [$(( SECONDS - t_all ))s] fuzz targets: building in the background (build-fuzz.log)"
  (t=$SECONDS; TSR_JOBS=1 TSR_FUZZ_OPT=$fuzz_opt scripts/fuzz.sh --build-only && echo "fuzz targets built in $(( SECONDS - t ))s") \
    > build-fuzz.log 2>&1 &
  fuzz_build=$!
fi

if want 4; then
  stage "4. CMake + clang with ThreadSanitizer: threading tests"
  # -O1 -g1: two thirds of the compile time of -O2 -g (the implementation's one translation
  # unit is this stage's critical path); ThreadSanitizer sees the same accesses
  CC=clang CXX=clang++ cmake -S . -B build-test-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
    -DTSR_SANITIZE=thread -DTSR_BUILD_BENCH=OFF -DTSR_BUILD_EXAMPLES=OFF -DTSR_VULKAN=OFF -DTSR_CUDA=OFF >/dev/null
  cmake --build build-test-tsan -j"$jobs" --target test_cpu
  TSAN_OPTIONS=halt_on_error=1 ./build-test-tsan/tests/cpu/test_cpu '[threads]'
fi

if want 5; then
  stage "5. aarch64 cross build, NEON tests under qemu"
  scripts/test-aarch64.sh
fi

if want 6; then
  stage "6. fuzzers"
  if [ -n "$fuzz_build" ]; then
    if ! wait "$fuzz_build"; then
      cat build-fuzz.log
      echo "fuzz targets: the build failed"
      exit 1
    fi
    tail -n 1 build-fuzz.log
    scripts/fuzz.sh --no-build "${TSR_FUZZ_SECONDS:-10}"
  else
    TSR_FUZZ_OPT=$fuzz_opt scripts/fuzz.sh "${TSR_FUZZ_SECONDS:-10}"
  fi
fi

summary
trap - EXIT
echo "all stages passed"
