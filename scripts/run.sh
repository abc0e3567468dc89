#!/usr/bin/env bash
# Quick start 1: build the model runner and run it on its embedded default model.
# Extra arguments go to tessera-run (e.g. -m model.gguf -p "Hello" -n 64).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target tsr_run -j"$(nproc)"
exec ./build/examples/tessera-run "$@"
