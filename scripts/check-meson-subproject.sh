#!/usr/bin/env bash
# Build tests/package/meson-consumer with tessera as a meson subproject, and run it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$root/tests/package/meson-consumer" "$work/proj"
cp -r "$root/tests/package/consumer" "$work/consumer"
mkdir -p "$work/proj/subprojects"
ln -s "$root" "$work/proj/subprojects/tessera"
meson setup "$work/build" "$work/proj" >/dev/null
meson compile -C "$work/build" >/dev/null
meson test -C "$work/build" --print-errorlogs
