#!/usr/bin/env bash
# Idempotent setup for kbroker on Debian 12 (CI: a fresh clone, run as root; apt, PyPI and npm are reachable).
#
#   bash scripts/setup.sh                 # everything the test suite needs
#   bash scripts/setup.sh --python-only   # only `pip install -e .` (what scripts/run-broker.sh needs)
#
# Steps, each skipped when already satisfied:
#   1. apt (only when something is missing; `apt-get update` first): kcat, zookeeper (Debian's package: jars in
#      /usr/share/java, nothing is started), burrow (LinkedIn's lag monitor, /usr/bin/Burrow; the tests run their
#      own with a generated config), nodejs/npm if `node`/`npm` are absent, gcc if there is no C
#      compiler, python3-venv/python3-dev when a Debian system Python needs them.
#   2. Python: the interpreter chosen by scripts/lib.sh:kb_python (a .venv is created only for an externally
#      managed interpreter); build tools (setuptools, wheel, Cython), then `pip install --no-build-isolation
#      -e '.[test]'`, which compiles the Cython kernels in place (kbroker/_native/*.so). A stamp in build/
#      (hash of setup.py, pyproject.toml and the kernel sources, plus the interpreter) skips this when nothing
#      changed and every kernel's .so is present.
#   3. npm: kafkajs 2.2.4 into tests/js/node_modules (`npm ci`, from the committed lockfile).
# Every action is printed on stderr; any failure stops the script with the failing command.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
trap 'die "setup failed at line $LINENO: $BASH_COMMAND"' ERR
cd "$REPO"

PYTHON_ONLY=0
for arg in "$@"; do
    case "$arg" in
        --python-only) PYTHON_ONLY=1 ;;
        *) die "unknown argument $arg (usage: setup.sh [--python-only])" ;;
    esac
done
EXTRAS=$([[ $PYTHON_ONLY == 1 ]] && echo "" || echo "test")
KAFKAJS_VERSION=2.2.4

# ------------------------------------------------------------------------------------------------ 1. apt
pkg_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

missing=()
if [[ $PYTHON_ONLY == 0 ]]; then
    pkg_installed kcat || missing+=(kcat)
    pkg_installed zookeeper || missing+=(zookeeper)
    pkg_installed burrow || missing+=(burrow)
    command -v node >/dev/null 2>&1 || missing+=(nodejs)
    command -v npm >/dev/null 2>&1 || missing+=(npm)
fi
command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
BASE_PY="$(kb_base_python || true)"
if [[ -z "$BASE_PY" ]]; then
    missing+=(python3 python3-pip python3-venv python3-dev)
else
    PY="$(kb_python)"
    if [[ "$PY" == "$REPO/.venv/bin/python" && ! -x "$PY" ]]; then
        "$BASE_PY" -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
    fi
    if ! "$BASE_PY" -c 'import os, sys, sysconfig
sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)'; then
        # Only a distribution Python lacks its headers; Debian ships them in python3-dev.
        [[ "$(readlink -f "$BASE_PY")" == /usr/bin/python3* ]] || die "$BASE_PY has no Python.h (C headers)"
        missing+=(python3-dev)
    fi
fi

