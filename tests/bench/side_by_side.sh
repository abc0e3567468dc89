#!/usr/bin/env bash
# side_by_side.sh - tessera (run_bench) against llama.cpp (node-llama-cpp, run_llamacpp.mjs)
# on the same GGUF files, in pairs that alternate on one machine: each pair times tessera,
# then llama.cpp, each best of --rounds. One llama.cpp run of 41 and one of 46 tok/s happen
# on this kind of shared machine within minutes, so a single pair says little: the table
# gives each cell's per-pair ratios and their median. Not run by CI (llama.cpp is a
# benchmark reference, never a dependency).
#
#   tests/bench/side_by_side.sh [--pairs N (5)] [--rounds N (3)] [--models gpt2,llama1b (llama1b)]
#                               [--types q4_0,q8_0,... (q4_0)] [--dir DIR (/tmp/tsr-side-by-side)]
#                               [--run-bench PATH (build/tests/bench/run_bench)]
#                               [--llamacpp DIR (where `npm i -E node-llama-cpp@3.21.1` ran;
#                                                $NODE_LLAMA_CPP_DIR or /tmp/npmtest)]
# Writes the files once (run_bench --write-gguf: the weights run_bench times, seed 42; a file
# already in DIR is reused, so remove DIR after changing the random models), then times the
# pairs; 2 threads on both sides, prompt 128 in one batch, 16 generated.
# Each pair also reads 512 MiB as the mat-vec does (cpu_bench --read-only, next to run_bench)
# and gives each side's generation as a fraction of that read: the weights a token reads
# (run_bench's gen_weights_MB_per_token) times tokens per second. Where both sides are near
# 1.0, decoding is bound by the memory and neither can be much faster than the other.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
pairs=5 rounds=3 models=llama1b types=q4_0 dir=/tmp/tsr-side-by-side
run_bench=$ROOT/build/tests/bench/run_bench
npm_dir=${NODE_LLAMA_CPP_DIR:-/tmp/npmtest}
while [ $# -gt 0 ]; do
    case "$1" in
        --pairs) pairs=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --models) models=$2; shift 2 ;;
        --types) types=$2; shift 2 ;;
        --dir) dir=$2; shift 2 ;;
        --run-bench) run_bench=$2; shift 2 ;;
        --llamacpp) npm_dir=$2; shift 2 ;;
        *) awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0" >&2; exit 2 ;;  # the comment block above
    esac
done
[ -x "$run_bench" ] || { echo "side_by_side: no run_bench at $run_bench (build it, or --run-bench PATH)" >&2; exit 1; }
cpu_bench=$(dirname "$run_bench")/cpu_bench
[ -x "$cpu_bench" ] || { echo "side_by_side: no cpu_bench next to run_bench ($cpu_bench)" >&2; exit 1; }
[ -d "$npm_dir/node_modules/node-llama-cpp" ] || {
    echo "side_by_side: no node-llama-cpp in $npm_dir (mkdir -p $npm_dir && cd $npm_dir && npm i -E node-llama-cpp@3.21.1)" >&2; exit 1; }
mkdir -p "$dir"
# node resolves `import "node-llama-cpp"` from the importing file's folder (ES modules ignore
# NODE_PATH), so the timing script runs from the install's folder
cp "$ROOT/tests/bench/run_llamacpp.mjs" "$npm_dir/"

for m in ${models//,/ }; do
    for t in ${types//,/ }; do
        [ -f "$dir/tsr-$m-$t.gguf" ] || "$run_bench" --models "$m" --types "$t" --write-gguf "$dir" >/dev/null
    done
done

# the median of the arguments, and their range as "min-max"
med() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
rng() { printf '%s\n' "$@" | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%s-%s", lo, hi}'; }

echo "tessera (run_bench) against llama.cpp (node-llama-cpp 3.21.1), 2 threads, prompt 128, 16 generated;"
echo "$pairs pairs a cell, each side best of $rounds rounds; $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores"
echo
echo "| model | weights | tessera prompt | llama.cpp prompt | prompt ratio: median (range) | tessera gen | llama.cpp gen | gen ratio: median (range) | read (GB/s) | tessera gen reads x read | llama.cpp gen reads x read |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for m in ${models//,/ }; do
    for t in ${types//,/ }; do
        f=$dir/tsr-$m-$t.gguf
        tp=() tg=() lp=() lg=() rp=() rg=() rd=() ft=() fl=()
        for ((k = 0; k < pairs; ++k)); do
            r=$("$cpu_bench" --read-only --csv --threads 2 2>/dev/null | awk -F, '$1 == "read bandwidth" {print $2}' || true)
            [ -n "$r" ] || { echo "side_by_side: cpu_bench --read-only gave no read bandwidth" >&2; exit 1; }
            # the rates by their CSV header names, not positions
            row=$("$run_bench" --csv --models "$m" --types "$t" --rounds "$rounds" -t 2 2>/dev/null |
                  awk -F, 'NR == 1 {for (i = 1; i <= NF; ++i) col[$i] = i} NR == 2 {print $col["prompt_tok_s"], $col["gen_tok_s"], $col["gen_weights_MB_per_token"]}' || true)
            read -r a b mb <<< "$row"
            [ -n "${mb:-}" ] || { echo "side_by_side: run_bench gave no rates for $m $t" >&2; exit 1; }
            row=$(cd "$npm_dir" && UV_THREADPOOL_SIZE=1 node run_llamacpp.mjs --rounds "$rounds" "$f" | awk -F'|' '/\.gguf/ {print $3, $4}' || true)
            read -r c d <<< "$row"
            [ -n "${d:-}" ] || { echo "side_by_side: run_llamacpp.mjs gave no rates for $f" >&2; exit 1; }
            tp+=("$a") tg+=("$b") lp+=("$c") lg+=("$d") rd+=("$r")
            ft+=("$(awk -v x="$b" -v w="$mb" -v r="$r" 'BEGIN {printf "%.2f", x * w / 1e3 / r}')")
            fl+=("$(awk -v x="$d" -v w="$mb" -v r="$r" 'BEGIN {printf "%.2f", x * w / 1e3 / r}')")
            rp+=("$(awk -v x="$a" -v y="$c" 'BEGIN {printf "%.2f", x / y}')")
            rg+=("$(awk -v x="$b" -v y="$d" 'BEGIN {printf "%.2f", x / y}')")
            echo "  $m $t pair $((k + 1)): prompt $a / $c = ${rp[-1]}, generation $b / $d = ${rg[-1]};" \
                 "read $r GB/s, generation reads ${ft[-1]} / ${fl[-1]} x it ($mb MB a token)" >&2
        done
        echo "| $m | $t | $(med "${tp[@]}") | $(med "${lp[@]}") | $(med "${rp[@]}") ($(rng "${rp[@]}")) |" \
             "$(med "${tg[@]}") | $(med "${lg[@]}") | $(med "${rg[@]}") ($(rng "${rg[@]}")) |" \
             "$(med "${rd[@]}") | $(med "${ft[@]}") | $(med "${fl[@]}") |"
    done
done
