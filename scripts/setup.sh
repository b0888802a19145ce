#!/usr/bin/env bash
# Idempotent setup for kbroker on Debian 12 (CI: a fresh clone, run as root; apt, PyPI and npm are reachable).
#
#   bash scripts/setup.sh                 # everything the test suite needs (scripts/test.sh runs this)
#   bash scripts/setup.sh --broker        # the Python environment + kcat: scripts/run-broker.sh, README quickstart
#   bash scripts/setup.sh --cluster       # the Python environment + ZooKeeper (java): scripts/cluster.sh
#   bash scripts/setup.sh --python-only   # the Python environment only
#   ... --bench                           # with any of the above: also bench/'s extras (requirements/bench.txt)
#
# Steps, each skipped when already satisfied:
#   1. apt (only when something is missing; `apt-get update` first): kcat, zookeeper (Debian's package: jars in
#      /usr/share/java, nothing is started), burrow (LinkedIn's lag monitor, /usr/bin/Burrow; the tests run their
#      own with a generated config), krb5-kdc/krb5-admin-server/krb5-user/libsasl2-modules-gssapi-mit (the GSSAPI
#      tests' own KDC; no service is started), libkrb5-dev in every mode (pip builds the lock's `gssapi` against
#      it), nodejs/npm if `node`/`npm` are absent, gcc if there is no C compiler,
#      python3/python3-venv/python3-dev when no usable Python >= 3.10 (with venv and C headers) is there.
#   2. Python, all of it inside $REPO/.venv (scripts/lib.sh): a virtualenv made with `python -m venv` from the
#      first Python >= 3.10 on PATH (lib.sh:kb_base_python), WITHOUT system site-packages; a .venv that is not
#      such a one (system site-packages on, moved, its interpreter gone) is made anew. Into it:
#        pip install --require-hashes --no-deps -r requirements/lock.txt   (every package, pinned and hashed)
#        KBROKER_REQUIRE_NATIVE=1 pip install --no-deps --no-build-isolation -e .   (compiles the Cython kernels
#                                                                           in place: kbroker/_native/*.so)
#      then scripts/venv_check.py --fix: the installed set must equal the lock exactly (a package that is not in
#      it is uninstalled), and kbroker._native.IMPL must be "cython". A stamp in build/ (hash of the lock files,
#      setup.py, pyproject.toml, the kernel sources and the interpreter) skips the installs when nothing changed.
#   3. npm: kafkajs 2.2.4 into tests/js/node_modules (`npm ci`, from the committed lockfile).
#   4. Java: scripts/setup-java.sh, when that script exists (the Java client test driver); Kafka's Connect runtime
#      (tests/kafka_connect/pom.xml resolved into ~/.m2); Kafka's Streams library and our WordCount main
#      (tests/kafka_streams: mvn package, stamped).
# Every action is printed on stderr; any failure stops the script with the failing command.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
trap 'die "setup failed at line $LINENO: $BASH_COMMAND"' ERR
cd "$REPO"

MODE=full
BENCH=0
for arg in "$@"; do
    case "$arg" in
        --broker) MODE=broker ;;
        --cluster) MODE=cluster ;;
        --python-only) MODE=python ;;
        --bench) BENCH=1 ;;
        *) die "unknown argument $arg (usage: setup.sh [--broker | --cluster | --python-only] [--bench])" ;;
    esac
done
KAFKAJS_VERSION=2.2.4
LOCK=requirements/lock.txt
BENCH_LOCK=requirements/bench.txt

# ------------------------------------------------------------------------------------------------ 1. apt
pkg_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
want_pkg() { pkg_installed "$1" || missing+=("$1"); }

