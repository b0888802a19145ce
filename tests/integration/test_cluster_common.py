"""Shared pieces of the cluster-mode tests (test_cluster_*.py): a 3-broker cluster on a real 3-node ensemble.

No tests here. `Cluster` wraps the broker processes (tests/integration/harness.py), a kazoo client on the same
chroot as the brokers (the tests read znodes through it), and raw Metadata requests sent to *one named broker*
(confluent's list_topics may ask any broker it knows; these tests must ask each broker for its own view).

Metadata v1 (api key 3), request body: topics array (int32 count, -1 = all topics; strings). Response v1 after the
correlation id: brokers [node_id int32, host string, port int32, rack nullable string], controller_id int32,
topics [error_code int16, name string, is_internal int8, partitions [error_code int16, partition int32,
leader int32, replicas [int32], isr [int32]]].

Timing: the brokers run with zookeeper.session.timeout.ms=6000 (Kafka 0.10.1's default), so a dead broker's
ephemeral znodes vanish after at most 6 s (+ one 500 ms tick); every wait below is that plus a margin for two
shared cores.
"""
from __future__ import annotations

import json
import os
import re
import signal
import struct
import time
from pathlib import Path

from tests.integration import harness
from tests.integration.harness import BrokerProcess, ZkEnsemble, raw_request, wait_until

SESSION_TIMEOUT_MS = 6000
# A failure is noticed within the session timeout; elections, znode writes and LeaderAndIsr/UpdateMetadata to
# every broker take well under a second here, so 8 s of margin absorbs scheduling on two busy cores.
FAILOVER_WAIT_S = SESSION_TIMEOUT_MS / 1000 + 8
CHROOT = "/kb"
N_BROKERS = 3
DIGEST = Path("/work/shared/reference/notes/kafka-digest.md")

BROKER_OVERRIDES = {
    "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
    # A broker that cannot reach the controller while stopping retries 3 times; 1 s apart keeps stops short.
    "controlled.shutdown.retry.backoff.ms": 1000,
    "num.partitions": 3,
    "log.flush.interval.messages": 1,
}


def require_zookeeper() -> None:
    if harness.zookeeper_classpath() is None or not harness.shutil.which("java"):
        harness.skip_or_fail("Debian's zookeeper package / java not installed (run scripts/setup.sh)")


# ------------------------------------------------------------------------------------------------ metadata v1

class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def unpack(self, fmt: str):
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return values if len(values) > 1 else values[0]

    def string(self):
        n = self.unpack(">h")
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def int_array(self):
        n = self.unpack(">i")
        return [self.unpack(">i") for _ in range(max(n, 0))]


def metadata(broker: BrokerProcess, topics: list[str] | None = None, timeout: float = 5.0) -> dict:
    """Metadata v1 asked of `broker` itself -> {"brokers": {id: (host, port, rack)}, "controller": id,
    "topics": {name: {"error": code, "partitions": {p: {"error", "leader", "replicas", "isr"}}}}}."""
    if topics is None:
        body = struct.pack(">i", -1)
    else:
        body = struct.pack(">i", len(topics)) + b"".join(struct.pack(">h", len(t)) + t.encode() for t in topics)
    r = _Reader(raw_request(broker.host, broker.port, 3, 1, body, timeout=timeout))
    brokers = {}
    for _ in range(r.unpack(">i")):
        node = r.unpack(">i")
        host = r.string()
        port = r.unpack(">i")
        brokers[node] = (host, port, r.string())
    controller = r.unpack(">i")
    out_topics = {}
    for _ in range(r.unpack(">i")):
        err = r.unpack(">h")
        name = r.string()
        r.unpack(">b")
        parts = {}
        for _ in range(r.unpack(">i")):
            perr, pid, leader = r.unpack(">hii")
            parts[pid] = {"error": perr, "leader": leader, "replicas": r.int_array(), "isr": r.int_array()}
        out_topics[name] = {"error": err, "partitions": parts}
    return {"brokers": brokers, "controller": controller, "topics": out_topics}


def leaders(md: dict, topic: str) -> dict[int, int]:
    return {p: s["leader"] for p, s in md["topics"].get(topic, {"partitions": {}})["partitions"].items()}


