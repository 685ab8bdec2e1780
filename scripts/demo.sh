#!/usr/bin/env bash
# Installs what is missing, builds tdfx and runs the main job, `tdfx demo`:
# traces seed 002's pipeline, prints its graph and code, and writes
# trace_sequential.svg, the interactive page trace_sequential.html and
# trace_sequential.pt2 into the current folder.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/bootstrap.sh"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release
# Only what the main job runs: the libraries and the tdfx command (not tests or benchmarks).
cmake --build "$root/build" --target tdfx -j "$(nproc)"
"$root/build/bin/tdfx" demo --out .
