"""Cluster handlers (kbroker/handlers/cluster.py) through the in-process dispatcher and through a network-like
context, with a fake broker whose view of the controller is a real ControllerView over an embedded tree."""
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
from kbroker.server.metadata_cache import MetadataCache
from kbroker.server.router import _REGISTRY, load_handlers

CONTROLLER, EPOCH, BROKER_EPOCH = 1, 5, 4242


class FakeRegistrar:
    def __init__(self, epoch):
        self.epoch = epoch
        self.settled = Event()
        self.settled.set()

    def wait_epoch(self, timeout):
        self.settled.wait(timeout)
        return self.epoch


class FakeBroker:
    def __init__(self, backend, control_plane_listener=None):
        self.metadata_cache = MetadataCache()
        self.controller_view = ControllerView(backend).start()
        self.registrar = FakeRegistrar(BROKER_EPOCH)
        self.control_plane_listener = control_plane_listener
        self.calls = []
        self.controller = None

    def apply_leader_and_isr(self, controller_id, controller_epoch, states, leaders):
        self.calls.append(("lai", controller_id, controller_epoch, states, leaders))
        return {("t", 1): 6}

    def stop_replicas(self, controller_epoch, parts):
        self.calls.append(("stop", controller_epoch, parts))
        return {}


@pytest.fixture
def backend(tmp_path):
    b = EmbeddedBackend(str(tmp_path)).start()
    b.create(ControllerZNode.path(), ControllerZNode.encode(CONTROLLER))
    b.create(ControllerEpochZNode.path(), ControllerEpochZNode.encode(EPOCH))
    yield b
    b.stop()


@pytest.fixture
def broker(backend):
    return FakeBroker(backend)


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


class NetContext:
    """What a request arriving on a socket looks like to a handler."""

    def __init__(self, broker, version, listener):
        self.broker, self.api_version, self.listener = broker, version, listener
        self.header = self.connection = None


def over_network(broker, api_key, version, body, listener="PLAINTEXT"):
    from kbroker.protocol.apis import APIS
    api = APIS[api_key]
    req = api.decode_request(version, api.encode_request(version, body).getvalue())
    return _REGISTRY[api_key].fn(NetContext(broker, version, listener), req)


def test_versions_served():
    h = load_handlers()
    assert [(k, h[k].min_version, h[k].max_version) for k in (4, 5, 6, 7)] == [(4, 0, 4), (5, 0, 3), (6, 0, 6),
                                                                             (7, 0, 3)]
    assert all(h[k].serves(v) for k, v in VERSIONS.items())


def test_leader_and_isr_from_the_current_controller_is_applied(broker):
    d = local_dispatcher(broker)
    resp = d(4, 4, lai_body())
    assert resp["error_code"] == 0
    assert [(e["partition_index"], e["error_code"]) for e in resp["partition_errors"]] == [(0, 0), (1, 6)]
    _, cid, epoch, states, leaders = broker.calls[0]
    assert (cid, epoch, leaders) == (1, 5, [(1, "h", 9091)])
    assert states == [PartitionLeadership("t", p, LeaderAndIsr(leader=1, leader_epoch=2, isr=(1, 2), controller_epoch=5,
                                                                zk_version=3), replicas=(1, 2), adding_replicas=(),
                                          removing_replicas=(), is_new=p == 0) for p in (0, 1)]
    assert broker.metadata_cache.controller_epoch == EPOCH


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
def test_requests_not_from_the_current_controller_change_nothing(broker, api_key, version, body, code):
    before = broker.metadata_cache.controller_epoch
    resp = local_dispatcher(broker)(api_key, version, body)
    assert resp["error_code"] == code
    assert all(e["error_code"] == code for e in resp.get("partition_errors", []))
    assert broker.calls == []
    assert broker.metadata_cache.topics() == [] and broker.metadata_cache.alive_brokers() == []
    assert broker.metadata_cache.controller_epoch == before  # not raised: the lock-out of issue 8
    assert local_dispatcher(broker)(6, 6, um_body()) == {"error_code": 0}  # the real controller still works


def test_forged_higher_epoch_does_not_lock_out_the_controller(broker):
    """Issue 8: a client's UpdateMetadata with a made-up epoch had been recorded as the highest, so the real
    controller's next requests got STALE_CONTROLLER_EPOCH."""
    d = local_dispatcher(broker)
    assert d(6, 6, um_body(epoch=7777, cid=9, host="6.6.6.6")) == {"error_code": 11}
    assert d(6, 6, um_body()) == {"error_code": 0}
    assert broker.metadata_cache.alive_brokers()[0].host == "h"
    assert d(4, 4, lai_body())["error_code"] == 0


