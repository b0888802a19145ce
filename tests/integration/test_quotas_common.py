"""Shared pieces of the quota tests (test_quotas.py, test_quotas_cluster.py; issue 12). No tests here.

Setting quotas
    ``alter_quota(bootstrap, entity, add=..., delete=...)`` runs ``kbroker-admin configs --bootstrap-server B
    --alter`` (AlterClientQuotas, KIP-546) with kafka-configs.sh's syntax: ``entity`` is a list of (type, name)
    pairs, type ``clients`` or ``users``, name None for ``--entity-default``. ``write_quota_znode(zk, path, config)``
    writes Kafka's own layout instead (what 0.10.1's kafka-configs.sh --zookeeper writes): the entity znode
    ``/config/<path>`` = ``{"version":1,"config":{"producer_byte_rate":"1048576"}}`` and a sequential
    ``/config/changes/config_change_`` = ``{"version":2,"entity_path":"<path>"}``. ``alter_client_quotas_api``
    sends AlterClientQuotas v0 itself (one entity per request; bench/quotas.py uses it for many entities).

Measuring clients
    ``RateProducer``: a confluent-kafka producer in its own thread producing ``size``-byte values either as fast as
    librdkafka's (small) local queue allows or paced at ``rate`` bytes/s; every acknowledged record's value size is
    logged with its monotonic time (delivery callback), and librdkafka's statistics (``statistics.interval.ms``)
    are kept: ``throttle_max()`` is the largest ``brokers.*.throttle.max`` seen (the broker's throttle_time_ms, ms).
    ``RateConsumer``: the same for a consumer (bytes of fetched values). ``bytes_between(t0, t1)`` sums the log.

Raw Produce v3 (api key 0), for the client that ignores throttle times: request body = transactional_id
(int16 -1 = null), acks int16, timeout_ms int32, topics [name string, partitions [index int32, records
(int32 length + v2 record batch)]]; response v3 after the correlation id = responses [name string, partitions
[index int32, error_code int16, base_offset int64, log_append_time_ms int64]], throttle_time_ms int32.
"""
from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time

from tests.integration.harness import REPO_ROOT, encode_request, recv_exact

ADMIN = [sys.executable, "-m", "kbroker.cli.admin"]
MIB = 1024 * 1024
QUOTA = MIB                     # the spec's producer_byte_rate=1048576, and the same for consumer_byte_rate
VALUE_SIZE = 1024               # 1 KiB values: v2 batch framing adds ~1-2 % that the quota counts, values do not
STATS_MS = 500                  # librdkafka statistics.interval.ms


# ------------------------------------------------------------------------------------------------ setting quotas

def entity_args(entity) -> list[str]:
    args = []
    for etype, name in entity:
        args += ["--entity-type", etype] + (["--entity-default"] if name is None else ["--entity-name", name])
    return args


