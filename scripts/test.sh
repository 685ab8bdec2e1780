#!/usr/bin/env bash
# Installs what is missing (with the test-only packages: chromium), builds tdfx and runs
# every test with CTest, printing how long each phase took (`tdfx phase: …`), so that CI's log
# says where its time went.
# TDFX_SANITIZE=1 builds into build-asan with AddressSanitizer and UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
args=(-DCMAKE_BUILD_TYPE=Release)
if [ "${TDFX_SANITIZE:-0}" = 1 ]; then
  build=build-asan
  # -O1 -g1: enough for the sanitizers (line tables for their reports), and cheaper to compile
  # than -O2 -g, at which tests/export/test_nn_layers.cpp alone took over 15 minutes here.
  args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
        -DTDFX_SANITIZE=ON -DTDFX_BUILD_BENCH=OFF)
fi

phases=()
# Runs a phase ("$1", then the command) and notes its wall time.
phase() {
  local name=$1 start=$SECONDS
  shift
  "$@"
  phases+=("$(printf '%-10s %-10s %5d s' "$build" "$name" $((SECONDS - start)))")
  echo "tdfx phase: ${phases[-1]}"
}
total_start=$SECONDS

phase packages scripts/bootstrap.sh --test
phase configure cmake -S . -B "$build" "${args[@]}"
phase build cmake --build "$build" -j "$(nproc)"
phase tests ctest --test-dir "$build" --output-on-failure -j "$(nproc)"

echo "tdfx phases ($build, $((SECONDS - total_start)) s in all):"
printf '  %s\n' "${phases[@]}"
