#!/usr/bin/env bash
# Checks that a shared library loads into glibc MAX or newer: every
# versioned glibc symbol it imports is GLIBC_x.y <= MAX, and it imports
# nothing from libstdc++ / libgcc_s (both are linked in statically).
#   tests/check_glibc_versions.sh build/libltrace-bridge.so 2.28
# Prints each offending import and exits 1; silent and 0 when it is fine.
set -euo pipefail
lib=${1:?usage: check_glibc_versions.sh LIB MAX}
max=${2:-2.28}
command -v objdump >/dev/null || { echo "check_glibc_versions: objdump missing (binutils)" >&2; exit 2; }
out=$(objdump -T "$lib") || exit 2
bad=$(awk -v max="$max" '
  function newer(v, m,   a, b, i, x, y) {
    split(v, a, "."); split(m, b, ".")
    for (i = 1; i <= 3; i++) { x = a[i] + 0; y = b[i] + 0; if (x != y) return x > y }
    return 0
  }
  # Imports: "*UND*" lines; the version is the field before the name,
  # "(GLIBC_2.2.5)" for a hidden one.
  $0 ~ /\*UND\*/ {
    ver = $(NF - 1); gsub(/[()]/, "", ver)
    if (ver ~ /^GLIBC_[0-9.]+$/ && newer(substr(ver, 7), max)) print "  " $NF " needs " ver
    else if (ver ~ /^(GLIBCXX|CXXABI|GCC)_/) print "  " $NF " needs " ver " (libstdc++/libgcc must be static)"
  }' <<<"$out")
needed=$(objdump -p "$lib" | awk '$1 == "NEEDED" && $2 ~ /^(libstdc\+\+|libgcc_s)/ {print "  NEEDED " $2}')
if [ -n "$bad$needed" ]; then
  echo "$lib would not load into glibc $max:" >&2
  [ -n "$bad" ] && echo "$bad" >&2
  [ -n "$needed" ] && echo "$needed" >&2
  echo "pin the symbol's old version in torchbridge/glibc_compat.h (or define it in glibc_compat.cpp)" >&2
  exit 1
fi
