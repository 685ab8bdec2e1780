#!/usr/bin/env bash
# Fuzzes the archive loader with libFuzzer, each target for a bounded time:
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
# Targets: fuzz_load (whole archives), fuzz_program_json (program.json, with a
# structure-aware mutator), fuzz_weights (weight table and records); default all.
# Builds with clang and -fsanitize=fuzzer-no-link,address,undefined into
# build-fuzz/, starts from the committed seed corpora in fuzz/corpus/<target>/
# (copied, so the committed ones stay small), and fails if a target finds an
# input that crashes, trips a sanitizer or throws anything but a tdfx::Error.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:-60}"
shift || true
targets=("$@")
((${#targets[@]})) || targets=(fuzz_load fuzz_program_json fuzz_weights)
"$root/scripts/bootstrap.sh"
if ! dpkg-query -W -f='${Status}' clang libclang-rt-14-dev 2>/dev/null | grep -q "install ok installed"; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends clang libclang-rt-14-dev
fi
CC=clang CXX=clang++ cmake -S "$root" -B "$root/build-fuzz" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTDFX_FUZZ=ON -DTDFX_BUILD_TESTS=OFF -DTDFX_BUILD_BENCH=OFF
cmake --build "$root/build-fuzz" -j "$(nproc)" --target "${targets[@]}"
for target in "${targets[@]}"; do
  corpus="$root/build-fuzz/corpus/$target"
  mkdir -p "$corpus"
  cp -n "$root/fuzz/corpus/$target/"* "$corpus/"
  echo "== $target: ${seconds} s"
  ASAN_OPTIONS=detect_leaks=0 "$root/build-fuzz/bin/$target" -max_total_time="$seconds" \
    -rss_limit_mb=4096 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$root/build-fuzz/$target-" "$corpus"
done
