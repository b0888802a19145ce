"""Controller failover cleans up after the dead controller: 3 brokers on a real 3-node ZooKeeper ensemble (/kb).

When the broker that is the controller is killed (kill -9), its /brokers/ids node and /controller vanish together
(one session). The broker elected next reads /brokers/ids without it, so no broker change ever names it: the new
controller itself must treat every replica of the partition states that is not registered as failed (Kafka's
onControllerFailover: replica state machine startup -> OfflineReplica for replicas on dead brokers, partition state
machine startup -> leaders elected for partitions whose leader is dead). Otherwise a partition the dead controller
followed keeps it in its ISR, and acks=all writes (and transaction markers) wait for the leader's own ISR shrink,
``replica.lag.time.max.ms`` later -- set to 600 s here so that shrink cannot hide the controller's omission.

Checked within the session timeout + margin (FAILOVER_WAIT_S): the state znode of each partition no longer names
the dead broker in its ISR, with leader epoch + 1 (Kafka bumps it on every controller ISR change, so the replicas
apply the new ISR instead of ignoring an equal epoch); the partition the dead controller led has a new live leader;
the survivors' Metadata agrees; acks=all writes in flight at the kill complete then, and later ones to every
partition within a bounded time; and no survivor ignored a LeaderAndIsr for these partitions (every one it got
carried a new epoch).
"""
from __future__ import annotations

import time

import pytest

from tests.integration.harness import HarnessError, wait_until
from tests.integration.test_cluster_common import (
    FAILOVER_WAIT_S, Cluster, consume, metadata, produce, records_for)

pytestmark = [pytest.mark.zk, pytest.mark.timeout(300)]

# The leader's own ISR shrink must not happen during a test (it would hide a controller that forgets).
OVERRIDES = {"replica.lag.time.max.ms": 600000}
# acks=all produce after the failover: the ISR is fixed well before this; 600 s (the lag limit) without the fix.
PRODUCE_BOUND_S = 20


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, zk_ensemble):   # zk_ensemble: tests/integration/conftest.py
    c = Cluster(tmp_path_factory.mktemp("cluster"), zk_ensemble, overrides=OVERRIDES)
    try:
        c.start()
        yield c
    finally:
        c.close()


@pytest.fixture
def healthy(cluster):
    cluster.ensure_all_running()
    return cluster


def create_assigned(bootstrap: str, topic: str, assignment: list[list[int]], timeout: float = 20.0) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment)
    fut = admin.create_topics([new], operation_timeout=timeout, request_timeout=timeout + 5)
    fut[topic].result(timeout + 10)


def zk_states(cluster: Cluster, topic: str, n: int) -> dict[int, dict]:
    return {p: cluster.state(topic, p)[0] for p in range(n)}


def wait_full_isr(cluster: Cluster, topic: str, n: int) -> dict[int, dict]:
    def full():
        states = zk_states(cluster, topic, n)
        return states if all(sorted(s["isr"]) == [0, 1, 2] for s in states.values()) else None
    return wait_until(full, 30, 0.1, f"{topic}: ISR [0, 1, 2] for every partition")


class InFlight:
    """An acks=all producer whose metadata is loaded up front, so ``send`` goes out at once (no retries: one
    produce request per record, which must succeed)."""

    def __init__(self, bootstrap: str, topic: str):
        from confluent_kafka import Producer

        self.topic, self.results = topic, []
        # request.timeout.ms 30 s: the leader parks the request up to that long; message.timeout.ms above it.
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "retries": 0,
                                  "request.timeout.ms": 30000, "message.timeout.ms": 60000})
        self.producer.list_topics(topic, timeout=10)
        self.sent = 0

    def send(self, partition: int, value: bytes) -> None:
        self.producer.produce(self.topic, value=value, key=value, partition=partition,
                              on_delivery=lambda err, msg: self.results.append(err))
        self.producer.poll(0)
        self.sent += 1

    def wait(self, timeout: float) -> None:
        left = self.producer.flush(max(timeout, 0.1))
        assert left == 0 and self.results == [None] * self.sent, (left, self.results)


def ignored_lines(broker, topic: str, since: int) -> list[str]:
    return [line for line in broker.log_text()[since:].splitlines()
            if f"{topic}-" in line and "ignoring LeaderAndIsr" in line]


