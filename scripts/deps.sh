#!/usr/bin/env bash
# Install the Debian 12 packages tessera's build, tests and CI need, when missing.
# Safe to run repeatedly; installs only what is absent. Needs root or sudo.
set -euo pipefail
pkgs=(cmake ninja-build g++ clang libclang-rt-14-dev catch2 meson pkg-config
      libvulkan-dev mesa-vulkan-drivers glslc spirv-tools
      g++-aarch64-linux-gnu qemu-user python3
      unicode-data)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
