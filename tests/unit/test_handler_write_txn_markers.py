"""WriteTxnMarkers (27) in process: markers written per partition with Kafka's error codes, ClusterAction,
the acks=all wait, and the group coordinator told about __consumer_offsets partitions after replication."""
import time

import gevent
import pytest

from kbroker import errors
from kbroker.handlers import registry as load_handlers
from kbroker.log.config import LogConfig
from kbroker.log.log import Log
from kbroker.protocol.apis import APIS
from kbroker.record import Record, build_batch
from kbroker.record.control import marker_of
from kbroker.replica.partition import Partition
from kbroker.security.acl import CLUSTER, CLUSTER_ACTION, CLUSTER_NAME
from kbroker.server.context import ClientIdentity, RequestContext
from kbroker.server.router import _REGISTRY
from tests.unit.ctx import FakeConn, make_services

BROKER = ClientIdentity("PLAINTEXT", "PLAINTEXT", "User:broker", "10.0.0.2", 40000)


@pytest.fixture(autouse=True, scope="module")
def _handlers():
    load_handlers()


class Replicas:
    def __init__(self, tmp_path, names, isr=(1,)):
        self.parts = {}
        for topic, p in names:
            lc = LogConfig(min_insync_replicas=1)
            part = Partition(topic, p, Log(str(tmp_path / ("%s-%d" % (topic, p))), lc), lc, 1)
            part.make_leader(1, list(isr), sorted(set(isr) | {1}), 0)
            self.parts[(topic, p)] = part

    def get_partition(self, topic, p):
        return self.parts.get((topic, p))

    def leader_partition(self, topic, p):
        part = self.parts.get((topic, p))
        if part is None:
            raise errors.UnknownTopicOrPartition("%s-%d" % (topic, p))
        if not part.is_leader:
            raise errors.NotLeaderOrFollower("%s-%d" % (topic, p))
        return part


class Groups:
    def __init__(self):
        self.calls = []

    def complete_transaction(self, producer_id, partitions, commit):
        self.calls.append((producer_id, sorted(partitions), commit))


class Allow:
    def __init__(self, ok):
        self.ok = ok

    def authorize(self, identity, operation, resource_type, name, log_denied=True):
        return self.ok and (operation, resource_type, name) == (CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)


def call(version, markers, authorizer=None, timeout_ms=30000, **given):
    api = APIS[27]
    req = api.decode_request(version, api.encode_request(version, {"markers": markers}).getvalue())
    services = make_services(authorizer=authorizer, config={"request.timeout.ms": timeout_ms}, **given)
    ctx = RequestContext(BROKER, services, 27, version, 7, "broker-2", FakeConn())
    resp = _REGISTRY[27].fn(ctx, req)
    resp = api.decode_response(version, api.encode_response(version, resp).getvalue())
    return {(m["producer_id"], t["name"], p["partition_index"]): p["error_code"]
            for m in resp["markers"] for t in m["topics"] for p in t["partitions"]}


def marker(pid, epoch, commit, topics, coordinator_epoch=0):
    return {"producer_id": pid, "producer_epoch": epoch, "transaction_result": commit,
            "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics],
            "coordinator_epoch": coordinator_epoch}


def txn_data(pid, seq=0, epoch=0):
    return build_batch([Record(0, int(time.time() * 1000), b"k", b"v", ())], producer_id=pid, producer_epoch=epoch,
                       base_sequence=seq, is_transactional=True)


def test_markers_written_with_per_partition_codes(tmp_path):
    rs = Replicas(tmp_path, [("t", 0), ("t", 1), ("__consumer_offsets", 3)])
    rs.parts[("t", 0)].append(txn_data(5, epoch=2), 9, 1)
    rs.parts[("t", 1)].append(txn_data(5, epoch=2), 9, 1)
    rs.parts[("t", 1)].write_marker(5, 2, 9, True)            # a newer coordinator already ended it there
    offsets = rs.parts[("__consumer_offsets", 3)]
    offsets.append(build_batch([Record(0, int(time.time() * 1000), b"k", b"v", ())], producer_id=5,
                               producer_epoch=2, base_sequence=-1, is_transactional=True), None, -1)
    groups = Groups()
    for version in (0, 1):
        got = call(version, [marker(5, 2, False, [("t", [0, 1, 7]), ("__consumer_offsets", [3])], 4)],
                   replicas=rs, groups=groups)
        assert got == {(5, "t", 0): 0, (5, "t", 1): errors.TRANSACTION_COORDINATOR_FENCED,
                       (5, "t", 7): errors.UNKNOWN_TOPIC_OR_PARTITION, (5, "__consumer_offsets", 3): 0}
    t0 = rs.parts[("t", 0)]
    assert t0.log_end_offset == 3 and t0.last_stable_offset == 3
    m = marker_of(t0.log.read(1, 1000).region.read_bytes())
    assert (m.producer_id, m.producer_epoch, m.commit, m.coordinator_epoch) == (5, 2, False, 4)
    assert t0.aborted_transactions(0, 3) == [(5, 0)]
    assert groups.calls == [(5, [3], False), (5, [3], False)]
    # An older producer epoch than the partition's: 47.
    got = call(1, [marker(5, 1, True, [("t", [0])], 4)], replicas=rs, groups=groups)
    assert got == {(5, "t", 0): errors.INVALID_PRODUCER_EPOCH}


def test_cluster_action_required(tmp_path):
    rs = Replicas(tmp_path, [("t", 0)])
    got = call(1, [marker(5, 0, True, [("t", [0])])], authorizer=Allow(False), replicas=rs)
    assert got == {(5, "t", 0): errors.CLUSTER_AUTHORIZATION_FAILED}
    assert rs.parts[("t", 0)].log_end_offset == 0
    got = call(1, [marker(5, 0, True, [("t", [0])])], authorizer=Allow(True), replicas=rs, groups=Groups())
    assert got == {(5, "t", 0): 0} and rs.parts[("t", 0)].log_end_offset == 1


def test_waits_for_the_isr_and_completes_groups_after(tmp_path):
    rs = Replicas(tmp_path, [("__consumer_offsets", 0)], isr=(1, 2))
    part = rs.parts[("__consumer_offsets", 0)]
    groups = Groups()
    job = gevent.spawn(call, 1, [marker(7, 0, True, [("__consumer_offsets", [0])])], replicas=rs, groups=groups)
    gevent.sleep(0.05)
    assert not job.ready() and groups.calls == [] and part.log_end_offset == 1
    part.update_follower(2, 1)                                 # the follower has the marker: HW 1
    assert job.get(timeout=5) == {(7, "__consumer_offsets", 0): 0}
    assert groups.calls == [(7, [0], True)]


def test_timeout_answers_7_and_tells_no_group(tmp_path):
    rs = Replicas(tmp_path, [("__consumer_offsets", 0)], isr=(1, 2))
    groups = Groups()
    got = call(1, [marker(7, 0, True, [("__consumer_offsets", [0])])], replicas=rs, groups=groups, timeout_ms=50)
    assert got == {(7, "__consumer_offsets", 0): errors.REQUEST_TIMED_OUT} and groups.calls == []


def test_not_leader(tmp_path):
    rs = Replicas(tmp_path, [("t", 0)])
    rs.parts[("t", 0)].make_follower(2, 1, [1, 2], [1, 2], 1)
    got = call(0, [marker(7, 0, True, [("t", [0])])], replicas=rs, groups=Groups())
    assert got == {(7, "t", 0): errors.NOT_LEADER_OR_FOLLOWER}
