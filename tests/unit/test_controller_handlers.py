"""Cluster handlers (kbroker/handlers/cluster.py) through the in-process dispatcher and through a network-like
context. The collaborators they use: a real MetadataCache, a real ControlPlane whose view of the controller is a
real ControllerView over an embedded tree (the registration is a stand-in with a settable epoch), a replica manager
that records what it was asked, and a controller only where a test sets one."""
import gevent
import pytest
from gevent.event import Event

from kbroker import errors
from kbroker.cluster_state import LeaderAndIsr, PartitionLeadership
from kbroker.controller.channel import VERSIONS
from kbroker.coord import EmbeddedBackend
from kbroker.coord.controller_view import ControllerView
from kbroker.coord.znodes import ControllerEpochZNode, ControllerZNode
from kbroker.handlers import cluster
from kbroker.handlers.cluster import local_dispatcher
from kbroker.server.context import ControlPlane, Services
from kbroker.server.metadata_cache import MetadataCache
from kbroker.handlers import registry as load_handlers
from kbroker.server.router import _REGISTRY
from tests.unit.ctx import make_ctx, make_services

CONTROLLER, EPOCH, BROKER_EPOCH = 1, 5, 4242


class FakeRegistrar:
    def __init__(self, epoch):
        self.epoch = epoch
        self.settled = Event()
        self.settled.set()

    def wait_epoch(self, timeout):
        self.settled.wait(timeout)
        return self.epoch


class RecordingReplicas:
    """The replica collaborator: records LeaderAndIsr / StopReplica; t-1 answers NOT_LEADER_OR_FOLLOWER."""

    def __init__(self):
        self.calls = []

    def apply_leader_and_isr(self, controller_id, controller_epoch, states, leaders):
        self.calls.append(("lai", controller_id, controller_epoch, states, leaders))
        return {("t", 1): 6}

    def stop_replicas(self, controller_epoch, parts):
        self.calls.append(("stop", controller_epoch, parts))
        return {}


class RecordingGroups:
    """The group coordinator collaborator: records the partitions StopReplica deleted (onPartitionsDeleted)."""

    def __init__(self):
        self.deleted = []

    def on_partitions_deleted(self, partitions):
        self.deleted.append(partitions)


class Node:
    """The collaborators of one broker's cluster handlers; ``services`` builds its Services with ``controller``."""

    def __init__(self, backend, control_plane_listener=None):
        self.metadata_cache = MetadataCache()
        self.controller_view = ControllerView(backend).start()
        self.registrar = FakeRegistrar(BROKER_EPOCH)
        self.control_plane = ControlPlane(self.controller_view, control_plane_listener, self.registrar)
        self.replicas = RecordingReplicas()
        self.groups = RecordingGroups()
        self.controller = None

    @property
    def calls(self):
        return self.replicas.calls

    @property
    def services(self):
        return make_services(metadata=self.metadata_cache, control_plane=self.control_plane,
                             replicas=self.replicas, controller=self.controller, groups=self.groups)


@pytest.fixture
def backend(tmp_path):
    b = EmbeddedBackend(str(tmp_path)).start()
    b.create(ControllerZNode.path(), ControllerZNode.encode(CONTROLLER))
    b.create(ControllerEpochZNode.path(), ControllerEpochZNode.encode(EPOCH))
    yield b
    b.stop()


@pytest.fixture
def node(backend):
    return Node(backend)


@pytest.fixture(autouse=True)
def short_wait(monkeypatch):
    monkeypatch.setattr(cluster, "VIEW_WAIT_S", 0.3)


def lai_body(epoch=EPOCH, cid=CONTROLLER, broker_epoch=BROKER_EPOCH):
    return {"controller_id": cid, "controller_epoch": epoch, "broker_epoch": broker_epoch,
            "topic_states": [{"topic_name": "t", "partition_states": [
                {"partition_index": p, "controller_epoch": epoch, "leader": 1, "leader_epoch": 2, "isr": [1, 2],
                 "partition_epoch": 3, "replicas": [1, 2], "is_new": p == 0} for p in (0, 1)]}],
            "live_leaders": [{"broker_id": 1, "host_name": "h", "port": 9091}]}


