"""Apache Kafka's own Connect runtime for tests and benchmarks: ``connect-distributed.sh`` (the class
org.apache.kafka.connect.cli.ConnectDistributed) run as a JVM worker against a kbroker broker, with Kafka's
FileStream connectors and JsonConverter on its classpath.

``classpath() -> str`` is the ':'-separated jar list (connect-runtime, connect-file, connect-json and their
dependencies, Kafka 4.3.1: see pom.xml for why not 4.4.0). The jars come from tests/kafka_connect/pom.xml through
Maven into ~/.m2: outside CI only when they are already there (``mvn -o``: a developer machine is never made to
download ~33 MB for a test, the test skips), under ``CI=true`` fetched when missing, and a failure to get them fails
the test (scripts/setup.sh resolves them up front). The classpath is cached in tests/kafka_connect/target/.
``resolve_classpath(offline)`` is the same without pytest (bench/connect.py): it raises ``RuntimeError``.

``KafkaConnectWorker(tmpdir, props)`` is one worker process: ``worker.properties`` written from ``props`` (Kafka's
key names), ``start()`` waits (bounded) until its REST API answers ``GET /`` with 200, ``stop()`` is SIGTERM (Kafka's
shutdown hook stops connectors and tasks and commits offsets) then SIGKILL after a bound. Its stdout+stderr go to
``worker.log`` in ``tmpdir`` (slf4j-simple, level ``log_level``). ``rest(url, method, path, body) -> (status, json)``
is a plain urllib JSON call returning the status of 4xx/5xx answers too.
"""
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
POM = HERE / "pom.xml"
CLASSPATH_FILE = HERE / "target" / "classpath.txt"
MAIN = "org.apache.kafka.connect.cli.ConnectDistributed"
# C1 only and a small serial-GC heap: tests share 2 cores with brokers, and the worker moves a few records.
# bench/connect.py passes its own flags (full JIT) so the figures are the worker's steady state.
TEST_JVM_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xms64m", "-Xmx384m", "-Djava.awt.headless=true")
RESOLVE_TIMEOUT = 240.0   # under pytest --timeout=300
START_TIMEOUT = 60.0      # JVM start + plugin scan + REST up: ~7 s on an idle 2-core machine


def in_ci():
    return os.environ.get("CI", "").lower() == "true"


def _cached_classpath():
    if not CLASSPATH_FILE.is_file() or CLASSPATH_FILE.stat().st_mtime < POM.stat().st_mtime:
        return None
    text = CLASSPATH_FILE.read_text().strip()
    if not text or not all(os.path.isfile(p) for p in text.split(":")):
        return None
    return text


def resolve_classpath(offline=True):
    """The worker's jars, ':'-separated; ``offline`` = only what ~/.m2 holds (``mvn -o``). RuntimeError if not."""
    cached = _cached_classpath()
    if cached:
        return cached
    if shutil.which("java") is None or shutil.which("mvn") is None:
        raise RuntimeError("java or mvn is not installed (Kafka's Connect runtime needs both)")
    cmd = ["mvn", "-q", "-B", "-Dstyle.color=never", "-f", str(POM), "dependency:build-classpath",
           "-Dmdep.outputFile=" + str(CLASSPATH_FILE), "-Dmdep.includeScope=runtime"]
    if offline:
        cmd.insert(1, "-o")
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=RESOLVE_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise RuntimeError("mvn did not resolve Kafka's Connect runtime in %gs" % RESOLVE_TIMEOUT) from None
    if done.returncode == 0 and CLASSPATH_FILE.is_file():
        # The dependency plugin leaves the file untouched when its content is unchanged: mark it fresh, or a pom
        # edited without changing the jars would look stale forever.
        os.utime(CLASSPATH_FILE)
    cached = _cached_classpath()
    if done.returncode != 0 or not cached:
        output = (done.stdout + done.stderr).decode(errors="replace")[-2000:]
        raise RuntimeError("Kafka's Connect runtime is not in ~/.m2 (mvn exit %d): %s" % (done.returncode, output))
    return cached


def classpath():
    """The worker's jars (skips the test, or fails it under CI=true, when they cannot be had)."""
    import pytest

    try:
        return resolve_classpath(offline=not in_ci())
    except RuntimeError as exc:
        if in_ci():
            pytest.fail("%s; CI=true so this is a failure, not a skip" % exc)
        pytest.skip(str(exc))


def rest(url, method="GET", path="/", body=None, timeout=30.0):
    """One JSON request -> (status, decoded JSON or None for an empty body, or the raw text if not JSON)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url.rstrip("/") + path, data=data, method=method,
                                 headers={"Content-Type": "application/json", "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    if not raw:
        return status, None
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


class KafkaConnectWorker:
    """Kafka's ConnectDistributed in its own directory ``tmpdir`` (worker.properties, worker.log)."""

    def __init__(self, tmpdir, props, jars, jvm_flags=TEST_JVM_FLAGS, log_level="info"):
        self.dir = Path(tmpdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.props = dict(props)
        self.jars = jars
        self.jvm_flags = tuple(jvm_flags)
        self.log_level = log_level
        self.config_path = self.dir / "worker.properties"
        self.log_path = self.dir / "worker.log"
        self.proc = None
        listener = self.props["listeners"].split(",")[0]          # e.g. http://127.0.0.1:28083
        self.url = listener.rstrip("/") + "/"

    @property
    def pid(self):
        return self.proc.pid if self.proc is not None else None

    def start(self, timeout=START_TIMEOUT):
        self.config_path.write_text("".join("%s=%s\n" % kv for kv in self.props.items()))
        argv = ["java", *self.jvm_flags, "-Dorg.slf4j.simpleLogger.defaultLogLevel=" + self.log_level,
                "-Dorg.slf4j.simpleLogger.showDateTime=true", "-cp", self.jars, MAIN, str(self.config_path)]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         cwd=str(self.dir))
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("Kafka's Connect worker exited with %d before its REST API answered:\n%s"
                                   % (self.proc.returncode, self.log_tail()))
            try:
                if rest(self.url, timeout=2.0)[0] == 200:
                    return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("Kafka's Connect worker did not answer GET / in %gs:\n%s"
                                   % (timeout, self.log_tail()))
            time.sleep(0.2)

    def stop(self, timeout=20.0):
        """SIGTERM (the shutdown hook stops tasks and commits offsets), SIGKILL after ``timeout``; exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def log_tail(self, lines=60):
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""
