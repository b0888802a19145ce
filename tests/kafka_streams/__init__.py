"""Apache Kafka's own Streams library (kafka-streams 4.4.0) running a WordCount main of our own
(src/main/java/kbroker/streams/WordCount.java, the logic of Kafka's WordCountDemo) against a kbroker broker:
tests/integration/test_streams_examples.py (the broker-side compatibility check and the oracle of kbroker.streams'
WordCount) and bench/streams.py.

``build(offline) -> classpath`` runs ``mvn -q -B package`` in this directory when its stamp is stale (the stamp,
target/build.stamp, holds the hash of pom.xml, the Java sources and the JDK version; the jar and every classpath
entry must exist) and returns ``target/kbroker-kafka-streams.jar:<runtime jars in ~/.m2>``. ``offline`` = ``mvn
-o``: only what ~/.m2 holds (a developer machine is never made to download ~20 MB for a test). RuntimeError when it
cannot. ``classpath()`` is the pytest form: outside CI offline and a skip, under ``CI=true`` online (scripts/setup.sh
resolved it up front) and a failure.

``KafkaStreamsWordCount(tmpdir, jars, bootstrap, input_topic, apps, extra)`` is one JVM hosting one KafkaStreams
instance per ``(application id, output topic, processing guarantee)`` of ``apps``; ``extra`` are Streams configs
(Kafka's key names) applied to all. Its stdout protocol (see WordCount.java) is parsed into ``states[app]`` (the
state sequence, e.g. ``["REBALANCING", "RUNNING"]``) and ``topology[app]`` (the description text); ``wait_state(app,
"RUNNING")`` waits (bounded). ``stop()`` writes "stop" (each instance closes: commit, leave the group), waits and
returns the exit code (0; 2 when an instance reached ERROR). Its log (slf4j-simple at ``log_level``) goes to
``streams.log`` in ``tmpdir``.
"""
import hashlib
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
POM = HERE / "pom.xml"
JAR = HERE / "target" / "kbroker-kafka-streams.jar"
CLASSPATH_FILE = HERE / "target" / "classpath.txt"
STAMP = HERE / "target" / "build.stamp"
MAIN = "kbroker.streams.WordCount"
# C1 only and a small serial-GC heap: the test shares 2 cores with the broker and moves a dozen records.
TEST_JVM_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xms64m", "-Xmx384m", "-Djava.awt.headless=true")
BUILD_TIMEOUT = 240.0    # a cold ~/.m2 downloads kafka-streams + rocksdbjni (~60 MB); under pytest --timeout=300


def in_ci():
    return os.environ.get("CI", "").lower() == "true"


def _inputs_hash():
    h = hashlib.sha256()
    h.update(subprocess.run(["java", "-version"], capture_output=True).stderr)
    h.update(POM.read_bytes())
    for path in sorted((HERE / "src").rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(HERE)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _built(digest):
    if not (STAMP.is_file() and JAR.is_file() and CLASSPATH_FILE.is_file()):
        return None
    if STAMP.read_text().strip() != digest:
        return None
    text = CLASSPATH_FILE.read_text().strip()
    if not text or not all(os.path.isfile(p) for p in text.split(":")):
        return None
    return "%s:%s" % (JAR, text)


def build(offline=True):
    """Jar + runtime jars, ':'-separated; builds when stale. RuntimeError with mvn's output when it cannot."""
    if shutil.which("java") is None or shutil.which("mvn") is None:
        raise RuntimeError("java or mvn is not installed (Kafka Streams' WordCount needs both)")
    digest = _inputs_hash()
    cp = _built(digest)
    if cp:
        return cp
    STAMP.unlink(missing_ok=True)
    cmd = ["mvn", "-q", "-B", "-Dstyle.color=never", "-f", str(POM), "package"]
    if offline:
        cmd.insert(1, "-o")
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=BUILD_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise RuntimeError("mvn did not build tests/kafka_streams in %gs" % BUILD_TIMEOUT) from None
    if done.returncode == 0:
        STAMP.write_text(digest + "\n")
    cp = _built(digest)
    if done.returncode != 0 or not cp:
        output = (done.stdout + done.stderr).decode(errors="replace")[-2000:]
        raise RuntimeError("tests/kafka_streams did not build (mvn exit %d%s): %s"
                           % (done.returncode, ", offline: is kafka-streams 4.4.0 in ~/.m2?" if offline else "",
                              output))
    return cp


def classpath():
    """build() for tests: skips outside CI when it cannot build offline, fails under CI=true."""
    import pytest

    try:
        return build(offline=not in_ci())
    except RuntimeError as exc:
        if in_ci():
            pytest.fail("%s; CI=true so this is a failure, not a skip" % exc)
        pytest.skip(str(exc))


class KafkaStreamsWordCount:
    """One JVM running Kafka's Streams WordCount for each of ``apps`` = [(app_id, output_topic, guarantee)]."""

    def __init__(self, tmpdir, jars, bootstrap, input_topic, apps, extra=None, jvm_flags=TEST_JVM_FLAGS,
                 log_level="info"):
        self.dir = Path(tmpdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.argv = ["java", *jvm_flags, "-Dorg.slf4j.simpleLogger.defaultLogLevel=" + log_level,
                     "-Dorg.slf4j.simpleLogger.showDateTime=true", "-cp", jars, MAIN, bootstrap,
                     str(self.dir / "state"), input_topic]
        self.argv += ["%s:%s:%s" % app for app in apps]
        self.argv += ["%s=%s" % kv for kv in (extra or {}).items()]
        self.log_path = self.dir / "streams.log"
        self.proc = None
        self.version = None
        self.states = {app[0]: [] for app in apps}
        self.topology = {}
        self.closed = {}
        self.lines = []
        self._cond = threading.Condition()

    @property
    def pid(self):
        return self.proc.pid if self.proc is not None else None

    def start(self):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                     cwd=str(self.dir))
        log.close()
        threading.Thread(target=self._read, name="kafka-streams-stdout", daemon=True).start()
        return self

    def _read(self):
        current = None       # the app whose topology description lines follow
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            with self._cond:
                self.lines.append(line)
                word, _, rest = line.partition(" ")
                if word == "VERSION":
                    self.version = rest
                elif word == "TOPOLOGY":
                    current = rest
                    self.topology[current] = ""
                elif word == "STATE":
                    app, new, _old = rest.split(" ")
                    self.states[app].append(new)
                    current = None
                elif word == "CLOSED":
                    app, state, done = rest.split(" ")
                    self.closed[app] = (state, done == "true")
                elif current is not None:
                    self.topology[current] += line + "\n"
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_state(self, app, state, timeout=60.0):
        deadline = time.monotonic() + timeout
        with self._cond:
            while state not in self.states[app]:
                left = deadline - time.monotonic()
                if self.proc.poll() is not None or left <= 0:
                    raise AssertionError("Kafka Streams app %s did not reach %s in %gs (states %s, exit %s):\n%s"
                                         % (app, state, timeout, self.states[app], self.proc.poll(),
                                            self.log_tail()))
                self._cond.wait(min(left, 0.5))

    def stop(self, timeout=60.0):
        """Graceful close of every instance; the JVM's exit code (killed after ``timeout``: then None)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(b"stop\n")
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                return None
        return self.proc.returncode

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def log_tail(self, lines=60):
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""
