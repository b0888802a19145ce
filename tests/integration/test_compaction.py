"""Log compaction against a real broker: topic configs from CreateTopics and AlterConfigs, the background
cleaner (``log.cleaner.backoff.ms`` 200 here), keyless records refused, consumers from offset 0.

Every test writes keyed updates, then "filler" records under other keys worth more than one segment
(segment.bytes 1024), so the updates leave the active segment (never cleaned) and become cleanable.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.integration.harness import BrokerProcess, wait_until
from tests.integration.test_clients_common import TIMEOUT, create_topic

pytestmark = pytest.mark.timeout(60)

COMPACT = {"cleanup.policy": "compact", "segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01",
           "delete.retention.ms": "100"}
KEYS = [b"key-%d" % i for i in range(8)]
DEAD = {KEYS[0], KEYS[1]}  # get a tombstone as their last update


@pytest.fixture(scope="module")
def cbroker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("compaction"), overrides={"log.cleaner.backoff.ms": 200})
    try:
        b.start()
        yield b
    finally:
        b.close()


def produce(bootstrap, topic, pairs):
    """Produce (key, value) pairs one batch each; returns {key: offset of its last record}."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "message.timeout.ms": int(TIMEOUT * 1000)})
    last, errors = {}, []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
        else:
            last[msg.key()] = msg.offset()

    for key, value in pairs:
        producer.produce(topic, key=key, value=value, partition=0, on_delivery=on_delivery)
        producer.flush(TIMEOUT)
    assert errors == []
    return last


def updates_then_fillers(bootstrap, topic, rounds=6):
    pairs = [(k, b"%s-v%d" % (k, r)) for r in range(rounds) for k in KEYS]
    pairs += [(k, None) for k in sorted(DEAD)]
    last = produce(bootstrap, topic, pairs)
    fillers = produce(bootstrap, topic, [(b"filler-%02d" % i, b"x" * 150) for i in range(16)])
    return last, fillers


def read_from_zero(bootstrap, topic):
    """[(offset, key, value)] a consumer assigned at offset 0 reads up to the high watermark."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-" + topic, "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100, "auto.offset.reset": "error"})
    got = []
    try:
        high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + TIMEOUT
        while (not got or got[-1][0] < high - 1) and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                got.append((msg.offset(), msg.key(), msg.value()))
        assert got and got[-1][0] == high - 1, f"read {len(got)} records, high watermark {high}"
    finally:
        consumer.close()
    return got


def log_bytes(broker, topic):
    return sum(p.stat().st_size for p in (Path(broker.log_dir) / f"{topic}-0").glob("*.log"))


def assert_compacted(got, last):
    updates = [(off, key, value) for off, key, value in got if key in KEYS]
    expected = sorted((off, key, b"%s-v5" % key) for key, off in last.items() if key not in DEAD)
    assert updates == expected
    offsets = [off for off, _k, _v in got]
    assert offsets == sorted(set(offsets))


def compacted(bootstrap, topic, last):
    try:
        assert_compacted(read_from_zero(bootstrap, topic), last)
        return True
    except AssertionError:
        return False


def test_compacted_topic_keeps_latest_value_per_key(cbroker):
    topic = "compact-created"
    create_topic(cbroker.bootstrap, topic, config=COMPACT)
    last, fillers = updates_then_fillers(cbroker.bootstrap, topic)
    assert len(last) == len(KEYS) and max(last.values()) == 6 * len(KEYS) + len(DEAD) - 1
    wait_until(lambda: compacted(cbroker.bootstrap, topic, last), timeout=25, interval=0.5,
               message="log never compacted")
    got = read_from_zero(cbroker.bootstrap, topic)
    assert_compacted(got, last)
    assert [(off, key) for off, key, _v in got if key not in KEYS] == sorted((o, k) for k, o in fillers.items())
    assert log_bytes(cbroker, topic) < 16 * 150 + 2 * 1024  # 50 updates + 2 tombstones (~3.5 KB) are gone
    checkpoint = (Path(cbroker.log_dir) / "cleaner-offset-checkpoint").read_text().split("\n")
    assert checkpoint[0] == "0" and any(line.startswith(topic + " 0 ") for line in checkpoint[2:])


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")  # legacy AlterConfigs
def test_alter_configs_to_compact_takes_effect(cbroker):
    from confluent_kafka.admin import AdminClient, ConfigResource

    topic = "compact-altered"
    create_topic(cbroker.bootstrap, topic, config={"segment.bytes": "1024"})
    last, _fillers = updates_then_fillers(cbroker.bootstrap, topic)
    time.sleep(1.0)  # five cleaner rounds: a delete-policy topic is left alone
    assert len(read_from_zero(cbroker.bootstrap, topic)) == 6 * len(KEYS) + len(DEAD) + 16

    admin = AdminClient({"bootstrap.servers": cbroker.bootstrap})
    futures = admin.alter_configs([ConfigResource("topic", topic, set_config=COMPACT)],
                                  request_timeout=TIMEOUT)
    for f in futures.values():
        assert f.result(TIMEOUT) is None
    wait_until(lambda: compacted(cbroker.bootstrap, topic, last), timeout=25, interval=0.5,
               message="log never compacted after AlterConfigs")


def test_keyless_record_rejected_on_compacted_topic(cbroker):
    from confluent_kafka import KafkaError, Producer

    topic = "compact-keyless"
    create_topic(cbroker.bootstrap, topic, config=COMPACT)
    producer = Producer({"bootstrap.servers": cbroker.bootstrap, "linger.ms": 0, "message.timeout.ms": 10_000})
    reports = []
    producer.produce(topic, value=b"no key", partition=0, on_delivery=lambda err, msg: reports.append(err))
    assert producer.flush(TIMEOUT) == 0  # its own batch: the broker rejects a whole batch
    producer.produce(topic, key=b"k", value=b"keyed", partition=0, on_delivery=lambda err, msg: reports.append(err))
    assert producer.flush(TIMEOUT) == 0
    assert len(reports) == 2
    assert reports[0] is not None and reports[0].code() == KafkaError.INVALID_RECORD == 87
    assert reports[1] is None
    assert [(k, v) for _o, k, v in read_from_zero(cbroker.bootstrap, topic)] == [(b"k", b"keyed")]
