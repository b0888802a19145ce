"""Replication under faults (issue 5, "what must show it"): no acknowledged record lost, and the checker can see
a loss when the configuration allows one.

One 3-node ensemble and one 3-broker cluster for the module; tests run in file order:

1. `test_kill9_nemesis_loses_nothing` -- topic `chaos` (3 partitions, RF 3, min.insync.replicas=2); an idempotent
   confluent-kafka producer (acks=all) sends numbered records at ~300/s while a nemesis SIGKILLs a random broker
   every ~10 s and starts it again ~4 s later (NEMESIS_S in all, default 30 s). A consumer then reads every
   partition from offset 0 to its high watermark and `checker.check` must report 0 lost, 0 misplaced, 0 duplicated
   and 0 out of order, with every delivery report successful.
2. `test_replicas_byte_identical` -- after the run, with all three back in every ISR: each partition's segment
   bytes below the high watermark are the same on the three brokers.
3. `test_checker_sees_unclean_loss` -- topic `unsafe` (1 partition, replicas [A, B], acks=1,
   unclean.leader.election.enable=true, min.insync.replicas=1): stop follower B (it leaves the ISR), produce 50
   records to A with acks=1 (acknowledged), SIGKILL A, start B -> the controller elects the stale B (unclean),
   produce 10 more to B, start A -> A truncates to B's history. The checker must report exactly the 50
   acknowledged-then-truncated records as lost.

Environment: KBROKER_NEMESIS_S overrides the nemesis duration (seconds), KBROKER_NEMESIS_SEED the victim
order (printed).
"""
from __future__ import annotations

import os
import random
import time

import pytest

from tests.integration.checker import check
from tests.integration.harness import wait_until
from tests.integration.test_replication_common import (
    FAILOVER_S, NumberedProducer, RCluster, committed_bytes, read_all, require_zookeeper)

pytestmark = [pytest.mark.zk, pytest.mark.timeout(420)]

NEMESIS_S = float(os.environ.get("KBROKER_NEMESIS_S", "30"))
KILL_EVERY_S = 10.0
DOWN_S = 4.0
CHAOS = "chaos"
CHAOS_PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    require_zookeeper()
    c = RCluster(tmp_path_factory.mktemp("repl-faults"))
    try:
        c.start()
        yield c
    finally:
        c.close()


def test_kill9_nemesis_loses_nothing(cluster):
    cluster.create_topic(CHAOS, CHAOS_PARTITIONS, 3, configs={"min.insync.replicas": "2"})
    cluster.wait_full_isr(CHAOS, CHAOS_PARTITIONS)
    producer = NumberedProducer(cluster.bootstrap, CHAOS, CHAOS_PARTITIONS, {
        "enable.idempotence": True, "acks": "all",
        # never give up on a record during the run: a timed-out record would be a delivery failure, not a loss
        "message.timeout.ms": 300000, "request.timeout.ms": 10000}, rate=300).start()
    seed = int(os.environ.get("KBROKER_NEMESIS_SEED", str(random.randrange(1 << 30))))
    print(f"\nnemesis seed {seed} (KBROKER_NEMESIS_SEED={seed} repeats the victim order)")
    rng = random.Random(seed)
    kills = []
    victim = None
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < NEMESIS_S:
            time.sleep(KILL_EVERY_S - DOWN_S)
            # random, but never the same broker twice in a row: in 30 s (three kills) at least two brokers die,
            # one of them the controller or a leader of every partition
            victim = rng.choice([b for b in cluster.brokers if b is not victim])
            victim.kill9()
            kills.append((round(time.monotonic() - t0, 1), victim.broker_id, len(producer.acked)))
            time.sleep(DOWN_S)
            victim.start(wait=True, timeout=60)
    finally:
        cluster.ensure_all_running()
        producer.stop()
    print(f"nemesis kills (t, broker, acks so far): {kills}")
    assert producer.fatal is None, producer.fatal
    assert producer.failed == [], producer.failed[:5]
    assert len(kills) >= NEMESIS_S // KILL_EVERY_S - 1

    consumed = read_all(cluster.bootstrap, CHAOS, CHAOS_PARTITIONS)
    report = check(producer.acked, consumed)
    print(f"checker (acks=all, idempotent, {len(kills)} kill -9): {report.summary()}")
    assert report.acknowledged == producer.sent > 0
    assert (report.lost, report.misplaced, report.duplicated, report.out_of_order, report.offset_gaps) == \
        (0, 0, 0, 0, 0), report.summary()


