"""Integration-test harness: real broker processes, a real ZooKeeper ensemble, external clients.

Everything here drives *processes* over TCP; nothing imports the broker, so a test exercises the same code path
as `kbroker-server` on a terminal.

Broker process (`BrokerProcess`)
    Layout of its directory (`tmpdir`):
        server.properties   written on every start from `properties()` (Kafka key names, one `key=value` a line)
        logs/               `log.dirs` (survives restart(), so restarts exercise log recovery)
        broker.log          stdout+stderr of every start, appended; each start begins with a `=== harness: ...` line
        server-logs/        the broker's own log files (LOG_DIR: server.log, controller.log, state-change.log, ...)
    Started as `sys.executable -m kbroker.cli.server <dir>/server.properties` (override with `command=`).
    The listen port is picked once (free_port) and kept across restarts so a client's bootstrap stays valid.
    Readiness = a raw ApiVersions v0 request (api_key 18, version 0, header v1: int16 api_key, int16 version,
    int32 correlation_id, int16-length client_id; the whole frame prefixed by its int32 size) answered with a
    response whose first int32 after the size is the same correlation id. ApiVersions responses always use
    response header v0 (correlation id only), for every request version.

ZooKeeper ensemble (`ZkEnsemble`, and scripts/zk-ensemble.sh for humans)
    Debian's `zookeeper` package: jars in /usr/share/java (zookeeper.jar's manifest Class-Path pulls in its
    dependencies), config examples in /etc/zookeeper/conf_example; no server is started for us. Each node runs
    `java -cp zookeeper.jar:slf4j-simple.jar org.apache.zookeeper.server.quorum.QuorumPeerMain <node>/zoo.cfg`
    with `<node>/data/myid` = index + 1. Client, quorum and election ports are all picked free on 127.0.0.1.
    tickTime is 500 ms (Kafka-style 6 s session timeouts stay well inside 2..20 ticks) and the admin server is off.
    A node "serves" when the `srvr` four-letter command reports `Mode: leader|follower|standalone`.

Timing: every wait is bounded (`wait_until`); nothing sleeps to synchronise. Errors raise `HarnessError` (an
AssertionError, so pytest shows it as a test failure) carrying the tail of the relevant process log.
"""
from __future__ import annotations

import atexit
import base64
import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
JS_DIR = REPO_ROOT / "tests" / "js"
KAFKAJS_SCRIPT = JS_DIR / "kafkajs_roundtrip.js"
BROKER_COMMAND = (sys.executable, "-m", "kbroker.cli.server")
LOCALHOST = "127.0.0.1"

# Debian 12 `zookeeper` 3.8.0: the server jar plus one SLF4J binding so the server log is not silently dropped
# (slf4j-api alone binds to NOP). Both come from packages the zookeeper package depends on.
ZK_JARS = ("/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar")
ZK_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
ZK_TLS_JARS = ("/usr/share/java/netty-codec.jar", "/usr/share/java/netty-resolver.jar",
               "/usr/share/java/netty-transport-native-unix-common.jar")
# Small heaps and the C1 compiler only: three JVMs share 2 cores with the tests; ZK needs neither.
ZK_JVM_FLAGS = ("-Xms32m", "-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
                "-Dzookeeper.admin.enableServer=false", "-Dzookeeper.4lw.commands.whitelist=*",
                "-Dorg.slf4j.simpleLogger.showDateTime=true")

API_VERSIONS_KEY = 18


class HarnessError(AssertionError):
    """A harness operation failed (process died, timed out, bad response). Message includes log tails."""


# Every process the harness started, so an aborted session does not leave brokers or JVMs behind.
_LIVE_PROCS: "weakref.WeakSet[subprocess.Popen]" = weakref.WeakSet()
# Every BrokerProcess / ZkEnsemble still open; conftest attaches their log tails to failing test reports.
LIVE_BROKERS: "weakref.WeakSet[BrokerProcess]" = weakref.WeakSet()
LIVE_ENSEMBLES: "weakref.WeakSet[ZkEnsemble]" = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    for proc in list(_LIVE_PROCS):
        if proc.poll() is None:
            proc.kill()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                pass


