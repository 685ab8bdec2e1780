#!/usr/bin/env bash
# Installs what is missing (with the test-only packages: chromium), builds tdfx and runs
# every test with CTest.
# TDFX_SANITIZE=1 builds into build-asan with AddressSanitizer and UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh --test
build=build
args=(-DCMAKE_BUILD_TYPE=Release)
if [ "${TDFX_SANITIZE:-0}" = 1 ]; then
  build=build-asan
  args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DTDFX_SANITIZE=ON -DTDFX_BUILD_BENCH=OFF)
fi
cmake -S . -B "$build" "${args[@]}"
cmake --build "$build" -j "$(nproc)"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
