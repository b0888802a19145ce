"""ElectLeaders (KIP-460) in the controller: ``Controller.elect_leaders`` over the embedded backend, three
controllers (broker ids 1..3) on one tree, fake channels (tests/unit/test_controller_support.py)."""
import gevent
import pytest

from kbroker import errors

from .test_controller_support import backend, make_cluster, register, unregister  # noqa: F401 -- fixture
from .test_controller import st

PREFERRED, UNCLEAN = 0, 1


@pytest.fixture
def cluster(backend):
    c = make_cluster(backend)
    yield c
    c.stop()


def elect(cluster, election_type, tps):
    got = gevent.spawn(cluster.active().elect_leaders, election_type, tps)
    cluster.settle()
    return {tp: (code, leader) for tp, (code, _msg, leader) in got.get(timeout=5).items()}


def _leader_moved_away(cluster, backend):
    """t-0 (replicas [1, 2]) led by 2 with ISR [2, 1] after broker 1 bounced."""
    cluster.store.create_topic("t", {0: [1, 2], 1: [3, 2]})
    cluster.settle()
    unregister(backend, 1)
    cluster.settle()
    register(backend, 1)
    cluster.settle()
    _, stat = backend.get("/brokers/topics/t/partitions/0/state")
    cluster.store.set_partition_state("t", 0, 2, [2, 1], 1, 1, expected_version=stat.version)


def test_preferred(cluster, backend):
    _leader_moved_away(cluster, backend)
    assert elect(cluster, PREFERRED, [("t", 0), ("t", 1), ("t", 5), ("nope", 0)]) == {
        ("t", 0): (0, 1), ("t", 1): (errors.ELECTION_NOT_NEEDED, -1),
        ("t", 5): (errors.UNKNOWN_TOPIC_OR_PARTITION, -1), ("nope", 0): (errors.UNKNOWN_TOPIC_OR_PARTITION, -1)}
    assert cluster.state("t", 0) == st(1, 2, [2, 1])
    # the preferred replica back but not in the ISR yet: PREFERRED_LEADER_NOT_AVAILABLE (80), nothing written
    unregister(backend, 1)
    cluster.settle()
    register(backend, 1)
    cluster.settle()
    assert cluster.state("t", 0) == st(2, 3, [2])
    assert elect(cluster, PREFERRED, [("t", 0)]) == {("t", 0): (errors.PREFERRED_LEADER_NOT_AVAILABLE, -1)}
    assert cluster.state("t", 0) == st(2, 3, [2])
    # None: every partition
    assert set(elect(cluster, PREFERRED, None)) == {("t", 0), ("t", 1)}


def test_unclean(cluster, backend):
    cluster.store.create_topic("u", {0: [3, 2]})
    cluster.settle()
    _, stat = backend.get("/brokers/topics/u/partitions/0/state")
    cluster.store.set_partition_state("u", 0, 3, [3], 1, 1, expected_version=stat.version)   # 2 fell behind
    assert elect(cluster, UNCLEAN, [("u", 0)]) == {("u", 0): (errors.ELECTION_NOT_NEEDED, -1)}   # 3 is live
    unregister(backend, 3)
    cluster.settle()
    assert cluster.state("u", 0) == st(-1, 2, [3])        # unclean.leader.election.enable=false: offline
    unclean_before = cluster.active().stats.unclean_elections
    assert elect(cluster, UNCLEAN, [("u", 0)]) == {("u", 0): (0, 2)}
    assert cluster.state("u", 0) == st(2, 3, [2])
    assert cluster.active().stats.unclean_elections == unclean_before + 1
    unregister(backend, 2)
    cluster.settle()
    assert elect(cluster, UNCLEAN, [("u", 0)]) == {("u", 0): (errors.ELIGIBLE_LEADERS_NOT_AVAILABLE, -1)}


def test_not_controller(cluster):
    passive = [c for c in cluster.ctrls.values() if not c.active][0]
    with pytest.raises(errors.NotController):
        passive.elect_leaders(PREFERRED, [("t", 0)])
