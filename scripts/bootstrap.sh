#!/usr/bin/env bash
# Installs the Debian 12 packages tdfx needs to build, test and benchmark;
# `--test` adds those only the tests need (scripts/test.sh passes it, the
# main job does not). Idempotent: packages already present are left alone,
# and the package lists are refreshed only when something is missing.
#   scripts/bootstrap.sh [--test]
set -euo pipefail

with_tests=0
case "${1:-}" in
  "") ;;
  --test) with_tests=1 ;;
  *) echo "usage: $0 [--test]" >&2; exit 2 ;;
esac

packages=(
  cmake g++ make pkg-config ccache
  libtorch-dev libopenblas0-pthread   # LibTorch; OpenBLAS: the reference BLAS is ~4x slower
  libfmt-dev                          # formatting (the same fmt libtorch links)
  libgraphviz-dev graphviz            # cgraph + gvc for diagrams
  doctest-dev libbenchmark-dev        # tests, benchmarks
  nlohmann-json3-dev                  # archive metadata
  libcli11-dev                        # the tdfx command's argument parser
  libonnx-dev                         # ONNX 1.12: tdfx::onnx writes and checks models
  python3-torch                       # torch.fx 1.13: the reference the tests compare against
  python3-tabulate                    # torch.fx's print_tabular: the reference of test_tabular
                                      # and of tests/python/test_loader.py
)
test_packages=(
  chromium                            # headless: the interactive page's test (tests/viz/browser_page.py)
  python3-onnx                        # checks test_onnx's models from Python too
  protobuf-compiler python3-protobuf  # test_debug reads TensorBoard event files apart from tdfx
  clang-format                        # test_format: every C++ file as .clang-format writes it
  doxygen                             # test_api_reference: docs/Doxyfile, warnings as errors
)
if ((with_tests)); then
  packages+=("${test_packages[@]}")
  # Node.js runs ONNX Runtime in test_onnx; a machine that has it (Debian's or NodeSource's)
  # keeps its own, as Debian's npm package would conflict with NodeSource's nodejs.
  command -v node > /dev/null && command -v npm > /dev/null || packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# ONNX Runtime for test_onnx, from the npm registry into .deps/ (git-ignored): its CPU library
# ships in the package; without the flag its install script downloads GPU binaries.
ort_version=1.20.1
ort_dir="$(cd "$(dirname "$0")/.." && pwd)/.deps/onnxruntime"
if ((with_tests)) && [ ! -f "$ort_dir/node_modules/onnxruntime-node/package.json" ]; then
  mkdir -p "$ort_dir"
  npm install --prefix "$ort_dir" --no-audit --no-fund --silent \
    --onnxruntime-node-install-cuda=skip "onnxruntime-node@$ort_version"
fi