def in_ci() -> bool:
    """True when running under CI (`CI=true`): missing external tools must fail, not skip."""
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def require_binary(name: str) -> str:
    """Path of executable `name`; skips the test when missing (fails instead when in CI)."""
    path = shutil.which(name)
    if path:
        return path
    skip_or_fail(f"`{name}` is not installed (run scripts/setup.sh)")
    raise AssertionError("unreachable")  # pragma: no cover


def skip_or_fail(reason: str) -> None:
    import pytest

    if in_ci():
        pytest.fail(f"{reason}; CI=true so this is a failure, not a skip")
    pytest.skip(reason)


# --------------------------------------------------------------------------------------------------- utilities

def wait_until(predicate, timeout: float = 10.0, interval: float = 0.05, message: str | None = None,
               ignore: tuple = ()):
    """Poll `predicate()` until it returns a truthy value (returned) or `timeout` seconds pass (HarnessError).

    Exceptions of the types in `ignore` count as "not yet"; the last one is quoted in the timeout message.
    """
    deadline = time.monotonic() + timeout
    last_exc = None
    while True:
        try:
            value = predicate()
        except ignore as exc:  # noqa: PERF203 - polling loop
            value, last_exc = None, exc
        if value:
            return value
        if time.monotonic() >= deadline:
            what = message or getattr(predicate, "__name__", repr(predicate))
            extra = f" (last error: {last_exc!r})" if last_exc is not None else ""
            raise HarnessError(f"timed out after {timeout:g}s waiting for {what}{extra}")
        time.sleep(min(interval, max(0.0, deadline - time.monotonic())))


def free_port(host: str = LOCALHOST) -> int:
    """A TCP port that was free on `host` a moment ago (see ``free_ports``)."""
    return free_ports(1, host)[0]


# Where ports are picked. A port from bind(port 0) comes from the kernel's ephemeral range
# (net.ipv4.ip_local_port_range, 32768-60999 by default), the range every outgoing connection takes its source
# port from: between picking it and the broker (or ZooKeeper node) binding it, any client connection on the
# machine could take it (seen once with three pytest workers: a broker's start failed with "Address already in
# use"). So ports come from outside that range, from PORT_LOW up to it (22,768 ports by default) or above it,
# cut into PORT_BLOCKS blocks: pytest-xdist worker gwN walks block N, any other process (the serial phase, a
# bench) a block chosen by its pid among the rest, each from a random start and in order, so two workers never
# pick the same port and a process does not reuse a port it released a moment ago (a broker's restart keeps its
# port anyway). Each port is still bound once to check it is free.
PORT_LOW = 10000
PORT_BLOCKS = 8
_MIN_BLOCK = 256            # smaller blocks (a kernel with an unusually wide ephemeral range): bind(0) as before
_port_lock = threading.Lock()
_port_walk: list = []       # [block start, block size, next offset] once chosen, for this process


