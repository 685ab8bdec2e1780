#!/usr/bin/env bash
# The tracer links no drawing library: trace_only (tdfx::tracer alone) runs, names no
# Graphviz, Pango or Cairo library among the libraries it needs, and holds no Graphviz code.
# And the recorder on the dispatcher holds no torch::jit.
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

# The recorder on the dispatcher, which is to replace LibTorch's JIT tracer, holds no torch::jit
# (issue 36: none will be left outside export/torchscript.*).
source_dir="$(cd "$(dirname "$0")/../.." && pwd)"
jit=$(grep -n 'torch::jit\|torch/csrc/jit' "$source_dir"/tracer/dispatch_recorder.* \
        "$source_dir"/tracer/dispatch_trace.* || true)
if [ -n "$jit" ]; then
  echo "the dispatcher recorder uses the JIT:"
  echo "$jit"
  exit 1
fi
echo "the dispatcher recorder holds no torch::jit"
