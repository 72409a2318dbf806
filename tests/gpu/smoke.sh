#!/usr/bin/env bash
# GPU-machine check (run through the device tool; not part of CI): the
# statically linked ltrace-bpf attached to a real Lightning fit on the GPU,
# with the interpreter and torch that machine has (Python 3.12, torch 2.11 +
# CUDA 13, pytorch-lightning 2.6.6).  Prints environment facts, the Simple
# and Advanced reports (on- and off-CPU: CUDA synchronisation shows up as
# blocking), and leaves the trace, HTML and collapsed stacks in $OUT.
#   build here:  make static
#   run there:   bash tests/gpu/smoke.sh     (carry build/ltrace-bpf-static)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ltrace-gpu}
mkdir -p "$OUT"
LT=build/ltrace-bpf-static
PY=${PY:-python3}
echo "== environment"
uname -r; id -u; nproc
$PY -c 'import sys, torch, pytorch_lightning as pl; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.is_available(), pl.__version__)'
$PY -c 'import sysconfig; print("Py_ENABLE_SHARED", sysconfig.get_config_var("Py_ENABLE_SHARED"))'
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
$LT --version || exit 1

run_fit() {  # $1 = label, rest = ltrace-bpf options
  local label=$1; shift
  rm -f "$OUT/go"
  $PY tests/workloads/train_lightning.py --accelerator gpu --epochs 3 --batches 200 --batch-size 256 \
      --hidden 2048 --depth 4 --val --wait-file "$OUT/go" > "$OUT/$label.job.log" 2>&1 &
  local job=$!
  for _ in $(seq 600); do grep -q READY "$OUT/$label.job.log" 2>/dev/null && break; sleep 0.1; done
  grep -q READY "$OUT/$label.job.log" || { echo "job did not start"; tail -20 "$OUT/$label.job.log"; kill $job; return 1; }
  timeout 300 $LT --pid $job -v "$@" > "$OUT/$label.out" 2> "$OUT/$label.err" &
  local lt=$!
  for _ in $(seq 300); do grep -q attached "$OUT/$label.err" 2>/dev/null && break; sleep 0.1; done
  touch "$OUT/go"
  wait $job; echo "job rc=$? $(grep FIT_DONE "$OUT/$label.job.log")"
  wait $lt; echo "ltrace-bpf rc=$?"
  cat "$OUT/$label.err"
}

echo "== Simple + Advanced (999 Hz, off-CPU) attached to a running GPU fit"
run_fit gpu --report simple,advanced --rate 999 --off-cpu --line-count-restriction 6 \
    -o "$OUT/gpu.ltrace" --html "$OUT/gpu.html" --collapsed "$OUT/gpu.collapsed.txt"
head -60 "$OUT/gpu.out"
grep -n "Off-CPU stats for" -A 12 "$OUT/gpu.out" | head -60
echo "== offline report from the trace file"
$LT report "$OUT/gpu.ltrace" --report simple,advanced --line-count-restriction 6 > "$OUT/offline.out" 2>/dev/null
echo "rc=$?; offline report identical to live: $(cmp -s "$OUT/offline.out" "$OUT/gpu.out" && echo yes || echo no)"
echo "== --profile-memory on the GPU fit: CUDA Mem columns (reportMemoryUsageToProfiler), MEM records in the trace"
run_fit mem --report ops --profile-memory --row-limit 15 --sort-by self_cuda_memory_usage -o "$OUT/mem.ltrace"
head -30 "$OUT/mem.out"
$LT report "$OUT/mem.ltrace" --dump "$OUT/mem.dump" > /dev/null 2>&1
echo "MEM records by device (type:index): $(grep ' mem ' "$OUT/mem.dump" | grep -o 'device=[^ ]*' | sort | uniq -c | tr '\n' ' ')"
echo "CUDA allocs with totals: $(grep ' mem ' "$OUT/mem.dump" | grep -c 'device=1:.*flags=[57]')"
ls -la "$OUT"
