"""Proves tests/integration/harness.py against a stand-in broker (a tiny TCP server) and a real ZooKeeper.

The stand-in reads the server.properties the harness writes, listens on the `listeners` port and answers every
size-prefixed request with a fixed ApiVersions v0 body echoing the correlation id. `standin.mode` selects a
misbehaviour: crash (exit 3 at startup), silent (never listens), ignore-term (survives SIGTERM).
"""
import os
import socket
import struct
import subprocess
import sys
import time

import pytest

from tests.integration import harness
from tests.integration.harness import (BrokerProcess, HarnessError, ZkEnsemble, api_versions_request,
                                       encode_request, free_port, free_ports, probe_api_versions, wait_until)

STANDIN = r'''
import signal, socket, struct, sys

props = {}
for line in open(sys.argv[1]):
    line = line.strip()
    if line and not line.startswith("#"):
        key, _, value = line.partition("=")
        props[key] = value
port = int(props["listeners"].rsplit(":", 1)[1])
mode = props.get("standin.mode", "ok")
print("standin: broker.id=%s port=%d mode=%s" % (props["broker.id"], port, mode), flush=True)
if mode == "crash":
    print("standin: boom, refusing to start", flush=True)
    sys.exit(3)

def on_term(signum, frame):
    print("standin: SIGTERM, stopping", flush=True)
    sys.exit(0)

signal.signal(signal.SIGTERM, signal.SIG_IGN if mode == "ignore-term" else on_term)
if mode == "silent":
    while True:
        signal.pause()

def recv_exact(conn, n):
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf

# error_code 0, one entry: ApiVersions (18) versions 0..3
BODY = struct.pack(">hihhh", 0, 1, 18, 0, 3)
srv = socket.create_server(("127.0.0.1", port))
print("standin: listening", flush=True)
while True:
    conn, _ = srv.accept()
    with conn:
        try:
            while True:
                size = struct.unpack(">i", recv_exact(conn, 4))[0]
                req = recv_exact(conn, size)
                api_key, version, corr = struct.unpack(">hhi", req[:8])
                print("standin: request api_key=%d version=%d corr=%d" % (api_key, version, corr), flush=True)
                resp = struct.pack(">i", corr) + BODY
                conn.sendall(struct.pack(">i", len(resp)) + resp)
        except EOFError:
            pass
'''

EXPECTED_BODY = struct.pack(">hihhh", 0, 1, 18, 0, 3)


@pytest.fixture
def standin(tmp_path):
    script = tmp_path / "standin.py"
    script.write_text(STANDIN)
    made = []

    def make(name="b0", **kw):
        b = BrokerProcess(tmp_path / name, command=[sys.executable, str(script)], **kw)
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()


# ------------------------------------------------------------------------------------------------ wire bytes

def test_api_versions_request_bytes():
    # size 11 = api_key(2) + version(2) + correlation_id(4) + client_id length(2) + "c"(1)
    assert api_versions_request(7, "c") == b"\x00\x00\x00\x0b" b"\x00\x12" b"\x00\x00" b"\x00\x00\x00\x07" b"\x00\x01c"


def test_encode_request_null_client_id_and_header_v2():
    assert encode_request(3, 9, 258, b"\xaa", client_id=None, header_version=2) == (
        b"\x00\x00\x00\x0c" b"\x00\x03" b"\x00\x09" b"\x00\x00\x01\x02" b"\xff\xff" b"\x00" b"\xaa")


# -------------------------------------------------------------------------------------------------- helpers

def test_wait_until_returns_the_truthy_value():
    calls = []

    def pred():
        calls.append(1)
        return len(calls) if len(calls) >= 3 else 0

    assert wait_until(pred, timeout=5, interval=0.001) == 3
    assert len(calls) == 3


def test_wait_until_is_bounded_and_names_what_it_waited_for():
    t0 = time.monotonic()
    with pytest.raises(HarnessError, match=r"timed out after 0.3s waiting for the moon"):
        wait_until(lambda: False, timeout=0.3, interval=0.05, message="the moon")
    assert 0.3 <= time.monotonic() - t0 < 2.0


def test_wait_until_ignores_listed_exceptions_and_quotes_the_last():
    def boom():
        raise ConnectionRefusedError("nope")

    with pytest.raises(HarnessError, match=r"ConnectionRefusedError\('nope'\)"):
        wait_until(boom, timeout=0.2, interval=0.05, ignore=(OSError,))
    with pytest.raises(KeyError):
        wait_until(lambda: {}["x"], timeout=0.2)


def test_free_ports_are_distinct_and_bindable():
    ports = free_ports(6)
    assert len(set(ports)) == 6
    with socket.socket() as s:
        s.bind(("127.0.0.1", free_port()))


def _ephemeral_range():
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        return tuple(int(x) for x in f.read().split())


