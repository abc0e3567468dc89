#!/usr/bin/env bash
# Device check for the GGUF layer and the model runner (needs a GPU machine; ~5 min).
# Builds test_gguf, tessera-run and run_bench with whatever GPU backends configure, then
#   1. test_gguf "[vulkan],[cuda]": tiny GPT-2 / LLaMA logits vs the double reference on GPU
#   2. tessera-run's embedded demo on each GPU backend
#   3. run_bench on each GPU backend (GPT-2 small + LLaMA 1.1B, F16/Q8_0/Q4_0)
# Output goes to stdout and, when $OUT is set, to $OUT/gpu-check-run.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
log=${OUT:-/tmp}/gpu-check-run.txt
exec > >(tee "$log") 2>&1
b=build-gpu-run
cmake -S . -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTSR_VULKAN=AUTO -DTSR_CUDA=AUTO >/dev/null || exit 1
cmake --build "$b" -j"$(nproc)" --target test_gguf tsr_run run_bench || exit 1
"$b/tests/gguf/test_gguf" "[vulkan],[cuda]" -s 2>&1 | grep -E "relative max error|skipped|passed|failed|FAILED" | sort | uniq
for be in vulkan cuda; do
  echo "=== tessera-run --backend $be"
  timeout 120 "$b/examples/tessera-run" --backend "$be" -n 32 2>&1 | tail -9
  echo "=== run_bench --backend $be"
  timeout 240 "$b/tests/bench/run_bench" --backend "$be" --types f16,q8_0,q4_0 --gen 32
done
