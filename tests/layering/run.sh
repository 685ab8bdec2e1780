#!/usr/bin/env bash
# The tracer links no drawing library: trace_only (tdfx::tracer alone) runs, names no
# Graphviz, Pango or Cairo library among the libraries it needs, and holds no Graphviz code.
# (ldd is no test: Debian's libtorch_cpu itself loads Cairo and Pango.)
set -euo pipefail
binary="$1"
"$binary" >/dev/null
needed=$(readelf -d "$binary" | grep NEEDED | grep -E 'lib(gvc|cgraph|cdt|pathplan|gvplugin|pango|cairo)' || true)
symbols=$(nm -C "$binary" | grep -E ' [TU] (gvContext|gvLayout|agopen|agmemread)\b' || true)
if [ -n "$needed$symbols" ]; then
  echo "trace_only links drawing code:"
  echo "$needed"
  echo "$symbols"
  exit 1
fi
echo "trace_only links no drawing library"
