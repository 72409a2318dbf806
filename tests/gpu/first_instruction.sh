#!/usr/bin/env bash
# Issue 32 on the GPU machine's own CPython and torch (tests/gpu/all.sh runs
# it): `run` counts the 20 actions of tests/workloads/early_actions.py in
# each of RUNS runs (10), and the first ops after `import torch`, once each.
set -uo pipefail
cd "$(dirname "$0")/../.."
LT=${LT:-build/ltrace-bpf-static}; PY=${PY:-python3}
D=${OUT:-/tmp/ltrace-gpu}/first; mkdir -p "$D"
RUNS=${RUNS:-10}
s=$(date +%s%N); $PY tests/workloads/early_actions.py > /dev/null 2>&1
echo "the script alone: $(( ($(date +%s%N) - s) / 1000000 )) ms"
ok=0
for i in $(seq $RUNS); do
  s=$(date +%s%N)
  EARLY_PREFIX=gpu $LT run -v --report simple -- $PY tests/workloads/early_actions.py > $D/early.$i.out 2> $D/early.$i.err
  rc=$?
  echo "  under run: $(( ($(date +%s%N) - s) / 1000000 )) ms"
  n=$(awk -F'|' '{gsub(/[ \t]/, "", $2); gsub(/[ \t]/, "", $4)} $2 ~ /^gpu_[0-9][0-9]$/ && $4 == "1"' $D/early.$i.out | wc -l)
  echo "run $i: rc=$rc, early actions counted once: $n of 20"
  (( rc == 0 && n == 20 )) && ok=$((ok + 1))
done
echo "FIRST_INSTRUCTION early actions: $ok of $RUNS runs counted 20 of 20"
$LT run -v --report ops --row-limit -1 -- $PY tests/workloads/early_ops.py > $D/ops.out 2> $D/ops.err
echo "run --report ops rc=$?"
grep -E "OPS_DONE|^ *aten::(ones|add|mul) " $D/ops.out
tail -5 $D/ops.err
