"""kbroker-mirror-maker between two clusters (issue 14 item 3; Kafka 0.10.1 docs 6.1 "Mirroring data between
clusters" and 6.2): the source is a single broker (embedded coordination), the target a 3-broker ZooKeeper cluster
(test_replication_common.RCluster). One source and one target per module.

The kill -9 run (`_mirror_through_kills`): a producer writes N numbered records (unique key, random binary value of
1-300 bytes, explicit timestamp, a header on every 10th) to a 4-partition source topic with two topic-level config
overrides, at a bounded rate, while the mirror runs as a process (`python -m kbroker.cli.mirror_maker`, as the
console script does) with a 1 s commit interval. When the target holds a third of N, then two thirds, the mirror is
killed with SIGKILL and started again. Then it must finish: every source record is on the target byte for byte
(key, value, timestamp, headers), nothing else is there, each key sits in the partition Kafka's murmur2 gives it,
duplicates are counted (and reported), the target topic was created with the source's partition count and its
overrides, and the last mirror stops on SIGTERM with status 0 after committing everything (its group lag is 0).

N = 20,000 in the normal suite; 200,000 in the soak run (`bash scripts/test.sh -m soak`).
"""
import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from kbroker.client.partitioner import partition_for_key
from tests.integration.harness import REPO_ROOT, BrokerProcess, tail, wait_until
from tests.integration.test_replication_common import RCluster, require_zookeeper

PARTITIONS = 4
OVERRIDES = {"retention.ms": "604800123", "max.message.bytes": "1000123"}
# The source broker lets a consumer group notice a killed mirror within 2 s and rebalance without delay.
SOURCE_OVERRIDES = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 1000}
CONSUMER_PROPS = {"auto.offset.reset": "earliest", "session.timeout.ms": 2000, "heartbeat.interval.ms": 400,
                  "metadata.max.age.ms": 3000}


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    require_zookeeper()
    base = tmp_path_factory.mktemp("mirror")
    source = BrokerProcess(base / "source", overrides=SOURCE_OVERRIDES)
    target = RCluster(base / "target")
    try:
        source.start(wait=False)
        target.start()
        source.wait_ready(60)
        yield source, target, base
    finally:
        source.close()
        target.close()


def _props(path, props):
    path.write_text("".join("%s=%s\n" % kv for kv in props.items()))
    return str(path)


class MirrorProcess:
    """The mirror as a child process; its stderr goes to `log`."""

    def __init__(self, base, source, target, group, whitelist, extra=()):
        self.log = base / ("mirror-%s.log" % group)
        cprops = {"bootstrap.servers": source, "group.id": group, **CONSUMER_PROPS}
        self.argv = [sys.executable, "-m", "kbroker.cli.mirror_maker",
                     "--consumer.config", _props(base / ("consumer-%s.properties" % group), cprops),
                     "--producer.config", _props(base / ("producer-%s.properties" % group),
                                                 {"bootstrap.servers": target, "linger.ms": 5,
                                                  "enable.idempotence": "true"}),
                     "--whitelist", whitelist, "--offset.commit.interval.ms", "1000", *extra]
        self.proc = None
        self.starts = 0

    def start(self):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        self.starts += 1
        with open(self.log, "ab") as f:
            f.write(b"--- start %d\n" % self.starts)
            self.proc = subprocess.Popen(self.argv, stdout=f, stderr=f, env=env, cwd=str(REPO_ROOT))
        return self

    def kill9(self):
        self.proc.kill()
        self.proc.wait(10)

    def stop(self, timeout=60):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def _produce(bootstrap, topic, n, rate, out, errors):
    """Numbered records at <= `rate`/s; `out[key] = (value, timestamp, headers)` for each acknowledged one."""
    from confluent_kafka import Producer

    rnd = random.Random(14)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "enable.idempotence": True})
    t0, base_ts = time.monotonic(), 1_700_000_000_000
    pending = {}

    def report(err, msg):
        if err is not None:
            errors.append(err)
        else:
            out[msg.key()] = pending.pop(msg.key())

    for i in range(n):
        while i >= (time.monotonic() - t0) * rate:
            p.poll(0.005)
        key = b"k%07d" % i
        value = rnd.randbytes(rnd.randint(1, 300))
        headers = [("seq", b"%d\x00" % i)] if i % 10 == 0 else None
        pending[key] = (value, base_ts + i, headers)
        while True:
            try:
                p.produce(topic, value, key, on_delivery=report, timestamp=base_ts + i, headers=headers)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0


def _high_watermarks(bootstrap, topic):
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "hw-reader"})
    try:
        md = c.list_topics(timeout=10).topics.get(topic)   # naming the topic could auto-create it
        if md is None or md.error is not None:
            return {}
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in md.partitions}
    finally:
        c.close()


