"""Durability of a real `kbroker-server` process: crashes, torn/corrupt segment tails, clean shutdown, disk layout.

Every test drives a broker *process* (tests/integration/harness.py) and talks to it over TCP with our own codec
(``RawClient`` below: `kbroker.protocol.apis.APIS` schemas, request header from `Api.request_header_version`,
int32 size framing), so what is checked is exactly what a client sees after a restart.

What "intact" means here (checked by ``read_all``): a Fetch v4 of the whole partition returns record bytes that are
a gap-free sequence of complete v2 batches, every batch's CRC-32C matches, offsets run base..LEO-1 without holes,
and every record value is the one the writer put at that offset.

Cases:
- SIGKILL while a pipelined acks=all producer streams numbered records: after a restart on the same log dir
  (no clean-shutdown marker, so log recovery runs) every acknowledged record is at its acknowledged offset with
  its exact value; records past the last acknowledgement may exist, but only intact and contiguous.
- A torn tail (active `.log` cut mid-batch) and a flipped byte inside the last batch, with the clean-shutdown
  marker removed: the broker cuts the log back to the last whole valid batch, serves the earlier data exactly and
  appends new data at that offset.
- SIGTERM: exit code 0, `.kafka_cleanshutdown` written, `recovery-point-offset-checkpoint` in Kafka's exact text
  form, Kafka's directory layout, and everything is served again after the restart.
"""
from __future__ import annotations

import os
import random
import signal
import socket
import struct
import threading
import time

import pytest

from kbroker.protocol.apis import APIS
from kbroker.protocol.headers import decode_response_header, encode_request_header
from kbroker.record import Record, batch_records, build_batch, iter_batches
from kbroker.record.batch import compute_crc
from tests.integration.harness import recv_exact, wait_until
from tests.integration.test_clients_common import confluent_consume, now_ms

pytestmark = pytest.mark.timeout(120)

PRODUCE, FETCH, LIST_OFFSETS, CREATE_TOPICS = 0, 1, 2, 19
SEGMENT_NAME = "0" * 20  # the first segment of a partition starts at offset 0: 20-digit zero-padded base offset
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
CHECKPOINT = "recovery-point-offset-checkpoint"


# ------------------------------------------------------------------------------------------------- raw client

