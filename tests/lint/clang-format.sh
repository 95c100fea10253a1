#!/usr/bin/env bash
# Every C++ file of the project is formatted as .clang-format says (Debian's clang-format-14).
# To fix: clang-format-14 -i FILE...
set -euo pipefail
cd "$(dirname "$0")/../.."
mapfile -t files < <(find src include tests bench -name '*.cpp' -o -name '*.hpp' | sort)
((${#files[@]} > 0)) || { echo "no C++ files found" >&2; exit 1; }
clang-format-14 --dry-run -Werror "${files[@]}"
echo "clang-format: ${#files[@]} files clean"
