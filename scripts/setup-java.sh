#!/usr/bin/env bash
# Build the Java-client driver of the integration tests (tests/java, Apache Kafka's kafka-clients 4.x); idempotent.
#
#   bash scripts/setup-java.sh          # what scripts/setup.sh runs; the Java tests also call it themselves
#
# Steps, each printed on stderr, each skipped when already satisfied:
#   1. tools: `java` and `mvn` (a JDK >= 17 and Maven); when one is missing, apt-get installs
#      default-jdk-headless / maven (root or sudo needed only then).
#   2. build: `mvn -q -B package` in tests/java, which writes
#        tests/java/target/kbroker-java-driver.jar   the driver classes
#        tests/java/target/classpath.txt             its runtime jars in ~/.m2 (kafka-clients, zstd-jni, lz4-java,
#                                                    snappy-java, slf4j), ':'-separated
#      Maven fetches from Maven Central only what ~/.m2 lacks (every version is pinned in pom.xml), so a warm
#      ~/.m2 builds offline. Skipped when tests/java/target/build.stamp holds the hash of pom.xml, the sources and
#      the JDK version, and the jar and every classpath entry exist.
#   3. smoke: the freshly built driver runs an empty spec and must print the kafka-clients version.
# Any failure stops the script with the failing command and a non-zero exit.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
trap 'die "setup-java failed at line $LINENO: $BASH_COMMAND"' ERR

DRIVER_DIR="$REPO/tests/java"
JAR="$DRIVER_DIR/target/kbroker-java-driver.jar"
CLASSPATH_FILE="$DRIVER_DIR/target/classpath.txt"
STAMP="$DRIVER_DIR/target/build.stamp"
MAIN=kbroker.driver.Driver

# ------------------------------------------------------------------------------------------------ 1. tools
missing=()
command -v java >/dev/null 2>&1 && command -v javac >/dev/null 2>&1 || missing+=(default-jdk-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
if ((${#missing[@]})); then
    SUDO=()
    if [[ $EUID -ne 0 ]]; then
        command -v sudo >/dev/null 2>&1 || die "need root (or sudo) to apt-get install ${missing[*]}"
        SUDO=(sudo)
    fi
    log "apt: missing ${missing[*]}; running apt-get update + install"
    "${SUDO[@]}" apt-get update
    DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y "${missing[@]}"
fi
command -v java >/dev/null || die "java not on PATH"
command -v mvn >/dev/null || die "mvn not on PATH"
JAVA_VERSION="$(java -version 2>&1 | head -n1)"
log "tools: $JAVA_VERSION; $(mvn -v 2>/dev/null | head -n1 | sed 's/\x1b\[[0-9;]*m//g')"

# ------------------------------------------------------------------------------------------------ 2. build
inputs_hash() {
    {
        echo "$JAVA_VERSION"
        cat "$DRIVER_DIR/pom.xml"
        (cd "$DRIVER_DIR" && find src -type f | LC_ALL=C sort | while read -r f; do echo "== $f"; cat "$f"; done)
    } | sha256sum | cut -d' ' -f1
}

# True when the stamp matches and everything the tests will put on the classpath exists.
up_to_date() {
    [[ -f $STAMP && -f $JAR && -s $CLASSPATH_FILE ]] || return 1
    [[ "$(cat "$STAMP")" == "$(inputs_hash)" ]] || return 1
    local entry
    while IFS= read -r -d ':' entry; do
        [[ -f $entry ]] || return 1
    done < <(printf '%s:' "$(cat "$CLASSPATH_FILE")")
}

if up_to_date; then
    log "java driver: up to date ($JAR, stamp $STAMP)"
else
    log "java driver: mvn -q -B package in $DRIVER_DIR (downloads only what ~/.m2 lacks)"
    rm -f "$STAMP"
    (cd "$DRIVER_DIR" && mvn -q -B -Dstyle.color=never package)
    [[ -f $JAR ]] || die "mvn package did not produce $JAR"
    [[ -s $CLASSPATH_FILE ]] || die "mvn package did not write $CLASSPATH_FILE"

    # ------------------------------------------------------------------------------------------ 3. smoke
    log "java driver: smoke run of $MAIN with an empty spec"
    out="$(java -cp "$JAR:$(cat "$CLASSPATH_FILE")" "$MAIN" '{"bootstrap": "127.0.0.1:9", "steps": []}')"
    [[ "$out" == *'"clientVersion":"4.'* ]] || die "driver smoke run printed: $out"
    inputs_hash > "$STAMP"
fi
version="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$DRIVER_DIR/pom.xml")"
log "java driver ready: kafka-clients $version, $JAR + $CLASSPATH_FILE"
