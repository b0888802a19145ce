"""The transaction handlers (InitProducerId with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
DescribeTransactions, ListTransactions, FindCoordinator key type 1) in process: authorization in Kafka's order with
its exact codes and no side effect when denied, PRODUCER_FENCED mapped per version, what reaches the coordinator.
Requests and responses go through the codec."""
import pytest

from kbroker import errors
from kbroker.handlers import registry as load_handlers
from kbroker.security.acl import DESCRIBE, GROUP, READ, TOPIC, TRANSACTIONAL_ID, WRITE
from kbroker.server.router import _REGISTRY
from kbroker.server.metadata_cache import BrokerEndpoint
from tests.unit.ctx import Unused
from tests.unit.test_handler_authorization import Authorizer, call


@pytest.fixture(autouse=True, scope="module")
def _handlers():
    load_handlers()


class Txns:
    """The TransactionCoordination collaborator: records calls, answers ``code``."""
    active = True

    def __init__(self, code=0):
        self.code = code
        self.calls = []

    def partition_for(self, tid):
        return 2

    def init_producer_id(self, tid, timeout_ms, expected=None):
        self.calls.append(("init", tid, timeout_ms, expected))
        return (self.code, -1, -1) if self.code else (0, 77, 3)

    def add_partitions(self, tid, pid, epoch, partitions):
        self.calls.append(("add", tid, pid, epoch, sorted(partitions)))
        return self.code

    def end_txn(self, tid, pid, epoch, commit):
        self.calls.append(("end", tid, pid, epoch, commit))
        return self.code

    def describe(self, tid):
        return {"error_code": 0, "transactional_id": tid, "transaction_state": "Ongoing",
                "transaction_timeout_ms": 60000, "transaction_start_time_ms": 5, "producer_id": 77,
                "producer_epoch": 3, "topics": [{"topic": "t", "partitions": [0]}, {"topic": "u", "partitions": [1]}]}

    def list_transactions(self, states, pids, duration=-1):
        self.calls.append(("list", list(states), list(pids), duration))
        return {"error_code": 0, "unknown_state_filters": [], "transaction_states": [
            {"transactional_id": "a", "producer_id": 1, "transaction_state": "Empty"},
            {"transactional_id": "b", "producer_id": 2, "transaction_state": "Ongoing"}]}


class Meta:
    """Partitions t-0..t-2 and u-0..u-1 exist."""

    def partition(self, t, p):
        return object() if (t == "t" and p < 3) or (t == "u" and p < 2) else None


class Groups:
    def partition_for(self, group):
        return 9


ALL_TX = Authorizer((WRITE, TRANSACTIONAL_ID, "tx"), (WRITE, TOPIC, "t"), (WRITE, TOPIC, "u"),
                    (READ, GROUP, "g"), (DESCRIBE, TRANSACTIONAL_ID, "tx"))


