"""DescribeLogDirs (35) and AlterReplicaLogDirs (34) handlers over a stub ReplicaAccess: Cluster authorization
(Describe / Alter), the topic filter, every version's response encoding, the per-partition codes and "the last path
asked wins"."""
import pytest

from kbroker import errors
from kbroker.handlers.alter_replica_log_dirs import alter_replica_log_dirs
from kbroker.handlers.describe_log_dirs import describe_log_dirs
from kbroker.security.acl import ALTER, CLUSTER, CLUSTER_NAME, DESCRIBE
from tests.unit.test_handler_authorization import Authorizer, ctx, request, roundtrip


class Replicas:
    """log_dir_usage / alter_log_dir of a broker with two log dirs."""

    def __init__(self):
        self.moves = []

    def log_dir_usage(self):
        return [("/d0", [(("a", 0), 100, 0, False), (("b", 1), 50, 0, False)]),
                ("/d1", [(("a", 0), 40, 60, True), (("a", 2), 7, 0, False)])]

    def alter_log_dir(self, topic, p, log_dir):
        self.moves.append((topic, p, log_dir))
        return errors.LOG_DIR_NOT_FOUND if log_dir not in ("/d0", "/d1") else 0


@pytest.mark.parametrize("version", range(5))
def test_describe_every_dir_every_version(version):
    c = ctx(Authorizer((DESCRIBE, CLUSTER, CLUSTER_NAME)), 35, version, replicas=Replicas())
    resp = roundtrip(35, version, describe_log_dirs(c, request(35, version, {"topics": None})))
    dirs = [(r["log_dir"], r["error_code"], [(t["name"], [(p["partition_index"], p["partition_size"],
                                                          p["offset_lag"], p["is_future_key"])
                                                         for p in t["partitions"]]) for t in r["topics"]])
            for r in resp["results"]]
    assert dirs == [("/d0", 0, [("a", [(0, 100, 0, False)]), ("b", [(1, 50, 0, False)])]),
                    ("/d1", 0, [("a", [(0, 40, 60, True), (2, 7, 0, False)])])]
    if version >= 4:
        assert all(r["total_bytes"] == -1 or r["total_bytes"] >= r["usable_bytes"] >= 0 for r in resp["results"])


def test_describe_filters_partitions_and_needs_cluster_describe():
    c = ctx(Authorizer((DESCRIBE, CLUSTER, CLUSTER_NAME)), 35, 4, replicas=Replicas())
    resp = describe_log_dirs(c, request(35, 4, {"topics": [{"topic": "a", "partitions": [0, 9]}]}))
    assert [(r["log_dir"], [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in r["topics"]])
            for r in resp["results"]] == [("/d0", [("a", [0])]), ("/d1", [("a", [0])])]
    denied = Authorizer()
    for version in (0, 3):
        resp = roundtrip(35, version, describe_log_dirs(ctx(denied, 35, version), request(35, version,
                                                                                             {"topics": None})))
        assert resp["results"] == []
        assert resp.get("error_code", 0) == (errors.CLUSTER_AUTHORIZATION_FAILED if version >= 3 else 0)
    assert denied.asked == [(DESCRIBE, CLUSTER, CLUSTER_NAME)] * 2


@pytest.mark.parametrize("version", range(3))
def test_alter_codes_and_the_last_path_wins(version):
    reps = Replicas()
    c = ctx(Authorizer((ALTER, CLUSTER, CLUSTER_NAME)), 34, version, replicas=reps)
    req = request(34, version, {"dirs": [
        {"path": "/d1", "topics": [{"name": "a", "partitions": [0, 1]}, {"name": "bad/name", "partitions": [0]}]},
        {"path": "/nosuch", "topics": [{"name": "a", "partitions": [1]}]}]})
    resp = roundtrip(34, version, alter_replica_log_dirs(c, req))
    assert [(t["topic_name"], [(p["partition_index"], p["error_code"]) for p in t["partitions"]])
            for t in resp["results"]] == [("a", [(0, 0), (1, errors.LOG_DIR_NOT_FOUND)]),
                                          ("bad/name", [(0, errors.INVALID_TOPIC_EXCEPTION)])]
    assert reps.moves == [("a", 0, "/d1"), ("a", 1, "/nosuch")]


def test_alter_needs_cluster_alter():
    reps = Replicas()
    c = ctx(Authorizer((DESCRIBE, CLUSTER, CLUSTER_NAME)), 34, 2, replicas=reps)
    resp = alter_replica_log_dirs(c, request(34, 2, {"dirs": [{"path": "/d1", "topics": [
        {"name": "a", "partitions": [0]}]}]}))
    assert resp["results"] == [{"topic_name": "a", "partitions": [
        {"partition_index": 0, "error_code": errors.CLUSTER_AUTHORIZATION_FAILED}]}]
    assert reps.moves == []
