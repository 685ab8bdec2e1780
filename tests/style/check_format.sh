#!/usr/bin/env bash
# Every C++ file of the repository is as clang-format (.clang-format at the root) writes it:
# prints the files that are not, and fails. Usage: check_format.sh SOURCE_DIR
set -euo pipefail
cd "$1"
command -v clang-format > /dev/null || { echo "clang-format is missing (scripts/bootstrap.sh --test installs it)"; exit 1; }
unformatted=()
while IFS= read -r -d '' file; do
  clang-format --dry-run -Werror "$file" > /dev/null 2>&1 || unformatted+=("$file")
done < <(find . \( -path './build*' -o -path './.*' -o -path './fuzz/corpus' \) -prune -o \
              \( -name '*.cpp' -o -name '*.h' \) -type f -print0)
if ((${#unformatted[@]})); then
  echo "not clang-formatted (clang-format -i FILE):"
  printf '  %s\n' "${unformatted[@]}"
  exit 1
fi
echo "every C++ file is clang-formatted ($(clang-format --version))"
