"""Controller failover cleans up after the dead controller: 3 brokers on a real 3-node ZooKeeper ensemble (/kb).

When the broker that is the controller is killed (kill -9), its /brokers/ids node and /controller vanish together
(one session). The broker elected next reads /brokers/ids without it, so no broker change ever names it: the new
controller itself must treat every replica of the partition states that is not registered as failed (Kafka's
onControllerFailover: replica state machine startup -> OfflineReplica for replicas on dead brokers, partition state
machine startup -> leaders elected for partitions whose leader is dead). Otherwise a partition the dead controller
followed keeps it in its ISR, and acks=all writes (and transaction markers) wait for the leader's own ISR shrink,
``replica.lag.time.max.ms`` later -- set to 600 s here so that shrink cannot hide the controller's omission.

Checked within the session timeout + margin (FAILOVER_WAIT_S): the state znode of each partition no longer names
the dead broker in its ISR, in one controller write (znode version + 1); the partition the dead controller led has
a new live leader with leader epoch + 1; the ones it followed keep their leader and leader epoch (a dead follower
has no fetcher to fence: kbroker/controller/partitions.py, as Kafka's KRaft controller since 3.6), and their
leaders take the new ISR at the new znode version (Partition.refresh_state, logged); the survivors' Metadata
agrees; acks=all writes in flight at the kill complete then, and later ones to every partition within a bounded
time; and no survivor ignored a LeaderAndIsr for these partitions.
"""
from __future__ import annotations

import re
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
    before_versions = [cluster.state(topic, p)[1].version for p in range(3)]
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
        # One controller write per partition (the leaders' own shrink is 600 s away); only p1's leader changed,
        # so only p1's epoch moved.
        assert cluster.state(topic, p)[1].version == before_versions[p] + 1, (p, st)
        assert st["leader_epoch"] == before[p]["leader_epoch"] + (p == 1), (p, before[p], st)
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

    # No survivor ignored a LeaderAndIsr for these partitions since the kill; the leaders of p0 and p2 took
    # their new ISR (without the victim) in the same epoch, at the new znode version (their state-change.log).
    for s in survivors:
        assert ignored_lines(s, topic, log_marks[s.broker_id]) == []
    for p, leader in ((0, a), (2, b)):
        path = cluster.broker(leader).server_log_dir / "state-change.log"
        line = re.compile(rf"for the isr-update transition for partition \[{topic},{p}\] \(Leader:{leader},"
                          rf"ISR:([0-9,]+),LeaderEpoch:\d+,ZkVersion:{before_versions[p] + 1}\): error 0")
        found = wait_until(lambda: line.findall(path.read_text(errors="replace")), 5, 0.1,
                           f"the isr-update of {topic}-{p} in broker {leader}'s state-change.log")
        assert sorted(int(r) for r in found[-1].split(",")) == sorted([a, b]), (p, leader, found)


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


def test_a_broker_back_from_an_expired_session_rejoins_idle_isrs_without_an_epoch_bump(healthy):
    """A follower stopped (SIGSTOP) past its session: the controller writes it out of the ISRs keeping each leader
    epoch (its leaders stay), and the resumed process -- same fetchers, same fetch sessions, nothing re-added --
    must rejoin the idle partitions' ISRs when it registers again. Its leaders' metadata gaining it makes their
    follower sessions report the idle partitions at once (fetch_sessions.refresh_followers_soon); without that the
    idle ones waited a quarter of replica.lag.time.max.ms, 150 s here."""
    import os
    import signal

    cluster = healthy
    ctl = cluster.controller_id()
    victim, a = [i for i in range(3) if i != ctl]
    topic = "fo-isr-expiry"
    create_assigned(cluster.bootstrap, topic, [[a, victim, ctl], [ctl, victim, a], [a, ctl, victim]])
    cluster.wait_topic_everywhere(topic, 3)
    produce(cluster.bootstrap, topic, records_for(topic, range(3), per_partition=2))
    before = wait_full_isr(cluster, topic, 3)
    path = f"/brokers/ids/{victim}"
    owner = cluster.zk.exists(path).ephemeralOwner
    proc = cluster.broker(victim)
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        wait_until(lambda: all(victim not in s["isr"] for s in zk_states(cluster, topic, 3).values()),
                   FAILOVER_WAIT_S, 0.1, f"broker {victim} out of every ISR while stopped")
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    out = zk_states(cluster, topic, 3)
    assert [out[p]["leader_epoch"] for p in range(3)] == [before[p]["leader_epoch"] for p in range(3)], out
    stat = wait_until(lambda: cluster.zk.exists(path), FAILOVER_WAIT_S, 0.1, f"{path} to reappear")
    assert stat.ephemeralOwner not in (0, owner)
    t0 = time.monotonic()
    after = wait_full_isr(cluster, topic, 3)         # 30 s bound; 150 s without the refresh
    rejoined_s = time.monotonic() - t0
    assert [after[p]["leader"] for p in range(3)] == [a, ctl, a]
    assert [after[p]["leader_epoch"] for p in range(3)] == [before[p]["leader_epoch"] for p in range(3)], after
    print(f"broker {victim} back in every idle ISR {rejoined_s:.1f} s after registering again")
