#!/usr/bin/env bash
# cuda-check.sh - build and run every CUDA check of tessera on a machine with a GPU, in one go:
#   1. build test_cuda, test_backend_ops and cuda_bench for sm_90 (CMake + Ninja -j16; if
#      configuring or building the whole tree fails, a direct nvcc/g++ build of just these),
#   2. run each Catch2 test case of test_cuda in its own process (a crash in one does not
#      stop the others): host checks, TF32, the 2-layer GPT-2-shaped graph, CUDA graph
#      capture, workspace reservation; then test_backend_ops (every op of the shared table
#      on CUDA and the CPU ISA paths against the CPU scalar path),
#   3. run cuda_bench (F16/F32/TF32 GEMM 8192^3, Q4_0/Q8_0 mat-vec weight bandwidth),
#   4. print one summary table. It never stops at the first failure.
#
# Run from the repository root:   bash tests/device/cuda-check.sh
# Env: CUDA_CHECK_ARCH (default 90), CUDA_CHECK_JOBS (default 16), OUT (logs copied there
#      when set), CATCH2_INCLUDE (a folder holding catch2/catch.hpp when the system has
#      none; build-cuda/deps is looked at too), CUDA_CHECK_QUICK=1 (small bench shapes),
#      CUDA_CHECK_SANITIZE=1 (each test under compute-sanitizer memcheck; works on
#      Firecracker machines, not on gVisor; slower), CUDA_CHECK_PREBUILT=folder (binaries
#      built on another machine: used when they load, else built here), CUDA_CHECK_BENCH=0
#      (tests only).
# Exit status: 0 when everything built and passed, 1 otherwise.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
ARCH=${CUDA_CHECK_ARCH:-90}
JOBS=${CUDA_CHECK_JOBS:-16}
B=${CUDA_CHECK_BUILD:-/tmp/tsr-cuda-check}
LOG=$B/logs
mkdir -p "$B" "$LOG"
T0=$(date +%s)
declare -a SUMMARY=()
FAILED=0
add_row() { SUMMARY+=("| $1 | $2 | $3 |"); }
elapsed() { echo $(( $(date +%s) - $1 ))s; }

echo "== environment"
nvidia-smi -L 2>&1 | head -4
nvcc --version 2>&1 | tail -1
g++ --version 2>&1 | head -1
cmake --version 2>&1 | head -1

# ---- Catch2 v2 header --------------------------------------------------------------------
CATCH_INC=""
for d in "${CATCH2_INCLUDE:-}" /usr/include /usr/local/include "$ROOT/build-cuda/deps"; do
    if [ -n "$d" ] && [ -f "$d/catch2/catch.hpp" ]; then CATCH_INC=$d; break; fi
done
if [ -z "$CATCH_INC" ]; then
    echo "!! no catch2/catch.hpp found (set CATCH2_INCLUDE or carry build-cuda/deps/catch2/catch.hpp)"
fi

