#!/usr/bin/env bash
# GPU-machine benchmark (run by tests/gpu/run.sh; needs an NVIDIA GPU): one
# Lightning GPU fit of 300 steps (tests/workloads/gpu_compare.py), side by
# side in one run: plain, with the bridge preloaded but no tracer (dormant),
# under `ltrace-bpf run --report gpu` (CUPTI on), under `--report ops,gpu`
# (CUPTI + aten op probes + 999 Hz sampling), and under torch.profiler
# (CPU + CUDA activities).  Prints steps/s and the ratio to plain.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
LT=${LT:-build/ltrace-bpf-static}
BRIDGE=${LTRACE_BRIDGE:-$PWD/build/libltrace-bridge.so}
D=${WORK:-/tmp/ltrace-gpu-work}/bench; mkdir -p $D
A="tests/workloads/gpu_compare.py --dir $D --steps ${STEPS:-300} --only-a --no-wait"
rate() { grep -o 'steps_per_s=[0-9.]*' | cut -d= -f2; }
declare -A R
R[plain]=$($PY $A 2>/dev/null | rate)
R[dormant]=$(CUDA_INJECTION64_PATH=$BRIDGE NVTX_INJECTION64_PATH=$BRIDGE $PY $A 2>/dev/null | rate)
R[gpu]=$($LT run --report gpu -- $PY $A 2>/dev/null | rate)
R[opsgpu]=$($LT run --report ops,gpu -- $PY $A 2>/dev/null | rate)
R[torch]=$($PY $A --profile-a 2>/dev/null | rate)
R[plain2]=$($PY $A 2>/dev/null | rate)
$PY - "${R[plain]}" "${R[plain2]}" "${R[dormant]}" "${R[gpu]}" "${R[opsgpu]}" "${R[torch]}" <<'PYEOF'
import sys
plain, plain2, dormant, gpu, opsgpu, torch_ = (float(x) if x else 0.0 for x in sys.argv[1:])
base = (plain + plain2) / 2
print(f"{'configuration':44} {'steps/s':>9} {'x plain':>8}")
for name, v in [("plain (mean of two runs: %.1f, %.1f)" % (plain, plain2), base),
                ("bridge preloaded, no tracer (dormant)", dormant),
                ("ltrace-bpf run --report gpu (CUPTI)", gpu),
                ("ltrace-bpf run --report ops,gpu", opsgpu),
                ("torch.profiler (CPU + CUDA)", torch_)]:
    print(f"{name:44} {v:9.1f} {v / base if base else 0:8.3f}")
if torch_ and base:
    print(f"slowdown ratio, ltrace-bpf ops,gpu vs torch.profiler: {(base / opsgpu if opsgpu else 0):.3f} vs {base / torch_:.3f}")
PYEOF