def _port_block() -> tuple[int, int] | None:
    """(first port, size) of this process's block, or None when no range outside the ephemeral one is wide
    enough."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    gaps = [(PORT_LOW, low - PORT_LOW), (high + 1, 65536 - (high + 1))]
    start, width = max(gaps, key=lambda g: g[1])
    size = width // PORT_BLOCKS
    if size < _MIN_BLOCK:
        return None
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw") and worker[2:].isdigit() and int(worker[2:]) < PORT_BLOCKS // 2:
        block = int(worker[2:])
    else:
        block = PORT_BLOCKS // 2 + os.getpid() % (PORT_BLOCKS - PORT_BLOCKS // 2)
    return start + block * size, size


def _bindable(host: str, port: int) -> bool:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((host, port))     # no SO_REUSEADDR: a port in TIME_WAIT or in use anywhere counts as taken
        return True
    except OSError:
        return False
    finally:
        s.close()


def free_ports(n: int, host: str = LOCALHOST) -> list[int]:
    """`n` distinct TCP ports that were free on `host` a moment ago, outside the ephemeral range (above)."""
    with _port_lock:
        if not _port_walk:
            block = _port_block()
            _port_walk.extend([*block, random.randrange(block[1])] if block else [None])
        if _port_walk[0] is None:
            return _ephemeral_ports(n, host)
        first, size, offset = _port_walk
        picked: list[int] = []
        for _ in range(size):
            port = first + offset
            offset = (offset + 1) % size
            if _bindable(host, port):
                picked.append(port)
                if len(picked) == n:
                    break
        _port_walk[2] = offset
    if len(picked) < n:
        raise HarnessError(f"only {len(picked)} of {n} ports free in {first}-{first + size - 1}")
    return picked


def _ephemeral_ports(n: int, host: str) -> list[int]:
    """`n` distinct ports from bind(port 0): all sockets are held open until every port is picked."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def tail(path: Path | str, lines: int = 60) -> str:
    """Last `lines` lines of a text file ('' if it does not exist)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 256 * 1024))  # the tail of a 256 KiB window is plenty for 60 lines
            data = f.read()
    except FileNotFoundError:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


# ------------------------------------------------------------------------------------------- raw wire protocol

def encode_request(api_key: int, api_version: int, correlation_id: int, body: bytes = b"",
                   client_id: str | None = "kbroker-harness", header_version: int = 1) -> bytes:
    """A size-prefixed request frame. Header v1 = api_key, api_version, correlation_id, nullable client_id;
    header v2 (flexible APIs) appends an empty tagged-field section (one 0x00 byte)."""
    if client_id is None:
        cid = struct.pack(">h", -1)
    else:
        raw = client_id.encode("utf-8")
        cid = struct.pack(">h", len(raw)) + raw
    header = struct.pack(">hhi", api_key, api_version, correlation_id) + cid
    if header_version >= 2:
        header += b"\x00"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def api_versions_request(correlation_id: int, client_id: str | None = "kbroker-harness") -> bytes:
    """ApiVersions v0 request frame (its body is empty)."""
    return encode_request(API_VERSIONS_KEY, 0, correlation_id, b"", client_id)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def read_response(sock: socket.socket) -> tuple[int, bytes]:
    """One size-prefixed response: (correlation_id, bytes after the correlation id)."""
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    if size < 4:
        raise ConnectionError(f"response frame size {size} < 4")
    payload = recv_exact(sock, size)
    return struct.unpack(">i", payload[:4])[0], payload[4:]


def raw_request(host: str, port: int, api_key: int, api_version: int, body: bytes = b"",
                correlation_id: int = 1, client_id: str | None = "kbroker-harness", header_version: int = 1,
                timeout: float = 5.0) -> bytes:
    """Send one request on a fresh connection; return the response bytes after the correlation id.

    Raises ConnectionError on a closed connection and HarnessError on a correlation-id mismatch. For flexible
    responses (header v1) the caller strips the tagged-field byte that precedes the body.
    """
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(encode_request(api_key, api_version, correlation_id, body, client_id, header_version))
        got, rest = read_response(sock)
    if got != correlation_id:
        raise HarnessError(f"correlation id mismatch: sent {correlation_id}, got {got}")
    return rest


def probe_api_versions(host: str, port: int, correlation_id: int = 1, timeout: float = 1.0) -> bytes:
    """ApiVersions v0 round trip; returns the response body (int16 error_code, api_versions array)."""
    return raw_request(host, port, API_VERSIONS_KEY, 0, b"", correlation_id, timeout=timeout)


def _spawn(argv, log_path: Path, env: dict | None, cwd: Path, banner: str) -> subprocess.Popen:
    with open(log_path, "ab") as log:
        log.write(f"=== harness: {banner} at {time.strftime('%H:%M:%S')}: {' '.join(map(str, argv))}\n".encode())
        log.flush()
        proc = subprocess.Popen([str(a) for a in argv], stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, cwd=str(cwd), env=env)
    _LIVE_PROCS.add(proc)
    return proc


def _terminate(proc: subprocess.Popen, timeout: float) -> int:
    """SIGTERM, wait up to `timeout` s, then SIGKILL; returns the exit code (negative = signal)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    _LIVE_PROCS.discard(proc)
    return proc.returncode


def _kill(proc: subprocess.Popen) -> int:
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)
    _LIVE_PROCS.discard(proc)
    return proc.returncode


# ------------------------------------------------------------------------------------------------------ broker

