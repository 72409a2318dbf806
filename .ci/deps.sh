#!/usr/bin/env bash
# Installs everything ltrace-bpf needs to build, test, demo and benchmark,
# from Debian packages and PyPI only.  Idempotent: a second run is quick.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(make g++ clang llvm libclang-rt-14-dev libbpf-dev bpftool libelf-dev zlib1g-dev libzstd-dev pkg-config
              libgtest-dev libfmt-dev systemtap-sdt-dev python3.11 python3.11-venv python3-pip procps util-linux chromium
              slurmctld slurmd slurm-client munge iproute2 debootstrap)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: apt-get install ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Real torch + real Lightning for the tests, demo and benchmarks, in a venv on
# Debian's python3.11 (the interpreter lives in the executable: one of the two
# layouts we support; pyenv's 3.11 reuses these site-packages for the other).
if [ ! -x .venv/bin/python ]; then
  /usr/bin/python3.11 -m venv .venv
fi
if ! { .venv/bin/python -c "import torch, pytorch_lightning, pytest, hta, jsonschema, perfetto" 2>/dev/null &&
       [ -x .venv/bin/py-spy ]; }; then
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -r .ci/requirements.txt
fi
# torch 1.13.1 + Lightning 2.2.5 for the op tests' torch-1.13 cases, on
# pyenv's CPython 3.10 (torch 1.13 supports 3.7-3.10).  The pins are complete
# (--no-deps); a copy of the file in the venv marks it installed.
PY310=/root/.pyenv/versions/3.10.13/bin/python3.10
if [ -x "$PY310" ]; then
  [ -x .venv-torch113/bin/python ] || "$PY310" -m venv .venv-torch113
  if ! { cmp -s .ci/requirements-torch113.txt .venv-torch113/requirements.txt &&
         .venv-torch113/bin/python -c "import torch, pytorch_lightning" 2>/dev/null; }; then
    .venv-torch113/bin/pip install -q --no-deps -r .ci/requirements-torch113.txt
    cp .ci/requirements-torch113.txt .venv-torch113/requirements.txt
  fi
else
  echo "deps: no $PY310 (pyenv): .venv-torch113 not made, the torch-1.13 op tests will skip" >&2
fi
# Lightning wheels whose profiler modules run on every CPython 3.8-3.13
# (tests/integration/lightning_site.py).
mkdir -p .venv/wheels
for v in 2.3.3 2.6.6; do
  ls .venv/wheels/pytorch_lightning-$v-*.whl >/dev/null 2>&1 ||
    .venv/bin/pip download -q --no-deps --dest .venv/wheels "pytorch-lightning==$v"
done
ls .venv/wheels/lightning-2.6.6-*.whl >/dev/null 2>&1 ||
  .venv/bin/pip download -q --no-deps --dest .venv/wheels "lightning==2.6.6"
# Root file systems of other Debian suites for the container tests (once;
# cached in /var/cache/ltrace-bpf/roots): sid with CPython 3.13-3.15 and
# torch 2.15, bullseye with glibc 2.31.
bash tests/roots/build.sh sid >/dev/null
bash tests/roots/build.sh bullseye >/dev/null
echo "deps: ok"
