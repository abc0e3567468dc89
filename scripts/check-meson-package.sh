#!/usr/bin/env bash
# Consumer checks of tessera's meson build (CMake's own: tests/package/check_install.cmake).
#   a. tessera as a meson subproject (tests/package/meson-consumer): the consumer builds and
#      runs, and compiles no CUDA (the subproject's -Dcuda=auto means off);
#   b. meson install, into a prefix chosen at install time (--destdir), installs the same
#      headers and pkg-config files, byte for byte, as `cmake --install --prefix` of the
#      same tree (CMake installs its package files lib/cmake/tessera/*.cmake besides);
#   The pkg-config consumers (C++, C99, tessera-vulkan, from a moved prefix) are not built
#   again here: b shows meson installs CMake's headers and .pc files byte for byte, and
#   CMake's package test (check_install.cmake) builds them against those files. Each one
#   compiles the whole implementation, about 25 s of CPU in the sanitized CI stage.
# CC / CXX pick the compilers of every step; TSR_JOBS the build jobs (default 2).
# Usage: scripts/check-meson-package.sh [WORK_DIR]   (default: a temp dir, removed at exit)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -ge 1 ]; then
  work=$1
  rm -rf "$work"
  mkdir -p "$work"
  work=$(cd "$work" && pwd)
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
jobs=${TSR_JOBS:-2}
cxx=${CXX:-c++}
cc=${CC:-cc}
# run CMD...: quiet unless it fails
run() {
  if ! "$@" >"$work/last.log" 2>&1; then
    cat "$work/last.log"
    echo "FAILED: $*" >&2
    exit 1
  fi
}
fail() { echo "FAILED: $*" >&2; exit 1; }

echo "--- a. tessera as a meson subproject"
cp -r "$root/tests/package/meson-consumer" "$work/proj"
cp -r "$root/tests/package/consumer" "$work/consumer"
mkdir -p "$work/proj/subprojects"
ln -s "$root" "$work/proj/subprojects/tessera"
run meson setup "$work/sub-build" "$work/proj"
if grep -q 'tessera-cuda\.cu' "$work/sub-build/build.ninja"; then
  fail "the subproject consumer compiles tessera's CUDA library without asking for it"
fi
run meson compile -C "$work/sub-build" -j "$jobs"
run meson test -C "$work/sub-build" --print-errorlogs
echo "ok: built and ran the consumer, no CUDA compiled"

echo "--- b. meson install and cmake --install: the same files"
run meson setup "$work/meson-build" "$root" --prefix=/usr/local \
  -Dtests=false -Dexamples=false -Dbench=false -Dcuda=disabled
run meson install -C "$work/meson-build" --destdir "$work/meson-destdir"
run cmake -S "$root" -B "$work/cmake-build" -G Ninja \
  -DTSR_BUILD_TESTS=OFF -DTSR_BUILD_EXAMPLES=OFF -DTSR_BUILD_BENCH=OFF -DTSR_CUDA=OFF
run cmake --build "$work/cmake-build"
run cmake --install "$work/cmake-build" --prefix "$work/cmake-prefix"
mp=$work/meson-destdir/usr/local
(cd "$mp" && find . \( -type f -o -type l \) | sort) >"$work/meson.files"
(cd "$work/cmake-prefix" && find . \( -type f -o -type l \) -not -path './lib/cmake/tessera/*' | sort) >"$work/cmake.files"
diff -u "$work/cmake.files" "$work/meson.files" || fail "meson and CMake install different files (- CMake, + meson)"
diff -r "$work/cmake-prefix/include" "$mp/include" || fail "the installed headers differ"
diff -r "$work/cmake-prefix/share/pkgconfig" "$mp/share/pkgconfig" || fail "the installed .pc files differ"
echo "ok: $(grep -c '^./include/' "$work/meson.files") headers and $(grep -c '\.pc$' "$work/meson.files") .pc files, identical" \
     "(CMake only: $(cd "$work/cmake-prefix" && find lib/cmake/tessera -type f | wc -l) files in lib/cmake/tessera/)"