def test_kill9_controller_removes_it_from_isr_and_reelects_its_partitions(healthy):
    cluster = healthy
    ctl = cluster.controller_id()
    a, b = [i for i in range(3) if i != ctl]
    topic = "fo-isr"
    # p0: the controller follows a's leadership; p1: the controller leads; p2: it follows b, last in the list.
    assignment = [[a, ctl, b], [ctl, a, b], [b, a, ctl]]
    create_assigned(cluster.bootstrap, topic, assignment)
    cluster.wait_topic_everywhere(topic, 3)
    first = records_for(topic, range(3), per_partition=4)
    produce(cluster.bootstrap, topic, first)
    before = wait_full_isr(cluster, topic, 3)
    assert [before[p]["leader"] for p in range(3)] == [a, ctl, b]

    survivors = [cluster.broker(a), cluster.broker(b)]
    log_marks = {s.broker_id: len(s.log_text()) for s in survivors}
    # acks=all writes in flight at the kill, to the partitions the controller followed: their leaders wait for the
    # dead follower until the new controller shrinks the ISR (the leader then completes them at once).
    inflight = InFlight(",".join(s.bootstrap for s in survivors), topic)
    cluster.broker(ctl).kill9()
    t0 = time.monotonic()
    for p in (0, 2):
        inflight.send(p, f"inflight-{p}".encode())

    def cleaned():
        states = zk_states(cluster, topic, 3)
        if any(ctl in s["isr"] or s["leader"] in (-1, ctl) for s in states.values()):
            return None
        return states
    try:
        after = wait_until(cleaned, FAILOVER_WAIT_S, 0.1,
                           f"{topic}: dead controller {ctl} out of every ISR, its partition led by a survivor")
    except HarnessError:
        raise AssertionError(f"states after the failover: {zk_states(cluster, topic, 3)}") from None
    new_ctl = cluster.controller_id()
    assert new_ctl in (a, b)
    for p in range(3):
        st = after[p]
        assert sorted(st["isr"]) == sorted([a, b]), (p, st)
        # One controller write per partition: the ISR change (and for p1 the leader change) is epoch + 1.
        assert st["leader_epoch"] == before[p]["leader_epoch"] + 1, (p, before[p], st)
        assert st["controller_epoch"] == cluster.controller_epoch(), (p, st)
    assert after[0]["leader"] == a and after[2]["leader"] == b     # followers leaving change no leader
    assert after[1]["leader"] == a                                  # first live ISR member in assignment order

    def survivors_agree():
        for s in survivors:
            parts = metadata(s, [topic])["topics"][topic]["partitions"]
            if any((parts[p]["leader"], sorted(parts[p]["isr"])) != (after[p]["leader"], sorted([a, b]))
                   for p in range(3)):
                return False
        return True
    wait_until(survivors_agree, 10, 0.1, "the survivors' Metadata to show the new leaders and ISRs")

    # The in-flight writes completed with the failover (well before the produce request timeout, 30 s).
    inflight.wait(FAILOVER_WAIT_S + 5 - (time.monotonic() - t0))
    assert time.monotonic() - t0 < FAILOVER_WAIT_S + 5
    # acks=all now completes as soon as the two live replicas have the records (not after replica.lag.time.max.ms).
    second = {p: [f"after-{p}-{i}".encode() for i in range(4)] for p in range(3)}
    t1 = time.monotonic()
    produce(",".join(s.bootstrap for s in survivors), topic, second, timeout=PRODUCE_BOUND_S)
    assert time.monotonic() - t1 < PRODUCE_BOUND_S
    assert time.monotonic() - t0 < FAILOVER_WAIT_S + PRODUCE_BOUND_S
    got = consume(",".join(s.bootstrap for s in survivors), topic, [0, 1, 2], expected=26)
    assert got == {0: first[0] + [b"inflight-0"] + second[0], 1: first[1] + second[1],
                   2: first[2] + [b"inflight-2"] + second[2]}

    # Every LeaderAndIsr the survivors got for these partitions since the kill carried a new leader epoch.
    for s in survivors:
        assert ignored_lines(s, topic, log_marks[s.broker_id]) == []


def test_follower_dying_while_no_controller_is_active_leaves_the_isr(healthy):
    """The controller and a follower die together: whichever order the sessions expire in, the last broker
    standing ends as the only ISR member and leader of every partition, and acks=all works against it."""
    cluster = healthy
    ctl = cluster.controller_id()
    a, b = [i for i in range(3) if i != ctl]
    topic = "fo-isr-two"
    assignment = [[a, ctl, b], [ctl, b, a], [b, a, ctl]]
    create_assigned(cluster.bootstrap, topic, assignment)
    cluster.wait_topic_everywhere(topic, 3)
    first = records_for(topic, range(3), per_partition=3)
    produce(cluster.bootstrap, topic, first)
    wait_full_isr(cluster, topic, 3)

    cluster.broker(ctl).kill9()
    cluster.broker(b).kill9()

    def alone():
        states = zk_states(cluster, topic, 3)
        return states if all(s["isr"] == [a] and s["leader"] == a for s in states.values()) else None
    wait_until(alone, FAILOVER_WAIT_S + 5, 0.1, f"{topic}: broker {a} the only ISR member and leader")
    assert cluster.controller_id() == a

    second = {p: [f"alone-{p}-{i}".encode() for i in range(3)] for p in range(3)}
    t1 = time.monotonic()
    produce(cluster.broker(a).bootstrap, topic, second, timeout=PRODUCE_BOUND_S)
    assert time.monotonic() - t1 < PRODUCE_BOUND_S
    got = consume(cluster.broker(a).bootstrap, topic, [0, 1, 2], expected=18)
    assert got == {p: first[p] + second[p] for p in range(3)}
