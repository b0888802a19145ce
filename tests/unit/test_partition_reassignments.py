"""AlterPartitionReassignments (45) / ListPartitionReassignments (46) handlers (KIP-455): schemas round trip at
v0, Cluster authorization, NOT_CONTROLLER, and the answer's shape over a fake controller. The controller's own
rules (codes per partition, start, cancel) run against a real cluster: tests/integration/test_configs_dynamic.py."""
from kbroker import errors
from kbroker.handlers.partition_reassignments import alter_partition_reassignments, list_partition_reassignments
from kbroker.protocol.apis import APIS
from kbroker.security.acl import ALTER, CLUSTER, DESCRIBE
from tests.unit.test_handler_authorization import ALICE, Authorizer, ctx  # noqa: F401 - ALICE: Authorizer's

ALTER_REQ = {"timeout_ms": 1000, "topics": [{"name": "t", "partitions": [
    {"partition_index": 0, "replicas": [1, 2]}, {"partition_index": 1, "replicas": None}]}]}


class Controller:
    def __init__(self, active=True):
        self.active, self.calls = active, []

    def is_active(self):
        return self.active

    def alter_reassignments(self, changes, timeout=None):
        self.calls.append(("alter", changes))
        return {tp: (0, None) if target else (errors.NO_REASSIGNMENT_IN_PROGRESS, "none") for tp, target in
                changes.items()}

    def list_reassignments(self, partitions=None, timeout=None):
        self.calls.append(("list", partitions))
        return {("t", 0): ([1, 2, 3], [1, 2], [3])}


def _roundtrip(key, body, resp):
    api = APIS[key]
    req = api.decode_request(0, api.encode_request(0, body).getvalue())
    return req, api.decode_response(0, api.encode_response(0, resp).getvalue())


def test_alter_asks_the_controller_and_answers_per_partition():
    c = Controller()
    req, _ = _roundtrip(45, ALTER_REQ, {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
                                         "responses": []})
    resp = alter_partition_reassignments(ctx(Authorizer((ALTER, CLUSTER, "kafka-cluster")), 45, 0, controller=c),
                                         req)
    assert c.calls == [("alter", {("t", 0): (1, 2), ("t", 1): None})]
    _, resp = _roundtrip(45, ALTER_REQ, resp)
    assert resp["error_code"] == 0
    assert resp["responses"] == [{"name": "t", "partitions": [
        {"partition_index": 0, "error_code": 0, "error_message": None},
        {"partition_index": 1, "error_code": errors.NO_REASSIGNMENT_IN_PROGRESS, "error_message": "none"}]}]


def test_alter_needs_alter_on_the_cluster_and_the_controller():
    c = Controller()
    req, _ = _roundtrip(45, ALTER_REQ, {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
                                         "responses": []})
    resp = alter_partition_reassignments(ctx(Authorizer((DESCRIBE, CLUSTER, "kafka-cluster")), 45, 0, controller=c),
                                         req)
    assert c.calls == [] and resp["error_code"] == errors.CLUSTER_AUTHORIZATION_FAILED
    assert {p["error_code"] for t in resp["responses"] for p in t["partitions"]} == {
        errors.CLUSTER_AUTHORIZATION_FAILED}
    resp = alter_partition_reassignments(ctx(None, 45, 0, controller=Controller(active=False)), req)
    assert resp["error_code"] == errors.NOT_CONTROLLER
    resp = alter_partition_reassignments(ctx(None, 45, 0, controller=None), req)
    assert resp["error_code"] == errors.NOT_CONTROLLER


def test_list_all_or_named_and_its_authorization():
    c = Controller()
    body = {"timeout_ms": 1000, "topics": None}
    req, _ = _roundtrip(46, body, {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "topics": []})
    resp = list_partition_reassignments(ctx(Authorizer((DESCRIBE, CLUSTER, "kafka-cluster")), 46, 0, controller=c),
                                        req)
    _, resp = _roundtrip(46, body, resp)
    assert resp["topics"] == [{"name": "t", "partitions": [
        {"partition_index": 0, "replicas": [1, 2, 3], "adding_replicas": [1, 2], "removing_replicas": [3]}]}]
    named = {"timeout_ms": 1000, "topics": [{"name": "t", "partition_indexes": [0, 4]}]}
    req, _ = _roundtrip(46, named, {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "topics": []})
    list_partition_reassignments(ctx(None, 46, 0, controller=c), req)
    assert c.calls == [("list", None), ("list", [("t", 0), ("t", 4)])]
    resp = list_partition_reassignments(ctx(Authorizer(), 46, 0, controller=c), req)
    assert (resp["error_code"], resp["topics"], len(c.calls)) == (errors.CLUSTER_AUTHORIZATION_FAILED, [], 2)
