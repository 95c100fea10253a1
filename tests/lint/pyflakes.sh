#!/usr/bin/env bash
# pyflakes over every Python file of the project (*.py and scripts whose first line names
# python3; not build trees, nor the node_modules k8s/validate installs): unused imports,
# undefined names, a definition that hides another.
set -euo pipefail
cd "$(dirname "$0")/../.."
mapfile -t files < <(
    find . -path ./build -prune -o -path './build-*' -prune -o -path ./.git -prune -o -name node_modules -prune \
        -o -type f -print |
        while read -r f; do
            if [[ $f == *.py ]] || head -n1 "$f" 2>/dev/null | grep -q '^#!.*python3'; then echo "$f"; fi
        done | sort)
((${#files[@]} > 0)) || { echo "no Python files found" >&2; exit 1; }
pyflakes3 "${files[@]}"  # Debian's python3-pyflakes
echo "pyflakes: ${#files[@]} files clean"
