#!/usr/bin/env bash
# llamacpp-quant-check.sh - tessera on files made by llama.cpp's own quantizer. Writes small
# F32 GPT-2 / LLaMA / Qwen2 / Qwen3 / Qwen3-MoE models (test_run "[llamacpp-sources]"),
# quantizes each in every ftype with llama_model_quantize from node-llama-cpp's prebuilt
# libraries (scripts/llamacpp_quantize.py), then runs test_run "[llamacpp-files]" on the
# results: tessera's dequantization of every tensor against ggml's dequantize_row_* bit for
# bit, the runner's logits and greedy picks against the float64 reference on the files'
# weights (CPU, CPU_REPACK, Vulkan), the Q4_K_M / Q5_K_M mixes' types against llama.cpp's;
# and test_core "[llamacpp-quantizers]": tsr_quantize_chunk against ggml_quantize_chunk on
# the same rows. Not run by CI (llama.cpp is a reference, never a dependency); needs network
# once, for npm.
#
#   scripts/llamacpp-quant-check.sh [--build DIR (build)] [--dir DIR (/tmp/tsr-llamacpp-quant)]
#                                   [--llamacpp DIR ($NODE_LLAMA_CPP_DIR or /tmp/npmtest)]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
build=$ROOT/build dir=/tmp/tsr-llamacpp-quant npmdir=${NODE_LLAMA_CPP_DIR:-/tmp/npmtest}
while [ $# -gt 0 ]; do
    case "$1" in
        --build) build=$2; shift 2 ;;
        --dir) dir=$2; shift 2 ;;
        --llamacpp) npmdir=$2; shift 2 ;;
        *) echo "usage: $0 [--build DIR] [--dir DIR] [--llamacpp DIR]" >&2; exit 2 ;;
    esac
done
libdir=$npmdir/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
if ! ls "$libdir"/libllama*.so > /dev/null 2>&1; then
    mkdir -p "$npmdir"
    (cd "$npmdir" && npm i -E node-llama-cpp@3.21.1 > /dev/null)
fi
test_run=$build/tests/run/test_run
[ -x "$test_run" ] || { echo "no $test_run: build first (cmake -S . -B build && cmake --build build)" >&2; exit 1; }
rm -rf "$dir" && mkdir -p "$dir"
TSR_LLAMACPP_DIR=$dir "$test_run" "[llamacpp-sources]" > "$dir/sources.log" || { cat "$dir/sources.log"; exit 1; }
ftypes="Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K IQ4_NL F16 BF16"
for src in "$dir"/src-*.gguf; do
    for f in $ftypes; do
        out=$dir/q-$f-$(basename "$src" .gguf)  # q-<ftype>-src-<arch>-<width>: the test finds the source by name
        LD_LIBRARY_PATH=$libdir python3 "$ROOT/scripts/llamacpp_quantize.py" "$libdir" "$src" "$out.gguf" "$f" > "$out.log" 2>&1 ||
            { cat "$out.log"; exit 1; }
    done
done
TSR_LLAMACPP_DIR=$dir TSR_LLAMACPP_LIBDIR=$libdir "$test_run" "[llamacpp-files]"
TSR_LLAMACPP_LIBDIR=$libdir "$build/tests/core/test_core" "[llamacpp-quantizers]"
