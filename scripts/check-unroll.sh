#!/usr/bin/env bash
# Lists the CPU backend's loops that g++ -O2 leaves rolled and g++ -O2 -fpeel-loops (what
# -O3 adds) unrolls completely: the loops a user's -O2 build runs slower than our -O3 one.
# A kernel's loop in the list wants a TSR_UNROLL(N) (cpu_internal.inl says why);
# scalar references, one-time layout conversions and remainder loops may stay.
#
#   scripts/check-unroll.sh [g++ compiler, default g++] [extra flags...]
#   scripts/check-unroll.sh aarch64-linux-gnu-g++      # the NEON kernels
#
# Two compiles of the implementation (~40 s each, run side by side); prints file:line, the
# trip counts and the source line. Not part of scripts/test.sh: it reports, a person judges.
set -euo pipefail
cd "$(dirname "$0")/.."
cxx=${1:-g++}
shift || true
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
compile() {
  "$cxx" -std=c++17 -O2 "$@" -DNDEBUG -Iinclude -Ibackends/cpu -c tests/support/tessera_impl.cpp -o /dev/null
}
compile "${@}" -fopt-info-loop-optimized="$tmp/o2.txt" &
compile "${@}" -fpeel-loops -fopt-info-loop-optimized="$tmp/peel.txt" &
wait
unrolled() { grep "completely unrolled" "$1" | grep "^backends/cpu/" | sed 's/: optimized: loop with \([0-9]*\) iterations.*/ \1/' | sort -u; }
unrolled "$tmp/o2.txt" > "$tmp/o2.s"
unrolled "$tmp/peel.txt" > "$tmp/peel.s"
comm -23 "$tmp/peel.s" "$tmp/o2.s" | while read -r loc latch; do
  file=${loc%%:*}; rest=${loc#*:}; line=${rest%%:*}
  printf '%s:%s (%s iterations): %s\n' "$file" "$line" "$((latch + 1))" "$(sed -n "${line}p" "$file" | sed 's/^ *//' | cut -c1-90)"
done | sort -t: -k1,1 -k2,2n -u
