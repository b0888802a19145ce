"""Shared pieces of the replication tests (test_replication_*.py, issue 5). No tests here.

`RCluster`: a 3-node ZooKeeper ensemble (tests/integration/harness.py `ZkEnsemble`) and brokers 0..2 under chroot
/kbr, a kazoo client on the same chroot (the tests read partition state znodes through it), Metadata v1 asked of
one named broker (raw request, decoded below), topic creation with explicit assignment/configs through
confluent-kafka's AdminClient, a numbered-record producer whose every delivery report is kept, a reader of every
partition up to its high watermark, and a byte comparison of the replicas' segment files.

Metadata v1 response after the correlation id: brokers [node_id int32, host string, port int32, rack nullable
string], controller_id int32, topics [error_code int16, name string, is_internal int8, partitions [error_code
int16, partition int32, leader int32, replicas [int32], isr [int32]]].

Segment files (`<log dir>/<topic>-<p>/<20-digit base offset>.log`) are concatenated record batches v2: int64
base_offset, int32 batch_length (bytes after this field), then batch_length bytes. Replicas must agree byte for
byte on every batch below the high watermark, whatever their segment boundaries.

Timing: zookeeper.session.timeout.ms=6000 (Kafka 0.10.1's default): a SIGKILLed broker's ephemeral znode goes
within 6 s + one 500 ms tick, then the controller elects from the ISR; FAILOVER_S adds margin for two busy cores.
"""
from __future__ import annotations

import json
import os
import signal
import struct
import threading
import time
from pathlib import Path

from tests.integration.harness import BrokerProcess, ZkEnsemble, wait_until
from tests.integration.test_cluster_common import metadata as _cluster_metadata, require_zookeeper  # noqa: F401

SESSION_TIMEOUT_MS = 6000
FAILOVER_S = SESSION_TIMEOUT_MS / 1000 + 14
CHROOT = "/kbr"

OVERRIDES = {
    "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
    # one controlled-shutdown retry a second: a broker that still leads something after 3 s stops anyway
    "controlled.shutdown.retry.backoff.ms": 1000,
    # a follower that stopped fetching leaves the ISR after 6 s (default 10 s) -- keeps the stale-replica
    # scenarios short; the broker-death path (controller) is faster still.
    "replica.lag.time.max.ms": 6000,
    "auto.leader.rebalance.enable": "false",
}


def metadata(broker: BrokerProcess, topics: list[str] | None = None, timeout: float = 2.0) -> dict:
    """Metadata v1 from `broker` -> {"controller": id, "brokers": [ids], "topics": {name: {"error": code,
    "partitions": {p: {"error", "leader", "replicas", "isr"}}}}} (test_cluster_common's independent decoder, with
    the broker map reduced to its sorted ids)."""
    md = _cluster_metadata(broker, topics, timeout)
    md["brokers"] = sorted(md["brokers"])
    return md


