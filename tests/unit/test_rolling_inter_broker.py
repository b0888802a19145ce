"""What a rolling change of the inter-broker protocol (Kafka's section 7.5) needs from replication, pinned.

Found by tests/integration/test_security_cluster.py's rolling upgrade; each test fails on the code before the fix:

* A follower reaches its leader on its *own* inter-broker listener (the metadata cache, ``connect``), not on the
  endpoint the controller put in LeaderAndIsr's live_leaders (the controller's listener: PLAINTEXT while it is not
  bounced yet). live_leaders only when the cache does not know the leader.
* The controller sends a restarted broker an UpdateMetadata naming every live broker *before* its LeaderAndIsr,
  so the cache knows the leaders' endpoints when the follower looks them up (Kafka's onBrokerStartup).
* A batch appended (as leader or as follower) is in the producer state before the ``flush.messages`` fsync
  yields: a retry of it handled meanwhile is a duplicate, not a second copy.
"""
import pytest

from kbroker.cluster_state import LeaderAndIsr, PartitionLeadership
from kbroker.log.config import LogConfig
from kbroker.log.log import Log
from kbroker.log.manager import LogManager
from kbroker.replica import manager as manager_mod
from kbroker.replica.manager import ReplicaManager
from kbroker.replica.partition import Partition

from .test_controller_support import LAI, UM, backend, make_cluster, register, unregister  # noqa: F401 - fixture
from .test_replica import batch


# ------------------------------------------------------------------------------------------ the leader's address

@pytest.fixture
def no_network(monkeypatch):
    """Fetchers are built but never started (no connection attempts)."""
    monkeypatch.setattr(manager_mod.ReplicaFetcher, "start", lambda self: self)


def follower_rm(tmp_path, cache):
    lm = LogManager([str(tmp_path / "d0")], LogConfig(), broker_id=0)
    return ReplicaManager(0, lm, lambda topic: LogConfig(), isr_writer=None, connect=cache.get)


def follow(rm, leader=1, epoch=3):
    st = PartitionLeadership("t", 0, LeaderAndIsr(leader, epoch, (leader, 0), 1, 0), (leader, 0))
    return rm.apply_leader_and_isr(2, 1, [st], [(leader, "127.0.0.1", 9092)])   # the controller's PLAINTEXT port


def test_follower_uses_its_own_inter_broker_listener_not_live_leaders(tmp_path, no_network):
    rm = follower_rm(tmp_path, {1: ("127.0.0.1", 9093)})     # broker 1's SASL_SSL endpoint in this broker's cache
    assert follow(rm) == {("t", 0): 0}
    f = rm.fetcher_for(1)
    assert (f.host, f.port) == ("127.0.0.1", 9093)


def test_live_leaders_when_the_cache_does_not_know_the_leader(tmp_path, no_network):
    rm = follower_rm(tmp_path, {})
    assert follow(rm) == {("t", 0): 0}
    f = rm.fetcher_for(1)
    assert (f.host, f.port) == ("127.0.0.1", 9092)


# ------------------------------------------------------------------------------------------ the controller's order

@pytest.fixture
def cluster(backend):  # noqa: F811 - the fixture
    c = make_cluster(backend)
    yield c
    c.stop()


def test_restarted_broker_hears_every_endpoint_before_its_leader_and_isr(cluster, backend):  # noqa: F811
    cluster.store.create_topic("t", {0: [1, 2, 3], 1: [2, 3, 1]})
    cluster.settle()
    ch = cluster.channel()
    unregister(backend, 3)
    cluster.settle()
    ch.take()
    register(backend, 3)
    cluster.settle()
    to3 = [(k, body) for b, k, body in ch.take() if b == 3]
    kinds = [k for k, _ in to3]
    assert LAI in kinds and kinds[0] == UM, kinds
    assert [b["id"] for b in to3[0][1]["live_brokers"]] == [1, 2, 3]


# ------------------------------------------------------------------------------------------ producer state vs. flush

def test_follower_records_producer_state_before_the_flush_yields(tmp_path):
    lc = LogConfig()
    leader = Partition("t", 0, Log(str(tmp_path / "leader" / "t-0"), lc), lc, 1)
    leader.make_leader(0, [1], [1], 0)
    leader.append(batch(2, pid=7, seq=0), 3, 1)
    data = leader.log.read(0, 1 << 20).region.read_bytes()
    seen = []
    flc = LogConfig(flush_interval_messages=1)
    f = Partition("t", 0, Log(str(tmp_path / "follower" / "t-0"), flc), flc, 2,
                  flusher=lambda lg: seen.append((f.producers.last_sequence(7), f.epoch_cache.latest_epoch)))
    f.make_follower(1, 0, [1, 2], [1, 2], 0)
    assert f.append_as_follower(data) == len(data)
    assert seen == [(1, 0)]
    # Made leader (as if during that fsync), the producer's retry of the batch is answered as a duplicate.
    f.make_leader(1, [2], [1, 2], 0)
    res = f.append(batch(2, pid=7, seq=0), 3, 1)
    assert res.duplicate and (res.base_offset, res.last_offset) == (0, 1)
    assert f.log_end_offset == 2


def test_leader_records_producer_state_before_the_flush_yields(tmp_path):
    lc = LogConfig(flush_interval_messages=1)
    seen = []
    part = Partition("t", 0, Log(str(tmp_path / "t-0"), lc), lc, 1,
                     flusher=lambda lg: seen.append(part.producers.last_sequence(7)))
    part.make_leader(0, [1], [1], 0)
    part.append(batch(3, pid=7, seq=0), 3, 1)
    assert seen == [2]
