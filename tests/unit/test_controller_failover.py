"""A new controller handles the brokers that died while no controller was active (embedded backend, fake channels).

The previous controller's /brokers/ids node vanishes with its /controller node, so the broker elected next never
sees it leave: its replicas must be failed by the new term itself (Kafka's onControllerFailover -> replica state
machine startup, OfflineReplica). Partition states are written as a previous controller (epoch 1) left them.
"""
import pytest

from kbroker.coord.metadata_store import TopicStore

from .test_controller_support import (  # noqa: F401 -- backend is a fixture
    LAI, UM, backend, lai_states, make_cluster, um_states, unregister,
)


def st(leader, epoch, isr, ce):
    return ('{"controller_epoch":%d,"leader":%d,"version":1,"leader_epoch":%d,"isr":[%s]}'
            % (ce, leader, epoch, ",".join(map(str, isr)))).encode()


def merged(sent, api_key, broker, states=lai_states):
    out = {}
    for b, k, body in sent:
        if k == api_key and b == broker:
            out.update(states(body))
    return out


@pytest.fixture
def store(backend):
    return TopicStore(backend)


def test_dead_follower_leaves_the_isr_of_partitions_led_by_live_brokers(backend, store):
    # Broker 1 was the controller, follower of t-0 (led by 2) and leader of t-1; it died with its session.
    store.create_topic("t", {0: [2, 1, 3], 1: [1, 2, 3]})
    store.create_topic("w", {0: [3, 2]})
    store.set_partition_state("t", 0, 2, [2, 1, 3], 4, 1)
    store.set_partition_state("t", 1, 1, [1, 2, 3], 7, 1)
    store.set_partition_state("w", 0, 3, [3, 2], 2, 1)
    c = make_cluster(backend, ids=(2, 3))
    try:
        act = c.active()
        e = act.epoch
        assert c.state("t", 0) == st(2, 4, [2, 3], e)       # follower out: same leader, same epoch
        assert c.state("t", 1) == st(2, 8, [2, 3], e)       # led by the dead broker: elected, epoch + 1 (once)
        assert c.state("w", 0) == st(3, 2, [3, 2], 1)       # no dead replica: untouched
        sent = c.channel().take()
        for b in (2, 3):
            lai = merged(sent, LAI, b)
            # The live replicas learn t-0's new ISR in its epoch at a newer znode version (Partition.refresh_state
            # takes it); w-0's unchanged state is re-sent as Kafka's failover does (the brokers ignore it: same
            # epoch, same version).
            assert {tp: (ps["leader"], ps["leader_epoch"], ps["isr"], ps["partition_epoch"])
                    for tp, ps in lai.items()} == {("t", 0): (2, 4, [2, 3], 1), ("t", 1): (2, 8, [2, 3], 1),
                                                   ("w", 0): (3, 2, [3, 2], 0)}
            um = merged(sent, UM, b, um_states)
            assert (um[("t", 0)]["isr"], um[("t", 0)]["offline_replicas"]) == ([2, 3], [1])
            assert (um[("t", 1)]["leader"], um[("t", 1)]["leader_epoch"]) == (2, 8)
        assert 1 not in {b for b, _, _ in sent}
    finally:
        c.stop()


def test_two_dead_replicas_leave_in_one_write(backend, store):
    # Brokers 1 and 2 died while no controller was active. t-0: one live ISR member left -> elected, one write.
    # u-0: both ISR members dead -> leader -1, the leader kept as the last ISR member, one write (epoch + 1).
    # v-0: live leader 3, two dead followers -> ISR [3], one write (the leader stays: same epoch).
    store.create_topic("t", {0: [1, 2, 3]})
    store.create_topic("u", {0: [2, 1, 3]})
    store.create_topic("v", {0: [3, 1, 2]})
    store.set_partition_state("t", 0, 1, [1, 2, 3], 0, 1)
    store.set_partition_state("u", 0, 1, [2, 1], 3, 1)
    store.set_partition_state("v", 0, 3, [3, 1, 2], 5, 1)
    c = make_cluster(backend, ids=(3,))
    try:
        e = c.active().epoch
        assert c.state("t", 0) == st(3, 1, [3], e)
        assert c.state("u", 0) == st(-1, 4, [1], e)
        assert c.state("v", 0) == st(3, 5, [3], e)
        assert [backend.exists("/brokers/topics/%s/partitions/0/state" % t).version for t in "tuv"] == [1, 1, 1]
    finally:
        c.stop()


def test_dead_isr_member_outside_the_assignment_is_removed(backend, store):
    # A state naming a broker that is neither registered nor assigned (left by an interrupted reassignment):
    # "every broker in the partition states that is not in /brokers/ids" is failed, not only assigned ones.
    store.create_topic("t", {0: [2, 3]})
    store.set_partition_state("t", 0, 2, [2, 3, 1], 0, 1)
    c = make_cluster(backend, ids=(2, 3))
    try:
        assert c.state("t", 0) == st(2, 0, [2, 3], c.active().epoch)
    finally:
        c.stop()


def test_live_controller_failing_two_brokers_writes_each_partition_once(backend, store):
    c = make_cluster(backend, ids=(1, 2, 3))
    try:
        store.create_topic("t", {0: [1, 2, 3]})
        c.settle()
        assert c.state("t", 0) == st(1, 0, [1, 2, 3], 1)
        assert c.active().broker_id == 1
        # Both followers go before the controller reads /brokers/ids (no yield in between): one failure event
        # names both, and the partition's ISR loses them in one write (znode version + 1, not + 2; the leader
        # stays, so does its epoch).
        unregister(backend, 2)
        unregister(backend, 3)
        c.settle()
        assert c.state("t", 0) == st(1, 0, [1], 1)
        assert backend.exists("/brokers/topics/t/partitions/0/state").version == 1
    finally:
        c.stop()
