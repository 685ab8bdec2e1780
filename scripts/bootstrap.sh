#!/usr/bin/env bash
# Installs the Debian 12 packages tdfx needs to build, test and benchmark.
# Idempotent: packages already present are left alone, and the package lists
# are refreshed only when something is missing.
set -euo pipefail

packages=(
  cmake g++ make pkg-config ccache
  libtorch-dev libopenblas0-pthread   # LibTorch; OpenBLAS: the reference BLAS is ~4x slower
  libfmt-dev                          # formatting (the same fmt libtorch links)
  libgraphviz-dev graphviz            # cgraph + gvc for diagrams
  doctest-dev libbenchmark-dev        # tests, benchmarks
  nlohmann-json3-dev                  # archive metadata
  libcli11-dev                        # the tdfx command's argument parser
  python3-torch                       # torch.fx 1.13: the reference the tests compare against
  python3-tabulate                    # torch.fx's print_tabular: the reference of test_tabular
                                      # and of tests/python/test_loader.py
)

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
