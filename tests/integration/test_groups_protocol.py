"""Consumer-group bad input over raw requests (our codec, ``BrokerConnection``): exact error codes, no crash.

One broker for the module (group.min.session.timeout.ms=1000 so tests stay quick).
"""
import pytest

from kbroker import errors
from kbroker.client.connection import BrokerConnection
from kbroker.coordinator.consumer_protocol import encode_subscription
from tests.integration.harness import BrokerProcess

SUB = encode_subscription(["t"])


@pytest.fixture(scope="module")
def gbroker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("groups_protocol"), overrides={
        "group.min.session.timeout.ms": 1000, "group.max.session.timeout.ms": 60000,
        "group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 5})
    b.start()
    yield b
    b.close()


@pytest.fixture
def conn(gbroker):
    c = BrokerConnection(gbroker.host, gbroker.port, client_id="raw")
    yield c
    c.close()


def _join(conn, group, member_id="", ptype="consumer", session=10000, version=3, name="range"):
    return conn.request("JoinGroup", {"group_id": group, "session_timeout_ms": session, "rebalance_timeout_ms": 10000,
                                      "member_id": member_id, "protocol_type": ptype,
                                      "protocols": [{"name": name, "metadata": SUB}]}, version=version)


def _stable_member(conn, group):
    r = _join(conn, group)
    assert r["error_code"] == 0
    s = conn.request("SyncGroup", {"group_id": group, "generation_id": r["generation_id"],
                                   "member_id": r["member_id"],
                                   "assignments": [{"member_id": r["member_id"], "assignment": b""}]}, version=1)
    assert s["error_code"] == 0
    return r["member_id"], r["generation_id"]


def test_find_coordinator_versions(conn, gbroker):
    for v in range(4):
        r = conn.request("FindCoordinator", {"key": "g-find", "key_type": 0}, version=v)
        assert (r["error_code"], r["node_id"], r["port"]) == (0, 0, gbroker.port)
    r = conn.request("FindCoordinator", {"key_type": 0, "coordinator_keys": ["a", "b"]}, version=4)
    assert [(c["key"], c["error_code"], c["port"]) for c in r["coordinators"]] == [("a", 0, gbroker.port),
                                                                                ("b", 0, gbroker.port)]
    # key type 1: the transaction coordinator (tests/integration/test_txn_coordinator.py covers it)
    r = conn.request("FindCoordinator", {"key": "txn", "key_type": 1}, version=1)
    assert (r["error_code"], r["node_id"], r["port"]) == (0, 0, gbroker.port)
    md = conn.request("Metadata", {"topics": [{"name": "__consumer_offsets"}]}, version=1)
    t = md["topics"][0]
    assert t["is_internal"] and len(t["partitions"]) == 5


def test_join_protocol_type_mismatch(conn):
    _stable_member(conn, "g-type")
    assert _join(conn, "g-type", ptype="connect")["error_code"] == errors.INCONSISTENT_GROUP_PROTOCOL
    assert _join(conn, "g-type", name="roundrobin")["error_code"] == errors.INCONSISTENT_GROUP_PROTOCOL
    assert _join(conn, "g-type-empty", ptype="")["error_code"] == errors.INCONSISTENT_GROUP_PROTOCOL


def test_join_session_timeout_out_of_range(conn):
    assert _join(conn, "g-sess", session=999)["error_code"] == errors.INVALID_SESSION_TIMEOUT
    assert _join(conn, "g-sess", session=60001)["error_code"] == errors.INVALID_SESSION_TIMEOUT


def test_join_v4_member_id_required_and_invalid_group(conn):
    r = _join(conn, "g-kip394", version=4)
    assert r["error_code"] == errors.MEMBER_ID_REQUIRED and r["member_id"].startswith("raw-")
    r2 = _join(conn, "g-kip394", member_id=r["member_id"], version=4)
    assert r2["error_code"] == 0 and r2["member_id"] == r["member_id"] and r2["generation_id"] == 1
    assert _join(conn, "")["error_code"] == errors.INVALID_GROUP_ID
    assert _join(conn, "g-unknown-member", member_id="nobody")["error_code"] == errors.UNKNOWN_MEMBER_ID


def test_sync_from_stale_generation(conn):
    mid, gen = _stable_member(conn, "g-stale")
    s = conn.request("SyncGroup", {"group_id": "g-stale", "generation_id": gen - 1, "member_id": mid,
                                   "assignments": []}, version=1)
    assert s["error_code"] == errors.ILLEGAL_GENERATION
    h = conn.request("Heartbeat", {"group_id": "g-stale", "generation_id": gen + 5, "member_id": mid}, version=1)
    assert h["error_code"] == errors.ILLEGAL_GENERATION
    h = conn.request("Heartbeat", {"group_id": "g-stale", "generation_id": gen, "member_id": mid}, version=4)
    assert h["error_code"] == 0


def test_offset_commit_unknown_member(conn):
    conn.request("CreateTopics", {"topics": [{"name": "gt", "num_partitions": 2, "replication_factor": 1,
                                              "assignments": [], "configs": []}], "timeout_ms": 5000}, version=1)
    mid, gen = _stable_member(conn, "g-commit")
    body = {"group_id": "g-commit", "generation_id_or_member_epoch": gen, "member_id": "ghost",
            "topics": [{"name": "gt", "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                      "committed_metadata": ""}]}]}
    for v in (2, 8):
        r = conn.request("OffsetCommit", body, version=v)
        assert r["topics"][0]["partitions"][0]["error_code"] == errors.UNKNOWN_MEMBER_ID
    body["member_id"] = mid
    body["generation_id_or_member_epoch"] = gen + 1
    r = conn.request("OffsetCommit", body, version=2)
    assert r["topics"][0]["partitions"][0]["error_code"] == errors.ILLEGAL_GENERATION
    body["generation_id_or_member_epoch"] = gen
    body["topics"][0]["partitions"].append({"partition_index": 7, "committed_offset": 1, "committed_metadata": ""})
    r = conn.request("OffsetCommit", body, version=8)
    assert [p["error_code"] for p in r["topics"][0]["partitions"]] == [0, errors.UNKNOWN_TOPIC_OR_PARTITION]
    f = conn.request("OffsetFetch", {"group_id": "g-commit", "topics": None}, version=7)
    assert f["error_code"] == 0
    assert [(t["name"], [(p["partition_index"], p["committed_offset"]) for p in t["partitions"]])
            for t in f["topics"]] == [("gt", [(0, 5)])]
    f = conn.request("OffsetFetch", {"group_id": "g-commit", "topics": [{"name": "gt", "partition_indexes": [1]}]},
                     version=1)
    assert f["topics"][0]["partitions"][0]["committed_offset"] == -1


def test_describe_list_delete(conn):
    mid, gen = _stable_member(conn, "g-admin")
    d = conn.request("DescribeGroups", {"groups": ["g-admin", "g-none"]}, version=4)
    assert [(g["group_id"], g["group_state"], g["protocol_data"]) for g in d["groups"]] == [
        ("g-admin", "Stable", "range"), ("g-none", "Dead", "")]
    assert d["groups"][0]["members"][0]["member_id"] == mid
    assert d["groups"][0]["members"][0]["client_host"] == "/127.0.0.1"
    lg = conn.request("ListGroups", {"states_filter": ["stable"]}, version=4)
    assert ("g-admin", "consumer", "Stable") in [(g["group_id"], g["protocol_type"], g["group_state"])
                                                 for g in lg["groups"]]
    r = conn.request("DeleteGroups", {"groups_names": ["g-admin", "g-none"]}, version=2)
    assert [x["error_code"] for x in r["results"]] == [errors.NON_EMPTY_GROUP, errors.GROUP_ID_NOT_FOUND]
    lv = conn.request("LeaveGroup", {"group_id": "g-admin", "members": [{"member_id": mid}, {"member_id": "x"}]},
                      version=3)
    assert lv["error_code"] == 0 and [m["error_code"] for m in lv["members"]] == [0, errors.UNKNOWN_MEMBER_ID]
    r = conn.request("DeleteGroups", {"groups_names": ["g-admin"]}, version=0)
    assert r["results"][0]["error_code"] == 0
