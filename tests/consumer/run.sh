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
# The installed command, run from another folder: it draws with the Graphviz plugins it
# links, and reads back the archive it wrote.
mkdir "$work/run"
(cd "$work/run" && "$work/prefix/bin/tdfx" demo --out . > demo.txt)
grep -q "^graph():" "$work/run/demo.txt"
head -c 5 "$work/run/"*.svg | grep -q "<?xml\|<svg"
"$work/prefix/bin/tdfx" show "$(ls "$work/run/"*.pt2 | head -1)" > /dev/null
echo "consumer: 2 passed, 0 failed"
