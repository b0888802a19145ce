"""Replication between in-process ReplicaManagers over loopback sockets (real KafkaServer + handlers, no broker
processes): KIP-101's divergent-log scenario, acks=all over a follower, follower catch-up and ISR rejoin,
StopReplica(delete), and truncation to the leader's log start."""
import os

import gevent
import pytest

from kbroker.handlers import registry
from kbroker import errors
from kbroker.cluster_state import LeaderAndIsr, PartitionLeadership
from kbroker.config import BrokerConfig
from kbroker.log.config import LogConfig
from kbroker.log.manager import LogManager
from kbroker.record import Record, build_batch, iter_records
from kbroker.replica.delayed_produce import append_and_wait
from kbroker.replica.manager import ReplicaManager
from kbroker.server.router import Router
from kbroker.server.server import KafkaServer
from kbroker.server.fetch_sessions import FetchSessionCache
from tests.unit.ctx import make_services

CONFIG = {"replica.fetch.wait.max.ms": 100, "replica.fetch.backoff.ms": 30, "replica.lag.time.max.ms": 10000,
          "replica.socket.timeout.ms": 5000}


def batch(value):
    return build_batch([Record(0, 1000, None, value, ())])


class IsrStore:
    """Stands in for the partition state znode: conditional writes on a version."""

    def __init__(self):
        self.versions = {}
        self.isr = {}

    def write(self, topic, p, leader, epoch, isr, version):
        if self.versions.get((topic, p), 0) != version:
            return None
        self.versions[(topic, p)] = version + 1
        self.isr[(topic, p)] = list(isr)
        return version + 1


class Node:
    """One broker: LogManager + ReplicaManager + KafkaServer on 127.0.0.1."""

    def __init__(self, cluster, broker_id, tmp_path):
        self.id = broker_id
        self.dir = str(tmp_path / ("b%d" % broker_id))
        self.lm = LogManager([self.dir], LogConfig(), broker_id=broker_id)
        self.rm = ReplicaManager(broker_id, self.lm, lambda t: LogConfig(min_insync_replicas=cluster.min_isr),
                                 cluster.store.write, cluster.address, config=CONFIG)
        # The handlers (Fetch, OffsetForLeaderEpoch, Produce) get the replica manager and the broker defaults.
        # Followers fetch through incremental sessions (KIP-227), as between real brokers.
        self.sessions = FetchSessionCache(1000)
        services = make_services(broker_id=broker_id, replicas=self.rm, config=BrokerConfig.from_dict({}),
                                 fetch_sessions=self.sessions)
        self.server = KafkaServer(services, Router(registry()), [("PLAINTEXT", "127.0.0.1", 0)], 100 << 20)
        self.server.start()
        self.port = self.server.bound_ports()["PLAINTEXT"]

    def stop(self):
        self.rm.shutdown()
        self.server.stop(grace_seconds=1, wake=lambda: None)
        self.lm.shutdown()


class Cluster:
    def __init__(self, tmp_path, n, min_isr=1):
        self.store = IsrStore()
        self.min_isr = min_isr
        self.nodes = {}
        for i in range(1, n + 1):
            self.nodes[i] = Node(self, i, tmp_path)

    def address(self, broker_id):
        node = self.nodes.get(broker_id)
        return None if node is None else ("127.0.0.1", node.port)

    def lair(self, ids, leader, epoch, isr, replicas, topic="t", p=0):
        self.store.versions[(topic, p)] = epoch * 100      # each controller write changes the znode version
        state = PartitionLeadership(topic, p, LeaderAndIsr(leader, epoch, isr, 1, epoch * 100), replicas)
        return {i: self.nodes[i].rm.apply_leader_and_isr(0, 1, [state], []) for i in ids}

    def stop(self):
        for n in self.nodes.values():
            n.stop()


@pytest.fixture
def cluster3(tmp_path):
    c = Cluster(tmp_path, 3)
    yield c
    c.stop()