def um_body(epoch=EPOCH, cid=CONTROLLER, broker_epoch=BROKER_EPOCH, host="h"):
    return {"controller_id": cid, "controller_epoch": epoch, "broker_epoch": broker_epoch, "live_brokers": [
        {"id": 1, "endpoints": [{"port": 9091, "host": host, "listener": "PLAINTEXT", "security_protocol": 0}]}],
        "topic_states": [{"topic_name": "t", "partition_states": [
            {"partition_index": 0, "controller_epoch": epoch, "leader": 1, "leader_epoch": 0, "isr": [1],
             "zk_version": 0, "replicas": [1]}]}]}


def stop_body(epoch=EPOCH, cid=CONTROLLER, broker_epoch=BROKER_EPOCH):
    return {"controller_id": cid, "controller_epoch": epoch, "broker_epoch": broker_epoch, "topic_states": [
        {"topic_name": "t", "partition_states": [{"partition_index": 0, "delete_partition": True}]}]}


def over_network(node, api_key, version, body, listener="PLAINTEXT"):
    """The request as one arriving on a socket of ``listener`` (codec round trip, a connection identity)."""
    from kbroker.protocol.apis import APIS
    api = APIS[api_key]
    req = api.decode_request(version, api.encode_request(version, body).getvalue())
    return _REGISTRY[api_key].fn(make_ctx(version, api_key=api_key, listener=listener, services=node.services), req)


def test_versions_served():
    h = load_handlers()
    assert [(k, h[k].min_version, h[k].max_version) for k in (4, 5, 6, 7)] == [(4, 0, 4), (5, 0, 3), (6, 0, 6),
                                                                             (7, 0, 3)]
    assert all(h[k].serves(v) for k, v in VERSIONS.items())


def test_leader_and_isr_from_the_current_controller_is_applied(node):
    d = local_dispatcher(node.services)
    resp = d(4, 4, lai_body())
    assert resp["error_code"] == 0
    assert [(e["partition_index"], e["error_code"]) for e in resp["partition_errors"]] == [(0, 0), (1, 6)]
    _, cid, epoch, states, leaders = node.calls[0]
    assert (cid, epoch, leaders) == (1, 5, [(1, "h", 9091)])
    assert states == [PartitionLeadership("t", p, LeaderAndIsr(leader=1, leader_epoch=2, isr=(1, 2), controller_epoch=5,
                                                                zk_version=3), replicas=(1, 2), adding_replicas=(),
                                          removing_replicas=(), is_new=p == 0) for p in (0, 1)]
    assert node.metadata_cache.controller_epoch == EPOCH


@pytest.mark.parametrize("api_key,version,body,code", [
    # broker epoch: another, unknown (-1), or a version that has no such field
    (4, 4, lai_body(broker_epoch=BROKER_EPOCH - 1), 77),
    (4, 4, lai_body(broker_epoch=-1), 77),
    (4, 1, lai_body(), 77),
    (6, 6, um_body(broker_epoch=BROKER_EPOCH + 1), 77),
    (6, 4, um_body(), 77),
    (5, 3, stop_body(broker_epoch=0), 77),
    (5, 0, dict(stop_body(), delete_partitions=True, ungrouped_partitions=[{"topic_name": "t",
                                                                           "partition_index": 0}]), 77),
    # controller: an older epoch, the current epoch with another id, an epoch no controller has (yet)
    (4, 4, lai_body(epoch=EPOCH - 1), 11),
    (6, 6, um_body(cid=3), 11),
    (5, 3, stop_body(epoch=999), 11),
    (6, 6, um_body(epoch=999, cid=3, host="6.6.6.6"), 11),
])
def test_requests_not_from_the_current_controller_change_nothing(node, api_key, version, body, code):
    before = node.metadata_cache.controller_epoch
    resp = local_dispatcher(node.services)(api_key, version, body)
    assert resp["error_code"] == code
    assert all(e["error_code"] == code for e in resp.get("partition_errors", []))
    assert node.calls == []
    assert node.metadata_cache.topics() == [] and node.metadata_cache.alive_brokers() == []
    assert node.metadata_cache.controller_epoch == before  # not raised: the lock-out of issue 8
    assert local_dispatcher(node.services)(6, 6, um_body()) == {"error_code": 0}  # the real controller still works


