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

# No tdfx source outside export/torchscript.* names LibTorch's JIT (issue 36): the tracer
# records on the dispatcher, and <tdfx/tdfx.h> leaves TorchScript to its own header.
source_dir="$(cd "$(dirname "$0")/../.." && pwd)"
jit=$(cd "$source_dir" && grep -rn 'torch::jit\|torch/csrc/jit' --include='*.h' --include='*.cpp' \
        core tensordict graph tracer codegen viz diagram export onnx debug cli tdfx.h |
        grep -v '^export/torchscript\.' || true)
if [ -n "$jit" ]; then
  echo "tdfx sources outside export/torchscript.* use the JIT:"
  echo "$jit"
  exit 1
fi
echo "no tdfx source outside export/torchscript.* uses the JIT"
