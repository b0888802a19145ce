"""Cluster mode under broker failures: 3 broker processes on a real 3-node ZooKeeper ensemble (chroot /kb).

One ensemble and one cluster for the module; every test starts from all three brokers running and agreeing on a
controller (`healthy` restarts whatever the previous test left stopped). Covers issue 4: kill -9 of the controller
(a new one within the session timeout + margin, /controller_epoch + 1); kill -9 of an RF 1 leader (its partitions
go offline, leader -1, and come back with their data on restart); controlled shutdown (SIGTERM) moves RF 3
leadership away before the process exits; a SIGSTOPped-then-resumed controller never overwrites the new
controller's decisions and resigns; a broker whose session expired re-registers.

`replica.lag.time.max.ms` is set high so the ISR of RF 3 partitions stays the full replica list while brokers are
stopped and resumed (controlled shutdown moves leadership within the ISR). The last test checks that
``__consumer_offsets`` is replicated (RF 3) and that a committed offset survives kill -9 of its coordinator.
"""
from __future__ import annotations

import os
import signal
import time

import pytest

from tests.integration.harness import wait_until
from tests.integration.test_cluster_common import (
    FAILOVER_WAIT_S, Cluster, consume, create_topics, leaders, metadata, produce, records_for)

pytestmark = [pytest.mark.zk, pytest.mark.timeout(240)]

OVERRIDES = {"replica.lag.time.max.ms": 600000}


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


def others(cluster, broker_id):
    return [b for b in cluster.brokers if b.broker_id != broker_id]


def non_controller(cluster):
    ctl = cluster.controller_id()
    return next(b for b in cluster.brokers if b.broker_id != ctl)


def all_states(cluster):
    """[(topic, p, state json, stat)] for every partition state znode."""
    out = []
    for topic in cluster.zk.get_children("/brokers/topics"):
        for p in cluster.zk.get_children(f"/brokers/topics/{topic}/partitions"):
            state, stat = cluster.state(topic, int(p))
            out.append((topic, int(p), state, stat))
    return out


def wait_epoch_change(cluster, epoch):
    return wait_until(lambda: (e := cluster.controller_epoch()) != epoch and e, 10, 0.05,
                      f"/controller_epoch to leave {epoch}")


def log_since_last_start(broker):
    text = broker.log_text()
    return text[text.rfind("=== harness:"):]


# ----------------------------------------------------------------------------------------------- controller

def test_kill9_controller_elects_another_with_epoch_plus_one(healthy):
    cluster = healthy
    old = cluster.controller_id()
    epoch = cluster.controller_epoch()
    cluster.broker(old).kill9()
    t0 = time.monotonic()
    new = wait_until(lambda: (c := cluster.controller_id()) not in (None, old) and [c], FAILOVER_WAIT_S, 0.05,
                     "a new controller")[0]
    elapsed = time.monotonic() - t0
    assert new in {b.broker_id for b in others(cluster, old)}
    assert elapsed < FAILOVER_WAIT_S
    # Kafka's order: win /controller, then bump /controller_epoch; the bump follows within a moment.
    assert wait_epoch_change(cluster, epoch) == epoch + 1
    # The new controller serves: survivors name it, and a topic created now gets leaders on both survivors.
    survivors = others(cluster, old)
    wait_until(lambda: all(metadata(b, [])["controller"] == new for b in survivors), 10, 0.1,
               "survivors to name the new controller")
    create_topics(",".join(b.bootstrap for b in survivors), [("after-ctl-kill", 4, 1)])
    lead = cluster.wait_topic_everywhere("after-ctl-kill", 4, brokers=survivors)
    assert set(lead.values()) <= {b.broker_id for b in survivors}