def test_free_ports_come_from_outside_the_ephemeral_range_and_skip_taken_ones():
    """A port a client connection could take as its source port meanwhile is never handed out, nor one in use."""
    low, high = _ephemeral_range()
    if harness._port_block() is None:
        pytest.skip("no range outside %d-%d is wide enough on this machine" % (low, high))
    picked = free_ports(3)
    assert all(not low <= p <= high for p in picked), (picked, low, high)
    with socket.socket() as taken:
        # the next port this process would walk to is in use: it is skipped, not handed out
        first, size, offset = harness._port_walk
        taken.bind(("127.0.0.1", first + offset))
        taken.listen()
        again = free_ports(50)
        assert taken.getsockname()[1] not in again
    assert len(set(again) | set(picked)) == 53       # no port handed out twice by one process


@pytest.mark.parametrize("worker", ["gw0", "gw1", "gw2", "gw3"])
def test_each_pytest_worker_picks_ports_from_its_own_block(monkeypatch, worker):
    low, high = _ephemeral_range()
    if harness._port_block() is None:
        pytest.skip("no range outside %d-%d is wide enough on this machine" % (low, high))
    blocks = {}
    for w in ("gw0", "gw1", "gw2", "gw3", ""):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", w)
        blocks[w] = harness._port_block()
    first, size = blocks[worker]
    assert size >= 256
    others = [range(f, f + n) for w, (f, n) in blocks.items() if w != worker]
    assert not any(first in r or first + size - 1 in r for r in others), blocks


def testskip_or_fail_depends_on_ci(monkeypatch):
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception):
        harness.require_binary("kcat")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        harness.require_binary("kcat")


# ------------------------------------------------------------------------------------- BrokerProcess (stand-in)

def test_broker_process_writes_kafka_properties(standin, tmp_path):
    b = standin("cfg", broker_id=4, port=45678, overrides={"num.partitions": 3, "log.dirs": None},
                zk="127.0.0.1:1,127.0.0.1:2")
    b.write_config()
    lines = (tmp_path / "cfg" / "server.properties").read_text().splitlines()
    assert lines[1:] == [
        "broker.id=4",
        "listeners=PLAINTEXT://127.0.0.1:45678",
        "advertised.listeners=PLAINTEXT://127.0.0.1:45678",
        "zookeeper.connect=127.0.0.1:1,127.0.0.1:2",
        "num.partitions=3",
    ]
    assert b.bootstrap == "127.0.0.1:45678"


def test_start_probe_stop_restart_kill9(standin):
    b = standin(broker_id=2)
    assert b.start(timeout=20) is b
    assert b.running
    assert probe_api_versions("127.0.0.1", b.port, correlation_id=99) == EXPECTED_BODY
    port = b.port
    assert b.stop() == 0
    assert not b.running
    assert "standin: SIGTERM, stopping" in b.log_text()

    b.restart(timeout=20)  # same port, log appended
    assert b.port == port and b.starts == 2
    assert b.log_text().count("=== harness: start #") == 2
    assert b.log_text().count("standin: listening") == 2
    assert b.kill9() == -9
    assert not b.running


def test_start_failure_shows_exit_code_and_log_tail(standin):
    b = standin(overrides={"standin.mode": "crash"})
    t0 = time.monotonic()
    with pytest.raises(HarnessError) as err:
        b.start(timeout=20)
    assert time.monotonic() - t0 < 15
    assert "exited with code 3" in str(err.value)
    assert "standin: boom, refusing to start" in str(err.value)


def test_wait_ready_is_bounded_when_nothing_listens(standin):
    b = standin(overrides={"standin.mode": "silent"})
    t0 = time.monotonic()
    with pytest.raises(HarnessError) as err:
        b.start(timeout=1.5)
    assert time.monotonic() - t0 < 6
    assert "to answer ApiVersions v0" in str(err.value)
    assert "standin: broker.id=0" in str(err.value)  # the log tail
    assert b.stop() == 0  # SIGTERM handler ran


def test_stop_escalates_to_sigkill(standin):
    b = standin(overrides={"standin.mode": "ignore-term"}).start(timeout=20)
    t0 = time.monotonic()
    assert b.stop(timeout=0.5) == -9
    assert time.monotonic() - t0 < 5


def test_child_gets_repo_on_pythonpath(standin):
    b = standin(env={"KBROKER_PURE": "1"})
    assert b.start(timeout=20)
    environ = open(f"/proc/{b.pid}/environ", "rb").read().split(b"\0")
    assert b"KBROKER_PURE=1" in environ
    assert any(e.startswith(b"PYTHONPATH=" + str(harness.REPO_ROOT).encode()) for e in environ)


# ---------------------------------------------------------------------------------------------- ZooKeeper

