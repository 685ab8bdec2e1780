#!/usr/bin/env bash
# Installs what is missing, builds tdfx and runs the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)"
build/bin/seed_model
