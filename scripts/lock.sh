#!/usr/bin/env bash
# Regenerate the pinned dependency files from pyproject.toml (run after changing a dependency there; commit both):
#
#   requirements/lock.txt    the runtime dependencies, the `test` extra and the build tools (requirements/build.in),
#                            transitive ones included: what scripts/setup.sh installs into .venv
#   requirements/bench.txt   the `bench` extra, within lock.txt's pins (scripts/setup.sh --bench)
#
#   bash scripts/lock.sh             # keep every existing pin, add/remove only what the inputs changed
#   bash scripts/lock.sh --upgrade   # re-resolve everything to the newest allowed versions
#
# Both files are universal (one file for every Python >= 3.10 and platform: a version that differs by Python gets
# an environment marker) and carry the sha256 of every file PyPI serves for each pin, so setup.sh installs with
# `pip install --require-hashes`. The resolver is uv, installed at a pinned version into build/lock-tools (a
# throwaway virtualenv, never the project's .venv).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO"

UV_VERSION=0.13.9
UPGRADE=()
for arg in "$@"; do
    case "$arg" in
        --upgrade) UPGRADE=(--upgrade) ;;
        *) die "unknown argument $arg (usage: lock.sh [--upgrade])" ;;
    esac
done

TOOLS=build/lock-tools
if ! "$TOOLS/bin/uv" --version 2>/dev/null | grep -qx "uv $UV_VERSION\( .*\)\?"; then
    base="$(kb_base_python)" || die "no Python >= 3.10 on PATH"
    log "installing uv $UV_VERSION into $TOOLS"
    rm -rf "$TOOLS"
    "$base" -m venv "$TOOLS"
    "$TOOLS/bin/python" -m pip install --quiet "uv==$UV_VERSION"
fi
common=(--universal --python-version 3.10 --generate-hashes --quiet
        --custom-compile-command "bash scripts/lock.sh" "${UPGRADE[@]}")
log "resolving requirements/lock.txt (pyproject.toml [test] + requirements/build.in)"
"$TOOLS/bin/uv" pip compile pyproject.toml --extra test requirements/build.in "${common[@]}" -o requirements/lock.txt
log "resolving requirements/bench.txt (pyproject.toml [bench], within lock.txt)"
"$TOOLS/bin/uv" pip compile pyproject.toml --extra bench -c requirements/lock.txt "${common[@]}" \
    -o requirements/bench.txt
log "pinned: $(grep -c '^[A-Za-z]' requirements/lock.txt) lines in lock.txt, $(grep -c '^[A-Za-z]' requirements/bench.txt) in bench.txt"
