"""Network partitions (issue 16 item 2): brokers in network namespaces (tests/integration/netfault.py), cuts by
blackhole routes, the history checker (tests/integration/checker.py) after every run.

One 3-node ensemble and one 3-broker NetCluster (session timeout 4 s, replica.lag.time.max.ms 2 s) for the module,
two client namespaces c0 and c1 beside the test's own root-namespace clients. Tests:

1. `test_isolated_leader_acknowledges_nothing_and_loses_nothing` -- topic `split` (3 partitions, RF 3,
   min.insync.replicas=2). Three idempotent acks=all producers: c0 (on the minority side with the isolated
   leader), c1 (majority side), and one in the root namespace that reaches every broker. The leader L of
   partition 0 is cut from the other brokers, from ZooKeeper and from c1. While cut: the majority elects a new
   leader for partition 0 (leader epoch + 1), and c0 -- which reaches only L -- gets not one acknowledgement (L
   cannot replicate; with min ISR 2 it must not acknowledge alone). Healed after leadership moved: every replica
   back in every ISR, partition 0's segment bytes below the HW identical on the three brokers (L truncated what
   it wrote alone), and the checker per producer: 0 lost, 0 misplaced, 0 duplicated, 0 out of order.
2. `test_min_isr_1_loses_acknowledged_writes` -- the loss Kafka's documentation warns about (min.insync.replicas
   and unclean.leader.election.enable in Kafka's "Replicated Logs" / topic configs): topic `weak` (1 partition,
   RF 3, min.insync.replicas=1, unclean.leader.election.enable=true). L is cut from its followers (ZooKeeper
   still reaches it): it shrinks the ISR to [L] and goes on acknowledging acks=all writes alone. Then L is cut
   from ZooKeeper too: its session expires, the controller elects an out-of-sync follower (unclean), the
   producer moves to it; at heal L becomes a follower and truncates. The checker must count lost > 0, every lost
   record one L acknowledged while the ISR was [L].
3. `test_min_isr_1_clean_election_keeps_writes_but_goes_offline` (soak) -- the same with unclean election off:
   the partition has no leader while L is away, nothing acknowledged is lost.
4. `test_controller_minority_split` (soak) -- the controller alone on the minority side: a new controller (epoch
   + 1) on the majority side, 0 lost.
Soak command: `.venv/bin/python -m pytest -m soak tests/integration/test_faults_partition.py`.
"""
from __future__ import annotations

import time

import pytest

from tests.integration import faults
from tests.integration.harness import skip_or_fail, wait_until
from tests.integration.test_replication_common import NumberedProducer, committed_bytes, read_all, require_zookeeper

pytestmark = [pytest.mark.zk, pytest.mark.timeout(300)]

SESSION_MS = 4000
OVERRIDES = {"zookeeper.session.timeout.ms": SESSION_MS, "replica.lag.time.max.ms": 2000,
             # a follower whose fetch went into a cut notices in 3 s (default 30 s, as Kafka) and fetches again
             "replica.socket.timeout.ms": 3000}
# session expiry (4 s + a 500 ms tick) + election + LeaderAndIsr, with margin for two busy cores
ELECTION_S = SESSION_MS / 1000 + 16
PRODUCER = {"enable.idempotence": True, "acks": "all", "message.timeout.ms": 300000,
            # a request the isolated leader holds times out in 5 s and is retried (default 30 s)
            "request.timeout.ms": 5000, "metadata.max.age.ms": 2000}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    require_zookeeper()
    from tests.integration import netfault

    if not netfault.netns_available():
        skip_or_fail("needs root and `ip netns` (network namespaces)")   # CI=true: a failure, not a skip
    c = netfault.NetCluster(tmp_path_factory.mktemp("faults-partition"), overrides=OVERRIDES, clients=2)
    try:
        c.start()
        yield c
    finally:
        c.close()


def producers(cluster, topic: str, partitions: int, rate: float = 100.0):
    from tests.integration.netfault import NsProducer

    root = NumberedProducer(cluster.bootstrap, topic, partitions, PRODUCER, rate=rate, first=0)
    c0 = NsProducer(cluster.bootstrap, topic, partitions, PRODUCER, rate=rate, first=1_000_000,
                    netns=cluster.net.ns_of("c0"))
    c1 = NsProducer(cluster.bootstrap, topic, partitions, PRODUCER, rate=rate, first=2_000_000,
                    netns=cluster.net.ns_of("c1"))
    return root, c0, c1


def acks(prod, partition=None) -> int:
    return sum(1 for p, _, _ in list(prod.acked) if partition is None or p == partition)