if ((${#missing[@]})); then
    SUDO=()
    if [[ $EUID -ne 0 ]]; then
        command -v sudo >/dev/null 2>&1 || die "need root (or sudo) to apt-get install ${missing[*]}"
        SUDO=(sudo)
    fi
    log "apt: missing ${missing[*]}; running apt-get update + install"
    "${SUDO[@]}" apt-get update
    DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y "${missing[@]}"
else
    log "apt: nothing missing"
fi

if [[ $PYTHON_ONLY == 0 ]]; then
    command -v kcat >/dev/null || die "kcat not on PATH after install"
    command -v Burrow >/dev/null || die "Burrow not on PATH after installing burrow"
    command -v java >/dev/null || die "java not on PATH after installing zookeeper"
    for jar in /usr/share/java/zookeeper.jar /usr/share/java/slf4j-simple.jar; do
        [[ -e $jar ]] || die "$jar missing after installing zookeeper"
    done
fi

# ------------------------------------------------------------------------------------------------ 2. Python
BASE_PY="$(kb_base_python)" || die "no python/python3 on PATH"
PY="$(kb_python)"
if [[ "$PY" == "$REPO/.venv/bin/python" && ! -x "$PY" ]]; then
    log "python: $BASE_PY is externally managed (PEP 668); creating $REPO/.venv"
    "$BASE_PY" -m venv "$REPO/.venv"
fi
# Resolve wrappers (a pyenv shim costs ~0.5 s per call) to the real interpreter once.
PY="$("$PY" -c 'import sys; print(sys.executable)')" || die "cannot run $PY"
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' \
    || die "$PY is $("$PY" -V 2>&1); kbroker needs Python >= 3.10"
"$PY" -m pip --version >/dev/null 2>&1 || die "$PY has no pip (apt-get install python3-pip)"

mkdir -p build
STAMP="build/setup.stamp"
inputs_hash() {
    {
        echo "$PY"
        "$PY" -V 2>&1
        cat setup.py pyproject.toml kbroker/_native/*.pyx kbroker/_native/*.pxd kbroker/_native/*.h 2>/dev/null
    } | sha256sum | cut -d' ' -f1
}
# True when the stamp matches, the requested extras were installed, every kernel has its .so for this
# interpreter, and kbroker imports from this checkout (checked from / so the cwd does not shadow it).
python_up_to_date() {
    [[ -f $STAMP ]] || return 1
    [[ "$(sed -n 's/^inputs=//p' "$STAMP")" == "$(inputs_hash)" ]] || return 1
    [[ -z "$EXTRAS" || "$(sed -n 's/^extras=//p' "$STAMP")" == *"$EXTRAS"* ]] || return 1
    local suffix pyx
    suffix="$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
    for pyx in kbroker/_native/*.pyx; do
        [[ -e "${pyx%.pyx}$suffix" ]] || return 1
    done
    [[ "$(cd / && "$PY" -c 'import kbroker, os; print(os.path.dirname(os.path.dirname(kbroker.__file__)))' \
          2>/dev/null)" == "$REPO" ]] || return 1
}

if python_up_to_date; then
    log "python: kbroker already installed in editable mode for $PY (stamp $STAMP)"
else
    log "python: installing build tools into $PY"
    "$PY" -m pip install --disable-pip-version-check 'setuptools>=64' wheel 'Cython>=3.0'
    target=".${EXTRAS:+[$EXTRAS]}"
    log "python: pip install --no-build-isolation -e '$target' (compiles the Cython kernels)"
    "$PY" -m pip install --disable-pip-version-check --no-build-isolation -e "$target"
    hash_now="$(inputs_hash)"
    prev_extras="$( [[ -f $STAMP ]] && sed -n 's/^extras=//p' "$STAMP" || true)"
    if [[ "$(sed -n 's/^inputs=//p' "$STAMP" 2>/dev/null || true)" != "$hash_now" ]]; then prev_extras=""; fi
    case ",$prev_extras," in *",$EXTRAS,"*) extras_now="$prev_extras" ;; *) extras_now="${prev_extras:+$prev_extras,}$EXTRAS" ;; esac
    printf 'python=%s\ninputs=%s\nextras=%s\n' "$PY" "$hash_now" "$extras_now" > "$STAMP"
fi
impl="$(cd / && env -u KBROKER_PURE "$PY" -c 'import kbroker._native as n; print(n.IMPL)')" \
    || die "kbroker._native does not import with $PY"
[[ "$impl" == cython ]] || die "kbroker._native.IMPL is '$impl': the Cython kernels did not build"
log "python: $("$PY" -V 2>&1) at $PY, kbroker._native.IMPL=$impl"

# ------------------------------------------------------------------------------------------------ 3. npm
if [[ $PYTHON_ONLY == 0 ]]; then
    installed="$(node -p "require('./tests/js/node_modules/kafkajs/package.json').version" 2>/dev/null || true)"
    if [[ "$installed" == "$KAFKAJS_VERSION" ]]; then
        log "npm: kafkajs $installed already in tests/js/node_modules"
    else
        log "npm: npm ci in tests/js (kafkajs $KAFKAJS_VERSION)"
        (cd tests/js && npm ci --no-audit --no-fund)
        installed="$(node -p "require('./tests/js/node_modules/kafkajs/package.json').version")"
        [[ "$installed" == "$KAFKAJS_VERSION" ]] || die "npm installed kafkajs $installed, want $KAFKAJS_VERSION"
    fi
    log "tools: kcat $(kcat -V 2>&1 | sed -n "s/^Version \([^ ]*\).*/\1/p" | head -n1)," \
        "zookeeper $(dpkg-query -W -f='${Version}' zookeeper), java $(java -version 2>&1 | head -n1 | cut -d'"' -f2)," \
        "node $(node --version), kafkajs $installed"
fi
log "setup done"
