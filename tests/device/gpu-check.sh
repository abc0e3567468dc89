#!/usr/bin/env bash
# gpu-check.sh - every device check of tessera in one call of the device tool: the CUDA
# check (cuda-check.sh) and the Vulkan GPU check (vulkan-gpu-check.sh), run from binaries
# built on the developer's machine, so the lent GPU's minutes go to tests, not compiles.
# Each script falls back to building on the device machine when the binaries do not load.
#
# Prepare, here, in the repository root:
#   1. the .gl packages (Vulkan loader and headers, Catch2) as vulkan-gpu-check.sh says
#   2. bash tests/device/gpu-check.sh --prepare
#      (CMake + Ninja build in build-gpu: CUDA sm_90 + Vulkan; copies test_cuda,
#      test_backend_ops, cuda_bench, test_vulkan, vk_bench, run_bench and test_run to
#      .devbin, git-ignored, ~40 MB; with the files of scripts/llamacpp-quant-check.sh in
#      $TSR_LLAMACPP_DIR (/tmp/tsr-llamacpp-quant), 21 of them to .devbin/llamacpp, 6.4 MB:
#      the 256-wide LLaMA source's Q2_K, Q3_K_M, Q4_K_M, Q5_K_M, Q6_K and IQ4_NL, and the
#      64-wide one's every quantized ftype (llama.cpp's fallbacks: Q4_0 to Q8_0). The carry's
#      64 MiB hold that with the tracked tree (~13 MiB) and .gl (~2 MiB), not all 170 files)
# Then run it with the device tool:
#   run(command="bash tests/device/gpu-check.sh", carry=[".gl", ".devbin"], timeout_s=540)
# Last, when the checks are done, run_bench times the model runner's random GPT-2 small and
# 1.1B LLaMA with every layer on each GPU backend (GPU_CHECK_RUN_TYPES, GPU_CHECK_MODELS).
# Results: printed, and under $OUT (cuda-check-logs.tgz, vulkan-gpu.log, vk_bench.md).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
BIN=$ROOT/.devbin

