#!/usr/bin/env bash
# Installs what ltrace-bpf needs, from Debian packages and PyPI only.
# Idempotent: a second run is quick.
#
#   .ci/deps.sh                 everything (make deps): apt python roots
#   .ci/deps.sh demo            what `make demo` needs: apt-demo venv-demo
#   .ci/deps.sh apt             Debian packages
#   .ci/deps.sh apt-demo        only those the build needs
#   .ci/deps.sh venv-demo       .venv with torch and Lightning only
#   .ci/deps.sh python          .venv (torch, Lightning, pytest...), the Lightning
#                               wheels for other CPythons, .venv-torch113, .venv-xla
#                               (at once)
#   .ci/deps.sh roots           the debootstrapped roots of the container tests
#                               (needs .venv: sid's torch comes through its pip)
#
# `make test` (.ci/test.sh) runs `apt` first and `python roots` in the
# background while it compiles.
set -euo pipefail
cd "$(dirname "$0")/.."

# What compiling and running the product needs (make, make demo).
APT_BUILD=(make g++ clang llvm libclang-rt-14-dev libbpf-dev bpftool libelf-dev zlib1g-dev libzstd-dev pkg-config
           libgtest-dev libfmt-dev systemtap-sdt-dev python3.11 python3.11-venv python3-pip procps util-linux)
# What only the tests need: headless Chromium (the HTML pages), Slurm + munge
# (the simulated cluster), iproute2 (its network namespaces), debootstrap
# (the roots), nodejs (make check's syntax check of the pages' scripts),
# strace (no descriptor closed twice: test_stacks.py).
APT_TEST=(chromium slurmctld slurmd slurm-client munge iproute2 debootstrap nodejs prometheus systemd strace)

apt_install() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "deps: apt-get install ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

# Installs use --no-compile, and byte_compile then compiles each venv once,
# on every core: this machine kind sets PYTHONDONTWRITEBYTECODE=1, so a
# module without a .pyc is compiled again by every process that imports it
# (measured: `import torch, pytorch_lightning` 9.7 s of CPU without .pyc
# files, 4.5 s with them; compiling all of .venv once: 41 s of CPU).  The
# tests start hundreds of such processes.
byte_compile() {
  local py=$1 site
  site=$("$py" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  # compileall is incremental (an up-to-date .pyc is kept) and exits 1 when
  # any file does not compile: some wheels ship templates and Python-2-only
  # files that are never imported; it lists those on stdout, discarded here.
  "$py" -m compileall -q -j 0 "$site" >/dev/null || true
}

# Real torch + real Lightning for the tests, demo and benchmarks, in a venv on
# Debian's python3.11 (the interpreter lives in the executable: one of the two
# layouts we support; pyenv's 3.11 reuses these site-packages for the other).
venv_main() {
  if [ ! -x .venv/bin/python ]; then
    /usr/bin/python3.11 -m venv .venv
  fi
  if ! { .venv/bin/python -c "import torch, pytorch_lightning, pytest, pytest_timeout, xdist, hta, jsonschema, perfetto" \
           2>/dev/null && [ -x .venv/bin/py-spy ]; }; then
    .venv/bin/pip install -q --upgrade pip
    .venv/bin/pip install -q --no-compile -r .ci/requirements.txt
  fi
  byte_compile .venv/bin/python
}

# What the demo needs of it: torch and Lightning.
venv_demo() {
  [ -x .venv/bin/python ] || /usr/bin/python3.11 -m venv .venv
  if ! .venv/bin/python -c "import torch, pytorch_lightning" 2>/dev/null; then
    .venv/bin/pip install -q --no-compile -r .ci/requirements-demo.txt
  fi
}

# Lightning wheels whose profiler modules run on every CPython 3.8-3.13
# (tests/integration/lightning_site.py).
lightning_wheels() {
  mkdir -p .venv/wheels
  local v
  for v in 2.3.3 2.6.6; do
    ls .venv/wheels/pytorch_lightning-$v-*.whl >/dev/null 2>&1 ||
      .venv/bin/pip download -q --no-deps --dest .venv/wheels "pytorch-lightning==$v"
  done
  ls .venv/wheels/lightning-2.6.6-*.whl >/dev/null 2>&1 ||
    .venv/bin/pip download -q --no-deps --dest .venv/wheels "lightning==2.6.6"
}

# torch 1.13.1 + Lightning 2.2.5 for the op tests' torch-1.13 cases, on
# pyenv's CPython 3.10 (torch 1.13 supports 3.7-3.10).  The pins are complete
# (--no-deps); a copy of the file in the venv marks it installed.
PY310=/root/.pyenv/versions/3.10.13/bin/python3.10
venv_torch113() {
  if [ ! -x "$PY310" ]; then
    echo "deps: no $PY310 (pyenv): .venv-torch113 not made, the torch-1.13 op tests will skip" >&2
    return 0
  fi
  [ -x .venv-torch113/bin/python ] || "$PY310" -m venv .venv-torch113
  if ! { cmp -s .ci/requirements-torch113.txt .venv-torch113/requirements.txt &&
         .venv-torch113/bin/python -c "import torch, pytorch_lightning" 2>/dev/null; }; then
    .venv-torch113/bin/pip install -q --no-compile --no-deps -r .ci/requirements-torch113.txt
    cp .ci/requirements-torch113.txt .venv-torch113/requirements.txt
  fi
  byte_compile .venv-torch113/bin/python
}

# torch_xla 2.9.0 (the newest on PyPI) with its own torch 2.9.0 and the same
# Lightning, on Debian's python3.11: the XLA tests (test_xla.py) run a
# Lightning fit on torch_xla's CPU PJRT device (built into _XLAC: no libtpu
# or plug-in).  ~4.2 GB of wheels, most of them the CUDA libraries torch
# 2.9.0 will not import without.  A copy of the file in the venv marks it
# installed.
venv_xla() {
  [ -x .venv-xla/bin/python ] || /usr/bin/python3.11 -m venv .venv-xla
  if ! { cmp -s .ci/requirements-xla.txt .venv-xla/requirements.txt &&
         .venv-xla/bin/python -c "import torch, torch_xla, pytorch_lightning" 2>/dev/null; }; then
    .venv-xla/bin/pip install -q --no-compile -r .ci/requirements-xla.txt
    cp .ci/requirements-xla.txt .venv-xla/requirements.txt
  fi
  byte_compile .venv-xla/bin/python
}

# Parts that only download and unpack run side by side; the first failure
# is the exit status.
pids=()
bg() { "$@" & pids+=($!); }
wait_all() {
  local rc=0 p
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  pids=()
  return $rc
}

modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(apt python roots)
[ "${modes[*]}" != demo ] || modes=(apt-demo venv-demo)
for m in "${modes[@]}"; do
  case "$m" in
    apt) apt_install "${APT_BUILD[@]}" "${APT_TEST[@]}" ;;
    apt-demo) apt_install "${APT_BUILD[@]}" ;;
    venv-demo) venv_demo ;;
    python)
      bg venv_torch113
      bg venv_xla
      venv_main
      bg lightning_wheels
      wait_all ;;
    roots)
      # Root file systems of other Debian suites for the container tests
      # (once; cached in /var/cache/ltrace-bpf/roots): sid with CPython
      # 3.13-3.15 and torch 2.15, bullseye with glibc 2.31.
      bg bash tests/roots/build.sh bullseye >/dev/null
      bash tests/roots/build.sh sid >/dev/null
      wait_all ;;
    *) echo "deps: unknown part '$m' (apt, apt-demo, venv-demo, python, roots, demo)" >&2; exit 2 ;;
  esac
done
echo "deps: ok"
