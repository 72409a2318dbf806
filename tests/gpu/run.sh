#!/usr/bin/env bash
# The GPU check (issue 7), for a machine with an NVIDIA GPU: one H200, Python
# 3.12, torch 2.11 + CUDA 13, pytorch-lightning 2.6.6, no package registry.
# Not part of CI (CI has no GPU).  Runs in well under 8 minutes:
#   here:   make static bridge        (build/ltrace-bpf-static, build/libltrace-bridge.so)
#   there:  bash tests/gpu/run.sh     (OUT=dir for the results; PY=python)
# 1. late attach to a running Lightning GPU fit (bridge injected by ptrace):
#    kernel counts and CUDA totals against torch.profiler on the same run
#    (phase A: ltrace-bpf, phase B: torch.profiler, identical fits);
# 2. launched under `ltrace-bpf run`: NVTX ranges from emit_nvtx;
# 3. CUPTI taken by torch.profiler: the refusal and the uprobe fallback;
# 4. the dormant bridge's cost: steps/s with the bridge preloaded, no tracer.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ltrace-gpu}   # results: log.txt and results.tgz (the text outputs)
WORK=${WORK:-/tmp/ltrace-gpu-work}
PY=${PY:-python3}
LT=${LT:-build/ltrace-bpf-static}
export LTRACE_BRIDGE=${LTRACE_BRIDGE:-$PWD/build/libltrace-bridge.so}
mkdir -p "$OUT" "$WORK"
exec > >(tee "$OUT/log.txt") 2>&1
W=tests/workloads/gpu_compare.py
STEPS=${STEPS:-60}
t_start=$(date +%s)

echo "== environment"
date -u; uname -r; nproc
$PY -c 'import sys, torch, pytorch_lightning as pl; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.is_available(), torch.cuda.get_device_name(0), pl.__version__)'
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
$LT --version || exit 1
ls "$($PY -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))')"/nvidia/*/lib 2>/dev/null | grep -i cupti | head -3

# Starts the workload ($1 = dir, rest = its options), waits for READY.
start_job() {
  local dir=$1; shift
  rm -rf "$dir"; mkdir -p "$dir"
  $PY $W --dir "$dir" "$@" > "$dir/job.log" 2>&1 &
  JOB=$!
  for _ in $(seq 900); do grep -q READY "$dir/job.log" 2>/dev/null && return 0; sleep 0.1; done
  echo "job did not start"; tail -20 "$dir/job.log"; kill $JOB; return 1
}

echo "== 1. late attach (ptrace-injected bridge) vs torch.profiler on the same run"
D=$WORK/late
if start_job $D --steps $STEPS; then
  timeout 300 $LT --pid $JOB -v --report simple,ops,gpu --sort-by cuda_time_total --row-limit 15 --launch-stacks \
      --chrome $D/ltrace.json -o $D/trace.ltrace --collapsed $D/stacks.txt > $D/lt.out 2> $D/lt.err &
  LTP=$!
  for _ in $(seq 300); do grep -q "attached:" $D/lt.err 2>/dev/null && break; sleep 0.1; done
  sleep 1.5   # the bridge wakes within ~100 ms and subscribes
  touch $D/go
  for _ in $(seq 1200); do grep -q A_DONE $D/job.log && break; sleep 0.1; done
  sleep 0.5; kill -INT $LTP; wait $LTP; echo "ltrace-bpf rc=$?"
  touch $D/detached
  wait $JOB; echo "job rc=$? $(grep -E 'A_DONE|B_DONE' $D/job.log | tr '\n' ' ')"
  cat $D/lt.err
  grep -n "Profile stats for" -A 22 $D/lt.out | head -50
  grep -n "GPU Report" -A 40 $D/lt.out | head -60
  $PY tests/gpu/compare.py $D/ltrace.json $D/torch.json | tee $D/compare.txt
  # The op table's CUDA columns (the op observer's calls, kernels joined by time) against key_averages.
  $PY tests/gpu/compare_ops.py $D/lt.out $D/torch.json | tee $D/compare_ops.txt
  echo "GPU time by launching Python stack (top 5 of $(wc -l < $D/stacks.gpu.txt 2>/dev/null) stacks):"
  sort -t' ' -k2 -n -r $D/stacks.gpu.txt 2>/dev/null | head -5 | awk '{n=split($0,a,";"); print "  " $NF " ns  ..." a[n-1] ";" a[n]}' | cut -c1-200
  $PY -c "import json,sys; t=json.load(open('$D/ltrace.json'))['traceEvents']; c={}
for e in t: c[e.get('cat')]=c.get(e.get('cat'),0)+1
print('chrome trace categories:', sorted(c.items(), key=lambda x: str(x[0])))"
  $LT report $D/trace.ltrace --report simple,ops,gpu --sort-by cuda_time_total --row-limit 15 > $D/offline.out 2>/dev/null
  echo "offline report identical to live: $(cmp -s $D/offline.out $D/lt.out && echo yes || echo no)"
fi
echo "elapsed $(( $(date +%s) - t_start )) s"

echo "== 2. launched under ltrace-bpf run: NVTX (emit_nvtx) and CUPTI from the first call"
D=$WORK/run; rm -rf $D; mkdir -p $D; touch $D/go
timeout 300 $LT run -v --report gpu --chrome $D/ltrace.json -- $PY $W --dir $D --steps 10 --nvtx --only-a \
    > $D/lt.out 2> $D/lt.err
echo "ltrace-bpf rc=$?"
cat $D/lt.err | tail -20
grep -n "NVTX Range Summary" -A 14 $D/lt.out | head -24
grep -n "CUDA GPU Kernel Summary" -A 8 $D/lt.out | head -12
echo "elapsed $(( $(date +%s) - t_start )) s"

echo "== 3. CUPTI taken by torch.profiler (phase B): the refusal, then uprobes"
D=$WORK/busy
if start_job $D --steps 600; then
  touch $D/go
  for _ in $(seq 1200); do grep -q A_DONE $D/job.log && break; sleep 0.1; done
  touch $D/detached
  sleep 1   # phase B: torch.profiler holds CUPTI
  timeout 60 $LT --pid $JOB -v --report gpu --duration 4 > $D/lt.out 2> $D/lt.err
  echo "ltrace-bpf rc=$?"
  wait $JOB; echo "job rc=$? $(grep -E 'B_DONE' $D/job.log)"
  cat $D/lt.err | tail -12
  head -30 $D/lt.out
fi
echo "elapsed $(( $(date +%s) - t_start )) s"

if [ -z "${SKIP_BENCH:-}" ]; then   # tests/gpu/all.sh runs it as its own section
  echo "== 4. cost, side by side on the same fit (bench/gpu_overhead.sh)"
  LT=$LT PY=$PY WORK=$WORK bash bench/gpu_overhead.sh
fi
echo "total elapsed $(( $(date +%s) - t_start )) s"
(cd $WORK && find . -name '*.out' -o -name '*.err' -o -name '*.log' -o -name 'compare.txt' -o -name 'torch.json' -o -name 'stacks.gpu.txt' | tar czf "$OUT/results.tgz" -T -)