def admin_cli(*args, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(ADMIN + [str(a) for a in args], capture_output=True, timeout=60, cwd=str(REPO_ROOT))
    if check:
        assert done.returncode == 0, (args, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace"))
    return done


def alter_quota(bootstrap: str, entity, add: dict | None = None, delete: list[str] = (), zookeeper: str | None = None,
                command_config: str | None = None) -> str:
    """kafka-configs.sh --alter on a client/user quota entity; returns stdout."""
    where = ["--zookeeper", zookeeper] if zookeeper else ["--bootstrap-server", bootstrap]
    args = ["configs", *where, "--alter", *entity_args(entity)]
    if add:
        args += ["--add-config", ",".join(f"{k}={v}" for k, v in add.items())]
    if delete:
        args += ["--delete-config", ",".join(delete)]
    if command_config:
        args += ["--command-config", command_config]
    return admin_cli(*args).stdout.decode()


def describe_quota(bootstrap: str, entity) -> str:
    return admin_cli("configs", "--bootstrap-server", bootstrap, "--describe", *entity_args(entity)).stdout.decode()


def _str(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def alter_client_quotas_api(host: str, port: int, entity, add: dict | None = None, delete: list[str] = (),
                            **conn) -> tuple[int, str | None]:
    """AlterClientQuotas v0 (api key 49, KIP-546) sent directly -> (error_code, error_message) of the one entry.

    Request v0: entries [entity [entity_type string, entity_name nullable string], ops [key string, value float64,
    remove int8]], validate_only int8. Response v0: throttle_time_ms int32, entries [error_code int16,
    error_message nullable string, entity [...]]. Entity types are the protocol's ``user`` / ``client-id``."""
    kinds = {"users": "user", "clients": "client-id"}
    ops = [(k, float(v), 0) for k, v in (add or {}).items()] + [(k, 0.0, 1) for k in delete]
    body = struct.pack(">i", 1) + struct.pack(">i", len(entity))
    body += b"".join(_str(kinds[t]) + _str(n) for t, n in entity)
    body += struct.pack(">i", len(ops)) + b"".join(_str(k) + struct.pack(">db", v, r) for k, v, r in ops)
    body += b"\x00"
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.settimeout(10)
        sock.sendall(encode_request(49, 0, 5, body, "quota-test-admin"))
        (size,) = struct.unpack(">i", recv_exact(sock, 4))
        payload = recv_exact(sock, size)
    assert struct.unpack_from(">i", payload)[0] == 5
    assert struct.unpack_from(">i", payload, 8)[0] == 1, payload
    err, n = struct.unpack_from(">hh", payload, 12)
    msg = None if n < 0 else payload[16:16 + n].decode()
    return err, msg


def write_quota_znode(zk, path: str, config: dict | None) -> None:
    """Kafka's znode layout, written directly (kazoo client `zk`): ``config`` None empties the entity's config
    (what kafka-configs.sh --zookeeper leaves after deleting the last key), then a change notification."""
    data = json.dumps({"version": 1, "config": {k: str(v) for k, v in (config or {}).items()}}).encode()
    full = "/config/" + path
    if zk.exists(full):
        zk.set(full, data)
    else:
        zk.create(full, data, makepath=True)
    zk.create("/config/changes/config_change_", json.dumps({"version": 2, "entity_path": path}).encode(),
              sequence=True, makepath=True)


# ------------------------------------------------------------------------------------------------- measuring

class _Measured:
    """Acknowledged/fetched bytes with their times, and librdkafka's throttle statistics."""

    def __init__(self):
        self.log: list[tuple[float, int]] = []       # (time.monotonic(), value bytes)
        self.lock = threading.Lock()
        self.throttle_maxes: list[int] = []          # brokers.*.throttle.max of every statistics callback
        self.throttle_counts: list[int] = []         # brokers.*.throttle.cnt (responses carrying a throttle time)
        self.first_throttled_at: float | None = None
        self.errors: list[str] = []
        self.stop_event = threading.Event()
        self.thread: threading.Thread | None = None

    def on_stats(self, text: str) -> None:
        stats = json.loads(text)
        brokers = stats.get("brokers", {}).values()
        mx = max((b.get("throttle", {}).get("max", 0) for b in brokers), default=0)
        cnt = sum(b.get("throttle", {}).get("cnt", 0) for b in stats.get("brokers", {}).values())
        with self.lock:
            self.throttle_maxes.append(mx)
            self.throttle_counts.append(cnt)
            if mx > 0 and self.first_throttled_at is None:
                self.first_throttled_at = time.monotonic()

    def add(self, n: int) -> None:
        with self.lock:
            self.log.append((time.monotonic(), n))

    def bytes_between(self, t0: float, t1: float) -> int:
        with self.lock:
            return sum(n for t, n in self.log if t0 <= t < t1)

    def total(self) -> int:
        with self.lock:
            return sum(n for _, n in self.log)

    def throttle_max(self) -> int:
        with self.lock:
            return max(self.throttle_maxes, default=0)

    def stats_seen(self) -> int:
        with self.lock:
            return len(self.throttle_maxes)

    def start(self) -> "_Measured":
        self.thread = threading.Thread(target=self._guarded, daemon=True)
        self.thread.start()
        return self

    def _guarded(self) -> None:
        try:
            self.run()
        except Exception as exc:  # noqa: BLE001 - reported by stop()
            self.errors.append(repr(exc))

    def stop(self, timeout: float = 30.0) -> None:
        self.stop_event.set()
        if self.thread is not None:
            self.thread.join(timeout)
            assert not self.thread.is_alive(), f"{type(self).__name__} did not stop within {timeout:g}s"
        assert not self.errors, self.errors

    def run(self) -> None:  # pragma: no cover - subclasses
        raise NotImplementedError


class RateProducer(_Measured):
    """Produces ``size``-byte values to ``topic`` partition 0 until stopped: paced at ``rate`` bytes/s, or (rate
    None) as fast as a 2 MiB local queue drains (so a throttled producer holds <= 2 MiB unacknowledged, not
    seconds of backlog whose delivery would land after the measurement)."""

    def __init__(self, bootstrap: str, topic: str, client_id: str, rate: float | None = None, size: int = VALUE_SIZE,
                 **conf):
        super().__init__()
        from confluent_kafka import Producer

        self.topic, self.rate, self.size = topic, rate, size
        self.value = os.urandom(size)
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "client.id": client_id, "acks": "all", "linger.ms": 5,
            "compression.type": "none", "enable.idempotence": False,
            # 64 KiB requests: the throttle acts per request, so one request is 1/16 of a second of quota
            "batch.size": 65536, "queue.buffering.max.kbytes": 2048, "message.timeout.ms": 120000,
            "statistics.interval.ms": STATS_MS, "stats_cb": self.on_stats, **conf})

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.add(len(msg.value()))
        else:
            self.errors.append(str(err))

    def run(self) -> None:
        p, started, offered = self.producer, time.monotonic(), 0
        while not self.stop_event.is_set():
            if self.rate is not None and offered >= self.rate * (time.monotonic() - started):
                p.poll(0.005)
                continue
            try:
                p.produce(self.topic, self.value, partition=0, on_delivery=self._delivered)
                offered += self.size
            except BufferError:
                p.poll(0.02)
                continue
            p.poll(0)
        p.flush(60)
        self.producer = p = None   # destroyed now: no client of a finished test keeps reconnecting


class RateConsumer(_Measured):
    """Reads ``topic`` partition 0 from offset 0 (assign, no group) until stopped; ``done_at`` is when it had
    ``limit`` value bytes. Fetch responses are at most 256 KiB (a quarter second of quota)."""

    def __init__(self, bootstrap: str, topic: str, client_id: str, limit: int | None = None, **conf):
        super().__init__()
        from confluent_kafka import Consumer

        self.topic, self.limit = topic, limit
        self.done_at: float | None = None
        self.started_at: float | None = None
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "client.id": client_id, "group.id": f"q-{client_id}-{time.monotonic_ns()}",
            "enable.auto.commit": False, "fetch.max.bytes": 262144, "max.partition.fetch.bytes": 262144,
            "message.max.bytes": 262144,
            # librdkafka 2.x backs off fetch.queue.backoff.ms (1 s) whenever its queue is full: 5 ms, or the
            # unthrottled consumer reads at 4 MiB/s
            "queued.max.messages.kbytes": 2048, "fetch.queue.backoff.ms": 5,
            "statistics.interval.ms": STATS_MS, "stats_cb": self.on_stats,
            **conf})

    def run(self) -> None:
        from confluent_kafka import TopicPartition

        c = self.consumer
        got = 0
        self.started_at = time.monotonic()
        c.assign([TopicPartition(self.topic, 0, 0)])
        try:
            while not self.stop_event.is_set():
                for m in c.consume(500, 0.1):
                    if m.error():
                        continue
                    n = len(m.value())
                    got += n
                    self.add(n)
                if self.limit is not None and got >= self.limit and self.done_at is None:
                    self.done_at = time.monotonic()   # keeps polling: statistics come from poll calls
        finally:
            c.close()


