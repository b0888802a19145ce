"""Fetch-side hostile input (issue 8, section 3) against a real embedded-mode broker at default settings.

Before the fixes:

* a 4.8 KB Fetch v2 naming one partition 300 times produced a 281 MiB response (each mention read and
  down-converted again, and v0-v2 had no response bound at all). Now a repeated partition is served once, like
  Kafka's LinkedHashMap of partitions (first position, last values), and every response is bounded by
  ``fetch.max.bytes`` (57 671 680 by default; for v3+ also by the request's max_bytes), converted bytes included;
* every Fetch v0-v3 down-converted a gzip batch of 1.2 M records again, on the event loop, for seconds and
  hundreds of MB. Now down-conversion runs batch by batch in a worker thread (the loop is never held; the cyclic
  GC is paused while a batch is decoded) within the fetch budget, and a batch of more than 100 000 records is not
  decoded at all: v0-v3 get UNSUPPORTED_VERSION (35, Kafka's answer when it will not down-convert), ListOffsets
  answers its base offset, v4+ fetch it as stored.

Every case runs under ``hostile.StallWatch`` (a bystander's ApiVersions never waits > 1 s) and ends with
``hostile.assert_healthy`` (fresh-connection Metadata < 1 s, peak RSS < 600 MB).
"""
from __future__ import annotations

import socket
import struct
import threading
import time
import zlib

import pytest

from kbroker._native import encode_varint
from kbroker.protocol.apis import APIS
from kbroker.record import Record, build_batch, legacy
from kbroker.record.batch import HEADER, HEADER_SIZE, write_crc
from tests.integration.harness import encode_request, recv_exact
from tests.integration.hostile import StallWatch, assert_healthy
from tests.integration.test_clients_common import now_ms
from tests.integration.test_durability import RawClient

pytestmark = pytest.mark.timeout(300)

FETCH, LIST_OFFSETS = 1, 2
UNSUPPORTED_VERSION = 35
MIB = 1 << 20
FETCH_MAX_BYTES = 57671680            # the broker key's default
DECODE_MAX_RECORDS = 100_000          # kbroker/handlers/workers.py
BIG_PARTITIONS = 64                   # x ~1 MiB: more than fetch.max.bytes in one topic
TS = 1_700_000_000_000


# ------------------------------------------------------------------------------------------------- helpers

def fetch_body(version: int, parts, max_bytes: int = 0x7FFFFFFF) -> bytes:
    """An encoded Fetch request body; ``parts`` = [(topic, partition, fetch_offset, partition_max_bytes)] in wire
    order (one topic entry per run of the same topic; repeats allowed)."""
    topics = []
    for topic, p, offset, pmb in parts:
        if not topics or topics[-1]["topic"] != topic:
            topics.append({"topic": topic, "partitions": []})
        topics[-1]["partitions"].append({"partition": p, "current_leader_epoch": -1, "fetch_offset": offset,
                                         "log_start_offset": -1, "partition_max_bytes": pmb})
    req = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": max_bytes, "isolation_level": 0,
           "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "", "topics": topics}
    return APIS[FETCH].encode_request(version, req).getvalue()


def send_fetch(sock: socket.socket, version: int, body: bytes, cid: int) -> None:
    sock.sendall(encode_request(FETCH, version, cid, body, "hostile-fetch",
                                header_version=APIS[FETCH].request_header_version(version)))


def read_fetch(sock: socket.socket, version: int, cid: int) -> tuple[int, dict]:
    """(response frame size in bytes, decoded Fetch response)."""
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    payload = recv_exact(sock, size)
    hv = APIS[FETCH].response_header_version(version)
    (got,) = struct.unpack_from(">i", payload, 0)
    assert got == cid
    pos = 4 if hv == 0 else 5
    return size, APIS[FETCH].decode_response(version, payload, pos)


def partitions_of(resp: dict) -> list[tuple[str, int, int, int]]:
    """[(topic, partition, error_code, record bytes)] in response order."""
    return [(t["topic"], p["partition_index"], p["error_code"], len(p["records"] or b""))
            for t in resp["responses"] for p in t["partitions"]]


def one_mib_batch(i: int) -> bytes:
    return build_batch([Record(0, TS + i, None, bytes([i % 251]) * (MIB - 200))])


