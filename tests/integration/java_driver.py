"""Apache Kafka's Java client (kafka-clients 4.x) for the integration tests: tests/java's driver, run as a JVM.

``java_driver`` (a session fixture; import it into a test module) is a ``JavaDriver``: ``java_driver(bootstrap,
steps, timeout=90, **spec) -> list of step results`` runs one JVM that runs every step in order (a JVM start costs
~0.5-1 s on 2 cores, so tests batch their steps); ``java_driver.start(bootstrap, steps)`` runs one in the
background (``.result(timeout)`` collects it), for clients that must overlap. The step vocabulary and result shapes are documented in
tests/java/src/main/java/kbroker/driver/Driver.java; bytes travel as base64 (``b64``/``unb64`` from harness).
A failed step is data (its result has ``"error": {"type": <Java exception class>, "message": ...}``); the run
itself fails (HarnessError with the JVM's stderr) only when the JVM dies, exceeds ``timeout`` or prints no result.

The driver is built by scripts/setup-java.sh (Maven, ~/.m2 as the cache). The fixture runs that script once per
session: quick when the build stamp is current, a build otherwise. No ``java``, no ``mvn`` or a failed build skips
the Java tests with the reason, and fails them under ``CI=true`` (harness.skip_or_fail).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile

import pytest

from tests.integration.harness import REPO_ROOT, HarnessError, b64, skip_or_fail, unb64
from tests.integration.test_clients_common import Got

JAVA_DIR = REPO_ROOT / "tests" / "java"
JAR = JAVA_DIR / "target" / "kbroker-java-driver.jar"
CLASSPATH_FILE = JAVA_DIR / "target" / "classpath.txt"
SETUP = REPO_ROOT / "scripts" / "setup-java.sh"
MAIN = "kbroker.driver.Driver"
# Client-side JVMs only: C1 and a small serial heap start fastest and leave the cores to the broker.
JVM_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xms32m", "-Xmx256m", "-Xshare:auto",
             "-Djava.awt.headless=true")
BUILD_TIMEOUT = 540.0


def build_driver() -> str:
    """Run scripts/setup-java.sh (skip/fail on any problem); returns the driver's classpath."""
    java = shutil.which("java")
    if java is None:
        skip_or_fail("`java` is not installed (run scripts/setup-java.sh)")
    if shutil.which("mvn") is None and not JAR.exists():
        skip_or_fail("`mvn` is not installed and the Java driver is not built (run scripts/setup-java.sh)")
    try:
        done = subprocess.run(["bash", str(SETUP)], capture_output=True, timeout=BUILD_TIMEOUT)
    except subprocess.TimeoutExpired:
        skip_or_fail(f"scripts/setup-java.sh did not finish in {BUILD_TIMEOUT:g}s")
    if done.returncode != 0:
        output = (done.stdout + done.stderr).decode(errors="replace")[-3000:]
        skip_or_fail(f"scripts/setup-java.sh failed (exit {done.returncode}):\n{output}")
    return f"{JAR}:{CLASSPATH_FILE.read_text().strip()}"


def _command(classpath: str, jvm_flags=JVM_FLAGS) -> list[str]:
    return ["java", *jvm_flags, "-cp", classpath, MAIN]


def _parse(returncode, out: bytes, err: bytes, what) -> list[dict]:
    out, err = out.decode(errors="replace"), err.decode(errors="replace")
    lines = [line for line in out.splitlines() if line.strip()]
    if returncode != 0 or not lines:
        raise HarnessError(f"java driver ({what}) exited {returncode}\nstdout:\n{out[-4000:]}\n"
                           f"stderr:\n{err[-4000:]}")
    result = json.loads(lines[-1])
    assert result["clientVersion"].startswith("4."), result["clientVersion"]
    return result["steps"]


def run_java(classpath: str, bootstrap: str, steps: list, timeout: float = 90.0, jvm_flags=JVM_FLAGS,
             **spec) -> list[dict]:
    """One JVM running `steps` against `bootstrap`; returns the step results (same order). `jvm_flags`: the
    tests' quick-start flags unless given (bench/bench_clients.py runs the JVM's default compilers)."""
    full = {"bootstrap": bootstrap, "steps": steps, **spec}
    ops = [s["op"] for s in steps]
    try:
        done = subprocess.run(_command(classpath, jvm_flags), input=json.dumps(full).encode(), capture_output=True,
                              timeout=timeout, cwd=str(JAVA_DIR))
    except subprocess.TimeoutExpired as exc:
        raise HarnessError(f"java driver timed out after {timeout:g}s running {ops}\n"
                           f"stderr:\n{(exc.stderr or b'').decode(errors='replace')[-4000:]}") from None
    return _parse(done.returncode, done.stdout, done.stderr, ops)


class RunningJava:
    """A driver JVM started in the background (``JavaDriver.start``); ``result(timeout)`` waits for its steps."""

    def __init__(self, classpath: str, bootstrap: str, steps: list, spec: dict):
        self.ops = [s["op"] for s in steps]
        self.out = tempfile.TemporaryFile()
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(_command(classpath), stdin=subprocess.PIPE, stdout=self.out, stderr=self.err,
                                     cwd=str(JAVA_DIR))
        self.proc.stdin.write(json.dumps({"bootstrap": bootstrap, "steps": steps, **spec}).encode())
        self.proc.stdin.close()

    def _read(self, f) -> bytes:
        f.seek(0)
        return f.read()

    def result(self, timeout: float = 90.0) -> list[dict]:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise HarnessError(f"java driver timed out after {timeout:g}s running {self.ops}\n"
                               f"stderr:\n{self._read(self.err).decode(errors='replace')[-4000:]}") from None
        return _parse(self.proc.returncode, self._read(self.out), self._read(self.err), self.ops)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class JavaDriver:
    """``driver(bootstrap, steps, timeout=90, **spec)`` runs one JVM to completion; ``driver.start(...)`` starts
    one in the background (a ``RunningJava``; killed at the end of the session if still running)."""

    def __init__(self, classpath: str):
        self.classpath = classpath
        self.started: list[RunningJava] = []

    def __call__(self, bootstrap: str, steps: list, timeout: float = 90.0, **spec) -> list[dict]:
        return run_java(self.classpath, bootstrap, steps, timeout=timeout, **spec)

    def start(self, bootstrap: str, steps: list, **spec) -> RunningJava:
        running = RunningJava(self.classpath, bootstrap, steps, spec)
        self.started.append(running)
        return running

    def close(self) -> None:
        for running in self.started:
            running.kill()


@pytest.fixture(scope="session")
def java_driver():
    driver = JavaDriver(build_driver())
    yield driver
    driver.close()


# ------------------------------------------------------------------------------------------------- conversions

def java_records(recs) -> list[dict]:
    """The driver's produce records for `Rec`s (headers keep order and duplicates; a None header value stays
    null)."""
    out = []
    for r in recs:
        m = {"partition": r.partition, "key": b64(r.key), "value": b64(r.value),
             "headers": [[name, b64(value)] for name, value in r.headers]}
        if r.timestamp is not None:
            m["timestamp"] = r.timestamp
        out.append(m)
    return out


def got_of(step: dict) -> list[Got]:
    """A consume step's records as `Got`s (sorted by partition, offset, as the driver returns them)."""
    return [Got(x["partition"], x["offset"], unb64(x["key"]), unb64(x["value"]),
                tuple((name, unb64(value)) for name, value in x["headers"]), x["timestamp"])
            for x in step["records"]]


def ok(step: dict) -> dict:
    """The step result, asserting it did not fail."""
    assert "error" not in step, f"java {step['op']} failed: {step['error']}"
    return step