def fill_topic(bootstrap: str, topic: str, nbytes: int, size: int = VALUE_SIZE) -> int:
    """Produce ``nbytes`` of ``size``-byte values to partition 0 (client.id filler, no quota); returns records."""
    from confluent_kafka import Producer

    errors = []
    p = Producer({"bootstrap.servers": bootstrap, "client.id": "filler", "linger.ms": 5, "acks": 1,
                  "compression.type": "none", "queue.buffering.max.kbytes": 1048576})
    value = os.urandom(size)
    n = nbytes // size
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value, partition=0, on_delivery=lambda e, m: e is not None and errors.append(e))
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0 and not errors, errors[:3]
    return n


# ------------------------------------------------------------------------------------------------ raw produce

def produce_v3_body(topic: str, partition: int, batch: bytes, acks: int = 1, timeout_ms: int = 30000) -> bytes:
    t = topic.encode()
    return (struct.pack(">hhi", -1, acks, timeout_ms) + struct.pack(">i", 1) + struct.pack(">h", len(t)) + t
            + struct.pack(">iii", 1, partition, len(batch)) + batch)


def parse_produce_v3(rest: bytes) -> tuple[list[tuple[int, int]], int]:
    """-> ([(partition, error_code)], throttle_time_ms) of a Produce v3 response (bytes after the correlation id)."""
    pos, out = 4, []
    for _ in range(struct.unpack_from(">i", rest, 0)[0]):
        (n,) = struct.unpack_from(">h", rest, pos)
        pos += 2 + n
        (np_,) = struct.unpack_from(">i", rest, pos)
        pos += 4
        for _ in range(np_):
            part, err = struct.unpack_from(">ih", rest, pos)
            pos += 4 + 2 + 8 + 8
            out.append((part, err))
    return out, struct.unpack_from(">i", rest, pos)[0]