class RawClient:
    """One persistent connection speaking Kafka's wire protocol through our own schemas.

    ``send`` writes a request and returns its correlation id; ``recv`` reads the next response (responses come back
    in request order, so pipelining is just "send several, then recv in order"). Versions used: Produce v7,
    Fetch v4, ListOffsets v1, CreateTopics v1 -- all non-flexible (request header v1, response header v0).
    """

    def __init__(self, broker, client_id: str = "kbroker-durability-test", timeout: float = 10.0):
        self.sock = socket.create_connection((broker.host, broker.port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.client_id = client_id
        self.correlation = 0
        self.pending: list[tuple[int, int, int]] = []  # (correlation id, api key, version) in send order

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, api_key: int, version: int, msg: dict) -> int:
        api = APIS[api_key]
        self.correlation += 1
        payload = encode_request_header(api.request_header_version(version), api_key, version, self.correlation,
                                        self.client_id)
        payload += api.encode_request(version, msg).getvalue()
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        self.pending.append((self.correlation, api_key, version))
        return self.correlation

    def recv(self) -> tuple[int, dict]:
        corr, api_key, version = self.pending.pop(0)
        api = APIS[api_key]
        (size,) = struct.unpack(">i", recv_exact(self.sock, 4))
        payload = recv_exact(self.sock, size)
        got, pos = decode_response_header(payload, api.response_header_version(version))
        assert got == corr, f"correlation id {got}, expected {corr}"
        return corr, api.decode_response(version, payload, pos)

    def call(self, api_key: int, version: int, msg: dict) -> dict:
        self.send(api_key, version, msg)
        return self.recv()[1]

    # -- typed helpers
    def create_topic(self, name: str, partitions: int = 1, configs: dict | None = None) -> None:
        resp = self.call(CREATE_TOPICS, 1, {"topics": [{
            "name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
            "configs": [{"name": k, "value": str(v)} for k, v in (configs or {}).items()]}],
            "timeout_ms": 10_000, "validate_only": False})
        (t,) = resp["topics"]
        assert (t["name"], t["error_code"]) == (name, 0), t

    @staticmethod
    def produce_request(topic: str, partition: int, records: bytes, acks: int = -1) -> dict:
        return {"transactional_id": None, "acks": acks, "timeout_ms": 10_000,
                "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}

    @staticmethod
    def produce_result(resp: dict) -> tuple[int, int]:
        (t,) = resp["responses"]
        (p,) = t["partition_responses"]
        return p["error_code"], p["base_offset"]

    def produce(self, topic: str, partition: int, records: bytes, acks: int = -1,
                version: int = 7) -> tuple[int, int]:
        """(error_code, base_offset) of a one-partition Produce."""
        return self.produce_result(self.call(PRODUCE, version, self.produce_request(topic, partition, records,
                                                                                     acks)))

    def latest_offset(self, topic: str, partition: int = 0) -> int:
        resp = self.call(LIST_OFFSETS, 1, {"replica_id": -1, "topics": [
            {"name": topic, "partitions": [{"partition_index": partition, "timestamp": -1}]}]})
        (p,) = resp["topics"][0]["partitions"]
        assert p["error_code"] == 0, p
        return p["offset"]

    def offset_for_time(self, topic: str, timestamp: int, partition: int = 0) -> int:
        """ListOffsets v1 for a timestamp: the first offset whose batch holds a timestamp >= it, or -1."""
        resp = self.call(LIST_OFFSETS, 1, {"replica_id": -1, "topics": [
            {"name": topic, "partitions": [{"partition_index": partition, "timestamp": timestamp}]}]})
        (p,) = resp["topics"][0]["partitions"]
        assert p["error_code"] == 0, p
        return p["offset"]

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int = 64 << 20) -> dict:
        resp = self.call(FETCH, 4, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": max_bytes,
                                    "isolation_level": 0, "topics": [{"topic": topic, "partitions": [
                                        {"partition": partition, "fetch_offset": offset,
                                         "partition_max_bytes": max_bytes}]}]})
        (t,) = resp["responses"]
        (p,) = t["partitions"]
        return p



def _checkpoint_without_offsets_topic(path):
    """The checkpoint text with __consumer_offsets lines removed (consumers with a group.id create that topic),
    after checking the header's count matches the number of entry lines."""
    lines = path.read_text().splitlines()
    assert lines[0] == "0" and int(lines[1]) == len(lines) - 2, lines[:3]
    kept = [ln for ln in lines[2:] if not ln.startswith("__consumer_offsets ")]
    return "0\n%d\n" % len(kept) + "".join(ln + "\n" for ln in kept)