def test_kill9_rf1_leader_goes_offline_and_returns_with_data(healthy):
    cluster = healthy
    create_topics(cluster.bootstrap, [("rf1", 6, 1)])
    lead = cluster.wait_topic_everywhere("rf1", 6)
    records = records_for("rf1", range(6), per_partition=10)
    produce(cluster.bootstrap, "rf1", records)

    victim = non_controller(cluster)
    mine = sorted(p for p, leader in lead.items() if leader == victim.broker_id)
    assert len(mine) == 2
    victim.kill9()
    survivors = others(cluster, victim.broker_id)

    def offline_everywhere():
        for b in survivors:
            now = leaders(metadata(b, ["rf1"]), "rf1")
            if any(now[p] != -1 for p in mine):
                return False
            # The other partitions keep their leaders.
            assert all(now[p] == lead[p] for p in now if p not in mine), now
        return True

    wait_until(offline_everywhere, FAILOVER_WAIT_S, 0.1, f"rf1 partitions {mine} offline on the survivors")
    for p in mine:
        state, _ = cluster.state("rf1", p)
        assert state["leader"] == -1

    victim.start(timeout=60)
    back = cluster.wait_topic_everywhere("rf1", 6, timeout=FAILOVER_WAIT_S)
    assert back == lead
    assert consume(cluster.bootstrap, "rf1", list(range(6)), expected=60) == records


def test_controlled_shutdown_moves_rf3_leadership_before_exit(healthy):
    cluster = healthy
    create_topics(cluster.bootstrap, [("rf3", 3, 3)])
    lead = cluster.wait_topic_everywhere("rf3", 3)
    md = metadata(cluster.brokers[0], ["rf3"])["topics"]["rf3"]["partitions"]
    assert all(sorted(s["isr"]) == [0, 1, 2] for s in md.values()), md

    victim = non_controller(cluster)
    assert victim.broker_id in lead.values()
    t0 = time.monotonic()
    code = victim.stop(timeout=60)   # SIGTERM: controlled.shutdown.enable defaults to true
    took = time.monotonic() - t0
    assert code == 0
    # Right after exit, another broker already names other leaders: the move happened before the exit.
    after = leaders(metadata(others(cluster, victim.broker_id)[0], ["rf3"]), "rf3")
    assert sorted(after) == [0, 1, 2]
    assert victim.broker_id not in after.values() and -1 not in after.values(), after
    for p, leader in after.items():
        state, _ = cluster.state("rf3", p)
        assert state["leader"] == leader
    assert "controlled shutdown complete" in log_since_last_start(victim)
    assert took < 30, f"controlled shutdown took {took:.1f}s"


# ------------------------------------------------------------------------------------------ stale controller

def test_resumed_old_controller_does_not_overwrite_new_decisions(healthy):
    cluster = healthy
    old_id = cluster.controller_id()
    old = cluster.broker(old_id)
    epoch = cluster.controller_epoch()
    before = {(t, p): (st["leader"], st["leader_epoch"]) for t, p, st, _ in all_states(cluster)}
    os.kill(old.pid, signal.SIGSTOP)
    stopped_ms = time.time() * 1000
    try:
        new = wait_until(lambda: (c := cluster.controller_id()) not in (None, old_id) and [c], FAILOVER_WAIT_S,
                         0.05, "a new controller while the old one is stopped")[0]
        assert wait_epoch_change(cluster, epoch) == epoch + 1
        survivors = others(cluster, old_id)
        wait_until(lambda: all(metadata(b, [])["controller"] == new for b in survivors), 10, 0.1,
                   "survivors to name the new controller")
        create_topics(",".join(b.bootstrap for b in survivors), [("while-stopped", 4, 1)])
        cluster.wait_topic_everywhere("while-stopped", 4, brokers=survivors)
    finally:
        resumed_ms = time.time() * 1000
        os.kill(old.pid, signal.SIGCONT)

    # The old controller finds its session expired, resigns and re-registers as an ordinary broker.
    wait_until(lambda: str(old_id) in cluster.zk.get_children("/brokers/ids"), FAILOVER_WAIT_S, 0.1,
               f"broker {old_id} to re-register")
    cluster.wait_converged(FAILOVER_WAIT_S)
    assert cluster.controller_id() == new
    assert cluster.controller_epoch() == epoch + 1
    create_topics(cluster.bootstrap, [("after-resume", 3, 1)])
    lead = cluster.wait_topic_everywhere("after-resume", 3)
    assert sorted(lead.values()) == [0, 1, 2]
    assert "resigns as controller" in log_since_last_start(old)

    # Every leadership decision written since the stop carries the new epoch; none carries a newer one. A leader's
    # own ISR update (as in Kafka) keeps the controller epoch of its last LeaderAndIsr and never changes the
    # leader or leader epoch, so a write with the old epoch is allowed only if leader and leader epoch are exactly
    # what they were before the stop -- the old controller's writes always bump the leader epoch.
    states = all_states(cluster)
    assert states
    for topic, p, state, stat in states:
        assert state["controller_epoch"] <= epoch + 1, (topic, p, state)
        if stat.mtime >= stopped_ms and state["controller_epoch"] != epoch + 1:
            assert state["controller_epoch"] == epoch and before.get((topic, p)) == (
                state["leader"], state["leader_epoch"]), (topic, p, state, before.get((topic, p)),
                                                         stat.mtime - stopped_ms, resumed_ms - stopped_ms)
    # The resumed broker answers with the new controller's view.
    assert metadata(old, [])["controller"] == new
    assert leaders(metadata(old, ["while-stopped"]), "while-stopped") == \
        leaders(metadata(cluster.broker(new), ["while-stopped"]), "while-stopped")


