#!/bin/bash
# Fails when a C++ source of the project drifts from its .clang-format; the
# fix is `clang-format -i` on the files named.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cc' '*.h')
if [[ ${#files[@]} -eq 0 ]]; then
  echo "format_test: no sources found" >&2
  exit 1
fi
clang-format --dry-run -Werror "${files[@]}"
echo "format_test: ${#files[@]} files formatted as .clang-format says"
