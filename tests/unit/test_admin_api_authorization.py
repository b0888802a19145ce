"""Authorization of DeleteRecords (21), ElectLeaders (43), OffsetDelete (47) and DescribeCluster (60), in process
with tests/unit/test_handler_authorization.py's fake authorizer (User:alice): denied -> Kafka's code and nothing
reached (collaborators not given are ``Unused``); allowed -> the handler goes on."""
from types import SimpleNamespace

from kbroker import errors
from kbroker.handlers import auth
from kbroker.security.acl import ALTER, CLUSTER, CLUSTER_NAME, DELETE, DESCRIBE, GROUP, READ, TOPIC

from .test_handler_authorization import _handlers, Authorizer, call  # noqa: F401 -- _handlers is a fixture


class NoTopics:
    def leader_partition(self, topic, p):
        raise errors.UnknownTopicOrPartition(topic)


def test_delete_records_needs_delete_on_the_topic():
    body = {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "offset": 5}]},
                       {"name": "u", "partitions": [{"partition_index": 1, "offset": 5}]}], "timeout_ms": 100}
    a = Authorizer((DELETE, TOPIC, "u"))
    resp = call(21, 2, body, a, replicas=NoTopics())
    codes = {(t["name"], p["partition_index"]): p["error_code"] for t in resp["topics"] for p in t["partitions"]}
    assert codes == {("t", 0): 29, ("u", 1): 3}
    assert sorted(a.asked) == [(DELETE, TOPIC, "t"), (DELETE, TOPIC, "u")]


def test_elect_leaders_needs_alter_on_the_cluster():
    body = {"election_type": 0, "topic_partitions": [{"topic": "t", "partitions": [0, 1]}], "timeout_ms": 100}
    resp = call(43, 2, body, Authorizer())                # controller not given: never reached
    assert resp["error_code"] == 31
    assert [(r["partition_id"], r["error_code"]) for t in resp["replica_election_results"]
            for r in t["partition_result"]] == [(0, 31), (1, 31)]
    everything = call(43, 2, dict(body, topic_partitions=None), Authorizer())
    assert (everything["error_code"], everything["replica_election_results"]) == (31, [])
    asked = []
    ctrl = SimpleNamespace(elect_leaders=lambda etype, tps, timeout=None: asked.append((etype, tps)) or {
        ("t", 0): (84, "not needed", -1), ("t", 1): (0, None, -1)})
    ok = call(43, 2, dict(body, election_type=1), Authorizer((ALTER, CLUSTER, CLUSTER_NAME)), controller=ctrl,
              metadata=SimpleNamespace(leader=lambda t, p: -1))
    assert asked == [(1, [("t", 0), ("t", 1)])] and ok["error_code"] == 0
    assert [(r["partition_id"], r["error_code"]) for t in ok["replica_election_results"]
            for r in t["partition_result"]] == [(0, 84), (1, 0)]


def test_offset_delete_needs_delete_on_the_group_and_read_on_each_topic():
    body = {"group_id": "g", "topics": [{"name": "t", "partitions": [{"partition_index": 0}]},
                                        {"name": "u", "partitions": [{"partition_index": 0}]}]}
    resp = call(47, 0, body, Authorizer())                # groups not given: never reached
    assert (resp["error_code"], resp["topics"]) == (30, [])
    asked = []
    groups = SimpleNamespace(delete_offsets=lambda g, tps: asked.append((g, tps)) or (0, {tp: 0 for tp in tps}))
    resp = call(47, 0, body, Authorizer((DELETE, GROUP, "g"), (READ, TOPIC, "u")), groups=groups,
                metadata=SimpleNamespace(partition=lambda t, p: object()))
    assert asked == [("g", [("u", 0)])]
    assert {t["name"]: t["partitions"][0]["error_code"] for t in resp["topics"]} == {"t": 29, "u": 0}


def test_describe_cluster_operations_need_describe_on_the_cluster():
    cache = SimpleNamespace(controller_id=3, alive_brokers=lambda listener: [
        SimpleNamespace(id=3, host="h", port=9092, rack=None)])
    body = {"include_cluster_authorized_operations": True, "endpoint_type": 1}
    denied = call(60, 1, body, Authorizer(), metadata=cache)
    assert (denied["error_code"], denied["cluster_authorized_operations"], denied["controller_id"]) == (0, 0, 3)
    allowed = call(60, 1, body, Authorizer((DESCRIBE, CLUSTER, CLUSTER_NAME)), metadata=cache)
    assert allowed["cluster_authorized_operations"] == 1 << 8          # Describe (8) only
    assert [(b["broker_id"], b["host"], b["port"], b["rack"]) for b in allowed["brokers"]] == [(3, "h", 9092, None)]
    not_asked = call(60, 0, {"include_cluster_authorized_operations": False}, Authorizer(), metadata=cache)
    assert not_asked["cluster_authorized_operations"] == auth.OPERATIONS_OMITTED