def test_isolated_leader_acknowledges_nothing_and_loses_nothing(cluster):
    topic = "split"
    cluster.create_topic(topic, 3, 3, configs={"min.insync.replicas": "2"})
    cluster.wait_full_isr(topic, 3)
    before = faults.partition_state(cluster, topic, 0)
    victim = before["leader"]
    root, c0, c1 = prods = producers(cluster, topic, 3)
    for p in prods:
        p.start()
    try:
        wait_until(lambda: all(acks(p) >= 60 for p in prods), 30, 0.1, "60 acks for each producer")
        cluster.net.partition([cluster.node(victim), "c0"], cluster.others(victim) + ["zk", "c1"])
        cut_at = time.monotonic()
        # what L acknowledged before the cut reaches c0's delivery callback within a poll or two (10 ms each; 2 s
        # leaves room for a loaded machine); from then on L's high watermark cannot move (no follower fetch
        # reaches it), so c0 -- which reaches only L -- may get nothing
        time.sleep(2.0)
        c0_acks_at_cut = acks(c0)
        after = wait_until(lambda: (s := faults.partition_state(cluster, topic, 0))["leader"] != victim and s,
                           ELECTION_S, 0.2, "a new leader for partition 0 on the majority side")
        elected_s = time.monotonic() - cut_at
        # the majority keeps taking writes for partition 0 from the client on its side
        base = acks(c1, 0)
        wait_until(lambda: acks(c1, 0) >= base + 20, 30, 0.1, "20 acks of partition 0 from the majority side")
        c0_acks_while_cut = acks(c0) - c0_acks_at_cut
        held_s = time.monotonic() - cut_at
    finally:
        cluster.net.heal()
    try:
        cluster.wait_registered()
        cluster.wait_full_isr(topic, 3, timeout=60)
        wait_until(lambda: acks(c0) >= c0_acks_at_cut + 60, 60, 0.1, "c0 acknowledged again after the heal")
    finally:
        for p in prods:
            p.stop()
    print(f"\nleader {victim} of {topic}-0 cut for {held_s:.1f}s; new leader {after['leader']} after "
          f"{elected_s:.1f}s (leader epoch {before['leader_epoch']} -> {after['leader_epoch']}); acks to c0 while "
          f"cut: {c0_acks_while_cut}")
    assert after["leader_epoch"] > before["leader_epoch"]
    assert victim not in after["isr"]
    assert c0_acks_while_cut == 0, "the isolated leader acknowledged acks=all writes it could not replicate"

    consumed = read_all(cluster.bootstrap, topic, 3)
    total, each = faults.check_producers(prods, consumed)
    print(f"checker (isolated leader, RF 3, min ISR 2, acks=all): {total.summary()}")
    for name, r in zip(("root", "c0", "c1"), each):
        print(f"  {name}: {r.summary()}")
    assert total.acknowledged == sum(p.sent for p in prods) > 0
    assert (total.lost, total.misplaced, total.duplicated, total.out_of_order, total.offset_gaps) == \
        (0, 0, 0, 0, 0), total.summary()

    # L wrote what c0 sent it while cut into its own log; healed, it must have truncated that and copied the
    # new leader's history: the three replicas agree byte for byte below the high watermark
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "bytes"})
    try:
        hw = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()

    def equal():
        blobs = [committed_bytes(cluster.partition_dir(b, topic, 0), hw) for b in cluster.brokers]
        return len(set(blobs)) == 1 and blobs[0]

    wait_until(equal, 30, 0.2, f"{topic}-0 replicas byte-identical below HW {hw}")


def isolate_weak_leader(cluster, topic: str, unclean: bool):
    """Topic `topic` (1 partition, RF 3, min ISR 1); cut its leader L from the followers until the ISR is [L],
    produce acks=all from the root namespace; then cut L from ZooKeeper too. Returns (L, producer, number of
    records acknowledged before the cut -- with the full ISR)."""
    cluster.create_topic(topic, 1, 3, configs={"min.insync.replicas": "1",
                                               "unclean.leader.election.enable": str(unclean).lower()})
    cluster.wait_full_isr(topic, 1)
    leader = faults.partition_state(cluster, topic, 0)["leader"]
    # not idempotent: after an unclean election the new leader has none of the producer's sequence state and an
    # idempotent producer stops with the fatal OUT_OF_ORDER_SEQUENCE_NUMBER (correct, but ends the run); one
    # request in flight keeps the retries in order
    prod = NumberedProducer(cluster.bootstrap, topic, 1, {**PRODUCER, "enable.idempotence": False,
                                                          "max.in.flight.requests.per.connection": 1},
                            rate=200).start()
    wait_until(lambda: acks(prod) >= 50, 30, 0.1, "50 acks with the full ISR")
    cluster.net.partition([cluster.node(leader)], cluster.others(leader))
    # acks=all: nothing is acknowledged after this until L has shrunk the ISR to itself (after
    # replica.lag.time.max.ms, 2 s); what is acknowledged from then on L alone has
    with_full_isr = len(prod.acked)
    wait_until(lambda: faults.partition_state(cluster, topic, 0)["isr"] == [leader], 30, 0.2,
               f"the ISR of {topic}-0 shrunk to [{leader}]")
    shrunk_at = len(prod.acked)
    wait_until(lambda: len(prod.acked) >= shrunk_at + 100, 30, 0.1, "100 acks from the leader alone")
    cluster.net.isolate(cluster.node(leader))   # now from ZooKeeper and the client namespaces too
    return leader, prod, with_full_isr


