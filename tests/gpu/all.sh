#!/usr/bin/env bash
# Every GPU-machine check in one prepared run, sized for the device tool's
# 15-minute lease (the machine's start included): each section has its own
# time limit and the script stops starting sections once BUDGET seconds
# have passed.  Not part of CI (CI has no GPU).
#   here:   make static bridge
#   there:  OUT=dir bash tests/gpu/all.sh     (carry nothing: build/ travels
#           as ignored paths named in carry: build/ltrace-bpf-static and
#           build/libltrace-bridge.so)
# Sections, the never-run checks first:
#   0. verdict_check.py the verdict's GPU findings on real fits (sync, tiny kernels, healthy)
#      watch_check.py   watch's GPU memory growth and CUDA out-of-memory triggers
#   1. memory_check.py  CUDA allocator keys and Self CUDA Mem vs torch.cuda.memory_stats
#   2. nccl_check.py    c10d + NCCL calls of a world-size-1 NCCL group
#   3. compile_check.py CUDA graph replays inside a torch.compile region
#   4. first instruction: `run` on this machine's CPython (20 of 20 early
#      actions, 10 runs; the first ops after `import torch` on its torch)
#   5. run.sh sections 1-3 (late attach vs torch.profiler, NVTX, CUPTI taken)
#   6. bench/gpu_overhead.sh if time is left
# ONLY="1 3" runs just those sections.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ltrace-gpu}
BUDGET=${BUDGET:-420}
export LT=${LT:-$PWD/build/ltrace-bpf-static}
export PY=${PY:-python3}
export LTRACE_BRIDGE=${LTRACE_BRIDGE:-$PWD/build/libltrace-bridge.so}
export PYTHONUNBUFFERED=1
W=${WORK:-/tmp/ltrace-gpu-all}   # everything but the log; packed into $OUT/results.tgz
rm -rf "$W"; mkdir -p "$OUT" "$W"
export TMPDIR=$W
exec > >(tee "$OUT/all.txt") 2>&1
t0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - t0) )); }
section() {  # $1 = name, $2 = time limit (s), rest = command
  local name=$1 limit=$2; shift 2
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" ${name%%.*} "* ]]; then echo "== $name: not asked for (ONLY=$ONLY)"; return; fi
  if (( $(left) < 20 )); then echo "== $name: SKIPPED (budget spent)"; return; fi
  (( limit > $(left) )) && limit=$(left)
  echo "== $name (limit ${limit} s, $(( $(date +%s) - t0 )) s in)"
  local s=$(date +%s)
  timeout -k 5 "$limit" "$@"
  echo "== $name: rc=$? in $(( $(date +%s) - s )) s"
}

echo "== environment"
uname -r; nproc
$PY -c 'import sys, sysconfig, torch, pytorch_lightning as pl; print(sys.version.split()[0], sys.executable, "shared" if sysconfig.get_config_var("Py_ENABLE_SHARED") else "static", torch.__version__, torch.version.cuda, torch.cuda.is_available(), pl.__version__)'
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
$LT --version || exit 1

section "0. verdict_check" 150 $PY tests/gpu/verdict_check.py
section "0. watch_check" 90 $PY tests/gpu/watch_check.py
section "1. memory_check" 90 $PY tests/gpu/memory_check.py
section "2. nccl_check" 90 $PY tests/gpu/nccl_check.py
section "3. compile_check" 150 env STEPS=50 $PY tests/gpu/compile_check.py

section "4. first instruction" 120 env RUNS=4 OUT=$W bash tests/gpu/first_instruction.sh

section "5. run.sh (late attach vs torch.profiler; NVTX; CUPTI taken)" 200 env SKIP_BENCH=1 OUT=$W/runsh WORK=$W/runsh-work bash tests/gpu/run.sh
section "6. bench/gpu_overhead.sh" 150 env WORK=$W/bench bash bench/gpu_overhead.sh
tar czf "$OUT/results.tgz" -C "$W" . 2>/dev/null; ls -la "$OUT"
echo "== total $(( $(date +%s) - t0 )) s"