class BrokerProcess:
    """One broker process in its own directory. See the module docstring for the layout.

    `overrides` are merged over the defaults written to server.properties (a value of None removes a key).
    `zk` is None (embedded coordination backend), a connect string, or a ZkEnsemble (-> `zookeeper.connect`).
    """

    def __init__(self, tmpdir, broker_id: int = 0, overrides: dict | None = None, zk=None, port: int | None = None,
                 command=None, env: dict | None = None):
        self.dir = Path(tmpdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.broker_id = broker_id
        self.host = LOCALHOST
        self.port = port or free_port()
        self.overrides = dict(overrides or {})
        self.zk = zk
        self.command = list(command or BROKER_COMMAND)
        self.extra_env = dict(env or {})
        self.config_path = self.dir / "server.properties"
        self.log_dir = self.dir / "logs"
        self.log_path = self.dir / "broker.log"
        self.server_log_dir = self.dir / "server-logs"
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self._correlation = 0
        LIVE_BROKERS.add(self)

    # -- configuration
    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def properties(self) -> dict:
        props = {
            "broker.id": str(self.broker_id),
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": str(self.log_dir),
        }
        if self.zk is not None:
            props["zookeeper.connect"] = getattr(self.zk, "connect_string", self.zk)
        for key, value in self.overrides.items():
            if value is None:
                props.pop(key, None)
            else:
                props[key] = str(value)
        return props

    def write_config(self) -> Path:
        lines = [f"# written by tests/integration/harness.py for broker {self.broker_id}"]
        lines += [f"{k}={v}" for k, v in self.properties().items()]
        self.config_path.write_text("\n".join(lines) + "\n")
        return self.config_path

    # -- lifecycle
    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self, wait: bool = True, timeout: float = 30.0) -> "BrokerProcess":
        if self.running:
            raise HarnessError(f"broker {self.broker_id} is already running (pid {self.proc.pid})")
        self.write_config()
        env = dict(os.environ)
        # The checkout must be importable even without `pip install -e .` (the child's cwd is the broker dir).
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        env["PYTHONUNBUFFERED"] = "1"
        env["LOG_DIR"] = str(self.server_log_dir)   # server.log & co. beside, not inside, the data dir (logs/)
        env.update(self.extra_env)
        self.starts += 1
        self.proc = _spawn(self.command + [self.config_path], self.log_path, env, self.dir,
                           f"start #{self.starts} of broker {self.broker_id}")
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 30.0) -> bytes:
        """Bounded wait for an ApiVersions v0 answer; returns the response body."""
        if self.proc is None:
            raise HarnessError("broker was never started")

        def answered():
            if self.proc.poll() is not None:
                raise HarnessError(self._describe(f"broker {self.broker_id} exited with code {self.proc.returncode}"
                                                  " before answering ApiVersions"))
            self._correlation += 1
            return probe_api_versions(self.host, self.port, self._correlation, timeout=1.0)

        try:
            return wait_until(answered, timeout, 0.1, f"broker {self.broker_id} on {self.bootstrap} to answer "
                              "ApiVersions v0", ignore=(OSError, ConnectionError))
        except HarnessError as exc:
            if "exited with code" in str(exc):
                raise
            raise HarnessError(self._describe(str(exc))) from None

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM, bounded wait, then SIGKILL. Returns the exit code (None if never started)."""
        if self.proc is None:
            return None
        return _terminate(self.proc, timeout)

    def kill9(self) -> int | None:
        """SIGKILL (no shutdown hooks: leaves no clean-shutdown marker). Returns the exit code."""
        if self.proc is None:
            return None
        return _kill(self.proc)

    def restart(self, timeout: float = 30.0, kill: bool = False) -> "BrokerProcess":
        """Stop (or kill -9 when `kill`) and start again on the same port and log dirs."""
        self.kill9() if kill else self.stop()
        return self.start(wait=True, timeout=timeout)

    def close(self) -> None:
        self.stop()
        LIVE_BROKERS.discard(self)

    def __enter__(self):
        return self.start() if self.proc is None else self

    def __exit__(self, *exc):
        self.close()

    # -- diagnostics
    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        return tail(self.log_path, lines)

    def _describe(self, headline: str) -> str:
        return f"{headline}\n--- last lines of {self.log_path} ---\n{self.log_tail()}"

    def __repr__(self):
        state = "running" if self.running else "stopped"
        return f"<BrokerProcess id={self.broker_id} {self.bootstrap} {state} dir={self.dir}>"


# -------------------------------------------------------------------------------------------------- zookeeper

def zookeeper_classpath() -> str | None:
    """Classpath for a ZooKeeper server from Debian's package, or None when it is not installed.
    `KBROKER_ZK_CLASSPATH` overrides it (e.g. for an unpacked Apache tarball: `.../lib/*`)."""
    override = os.environ.get("KBROKER_ZK_CLASSPATH")
    if override:
        return override
    if all(os.path.exists(j) for j in ZK_JARS):
        return os.pathsep.join(ZK_JARS)
    return None


def four_letter(port: int, cmd: str = "srvr", host: str = LOCALHOST, timeout: float = 2.0) -> str:
    """Send a ZooKeeper four-letter command and return the whole answer (the server closes the connection)."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(cmd.encode("ascii"))
        chunks = []
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