def wait_for(pred, timeout=5.0):
    with gevent.Timeout(timeout):
        while not pred():
            gevent.sleep(0.005)


def log_bytes(part):
    lg = part.log
    return b"".join(open(os.path.join(lg.dir, f), "rb").read()
                    for f in sorted(os.listdir(lg.dir)) if f.endswith(".log"))


def values(part):
    return [bytes(v) for _o, _t, _k, v, _h in iter_records(log_bytes(part))]


def test_kip101_divergent_logs_reconciled_by_epoch(cluster3):
    a, b = cluster3.nodes[1], cluster3.nodes[2]
    # epoch 1: A leads, B follows; m1 replicates.
    assert cluster3.lair([1, 2], 1, 1, [1, 2], [1, 2]) == {1: {("t", 0): 0}, 2: {("t", 0): 0}}
    pa, pb = a.rm.get_partition("t", 0), b.rm.get_partition("t", 0)
    pa.append(batch(b"m1"), None, -1)
    wait_for(lambda: pa.high_watermark == 1 and pb.high_watermark == 1)
    # B stops fetching before m2 replicates; A writes m2 (acks=1) and "dies".
    assert b.rm.stop_replicas(1, [("t", 0, False)]) == {("t", 0): 0}
    pa.append(batch(b"m2"), None, 1)
    assert pa.log_end_offset == 2 and pb.log_end_offset == 1
    # epoch 2: B leads alone and writes m3 at offset 1.
    cluster3.lair([2], 2, 2, [2], [1, 2])
    pb.append(batch(b"m3"), None, -1)
    assert pb.epoch_cache.entries() == [(1, 0), (2, 1)]
    # A returns as follower: OffsetsForLeaderEpoch(1) -> (1, 1): m2 is cut, m3 fetched.
    cluster3.lair([1], 2, 2, [2], [1, 2])
    wait_for(lambda: pa.log_end_offset == 2 and values(pa) == [b"m1", b"m3"])
    assert log_bytes(pa) == log_bytes(pb)
    assert pa.epoch_cache.entries() == [(1, 0), (2, 1)]
    assert open(os.path.join(pa.log.dir, "leader-epoch-checkpoint"), "rb").read() == b"0\n2\n1 0\n2 1\n"
    # A catches up to the HW and rejoins the ISR through the conditional write.
    wait_for(lambda: pb.isr == [2, 1])
    assert cluster3.store.isr[("t", 0)] == [2, 1] and pb.zk_version == 201
    wait_for(lambda: pa.high_watermark == 2)


def test_acks_all_waits_for_every_isr_member(cluster3):
    cluster3.lair([1, 2, 3], 1, 1, [1, 2, 3], [1, 2, 3])
    nodes = cluster3.nodes
    leader = nodes[1].rm.get_partition("t", 0)
    for i in range(20):
        r, code = append_and_wait(leader, batch(b"x%d" % i), None, 5000)
        assert code == 0
        for j in (2, 3):
            assert nodes[j].rm.get_partition("t", 0).log_end_offset >= r.last_offset + 1
    assert leader.high_watermark == 20
    wait_for(lambda: all(nodes[j].rm.get_partition("t", 0).high_watermark == 20 for j in (2, 3)))
    assert log_bytes(leader) == log_bytes(nodes[2].rm.get_partition("t", 0)) == \
        log_bytes(nodes[3].rm.get_partition("t", 0))
    # the leader's fetch state for its followers
    assert sorted(leader.followers) == [2, 3] and all(st.leo == 20 for st in leader.followers.values())