def _read_all(bootstrap, topic, timeout=120):
    """[(partition, key, value, timestamp, headers)] of every record below the high watermarks."""
    from confluent_kafka import Consumer, TopicPartition

    hw = _high_watermarks(bootstrap, topic)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "mirror-check", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 50})
    out, pos = [], {p: 0 for p in hw}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in hw if hw[p] > 0])
        deadline = time.monotonic() + timeout
        while any(pos[p] < hw[p] for p in hw):
            assert time.monotonic() < deadline, "read %s of %s" % (pos, hw)
            for m in c.consume(1000, 0.5):
                if m.error() is None and m.offset() < hw[m.partition()]:
                    out.append((m.partition(), m.key(), m.value(), m.timestamp()[1], m.headers()))
                    pos[m.partition()] = m.offset() + 1
    finally:
        c.close()
    return out


def _committed(bootstrap, group, topic):
    """Sum of the group's committed offsets on `topic` (0 for a partition without one)."""
    from confluent_kafka import Consumer, TopicPartition

    hw = _high_watermarks(bootstrap, topic)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return sum(max(tp.offset, 0) for tp in c.committed([TopicPartition(topic, p) for p in hw], timeout=10))
    finally:
        c.close()


def _settled(read, timeout=30):
    """`read()` once two readings 0.3 s apart agree (requests a killed client had in flight have landed)."""
    last = [read()]

    def same():
        time.sleep(0.3)
        now = read()
        ok, last[0] = now == last[0], now
        return ok
    wait_until(same, timeout, 0, "a settled reading", ignore=(Exception,))
    return last[0]


def _group_lag(bootstrap, group, topic):
    from confluent_kafka import Consumer, TopicPartition

    hw = _high_watermarks(bootstrap, topic)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        committed = c.committed([TopicPartition(topic, p) for p in hw], timeout=10)
        return sum(hw[tp.partition] - tp.offset for tp in committed)
    finally:
        c.close()


