"""Issue 8, connection and protocol level: hostile clients against a real `kbroker-server` process.

Every case runs under a ``StallWatch`` bystander and ends with ``assert_healthy`` (tests/integration/hostile.py): the
broker answers Metadata on a fresh connection within 1 s, the bystander was never kept waiting 1 s nor dropped, and
the broker's peak RSS stayed under 600 MB. The limits exercised (kbroker/server/limits.py has the table):

* large frames are held in buffers that grow with the bytes that arrived, all of them within
  ``queued.max.request.bytes`` (<= 0: 256 MiB); small requests never wait for that budget;
* ``socket.request.receive.timeout.ms``: a request that does not arrive whole in time closes its connection;
* ``connections.max.idle.ms``: idle connections are closed (a parked long-poll is not idle);
* ``max.connections``: new connections wait in the accept backlog for a slot (Kafka's behaviour);
* ``max.connections.per.ip`` / ``.overrides``: the connection over the cap is closed at once;
* ``request.max.elements`` / ``metadata.request.max.topics``: requests with more elements / topics close the
  connection; bad varints in headers close it too, never a traceback.
"""
from __future__ import annotations

import select
import socket
import struct
import time

import pytest

from kbroker._native import encode_uvarint
from kbroker.protocol.apis import APIS
from tests.integration.harness import encode_request, read_response, wait_until
from tests.integration.test_bad_input import assert_closed_by_broker
from tests.integration.hostile import StallWatch, assert_healthy, proc_status_kb, rss_mb
from tests.integration.test_durability import RawClient

pytestmark = pytest.mark.timeout(180)

MiB = 1 << 20
API_VERSIONS, METADATA, PRODUCE, LIST_OFFSETS, FETCH, DELETE_TOPICS = 18, 3, 0, 2, 1, 20
UNKNOWN_TOPIC_OR_PARTITION = 3


# --------------------------------------------------------------------------------------------------- helpers

