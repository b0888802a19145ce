# Shared helpers for scripts/*.sh (sourced, not run). Sets REPO and VENV and defines kb_python, kb_base_python,
# log and die.
#
# Every Python thing of the project runs in ONE place: $REPO/.venv, a virtualenv that scripts/setup.sh creates
# without system site-packages and fills exactly from requirements/lock.txt. Nothing is installed into, or imported
# from, the interpreter it was created from, so a dependency the project does not declare is missing on every
# machine alike.

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$REPO/.venv"

log() { echo "[kbroker $(basename "$0")] $*" >&2; }
die() { echo "[kbroker $(basename "$0")] ERROR: $*" >&2; exit 1; }

# The project's interpreter (it exists once scripts/setup.sh has run).
kb_python() { echo "$VENV/bin/python"; }

# The interpreter to create .venv from: $KBROKER_BASE_PYTHON if set, else the first of python3, python,
# python3.13 .. python3.10 on PATH that is Python >= 3.10. Prints the real executable (a pyenv shim costs ~0.5 s
# per call, so it is resolved once); status 1 when there is none.
kb_base_python() {
    local cand exe
    for cand in ${KBROKER_BASE_PYTHON:-python3 python python3.13 python3.12 python3.11 python3.10}; do
        command -v "$cand" >/dev/null 2>&1 || continue
        exe="$("$cand" -c 'import sys; assert sys.version_info >= (3, 10); print(sys.executable)' 2>/dev/null)" \
            || continue
        [[ -n "$exe" ]] && { echo "$exe"; return 0; }
    done
    return 1
}
