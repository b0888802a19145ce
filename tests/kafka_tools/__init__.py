"""Apache Kafka's own file decoders for tests: ``kafka-dump-log.sh`` (org.apache.kafka.tools.DumpLogSegments, Kafka
4.x's kafka-tools) run as a JVM over files kbroker wrote.

``dump_log(*paths, *extra_args) -> str`` runs ``DumpLogSegments --files <paths>`` and returns its stdout (it decodes
``.log``, ``.index``, ``.timeindex``, ``.txnindex`` and ``.snapshot`` files by their suffix). The jars come from
tests/kafka_tools/pom.xml through Maven into ~/.m2: outside CI only when they are already there (``mvn -o``, so a
developer machine is never made to download ~43 MB for a unit test: the test skips), under ``CI=true`` fetched when
missing, and a failure to get them fails the test. The classpath is cached in tests/kafka_tools/target/.
"""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
POM = HERE / "pom.xml"
CLASSPATH_FILE = HERE / "target" / "classpath.txt"
MAIN = "org.apache.kafka.tools.DumpLogSegments"
JVM_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xms32m", "-Xmx256m", "-Djava.awt.headless=true")
RESOLVE_TIMEOUT = 240.0   # under pytest --timeout=300
RUN_TIMEOUT = 120.0


def in_ci():
    return os.environ.get("CI", "").lower() == "true"


def _skip_or_fail(reason):
    if in_ci():
        pytest.fail(reason + "; CI=true so this is a failure, not a skip")
    pytest.skip(reason)


def _cached_classpath():
    if not CLASSPATH_FILE.is_file() or CLASSPATH_FILE.stat().st_mtime < POM.stat().st_mtime:
        return None
    text = CLASSPATH_FILE.read_text().strip()
    if not text or not all(os.path.isfile(p) for p in text.split(":")):
        return None
    return text


def classpath():
    """The jars of Kafka's tools, ':'-separated (skips, or fails under CI, when they cannot be had)."""
    cached = _cached_classpath()
    if cached:
        return cached
    if shutil.which("java") is None or shutil.which("mvn") is None:
        _skip_or_fail("java or mvn is not installed (Kafka's DumpLogSegments needs both)")
    cmd = ["mvn", "-q", "-B", "-Dstyle.color=never", "-f", str(POM), "dependency:build-classpath",
           "-Dmdep.outputFile=" + str(CLASSPATH_FILE), "-Dmdep.includeScope=runtime"]
    if not in_ci():
        cmd.insert(1, "-o")   # only what ~/.m2 already holds
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=RESOLVE_TIMEOUT)
    except subprocess.TimeoutExpired:
        _skip_or_fail("mvn did not resolve Kafka's tools in %gs" % RESOLVE_TIMEOUT)
    if done.returncode == 0 and CLASSPATH_FILE.is_file():
        # The dependency plugin leaves the file untouched when its content is unchanged: mark it fresh, or a pom
        # edited without changing the jars would look stale forever (and Maven would run for every test).
        os.utime(CLASSPATH_FILE)
    cached = _cached_classpath()
    if done.returncode != 0 or not cached:
        output = (done.stdout + done.stderr).decode(errors="replace")[-2000:]
        _skip_or_fail("Kafka's tools are not in ~/.m2 (mvn exit %d): %s" % (done.returncode, output))
    return cached


def dump_log(*args):
    """stdout of ``kafka-dump-log.sh --files <paths...>`` plus the other arguments (e.g. "--deep-iteration")."""
    paths = [str(a) for a in args if not str(a).startswith("--")]
    options = [str(a) for a in args if str(a).startswith("--")]
    cmd = ["java", *JVM_FLAGS, "-cp", classpath(), MAIN, "--files", ",".join(paths), *options]
    done = subprocess.run(cmd, capture_output=True, timeout=RUN_TIMEOUT)
    if done.returncode != 0:
        raise AssertionError("DumpLogSegments exit %d: %s" % (done.returncode, done.stderr.decode(errors="replace")))
    return done.stdout.decode()
