#!/usr/bin/env bash
# Build and run the Vulkan backend's tests (test_vulkan, and test_backend_ops: every op of
# the shared table against the CPU scalar path) and vk_bench on the device tool's GPU machine
# (NVIDIA H200). Uses nothing from the network: cmake, ninja and a C++ compiler are in the
# machine's image; the Vulkan loader, headers and Catch2 come as .deb files carried in .gl.
#
# Prepare once, here, in the repository root (see .library/device/README.md):
#   echo /.gl/ >> .git/info/exclude; mkdir -p .gl /tmp/amd64/partial
#   o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
#   apt-get $o update
#   (cd .gl && apt-get $o download libvulkan1 libvulkan-dev catch2 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
# Then run it with the device tool, carrying .gl:
#   run(command="bash tests/device/vulkan-gpu-check.sh", carry=[".gl"], timeout_s=420)
# Results (also printed): $OUT/vulkan-gpu.log, $OUT/vk_bench.md, $OUT/vk_bench.csv (VK_CHECK_CSV=1).
# Takes about 2-3 minutes (most of it compiling the one implementation TU).
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
OUT="${OUT:-/tmp/tsr-vulkan-gpu-out}"
mkdir -p "$OUT"
LOG="$OUT/vulkan-gpu.log"
DEPS=/tmp/tsr-vkdeps
BUILD=/tmp/tsr-build-vulkan-gpu
exec > >(tee "$LOG") 2>&1
echo "== vulkan-gpu-check $(date -u +%FT%TZ) on $(uname -n)"

. tests/device/gl-deps.sh   # the .gl packages, DEPS, VK_DRIVER_FILES
echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-<default>}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true

VK_LIB="$(ldconfig -p | sed -n 's/.*libvulkan\.so\.1 (libc6,x86-64) => \(.*\)/\1/p' | head -1)"
VK_INC=/usr/include
[ -f "$DEPS/usr/include/vulkan/vulkan.h" ] && VK_INC="$DEPS/usr/include"
if [ -z "$VK_LIB" ] || [ ! -f "$VK_INC/vulkan/vulkan.h" ]; then
    echo "error: Vulkan loader ($VK_LIB) or headers ($VK_INC/vulkan/vulkan.h) missing: carry libvulkan1 and libvulkan-dev in .gl"
    exit 2
fi
CATCH_ARGS=()
[ -d "$DEPS/usr/lib/cmake/Catch2" ] && CATCH_ARGS=(-DCatch2_DIR="$DEPS/usr/lib/cmake/Catch2")
CXXFLAGS_EXTRA="-I$DEPS/usr/include"

t0=$(date +%s)
# VK_CHECK_PREBUILT=folder holding test_vulkan, test_backend_ops and vk_bench built
# elsewhere: used when they load here (saves the device machine the build).
PRE="${VK_CHECK_PREBUILT:-}"
if [ -n "$PRE" ] && [ -x "$PRE/test_backend_ops" ] && [ -x "$PRE/vk_bench" ] && catch2_binary_runs "$PRE/test_vulkan"; then
    echo "== prebuilt binaries from $PRE"
    TEST_VULKAN="$PRE/test_vulkan"; TEST_OPS="$PRE/test_backend_ops"; VK_BENCH="$PRE/vk_bench"
else
[ -n "$PRE" ] && echo "== prebuilt binaries in $PRE do not load here: building"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTSR_VULKAN=ON -DTSR_CUDA=OFF \
    -DTSR_BUILD_EXAMPLES=OFF -DTSR_BUILD_TESTS=ON -DTSR_BUILD_BENCH=ON \
    -DVulkan_INCLUDE_DIR="$VK_INC" -DVulkan_LIBRARY="$VK_LIB" -DCMAKE_CXX_FLAGS="$CXXFLAGS_EXTRA" \
    "${CATCH_ARGS[@]}" >"$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; echo "error: cmake configure failed"; exit 3; }
ninja -C "$BUILD" -j"$(nproc)" test_vulkan test_backend_ops vk_bench || { echo "error: build failed"; exit 4; }
echo "== built in $(( $(date +%s) - t0 )) s"
TEST_VULKAN="$BUILD/tests/vulkan/test_vulkan"; TEST_OPS="$BUILD/tests/backend_ops/test_backend_ops"
VK_BENCH="$BUILD/tests/bench/vk_bench"
fi

status=0
echo "== test_vulkan"
timeout 240 "$TEST_VULKAN" || status=$?
echo "== test_vulkan exit status $status"
echo "== test_backend_ops"
ops_status=0
timeout 240 "$TEST_OPS" ${VK_CHECK_OPS_ARGS:-} || ops_status=$?
echo "== test_backend_ops exit status $ops_status"
[ $status -eq 0 ] && status=$ops_status
if [ "${VK_CHECK_BENCH:-1}" != 0 ]; then   # VK_CHECK_BENCH=0: tests only
    echo "== vk_bench"
    timeout 120 "$VK_BENCH" | tee "$OUT/vk_bench.md"
    # the CSV is a second full run (~85 s on an H200): only on request
    [ "${VK_CHECK_CSV:-0}" = 1 ] && { timeout 120 "$VK_BENCH" --csv > "$OUT/vk_bench.csv" || true; }
fi
echo "== done in $(( $(date +%s) - t0 )) s, test status $status"
exit $status
