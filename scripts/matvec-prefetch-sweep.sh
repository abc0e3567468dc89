#!/usr/bin/env bash
# The mat-vec kernels' software prefetch (kernels_avx2.inl: TSR_MATVEC_PREFETCH_AHEAD, the
# distance in bytes, 0 none; TSR_MATVEC_PREFETCH_COVER, how many lines a step prefetches)
# swept on this machine. Builds cpu_bench once per variant, runs `cpu_bench --matvec-only
# --rounds 1` of every build in turn, ROUNDS times (a drifting machine hits every build
# alike), and prints a Markdown table: per weight type and variant, the best mat-vec GB/s
# over the rounds divided by the best read of the same weights over the same rounds (both
# from the same runs: cpu_bench alternates them). Run it on a quiet machine: DRAM-bound
# timings mean nothing while other work shares the cores. Each build takes a minute or two
# and each cpu_bench --matvec-only run about three (it also allocates and fills the MoE
# rows' 2 GiB): the defaults, 6 variants x 2 rounds, take about 45 minutes on 2 cores.
# Usage: scripts/matvec-prefetch-sweep.sh [variants] [rounds] [work dir]
#   a variant: DISTANCE or DISTANCE/COVER (COVER 0: each kernel's own, 1: one line per whole
#   64 bytes of a step, 2: every line), e.g.
#   scripts/matvec-prefetch-sweep.sh "0 1024 2048 4096 2048/1 2048/2" 3 /tmp/tsr-sweep
set -euo pipefail
cd "$(dirname "$0")/.."
variants=${1:-"0 1024 2048 4096 2048/1 2048/2"}
rounds=${2:-2}
work=${3:-/tmp/tsr-prefetch-sweep}
mkdir -p "$work"
for v in $variants; do
  d=${v%/*}; c=0
  [[ $v == */* ]] && c=${v#*/}
  dir="$work/build-$d-$c"
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTSR_CUDA=OFF -DTSR_VULKAN=OFF \
    -DTSR_BUILD_TESTS=OFF -DTSR_BUILD_EXAMPLES=OFF -DTSR_BUILD_BENCH=ON \
    -DCMAKE_CXX_FLAGS="-DTSR_MATVEC_PREFETCH_AHEAD=$d -DTSR_MATVEC_PREFETCH_COVER=$c" >/dev/null
  cmake --build "$dir" -j"${TSR_JOBS:-$(nproc)}" --target cpu_bench >/dev/null
done
for r in $(seq 1 "$rounds"); do
  for v in $variants; do
    d=${v%/*}; c=0
    [[ $v == */* ]] && c=${v#*/}
    echo "round $r of $rounds: prefetch $d bytes ahead, cover $c" >&2
    "$work/build-$d-$c/tests/bench/cpu_bench" --matvec-only --rounds 1 --csv > "$work/r$r-$d-$c.csv"
  done
done
uptime
python3 - "$work" "$rounds" $variants <<'PY'
import re, sys
work, rounds, variants = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def key(v):
    d, _, c = v.partition("/")
    return d, c or "0"
best = {}  # (type, variant) -> [best mat-vec GB/s, best read of its weights GB/s]
types = []
for v in variants:
    d, c = key(v)
    for r in range(1, rounds + 1):
        for line in open(f"{work}/r{r}-{d}-{c}.csv"):
            m = re.match(r"mat-vec ([^,]+),([0-9.]+),[^,]*,[0-9.]+ x its weights' read \(([0-9.]+)\)", line)
            if not m: continue
            t, gbs, rd = m.group(1), float(m.group(2)), float(m.group(3))
            if t not in types: types.append(t)
            b = best.setdefault((t, v), [0.0, 0.0])
            b[0], b[1] = max(b[0], gbs), max(b[1], rd)
print(f"mat-vec / read of the same weights (mat-vec GB/s), best of {rounds} rounds each; cpu_bench --matvec-only, 2 threads\n")
print("| type | " + " | ".join(f"{key(v)[0]} B, cover {key(v)[1]}" for v in variants) + " |")
print("|---|" + "---:|" * len(variants))
for t in types:
    cells = []
    for v in variants:
        g, rd = best.get((t, v), [0.0, 0.0])
        cells.append(f"{g / rd:.3f} ({g:.1f})" if rd > 0 else "-")
    print(f"| {t} | " + " | ".join(cells) + " |")
PY
