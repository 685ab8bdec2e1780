#!/usr/bin/env bash
# Installs the built tdfx into a temporary prefix, builds tests/consumer
# against it with find_package(tdfx), and runs it. Usage: run.sh BUILD_DIR
set -euo pipefail
build="$1"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > /dev/null
cmake -S "$here" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$work/build" > /dev/null
out="$("$work/build/consumer")"
echo "$out"
grep -q "call_module\[target=module\]" <<< "$out"
echo "consumer: 1 passed, 0 failed"
