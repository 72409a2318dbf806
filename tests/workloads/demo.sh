#!/usr/bin/env bash
# make demo: start the bundled real Lightning training job (CPU, small model,
# default Trainer = PassThroughProfiler, no tracing code in it), let it train,
# attach ltrace-bpf to the running process, and print the report when the job
# ends.  Run as root (BPF).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp -d)
trap 'rm -rf "$out"; [ -n "${job:-}" ] && kill "$job" 2>/dev/null || true' EXIT
.venv/bin/python tests/workloads/train_lightning.py --profiler none --epochs 30 --batches 200 --val \
    --hidden 256 --depth 3 > "$out/job.log" 2>&1 &
job=$!
echo "demo: started Lightning training job, pid $job (default Trainer, no profiler configured)" >&2
until grep -q READY "$out/job.log" 2>/dev/null; do
  kill -0 "$job" 2>/dev/null || { cat "$out/job.log" >&2; exit 1; }
  sleep 0.2
done
sleep 2  # it is training now
echo "demo: sudo ltrace-bpf --pid $job --report simple,advanced,ops --off-cpu --line-count-restriction 8 --row-limit 15" >&2
echo "demo: (the job is already running; the Simple, Advanced and ops reports print when it ends)" >&2
build/ltrace-bpf --pid "$job" -v --report simple,advanced,ops --off-cpu --line-count-restriction 8 --row-limit 15 \
    --flamegraph build/demo-flamegraph.svg --html build/demo-report.html
wait "$job"
echo "demo: job finished: $(grep FIT_DONE "$out/job.log")" >&2