def test_replicas_byte_identical(cluster):
    cluster.ensure_all_running()
    if not cluster.partition_dir(cluster.brokers[0], CHAOS, 0).exists():
        # run alone (-k): the nemesis test made no topic; write 300 acknowledged records through one kill -9
        cluster.create_topic(CHAOS, CHAOS_PARTITIONS, 3, configs={"min.insync.replicas": "2"})
        cluster.wait_full_isr(CHAOS, CHAOS_PARTITIONS)
        producer = NumberedProducer(cluster.bootstrap, CHAOS, CHAOS_PARTITIONS, {
            "enable.idempotence": True, "acks": "all", "message.timeout.ms": 120000}, rate=300).start()
        try:
            wait_until(lambda: len(producer.acked) >= 150, 30, 0.1, "150 acks before the kill")
            cluster.brokers[1].kill9()
            cluster.brokers[1].start(wait=True, timeout=60)
            wait_until(lambda: len(producer.acked) >= 300, 60, 0.1, "300 acks after the restart")
        finally:
            producer.stop()
        assert producer.failed == [], producer.failed[:5]
    cluster.wait_full_isr(CHAOS, CHAOS_PARTITIONS, timeout=FAILOVER_S * 2)
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "bytes"})
    try:
        hws = {p: c.get_watermark_offsets(TopicPartition(CHAOS, p), timeout=10)[1] for p in range(CHAOS_PARTITIONS)}
    finally:
        c.close()
    sizes = {}
    for p in range(CHAOS_PARTITIONS):
        # the followers may still be fetching the last batches: equal once each has the leader's bytes to HW
        def replicas_equal():
            blobs = [committed_bytes(cluster.partition_dir(b, CHAOS, p), hws[p]) for b in cluster.brokers]
            return blobs if len(set(blobs)) == 1 else None

        blobs = wait_until(replicas_equal, 30, 0.2, f"{CHAOS}-{p} segment bytes equal below HW {hws[p]}")
        assert hws[p] > 0 and len(blobs[0]) > 0
        sizes[p] = (hws[p], len(blobs[0]))
    print(f"\nbyte-identical replicas per partition (HW, bytes): {sizes}")


def test_checker_sees_unclean_loss(cluster):
    cluster.ensure_all_running()
    a, b = cluster.brokers[0], cluster.brokers[1]
    topic = "unsafe"
    cluster.create_topic(topic, assignment=[[a.broker_id, b.broker_id]],
                         configs={"unclean.leader.election.enable": "true", "min.insync.replicas": "1"})
    cluster.wait_isr(topic, [0], lambda p: [a.broker_id, b.broker_id])
    assert cluster.state(topic, 0)["leader"] == a.broker_id

    b.stop()  # controlled shutdown of a follower: it leaves the ISR
    cluster.wait_isr(topic, [0], lambda p: [a.broker_id], timeout=FAILOVER_S)

    prod = NumberedProducer(cluster.bootstrap, topic, 1, {"acks": 1, "enable.idempotence": False,
                                                          "message.timeout.ms": 20000}, rate=1000)
    prod.start()
    wait_until(lambda: len(prod.acked) >= 50, 20, 0.05, "50 acks=1 deliveries")
    prod._stop.set()
    prod._thread.join(30)
    acked_on_a = list(prod.acked)
    a.kill9()
    b.start()
    # A's session ends within 6 s; the only live replica, B, is not in the ISR: unclean election picks it.
    wait_until(lambda: cluster.state(topic, 0)["leader"] == b.broker_id, FAILOVER_S, 0.2,
               "B elected leader (unclean)", ignore=(Exception,))
    assert cluster.state(topic, 0)["isr"] == [b.broker_id]

    # values from 100000 on: distinct from A's records
    after = NumberedProducer(cluster.bootstrap, topic, 1, {"acks": 1, "message.timeout.ms": 20000}, rate=1000,
                             first=100000)
    after.start()
    wait_until(lambda: len(after.acked) >= 10, 20, 0.05, "10 deliveries to B")
    after.stop()
    a.start()
    cluster.wait_isr(topic, [0], lambda p: [a.broker_id, b.broker_id], timeout=FAILOVER_S * 2)

    consumed = read_all(cluster.bootstrap, topic, 1)
    report = check(acked_on_a + after.acked, consumed)
    print(f"\nchecker (acks=1, unclean election): {report.summary()}")
    assert report.lost == len(acked_on_a) >= 50, report.summary()
    # what B took after the election survives A's return
    assert check(after.acked, consumed).lost == 0