def test_request_ahead_of_the_view_waits_for_it(broker, backend):
    """A new controller's request can arrive before this broker's watch of /controller_epoch fired."""
    d = local_dispatcher(broker)

    def elect():
        backend.set(ControllerZNode.path(), ControllerZNode.encode(2))
        backend.set(ControllerEpochZNode.path(), ControllerEpochZNode.encode(EPOCH + 1))
    gevent.spawn_later(0.1, elect)
    assert d(6, 6, um_body(epoch=EPOCH + 1, cid=2)) == {"error_code": 0}
    assert broker.metadata_cache.controller_epoch == EPOCH + 1
    # The old controller is fenced from now on.
    assert d(6, 6, um_body()) == {"error_code": 11}
    # After a session expiry the two watches re-read in any order: the view may pair the new epoch with the old id.
    backend.set(ControllerEpochZNode.path(), ControllerEpochZNode.encode(EPOCH + 2))
    assert broker.controller_view.current() == (2, EPOCH + 2)
    gevent.spawn_later(0.1, backend.set, ControllerZNode.path(), ControllerZNode.encode(3))
    assert d(6, 6, um_body(epoch=EPOCH + 2, cid=3)) == {"error_code": 0}


def test_request_during_registration_waits_for_the_new_epoch(broker):
    """Between our create of /brokers/ids/<id> and the read of its czxid the controller may already use it."""
    broker.registrar.settled.clear()

    def registered():
        broker.registrar.epoch = BROKER_EPOCH + 10
        broker.registrar.settled.set()
    gevent.spawn_later(0.1, registered)
    assert local_dispatcher(broker)(6, 6, um_body(broker_epoch=BROKER_EPOCH + 10)) == {"error_code": 0}


def test_stop_replica_versions(broker):
    d = local_dispatcher(broker)
    d(5, 3, {"controller_id": 1, "controller_epoch": EPOCH, "broker_epoch": BROKER_EPOCH, "topic_states": [
        {"topic_name": "t", "partition_states": [
            {"partition_index": 0, "delete_partition": True}, {"partition_index": 1, "delete_partition": False}]}]})
    resp = d(5, 1, {"controller_id": 1, "controller_epoch": EPOCH, "broker_epoch": BROKER_EPOCH,
                    "delete_partitions": True, "topics": [{"name": "u", "partition_indexes": [2, 3]}]})
    assert resp == {"error_code": 0, "partition_errors": [{"topic_name": "u", "partition_index": p, "error_code": 0}
                                                          for p in (2, 3)]}
    assert [c[2] for c in broker.calls] == [[("t", 0, True), ("t", 1, False)], [("u", 2, True), ("u", 3, True)]]


def test_update_metadata_applies(broker):
    assert local_dispatcher(broker)(6, 6, um_body()) == {"error_code": 0}
    assert broker.metadata_cache.leader("t", 0) == 1 and broker.metadata_cache.controller_id == 1


def test_control_plane_listener(backend):
    broker = FakeBroker(backend, control_plane_listener="CONTROL")
    for api_key, body in ((4, lai_body()), (5, stop_body()), (6, um_body())):
        resp = over_network(broker, api_key, VERSIONS[api_key], body, listener="PLAINTEXT")
        assert resp["error_code"] == errors.CLUSTER_AUTHORIZATION_FAILED
    assert broker.calls == [] and broker.metadata_cache.topics() == []
    assert over_network(broker, 7, 3, {"broker_id": 1, "broker_epoch": 1}, listener="PLAINTEXT") == {
        "error_code": 31, "remaining_partitions": []}
    assert over_network(broker, 6, 6, um_body(), listener="CONTROL") == {"error_code": 0}
    assert local_dispatcher(broker)(4, 4, lai_body())["error_code"] == 0  # the in-process path has no listener
    # Without the key, any listener is a control listener.
    plain = FakeBroker(backend)
    assert over_network(plain, 6, 6, um_body(), listener="PLAINTEXT") == {"error_code": 0}


def test_unwired_broker_answers_errors():
    d = local_dispatcher(object())
    assert d(6, 6, um_body()) == {"error_code": -1}
    assert d(4, 4, lai_body())["error_code"] == -1
    assert d(7, 3, {"broker_id": 1}) == {"error_code": 41, "remaining_partitions": []}


def test_unwired_methods_answer_errors(broker):
    class NoMethods:
        metadata_cache = broker.metadata_cache
        controller_view = broker.controller_view
        registrar = broker.registrar
    resp = local_dispatcher(NoMethods())(4, 4, lai_body())
    assert resp["error_code"] == -1


def test_controlled_shutdown_handler(broker):
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
    broker.controller = Ctrl(False)
    d = local_dispatcher(broker)
    assert d(7, 3, {"broker_id": 2, "broker_epoch": 77})["error_code"] == 41
    broker.controller = ctrl = Ctrl(True)
    assert d(7, 3, {"broker_id": 2, "broker_epoch": 77}) == {
        "error_code": 0, "remaining_partitions": [{"topic_name": "t", "partition_index": 3}]}
    assert d(7, 3, {"broker_id": 2, "broker_epoch": 78}) == {"error_code": 77, "remaining_partitions": []}
    assert d(7, 1, {"broker_id": 2}) == {"error_code": 77, "remaining_partitions": []}  # v0/v1 carry no epoch
    assert ctrl.calls == [(2, 77), (2, 78), (2, -1)]