def many_records_gzip_batch(n: int) -> bytes:
    """One gzip v2 batch of ``n`` records (null key, null value, sequential offset deltas), built by hand:
    ~1.4 bytes per record stored, 7-9 bytes inflated."""
    region = b"".join(encode_varint(len(body)) + body
                      for body in (b"\x00\x00" + encode_varint(i) + b"\x01\x01\x00" for i in range(n)))
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    payload = c.compress(region) + c.flush()
    out = bytearray(HEADER_SIZE + len(payload))
    HEADER.pack_into(out, 0, 0, len(out) - 12, -1, 2, 0, 1, n - 1, TS, TS, -1, -1, -1, n)
    out[HEADER_SIZE:] = payload
    write_crc(out, 0, len(out))
    return bytes(out)


@pytest.fixture(scope="module")
def victim(shared_broker):
    """The broker with: 'fat' (64 partitions x one ~1 MiB batch), 'many' (a 1.2 M-record gzip batch at offset 0,
    then small records) and 'near' (a batch just under the decode bound)."""
    with RawClient(shared_broker, client_id="hostile-fetch-setup", timeout=60) as c:
        c.create_topic("fat", BIG_PARTITIONS)
        for p in range(BIG_PARTITIONS):
            c.send(0, 7, RawClient.produce_request("fat", p, one_mib_batch(p)))
        for p in range(BIG_PARTITIONS):
            assert RawClient.produce_result(c.recv()[1]) == (0, 0)
        # A hostile client may raise max.message.bytes on its own topic (CreateTopics) to store a 1.2 MB batch.
        c.create_topic("many", 1, {"max.message.bytes": 4 * MIB})
        assert c.produce("many", 0, many_records_gzip_batch(1_200_000)) == (0, 0)
        assert c.produce("many", 0, build_batch([Record(0, now_ms(), None, b"after")])) == (0, 1_200_000)
        c.create_topic("near", 1, {"max.message.bytes": 4 * MIB})
        assert c.produce("near", 0, many_records_gzip_batch(DECODE_MAX_RECORDS - 1000)) == (0, 0)
    return shared_broker


# ------------------------------------------------------------------------------------------ repeated names

@pytest.mark.parametrize("version", [2, 3, 4, 11])
def test_one_partition_named_300_times_is_answered_once(victim, version):
    body = fetch_body(version, [("fat", 7, 0, 2 * MIB)] * 300, max_bytes=FETCH_MAX_BYTES)
    assert len(body) < 9000  # ~4.8 KB at v2
    with StallWatch(victim) as watch, socket.create_connection((victim.host, victim.port), timeout=30) as sock:
        sock.settimeout(30)
        send_fetch(sock, version, body, 11)
        size, resp = read_fetch(sock, version, 11)
    parts = partitions_of(resp)
    assert [(t, p, e) for t, p, e, _n in parts] == [("fat", 7, 0)]
    assert 0 < parts[0][3] <= MIB and size < MIB + 1000
    assert_healthy(victim, watch, what="a partition named 300 times")


@pytest.mark.parametrize("version", [2, 3, 4, 11])
def test_a_response_never_exceeds_fetch_max_bytes(victim, version):
    # 64 partitions x ~1 MiB asked for, 2 MiB each, no response limit named (v2) or the largest (v3+).
    parts = [("fat", p, 0, 2 * MIB) for p in range(BIG_PARTITIONS)]
    with StallWatch(victim) as watch, socket.create_connection((victim.host, victim.port), timeout=60) as sock:
        sock.settimeout(60)
        send_fetch(sock, version, fetch_body(version, parts), 12)
        size, resp = read_fetch(sock, version, 12)
    got = partitions_of(resp)
    assert [(t, p, e) for t, p, e, _n in got] == [("fat", p, 0) for p in range(BIG_PARTITIONS)]
    data = sum(n for *_x, n in got)
    # Whole ~1 MiB batches (converted or not) until the next one would pass 57 671 680 bytes: 54 or 55 of them.
    assert FETCH_MAX_BYTES - 2 * MIB < data <= FETCH_MAX_BYTES
    assert size < FETCH_MAX_BYTES + 64 * 100
    assert sum(1 for *_x, n in got if n) in (54, 55)
    assert_healthy(victim, watch, what="a Fetch for 64 MiB")


