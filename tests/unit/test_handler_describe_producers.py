"""DescribeProducers (61) in process: per-topic errors (17, 29, 3) before any partition is looked at, per
partition NOT_LEADER_OR_FOLLOWER (6) for an existing partition this broker does not host and
UNKNOWN_TOPIC_OR_PARTITION (3) for one that does not exist; a hosted replica answers, leader or follower, with its
producers in id order, every field on the wire."""
from collections import namedtuple
from types import SimpleNamespace

import pytest

from kbroker.handlers import registry as load_handlers
from kbroker.protocol.apis import APIS
from kbroker.security.acl import READ, TOPIC
from kbroker.server.router import _REGISTRY
from tests.unit.ctx import make_ctx
from tests.unit.test_handler_authorization import ALICE, Authorizer

Info = namedtuple("Info", "producer_id producer_epoch last_sequence last_timestamp coordinator_epoch "
                          "current_txn_start_offset")


class Producers:
    def __init__(self, infos):
        self.infos = infos

    def active(self):
        return list(self.infos)


class Replicas:
    def __init__(self, hosted):
        self.hosted = hosted    # {(topic, p): Partition-like}

    def get_partition(self, topic, p):
        return self.hosted.get((topic, p))


class Metadata:
    def __init__(self, partitions):
        self.parts = partitions    # {(topic, p)}

    def contains_topic(self, t):
        return any(t == x for x, _ in self.parts)

    def partition(self, t, p):
        return object() if (t, p) in self.parts else None


def call(body, hosted, existing, authorizer=None):
    load_handlers()
    api = APIS[61]
    req = api.decode_request(0, api.encode_request(0, body).getvalue())
    ctx = make_ctx(0, api_key=61, replicas=Replicas(hosted), metadata=Metadata(existing), authorizer=authorizer)
    if authorizer is not None:
        ctx.identity = ALICE
    resp = _REGISTRY[61].fn(ctx, req)
    return api.decode_response(0, api.encode_response(0, resp).getvalue())


def codes(resp):
    return {(t["name"], p["partition_index"]): p["error_code"] for t in resp["topics"] for p in t["partitions"]}


@pytest.fixture
def cluster():
    follower = SimpleNamespace(is_leader=False, producers=Producers([
        Info(9, 2, 14, 1_700_000_000_123, 5, 40), Info(3, 0, 99, 1_700_000_000_000, -1, -1)]))
    leader = SimpleNamespace(is_leader=True, producers=Producers([]))
    hosted = {("t", 0): follower, ("t", 1): leader}
    existing = {("t", 0), ("t", 1), ("t", 2)}
    return hosted, existing


def test_hosted_replicas_answer_leader_or_follower(cluster):
    resp = call({"topics": [{"name": "t", "partition_indexes": [0, 1, 2, 7]}]}, *cluster)
    assert codes(resp) == {("t", 0): 0, ("t", 1): 0, ("t", 2): 6, ("t", 7): 3}
    (t,) = resp["topics"]
    assert [p["partition_index"] for p in t["partitions"]] == [0, 1, 2, 7]
    assert t["partitions"][0]["active_producers"] == [
        {"producer_id": 3, "producer_epoch": 0, "last_sequence": 99, "last_timestamp": 1_700_000_000_000,
         "coordinator_epoch": -1, "current_txn_start_offset": -1},
        {"producer_id": 9, "producer_epoch": 2, "last_sequence": 14, "last_timestamp": 1_700_000_000_123,
         "coordinator_epoch": 5, "current_txn_start_offset": 40}]
    assert t["partitions"][1]["active_producers"] == []
    assert t["partitions"][2]["active_producers"] == [] and t["partitions"][2]["error_message"] is None


def test_topic_errors_cover_every_partition(cluster):
    resp = call({"topics": [{"name": "gone", "partition_indexes": [0, 1]},
                            {"name": "bad/name", "partition_indexes": [0]}]}, *cluster)
    assert codes(resp) == {("gone", 0): 3, ("gone", 1): 3, ("bad/name", 0): 17}
    assert resp["topics"][0]["partitions"][0]["error_message"] == "This server does not host this topic-partition."


def test_read_on_the_topic_is_required(cluster):
    authorizer = Authorizer((READ, TOPIC, "t"))
    resp = call({"topics": [{"name": "t", "partition_indexes": [0]}, {"name": "u", "partition_indexes": [0, 1]}]},
                *cluster, authorizer=authorizer)
    assert codes(resp) == {("t", 0): 0, ("u", 0): 29, ("u", 1): 29}
    assert resp["topics"][1]["partitions"][0]["error_message"] == "Topic authorization failed."
    # One question per topic, not per partition.
    assert sorted(authorizer.asked) == [(READ, TOPIC, "t"), (READ, TOPIC, "u")]
