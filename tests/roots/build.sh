#!/usr/bin/env bash
# Builds (once, then cached) a root file system of another Debian suite for
# the container tests, from the Debian registry only:
#   sid       CPython 3.13, 3.14, 3.15 (Debian's: interpreter in the
#             executable) + an embedding `python3.X-shared` per version
#             (interpreter in libpython3.X.so), each with torch 2.15 and
#             pytorch-lightning 2.6.6 from PyPI in /opt/site/cp3X
#   bullseye  glibc 2.31 with its python3.9 (an older-glibc image)
# Prints the root's path.  The cache lives in $LTRACE_ROOTS
# (default /var/cache/ltrace-bpf/roots) and is keyed by this script's
# recipe version: change RECIPE to rebuild.
set -euo pipefail
name=${1:?usage: build.sh sid|bullseye}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
cache=${LTRACE_ROOTS:-/var/cache/ltrace-bpf/roots}
RECIPE=3
mirror=${LTRACE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
root=$cache/$name
stamp=$root/.ltrace-root-recipe
# sid's site directories byte-compiled by each root's own interpreter: the
# containers run with PYTHONDONTWRITEBYTECODE=1, and without .pyc files every
# process there compiles torch again (`import torch`: 3.7 s of CPU; torch and
# Lightning with .pyc files: 3.0 s).  Once per cache, 35 s on 2 cores.
pyc_stamp=$root/.ltrace-root-pyc
built() { [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$RECIPE" ]; }
compiled() { [ "$name" != sid ] || [ -f "$pyc_stamp" ]; }
byte_compile_sites() {
  local dir=$1 v
  for v in 3.13 3.14 3.15; do
    # compileall exits 1 for files that never compile (templates, Python 2
    # leftovers in wheels); they are never imported.
    chroot "$dir" "/usr/bin/python$v" -m compileall -q -j 1 "/opt/site/cp${v/./}" >/dev/null 2>&1 &
  done
  wait
  touch "$dir/.ltrace-root-pyc"
}

if built && compiled; then echo "$root"; exit 0; fi

mkdir -p "$cache"
exec 9>"$cache/.$name.lock"
flock 9
if built && compiled; then echo "$root"; exit 0; fi
if built; then  # a cache from before the byte-compiling step
  byte_compile_sites "$root"
  echo "$root"
  exit 0
fi
command -v debootstrap >/dev/null || {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }

tmp=$cache/$name.tmp
case "$name" in
  sid)      pkgs=python3.13,python3.14,python3.15,libpython3.13,libpython3.14,libpython3.15 ;;
  bullseye) pkgs=python3 ;;
  *) echo "build.sh: unknown root $name" >&2; exit 2 ;;
esac
# An interrupted build resumes after a finished debootstrap.
if [ ! -f "$tmp/.debootstrap-ok" ]; then
  rm -rf "$tmp"
  echo "roots: debootstrap $name (once; cached in $cache)" >&2
  debootstrap --variant=minbase --include="$pkgs" "$name" "$tmp" "$mirror" >"$cache/$name.log" 2>&1 ||
    { echo "roots: debootstrap $name failed, see $cache/$name.log" >&2; exit 1; }
  touch "$tmp/.debootstrap-ok"
fi

if [ "$name" = sid ]; then
  pip=$top/.venv/bin/pip
  [ -x "$pip" ] || { echo "roots: $pip missing: run make deps" >&2; exit 1; }
  nvidia=$(ls -d "$top"/.venv/lib/python3*/site-packages/nvidia | head -n 1)
  for v in 3.13 3.14 3.15; do
    cp=cp${v/./}
    site=$tmp/opt/site/$cp
    # torch's own CUDA libraries are python-version independent: hard links
    # of the venv's copies (the same torch release) instead of 4 GB more.
    "$pip" install -q --no-compile --no-deps --only-binary=:all: --python-version "$v" --implementation cp --abi "$cp" \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      --target "$site" torch==2.15.0 pytorch-lightning==2.6.6 lightning-utilities torchmetrics tqdm pyyaml \
      fsspec packaging typing-extensions filelock sympy mpmath networkx jinja2 markupsafe numpy setuptools \
      >>"$cache/$name.log" 2>&1 || { echo "roots: pip for $v failed, see $cache/$name.log" >&2; exit 1; }
    rm -rf "$site/nvidia"
    cp -al "$nvidia" "$site/nvidia"
    # The other layout: the same interpreter from libpython3.X.so.
    lib=$(ls "$tmp"/usr/lib/x86_64-linux-gnu/libpython$v.so.1.0)
    printf 'extern int Py_BytesMain(int, char**);\nint main(int c, char** v) { return Py_BytesMain(c, v); }\n' >"$tmp/shared.c"
    # Linked here against the root's newer glibc and expat: their symbols
    # resolve inside the root at run time.
    cc -O2 -o "$tmp/usr/local/bin/python$v-shared" "$tmp/shared.c" "$lib" -Wl,-rpath,/usr/lib/x86_64-linux-gnu \
      -Wl,--allow-shlib-undefined
    rm "$tmp/shared.c"
  done
  byte_compile_sites "$tmp"
fi
echo "$RECIPE" >"$tmp/.ltrace-root-recipe"
rm -rf "$root"
mv "$tmp" "$root"
echo "$root"
