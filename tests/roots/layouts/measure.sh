#!/usr/bin/env bash
# Measures the CPython 3.14 / 3.14t / 3.15 layouts the profiler needs
# (docs/cpython-layouts-3.14-3.15.md) into OUTDIR:
#   layout-V.txt          offsetof/sizeof/enum values from V's internal headers
#   debug-V.txt           _Py_DebugOffsets: compiled from the headers and, where
#                         a V interpreter runs here, read live from its _PyRuntime
#   walk-V.txt            a live process's threads and frames walked from outside
#                         with the header offsets
#   target-V.json         what the live process says about itself
# 3.14 and 3.15 are Debian sid's (GIL) builds from the sid root of
# tests/roots/build.sh; their headers come from libpython3.X-dev, downloaded
# through a private apt state (the host's apt is left alone) and unpacked
# in a temp dir.  3.14t uses the headers and interpreter of
# tests/roots/build_ft.sh when its cache is there; otherwise sid's 3.14
# headers with Py_GIL_DISABLED defined, and no live process.
# usage: measure.sh OUTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../../.." && pwd)
out=${1:?usage: measure.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out/versions.txt"
mirror=${LTRACE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# $LTRACE_SID_ROOT: an already debootstrapped sid root instead.
root=${LTRACE_SID_ROOT:-$(bash "$top/tests/roots/build.sh" sid)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Headers of sid's libpython3.X-dev, never installed on the host.
mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial" "$work/debs"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror sid main" >"$work/apt/sources.list"
apt_priv=(-o Dir::Etc::sourcelist="$work/apt/sources.list" -o Dir::Etc::sourceparts=-
  -o Dir::State::Lists="$work/apt/lists" -o Dir::Cache="$work/apt/cache"
  -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o APT::Get::List-Cleanup=0)
apt-get "${apt_priv[@]}" update >"$work/apt.log" 2>&1
for v in 3.14 3.15; do
  want=$(chroot "$root" dpkg-query -W -f='${Version}' "libpython$v")
  (cd "$work/debs" && apt-get "${apt_priv[@]}" download "libpython$v-dev=$want") >>"$work/apt.log" 2>&1
  dpkg-deb -x "$work"/debs/libpython$v-dev_*.deb "$work/x$v"
  echo "libpython$v-dev $want" >>"$out/versions.txt"
done

ft_prefix=${LTRACE_CPYTHON_CACHE:-/var/cache/ltrace-bpf/cpython}/cpython-3.14t
[ -f "$ft_prefix/.ltrace-cpython-recipe" ] || ft_prefix=

build_tools() {  # NAME INCLUDE-FLAGS...
  local name=$1; shift
  cc -O0 -w "$@" -o "$work/layout-$name" "$here/layout_offsets.c"
  cc -O0 -w "$@" -o "$work/walk-$name" "$here/walk_frames.c"
  python3 "$here/gen_debug_offsets.py" "$hdr/internal/pycore_debug_offsets.h" >"$work/debug-$name.c"
  cc -O0 -w "$@" -o "$work/debug-$name" "$work/debug-$name.c"
  "$work/layout-$name" >"$out/layout-$name.txt"
}

live() {  # NAME PYTHON-COMMAND...
  local name=$1; shift
  "$@" -c "$(cat "$here/target.py")" 120 >"$out/target-$name.json" 2>"$work/target-$name.err" &
  local pid=$!
  for _ in $(seq 100); do [ -s "$out/target-$name.json" ] && break; sleep 0.1; done
  sleep 1  # both threads inside the generator
  local addr
  addr=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["runtime"])' "$out/target-$name.json")
  "$work/debug-$name" "$pid" "$addr" >"$out/debug-$name.txt" || echo "debug offsets of $name differ" >&2
  "$work/walk-$name" "$pid" "$addr" >"$out/walk-$name.txt" || echo "walk of $name found problems" >&2
  kill "$pid"; wait "$pid" 2>/dev/null || true
}

# The -D flags the interpreter's own core was compiled with: Debian's
# --enable-experimental-jit adds -D_Py_JIT -D_Py_TIER2=3, which are not in
# pyconfig.h and change sizeof(PyInterpreterState) in 3.15.
core_defs() {
  "$@" -c 'import sysconfig; print(" ".join(f for f in sysconfig.get_config_var("PY_CORE_CFLAGS").split()
    if f.startswith("-D") and f != "-DPy_BUILD_CORE" and not f.startswith("-D_FORTIFY")))'
}

for v in 3.14 3.15; do
  hdr=$work/x$v/usr/include/python$v
  defs=$(core_defs chroot "$root" "/usr/bin/python$v")
  echo "python$v core defines: $defs" >>"$out/versions.txt"
  # shellcheck disable=SC2086
  build_tools "$v" $defs -I"$hdr" -I"$work/x$v/usr/include"
  live "$v" chroot "$root" "/usr/bin/python$v"
done
if [ -n "$ft_prefix" ]; then
  hdr=$ft_prefix/include/python3.14t
  defs=$(core_defs "$ft_prefix/bin/python3.14t")
  echo "python3.14t core defines: $defs" >>"$out/versions.txt"
  # shellcheck disable=SC2086
  build_tools 3.14t $defs -I"$hdr"
  live 3.14t "$ft_prefix/bin/python3.14t"
else
  hdr=$work/x3.14/usr/include/python3.14
  build_tools 3.14t -DPy_GIL_DISABLED=1 -I"$hdr" -I"$work/x3.14/usr/include"
  "$work/debug-3.14t" >"$out/debug-3.14t.txt"
fi
echo "$out"
