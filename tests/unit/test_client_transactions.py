"""AdminClient's transaction calls (DescribeProducers 61, ListTransactions 66, DescribeTransactions 65,
WriteTxnMarkers 27) against a scripted two-broker cluster: routing, retries (a moved leader, a loading or moved
coordinator), what is never retried, and the wire bodies. Every request and response goes through the schemas at
the negotiated version (``FakeConn``), so a body that does not fit its version fails here."""
import pytest

import kbroker.client.cluster as cluster_mod
from kbroker import errors
from kbroker.client.admin import AdminClient, ProducerState, TransactionDescription, TransactionListing
from kbroker.client.connection import BrokerConnection, resolve_api

RANGES = {18: (0, 3), 3: (0, 9), 10: (0, 4), 27: (0, 1), 61: (0, 0), 65: (0, 0), 66: (0, 1)}
ADDR = {1: ("b1", 9001), 2: ("b2", 9002)}


class FakeCluster:
    """Brokers 1 and 2; topic t with partition 0 led by ``leader``; ``script[(node, api)]``: error codes answered
    (one per request, 0 once the list is used up)."""

    def __init__(self):
        self.leader = 1
        self.ranges = {1: dict(RANGES), 2: dict(RANGES)}
        self.script = {}
        self.sent = []          # (node, api name, version, request)
        self.on_error = {}      # (node, api) -> fn() run when a scripted error is answered

    def code(self, node, api):
        codes = self.script.get((node, api), [])
        if codes:
            code = codes.pop(0)
            fn = self.on_error.get((node, api))
            if code and fn:
                fn()
            return code
        return 0

    def handle(self, node, api, version, req):
        self.sent.append((node, api, version, req))
        return getattr(self, api)(node, req)

    def Metadata(self, node, req):
        return {"brokers": [{"node_id": n, "host": h, "port": p} for n, (h, p) in ADDR.items()],
                "controller_id": 1, "cluster_id": "c", "topics": [{"name": "t", "error_code": 0, "partitions": [
                    {"partition_index": 0, "leader_id": self.leader, "replica_nodes": [1, 2],
                     "isr_nodes": [1, 2]}]}]}

    def DescribeProducers(self, node, req):
        code = self.code(node, "DescribeProducers")
        return {"topics": [{"name": t["name"], "partitions": [
            {"partition_index": p, "error_code": code, "active_producers": [] if code else [
                {"producer_id": 7, "producer_epoch": 2, "last_sequence": 9, "last_timestamp": 1000,
                 "coordinator_epoch": -1, "current_txn_start_offset": 40},
                {"producer_id": 8, "producer_epoch": 0, "last_sequence": 0, "last_timestamp": 2000,
                 "coordinator_epoch": 3, "current_txn_start_offset": -1}]}
            for p in t["partition_indexes"]]} for t in req["topics"]]}

    def ListTransactions(self, node, req):
        return {"error_code": self.code(node, "ListTransactions"), "transaction_states": [
            {"transactional_id": "app-%d" % node, "producer_id": 100 + node, "transaction_state": "Ongoing"}]}

    def FindCoordinator(self, node, req):
        return {"coordinators": [{"key": k, "node_id": 2, "host": "b2", "port": 9002, "error_code": 0}
                                 for k in req["coordinator_keys"]]}

    def DescribeTransactions(self, node, req):
        code = self.code(node, "DescribeTransactions")
        if node != 2:
            code = errors.NOT_COORDINATOR
        return {"transaction_states": [
            {"error_code": code, "transactional_id": tid, "transaction_state": "Ongoing",
             "transaction_timeout_ms": 60000, "transaction_start_time_ms": -1 if tid == "idle" else 5000,
             "producer_id": 7, "producer_epoch": 2,
             "topics": [{"topic": "u", "partitions": [3, 1]}, {"topic": "t", "partitions": [0]}]}
            for tid in req["transactional_ids"]]}

    def WriteTxnMarkers(self, node, req):
        code = self.code(node, "WriteTxnMarkers")
        if node != self.leader and not code:
            code = errors.NOT_LEADER_OR_FOLLOWER
        return {"markers": [{"producer_id": m["producer_id"], "topics": [
            {"name": t["name"], "partitions": [{"partition_index": p, "error_code": code}
                                               for p in t["partition_indexes"]]} for t in m["topics"]]}
            for m in req["markers"]]}

    def requests(self, api):
        return [(n, v, r) for n, a, v, r in self.sent if a == api]


class FakeConn:
    pick_version = BrokerConnection.pick_version
    cluster = None

    def __init__(self, host, port, client_id="kbroker-admin", timeout=30):
        self.node = {a: n for n, a in ADDR.items()}[(host, port)]
        self.host, self.port = host, port
        self.api_ranges = self.cluster.ranges[self.node]
        self.last_version = None
        self.closed = False

    def request(self, api_name_or_key, body, version=None, expect_response=True, max_version=None):
        api = resolve_api(api_name_or_key)
        if version is None:
            version = self.pick_version(api, max_version)
        req = api.decode_request(version, memoryview(api.encode_request(version, body).getvalue()))
        resp = self.cluster.handle(self.node, api.name, version, req)
        self.last_version = version
        return api.decode_response(version, memoryview(api.encode_response(version, resp).getvalue()))

    def close(self):
        self.closed = True