def test_forged_higher_epoch_does_not_lock_out_the_controller(node):
    """Issue 8: a client's UpdateMetadata with a made-up epoch had been recorded as the highest, so the real
    controller's next requests got STALE_CONTROLLER_EPOCH."""
    d = local_dispatcher(node.services)
    assert d(6, 6, um_body(epoch=7777, cid=9, host="6.6.6.6")) == {"error_code": 11}
    assert d(6, 6, um_body()) == {"error_code": 0}
    assert node.metadata_cache.alive_brokers()[0].host == "h"
    assert d(4, 4, lai_body())["error_code"] == 0


def test_request_ahead_of_the_view_waits_for_it(node, backend):
    """A new controller's request can arrive before this broker's watch of /controller_epoch fired."""
    d = local_dispatcher(node.services)

    def elect():
        backend.set(ControllerZNode.path(), ControllerZNode.encode(2))
        backend.set(ControllerEpochZNode.path(), ControllerEpochZNode.encode(EPOCH + 1))
    gevent.spawn_later(0.1, elect)
    assert d(6, 6, um_body(epoch=EPOCH + 1, cid=2)) == {"error_code": 0}
    assert node.metadata_cache.controller_epoch == EPOCH + 1
    # The old controller is fenced from now on.
    assert d(6, 6, um_body()) == {"error_code": 11}
    # After a session expiry the two watches re-read in any order: the view may pair the new epoch with the old id.
    backend.set(ControllerEpochZNode.path(), ControllerEpochZNode.encode(EPOCH + 2))
    assert node.controller_view.current() == (2, EPOCH + 2)
    gevent.spawn_later(0.1, backend.set, ControllerZNode.path(), ControllerZNode.encode(3))
    assert d(6, 6, um_body(epoch=EPOCH + 2, cid=3)) == {"error_code": 0}


def test_request_during_registration_waits_for_the_new_epoch(node):
    """Between our create of /brokers/ids/<id> and the read of its czxid the controller may already use it."""
    node.registrar.settled.clear()

    def registered():
        node.registrar.epoch = BROKER_EPOCH + 10
        node.registrar.settled.set()
    gevent.spawn_later(0.1, registered)
    assert local_dispatcher(node.services)(6, 6, um_body(broker_epoch=BROKER_EPOCH + 10)) == {"error_code": 0}


def test_stop_replica_versions(node):
    d = local_dispatcher(node.services)
    d(5, 3, {"controller_id": 1, "controller_epoch": EPOCH, "broker_epoch": BROKER_EPOCH, "topic_states": [
        {"topic_name": "t", "partition_states": [
            {"partition_index": 0, "delete_partition": True}, {"partition_index": 1, "delete_partition": False}]}]})
    resp = d(5, 1, {"controller_id": 1, "controller_epoch": EPOCH, "broker_epoch": BROKER_EPOCH,
                    "delete_partitions": True, "topics": [{"name": "u", "partition_indexes": [2, 3]}]})
    assert resp == {"error_code": 0, "partition_errors": [{"topic_name": "u", "partition_index": p, "error_code": 0}
                                                          for p in (2, 3)]}
    assert [c[2] for c in node.calls] == [[("t", 0, True), ("t", 1, False)], [("u", 2, True), ("u", 3, True)]]
    assert node.groups.deleted == [[("t", 0)], [("u", 2), ("u", 3)]]        # their group offsets go too


def test_update_metadata_applies(node):
    assert local_dispatcher(node.services)(6, 6, um_body()) == {"error_code": 0}
    assert node.metadata_cache.leader("t", 0) == 1 and node.metadata_cache.controller_id == 1


def test_control_plane_listener(backend):
    node = Node(backend, control_plane_listener="CONTROL")
    for api_key, body in ((4, lai_body()), (5, stop_body()), (6, um_body())):
        resp = over_network(node, api_key, VERSIONS[api_key], body, listener="PLAINTEXT")
        assert resp["error_code"] == errors.CLUSTER_AUTHORIZATION_FAILED
    assert node.calls == [] and node.metadata_cache.topics() == []
    assert over_network(node, 7, 3, {"broker_id": 1, "broker_epoch": 1}, listener="PLAINTEXT") == {
        "error_code": 31, "remaining_partitions": []}
    assert over_network(node, 6, 6, um_body(), listener="CONTROL") == {"error_code": 0}
    assert local_dispatcher(node.services)(4, 4, lai_body())["error_code"] == 0  # the in-process path has no listener
    # Without the key, any listener is a control listener.
    plain = Node(backend)
    assert over_network(plain, 6, 6, um_body(), listener="PLAINTEXT") == {"error_code": 0}


