#!/usr/bin/env bash
# Fuzzes the archive loader with libFuzzer for a bounded time (default 60 s):
#   scripts/fuzz.sh [SECONDS]
# Builds tdfx with clang and -fsanitize=fuzzer-no-link,address into build-fuzz/,
# seeds the corpus with a real archive (from export_module), and fails if the
# fuzzer finds an input that crashes or throws anything but tdfx::ArchiveError.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:-60}"
"$root/scripts/bootstrap.sh"
if ! dpkg-query -W -f='${Status}' clang libclang-rt-14-dev 2>/dev/null | grep -q "install ok installed"; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends clang libclang-rt-14-dev
fi
CC=clang CXX=clang++ cmake -S "$root" -B "$root/build-fuzz" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTDFX_FUZZ=ON -DTDFX_BUILD_TESTS=OFF -DTDFX_BUILD_BENCH=OFF
cmake --build "$root/build-fuzz" -j "$(nproc)" --target fuzz_load export_module
corpus="$root/build-fuzz/corpus"
mkdir -p "$corpus"
(cd "$corpus" && ASAN_OPTIONS=detect_leaks=0 "$root/build-fuzz/bin/export_module" > /dev/null && rm -f model.pt)
ASAN_OPTIONS=detect_leaks=0 "$root/build-fuzz/bin/fuzz_load" -max_total_time="$seconds" \
  -rss_limit_mb=4096 -artifact_prefix="$root/build-fuzz/" "$corpus"