@pytest.fixture
def fake(monkeypatch):
    c = FakeCluster()
    monkeypatch.setattr(FakeConn, "cluster", c)
    monkeypatch.setattr(cluster_mod, "BrokerConnection", FakeConn)
    return c


@pytest.fixture
def admin(fake):
    a = AdminClient("b1:9001", group_retry_s=2.0)
    yield a
    a.close()


def test_describe_producers_follows_a_moved_leader(fake, admin):
    fake.script[(1, "DescribeProducers")] = [errors.NOT_LEADER_OR_FOLLOWER]

    def move():
        fake.leader = 2
    fake.on_error[(1, "DescribeProducers")] = move
    got = admin.describe_producers([("t", 0)])
    assert got == {("t", 0): [ProducerState(7, 2, 9, 1000, None, 40), ProducerState(8, 0, 0, 2000, 3, None)]}
    assert [n for n, _, _ in fake.requests("DescribeProducers")] == [1, 2]
    assert fake.requests("DescribeProducers")[0][2]["topics"] == [{"name": "t", "partition_indexes": [0]}]


def test_describe_producers_of_a_named_broker_is_not_retried(fake, admin):
    fake.script[(2, "DescribeProducers")] = [errors.NOT_LEADER_OR_FOLLOWER]
    with pytest.raises(errors.NotLeaderOrFollower, match="t-0 on broker 2"):
        admin.describe_producers([("t", 0)], broker_id=2)
    assert len(fake.requests("DescribeProducers")) == 1
    fake.script[(1, "DescribeProducers")] = [errors.TOPIC_AUTHORIZATION_FAILED]
    with pytest.raises(errors.TopicAuthorizationFailed):
        admin.describe_producers([("t", 0)])
    assert len(fake.requests("DescribeProducers")) == 2


def test_list_transactions_asks_every_broker_and_waits_for_loading(fake, admin):
    fake.script[(1, "ListTransactions")] = [errors.COORDINATOR_LOAD_IN_PROGRESS]
    assert admin.list_transactions(producer_id_filters=[101, 5]) == {
        1: [TransactionListing("app-1", 101, "Ongoing")], 2: [TransactionListing("app-2", 102, "Ongoing")]}
    sent = fake.requests("ListTransactions")
    assert [n for n, _, _ in sent] == [1, 1, 2]
    assert sent[0][2]["producer_id_filters"] == [101, 5] and sent[0][2]["duration_filter"] == -1
    fake.script[(2, "ListTransactions")] = [errors.COORDINATOR_NOT_AVAILABLE]
    with pytest.raises(errors.CoordinatorNotAvailable, match="broker 2"):
        admin.list_transactions()


def test_list_transactions_duration_filter_needs_v1(fake, admin):
    admin.list_transactions(duration_filter_ms=60000)
    assert [(v, r["duration_filter"]) for _, v, r in fake.requests("ListTransactions")] == [(1, 60000), (1, 60000)]
    fake.ranges[2][66] = (0, 0)
    with pytest.raises(errors.UnsupportedVersion, match="broker 2"):
        admin.list_transactions(duration_filter_ms=60000)


def test_describe_transactions_finds_the_coordinator(fake, admin):
    fake.script[(2, "DescribeTransactions")] = [errors.COORDINATOR_LOAD_IN_PROGRESS]
    got = admin.describe_transactions(["app", "idle"])
    tps = [("t", 0), ("u", 1), ("u", 3)]
    assert got == {"app": TransactionDescription(2, "app", "Ongoing", 7, 2, 60000, 5000, tps),
                   "idle": TransactionDescription(2, "idle", "Ongoing", 7, 2, 60000, None, tps)}
    finds = fake.requests("FindCoordinator")
    assert {(r["key_type"], tuple(r["coordinator_keys"])) for _, _, r in finds} == {(1, ("app",)), (1, ("idle",))}
    assert [n for n, _, _ in fake.requests("DescribeTransactions")] == [2, 2, 2]
    fake.script[(2, "DescribeTransactions")] = [errors.TRANSACTIONAL_ID_NOT_FOUND, errors.TRANSACTIONAL_ID_NOT_FOUND]
    assert admin.describe_transactions(["gone"], missing_ok=True) == {"gone": None}
    with pytest.raises(errors.TransactionalIdNotFound):
        admin.describe_transactions(["gone"])


def test_abort_transaction_writes_an_abort_marker_to_the_leader(fake, admin):
    def move():
        fake.leader = 2
    fake.script[(1, "WriteTxnMarkers")] = [errors.NOT_LEADER_OR_FOLLOWER]
    fake.on_error[(1, "WriteTxnMarkers")] = move
    admin.abort_transaction("t", 0, 7, 2, 5)
    sent = fake.requests("WriteTxnMarkers")
    assert [n for n, _, _ in sent] == [1, 2]
    assert sent[0][2]["markers"] == [{"producer_id": 7, "producer_epoch": 2, "transaction_result": False,
                                      "coordinator_epoch": 5, "topics": [{"name": "t", "partition_indexes": [0]}]}]
    fake.script[(2, "WriteTxnMarkers")] = [errors.TRANSACTION_COORDINATOR_FENCED]
    with pytest.raises(errors.TransactionCoordinatorFenced):
        admin.abort_transaction("t", 0, 7, 2, 4)
    assert len(fake.requests("WriteTxnMarkers")) == 3
