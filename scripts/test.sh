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
  # -O1 -g1: enough for the sanitizers (line tables for their reports), and cheaper to compile
  # than -O2 -g, at which tests/export/test_nn_layers.cpp alone took over 15 minutes here.
  args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
        -DTDFX_SANITIZE=ON -DTDFX_BUILD_BENCH=OFF)
fi
cmake -S . -B "$build" "${args[@]}"
cmake --build "$build" -j "$(nproc)"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