class RCluster:
    def __init__(self, base: Path, n: int = 3, overrides: dict | None = None):
        from kazoo.client import KazooClient

        self.base = Path(base)
        self.ensemble = ZkEnsemble(self.base / "zk", n=3)
        self.brokers = [BrokerProcess(self.base / f"broker{i}", broker_id=i,
                                      zk=None, overrides={**OVERRIDES, **(overrides or {})}) for i in range(n)]
        self._kazoo = KazooClient
        self.zk = None

    # -- lifecycle
    def start(self) -> "RCluster":
        self.ensemble.start()
        connect = self.ensemble.connect_string + CHROOT
        for b in self.brokers:
            b.zk = connect
            b.start(wait=False)
        for b in self.brokers:
            b.wait_ready(60)
        self.zk = self._kazoo(hosts=connect, timeout=20.0, connection_retry={"max_tries": -1},
                              command_retry={"max_tries": -1, "deadline": 60})
        self.zk.start(timeout=30)
        self.wait_registered()
        return self

    def close(self) -> None:
        try:
            if self.zk is not None:
                self.zk.stop()
                self.zk.close()
        finally:
            for b in self.brokers:
                if b.running:
                    os.kill(b.pid, signal.SIGCONT)
                b.close()
            self.ensemble.close()

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def running(self) -> list[BrokerProcess]:
        return [b for b in self.brokers if b.running]

    def registered(self) -> list[int]:
        return sorted(int(c) for c in self.zk.get_children("/brokers/ids"))

    def wait_registered(self, timeout: float = 60.0) -> None:
        """Exactly the running brokers are registered and every one of them lists exactly those in Metadata."""
        want = sorted(b.broker_id for b in self.running())

        def converged():
            if self.registered() != want:
                return False
            return all(metadata(b, [])["brokers"] == want for b in self.running())

        wait_until(converged, timeout, 0.2, f"brokers {want} registered", ignore=(OSError, ConnectionError,
                                                                                   Exception))

    def ensure_all_running(self) -> None:
        for b in self.brokers:
            if not b.running:
                b.start(wait=False)
        for b in self.brokers:
            b.wait_ready(60)
        self.wait_registered()

    # -- znodes / metadata
    def state(self, topic: str, p: int) -> dict:
        return json.loads(self.zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")[0])

    def any_metadata(self, topics: list[str]) -> dict | None:
        for b in self.running():
            try:
                return metadata(b, topics)
            except (OSError, ConnectionError, struct.error):
                continue
        return None

    def wait_isr(self, topic: str, partitions, isr_of, timeout: float = 60.0) -> None:
        """Wait until every partition's state znode has ISR (as a set) == isr_of(p) and a leader in it."""
        def ok():
            for p in partitions:
                s = self.state(topic, p)
                if set(s["isr"]) != set(isr_of(p)) or s["leader"] not in s["isr"]:
                    return False
            return True

        wait_until(ok, timeout, 0.2, f"ISR of {topic} {list(partitions)}", ignore=(Exception,))

    def wait_full_isr(self, topic: str, n_partitions: int, timeout: float = 60.0) -> None:
        self.wait_isr(topic, range(n_partitions), lambda p: [b.broker_id for b in self.brokers], timeout)

    def wait_leaders_served(self, topic: str, n_partitions: int, timeout: float = 30.0) -> dict:
        """Every running broker's Metadata gives every partition a running leader; returns {p: leader}."""
        alive = {b.broker_id for b in self.running()}

        def served():
            seen = None
            for b in self.running():
                t = metadata(b, [topic])["topics"].get(topic)
                if not t or t["error"] or len(t["partitions"]) != n_partitions:
                    return None
                lead = {p: s["leader"] for p, s in t["partitions"].items()}
                if not set(lead.values()) <= alive or (seen is not None and lead != seen):
                    return None
                seen = lead
            return seen

        return wait_until(served, timeout, 0.1, f"leaders of {topic}", ignore=(OSError, ConnectionError))

    # -- topics
    def create_topic(self, name: str, partitions: int = 1, rf: int = 3, assignment=None, configs=None,
                     timeout: float = 30.0) -> None:
        if assignment is not None:
            # kbroker's own admin client: confluent-kafka 2.16 refuses any NewTopic with replica_assignment
            # ("a default partition count and a replica assignment are mutually exclusive", even at -1)
            from kbroker.client.admin import AdminClient

            with AdminClient(self.bootstrap) as admin:
                admin.create_topic(name, configs=configs, replica_assignment=dict(enumerate(assignment)),
                                   timeout_ms=int(timeout * 1000))
            partitions = len(assignment)
        else:
            from confluent_kafka.admin import AdminClient, NewTopic

            admin = AdminClient({"bootstrap.servers": self.bootstrap})
            admin.create_topics([NewTopic(name, partitions, rf, config=dict(configs or {}))], operation_timeout=timeout,
                                request_timeout=timeout + 5)[name].result(timeout + 10)
        self.wait_leaders_served(name, partitions, timeout)

    # -- logs on disk
    def partition_dir(self, broker: BrokerProcess, topic: str, p: int) -> Path:
        return broker.log_dir / f"{topic}-{p}"


# ------------------------------------------------------------------------------------------------ producing

class NumberedProducer:
    """A confluent-kafka producer in its own thread sending values b"0", b"1", ... (value = key = sequence number,
    round-robin over `partitions`, at most `rate` records/s; values start at `first`) until stop(); every
    delivery report is kept:
    `acked` [(partition, offset, value)], `failed` [(partition, value, error)]."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, config: dict, rate: float = 300.0,
                 first: int = 0):
        self.bootstrap, self.topic, self.partitions, self.rate, self.first = bootstrap, topic, partitions, rate, first
        self.config = {"bootstrap.servers": bootstrap, "linger.ms": 5, **config}
        self.acked: list = []
        self.failed: list = []
        self.latencies: list = []
        self.sent = 0
        self.fatal = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="numbered-producer", daemon=True)
        self._left = None

    def start(self) -> "NumberedProducer":
        self._thread.start()
        return self

    def _report(self, err, msg):
        if err is None:
            self.acked.append((msg.partition(), msg.offset(), msg.value()))
        else:
            self.failed.append((msg.partition(), msg.value(), err))
            if err.fatal():
                self.fatal = err

    def _run(self):
        from confluent_kafka import Producer

        p = Producer(self.config)
        t0 = time.monotonic()
        try:
            while not self._stop.is_set():
                due = int((time.monotonic() - t0) * self.rate) + 1
                while self.sent < due:
                    v = str(self.first + self.sent).encode()
                    try:
                        p.produce(self.topic, value=v, key=v, partition=self.sent % self.partitions,
                                  on_delivery=self._report)
                    except BufferError:
                        break
                    self.sent += 1
                p.poll(0.01)
            self._left = p.flush(90)
        finally:
            self._done_producer = p

    def stop(self, timeout: float = 120.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "producer thread did not finish flushing"
        assert self._left == 0, f"{self._left} records still undelivered after the final flush"


def read_all(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> dict:
    """{p: [(offset, value)]} for every record below each partition's high watermark (assign + poll)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"repl-check-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})
    out = {p: [] for p in range(partitions)}
    try:
        hw = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions) if hw[p] > 0])
        deadline = time.monotonic() + timeout
        pos = {p: 0 for p in range(partitions)}
        while any(pos[p] < hw[p] for p in range(partitions)):
            assert time.monotonic() < deadline, f"read {pos} of high watermarks {hw} in {timeout}s"
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            if m.offset() < hw[m.partition()]:
                out[m.partition()].append((m.offset(), m.value()))
            pos[m.partition()] = m.offset() + 1
    finally:
        c.close()
    return out


# ------------------------------------------------------------------------------------------------ segment bytes

def committed_bytes(partition_dir: Path, high_watermark: int) -> bytes:
    """The concatenated batches of every segment in `partition_dir` whose base offset < `high_watermark`."""
    out = bytearray()
    for seg in sorted(partition_dir.glob("*.log")):
        data = seg.read_bytes()
        pos = 0
        while pos + 12 <= len(data):
            base, length = struct.unpack_from(">qi", data, pos)
            if base >= high_watermark or length <= 0 or pos + 12 + length > len(data):
                break
            out += data[pos:pos + 12 + length]
            pos += 12 + length
    return bytes(out)