missing=()
case $MODE in
    full)
        want_pkg kcat; want_pkg zookeeper; want_pkg burrow
        # SASL GSSAPI tests: a throwaway MIT KDC (krb5kdc, kdb5_util; kadmin.local), kinit, and kcat's Kerberos
        # plugin for cyrus-sasl (without it librdkafka reports "No worthy mechs found").
        want_pkg krb5-kdc; want_pkg krb5-admin-server; want_pkg krb5-user; want_pkg libsasl2-modules-gssapi-mit
        command -v node >/dev/null 2>&1 || missing+=(nodejs)
        command -v npm >/dev/null 2>&1 || missing+=(npm)
        ;;
    broker) want_pkg kcat ;;
    cluster) want_pkg zookeeper ;;
esac
command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
# The lock's `gssapi` (SASL GSSAPI) has no Linux wheel on PyPI: pip compiles it against MIT Kerberos (krb5-config).
want_pkg libkrb5-dev
BASE_PY="$(kb_base_python || true)"
if [[ -z "$BASE_PY" ]]; then
    missing+=(python3 python3-venv python3-dev)
else
    if [[ ! -x "$VENV/bin/python" ]]; then
        # Debian moves ensurepip (which `python -m venv` needs) into python3-venv.
        "$BASE_PY" -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
    fi
    # The headers the kernels compile against are those of the interpreter the venv runs.
    HDR_PY="$BASE_PY"
    "$VENV/bin/python" -c '' 2>/dev/null && HDR_PY="$("$VENV/bin/python" -c 'import sys; print(sys._base_executable)')"
    if ! "$HDR_PY" -c 'import os, sys, sysconfig
sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)'; then
        # Only a distribution Python lacks its headers; Debian ships them in python3-dev.
        [[ "$HDR_PY" == /usr/bin/python3* ]] || die "$HDR_PY has no Python.h (C headers)"
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

case $MODE in full | broker) command -v kcat >/dev/null || die "kcat not on PATH after install" ;; esac
case $MODE in full | cluster)
    command -v java >/dev/null || die "java not on PATH after installing zookeeper"
    for jar in /usr/share/java/zookeeper.jar /usr/share/java/slf4j-simple.jar; do
        [[ -e $jar ]] || die "$jar missing after installing zookeeper"
    done
    ;;
esac
[[ $MODE != full ]] || command -v Burrow >/dev/null || die "Burrow not on PATH after installing burrow"

# ------------------------------------------------------------------------------------------------ 2. Python
BASE_PY="$(kb_base_python)" || die "no Python >= 3.10 on PATH (nor after installing python3)"
PY="$(kb_python)"

# Why the existing .venv cannot be used as it is (empty when it can).
venv_defect() {
    [[ -d "$VENV" ]] || { echo "it does not exist"; return; }
    [[ -x "$PY" ]] && "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' 2>/dev/null \
        || { echo "its interpreter does not run or is older than 3.10"; return; }
    grep -qiE '^include-system-site-packages *= *false' "$VENV/pyvenv.cfg" 2>/dev/null \
        || { echo "it sees system site-packages (pyvenv.cfg)"; return; }
    # A venv copied or moved from elsewhere still names its old place in every script's #! line.
    [[ "$(head -n1 "$VENV/bin/pip" 2>/dev/null)" == "#!$VENV/bin/python"* ]] \
        || { echo "its scripts point elsewhere (moved or copied)"; return; }
}
defect="$(venv_defect)"
if [[ -n "$defect" ]]; then
    [[ ! -e "$VENV" ]] || { log "python: removing $VENV: $defect"; rm -rf "$VENV"; }
    log "python: creating $VENV from $BASE_PY ($("$BASE_PY" -V 2>&1)), no system site-packages"
    "$BASE_PY" -m venv "$VENV"
fi

