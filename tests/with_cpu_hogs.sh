#!/bin/sh
# Runs a command beside N CPU-bound processes (default 2): `make test-loaded`
# runs the integration tests so, as they must pass on a busy machine.
#   tests/with_cpu_hogs.sh [-n N] COMMAND [ARGS...]
# The hogs are ended however this script ends: a trap on exit, INT and TERM
# kills them, and each hog also exits by itself once its parent (this
# script) is gone, so even a SIGKILL of the script leaves none behind.
set -u
n=2
if [ "${1:-}" = "-n" ]; then
  n=$2
  shift 2
fi
[ $# -gt 0 ] || { echo "usage: $0 [-n N] COMMAND [ARGS...]" >&2; exit 2; }

hogs=""
stop_hogs() {
  for pid in $hogs; do kill "$pid" 2>/dev/null; done
  for pid in $hogs; do wait "$pid" 2>/dev/null; done
  hogs=""
}
trap 'stop_hogs' EXIT
trap 'stop_hogs; exit 130' INT
trap 'stop_hogs; exit 143' TERM

i=0
while [ "$i" -lt "$n" ]; do
  # Pure user-space spinning; a parent check every 2^20 iterations (a few ms
  # of CPU).  The parent's pid is passed in, not read at start-up: a script
  # killed while the hog was still starting would otherwise go unnoticed.
  python3 -c '
import os, sys
parent = int(sys.argv[1])
while os.getppid() == parent:
    for _ in range(1 << 20):
        pass
' $$ &
  hogs="$hogs $!"
  i=$((i + 1))
done
echo "with_cpu_hogs: $n CPU-bound process(es):$hogs" >&2

"$@"
rc=$?
stop_hogs
exit $rc