# --------------------------------------------------------------------------------------------------- cluster

class Cluster:
    """Brokers 0..n-1 (`brokers[i].broker_id == i`, rack r<i>) on `ensemble` under chroot /kb; `zk` is a kazoo
    client on the same chroot (default threading handler: the tests are plain threads)."""

    def __init__(self, base: Path, ensemble: ZkEnsemble, n: int = N_BROKERS, overrides: dict | None = None):
        from kazoo.client import KazooClient

        self.ensemble = ensemble
        self.connect = ensemble.connect_string + CHROOT
        self.brokers = [
            BrokerProcess(base / f"broker{i}", broker_id=i, zk=self.connect,
                          overrides={**BROKER_OVERRIDES, "broker.rack": f"r{i}", **(overrides or {})})
            for i in range(n)]
        # 20 s session: the test's own client must survive the ZooKeeper outages the tests cause.
        self.zk = KazooClient(hosts=self.connect, timeout=20.0, connection_retry={"max_tries": -1},
                              command_retry={"max_tries": -1, "deadline": 60})

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def start(self) -> "Cluster":
        for b in self.brokers:
            b.start(wait=False)
        for b in self.brokers:
            b.wait_ready(60)
        self.zk.start(timeout=30)
        self.wait_converged()
        return self

    def close(self) -> None:
        try:
            self.zk.stop()
            self.zk.close()
        finally:
            for b in self.brokers:
                if b.running:
                    os.kill(b.pid, signal.SIGCONT)  # a test that failed mid-SIGSTOP must not hang the stop
                b.close()

    def running(self) -> list[BrokerProcess]:
        return [b for b in self.brokers if b.running]

    # -- znodes
    def get_json(self, path: str):
        data, _ = self.zk.get(path)
        return json.loads(data)

    def controller_id(self) -> int | None:
        try:
            return self.get_json("/controller")["brokerid"]
        except Exception:  # noqa: BLE001 - NoNodeError while an election runs
            return None

    def controller_epoch(self) -> int:
        return int(self.zk.get("/controller_epoch")[0])

    def registered(self) -> list[int]:
        return sorted(int(c) for c in self.zk.get_children("/brokers/ids"))

    def state(self, topic: str, p: int) -> tuple[dict, object]:
        data, stat = self.zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")
        return json.loads(data), stat

    def broker(self, broker_id: int) -> BrokerProcess:
        return self.brokers[broker_id]

    # -- waits
    def wait_converged(self, timeout: float = 60.0) -> None:
        """Every running broker is registered and its Metadata lists exactly the running brokers and the
        controller named in /controller."""
        want = sorted(b.broker_id for b in self.running())

        def converged():
            if self.registered() != want:
                return False
            ctl = self.controller_id()
            if ctl not in want:
                return False
            for b in self.running():
                md = metadata(b, [])
                if sorted(md["brokers"]) != want or md["controller"] != ctl:
                    return False
            return True

        wait_until(converged, timeout, 0.2, f"brokers {want} registered and agreeing on the controller",
                   ignore=(OSError, ConnectionError, Exception))

    def wait_topic_everywhere(self, topic: str, n_partitions: int, timeout: float = 30.0,
                              brokers: list[BrokerProcess] | None = None, live_leaders: bool = True) -> dict:
        """Every broker in `brokers` (default: running ones) reports `topic` with `n_partitions` partitions whose
        leaders (when `live_leaders`) are running brokers; returns {p: leader} as the first broker saw it."""
        brokers = brokers or self.running()
        alive = {b.broker_id for b in self.running()}

        def everywhere():
            seen = []
            for b in brokers:
                md = metadata(b, [topic])
                t = md["topics"].get(topic)
                if t is None or t["error"] != 0 or len(t["partitions"]) != n_partitions:
                    return None
                lead = leaders(md, topic)
                if live_leaders and not set(lead.values()) <= alive:
                    return None
                seen.append(lead)
            return seen[0] if all(s == seen[0] for s in seen) else None

        return wait_until(everywhere, timeout, 0.1, f"{topic} with {n_partitions} partitions on brokers "
                          f"{[b.broker_id for b in brokers]}", ignore=(OSError, ConnectionError))

    def wait_settled(self, timeout: float = 30.0) -> None:
        """Every partition of every topic has a running leader, in its state znode and in every running
        broker's Metadata (so no controller decision is still in flight)."""
        alive = {b.broker_id for b in self.running()}

        def settled():
            zk_leaders = {}
            for topic in self.zk.get_children("/brokers/topics"):
                for p in self.zk.get_children(f"/brokers/topics/{topic}/partitions"):
                    zk_leaders.setdefault(topic, {})[int(p)] = self.state(topic, int(p))[0]["leader"]
            if any(not set(ps.values()) <= alive for ps in zk_leaders.values()):
                return False
            for b in self.running():
                md = metadata(b, None)
                if {t: leaders(md, t) for t in zk_leaders} != zk_leaders:
                    return False
            return True

        wait_until(settled, timeout, 0.2, "every partition led by a running broker everywhere",
                   ignore=(OSError, ConnectionError, Exception))

    def ensure_all_running(self) -> None:
        """Restart any broker a previous test left stopped (or SIGSTOPped), then wait for convergence."""
        for b in self.brokers:
            if b.running:
                os.kill(b.pid, signal.SIGCONT)
            else:
                b.start(wait=False)
        for b in self.brokers:
            b.wait_ready(60)
        self.wait_converged()
        self.wait_settled()


