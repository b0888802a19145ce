#!/usr/bin/env bash
# Set up (scripts/setup.sh), then run the whole test suite with the project's isolated interpreter, .venv/bin/python
# (tests/conftest.py refuses any other and prints the environment in pytest's header). Extra arguments go to
# pytest, e.g.
#   bash scripts/test.sh -m "not integration"      bash scripts/test.sh tests/unit/test_harness.py -x
# Exit status is pytest's; "no tests collected" (5) counts as a failure too.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO"

bash scripts/setup.sh
PY="$(kb_python)"
# Nothing from the calling shell may widen the environment (the suite would pass here and fail elsewhere).
unset PYTHONPATH PYTHONHOME PYTHONUSERBASE KBROKER_ALLOW_FOREIGN_ENV
export PYTHONNOUSERSITE=1

# -rfE: list failures and errors at the end; --timeout: per-test ceiling (pytest-timeout) so a hung broker
# cannot stall CI; no cache provider: CI runs are independent and the tree stays clean; --durations=30: the 30
# slowest tests in every run's summary (the whole command must stay under 25 min on 2 cores: this says where it goes).
# Run the whole of tests/ unless the arguments name test paths themselves (e.g. tests/unit/x.py::test_y).
targets=(tests)
for arg in "$@"; do
    if [[ "$arg" != -* && -e "${arg%%::*}" ]]; then targets=(); break; fi
done
# Soak tests (long fault and scale runs, marker "soak") have their own command, `bash scripts/test.sh -m soak`:
# the whole suite must stay under 25 min on 2 cores. Any -m given replaces this default selection.
marker=(-m "not soak")
for arg in "$@"; do
    if [[ "$arg" == -m || "$arg" == -m* ]]; then marker=(); fi
done
cmd=("$PY" -m pytest "${targets[@]}" -q -p no:cacheprovider -rfE --timeout=300 --durations=30 "${marker[@]}" "$@")
log "running: ${cmd[*]}"
set +e
"${cmd[@]}"
rc=$?
set -e
if [[ $rc == 5 ]]; then
    log "FAILED: pytest collected no tests (exit 5)"
elif [[ $rc != 0 ]]; then
    log "FAILED: pytest exit status $rc"
else
    log "all tests passed"
fi
exit $rc