def connect(broker, source: str | None = None, timeout: float = 5.0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    if source is not None:
        sock.bind((source, 0))  # any 127/8 address is this machine: a distinct client IP for the per-IP limits
    sock.connect((broker.host, broker.port))
    return sock


def api_versions(corr: int) -> bytes:
    return encode_request(API_VERSIONS, 0, corr, b"", "hostile-test")


def answered(sock: socket.socket, corr: int, timeout: float = 5.0) -> bool:
    """Send ApiVersions v0 and read its answer; False when the broker closed the connection instead."""
    sock.settimeout(timeout)
    try:
        sock.sendall(api_versions(corr))
        got, _ = read_response(sock)
    except (ConnectionError, OSError):
        return False
    return got == corr


def send_and_expect_close(broker, frame: bytes, limit: float = 2.0) -> float:
    """Send one (hostile) frame on a fresh connection; the broker must close it within ``limit`` s of the last
    byte sent, without answering."""
    sock = connect(broker, timeout=30)
    sock.sendall(frame)
    return assert_closed_by_broker(sock, limit)


def push(socks_and_data: list[tuple[socket.socket, bytes]], seconds: float, idle_s: float | None = None) -> list[int]:
    """Write each socket's data without blocking, round robin, for at most ``seconds``; returns the bytes each
    managed to send (a broker that stops reading a connection stops its sends: TCP backpressure). ``idle_s``: stop
    earlier once no socket took a byte for that long (the broker stopped reading them all)."""
    sent = [0] * len(socks_and_data)
    for sock, _ in socks_and_data:
        sock.setblocking(False)
    deadline = time.monotonic() + seconds
    progress = time.monotonic()
    while time.monotonic() < deadline:
        pending = [i for i, (_, d) in enumerate(socks_and_data) if sent[i] < len(d)]
        if not pending or (idle_s is not None and time.monotonic() - progress > idle_s):
            break
        _, writable, _ = select.select([], [socks_and_data[i][0] for i in pending], [], 0.2)
        for i in pending:
            sock, data = socks_and_data[i]
            if sock not in writable:
                continue
            try:
                n = sock.send(memoryview(data)[sent[i]:sent[i] + MiB])
                sent[i] += n
                if n:
                    progress = time.monotonic()
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                sent[i] = len(data)  # closed by the broker: nothing more to send
    for sock, _ in socks_and_data:
        sock.setblocking(True)
    return sent


def header_v1(api_key: int, version: int, corr: int, client_id: bytes = b"hostile") -> bytes:
    return struct.pack(">hhi", api_key, version, corr) + struct.pack(">h", len(client_id)) + client_id


def sized(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def api_versions_v3(corr: int, tag_bytes: int = 0, body_tags: bytes | None = None) -> bytes:
    """ApiVersions v3 (flexible, header v2). ``tag_bytes``: one unknown tagged field that long (a large but valid
    request); ``body_tags``: a raw tagged-field section instead."""
    body = b"\x02k\x021"
    if body_tags is None:
        body_tags = b"\x00" if not tag_bytes else b"\x01" + encode_uvarint(200) + encode_uvarint(tag_bytes) \
            + b"z" * tag_bytes
    return sized(header_v1(API_VERSIONS, 3, corr) + b"\x00" + body + body_tags)


def broker_log_is_clean(broker) -> None:
    text = broker.log_text()
    for bad in ("Traceback", "OverflowError"):
        assert bad not in text, f"{bad} in the broker log:\n{broker.log_tail(40)}"


def vm_kb(broker, field: str) -> int:
    return proc_status_kb(broker.pid, field)


# ------------------------------------------------------------------------------------------- memory and time

def test_half_sent_64mib_frames_hold_only_what_arrived(broker_factory):
    """Eight Produce frames declaring 64 MiB each, half sent: memory follows the bytes (it used to be the declared
    size at once), stays within queued.max.request.bytes' default bound, and comes back when they go."""
    broker = broker_factory()
    base_rss, base_size = vm_kb(broker, "VmRSS"), vm_kb(broker, "VmSize")
    with StallWatch(broker) as watch:
        head = [connect(broker, timeout=30) for _ in range(8)]
        for i, sock in enumerate(head):
            sock.sendall(struct.pack(">i", 64 * MiB) + header_v1(PRODUCE, 7, i) + b"\x00" * MiB)
        wait_until(lambda: vm_kb(broker, "VmRSS") - base_rss > 6 * 1024, timeout=10,
                   message="the broker to read the first MiB of each frame")
        # nothing was allocated for the 63 MiB not yet sent (8 x 64 MiB would be 512 MiB of address space)
        grown = (vm_kb(broker, "VmSize") - base_size) / 1024
        assert grown < 128, f"address space grew {grown:.0f} MB for 8 MiB received"
        # Until the broker stops reading (the bound, below): 4 s without a byte taken (it reads 248 MiB in < 1 s
        # here; waiting the whole 20 s made this the suite's slowest test, 31 s)
        sent = push([(s, b"\x00" * (31 * MiB)) for s in head], seconds=20, idle_s=4)
        # How much is read before the 256 MiB request-memory bound stops the reading depends on which frames won
        # their 32 -> 64 MiB growth first (seen: 178-248 MiB, lower on a loaded machine); at least half the bound
        # shows the reading goes on past the first MiB of each frame.
        assert sum(sent) >= 128 * MiB, f"the broker read only {sum(sent) / MiB:.0f} MiB of 248"
        # default bound: 256 MiB of request buffers + one reservation granted past it (<= a 32 -> 64 MiB growth)
        peak = (vm_kb(broker, "VmHWM") - base_rss) / 1024
        assert peak < 256 + 64 + 48, f"peak RSS grew {peak:.0f} MB"
        for sock in head:
            sock.close()
    assert_healthy(broker, watch, what="8 half-sent 64 MiB frames")
    # the memory went back: a 32 MiB request is received and answered
    sock = connect(broker, timeout=30)
    sock.sendall(api_versions_v3(9, tag_bytes=32 * MiB))
    assert read_response(sock)[0] == 9
    sock.close()


def test_queued_max_request_bytes_bounds_request_memory(broker_factory):
    """16 MiB of request memory: eight never-finished 16 MiB frames hold at most that plus one reservation (the
    same frames held 120 MiB before), small requests keep flowing, and the stuck ones are closed at the receive
    timeout, which gives the memory back."""
    broker = broker_factory(overrides={"socket.request.max.bytes": 16 * MiB, "queued.max.request.bytes": 16 * MiB,
                                       "socket.request.receive.timeout.ms": 4000})
    base = vm_kb(broker, "VmRSS")
    with StallWatch(broker) as watch:
        stuck = [connect(broker, timeout=30) for _ in range(8)]
        started = time.monotonic()
        push([(s, struct.pack(">i", 16 * MiB) + header_v1(PRODUCE, 7, i) + b"\x00" * (15 * MiB))
              for i, s in enumerate(stuck)], seconds=2.5)
        peak = (vm_kb(broker, "VmHWM") - base) / 1024
        assert peak < 16 + 16 + 24, f"peak RSS grew {peak:.0f} MB with queued.max.request.bytes=16 MiB"
        for sock in stuck:
            took = time.monotonic() - started + assert_closed_by_broker(sock, within=8)
            assert took < 4 + 3, f"a stuck request held its connection {took:.1f} s"
    assert_healthy(broker, watch, what="queued.max.request.bytes")
    sock = connect(broker, timeout=30)
    sock.sendall(api_versions_v3(5, tag_bytes=15 * MiB))
    assert read_response(sock)[0] == 5, "a large request after the stuck ones went"
    sock.close()


def test_slowloris_connections_closed_after_receive_timeout(broker_factory):
    """100 connections drip one byte per 200 ms into requests that would take minutes (50 large frames, 50 small
    ones): each is closed 2-4 s after its first byte; a slow request that completes in time is answered."""
    broker = broker_factory(overrides={"socket.request.receive.timeout.ms": 2000})
    with StallWatch(broker) as watch:
        socks = [connect(broker) for _ in range(100)]
        first = {}
        for i, s in enumerate(socks):
            s.sendall(struct.pack(">i", MiB if i % 2 else 40) + b"\x00")
            first[s] = time.monotonic()
        slow = connect(broker)
        whole = api_versions(77)
        closed = {}
        deadline = time.monotonic() + 8
        step = 0
        while len(closed) < len(socks) and time.monotonic() < deadline:
            time.sleep(0.2)
            if step < len(whole):  # the honest slow client: 5 bytes per 200 ms, done within ~1 s
                slow.sendall(whole[step:step + 5])
                step += 5
            readable, _, _ = select.select([s for s in socks if s not in closed], [], [], 0)
            now = time.monotonic()
            for s in socks:
                if s in closed:
                    continue
                try:
                    if s in readable and s.recv(1) == b"":
                        raise ConnectionResetError
                    s.send(b"\x00")
                except OSError:
                    closed[s] = now - first[s]
        assert len(closed) == len(socks), f"{len(socks) - len(closed)} slow-loris connections still open"
        times = sorted(closed.values())
        assert times[0] >= 1.9 and times[-1] <= 4.0, f"closed after {times[0]:.2f}..{times[-1]:.2f} s"
        slow.settimeout(5)
        assert read_response(slow)[0] == 77
        slow.close()
        for s in socks:
            s.close()
    assert_healthy(broker, watch, what="100 slow-loris connections")


def test_idle_connections_closed_after_connections_max_idle_ms(broker_factory):
    """connections.max.idle.ms=1500: a silent connection and one idle after a request are closed ~1.5 s later; a
    long-poll Fetch parked for 3 s is not idle; the bystander (a request every 50 ms) is never closed."""
    broker = broker_factory(overrides={"connections.max.idle.ms": 1500})
    with RawClient(broker) as c:
        c.create_topic("idle-fetch")
    with StallWatch(broker) as watch:
        silent = connect(broker)
        used = connect(broker)
        assert answered(used, 1)
        fetch = connect(broker, timeout=10)
        fetch.sendall(sized(header_v1(FETCH, 4, 3) + APIS[FETCH].encode_request(4, {
            "replica_id": -1, "max_wait_ms": 3000, "min_bytes": 1, "max_bytes": 1024, "isolation_level": 0,
            "topics": [{"topic": "idle-fetch", "partitions": [{"partition": 0, "fetch_offset": 0,
                                                              "partition_max_bytes": 1024}]}]}).getvalue()))
        t_silent = assert_closed_by_broker(silent, within=5)
        t_used = assert_closed_by_broker(used, within=5)
        assert 1.4 <= t_silent <= 1.5 + 0.4 + 1.0, t_silent
        assert t_used <= 1.5 + 0.4 + 1.0, t_used
        t0 = time.monotonic()
        got, _ = read_response(fetch)  # answered when max_wait_ms ran out: ~3 s after it was sent
        assert got == 3
        assert time.monotonic() - t0 >= 0.5, "the long poll was not parked"
        assert assert_closed_by_broker(fetch, within=5) >= 1.4  # idle only after its answer
    assert_healthy(broker, watch, what="connections.max.idle.ms")


# ------------------------------------------------------------------------------------------ connection counts

def test_max_connections_new_connections_wait_for_a_slot(broker_factory):
    """max.connections=4 (the bystander holds one): the fifth connection is not served -- Kafka stops accepting,
    the connection waits in the backlog -- until one of the four closes, then at once."""
    broker = broker_factory(overrides={"max.connections": 4})
    with StallWatch(broker) as watch:
        mine = [connect(broker) for _ in range(3)]
        assert all(answered(s, i) for i, s in enumerate(mine))
        fifth = connect(broker)  # the kernel completes the handshake; the broker does not accept it yet
        fifth.sendall(api_versions(50))
        fifth.settimeout(1.5)
        with pytest.raises(socket.timeout):
            fifth.recv(1)
        mine.pop().close()
        t0 = time.monotonic()
        fifth.settimeout(5)
        assert read_response(fifth)[0] == 50
        assert time.monotonic() - t0 < 1.0
        fifth.close()
        for s in mine:
            s.close()
    wait_until(lambda: answered(connect(broker, timeout=2), 60, timeout=2), timeout=10,
               message="a slot for a new connection")
    assert_healthy(broker, watch, what="max.connections")


def test_max_connections_per_ip_and_overrides(broker_factory):
    """max.connections.per.ip=3 with overrides 127.0.0.2:1 and 127.0.0.3:5: the connection over its address's cap
    is closed at once with nothing sent; closing one makes room again."""
    broker = broker_factory(overrides={"max.connections.per.ip": 3,
                                       "max.connections.per.ip.overrides": "127.0.0.2:1,127.0.0.3:5"})
    with StallWatch(broker) as watch:
        for source, cap in (("127.0.0.4", 3), ("127.0.0.2", 1), ("127.0.0.3", 5)):
            held = [connect(broker, source) for _ in range(cap)]
            assert all(answered(s, i) for i, s in enumerate(held)), source
            assert assert_closed_by_broker(connect(broker, source), within=2) < 0.5, source
            held.pop().close()
            wait_until(lambda: answered(connect(broker, source, timeout=2), 9, timeout=2), timeout=10,
                       message=f"room for one more connection from {source}")
            for s in held:
                s.close()
    assert "max.connections.per.ip" in broker.log_text()
    assert_healthy(broker, watch, what="max.connections.per.ip")


# --------------------------------------------------------------------------------------- protocol amplification

def test_huge_varints_in_headers_and_bodies_close_the_connection(broker):
    """A tagged-field size of 2^64-1 in a request header raised OverflowError out of headers.py; now every such
    varint is bad input: the connection is closed, nothing answered, nothing in the log but a line."""
    huge = encode_uvarint(2**64 - 1)
    with StallWatch(broker) as watch:
        head = header_v1(API_VERSIONS, 3, 1)
        send_and_expect_close(broker, sized(head + b"\x02\x00" + huge + b"\x01\x00" + b"\x02k\x021\x00"))
        send_and_expect_close(broker, sized(head + encode_uvarint(2**63) + b"\x00\x00"))
        send_and_expect_close(broker, sized(head + b"\x00" + b"\x02k\x021" + b"\x02\x00" + huge + b"\x01\x00"))
        # Metadata v9 (flexible): a compact topic array of 2^64-2 entries
        send_and_expect_close(broker, sized(header_v1(METADATA, 9, 2) + b"\x00" + huge + b"\x00\x00\x00"))
    broker_log_is_clean(broker)
    assert_healthy(broker, watch, what="huge varints")


def test_metadata_naming_two_million_topics_is_refused_at_once(broker):
    """Issue 8: a 4 MB Metadata naming 2 M topics stalled every client 10 s at 965 MB. It is refused by the codec's
    element budget as soon as its count is read."""
    with StallWatch(broker) as watch:
        n = 2_000_000
        took = send_and_expect_close(broker, sized(header_v1(METADATA, 1, 1) + struct.pack(">i", n)
                                                   + b"\x00\x00" * n))
        assert took < 1.0
        # the same name 2 M times (Kafka would de-duplicate after decoding; we never decode them)
        send_and_expect_close(broker, sized(header_v1(METADATA, 4, 2) + struct.pack(">i", n) + b"\x00\x01t" * n
                                            + b"\x00"))
    assert "request.max.elements" in broker.log_text()
    broker_log_is_clean(broker)
    assert_healthy(broker, watch, what="a 2 M-topic Metadata request")


def _metadata_v4(corr: int, names: list[bytes]) -> bytes:
    body = struct.pack(">i", len(names)) + b"".join(struct.pack(">h", len(n)) + n for n in names) + b"\x00"
    return sized(header_v1(METADATA, 4, corr) + body)


def test_metadata_topic_limit_and_duplicates(broker):
    """metadata.request.max.topics (10,000): that many distinct names are answered, one more closes the
    connection; repeated names are answered once each (Kafka's set semantics)."""
    with StallWatch(broker) as watch:
        names = [b"absent-%05d" % i for i in range(10_000)]
        sock = connect(broker, timeout=30)
        sock.sendall(_metadata_v4(1, names))
        corr, body = read_response(sock)
        resp = APIS[METADATA].decode_response(4, body)
        assert corr == 1 and len(resp["topics"]) == 10_000
        assert {t["name"].encode() for t in resp["topics"]} == set(names)
        assert {t["error_code"] for t in resp["topics"]} == {UNKNOWN_TOPIC_OR_PARTITION}
        sock.sendall(_metadata_v4(2, [b"dup-a", b"dup-b"] * 20_000))
        corr, body = read_response(sock)
        resp = APIS[METADATA].decode_response(4, body)
        assert corr == 2 and sorted(t["name"] for t in resp["topics"]) == ["dup-a", "dup-b"]
        sock.sendall(_metadata_v4(3, names + [b"one-more"]))
        assert assert_closed_by_broker(sock, within=2) < 1.0
    assert "metadata.request.max.topics" in broker.log_text()
    assert_healthy(broker, watch, what="Metadata topic limit")


@pytest.mark.parametrize("what,frame", [
    ("DeleteTopics v1, 2 M names", sized(header_v1(DELETE_TOPICS, 1, 1) + struct.pack(">i", 2_000_000)
                                         + b"\x00\x00" * 2_000_000 + struct.pack(">i", 1000))),
    ("ListOffsets v1, 1 M topics", sized(header_v1(LIST_OFFSETS, 1, 1) + struct.pack(">i", -1)
                                         + struct.pack(">i", 1_000_000) + (b"\x00\x00" + b"\x00" * 4) * 1_000_000)),
    ("Produce v3, 700 k partitions", sized(header_v1(PRODUCE, 3, 1) + b"\xff\xff" + struct.pack(">hi", 1, 1000)
                                           + struct.pack(">i", 1) + b"\x00\x01t" + struct.pack(">i", 700_000)
                                           + (b"\x00" * 4 + b"\xff" * 4) * 700_000)),
    ("ApiVersions v3, 1.5 M body tags", api_versions_v3(1, body_tags=encode_uvarint(1_500_000)
                                                        + b"\x05\x00" * 1_500_000)),
    ("ApiVersions v3, 1.5 M header tags", sized(header_v1(API_VERSIONS, 3, 1) + encode_uvarint(1_500_000)
                                                + b"\x05\x00" * 1_500_000 + b"\x02k\x021\x00")),
])
def test_millions_of_elements_in_other_apis_close_the_connection(broker, what, frame):
    with StallWatch(broker) as watch:
        assert send_and_expect_close(broker, frame) < 1.0, what
    assert "request.max.elements" in broker.log_text()
    broker_log_is_clean(broker)
    assert_healthy(broker, watch, what=what)
    assert rss_mb(broker) < 300
