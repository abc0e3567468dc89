#!/usr/bin/env bash
# Cross-compile the CPU backend tests and test_backend_ops (the NEON path against the
# scalar path on the shared op table) for aarch64 with CMake's toolchain file, and run
# them under qemu-user through ctest. Needs g++-aarch64-linux-gnu and qemu-user.
# Usage: scripts/test-aarch64.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=build-test-aarch64
# -O2 (CMake's Release: -O3): what most users build with, 20% less compile
cmake -S . -B "$out" -G Ninja --toolchain cmake/toolchain-aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" -DCMAKE_C_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DTSR_VULKAN=OFF -DTSR_CUDA=OFF -DTSR_BUILD_EXAMPLES=OFF -DTSR_BUILD_BENCH=OFF >/dev/null
cmake --build "$out" -j"${TSR_JOBS:-$(nproc)}" --target test_cpu test_backend_ops
ctest --test-dir "$out" --output-on-failure -j"${TSR_JOBS:-$(nproc)}" -R '^(cpu|cpu_mul_mat|cpu_mul_mat_quant|backend_ops)$'
