"""Committed offsets survive a broker restart: the coordinator reloads __consumer_offsets before serving groups.

A confluent-kafka consumer commits offset 3 in each of 6 partitions (explicit commit), every consumer stops, the
broker restarts (once cleanly, once with SIGKILL), and a new consumer of the same group resumes exactly there.
"""
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kbroker.client.connection import BrokerConnection
from tests.integration.harness import wait_until

PARTS = 6


def _consume(bootstrap, topic, group, n, timeout=30):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": 6000})
    c.subscribe([topic])
    got = []
    deadline = time.time() + timeout
    while len(got) < n and time.time() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append((m.partition(), m.offset()))
    return c, got


@pytest.mark.parametrize("kill", [False, True])
def test_resume_at_committed_offsets_after_restart(broker_factory, kill):
    b = broker_factory(overrides={"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 7})
    topic, group = "resume-t", "resume-g"
    with BrokerConnection(b.host, b.port) as conn:
        conn.request("CreateTopics", {"topics": [{"name": topic, "num_partitions": PARTS, "replication_factor": 1,
                                                  "assignments": [], "configs": []}], "timeout_ms": 5000},
                     version=1)
    p = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(60):
        p.produce(topic, value=b"%d" % i, partition=i % PARTS)
    assert p.flush(10) == 0
    c, got = _consume(b.bootstrap, topic, group, 60)
    assert len(got) == 60
    c.commit(offsets=[TopicPartition(topic, q, 3) for q in range(PARTS)], asynchronous=False)
    c.close()
    b.restart(kill=kill)
    with BrokerConnection(b.host, b.port) as conn:
        # Right after a restart the offsets partition may not be led or loaded yet: COORDINATOR_LOAD_IN_PROGRESS
        # (14) and NOT_COORDINATOR (16) are Kafka's answers then, and clients retry them; anything else is final.
        def fetched():
            r = conn.request("OffsetFetch", {"group_id": group, "topics": None}, version=7)
            return r if r["error_code"] not in (14, 16) else None
        f = wait_until(fetched, 30, 0.1, "the group coordinator to serve OffsetFetch after the restart")
        assert f["error_code"] == 0
        assert sorted((q["partition_index"], q["committed_offset"]) for t in f["topics"] for q in t["partitions"]) \
            == [(q, 3) for q in range(PARTS)]
        d = conn.request("DescribeGroups", {"groups": [group]}, version=0)
        assert d["groups"][0]["group_state"] == "Empty"
    c, got = _consume(b.bootstrap, topic, group, 42)
    c.close()
    assert sorted(got) == [(q, o) for q in range(PARTS) for o in range(3, 10)]
