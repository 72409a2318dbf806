#!/usr/bin/env bash
# make test: every check, in phases, each phase's wall time printed at the
# end (and in build/test-phases.txt).
#
#   deps-apt      Debian packages (compilers and libraries first: the builds need them)
#   fetch         PyPI wheels, the torch-1.13 venv and the debootstrapped roots: network
#                 and disk, so fetched in the background while everything compiles
#   check         include layering + clang-format (no build)
#   build         one make, one job server: the product, the bridge, the ASan+UBSan unit
#                 tests and the fuzz targets (each source compiled once per flavour)
#   unit          the unit tests under ASan+UBSan (the scale tests in a plain build)
#   fuzz          both libFuzzer targets at once, FUZZ_SECONDS each
#   fetch-wait    what is left of the fetch
#   integration   pytest tests/integration (real BPF, CPythons, torch, Lightning, Slurm,
#                 Chromium), with a per-test timeout and the 30 slowest tests listed
#
# Every phase runs even if an earlier one failed (a red unit test should not
# hide a red integration test); the exit status is the first failure's.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p build
PHASES=build/test-phases.txt
: >"$PHASES"
first_rc=0
t_start=$(date +%s)

phase() {
  local name=$1 t0 rc
  shift
  echo "=== make test: $name" >&2
  t0=$(date +%s)
  "$@"
  rc=$?
  printf '%-12s %5d s  %s\n' "$name" $(($(date +%s) - t0)) "$([ $rc -eq 0 ] && echo ok || echo "FAILED (exit $rc)")" \
    | tee -a "$PHASES" >&2
  [ $first_rc -ne 0 ] || first_rc=$rc
  return $rc
}

summary() {
  {
    echo "=== make test: phases (wall time)"
    cat "$PHASES"
    printf '%-12s %5d s\n' total $(($(date +%s) - t_start))
  } >&2
}

# The compilers must be there before anything builds; without them nothing
# else can run.
phase deps-apt bash .ci/deps.sh apt || { summary; exit 1; }

# Wheels and roots download while the builds use the CPUs.
fetch_log=build/deps-fetch.log
bash .ci/deps.sh python roots >"$fetch_log" 2>&1 &
fetch_pid=$!

# Under `make test` this script runs at MAKELEVEL 1, where the Makefile
# adds no -j: every make here says how many jobs itself.
MAKE_J=(make --no-print-directory -j"$(nproc 2>/dev/null || echo 2)")
phase check "${MAKE_J[@]}" check
phase build "${MAKE_J[@]}" all build/scale-tests asan-build fuzz-build
phase unit "${MAKE_J[@]}" asan
phase fuzz "${MAKE_J[@]}" fuzz
phase fetch-wait wait "$fetch_pid" || tail -20 "$fetch_log" >&2
phase integration "${MAKE_J[@]}" integration-test UNIT_TESTS=build-asan/unit-tests
summary
exit $first_rc
