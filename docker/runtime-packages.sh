#!/bin/sh
# Prints the Debian packages that hold the shared libraries a binary needs,
# one a line: what the runtime image must install to run it.
#   sh docker/runtime-packages.sh build/berth
# Runs in the build stage, where the same libraries are installed (pulled in
# by the -dev packages), so the runtime list follows the build without a
# hand-kept copy. Fails if a library is missing or belongs to no package.
set -eu
binary="$1"
libs="$(ldd "$binary" | awk '/=> not found/ { print "MISSING " $1; next } /=> \// { print $3 }')"
case "$libs" in *MISSING*) echo "runtime-packages: $binary needs a library that is not installed:" >&2
                           echo "$libs" | grep MISSING >&2; exit 1 ;; esac
for lib in $libs; do
    # dpkg knows each file under the path its package ships it at; with
    # merged /usr the loader may report the other spelling, or a symlink.
    real="$(readlink -f "$lib")"
    package=""
    for candidate in "$lib" "$real" "/usr${lib#/usr}" "${lib#/usr}" "/usr${real#/usr}" "${real#/usr}"; do
        package="$(dpkg -S "$candidate" 2>/dev/null | head -n1 | cut -d: -f1)" && [ -n "$package" ] && break
    done
    if [ -z "$package" ]; then echo "runtime-packages: no package holds $lib" >&2; exit 1; fi
    echo "$package"
done | sort -u