def test_stale_leader_and_isr_and_unknown_replica(cluster3):
    assert cluster3.lair([1], 1, 3, [1], [1, 2]) == {1: {("t", 0): 0}}
    assert cluster3.lair([1], 1, 3, [1], [1, 2]) == {1: {("t", 0): errors.STALE_CONTROLLER_EPOCH}}
    assert cluster3.lair([1], 1, 2, [1], [1, 2]) == {1: {("t", 0): 11}}
    assert cluster3.lair([3], 1, 4, [1], [1, 2]) == {3: {("t", 0): errors.UNKNOWN_TOPIC_OR_PARTITION}}
    with pytest.raises(errors.UnknownTopicOrPartition):
        cluster3.nodes[3].rm.leader_partition("t", 0)
    cluster3.lair([2], 1, 3, [1], [1, 2])
    with pytest.raises(errors.NotLeaderOrFollower):
        cluster3.nodes[2].rm.leader_partition("t", 0)


def test_follower_starts_at_leader_log_start(cluster3):
    a, b = cluster3.nodes[1], cluster3.nodes[2]
    cluster3.lair([1], 1, 1, [1], [1, 2])
    pa = a.rm.get_partition("t", 0)
    for i in range(3):
        pa.append(batch(b"old%d" % i), None, 1)
    pa.log.roll()
    pa.append(batch(b"new"), None, 1)
    pa.log.delete_old_segments(None, 1, 2 ** 62)    # retention drops the first segment: log start 3
    assert pa.log_start_offset == 3
    cluster3.lair([1, 2], 1, 2, [1], [1, 2])
    pb = b.rm.get_partition("t", 0)
    wait_for(lambda: pb.log_end_offset == 4)
    assert pb.log_start_offset == 3 and values(pb) == [b"new"]


def test_stop_replica_delete_removes_log(cluster3):
    calls = []
    cluster3.nodes[2].rm.leadership_listeners.append(lambda tp, was, now: calls.append((tp, was, now)))
    cluster3.lair([1, 2], 1, 1, [1, 2], [1, 2])
    cluster3.lair([2], 2, 2, [2], [1, 2])
    cluster3.lair([2], 1, 3, [1, 2], [1, 2])
    assert calls == [(("t", 0), False, False), (("t", 0), False, True), (("t", 0), True, False)]
    b = cluster3.nodes[2]
    d = b.rm.get_partition("t", 0).log.dir
    assert os.path.isdir(d) and b.rm.fetcher_for(1) is not None
    assert b.rm.stop_replicas(1, [("t", 0, True), ("gone", 5, True)]) == {("t", 0): 0, ("gone", 5): 0}
    assert not os.path.exists(d) and b.rm.get_partition("t", 0) is None and b.rm.fetcher_for(1) is None


def test_hw_checkpoint_written_and_read(tmp_path):
    c = Cluster(tmp_path, 1)
    try:
        c.lair([1], 1, 1, [1], [1])
        c.nodes[1].rm.get_partition("t", 0).append(batch(b"a"), None, 1)
    finally:
        c.stop()
    path = os.path.join(str(tmp_path / "b1"), "replication-offset-checkpoint")
    assert open(path, "rb").read() == b"0\n1\nt 0 1\n"


def test_follower_fenced_until_epochs_agree(cluster3):
    a, b = cluster3.nodes[1], cluster3.nodes[2]
    cluster3.lair([1], 1, 3, [1], [1, 2])
    pa = a.rm.get_partition("t", 0)
    pa.append(batch(b"m1"), None, 1)
    cluster3.lair([2], 1, 2, [1, 2], [1, 2])         # B still believes in epoch 2: FENCED_LEADER_EPOCH (74)
    pb = b.rm.get_partition("t", 0)
    gevent.sleep(0.2)
    assert pb.log_end_offset == 0 and pa.followers[2].leo == -1     # fenced fetches report nothing
    cluster3.lair([2], 1, 4, [1, 2], [1, 2])         # B ahead of A now: UNKNOWN_LEADER_EPOCH (75), retried
    gevent.sleep(0.2)
    assert pb.log_end_offset == 0 and pa.followers[2].leo == -1
    cluster3.lair([1], 1, 4, [1, 2], [1, 2])
    wait_for(lambda: pb.log_end_offset == 1 and pb.high_watermark == 1)
    assert log_bytes(pa) == log_bytes(pb)