mkdir -p build
STAMP="build/setup.stamp"
inputs_hash() {
    {
        "$PY" -c 'import sys; print(sys.prefix, sys.version)'
        echo "bench=$BENCH"
        cat "$LOCK" setup.py pyproject.toml kbroker/_native/*.pyx kbroker/_native/*.pxd kbroker/_native/*.h
        [[ $BENCH == 0 ]] || cat "$BENCH_LOCK"
    } | sha256sum | cut -d' ' -f1
}
# True when the stamp matches, every kernel has its .so for this interpreter, kbroker imports from this checkout
# (checked from / so the cwd does not shadow it) and the installed set equals the lock.
python_up_to_date() {
    [[ -f $STAMP && "$(cat "$STAMP")" == "$(inputs_hash)" ]] || return 1
    local suffix pyx
    suffix="$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
    for pyx in kbroker/_native/*.pyx; do
        [[ -e "${pyx%.pyx}$suffix" ]] || return 1
    done
    [[ "$(cd / && "$PY" -c 'import kbroker, os; print(os.path.dirname(os.path.dirname(kbroker.__file__)))' \
          2>/dev/null)" == "$REPO" ]] || return 1
    "$PY" scripts/venv_check.py --quiet >/dev/null 2>&1
}

if python_up_to_date; then
    log "python: $VENV matches $LOCK and kbroker is installed in editable mode (stamp $STAMP)"
else
    rm -f "$STAMP"
    locks=(-r "$LOCK")
    [[ $BENCH == 0 ]] || locks+=(-r "$BENCH_LOCK")
    log "python: pip install --require-hashes --no-deps ${locks[*]} (into $VENV)"
    "$PY" -m pip install --disable-pip-version-check --require-hashes --no-deps "${locks[@]}"
    log "python: pip install --no-deps --no-build-isolation -e . (compiles the Cython kernels; required)"
    KBROKER_REQUIRE_NATIVE=1 "$PY" -m pip install --disable-pip-version-check --no-deps --no-build-isolation -e .
    log "python: checking $VENV against the lock (removing packages it does not list)"
    "$PY" scripts/venv_check.py --fix || die "$VENV does not match $LOCK (see above)"
    "$PY" -m pip check --disable-pip-version-check >&2 || die "pip check: inconsistent dependencies in $VENV"
    inputs_hash > "$STAMP"
fi
impl="$(cd / && env -u KBROKER_PURE "$PY" -c 'import kbroker._native as n; print(n.IMPL)')" \
    || die "kbroker._native does not import with $PY"
[[ "$impl" == cython ]] || die "kbroker._native.IMPL is '$impl': the Cython kernels did not build"
log "python: $("$PY" -V 2>&1) in $VENV, exactly $LOCK$([[ $BENCH == 0 ]] || echo " + $BENCH_LOCK"), kbroker._native.IMPL=$impl"

# ------------------------------------------------------------------------------------------------ 3. npm
if [[ $MODE == full ]]; then
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

# ------------------------------------------------------------------------------------------------ 4. Java
if [[ $MODE == full && -f scripts/setup-java.sh ]]; then
    log "java: bash scripts/setup-java.sh"
    bash scripts/setup-java.sh
fi
# Apache Kafka's Connect runtime (tests/kafka_connect/pom.xml: test_connect_java.py, bench/connect.py): its jars
# into ~/.m2 and their classpath into tests/kafka_connect/target/ (only what ~/.m2 lacks; a warm ~/.m2 is offline).
if [[ $MODE == full && -f tests/kafka_connect/pom.xml ]]; then
    log "java: Kafka's Connect runtime (tests/kafka_connect)"
    "$(kb_python)" -c 'import tests.kafka_connect as k; print(len(k.resolve_classpath(offline=False).split(":")), "jars")' >&2
fi
# Apache Kafka's Streams library running our WordCount main (tests/kafka_streams: test_streams_examples.py,
# bench/streams.py): `mvn package` there when its stamp is stale (only what ~/.m2 lacks is downloaded).
if [[ $MODE == full && -f tests/kafka_streams/pom.xml ]]; then
    log "java: Kafka's Streams library + WordCount (tests/kafka_streams)"
    "$(kb_python)" -c 'import tests.kafka_streams as k; print(len(k.build(offline=False).split(":")), "jars")' >&2
fi
log "setup done"