def lost_values(acked, consumed: dict) -> list:
    have = {(p, v) for p, recs in consumed.items() for _, v in recs}
    return [(i, p, v) for i, (p, _, v) in enumerate(acked) if (p, v) not in have]


def test_min_isr_1_loses_acknowledged_writes(cluster):
    topic = "weak"
    try:
        leader, prod, with_full_isr = isolate_weak_leader(cluster, topic, unclean=True)
        new = wait_until(lambda: (s := faults.partition_state(cluster, topic, 0))["leader"] not in (leader, -1)
                         and s, ELECTION_S, 0.2, "an unclean election on the majority side")
        base = len(prod.acked)
        wait_until(lambda: len(prod.acked) >= base + 50, 60, 0.1, "50 acks from the unclean leader")
        alone = base - with_full_isr
    finally:
        cluster.net.heal()
    try:
        cluster.wait_registered()
        cluster.wait_full_isr(topic, 1, timeout=60)
    finally:
        prod.stop()
    consumed = read_all(cluster.bootstrap, topic, 1)
    from tests.integration.checker import check

    report = check(prod.acked, consumed)
    lost = lost_values(prod.acked, consumed)
    print(f"\nmin ISR 1, unclean election: leader {leader} acknowledged ~{alone} records after its followers "
          f"were cut; {new['leader']} elected unclean (epoch {new['leader_epoch']}); checker: {report.summary()}")
    assert report.lost == len(lost) > 0, \
        "with min.insync.replicas=1 and an unclean election the checker must see the loss"
    # every lost record is one acknowledged after the cut, by L alone (ISR [L]); nothing acknowledged with the
    # full ISR is lost
    assert min(i for i, _, _ in lost) >= with_full_isr, (with_full_isr, lost[:5])
    assert (report.out_of_order, report.offset_gaps) == (0, 0), report.summary()


@pytest.mark.soak
def test_min_isr_1_clean_election_keeps_writes_but_goes_offline(cluster):
    """`.venv/bin/python -m pytest -m soak tests/integration/test_faults_partition.py`"""
    topic = "weak-clean"
    try:
        leader, prod, _ = isolate_weak_leader(cluster, topic, unclean=False)
        faults.wait_unregistered(cluster, leader, timeout=ELECTION_S)
        # no live replica in the ISR and unclean election off: no leader until L returns
        wait_until(lambda: cluster.any_metadata([topic])["topics"][topic]["partitions"][0]["leader"] in (-1, leader)
                   and faults.partition_state(cluster, topic, 0)["leader"] in (-1, leader), ELECTION_S, 0.2,
                   "the partition offline on the majority side")
        time.sleep(2)   # hold the outage: no election may happen meanwhile
        assert faults.partition_state(cluster, topic, 0)["leader"] in (-1, leader)
    finally:
        cluster.net.heal()
    try:
        cluster.wait_registered()
        cluster.wait_full_isr(topic, 1, timeout=60)
    finally:
        prod.stop()
    from tests.integration.checker import check

    report = check(prod.acked, read_all(cluster.bootstrap, topic, 1))
    print(f"\nmin ISR 1, clean election only: {report.summary()}")
    assert report.ok and report.acknowledged == prod.sent, report.summary()


@pytest.mark.soak
def test_controller_minority_split(cluster):
    """`.venv/bin/python -m pytest -m soak tests/integration/test_faults_partition.py`"""
    topic = "ctl-split"
    cluster.create_topic(topic, 3, 3, configs={"min.insync.replicas": "2"})
    cluster.wait_full_isr(topic, 3)
    cluster.workload_topic = topic
    epoch = faults.controller_epoch(cluster)
    prods = producers(cluster, topic, 3)
    for p in prods:
        p.start()
    victim = faults.PauseController().pick(cluster)   # the current controller
    try:
        wait_until(lambda: all(acks(p) >= 60 for p in prods), 30, 0.1, "60 acks for each producer")
        cluster.net.partition([cluster.node(victim), "c0"], cluster.others(victim) + ["zk", "c1"])
        wait_until(lambda: faults.controller_id(cluster) not in (None, victim), ELECTION_S, 0.2,
                   "a controller on the majority side")
        assert faults.controller_epoch(cluster) > epoch
        base = acks(c1 := prods[2])
        wait_until(lambda: acks(c1) >= base + 60, 30, 0.1, "the majority side acknowledges")
    finally:
        cluster.net.heal()
    try:
        cluster.wait_registered()
        cluster.wait_full_isr(topic, 3, timeout=60)
    finally:
        for p in prods:
            p.stop()
    total, _ = faults.check_producers(prods, read_all(cluster.bootstrap, topic, 3))
    print(f"\ncontroller {victim} on the minority side: {total.summary()}")
    assert total.ok and total.acknowledged == sum(p.sent for p in prods), total.summary()