def _need_zookeeper():
    if harness.zookeeper_classpath() is None or not harness.shutil.which("java"):
        harness.skip_or_fail("Debian's zookeeper package / java not installed (run scripts/setup.sh)")


@pytest.mark.zk
def test_zk_ensemble_survives_losing_the_leader(tmp_path):
    _need_zookeeper()
    from kazoo.client import KazooClient

    with ZkEnsemble(tmp_path, n=3) as zk:
        assert len(set(zk.client_ports + zk.quorum_ports + zk.election_ports)) == 9
        assert 2181 not in zk.client_ports
        modes = sorted(zk.mode(i) for i in range(3))
        assert modes == ["follower", "follower", "leader"]
        for i in range(3):
            assert (tmp_path / f"zk{i + 1}" / "data" / "myid").read_text() == f"{i + 1}\n"

        client = KazooClient(hosts=zk.connect_string, timeout=10)
        client.start(timeout=20)
        try:
            client.create("/kbroker-test", b"one")
            leader = zk.leader()
            assert zk.kill(leader) == -9
            # 2 of 3 is still a quorum: writes keep working once the survivors elect a new leader. The
            # session may see ConnectionLoss while they do (its server may have been the one killed): retry.
            client.retry(client.ensure_path, "/kbroker-test/child")
            client.retry(client.set, "/kbroker-test/child", b"two")
            assert client.get("/kbroker-test")[0] == b"one"
            assert client.get("/kbroker-test/child")[0] == b"two"
            assert client.get_children("/kbroker-test") == ["child"]
            survivors = [i for i in range(3) if i != leader]
            wait_until(lambda: sorted(zk.mode(i) or "" for i in survivors) == ["follower", "leader"], 30)
            zk.restart(leader, timeout=60)
            assert zk.mode(leader) == "follower"
        finally:
            client.stop()
            client.close()
    assert not any(zk.running(i) for i in range(3))


@pytest.mark.zk
def test_zk_ensemble_script_start_status_stop(tmp_path):
    _need_zookeeper()
    script = harness.REPO_ROOT / "scripts" / "zk-ensemble.sh"
    d = tmp_path / "ens"
    started = subprocess.run(["bash", str(script), "start", str(d), "3"], capture_output=True, text=True,
                             timeout=120)
    try:
        assert started.returncode == 0, started.stderr
        connect = started.stdout.strip()
        hosts = connect.split(",")
        assert len(hosts) == 3 and all(h.startswith("127.0.0.1:") for h in hosts)
        assert (d / "connect_string").read_text().strip() == connect
        status = subprocess.run(["bash", str(script), "status", str(d)], capture_output=True, text=True,
                                timeout=30)
        assert status.returncode == 0, status.stdout + status.stderr
        assert sorted(line.rsplit("mode=", 1)[1] for line in status.stdout.splitlines() if "mode=" in line) == \
            ["follower", "follower", "leader"]
    finally:
        stopped = subprocess.run(["bash", str(script), "stop", str(d)], capture_output=True, text=True, timeout=60)
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stderr.count("stopped node") == 3
    assert not list(d.glob("node*/zk.pid"))


# ------------------------------------------------------------------------------------------ external clients

def test_kafkajs_runner_reports_errors_with_their_json(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    harness.require_kafkajs()  # skips when node/kafkajs are absent
    port = free_port()  # nothing listens there
    with pytest.raises(HarnessError) as err:
        harness.run_kafkajs({"brokers": [f"127.0.0.1:{port}"], "topic": "t", "mode": "produce", "count": 1,
                             "retries": 0}, timeout=30)
    assert "exited 1" in str(err.value)
    assert f'"error":"Connection error: connect ECONNREFUSED 127.0.0.1:{port}"' in str(err.value)


def test_kafkajs_script_rejects_unknown_mode():
    node = harness.require_kafkajs()
    done = subprocess.run([node, str(harness.KAFKAJS_SCRIPT), '{"brokers":["127.0.0.1:1"],"topic":"t","mode":"x"}'],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 1
    assert done.stdout == '{"mode":"x","error":"unknown mode \\"x\\""}\n'


def test_b64_helpers_round_trip():
    assert harness.b64(b"\x00\xff") == "AP8="
    assert harness.b64("hi") == "aGk="
    assert harness.unb64("AP8=") == b"\x00\xff"
    assert harness.b64(None) is None and harness.unb64(None) is None


@pytest.mark.zk
def test_zk_ensemble_retries_when_a_port_was_taken(tmp_path):
    _need_zookeeper()
    zk = ZkEnsemble(tmp_path, n=1)
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", zk.client_ports[0]))
    squatter.listen(1)
    taken = zk.client_ports[0]
    try:
        zk.start(timeout=60)
        assert zk.client_ports[0] != taken
        assert zk.mode(0) == "standalone"
        assert "Address already in use" in zk.log_path(0).read_text()
    finally:
        squatter.close()
        zk.close()