def test_pipelined_budgeted_fetches_from_many_connections(victim):
    """Eight connections each pipeline four Fetch v2 for everything; nobody reads for a while. Each response is
    bounded by fetch.max.bytes and the down-conversions queue in one worker: memory stays bounded."""
    parts = [("fat", p, 0, 2 * MIB) for p in range(BIG_PARTITIONS)]
    body = fetch_body(2, parts)
    socks = []
    with StallWatch(victim) as watch:
        for i in range(8):
            s = socket.create_connection((victim.host, victim.port), timeout=120)
            s.settimeout(120)
            for k in range(4):
                send_fetch(s, 2, body, 100 + k)
            socks.append(s)
        time.sleep(2.0)  # hostile: not reading (the broker must not buffer 32 responses of 55 MiB)
        sizes = []
        for s in socks:
            for k in range(4):
                size, _resp = read_fetch(s, 2, 100 + k)
                sizes.append(size)
            s.close()
    assert len(sizes) == 32 and max(sizes) < FETCH_MAX_BYTES + 64 * 100
    assert_healthy(victim, watch, what="32 pipelined 55 MiB fetches")


# --------------------------------------------------------------------------------------- down-conversion

@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_a_1_2m_record_batch_is_not_down_converted(victim, version):
    with StallWatch(victim) as watch, socket.create_connection((victim.host, victim.port), timeout=30) as sock:
        sock.settimeout(30)
        for k in range(20):  # every fetch used to convert it again, for seconds each
            started = time.monotonic()
            send_fetch(sock, version, fetch_body(version, [("many", 0, 0, MIB)], max_bytes=MIB), k)
            _size, resp = read_fetch(sock, version, k)
            assert time.monotonic() - started < 1.0
            assert partitions_of(resp) == [("many", 0, UNSUPPORTED_VERSION, 0)]
        # The record after it is served normally once the client is past the batch.
        send_fetch(sock, version, fetch_body(version, [("many", 0, 1_200_000, MIB)], max_bytes=MIB), 99)
        _size, resp = read_fetch(sock, version, 99)
        (p,) = [p for t in resp["responses"] for p in t["partitions"]]
        assert p["error_code"] == 0
        assert [(m.offset, m.value) for m in legacy.iter_messages(p["records"])] == [(1_200_000, b"after")]
    assert_healthy(victim, watch, what="Fetch v%d of a 1.2 M-record batch" % version)


def test_the_1_2m_record_batch_as_stored_and_by_time(victim):
    with StallWatch(victim) as watch, RawClient(victim, timeout=30) as c:
        resp = c.call(FETCH, 11, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 4 * MIB,
                                  "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                                  "forgotten_topics_data": [], "rack_id": "", "topics": [{"topic": "many",
                                  "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                                  "log_start_offset": -1, "partition_max_bytes": 4 * MIB}]}]})
        (p,) = resp["responses"][0]["partitions"]
        assert p["error_code"] == 0 and bytes(p["records"][16:17]) == b"\x02"   # the v2 batch, as stored
        started = time.monotonic()
        assert c.offset_for_time("many", TS) == 0          # not decoded: its base offset
        assert time.monotonic() - started < 1.0
    assert_healthy(victim, watch, what="the 1.2 M-record batch through Fetch v11 and ListOffsets")


def test_down_conversion_below_the_bound_stays_off_the_loop(victim):
    """99 000 records (just under the bound, ~0.5 s of conversion each) fetched by v1 and v3 clients on four
    connections at once, five times each: the loop keeps answering, memory stays bounded, answers are exact."""
    errors: list[str] = []
    results: list[tuple[int, int, int]] = []

    def client(version: int) -> None:
        try:
            with socket.create_connection((victim.host, victim.port), timeout=120) as sock:
                sock.settimeout(120)
                for k in range(5):
                    send_fetch(sock, version, fetch_body(version, [("near", 0, 0, 4 * MIB)], max_bytes=4 * MIB),
                               k)
                    _size, resp = read_fetch(sock, version, k)
                    (p,) = [p for t in resp["responses"] for p in t["partitions"]]
                    (wrapper,) = list(legacy.iter_messages(p["records"]))
                    results.append((p["error_code"], wrapper.offset, wrapper.codec))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    with StallWatch(victim) as watch:
        threads = [threading.Thread(target=client, args=(v,)) for v in (1, 3, 1, 3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(240)
    assert errors == []
    assert results == [(0, DECODE_MAX_RECORDS - 1001, 1)] * 20   # one gzip wrapper at the batch's last offset
    assert_healthy(victim, watch, what="20 down-conversions of a 99 000-record batch")