class ZkEnsemble:
    """`n` local ZooKeeper servers (node index i = 0..n-1, myid i+1) under `tmpdir/zk<i+1>/`.

    start(), stop(), kill(i), stop_node(i), restart(i), connect_string, mode(i), leader(), wait_serving().

    SASL mode (`sasl_users={"kafka": "kafka-secret", ...}`): every node loads the SASL authentication provider and a
    JAAS `Server` section with DigestLoginModule `user_<name>="<password>"` entries (DIGEST-MD5 logins, as in Kafka's
    section 7.6); `require_sasl=True` also makes the nodes refuse every request of an unauthenticated session
    (ZooKeeper 3.7+'s `enforce.auth.enabled` / `enforce.auth.schemes=sasl`). Changing either and restarting the
    nodes one by one is a rolling reconfiguration.

    TLS mode (`tls={"keystore": path, "password": p, "type": "PKCS12"|"PEM", "truststore": CA PEM path}`): every node
    also serves TLS on its own port (`secure_connect_string`; Netty, client certificates required and authenticated
    as `x509:<subject DN>`); the plaintext ports stay for the harness's four-letter probes.
    """

    def __init__(self, tmpdir, n: int = 3, tick_ms: int = 500, java: str | None = None,
                 sasl_users: dict | None = None, require_sasl: bool = False, tls: dict | None = None,
                 jvm_flags: tuple | None = None):
        if n < 1:
            raise ValueError("an ensemble needs at least one node")
        if require_sasl and not sasl_users:
            raise ValueError("require_sasl needs sasl_users")
        self.dir = Path(tmpdir)
        self.n = n
        self.sasl_users = dict(sasl_users or {})
        self.require_sasl = require_sasl
        self.tls = dict(tls) if tls else None
        self.secure_ports = free_ports(n) if tls else []
        self.tick_ms = tick_ms
        self.jvm_flags = tuple(jvm_flags) if jvm_flags is not None else ZK_JVM_FLAGS
        self.java = java or shutil.which("java")
        self.classpath = zookeeper_classpath()
        ports = free_ports(3 * n)
        self.client_ports = ports[:n]
        self.quorum_ports = ports[n:2 * n]
        self.election_ports = ports[2 * n:]
        self.procs: list[subprocess.Popen | None] = [None] * n
        LIVE_ENSEMBLES.add(self)

    @property
    def connect_string(self) -> str:
        return ",".join(f"{LOCALHOST}:{p}" for p in self.client_ports)

    @property
    def secure_connect_string(self) -> str:
        return ",".join(f"{LOCALHOST}:{p}" for p in self.secure_ports)

    def node_dir(self, i: int) -> Path:
        return self.dir / f"zk{i + 1}"

    def log_path(self, i: int) -> Path:
        return self.node_dir(i) / "zookeeper.log"

    def config_text(self, i: int) -> str:
        d = self.node_dir(i)
        lines = [
            f"tickTime={self.tick_ms}",
            "initLimit=20",      # 20 ticks = 10 s for a follower to sync with a new leader
            "syncLimit=10",      # 10 ticks = 5 s before a lagging follower is dropped
            f"dataDir={d / 'data'}",
            f"clientPort={self.client_ports[i]}",
            f"clientPortAddress={LOCALHOST}",
            "maxClientCnxns=0",
            "admin.enableServer=false",
            "4lw.commands.whitelist=*",
            "autopurge.purgeInterval=0",
        ]
        if self.n > 1:
            lines += [f"server.{j + 1}={LOCALHOST}:{self.quorum_ports[j]}:{self.election_ports[j]}"
                      for j in range(self.n)]
        if self.sasl_users:
            lines.append("authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider")
        if self.require_sasl:
            lines += ["enforce.auth.enabled=true", "enforce.auth.schemes=sasl"]
        if self.tls:
            lines += [f"secureClientPort={self.secure_ports[i]}", f"secureClientPortAddress={LOCALHOST}",
                      "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
                      f"ssl.keyStore.location={self.tls['keystore']}", f"ssl.keyStore.password={self.tls['password']}",
                      f"ssl.keyStore.type={self.tls.get('type', 'PKCS12')}",
                      f"ssl.trustStore.location={self.tls['truststore']}", "ssl.trustStore.type=PEM",
                      "ssl.clientAuth=need",
                      "authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider"]
        return "\n".join(lines) + "\n"

    def jaas_text(self) -> str:
        """The JAAS file of a SASL-mode node: the `Server` section ZooKeeper's DIGEST-MD5 logins are checked against."""
        users = "".join(f'\n    user_{name}="{password}"' for name, password in sorted(self.sasl_users.items()))
        return "Server {\n    org.apache.zookeeper.server.auth.DigestLoginModule required" + users + ";\n};\n"

    def _check_installed(self) -> None:
        if not self.java or not self.classpath:
            raise HarnessError("ZooKeeper is not installed: need `java` and Debian's zookeeper jars "
                               f"{ZK_JARS} (run scripts/setup.sh) or KBROKER_ZK_CLASSPATH")

    def start_node(self, i: int, wait: bool = True, timeout: float = 60.0) -> None:
        self._check_installed()
        if self.procs[i] is not None and self.procs[i].poll() is None:
            raise HarnessError(f"zk node {i} is already running")
        d = self.node_dir(i)
        (d / "data").mkdir(parents=True, exist_ok=True)
        (d / "data" / "myid").write_text(f"{i + 1}\n")
        cfg = d / "zoo.cfg"
        cfg.write_text(self.config_text(i))
        jaas = []
        if self.sasl_users:
            (d / "jaas.conf").write_text(self.jaas_text())
            jaas = [f"-Djava.security.auth.login.config={d / 'jaas.conf'}"]
        classpath = self.classpath
        if self.tls:   # Netty's TLS handler needs the codec jars zookeeper.jar's manifest does not list
            classpath = os.pathsep.join([classpath, *ZK_TLS_JARS])
        argv = [self.java, *self.jvm_flags, *jaas, f"-Dzookeeper.log.dir={d}", "-cp", classpath, ZK_MAIN, cfg]
        self.procs[i] = _spawn(argv, self.log_path(i), None, d, f"start zk node {i} (myid {i + 1})")
        if wait:
            self.wait_serving([i], timeout)

    def start(self, timeout: float = 60.0, attempts: int = 3) -> "ZkEnsemble":
        """Start every node and wait (bounded) until all of them serve: the quorum has a leader.

        Free ports are only free "a moment ago": if a node dies because one was taken meanwhile, every node is
        stopped, fresh ports are picked and the start is retried (up to `attempts` times in all).
        """
        for attempt in range(1, attempts + 1):
            for i in range(self.n):
                self.start_node(i, wait=False)
            try:
                self.wait_serving(range(self.n), timeout)
                return self
            except HarnessError as exc:
                lost_port = "Address already in use" in str(exc) or any(
                    "Address already in use" in tail(self.log_path(i), 200) for i in range(self.n))
                self.stop()
                if not lost_port or attempt == attempts:
                    raise
                ports = free_ports(3 * self.n)
                self.secure_ports = free_ports(self.n) if self.tls else []
                self.client_ports = ports[:self.n]
                self.quorum_ports = ports[self.n:2 * self.n]
                self.election_ports = ports[2 * self.n:]
        raise AssertionError("unreachable")  # pragma: no cover

    def mode(self, i: int) -> str | None:
        """'leader' | 'follower' | 'standalone' when node i serves, else None."""
        try:
            answer = four_letter(self.client_ports[i], "srvr", timeout=1.0)
        except OSError:
            return None
        for line in answer.splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return None

    def leader(self) -> int | None:
        for i in range(self.n):
            if self.running(i) and self.mode(i) == "leader":
                return i
        return None

    def running(self, i: int) -> bool:
        return self.procs[i] is not None and self.procs[i].poll() is None

    def wait_serving(self, nodes=None, timeout: float = 60.0) -> None:
        nodes = list(range(self.n) if nodes is None else nodes)

        def all_serving():
            for i in nodes:
                if not self.running(i):
                    rc = None if self.procs[i] is None else self.procs[i].returncode
                    raise HarnessError(f"zk node {i} exited (code {rc})\n--- last lines of {self.log_path(i)} ---\n"
                                       f"{tail(self.log_path(i))}")
            return all(self.mode(i) for i in nodes)

        try:
            wait_until(all_serving, timeout, 0.2, f"zk nodes {nodes} to serve")
        except HarnessError as exc:
            if "exited" in str(exc):
                raise
            tails = "\n".join(f"--- last lines of {self.log_path(i)} ---\n{tail(self.log_path(i), 25)}"
                              for i in nodes)
            raise HarnessError(f"{exc}\n{tails}") from None

    def kill(self, i: int) -> int | None:
        """SIGKILL node i (a crash)."""
        return _kill(self.procs[i]) if self.procs[i] is not None else None

    def stop_node(self, i: int, timeout: float = 10.0) -> int | None:
        return _terminate(self.procs[i], timeout) if self.procs[i] is not None else None

    def restart(self, i: int, timeout: float = 60.0) -> None:
        """Stop node i if it runs, start it again with the same ports and data, wait until it serves."""
        self.stop_node(i)
        self.start_node(i, wait=True, timeout=timeout)

    def stop(self) -> None:
        for i in range(self.n):
            self.stop_node(i)

    def close(self) -> None:
        self.stop()
        LIVE_ENSEMBLES.discard(self)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    def log_tails(self, lines: int = 30) -> str:
        return "\n".join(f"--- zk node {i} ({self.log_path(i)}) ---\n{tail(self.log_path(i), lines)}"
                         for i in range(self.n))