# ------------------------------------------------------------------------------------------------ clients

def produce(bootstrap: str, topic: str, records: dict[int, list[bytes]], timeout: float = 30.0) -> None:
    """Produce `records` ({partition: [values]}) with acks=all; fails on any delivery error."""
    from confluent_kafka import Producer

    errors = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "message.timeout.ms": int(timeout * 1000)})
    for part, values in records.items():
        for v in values:
            p.produce(topic, value=v, key=v, partition=part,
                      on_delivery=lambda err, msg: err is not None and errors.append(err))
    left = p.flush(timeout + 5)
    assert left == 0 and errors == [], f"{left} undelivered, errors {errors[:5]}"


def consume(bootstrap: str, topic: str, partitions: list[int], expected: int, timeout: float = 30.0) -> dict:
    """Assign-based consume of `partitions` from offset 0 until `expected` records -> {partition: [values]}."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"cluster-test-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    got: dict[int, list[bytes]] = {p: [] for p in partitions}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in partitions])
        deadline = time.monotonic() + timeout
        n = 0
        while n < expected and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            got[m.partition()].append(m.value())
            n += 1
    finally:
        c.close()
    return got


def records_for(topic: str, partitions, per_partition: int = 5) -> dict[int, list[bytes]]:
    return {p: [f"{topic}-{p}-{i}".encode() for i in range(per_partition)] for p in partitions}


def create_topics(bootstrap: str, specs: list[tuple[str, int, int]], timeout: float = 20.0) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, n, rf) for t, n, rf in specs], operation_timeout=timeout,
                                  request_timeout=timeout + 5)
    for f in futures.values():
        f.result(timeout + 10)


# ------------------------------------------------------------------------------------------ reference JSON

def reference_znodes() -> dict[str, object] | None:
    """{path pattern: example value} from kafka-digest.md §E.1's table (None when the digest is absent).

    The table's rows are `| `path` | kind | writer | content |`; the example is the first back-quoted JSON
    object (or bare integer for /controller_epoch) in the content column."""
    if not DIGEST.exists():
        return None
    text = DIGEST.read_text()
    start = text.find("## E.1")
    section = text[start:text.find("## E.2", start)]
    out = {}
    for line in section.splitlines():
        m = re.match(r"\| `([^`]+)`[^|]*\|[^|]*\|[^|]*\|(.*)\|\s*$", line)
        if not m:
            continue
        path, content = m.group(1), m.group(2)
        for sample in re.findall(r"`([^`]+)`", content):
            try:
                out[path] = json.loads(sample)
                break
            except ValueError:
                continue
    return out


def json_shape(value):
    """Key sets and value types, recursively for objects (maps keyed by ids compare by their values' shape)."""
    if isinstance(value, dict):
        return {k: json_shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return ["list", sorted({json.dumps(json_shape(v)) for v in value})]
    return type(value).__name__