def _mirror_through_kills(clusters, topic, n, rate):
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    source, target, base = clusters
    admin = AdminClient({"bootstrap.servers": source.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1, config=OVERRIDES)])[topic].result(30)
    produced, errors = {}, []
    producer = threading.Thread(target=_produce, args=(source.bootstrap, topic, n, rate, produced, errors),
                                daemon=True)
    group = "mm-" + topic
    mirror = MirrorProcess(base, source.bootstrap, target.bootstrap, group, "%s,unrelated-.*" % topic)
    t0 = time.monotonic()
    try:
        mirror.start()
        producer.start()
        target_count = lambda: sum(_high_watermarks(target.bootstrap, topic).values())   # noqa: E731
        committed = lambda: _committed(source.bootstrap, group, topic)   # noqa: E731
        at_kill = (0, 0)
        for kill, threshold in enumerate((n // 3, 2 * n // 3), 1):
            # the running mirror has mirrored a third more and committed at least once since it started
            wait_until(lambda: target_count() >= threshold and committed() > at_kill[1], 120, 0.05,
                       "target holds %d records, a commit since the last start" % threshold, ignore=(Exception,))
            assert mirror.proc.poll() is None, tail(mirror.log)
            mirror.kill9()
            at_kill = _settled(lambda: (target_count(), committed()))
            assert at_kill[0] < n, "kill %d came after the mirror had finished (%s of %d)" % (kill, at_kill, n)
            mirror.start()
        producer.join(300)
        assert not producer.is_alive() and not errors and len(produced) == n, errors[:3]
        wait_until(lambda: target_count() >= n and _group_lag(source.bootstrap, group, topic) == 0,
                   300, 0.2, "all %d records mirrored and committed" % n, ignore=(Exception,))
        assert mirror.stop() == 0, tail(mirror.log)
    finally:
        mirror.close()
    elapsed = time.monotonic() - t0

    records = _read_all(target.bootstrap, topic)
    seen = {}
    for p, key, value, ts, headers in records:
        assert key in produced, "a record the source never had: %r" % key
        assert (value, ts, headers) == produced[key], "record %r differs on the target" % key
        assert p == partition_for_key(key, PARTITIONS), "key %r in partition %d" % (key, p)
        seen[key] = seen.get(key, 0) + 1
    lost = n - len(seen)
    duplicates = len(records) - len(seen)
    print("mirrored %d records in %.1f s through 2 kill -9 (target, committed at the last: %s): %d lost, "
          "%d duplicates" % (n, elapsed, at_kill, lost, duplicates))
    assert lost == 0
    assert duplicates == sum(c - 1 for c in seen.values())
    # The last mirror started from the offsets committed before the second kill and sent everything after them
    # once (idempotent producer, no retry duplicates): the duplicates are exactly the records that were on the
    # target but not yet committed at that kill.
    assert duplicates == at_kill[0] - at_kill[1], (at_kill, duplicates)

    tadmin = AdminClient({"bootstrap.servers": target.bootstrap})
    md = tadmin.list_topics(timeout=10).topics[topic]
    assert len(md.partitions) == PARTITIONS
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = tadmin.describe_configs([res])[res].result(30)
    assert {k: e.value for k, e in entries.items() if e.source == 1} == OVERRIDES
    log = mirror.log.read_text()
    assert log.count("created target topic %s: 4 partitions" % topic) == 1, log
    assert "MirrorMaker: " in log.splitlines()[-1]
    return duplicates


def test_mirror_survives_two_kill9_without_loss(clusters):
    _mirror_through_kills(clusters, "mirrored", 20_000, 2500)


@pytest.mark.soak
def test_mirror_survives_two_kill9_without_loss_200k(clusters):
    _mirror_through_kills(clusters, "mirrored-soak", 200_000, 8000)


def test_mirror_handler_streams_and_whitelist(clusters):
    """--num.streams 2 (two members of the group, client ids <group>-0 and -1), a message handler that renames the
    topic and drops odd keys (tests/integration/mirror_handler.py), a whitelist that leaves a topic out."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from kbroker.client.admin import AdminClient as KAdmin

    source, target, base = clusters
    admin = AdminClient({"bootstrap.servers": source.bootstrap})
    for t, parts in (("orders", 3), ("orders-audit", 1)):
        admin.create_topics([NewTopic(t, parts, 1)])[t].result(30)
    p = Producer({"bootstrap.servers": source.bootstrap, "linger.ms": 5})
    for i in range(600):
        p.produce("orders", b"v%d" % i, b"k%d" % i)
        p.produce("orders-audit", b"a%d" % i, b"k%d" % i)
    assert p.flush(30) == 0
    mirror = MirrorProcess(base, source.bootstrap, target.bootstrap, "mm-h", "orders",
                           ["--num.streams", "2", "--message.handler", "tests.integration.mirror_handler.PrefixEven",
                            "--message.handler.args", "dr-"])
    try:
        mirror.start()
        with KAdmin(source.bootstrap) as ka:
            wait_until(lambda: sorted(m.client_id for m in ka.describe_groups(["mm-h"])["mm-h"].members)
                       == ["mm-h-0", "mm-h-1"], 60, 0.2, "two streams in the group", ignore=(Exception,))
        wait_until(lambda: _group_lag(source.bootstrap, "mm-h", "orders") == 0, 60, 0.2, "all committed",
                   ignore=(Exception,))
        assert mirror.stop() == 0, tail(mirror.log)
    finally:
        mirror.close()
    records = _read_all(target.bootstrap, "dr-orders")
    assert sorted((k, v) for _, k, v, _, _ in records) == sorted((b"k%d" % i, b"v%d" % i) for i in range(0, 600, 2))
    topics = AdminClient({"bootstrap.servers": target.bootstrap}).list_topics(timeout=10).topics
    assert len(topics["dr-orders"].partitions) == 3
    assert not {"orders", "orders-audit", "dr-orders-audit"} & set(topics)
    assert "MirrorMaker: 300 records mirrored, 0 dropped" in mirror.log.read_text()


def test_send_failure_aborts_without_commit_or_drops_when_asked(clusters):
    """The target refuses the records (its topic's max.message.bytes=1000, the records 2,000 bytes: MESSAGE_TOO_LARGE):
    with the default --abort.on.send.failure true the mirror exits 1 and commits nothing; with false it drops
    them, counts them, commits past them and keeps running until SIGTERM (exit 0)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    source, target, base = clusters
    sadmin = AdminClient({"bootstrap.servers": source.bootstrap})
    sadmin.create_topics([NewTopic("big", 1, 1)])["big"].result(30)
    tadmin = AdminClient({"bootstrap.servers": target.bootstrap})
    tadmin.create_topics([NewTopic("big", 1, 3, config={"max.message.bytes": "1000"})])["big"].result(30)
    p = Producer({"bootstrap.servers": source.bootstrap})
    for i in range(5):
        p.produce("big", b"x" * 2000, b"k%d" % i)
    assert p.flush(30) == 0

    mirror = MirrorProcess(base, source.bootstrap, target.bootstrap, "mm-abort", "big")
    try:
        mirror.start()
        assert mirror.proc.wait(60) == 1, tail(mirror.log)
    finally:
        mirror.close()
    log = mirror.log.read_text()
    assert "shutting down: a send to the target cluster failed" in log and "MSG_SIZE_TOO_LARGE" in log, log
    assert _committed(source.bootstrap, "mm-abort", "big") == 0
    assert sum(_high_watermarks(target.bootstrap, "big").values()) == 0

    mirror = MirrorProcess(base, source.bootstrap, target.bootstrap, "mm-drop", "big",
                           ["--abort.on.send.failure", "false"])
    try:
        mirror.start()
        wait_until(lambda: _committed(source.bootstrap, "mm-drop", "big") == 5, 60, 0.2, "committed past the drops",
                   ignore=(Exception,))
        assert mirror.stop() == 0, tail(mirror.log)
    finally:
        mirror.close()
    log = mirror.log.read_text()
    assert log.count("dropped a record to big") == 5 and "MirrorMaker: 0 records mirrored, 5 dropped" in log, log
