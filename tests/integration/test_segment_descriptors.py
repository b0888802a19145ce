"""``log.open.segment.files.max`` (kbroker/log/descriptors.py): a broker with more segment files than the bound keeps
at most that many open, and every record still comes back, byte for byte, through evictions and reopens.

60 partitions x 4 segments (log.segment.bytes 12,000 holds two ~5,070-byte batches; 8 records of 5,000 bytes
each, one batch each) = 240 segment files against a bound of 40: producing walks every partition's active segment,
consuming from the beginning walks every segment.
"""
import os
import re
import time

import pytest

from tests.integration.harness import BrokerProcess, wait_until

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

TOPIC = "fd-bound"
PARTITIONS = 60
PER_PARTITION = 8
BOUND = 40


SEGMENT = re.compile(r"/\d{20}\.log$")        # not server.log and the other log4j-style files


def _open_logs(pid):
    n = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            if SEGMENT.search(os.readlink("/proc/%d/fd/%s" % (pid, fd))):
                n += 1
        except OSError:
            pass
    return n


def _value(p, i):
    return (b"%03d-%03d-" % (p, i)) * 625          # 5,000 bytes, unique per record


def test_more_segments_than_the_bound_stay_within_it_and_lose_nothing(tmp_path):
    broker = BrokerProcess(tmp_path / "b0", overrides={"auto.create.topics.enable": "false",
                                                      "log.open.segment.files.max": BOUND,
                                                      "log.segment.bytes": 12000})
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0,
                                "enable.idempotence": True})
        for i in range(PER_PARTITION):          # one record per partition per round: every active segment in turn
            for p in range(PARTITIONS):
                producer.produce(TOPIC, _value(p, i), partition=p)
            assert producer.flush(60) == 0
        segments = sum(1 for _root, _dirs, files in os.walk(broker.log_dir) for f in files
                       if f.endswith(".log") and f.startswith("0"))
        assert segments == PARTITIONS * PER_PARTITION // 2      # two one-record batches per segment
        assert 0 < _open_logs(broker.pid) <= BOUND

        consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "fd-bound",
                                "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([TOPIC])
        got = {}
        deadline = time.monotonic() + 90
        while sum(len(v) for v in got.values()) < PARTITIONS * PER_PARTITION and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.setdefault(msg.partition(), []).append((msg.offset(), msg.value()))
        consumer.close()
        assert sorted(got) == list(range(PARTITIONS))
        for p, records in got.items():
            assert records == [(i, _value(p, i)) for i in range(PER_PARTITION)], p
        wait_until(lambda: 0 < _open_logs(broker.pid) <= BOUND, 10, 0.1, "at most %d .log descriptors" % BOUND)
    finally:
        broker.close()