def test_broker_session_expiry_reregisters(healthy):
    cluster = healthy
    create_topics(cluster.bootstrap, [("expiry", 3, 1)])
    lead = cluster.wait_topic_everywhere("expiry", 3)
    victim = non_controller(cluster)
    path = f"/brokers/ids/{victim.broker_id}"
    owner = cluster.zk.exists(path).ephemeralOwner
    os.kill(victim.pid, signal.SIGSTOP)
    try:
        wait_until(lambda: cluster.zk.exists(path) is None, FAILOVER_WAIT_S, 0.1,
                   f"{path} to vanish with the expired session")
    finally:
        os.kill(victim.pid, signal.SIGCONT)
    stat = wait_until(lambda: cluster.zk.exists(path), FAILOVER_WAIT_S, 0.1, f"{path} to reappear")
    assert stat.ephemeralOwner not in (0, owner)
    cluster.wait_converged(FAILOVER_WAIT_S)
    # Its partitions are led by it again (RF 1: it is the only replica).
    assert cluster.wait_topic_everywhere("expiry", 3, timeout=FAILOVER_WAIT_S) == lead
    records = records_for("expiry", range(3), per_partition=3)
    produce(cluster.bootstrap, "expiry", records)
    assert consume(cluster.bootstrap, "expiry", [0, 1, 2], expected=9) == records


# ------------------------------------------------------------------------------------ replicated group offsets

def test_consumer_offsets_are_replicated_and_survive_the_coordinator(healthy):
    # Issue 5: __consumer_offsets is replicated like any topic (offsets.topic.replication.factor=3, capped by the
    # live brokers) and commits wait for the ISR, so a committed offset survives kill -9 of the coordinator.
    from confluent_kafka import Consumer, TopicPartition

    from kbroker.coordinator.group import partition_for

    cluster = healthy
    create_topics(cluster.bootstrap, [("offs", 1, 3)])
    cluster.wait_topic_everywhere("offs", 1)
    group = "g-replicated"
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition("offs", 0, 7)], asynchronous=False)
    finally:
        c.close()
    p = partition_for(group, 50)

    def replicated():
        parts = metadata(cluster.brokers[0], ["__consumer_offsets"])["topics"]["__consumer_offsets"]["partitions"]
        st = parts.get(p)
        return parts if (len(parts) == 50 and st and len(st["replicas"]) == 3 and len(st["isr"]) == 3) else None
    parts = wait_until(replicated, FAILOVER_WAIT_S, 0.2, "__consumer_offsets to have 50 partitions, RF 3, full ISR")
    coordinator = parts[p]["leader"]
    cluster.broker(coordinator).kill9()

    def new_leader():
        live = others(cluster, coordinator)[0]
        st = metadata(live, ["__consumer_offsets"])["topics"]["__consumer_offsets"]["partitions"].get(p)
        # A dict, not the leader id: broker 0 is a valid leader and would read as false.
        return st if st and st["leader"] not in (-1, coordinator) else None
    wait_until(new_leader, FAILOVER_WAIT_S + 10, 0.2, "a new leader for the group's offsets partition")
    c2 = Consumer({"bootstrap.servers": ",".join(b.bootstrap for b in others(cluster, coordinator)),
                   "group.id": group, "enable.auto.commit": False})
    try:
        committed = wait_until(lambda: c2.committed([TopicPartition("offs", 0)], timeout=5), 30, 0.5,
                               "the committed offset from the new coordinator", ignore=(Exception,))
        assert [(tp.topic, tp.partition, tp.offset) for tp in committed] == [("offs", 0, 7)]
    finally:
        c2.close()
