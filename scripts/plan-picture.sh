#!/usr/bin/env bash
# The README's plan picture (docs/plan-unet.svg) is generated: tessera-plan-viewer's
# U-Net-style graph in the builder's order and in the optimised order.
#
#   scripts/plan-picture.sh VIEWER           regenerate docs/plan-unet.svg
#   scripts/plan-picture.sh VIEWER --check   fail if it is not what VIEWER draws now
#
# VIEWER: a built tessera-plan-viewer (e.g. build/examples/tessera-plan-viewer). The
# CMake and meson builds run the check as the test plan_picture_current.
set -euo pipefail
viewer=${1:?usage: scripts/plan-picture.sh VIEWER [--check]}
root="$(cd "$(dirname "$0")/.." && pwd)"
picture="$root/docs/plan-unet.svg"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$viewer" --graph unet --out "$tmp/plan-unet" >/dev/null
if [ "${2:-}" = "--check" ]; then
  if ! cmp -s "$tmp/plan-unet.svg" "$picture"; then
    echo "docs/plan-unet.svg is not current: run scripts/plan-picture.sh $viewer" >&2
    diff "$picture" "$tmp/plan-unet.svg" | head -20 >&2 || true
    exit 1
  fi
  echo "docs/plan-unet.svg is current"
else
  cp "$tmp/plan-unet.svg" "$picture"
  echo "wrote $picture"
fi
