"""Cluster handlers (kbroker/handlers/cluster.py) through the in-process dispatcher, with a fake broker."""
from kbroker.controller.channel import VERSIONS
from kbroker.handlers.cluster import local_dispatcher
from kbroker.server.metadata_cache import MetadataCache
from kbroker.server.router import load_handlers


class FakeBroker:
    def __init__(self):
        self.metadata_cache = MetadataCache()
        self.calls = []
        self.controller = None

    def apply_leader_and_isr(self, controller_id, controller_epoch, states, leaders):
        self.calls.append(("lai", controller_id, controller_epoch, states, leaders))
        return {("t", 1): 6}

    def stop_replicas(self, controller_epoch, parts):
        self.calls.append(("stop", controller_epoch, parts))
        return {}


def lai_body(epoch):
    return {"controller_id": 1, "controller_epoch": epoch, "topic_states": [{"topic_name": "t", "partition_states": [
        {"partition_index": p, "controller_epoch": epoch, "leader": 1, "leader_epoch": 2, "isr": [1, 2],
         "partition_epoch": 3, "replicas": [1, 2], "is_new": p == 0} for p in (0, 1)]}],
        "live_leaders": [{"broker_id": 1, "host_name": "h", "port": 9091}]}


def test_versions_served():
    h = load_handlers()
    assert [(k, h[k].min_version, h[k].max_version) for k in (4, 5, 6, 7)] == [(4, 0, 4), (5, 0, 3), (6, 0, 6),
                                                                             (7, 0, 3)]
    assert all(h[k].serves(v) for k, v in VERSIONS.items())


def test_leader_and_isr_and_fencing():
    b = FakeBroker()
    d = local_dispatcher(b)
    resp = d(4, 4, lai_body(5))
    assert resp["error_code"] == 0
    assert [(e["partition_index"], e["error_code"]) for e in resp["partition_errors"]] == [(0, 0), (1, 6)]
    _, cid, epoch, states, leaders = b.calls[0]
    assert (cid, epoch, leaders) == (1, 5, [(1, "h", 9091)])
    assert states[0] == {"topic": "t", "partition": 0, "controller_epoch": 5, "leader": 1, "leader_epoch": 2,
                         "isr": [1, 2], "zk_version": 3, "replicas": [1, 2], "adding_replicas": [],
                         "removing_replicas": [], "is_new": True}
    resp = d(4, 4, lai_body(4))
    assert resp["error_code"] == 11 and all(e["error_code"] == 11 for e in resp["partition_errors"])
    assert len(b.calls) == 1
    assert d(6, 6, {"controller_id": 1, "controller_epoch": 4, "live_brokers": []}) == {"error_code": 11}
    stop = {"controller_id": 1, "controller_epoch": 4, "topic_states": [
        {"topic_name": "t", "partition_states": [{"partition_index": 0, "delete_partition": True}]}]}
    assert d(5, 3, stop)["error_code"] == 11


def test_stop_replica_versions():
    b = FakeBroker()
    d = local_dispatcher(b)
    d(5, 3, {"controller_id": 1, "controller_epoch": 1, "topic_states": [{"topic_name": "t", "partition_states": [
        {"partition_index": 0, "delete_partition": True}, {"partition_index": 1, "delete_partition": False}]}]})
    d(5, 1, {"controller_id": 1, "controller_epoch": 1, "delete_partitions": True,
             "topics": [{"name": "u", "partition_indexes": [2, 3]}]})
    resp = d(5, 0, {"controller_id": 1, "controller_epoch": 1, "delete_partitions": False,
                    "ungrouped_partitions": [{"topic_name": "v", "partition_index": 4}]})
    assert resp == {"error_code": 0, "partition_errors": [{"topic_name": "v", "partition_index": 4, "error_code": 0}]}
    assert [c[2] for c in b.calls] == [[("t", 0, True), ("t", 1, False)], [("u", 2, True), ("u", 3, True)],
                                       [("v", 4, False)]]


def test_update_metadata_applies():
    b = FakeBroker()
    d = local_dispatcher(b)
    resp = d(6, 6, {"controller_id": 1, "controller_epoch": 2, "live_brokers": [
        {"id": 1, "endpoints": [{"port": 9091, "host": "h", "listener": "PLAINTEXT", "security_protocol": 0}]}],
        "topic_states": [{"topic_name": "t", "partition_states": [
            {"partition_index": 0, "controller_epoch": 2, "leader": 1, "leader_epoch": 0, "isr": [1],
             "zk_version": 0, "replicas": [1]}]}]})
    assert resp == {"error_code": 0}
    assert b.metadata_cache.leader("t", 0) == 1 and b.metadata_cache.controller_id == 1


def test_unwired_broker_answers_errors():
    d = local_dispatcher(object())
    assert d(6, 6, {"controller_id": 1, "controller_epoch": 1, "live_brokers": []}) == {"error_code": -1}
    assert d(4, 4, lai_body(1))["error_code"] == -1
    assert d(7, 3, {"broker_id": 1}) == {"error_code": 41, "remaining_partitions": []}

    class NoMethods:
        metadata_cache = MetadataCache()
    resp = local_dispatcher(NoMethods())(4, 4, lai_body(1))
    assert resp["error_code"] == -1


def test_controlled_shutdown_handler():
    class Ctrl:
        def __init__(self, active):
            self.active = active

        def is_active(self):
            return self.active

        def controlled_shutdown(self, bid):
            return [("t", 3)]
    b = FakeBroker()
    b.controller = Ctrl(False)
    d = local_dispatcher(b)
    assert d(7, 1, {"broker_id": 2})["error_code"] == 41
    b.controller = Ctrl(True)
    assert d(7, 3, {"broker_id": 2}) == {"error_code": 0,
                                         "remaining_partitions": [{"topic_name": "t", "partition_index": 3}]}