# ------------------------------------------------------------------------------------------- external clients

def b64(data: bytes | str | None) -> str | None:
    if data is None:
        return None
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode("ascii")


def unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def require_kafkajs() -> str:
    """Path of `node` once kafkajs is installed in tests/js; skips (fails under CI) otherwise."""
    node = require_binary("node")
    if not (JS_DIR / "node_modules" / "kafkajs" / "package.json").exists():
        skip_or_fail("kafkajs is not installed in tests/js (run scripts/setup.sh)")
    return node


def run_kafkajs(spec: dict, timeout: float = 60.0, node: str | None = None) -> dict:
    """Run tests/js/kafkajs_roundtrip.js with `spec` (see that file's header) and return its JSON result."""
    node = node or require_kafkajs()
    try:
        done = subprocess.run([node, str(KAFKAJS_SCRIPT), json.dumps(spec)], capture_output=True,
                              timeout=timeout, cwd=str(JS_DIR))
    except subprocess.TimeoutExpired as exc:
        raise HarnessError(f"kafkajs {spec.get('mode')} timed out after {timeout:g}s\nstderr:\n"
                           f"{(exc.stderr or b'').decode(errors='replace')[-4000:]}") from None
    out = done.stdout.decode(errors="replace")
    err = done.stderr.decode(errors="replace")
    if done.returncode != 0:
        raise HarnessError(f"kafkajs {spec.get('mode')} exited {done.returncode}\nstdout:\n{out[-4000:]}\n"
                           f"stderr:\n{err[-4000:]}")
    lines = [line for line in out.splitlines() if line.strip()]
    if not lines:
        raise HarnessError(f"kafkajs printed no result\nstderr:\n{err[-4000:]}")
    return json.loads(lines[-1])


def run_kcat(args: list[str], input: bytes | None = None, timeout: float = 30.0, check: bool = True):
    """Run kcat with `args`; returns the CompletedProcess (stdout/stderr bytes). Skips/fails if kcat is missing."""
    kcat = require_binary("kcat")
    try:
        done = subprocess.run([kcat, *args], input=input, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise HarnessError(f"kcat {' '.join(args)} timed out after {timeout:g}s\nstderr:\n"
                           f"{(exc.stderr or b'').decode(errors='replace')[-4000:]}") from None
    if check and done.returncode != 0:
        raise HarnessError(f"kcat {' '.join(args)} exited {done.returncode}\nstderr:\n"
                           f"{done.stderr.decode(errors='replace')[-4000:]}")
    return done
