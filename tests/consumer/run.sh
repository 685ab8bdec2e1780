#!/usr/bin/env bash
# Installs the built tdfx into a temporary prefix, builds tests/consumer
# against it with find_package(tdfx), and runs it. Usage: run.sh BUILD_DIR
set -euo pipefail
build="$1"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > /dev/null
# Every tdfx header an installed header includes is installed too (internal ones are not).
missing=""
while IFS= read -r line; do
  header="${line%%:*}"
  included="$(sed -E 's/.*[<"](tdfx\/[^>"]+)[>"].*/\1/' <<< "${line#*:}")"
  [ -f "$work/prefix/include/$included" ] || missing+="$header includes $included"$'\n'
done < <(grep -rE '^\s*#\s*include\s*[<"]tdfx/' "$work/prefix/include/tdfx")
if [ -n "$missing" ]; then
  echo "consumer: installed headers include headers that are not installed:" >&2
  echo "$missing" >&2
  exit 1
fi
cmake -S "$here" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$work/build" > /dev/null
# Its whole output against the one a real run wrote (TDFX_UPDATE_GOLDEN=1 rewrites it).
"$work/build/consumer" > "$work/consumer.txt"
if [ "${TDFX_UPDATE_GOLDEN:-0}" = 1 ]; then cp "$work/consumer.txt" "$here/expected.txt"; fi
diff -u "$here/expected.txt" "$work/consumer.txt"
# Only <tdfx/...> is on a consumer's include path: a component folder is not.
if cmake --build "$work/build" --target leak_check > "$work/leak.txt" 2>&1; then
  echo "consumer: \"graph/graph.h\" compiled without the tdfx/ prefix" >&2
  exit 1
fi
grep -q "graph/graph.h: No such file" "$work/leak.txt"
# A project that asks for the tracer component alone configures with ONNX disabled
# (find_package(tdfx) looks for it only for the onnx component), builds, and prints its
# traced graph.
cmake -S "$here/trace_only" -B "$work/trace_only" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_DISABLE_FIND_PACKAGE_ONNX=ON > /dev/null
cmake --build "$work/trace_only" > /dev/null
"$work/trace_only/trace_only" > "$work/trace_only.txt"
if [ "${TDFX_UPDATE_GOLDEN:-0}" = 1 ]; then cp "$work/trace_only.txt" "$here/trace_only/expected.txt"; fi
diff -u "$here/trace_only/expected.txt" "$work/trace_only.txt"
# The installed command needs only runtime packages: every library it loads is found without
# LD_LIBRARY_PATH, and none comes from a -dev package (or from the build tree).
installed_tdfx="$work/prefix/bin/tdfx"
libraries="$(env -i PATH=/usr/bin:/bin ldd "$installed_tdfx")"
if grep -q "not found" <<< "$libraries"; then
  echo "consumer: the installed tdfx cannot find libraries:" >&2
  grep "not found" <<< "$libraries" >&2
  exit 1
fi
while read -r library; do
  case "$library" in "$build"/* | "$work"/*) echo "consumer: tdfx loads $library" >&2; exit 1 ;; esac
  # dpkg knows a file by one of its names (/lib or /usr/lib); one it does not know is no -dev file.
  package="$({ dpkg -S "$library" || dpkg -S "$(readlink -f "$library")" || true; } 2> /dev/null |
    head -n 1 | cut -d: -f1)"
  if [[ "$package" == *-dev ]]; then
    echo "consumer: the installed tdfx loads $library from the build-time package $package" >&2
    exit 1
  fi
done < <(awk '$2 == "=>" && $3 ~ /^\// {print $3}' <<< "$libraries")
# The installed command, run from another folder with a bare environment, prints and writes
# what the build tree's does: it draws with the Graphviz plugins it links, and reads back the
# archive it wrote.
mkdir "$work/installed" "$work/built"
(cd "$work/installed" && env -i PATH=/usr/bin:/bin "$installed_tdfx" demo --out . > demo.txt)
(cd "$work/built" && "$build/bin/tdfx" demo --out . > demo.txt)
diff -u "$work/built/demo.txt" "$work/installed/demo.txt"
head -c 5 "$work/installed/trace_sequential.svg" | grep -q "<?xml"
"$work/prefix/bin/tdfx" show "$work/installed/trace_sequential.pt2" > "$work/installed/show.txt"
"$build/bin/tdfx" show "$work/built/trace_sequential.pt2" > "$work/built/show.txt"
diff -u "$work/built/show.txt" "$work/installed/show.txt"
echo "consumer: 5 passed, 0 failed"