# ---- build ------------------------------------------------------------------------------------
TEST_BIN=""; BENCH_BIN=""; OPS_BIN=""
build_cmake() {
    [ -n "$CATCH_INC" ] || return 1
    command -v cmake >/dev/null && command -v ninja >/dev/null || return 1
    # a minimal Catch2 package pointing at the header, for find_package(Catch2 2)
    mkdir -p "$B/catch2cfg"
    cat > "$B/catch2cfg/Catch2Config.cmake" <<EOF
if(NOT TARGET Catch2::Catch2)
  add_library(Catch2::Catch2 INTERFACE IMPORTED)
  set_target_properties(Catch2::Catch2 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "$CATCH_INC")
endif()
EOF
    cat > "$B/catch2cfg/Catch2ConfigVersion.cmake" <<'EOF'
set(PACKAGE_VERSION "2.13.10")
if(PACKAGE_FIND_VERSION_MAJOR EQUAL 2)
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
endif()
EOF
    cmake -S "$ROOT" -B "$B/cmake" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTSR_CUDA=ON -DTSR_VULKAN=OFF \
        -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DTSR_BUILD_EXAMPLES=OFF -DCatch2_DIR="$B/catch2cfg" \
        >"$LOG/cmake-configure.log" 2>&1 || { echo "cmake configure failed (see $LOG/cmake-configure.log):"; tail -15 "$LOG/cmake-configure.log"; return 1; }
    ninja -C "$B/cmake" -j"$JOBS" test_cuda test_backend_ops cuda_bench >"$LOG/cmake-build.log" 2>&1 \
        || { echo "ninja build failed (see $LOG/cmake-build.log):"; grep -m 20 -E 'error|Error' "$LOG/cmake-build.log"; return 1; }
    TEST_BIN=$(find "$B/cmake" -name test_cuda -type f -perm -u+x | head -1)
    BENCH_BIN=$(find "$B/cmake" -name cuda_bench -type f -perm -u+x | head -1)
    OPS_BIN=$(find "$B/cmake" -name test_backend_ops -type f -perm -u+x | head -1)
    [ -n "$TEST_BIN" ] && [ -n "$BENCH_BIN" ]
}
build_direct() {
    local D=$B/direct NVCC CUDA_HOME CUDA_LIB
    mkdir -p "$D"
    NVCC=$(command -v nvcc) || { echo "no nvcc"; return 1; }
    CUDA_HOME=$(dirname "$(dirname "$(readlink -f "$NVCC")")")
    CUDA_LIB=$CUDA_HOME/lib64
    [ -d "$CUDA_LIB" ] || CUDA_LIB=$CUDA_HOME/targets/x86_64-linux/lib
    local INC="-I$ROOT/include -I$ROOT/backends/cpu -I$ROOT/backends/cuda -I$ROOT/tests/support"
    [ -n "$CATCH_INC" ] && INC="$INC -I$CATCH_INC"
    local pids=() ok=1
    nvcc -std=c++17 -O3 -gencode=arch=compute_$ARCH,code=sm_$ARCH $INC -c backends/cuda/tessera-cuda.cu \
        -o "$D/tessera-cuda.o" >"$LOG/nvcc.log" 2>&1 & pids+=($!)
    g++ -std=c++17 -O2 $INC -I"$CUDA_HOME/include" -I"$CUDA_HOME/targets/x86_64-linux/include" -c tests/bench/cuda_bench.cpp \
        -o "$D/cuda_bench.o" >"$LOG/gxx-bench.log" 2>&1 & pids+=($!)
    if [ -n "$CATCH_INC" ]; then
        for f in tests/cuda/cuda_*_test.cpp tests/support/*.cpp; do  # support/ holds tessera_impl.cpp
            g++ -std=c++17 -O2 $INC -c "$f" -o "$D/$(basename "$f" .cpp).o" >"$LOG/gxx-$(basename "$f" .cpp).log" 2>&1 & pids+=($!)
        done
        for f in tests/backend_ops/*.cpp; do
            g++ -std=c++17 -O2 -DTSR_HAVE_CUDA $INC -c "$f" -o "$D/ops_$(basename "$f" .cpp).o" >"$LOG/gxx-ops_$(basename "$f" .cpp).log" 2>&1 & pids+=($!)
        done
    fi
    for p in "${pids[@]}"; do wait "$p" || ok=0; done
    if [ $ok = 0 ]; then echo "direct build: a compile failed:"; grep -h -m 10 error "$LOG"/nvcc.log "$LOG"/gxx-*.log; fi
    local LIBS="-L$CUDA_LIB -Wl,-rpath,$CUDA_LIB -lcudart -lcublas -lpthread"
    g++ -o "$D/cuda_bench" "$D/cuda_bench.o" "$D/tessera-cuda.o" $LIBS >"$LOG/link-bench.log" 2>&1 && BENCH_BIN=$D/cuda_bench
    if [ -n "$CATCH_INC" ]; then
        g++ -o "$D/test_cuda" "$D"/tessera_impl.o "$D"/cuda_*_test.o "$D"/catch_main.o "$D"/test_support.o "$D"/backend_support.o \
            "$D/tessera-cuda.o" $LIBS >"$LOG/link-test.log" 2>&1 && TEST_BIN=$D/test_cuda
        g++ -o "$D/test_backend_ops" "$D"/ops_*.o "$D"/tessera_impl.o "$D"/catch_main.o "$D"/test_support.o "$D"/backend_support.o \
            "$D/tessera-cuda.o" $LIBS >"$LOG/link-ops.log" 2>&1 && OPS_BIN=$D/test_backend_ops
    fi
    [ -n "$TEST_BIN" ] && [ -n "$BENCH_BIN" ]
}

# Binaries built elsewhere (CUDA_CHECK_PREBUILT=folder holding test_cuda, cuda_bench and
# test_backend_ops): used when they load here, which saves the device machine the build.
prebuilt_ok() {
    # (Catch2's listing exits with the number of tests: what counts is that it printed them)
    [ -x "$1/cuda_bench" ] && [ -n "$("$1/test_cuda" --list-test-names-only 2>/dev/null)" ]
}
echo "== build (sm_$ARCH, -j$JOBS)"
TB=$(date +%s)
if [ -n "${CUDA_CHECK_PREBUILT:-}" ] && prebuilt_ok "$CUDA_CHECK_PREBUILT"; then
    TEST_BIN=$CUDA_CHECK_PREBUILT/test_cuda; BENCH_BIN=$CUDA_CHECK_PREBUILT/cuda_bench
    [ -x "$CUDA_CHECK_PREBUILT/test_backend_ops" ] && OPS_BIN=$CUDA_CHECK_PREBUILT/test_backend_ops
    add_row "build" "prebuilt binaries from $CUDA_CHECK_PREBUILT" "0s"
elif build_cmake; then
    add_row "build (cmake + ninja)" "ok" "$(elapsed "$TB")"
else
    echo "-- falling back to a direct nvcc/g++ build"
    TB2=$(date +%s)
    if build_direct; then add_row "build (direct nvcc/g++; cmake path failed)" "ok" "$(elapsed "$TB2")"
    else add_row "build" "FAILED: test_cuda=${TEST_BIN:-missing} cuda_bench=${BENCH_BIN:-missing}" "$(elapsed "$TB")"; FAILED=1; fi
fi

# ---- tests: one process per test case ------------------------------------------------------
if [ -n "$TEST_BIN" ]; then
    echo "== test_cuda"
    "$TEST_BIN" --list-test-names-only 2>/dev/null | sed '/^$/d' > "$LOG/tests.txt"
    while IFS= read -r name; do
        TS=$(date +%s)
        safe=$(echo "$name" | tr -c 'A-Za-z0-9_\n' '_' | cut -c1-60)
        filter=${name//,/\\,}   # a comma separates test specs in Catch2's filter: escape it
        if [ "${CUDA_CHECK_SANITIZE:-0}" = 1 ] && command -v compute-sanitizer >/dev/null; then
            timeout "${CUDA_CHECK_TEST_TIMEOUT:-300}" compute-sanitizer --error-exitcode 3 "$TEST_BIN" "$filter" >"$LOG/test-$safe.log" 2>&1
        else
            timeout "${CUDA_CHECK_TEST_TIMEOUT:-300}" "$TEST_BIN" "$filter" >"$LOG/test-$safe.log" 2>&1
        fi
        rc=$?
        passed=$(grep -E 'assertions|test cases' "$LOG/test-$safe.log" | tail -1 | tr '|' '/')
        skipped=$(grep -c 'skipped:' "$LOG/test-$safe.log")
        if grep -q 'No test cases matched' "$LOG/test-$safe.log" || [ -z "$passed" ]; then
            [ $rc -eq 0 ] && rc=99   # the filter ran nothing: never report that as a pass
        fi
        if [ $rc -eq 0 ]; then
            st="pass"; [ "$skipped" -gt 0 ] && st="pass, $skipped skip WARN(s)"
            add_row "test: $name" "$st ($passed)" "$(elapsed "$TS")"
        else
            FAILED=1
            [ $rc -eq 124 ] && st="TIMEOUT" || st="FAIL rc=$rc"; [ $rc -eq 99 ] && st="NOT RUN (test filter matched nothing)"
            add_row "test: $name" "$st ($passed)" "$(elapsed "$TS")"
            echo "---- FAILED: $name (rc=$rc), first failures:"
            grep -B3 -A12 -m 4 -E 'FAILED|failed|fatal error|signal' "$LOG/test-$safe.log" | head -80
        fi
    done < "$LOG/tests.txt"
else
    add_row "tests" "NOT RUN (no test_cuda)" "-"
fi
if [ -n "$OPS_BIN" ]; then
    echo "== test_backend_ops"
    TS=$(date +%s)
    timeout 300 "$OPS_BIN" >"$LOG/test-backend_ops.log" 2>&1
    rc=$?
    grep -E '^backend_ops|^  closest|skipped:' "$LOG/test-backend_ops.log"
    passed=$(grep -E 'assertions|test cases' "$LOG/test-backend_ops.log" | tail -1 | tr '|' '/')
    if [ $rc -eq 0 ]; then
        add_row "test_backend_ops" "pass ($passed)" "$(elapsed "$TS")"
    else
        FAILED=1
        add_row "test_backend_ops" "FAIL rc=$rc ($passed)" "$(elapsed "$TS")"
        grep -B3 -A12 -m 4 -E 'FAILED|fatal error|signal' "$LOG/test-backend_ops.log" | head -80
    fi
else
    add_row "test_backend_ops" "NOT RUN (not built)" "-"
fi

# ---- benchmark --------------------------------------------------------------------------------
BENCH_OUT=""
if [ "${CUDA_CHECK_BENCH:-1}" = 0 ]; then
    add_row "cuda_bench" "skipped (CUDA_CHECK_BENCH=0)" "-"
elif [ -n "$BENCH_BIN" ]; then
    echo "== cuda_bench"
    TS=$(date +%s)
    QA=""; [ "${CUDA_CHECK_QUICK:-0}" = 1 ] && QA="--quick"
    timeout 240 "$BENCH_BIN" $QA >"$LOG/cuda_bench.md" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
        if grep -q WRONG "$LOG/cuda_bench.md"; then add_row "cuda_bench" "ran, some results WRONG (see table)" "$(elapsed "$TS")"; FAILED=1
        else add_row "cuda_bench" "ok" "$(elapsed "$TS")"; fi
    else
        add_row "cuda_bench" "FAIL rc=$rc" "$(elapsed "$TS")"; FAILED=1
    fi
    BENCH_OUT=$(cat "$LOG/cuda_bench.md")
else
    add_row "cuda_bench" "NOT RUN (not built)" "-"
fi

# ---- summary --------------------------------------------------------------------------------
echo
echo "== tessera CUDA check summary ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), total $(elapsed "$T0"))"
echo
echo "| step | result | time |"
echo "|---|---|---|"
for r in "${SUMMARY[@]}"; do echo "$r"; done
echo
[ -n "$BENCH_OUT" ] && echo "$BENCH_OUT"
if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ]; then
    tar -C "$B" -czf "$OUT/cuda-check-logs.tgz" logs 2>/dev/null
fi
exit $FAILED