def read_all(client: RawClient, topic: str, partition: int = 0) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of the partition as (offset, key, value), asserting the bytes are intact (module docstring).

    A fetch answers from one segment at a time (as Kafka's does), so this fetches from the next offset until the
    high watermark is reached."""
    out = []
    next_offset = 0
    while True:
        p = client.fetch(topic, partition, next_offset)
        assert p["error_code"] == 0, p
        data = bytes(p["records"] or b"")
        if not data:
            break
        end = 0
        for pos, h in iter_batches(data, include_control=True):
            assert pos == end, f"gap or garbage before the batch at byte {pos} (previous batch ended at {end})"
            assert compute_crc(data, pos, h.size) == h.crc, f"CRC mismatch in the batch at offset {h.base_offset}"
            assert h.base_offset == next_offset, f"batch at {h.base_offset}, expected {next_offset}"
            recs = batch_records(data, pos, h)
            assert [r[0] for r in recs] == list(range(h.base_offset, h.last_offset + 1))
            out.extend((r[0], r[2], r[3]) for r in recs)
            next_offset = h.last_offset + 1
            end = pos + h.size
        # 64 MiB holds a whole segment, so every response must end exactly at a batch boundary.
        assert end == len(data), f"{len(data) - end} trailing bytes that are not a whole valid batch"
    assert next_offset == p["high_watermark"], (next_offset, p["high_watermark"])
    return out


def value_of(n: int) -> bytes:
    """The value of record number n: its number, then 0..1500 deterministic bytes (so batches straddle pages)."""
    rnd = random.Random(n)
    return b"rec-%08d|" % n + rnd.randbytes(rnd.randrange(0, 1500))


def numbered_batch(first: int, count: int, ts: int, codec: int = 0) -> bytes:
    return build_batch([Record(i, ts + i, b"k%d" % (first + i), value_of(first + i)) for i in range(count)],
                       codec=codec)


def partition_dir(broker, topic: str, partition: int = 0):
    return broker.log_dir / f"{topic}-{partition}"


# ---------------------------------------------------------------------------------- crash / stop mid-stream

class StreamProducer:
    """A pipelined acks=all producer on its own thread: up to 8 requests in flight, batches of 1..9 numbered
    records (record n = ``value_of(n)``), alternating uncompressed and gzip (codec 1). It stops at the first
    connection error -- the broker going away -- and records what was acknowledged."""

    def __init__(self, broker, topic: str):
        self.broker, self.topic = broker, topic
        self.acked: list[tuple[int, int, int]] = []  # (base offset, first record number, count) per acked batch
        self.failures: list[str] = []                # produce errors (there must be none)
        self.cut_off: list[BaseException] = []       # the connection error that ended the stream
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        rnd = random.Random(7)
        ts = now_ms()
        sent: dict[int, tuple[int, int]] = {}
        n = 0
        try:
            with RawClient(self.broker, timeout=15.0) as c:
                while not self._stop.is_set():
                    while len(c.pending) < 8:
                        count = rnd.randrange(1, 10)
                        batch = numbered_batch(n, count, ts, codec=(n // 7) % 2)
                        sent[c.send(PRODUCE, 7, RawClient.produce_request(self.topic, 0, batch))] = (n, count)
                        n += count
                    corr, resp = c.recv()
                    error, base = RawClient.produce_result(resp)
                    first, count = sent.pop(corr)
                    if error != 0:
                        self.failures.append(f"batch of records {first}..{first + count - 1}: error {error}")
                        return
                    self.acked.append((base, first, count))
        except (OSError, ConnectionError) as exc:
            self.cut_off.append(exc)  # what was not acknowledged may or may not be in the log

    def run_until(self, records: int, then) -> object:
        """Start, wait (bounded) for `records` acknowledged records, call `then()` (kill/stop the broker) while the
        stream is still flowing, wait for the thread; returns what `then` returned."""
        self._thread.start()
        try:
            wait_until(lambda: self.failures or sum(a[2] for a in self.acked) >= records, timeout=60,
                       message=f"{records} acked records")
            assert self.failures == []
            result = then()
        finally:
            self._stop.set()
            self._thread.join(20)
        assert not self._thread.is_alive()
        assert self.failures == []
        # `then` hit a live stream: the producer had requests in flight and lost its connection mid-stream.
        assert len(self.cut_off) == 1, self.cut_off
        # Batches are acknowledged in order on one connection, so offset == record number for every acked record.
        for base, first, count in self.acked:
            assert base == first, f"batch of record {first} acknowledged at offset {base}"
        return result

    @property
    def last_acked(self) -> int:
        base, _, count = self.acked[-1]
        return base + count - 1


def start_served(broker, topic_partitions, timeout: float = 60.0) -> None:
    """Start the broker and wait until it leads ``topic_partitions`` ([(topic, partition)]) again. The listener answers
    ApiVersions (the harness's "ready") before the controller has re-elected the leaders, and the raw requests of
    these tests do not retry the UNKNOWN_TOPIC_OR_PARTITION (3) a client gets meanwhile."""
    broker.start(timeout=timeout)

    def led():
        with RawClient(broker) as c:
            resp = c.call(LIST_OFFSETS, 1, {"replica_id": -1, "topics": [
                {"name": t, "partitions": [{"partition_index": p, "timestamp": -1}]} for t, p in topic_partitions]})
        return all(p["error_code"] == 0 for t in resp["topics"] for p in t["partitions"])
    wait_until(led, timeout=timeout, message=f"broker to lead {topic_partitions} again", ignore=(OSError,))


def _check_stream_after_restart(broker, stream: StreamProducer) -> int:
    """Every acked record is at its offset; anything after it is intact and contiguous; new data lands at the LEO.
    Returns the log end offset found after the restart."""
    topic, last_acked = stream.topic, stream.last_acked
    with RawClient(broker) as c:
        got = read_all(c, topic)
        leo = c.latest_offset(topic)
    assert leo == len(got) and leo > last_acked
    # Every record present (acked or not) is record number == offset with its exact key and value.
    for offset, key, value in got:
        assert (key, value) == (b"k%d" % offset, value_of(offset)), f"record at offset {offset} is garbled"
    # A normal client reads the end of the acknowledged prefix and what follows, and the partition takes new data.
    tail = confluent_consume(broker.bootstrap, topic, leo - last_acked - 1 + 20, start=last_acked - 19)
    assert [(g.offset, g.value) for g in tail] == [(o, value_of(o)) for o in range(last_acked - 19, leo)]
    with RawClient(broker) as c:
        assert c.produce(topic, 0, numbered_batch(leo, 3, now_ms())) == (0, leo)
        assert c.latest_offset(topic) == leo + 3
    return leo


def test_sigkill_during_produce_stream_keeps_every_acknowledged_record(broker_factory):
    # 64 KiB segments: the ~1 MB stream rolls ~20 times, so recovery walks many segments, not just one.
    broker = broker_factory(overrides={"log.segment.bytes": 65536})
    topic = "crash-stream"
    with RawClient(broker) as c:
        c.create_topic(topic)
    stream = StreamProducer(broker, topic)
    assert stream.run_until(1500, broker.kill9) == -signal.SIGKILL
    assert not (broker.log_dir / CLEAN_SHUTDOWN).exists()

    start_served(broker, [(topic, 0)])  # no manual repair: the same command on the same log dir
    assert "clean shutdown: False" in broker.log_text().rsplit("=== harness:", 1)[1]
    _check_stream_after_restart(broker, stream)
    assert len(list(partition_dir(broker, topic).glob("*.log"))) >= 5


def test_sigterm_during_produce_stream_and_long_poll_is_prompt_and_clean(broker):
    topic, idle = "stop-stream", "stop-idle"
    with RawClient(broker) as c:
        c.create_topic(topic)
        c.create_topic(idle)
    # A consumer parked in a long poll (60 s max wait) on an empty partition while the shutdown begins.
    parked = RawClient(broker, timeout=30.0)
    parked.send(FETCH, 4, {"replica_id": -1, "max_wait_ms": 60_000, "min_bytes": 1, "max_bytes": 1 << 20,
                           "isolation_level": 0, "topics": [{"topic": idle, "partitions": [
                               {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
    stream = StreamProducer(broker, topic)

    def sigterm():
        started = time.monotonic()
        rc = broker.stop(timeout=30)
        return rc, time.monotonic() - started

    rc, took = stream.run_until(1500, sigterm)
    assert rc == 0
    # Neither the stream nor the parked fetch may hold the shutdown for the 10 s grace period.
    assert took < 5.0, f"SIGTERM took {took:.1f}s"
    # The parked fetch is answered (empty) before its connection closes.
    with parked:
        _, resp = parked.recv()
    (p,) = resp["responses"][0]["partitions"]
    assert (p["error_code"], p["high_watermark"], bytes(p["records"] or b"")) == (0, 0, b"")
    assert (broker.log_dir / CLEAN_SHUTDOWN).exists()

    start_served(broker, [(stream.topic, 0)])
    assert "clean shutdown: True" in broker.log_text().rsplit("=== harness:", 1)[1]
    leo = _check_stream_after_restart(broker, stream)
    assert broker.stop() == 0
    # The checkpoint holds both partitions' log end offsets (the stream topic got 3 more records above).
    assert _checkpoint_without_offsets_topic(broker.log_dir / CHECKPOINT) == f"0\n2\n{idle} 0 0\n{topic} 0 {leo + 3}\n"


# ------------------------------------------------------------------------------------- torn and corrupt tails

def _fill(client: RawClient, topic: str, t0: int, batches: int = 10, per_batch: int = 3) -> None:
    """`batches` uncompressed batches of `per_batch` numbered records at offsets 0.. (~750 B a record, so the
    offset index gets entries every 4096 bytes and some of them point into the part that is cut later); batch b
    carries timestamps t0 + 1000*b + i, so the time index has entries to lose too."""
    for b in range(batches):
        batch = numbered_batch(b * per_batch, per_batch, t0 + 1000 * b)
        assert client.produce(topic, 0, batch) == (0, b * per_batch)


def _batch_positions(log_path) -> list[tuple[int, int, int]]:
    """(file position, size, base offset) of every batch of a segment file."""
    data = log_path.read_bytes()
    out = [(pos, h.size, h.base_offset) for pos, h in iter_batches(data, include_control=True)]
    assert out and out[-1][0] + out[-1][1] == len(data)
    return out


def _xor_byte(path, at: int, mask: int = 0x5A) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        byte = f.read(1)[0]
        f.seek(at)
        f.write(bytes([byte ^ mask]))


def _overwrite(path, at: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(data)


# name -> (damage(log path, batch positions), expected log end offset after recovery). Every topic holds batches
# of offsets 0-2, 3-5, ..., 27-29. Recovery keeps the longest prefix of whole, valid batches (Kafka's
# LogSegment.recover: the first bad batch and everything after it go, even valid batches behind a corrupt one).
DAMAGE = {
    # The active .log cut inside the last batch's records / inside its 61-byte header (a torn write).
    "torn-records": (lambda p, b: os.truncate(p, b[-1][0] + b[-1][1] // 2), 27),
    "torn-header": (lambda p, b: os.truncate(p, b[-1][0] + 30), 27),
    # One flipped byte inside the last batch's records: its CRC-32C no longer matches.
    "flipped-records": (lambda p, b: _xor_byte(p, b[-1][0] + b[-1][1] - 100), 27),
    # The last batch's length field claims 2 GB / its magic byte is not 2.
    "bad-length": (lambda p, b: _overwrite(p, b[-1][0] + 8, struct.pack(">i", 0x7FFFFFF0)), 27),
    "bad-magic": (lambda p, b: _overwrite(p, b[-1][0] + 16, b"\x07"), 27),
    # Zero-filled blocks after the last batch (a crash after the file grew but before the data landed).
    "zero-tail": (lambda p, b: open(p, "ab").write(bytes(4096)), 30),
    # A flipped byte in the middle batch (offsets 15-17): everything from there on is cut.
    "corrupt-middle": (lambda p, b: _xor_byte(p, b[5][0] + b[5][1] // 2), 15),
    # Both index files gone: rebuilt from the intact .log, nothing lost.
    "indexes-deleted": (lambda p, b: [p.with_suffix(s).unlink() for s in (".index", ".timeindex")], 30),
}


def test_damaged_segment_tails_are_cut_back_on_restart(broker):
    t0 = now_ms() - 60_000
    with RawClient(broker) as c:
        for name in DAMAGE:
            c.create_topic(f"tail-{name}")
            _fill(c, f"tail-{name}", t0)
    assert broker.stop() == 0

    cut_at = {}
    for name, (damage, leo) in DAMAGE.items():
        log_path = partition_dir(broker, f"tail-{name}") / f"{SEGMENT_NAME}.log"
        positions = _batch_positions(log_path)
        assert [base for _, _, base in positions] == list(range(0, 30, 3))
        damage(log_path, positions)
        cut_at[name] = sum(size for _, size, base in positions if base < leo)
    # Without the marker the broker must treat the shutdown as a crash and scan the segments.
    marker = broker.log_dir / CLEAN_SHUTDOWN
    assert marker.exists()
    marker.unlink()

    start_served(broker, [(f"tail-{name}", 0) for name in DAMAGE])   # no manual repair
    with RawClient(broker) as c:
        for name, (_, leo) in DAMAGE.items():
            topic = f"tail-{name}"
            assert c.latest_offset(topic) == leo, name
            assert read_all(c, topic) == [(o, b"k%d" % o, value_of(o)) for o in range(leo)], name
            # The repair reached the disk: the segment ends at the last whole valid batch.
            assert (partition_dir(broker, topic) / f"{SEGMENT_NAME}.log").stat().st_size == cut_at[name], name
            # The time index lost what was cut: the last kept batch is found by its time, a cut one is not.
            last_kept = leo // 3 - 1
            assert c.offset_for_time(topic, t0 + 1000 * last_kept) == 3 * last_kept, name
            assert c.offset_for_time(topic, t0 + 1000 * (last_kept + 1)) == -1, name
            # New data goes exactly where the cut began and reads back, also from an offset inside it (which goes
            # through the rebuilt offset index).
            assert c.produce(topic, 0, numbered_batch(leo, 3, now_ms())) == (0, leo), name
            assert c.latest_offset(topic) == leo + 3, name
            p = c.fetch(topic, 0, leo + 1)
            recs = [r for pos, h in iter_batches(bytes(p["records"])) for r in batch_records(p["records"], pos, h)]
            assert [(r[0], r[3]) for r in recs] == [(o, value_of(o)) for o in range(leo, leo + 3)], name
            assert read_all(c, topic) == [(o, b"k%d" % o, value_of(o)) for o in range(leo + 3)], name
    # A normal client agrees.
    got = confluent_consume(broker.bootstrap, "tail-torn-records", 30)
    assert [(g.offset, g.value) for g in got] == [(o, value_of(o)) for o in range(30)]


# -------------------------------------------------------------------------------- SIGTERM and disk layout

def _properties_lines(path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line and not line.startswith("#")]


def test_sigterm_is_clean_and_disk_layout_is_kafkas(broker):
    topic = "clean-stop"
    counts = {0: 12, 1: 7}
    with RawClient(broker) as c:
        c.create_topic(topic, partitions=2)
        ts = now_ms()
        for p, n in counts.items():
            for first in range(0, n, 4):
                k = min(4, n - first)
                assert c.produce(topic, p, numbered_batch(first, k, ts)) == (0, first)

    assert broker.stop() == 0   # SIGTERM -> graceful shutdown, exit code 0
    d = broker.log_dir
    assert (d / CLEAN_SHUTDOWN).exists()
    assert _properties_lines(d / "meta.properties") == ["version=0", "broker.id=0"]
    # Kafka's checkpoint text: version line, entry count, "<topic> <partition> <offset>" lines.
    assert _checkpoint_without_offsets_topic(d / CHECKPOINT) == f"0\n2\n{topic} 0 12\n{topic} 1 7\n"
    for p, n in counts.items():
        pdir = partition_dir(broker, topic, p)
        files = sorted(f.name for f in pdir.iterdir())
        assert files[:3] == [f"{SEGMENT_NAME}.index", f"{SEGMENT_NAME}.log", f"{SEGMENT_NAME}.timeindex"], files
        # Index entries are fixed-size: offset index 8 bytes (relative offset, position), time index 12.
        assert (pdir / f"{SEGMENT_NAME}.index").stat().st_size % 8 == 0
        assert (pdir / f"{SEGMENT_NAME}.timeindex").stat().st_size % 12 == 0
        # The .log is nothing but whole v2 batches holding offsets 0..n-1.
        positions = _batch_positions(pdir / f"{SEGMENT_NAME}.log")
        assert [base for _, _, base in positions] == list(range(0, n, 4))

    start_served(broker, [(topic, p) for p in counts])
    # The marker is consumed at load (a crash from here on must not look clean).
    assert not (d / CLEAN_SHUTDOWN).exists()
    with RawClient(broker) as c:
        for p, n in counts.items():
            assert c.latest_offset(topic, p) == n
            assert read_all(c, topic, p) == [(o, b"k%d" % o, value_of(o)) for o in range(n)]
    got = confluent_consume(broker.bootstrap, topic, 19, partitions=(0, 1))
    assert [(g.partition, g.offset, g.value) for g in got] == (
        [(0, o, value_of(o)) for o in range(12)] + [(1, o, value_of(o)) for o in range(7)])
    # A second clean stop checkpoints the same offsets again.
    assert broker.stop() == 0
    assert _checkpoint_without_offsets_topic(d / CHECKPOINT) == f"0\n2\n{topic} 0 12\n{topic} 1 7\n"


# ------------------------------------------------------------------------------------------ log dir guards

def _start_expecting_exit(broker, timeout: float = 30.0) -> tuple[int, str]:
    """Start the broker process and wait for it to exit by itself; (exit code, its output of this start)."""
    broker.start(wait=False)
    try:
        rc = broker.proc.wait(timeout)
    except Exception:
        broker.kill9()
        raise
    return rc, broker.log_text().rsplit("=== harness:", 1)[1]


def test_log_dir_guards(broker, broker_factory):
    topic = "guarded"
    with RawClient(broker) as c:
        c.create_topic(topic)
        assert c.produce(topic, 0, numbered_batch(0, 5, now_ms())) == (0, 0)
    # A second broker process on the same log dir is refused; the first one keeps serving.
    intruder = broker_factory(broker_id=0, overrides={"log.dirs": str(broker.log_dir)}, start=False)
    rc, out = _start_expecting_exit(intruder)
    assert rc == 1 and "in use by another process" in out, out
    with RawClient(broker) as c:
        assert c.produce(topic, 0, numbered_batch(5, 1, now_ms())) == (0, 5)
    assert broker.stop() == 0

    # A different broker.id on a log dir that belongs to broker 0 is refused, naming the file and both ids.
    broker.broker_id = 1
    rc, out = _start_expecting_exit(broker)
    assert rc == 1, out
    meta = broker.log_dir / "meta.properties"
    assert f"Configured broker.id 1 doesn't match stored broker.id 0 in {meta}" in out, out
    assert _properties_lines(meta) == ["version=0", "broker.id=0"]

    # A garbled recovery-point checkpoint after a crash: the broker warns, recovers from offset 0 and serves all.
    broker.broker_id = 0
    (broker.log_dir / CHECKPOINT).write_text("0\n7\nnot a checkpoint\n")
    (broker.log_dir / CLEAN_SHUTDOWN).unlink()
    start_served(broker, [(topic, 0)])
    assert "corrupt checkpoint" in broker.log_text().rsplit("=== harness:", 1)[1]
    with RawClient(broker) as c:
        assert read_all(c, topic) == [(o, b"k%d" % o, value_of(o)) for o in range(6)]
    assert broker.stop() == 0
    assert _checkpoint_without_offsets_topic(broker.log_dir / CHECKPOINT) == f"0\n1\n{topic} 0 6\n"


# ------------------------------------------------------------------------------- producer state after a crash

def test_idempotent_producer_state_survives_sigkill(broker):
    """The broker rebuilds producer ids/sequences from the log after a crash: a retry of the last acknowledged
    batch is still recognised as a duplicate (same offset, nothing appended) and the sequence continues."""
    topic = "crash-idempotent"
    ts = now_ms()

    def batch(pid, epoch, seq, n):
        return build_batch([Record(i, ts + i, b"k%d" % (seq + i), value_of(seq + i)) for i in range(n)],
                           producer_id=pid, producer_epoch=epoch, base_sequence=seq)

    with RawClient(broker) as c:
        c.create_topic(topic)
        resp = c.call(22, 1, {"transactional_id": None, "transaction_timeout_ms": 60_000})  # InitProducerId
        assert resp["error_code"] == 0
        pid, epoch = resp["producer_id"], resp["producer_epoch"]
        for seq in range(0, 12, 4):
            assert c.produce(topic, 0, batch(pid, epoch, seq, 4)) == (0, seq)
    assert broker.kill9() == -signal.SIGKILL

    start_served(broker, [(topic, 0)])
    with RawClient(broker) as c:
        assert c.produce(topic, 0, batch(pid, epoch, 8, 4)) == (0, 8)    # the retried last batch: a duplicate
        assert c.produce(topic, 0, batch(pid, epoch, 4, 4)) == (0, 4)    # an older one, still remembered
        assert c.latest_offset(topic) == 12
        assert c.produce(topic, 0, batch(pid, epoch, 13, 1))[0] == 45    # OUT_OF_ORDER_SEQUENCE_NUMBER: a gap
        assert c.produce(topic, 0, batch(pid, epoch, 12, 2)) == (0, 12)  # the continuation
        assert read_all(c, topic) == [(o, b"k%d" % o, value_of(o)) for o in range(14)]
