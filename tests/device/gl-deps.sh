# gl-deps.sh - sourced by the device scripts (vulkan-gpu-check.sh, gpu-check.sh): unpacks the
# .gl packages carried to the GPU machine and points the Vulkan loader at NVIDIA's driver.
# Runtime libraries (loader, GL/EGL bits) go into / as .library/device/README.md says;
# headers-only and development packages (libvulkan-dev, catch2) into $DEPS, so they cannot
# break the image. Sets DEPS (default /tmp/tsr-vkdeps) and, when unset, VK_DRIVER_FILES.
DEPS=${DEPS:-/tmp/tsr-vkdeps}
mkdir -p "$DEPS"
if ls .gl/*.deb >/dev/null 2>&1; then
    for f in .gl/*.deb; do
        case "$(basename "$f")" in
            *-dev_*|catch2_*) dpkg -x "$f" "$DEPS" ;;
            *) dpkg -x "$f" / ;;
        esac
    done
    ldconfig
else
    echo "warning: no .gl/*.deb carried; relying on the image's Vulkan loader and headers"
fi
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$ICD" ]; then export VK_DRIVER_FILES="$ICD"; fi
# A Catch2 test binary that runs here: its listing exits with the number of tests, so what
# counts is that it printed them (used to decide whether prebuilt binaries load).
catch2_binary_runs() { [ -x "$1" ] && [ -n "$("$1" --list-test-names-only 2>/dev/null)" ]; }