def add_body(parts, pid=77, epoch=3):
    topics = {}
    for t, p in parts:
        topics.setdefault(t, []).append(p)
    return {"v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}


def codes(resp):
    return {(t["name"], r["partition_index"]): r["partition_error_code"]
            for t in resp["results_by_topic_v3_and_below"] for r in t["results_by_partition"]}


def test_init_producer_id_reaches_the_coordinator_with_kip360_fields():
    txns = Txns()
    body = {"transactional_id": "tx", "transaction_timeout_ms": 5000, "producer_id": 77, "producer_epoch": 2}
    r = call(22, 4, body, ALL_TX, transactions=txns)
    assert (r["error_code"], r["producer_id"], r["producer_epoch"]) == (0, 77, 3)
    assert txns.calls == [("init", "tx", 5000, (77, 2))]
    # one of producer id / epoch without the other: INVALID_REQUEST, nothing asked
    txns.calls.clear()
    assert call(22, 4, dict(body, producer_epoch=-1), ALL_TX, transactions=txns)["error_code"] == 42
    assert txns.calls == []
    # PRODUCER_FENCED (90) is INVALID_PRODUCER_EPOCH (47) before v4
    fenced = Txns(errors.PRODUCER_FENCED)
    assert call(22, 4, body, ALL_TX, transactions=fenced)["error_code"] == 90
    assert call(22, 3, body, ALL_TX, transactions=fenced)["error_code"] == 47


def test_add_partitions_authorization_and_all_or_nothing():
    # no Write on the transactional id: 53 everywhere, the coordinator is not asked
    r = call(24, 3, add_body([("t", 0), ("u", 1)]), Authorizer(), transactions=Unused("transactions"),
             metadata=Unused("metadata"))
    assert codes(r) == {("t", 0): 53, ("u", 1): 53}
    # Write on t only: u -> 29, unknown t-7 -> 3, the rest 55; __consumer_offsets never by this API
    a = Authorizer((WRITE, TRANSACTIONAL_ID, "tx"), (WRITE, TOPIC, "t"), (WRITE, TOPIC, "__consumer_offsets"))
    r = call(24, 3, add_body([("t", 0), ("t", 7), ("u", 1), ("__consumer_offsets", 3)]), a,
             transactions=Unused("transactions"), metadata=Meta())
    assert codes(r) == {("t", 0): 55, ("t", 7): 3, ("u", 1): 29, ("__consumer_offsets", 3): 29}
    # all fine: the coordinator's answer for every partition
    txns = Txns()
    r = call(24, 3, add_body([("t", 0), ("u", 1)]), ALL_TX, transactions=txns, metadata=Meta())
    assert codes(r) == {("t", 0): 0, ("u", 1): 0}
    assert txns.calls == [("add", "tx", 77, 3, [("t", 0), ("u", 1)])]
    fenced = Txns(errors.PRODUCER_FENCED)
    assert codes(call(24, 2, add_body([("t", 0)]), ALL_TX, transactions=fenced, metadata=Meta())) == {("t", 0): 90}
    assert codes(call(24, 1, add_body([("t", 0)]), ALL_TX, transactions=fenced, metadata=Meta())) == {("t", 0): 47}


def test_add_offsets_needs_write_on_the_id_and_read_on_the_group():
    body = {"transactional_id": "tx", "producer_id": 77, "producer_epoch": 3, "group_id": "g"}
    assert call(25, 3, body, Authorizer(), transactions=Unused("transactions"))["error_code"] == 53
    assert call(25, 3, body, Authorizer((WRITE, TRANSACTIONAL_ID, "tx")),
                transactions=Unused("transactions"))["error_code"] == 30
    txns = Txns()
    assert call(25, 3, body, ALL_TX, transactions=txns, groups=Groups())["error_code"] == 0
    assert txns.calls == [("add", "tx", 77, 3, [("__consumer_offsets", 9)])]
    fenced = Txns(errors.PRODUCER_FENCED)
    assert call(25, 1, body, ALL_TX, transactions=fenced, groups=Groups())["error_code"] == 47


def test_end_txn():
    body = {"transactional_id": "tx", "producer_id": 77, "producer_epoch": 3, "committed": True}
    assert call(26, 3, body, Authorizer(), transactions=Unused("transactions"))["error_code"] == 53
    txns = Txns()
    assert call(26, 3, body, ALL_TX, transactions=txns)["error_code"] == 0
    assert txns.calls == [("end", "tx", 77, 3, True)]
    fenced = Txns(errors.PRODUCER_FENCED)
    assert call(26, 2, body, ALL_TX, transactions=fenced)["error_code"] == 90
    assert call(26, 1, body, ALL_TX, transactions=fenced)["error_code"] == 47
    assert call(26, 3, body, ALL_TX, transactions=None)["error_code"] == errors.COORDINATOR_NOT_AVAILABLE


def test_describe_filters_ids_and_topics():
    a = Authorizer((DESCRIBE, TRANSACTIONAL_ID, "tx"), (DESCRIBE, TOPIC, "t"))
    r = call(65, 0, {"transactional_ids": ["tx", "other"]}, a, transactions=Txns())
    first, second = r["transaction_states"]
    assert (first["error_code"], first["transaction_state"], first["topics"]) == (
        0, "Ongoing", [{"topic": "t", "partitions": [0]}])          # u is not Describe-able: left out
    assert (second["transactional_id"], second["error_code"]) == ("other", 53)


def test_list_shows_only_describable_ids():
    txns = Txns()
    r = call(66, 1, {"state_filters": ["Ongoing"], "producer_id_filters": [2], "duration_filter": 10},
             Authorizer((DESCRIBE, TRANSACTIONAL_ID, "b")), transactions=txns)
    assert [s["transactional_id"] for s in r["transaction_states"]] == ["b"]
    assert txns.calls == [("list", ["Ongoing"], [2], 10)]
    r = call(66, 0, {"state_filters": [], "producer_id_filters": []}, Authorizer(), transactions=None)
    assert r["error_code"] == errors.COORDINATOR_NOT_AVAILABLE


def test_find_coordinator_key_type_1_answers_the_leader_of_the_ids_partition():
    class Topics:
        ensured = 0

        def ensure_transaction_state_topic(self):
            Topics.ensured += 1

    class Metadata:
        def alive_brokers(self, listener):
            return [BrokerEndpoint(4, "h4", 9094, None), BrokerEndpoint(5, "h5", 9095, None)]

        def partition(self, topic, p):
            assert (topic, p) == ("__transaction_state", 2)

            class S:
                leader = 5
            return S

    r = call(10, 4, {"key_type": 1, "coordinator_keys": ["tx", "tx2"]}, Authorizer(
        (DESCRIBE, TRANSACTIONAL_ID, "tx"), (DESCRIBE, TRANSACTIONAL_ID, "tx2")), transactions=Txns(),
        topics=Topics(), metadata=Metadata(), groups=Unused("groups"))
    assert [(c["key"], c["error_code"], c["node_id"], c["port"]) for c in r["coordinators"]] == [
        ("tx", 0, 5, 9095), ("tx2", 0, 5, 9095)]
    assert Topics.ensured == 1            # once per request
