"""Transactions on a compacted topic against a real broker (KIP-98's cleaner rules): confluent-kafka's transactional
producer commits and aborts, the background cleaner (``log.cleaner.backoff.ms`` 200) discards the aborted records and
the superseded committed ones, consumers of both isolation levels then read exactly the latest committed value per
key; an open transaction holds the cleaner at its first offset (the last stable offset) until it ends.

Keyed updates are followed by "filler" records under other keys worth more than one segment (segment.bytes 1024), so
the updates leave the active segment (never cleaned) and become cleanable, as in test_compaction.py.
"""
from __future__ import annotations

import time

import pytest

from tests.integration.harness import BrokerProcess, wait_until
from tests.integration.test_clients_common import TIMEOUT, create_topic

pytestmark = pytest.mark.timeout(120)

OVERRIDES = {"log.cleaner.backoff.ms": 200, "transaction.state.log.num.partitions": 1,
             "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1}
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01",
           "delete.retention.ms": "100", "min.compaction.lag.ms": "0"}
FILLERS = [(b"filler-%02d" % i, b"x" * 150) for i in range(16)]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("txn_compaction"), overrides=OVERRIDES)
    try:
        b.start()
        yield b
    finally:
        b.close()


def txn_producer(bootstrap, tid):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5,
                  "message.timeout.ms": int(TIMEOUT * 1000)})
    p.init_transactions(TIMEOUT)
    return p


def in_txn(producer, topic, pairs, commit=True):
    producer.begin_transaction()
    for key, value in pairs:
        producer.produce(topic, key=key, value=value, partition=0)
    producer.flush(TIMEOUT)
    if commit is None:
        return                               # left open
    (producer.commit_transaction if commit else producer.abort_transaction)(TIMEOUT)


def plain(bootstrap, topic, pairs):
    """Produce (key, value) pairs one batch each, non-transactionally; returns their offsets."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "message.timeout.ms": int(TIMEOUT * 1000)})
    offsets, errors = [], []

    def done(err, msg):
        (errors.append(err) if err is not None else offsets.append(msg.offset()))
    for key, value in pairs:
        p.produce(topic, key=key, value=value, partition=0, on_delivery=done)
        p.flush(TIMEOUT)
    assert errors == []
    return offsets


def read(bootstrap, topic, isolation):
    """[(key, value)] a consumer with ``isolation`` reads from offset 0 to the end it can read (partition EOF)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-" + topic, "enable.auto.commit": False,
                  "isolation.level": isolation, "enable.partition.eof": True, "fetch.wait.max.ms": 100,
                  "auto.offset.reset": "error"})
    got = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    return got
                raise AssertionError(msg.error())
            got.append((msg.key(), msg.value()))
        raise AssertionError("no end of partition in %gs; read %r" % (TIMEOUT, got))
    finally:
        c.close()


def test_cleaner_discards_aborted_and_superseded_transactional_records(broker):
    topic = "txc"
    create_topic(broker.bootstrap, topic, 1, config=COMPACT)
    keys = [b"k%d" % i for i in range(8)]
    p = txn_producer(broker.bootstrap, "txc-1")
    in_txn(p, topic, [(k, b"c1-" + k) for k in keys], commit=True)
    in_txn(p, topic, [(k, b"ab-" + k) for k in keys[:4]], commit=False)
    in_txn(p, topic, [(k, b"c2-" + k) for k in keys[4:]], commit=True)
    plain(broker.bootstrap, topic, FILLERS)
    # The cleaner leaves exactly the latest committed value of each key, for both isolation levels (the aborted
    # ab- records are gone even for read_uncommitted; k0..k3 keep c1 -- an aborted write shadows nothing).
    latest = [(k, b"c1-" + k) for k in keys[:4]] + [(k, b"c2-" + k) for k in keys[4:]]
    expected = latest + FILLERS
    wait_until(lambda: read(broker.bootstrap, topic, "read_uncommitted") == expected, 40,
               message="read_uncommitted never showed only the latest committed values")
    assert read(broker.bootstrap, topic, "read_committed") == expected
    # The producer goes on: its state survived the cleaning (the retained batch headers), no fencing, no
    # out-of-order sequence.
    in_txn(p, topic, [(keys[0], b"c3")], commit=True)
    assert read(broker.bootstrap, topic, "read_committed")[-1] == (keys[0], b"c3")
    p.flush(TIMEOUT)
    # kill -9 and restart: the cleaned segments, their markers and the producer state recover; nothing aborted
    # comes back, the latest committed value of every key is what both isolation levels read.
    broker.kill9()
    broker.start()
    final = dict(expected)
    final[keys[0]] = b"c3"
    for isolation in ("read_committed", "read_uncommitted"):
        got = wait_until(lambda: read(broker.bootstrap, topic, isolation), 30, ignore=(Exception,))
        assert dict(got) == final, isolation
        assert not [v for _k, v in got if v.startswith(b"ab-")]


def cleaner_checkpoint(broker, topic):
    path = broker.log_dir / "cleaner-offset-checkpoint"
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return None
    for line in lines[2:]:
        t, part, offset = line.split()
        if t == topic and part == "0":
            return int(offset)
    return None


def test_open_transaction_holds_the_cleaner_at_the_last_stable_offset(broker):
    topic = "txo"
    create_topic(broker.bootstrap, topic, 1, config=COMPACT)
    assert plain(broker.bootstrap, topic, [(b"k0", b"before"), (b"k1", b"x")]) == [0, 1]
    p = txn_producer(broker.bootstrap, "txo-1")
    in_txn(p, topic, [(b"k0", b"open")], commit=None)                       # offset 2, left open
    assert plain(broker.bootstrap, topic, [(b"k0", b"after")]) == [3]
    plain(broker.bootstrap, topic, FILLERS)
    # The cleaner stops at the open transaction's first offset: k0=before is not shadowed by k0=after (above it).
    wait_until(lambda: cleaner_checkpoint(broker, topic) == 2, 30,
               message="the cleaner never recorded first dirty offset 2 (the LSO)")
    assert read(broker.bootstrap, topic, "read_uncommitted")[:4] == [
        (b"k0", b"before"), (b"k1", b"x"), (b"k0", b"open"), (b"k0", b"after")]
    assert read(broker.bootstrap, topic, "read_committed") == [(b"k0", b"before"), (b"k1", b"x")]  # LSO 2
    p.abort_transaction(TIMEOUT)
    # Once it aborts, the cleaner goes past: k0=before is superseded by k0=after, k0=open is discarded.
    wait_until(lambda: read(broker.bootstrap, topic, "read_uncommitted")
               == [(b"k1", b"x"), (b"k0", b"after")] + FILLERS, 40,
               message="the cleaner did not pass the ended transaction")
    assert read(broker.bootstrap, topic, "read_committed") == [(b"k1", b"x"), (b"k0", b"after")] + FILLERS