def record_batch(value: bytes, count: int) -> bytes:
    from kbroker.record import Record, build_batch

    now = int(time.time() * 1000)
    return build_batch([Record(i, now, None, value) for i in range(count)])


def raw_produce(host: str, port: int, topic: str, partition: int, batch: bytes, client_id: str,
                timeout: float = 10.0) -> tuple[int, int]:
    """One Produce v3 on a fresh connection -> (error_code, throttle_time_ms)."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(encode_request(0, 3, 7, produce_v3_body(topic, partition, batch), client_id))
        (size,) = struct.unpack(">i", recv_exact(sock, 4))
        payload = recv_exact(sock, size)
    assert struct.unpack_from(">i", payload)[0] == 7
    parts, throttle = parse_produce_v3(payload[4:])
    assert [p for p, _ in parts] == [partition], parts
    return parts[0][1], throttle


class PipelinedRawProducer(_Measured):
    """A client that ignores throttle times: one connection, a sender thread that writes Produce v3 requests of
    ``per_request`` records back to back (never waiting for a response; it only blocks when the socket's send
    buffer is full) and this thread reading responses. Logged bytes = value bytes of acknowledged requests;
    ``throttles`` = every throttle_time_ms the broker answered."""

    def __init__(self, host: str, port: int, topic: str, client_id: str, per_request: int = 32,
                 size: int = VALUE_SIZE):
        super().__init__()
        self.sock = socket.create_connection((host, port), timeout=60)
        self.request = encode_request(0, 3, 1, produce_v3_body(topic, 0, record_batch(os.urandom(size), per_request)),
                                      client_id)
        self.per_request_bytes = per_request * size
        self.throttles: list[int] = []
        self.sent = 0

    def _send(self) -> None:
        try:
            while not self.stop_event.is_set():
                self.sock.sendall(self.request)
                self.sent += 1
        except OSError:
            if not self.stop_event.is_set():
                raise

    def run(self) -> None:
        # Blocking socket (no timeout): a muted channel stalls sendall for as long as the throttle lasts, and a
        # timeout there could leave half a request on the wire. stop() shuts the socket down to end both threads.
        self.sock.settimeout(None)
        sender = threading.Thread(target=self._send, daemon=True)
        sender.start()
        try:
            while not self.stop_event.is_set():
                (size,) = struct.unpack(">i", recv_exact(self.sock, 4))
                payload = recv_exact(self.sock, size)
                parts, throttle = parse_produce_v3(payload[4:])
                assert parts == [(0, 0)], parts
                with self.lock:
                    self.throttles.append(throttle)
                    if throttle > 0 and self.first_throttled_at is None:
                        self.first_throttled_at = time.monotonic()
                self.add(self.per_request_bytes)
        except (OSError, ConnectionError):
            if not self.stop_event.is_set():
                raise
        finally:
            sender.join(5)

    def stop(self, timeout: float = 30.0) -> None:
        self.stop_event.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        super().stop(timeout)
        self.sock.close()
