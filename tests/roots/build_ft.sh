#!/usr/bin/env bash
# Builds (once, then cached) the free-threaded CPython 3.14t from Debian's
# source package of python3.14 (sid), for the free-threaded layout tests:
#   --disable-gil --enable-shared: the interpreter lives in
#   lib/libpython3.14t.so, bin/python3.14t is linked against it (rpath).
# No PGO/LTO, no test run.  Only the upstream tarball is used (not Debian's
# patches).  The sid deb-src index lives in a private apt state directory:
# the host's apt sources, lists and caches are left alone.
# $LTRACE_CPYTHON_SRC (an upstream Python-3.14.x tarball or unpacked tree)
# replaces the Debian download, for a mirror without python3.14's source.
# Prints the prefix.  The cache lives in $LTRACE_CPYTHON_CACHE (default
# /var/cache/ltrace-bpf/cpython) and is keyed by this script's recipe
# version: change RECIPE to rebuild.
set -euo pipefail
cache=${LTRACE_CPYTHON_CACHE:-/var/cache/ltrace-bpf/cpython}
RECIPE=1
mirror=${LTRACE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
name=cpython-3.14t
prefix=$cache/$name
stamp=$prefix/.ltrace-cpython-recipe
jobs=${LTRACE_BUILD_JOBS:-2}

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$RECIPE" ]; then echo "$prefix"; exit 0; fi

mkdir -p "$cache"
exec 9>"$cache/.$name.lock"
flock 9
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$RECIPE" ]; then echo "$prefix"; exit 0; fi

# Build dependencies from the host's own suite; only the missing ones.
deps="build-essential pkg-config xz-utils libffi-dev zlib1g-dev libssl-dev libbz2-dev liblzma-dev libexpat1-dev"
missing=
for p in $deps; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  echo "cpython: installing$missing" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi

# configure bakes the prefix into the install (sysconfig), so it gets the
# final path; `make install DESTDIR=.tmp` stages it and a rename publishes it.
work=$cache/$name.build
tmp=$cache/$name.tmp
log=$cache/$name.log
rm -rf "$work" "$tmp"
mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial" "$work/src"
: >"$log"

if [ -n "${LTRACE_CPYTHON_SRC:-}" ]; then
  if [ -d "$LTRACE_CPYTHON_SRC" ]; then
    srcdir=$(cd "$LTRACE_CPYTHON_SRC" && pwd)
  else
    tar -C "$work/src" -xf "$LTRACE_CPYTHON_SRC"
    srcdir=$(ls -d "$work"/src/Python-3.14* | head -n 1)
  fi
else
  # Private apt state: sid's deb-src index only.
  echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror sid main" \
    >"$work/apt/sources.list"
  apt_priv=(-o Dir::Etc::sourcelist="$work/apt/sources.list" -o Dir::Etc::sourceparts=-
    -o Dir::State::Lists="$work/apt/lists" -o Dir::Cache="$work/apt/cache"
    -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o APT::Get::List-Cleanup=0)
  echo "cpython: fetching python3.14 source from sid (once; cached in $cache)" >&2
  apt-get "${apt_priv[@]}" update >>"$log" 2>&1 ||
    { echo "cpython: apt-get update (private sid deb-src) failed, see $log" >&2; exit 1; }
  (cd "$work/src" && apt-get "${apt_priv[@]}" source --download-only python3.14) >>"$log" 2>&1 ||
    { echo "cpython: apt-get source python3.14 failed (a mirror without the source files?" \
        "LTRACE_CPYTHON_SRC=<Python-3.14.x tarball> replaces it), see $log" >&2; exit 1; }
  orig=$(ls "$work"/src/python3.14_*.orig.tar.* | grep -v '\.asc$' | head -n 1)
  tar -C "$work/src" -xf "$orig"
  srcdir=$(ls -d "$work"/src/Python-3.14* | head -n 1)
fi
version=$(sed -nE 's/^#define PY_VERSION[[:space:]]+"([^"]+)".*/\1/p' "$srcdir/Include/patchlevel.h")
case "$version" in 3.14.*) ;; *) echo "cpython: $srcdir is Python $version, not 3.14" >&2; exit 1 ;; esac
echo "cpython: building $version free-threaded (nice, make -j$jobs; see $log)" >&2

start=$(date +%s)
mkdir -p "$work/obj"
(
  cd "$work/obj"
  nice -n 10 "$srcdir/configure" --disable-gil --enable-shared --prefix="$prefix" \
    --without-ensurepip LDFLAGS="-Wl,-rpath,$prefix/lib"
  nice -n 10 make -j"$jobs"
  nice -n 10 make install DESTDIR="$tmp"
) >>"$log" 2>&1 || { echo "cpython: build failed, see $log" >&2; exit 1; }
end=$(date +%s)

root=$tmp$prefix
py=$root/bin/python3.14t
# Checked where it is staged: the rpath names the final path, so the staged
# library and home are given explicitly.
check() { LD_LIBRARY_PATH=$root/lib PYTHONHOME=$root "$py" "$@"; }
[ "$(check -c 'import sys; print(sys._is_gil_enabled())')" = False ] ||
  { echo "cpython: $py does not run free-threaded" >&2; exit 1; }
check -c 'import ctypes, zlib, ssl, bz2, lzma, json, threading, asyncio, decimal, hashlib' >>"$log" 2>&1 ||
  { echo "cpython: modules missing, see $log" >&2; exit 1; }
# (not `readelf | grep -q`: with pipefail, grep's early exit fails readelf)
[[ $(readelf -d "$py") == *"Shared library: [libpython3.14t.so"* ]] ||
  { echo "cpython: $py is not linked against libpython3.14t.so" >&2; exit 1; }
echo "cpython: $version built in $((end - start)) s" | tee -a "$log" >&2

echo "$RECIPE" >"$root/.ltrace-cpython-recipe"
rm -rf "$prefix"
mv "$root" "$prefix"
rm -rf "$tmp" "$work"
echo "$prefix"
