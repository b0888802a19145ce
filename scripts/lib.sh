# Shared helpers for scripts/*.sh (sourced, not run). Sets REPO and defines kb_python / log / die.
#
# Interpreter choice (kb_python), first match wins:
#   1. $PYTHON if set;
#   2. $REPO/.venv/bin/python if that virtualenv exists;
#   3. `python`, else `python3`, from PATH -- unless it is an "externally managed" interpreter (PEP 668, e.g.
#      Debian's /usr/bin/python3), in which case $REPO/.venv/bin/python (setup.sh creates the venv).

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

log() { echo "[kbroker $(basename "$0")] $*" >&2; }
die() { echo "[kbroker $(basename "$0")] ERROR: $*" >&2; exit 1; }

# Print the interpreter to use (see above). Exit status 0 even if the venv still has to be created.
kb_python() {
    if [[ -n "${PYTHON:-}" ]]; then echo "$PYTHON"; return; fi
    if [[ -x "$REPO/.venv/bin/python" ]]; then echo "$REPO/.venv/bin/python"; return; fi
    local base
    base="$(kb_base_python)" || return 1
    if kb_externally_managed "$base"; then echo "$REPO/.venv/bin/python"; else echo "$base"; fi
}

# The interpreter found on PATH (used to create the venv when needed).
kb_base_python() {
    local cand
    for cand in python python3; do
        if command -v "$cand" >/dev/null 2>&1; then command -v "$cand"; return 0; fi
    done
    return 1
}

kb_externally_managed() {
    "$1" -c 'import os, sys, sysconfig
sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")) else 1)' 2>/dev/null
}