if [ "${1:-}" = --prepare ]; then
    set -e
    cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DTSR_CUDA=ON -DTSR_VULKAN=ON \
        -DCMAKE_CUDA_ARCHITECTURES="${CUDA_CHECK_ARCH:-90}" -DTSR_BUILD_EXAMPLES=OFF >/dev/null
    ninja -C build-gpu test_cuda test_backend_ops cuda_bench test_vulkan vk_bench run_bench test_run
    grep -qx '/.devbin/' .git/info/exclude 2>/dev/null || echo /.devbin/ >> .git/info/exclude
    mkdir -p "$BIN"
    rm -rf "$BIN/llamacpp"
    for f in tests/cuda/test_cuda tests/backend_ops/test_backend_ops tests/bench/cuda_bench \
             tests/vulkan/test_vulkan tests/bench/vk_bench tests/bench/run_bench tests/run/test_run; do
        cp "build-gpu/$f" "$BIN/"
    done
    strip "$BIN"/*
    # llama.cpp-quantized files for the GPUs (the subset above)
    qdir=${TSR_LLAMACPP_DIR:-/tmp/tsr-llamacpp-quant}
    if ls "$qdir"/q-*-src-llama-256.gguf > /dev/null 2>&1; then
        mkdir -p "$BIN/llamacpp"
        for f in "$qdir"/q-{Q2_K,Q3_K_M,Q4_K_M,Q5_K_M,Q6_K,IQ4_NL}-src-llama-256.gguf "$qdir"/q-*-src-llama-64.gguf; do
            case $f in *-F16-*|*-BF16-*) continue ;; esac
            if [ -f "$f" ]; then cp "$f" "$BIN/llamacpp/"; fi
        done
    else
        echo "no llama.cpp files in $qdir (scripts/llamacpp-quant-check.sh makes them): [llamacpp-files] will not run on the GPU"
    fi
    du -sh "$BIN" "$BIN/llamacpp" 2>/dev/null
    exit 0
fi

T0=$(date +%s)
OUT=${OUT:-/tmp/tsr-gpu-out}
mkdir -p "$OUT"
# the Vulkan loader, headers and Catch2 (the fallback builds need them), the NVIDIA driver
# file: the CUDA check's test_backend_ops runs Vulkan too
. tests/device/gl-deps.sh
# cuBLAS: the image's CUDA toolkit, else the pip wheel next to its PyTorch
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
         "$(python3 -c 'import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__) + "/lib")' 2>/dev/null)"; do
    if [ -n "$d" ] && ls "$d"/libcublas.so.* >/dev/null 2>&1; then
        export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; break
    fi
done
echo "== gpu-check: LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-} VK_DRIVER_FILES=${VK_DRIVER_FILES:-}"
if [ -d "$BIN" ]; then
    missing=$(ldd "$BIN"/* 2>&1 | grep 'not found' | sort -u)
    [ -n "$missing" ] && echo "prebuilt binaries miss libraries here:" && echo "$missing"
fi

status=0
# GPU_CHECK_BENCH=0: the tests alone (no cuda_bench, vk_bench, run_bench)
CUDA_CHECK_BENCH=${GPU_CHECK_BENCH:-1} CUDA_CHECK_PREBUILT=$BIN CATCH2_INCLUDE=$DEPS/usr/include CUDA_CHECK_TEST_TIMEOUT=${CUDA_CHECK_TEST_TIMEOUT:-120} \
    timeout "${GPU_CHECK_CUDA_TIMEOUT:-330}" bash tests/device/cuda-check.sh || status=1
echo
echo "== [$(( $(date +%s) - T0 ))s] Vulkan GPU check"
# test_backend_ops ran every backend in the CUDA check already: here only its Vulkan case
VK_CHECK_BENCH=${GPU_CHECK_BENCH:-1} VK_CHECK_PREBUILT=$BIN VK_CHECK_OPS_ARGS='[vulkan]' OUT=$OUT \
    timeout "${GPU_CHECK_VULKAN_TIMEOUT:-240}" bash tests/device/vulkan-gpu-check.sh || status=1
if [ -x "$BIN/test_run" ] && ls "$BIN"/llamacpp/q-*.gguf > /dev/null 2>&1; then
    echo
    echo "== [$(( $(date +%s) - T0 ))s] files quantized by llama.cpp on CPU, CPU_REPACK, Vulkan and CUDA"
    TSR_LLAMACPP_DIR=$BIN/llamacpp timeout "${GPU_CHECK_LLAMACPP_TIMEOUT:-120}" "$BIN/test_run" "model: files quantized by llama.cpp equal the reference" \
        > "$OUT/llamacpp-files.log" 2>&1
    rc=$?
    grep -E " CUDA +rel\. error" "$OUT/llamacpp-files.log"
    if [ $rc = 0 ]; then tail -2 "$OUT/llamacpp-files.log"; else status=1; echo "test_run (llama.cpp files): exit status $rc"; tail -60 "$OUT/llamacpp-files.log"; fi
fi
if [ -x "$BIN/run_bench" ] && [ "${GPU_CHECK_BENCH:-1}" != 0 ]; then
    for backend in cuda vulkan; do
        echo
        echo "== [$(( $(date +%s) - T0 ))s] run_bench on $backend, every layer on the GPU"
        timeout "${GPU_CHECK_RUN_TIMEOUT:-120}" "$BIN/run_bench" --backend $backend --ngl all --rounds 2 -t 8 \
            --models "${GPU_CHECK_MODELS:-gpt2,llama1b}" --types "${GPU_CHECK_RUN_TYPES:-f16,q8_0,q4_0,q4_K_M}" \
            | tee "$OUT/run_bench_$backend.md" || echo "run_bench on $backend: exit status ${PIPESTATUS[0]}"
    done
fi
echo "== gpu-check done in $(( $(date +%s) - T0 )) s, status $status"
exit $status