def test_without_a_controller_controlled_shutdown_is_not_controller(node):
    assert node.services.controller is None
    assert local_dispatcher(node.services)(7, 3, {"broker_id": 1, "broker_epoch": BROKER_EPOCH}) == {
        "error_code": errors.NOT_CONTROLLER, "remaining_partitions": []}


def test_before_registration_controller_requests_are_refused(node):
    """No registration, no broker epoch: nothing a controller sends can match it (77), and nothing changes."""
    node.control_plane = ControlPlane(node.controller_view)
    d = local_dispatcher(node.services)
    assert d(6, 6, um_body()) == {"error_code": errors.STALE_BROKER_EPOCH}
    assert d(4, 4, lai_body())["error_code"] == errors.STALE_BROKER_EPOCH
    assert node.calls == [] and node.metadata_cache.topics() == [] and node.metadata_cache.controller_epoch == -1
    node.control_plane.attach_registrar(node.registrar)
    assert d(6, 6, um_body()) == {"error_code": 0}
    with pytest.raises(RuntimeError):
        node.control_plane.attach_registrar(node.registrar)


def test_a_failing_collaborator_answers_its_error_code(node):
    """A bug or a disk error in the collaborator answers the request; the connection is not failed."""
    class Broken(RecordingReplicas):
        def apply_leader_and_isr(self, *args):
            raise RuntimeError("a bug")

        def stop_replicas(self, *args):
            raise OSError("disk gone")
    node.replicas = Broken()
    d = local_dispatcher(node.services)
    resp = d(4, 4, lai_body())
    assert resp["error_code"] == errors.UNKNOWN_SERVER_ERROR
    assert [e["error_code"] for e in resp["partition_errors"]] == [errors.UNKNOWN_SERVER_ERROR] * 2
    assert d(5, 3, stop_body())["error_code"] == errors.KAFKA_STORAGE_ERROR
    # The metadata cache's deletion listeners run inside the update: a failing one is the request's answer.
    assert d(6, 6, um_body()) == {"error_code": 0}
    forgotten = []
    node.metadata_cache.deletion_listeners += [forgotten.append, lambda deleted: 1 / 0]
    body = um_body()
    body["topic_states"][0]["partition_states"][0]["leader"] = -2     # LeaderDuringDelete: t-0 is deleted
    assert d(6, 6, body) == {"error_code": errors.UNKNOWN_SERVER_ERROR}
    assert forgotten == [[("t", 0)]] and node.metadata_cache.topics() == []


def test_services_name_every_collaborator(node):
    fields = {k: getattr(node.services, k) for k in Services.__dataclass_fields__}
    for missing in fields:
        if Services.__dataclass_fields__[missing].default is None:
            continue   # the optional collaborators (authorizer, scram): None means "not configured"
        with pytest.raises(TypeError):
            Services(**{k: v for k, v in fields.items() if k != missing})
    with pytest.raises(AttributeError):
        node.services.controller = object()    # frozen: built once


def test_controlled_shutdown_handler(node):
    class Ctrl:
        def __init__(self, active):
            self.active = active
            self.calls = []

        def is_active(self):
            return self.active

        def controlled_shutdown(self, bid, epoch):
            self.calls.append((bid, epoch))
            if epoch != 77:
                raise errors.StaleBrokerEpoch("no")
            return [("t", 3)]
    node.controller = Ctrl(False)
    d = local_dispatcher(node.services)
    assert d(7, 3, {"broker_id": 2, "broker_epoch": 77})["error_code"] == 41
    node.controller = ctrl = Ctrl(True)
    d = local_dispatcher(node.services)
    assert d(7, 3, {"broker_id": 2, "broker_epoch": 77}) == {
        "error_code": 0, "remaining_partitions": [{"topic_name": "t", "partition_index": 3}]}
    assert d(7, 3, {"broker_id": 2, "broker_epoch": 78}) == {"error_code": 77, "remaining_partitions": []}
    assert d(7, 1, {"broker_id": 2}) == {"error_code": 77, "remaining_partitions": []}  # v0/v1 carry no epoch
    assert ctrl.calls == [(2, 77), (2, 78), (2, -1)]
