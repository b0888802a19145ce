"""The Metadata handler's per-topic answers memoized in the MetadataCache (kbroker/server/metadata_cache.py ``memo``):
reused while nothing changed, rebuilt after a topic's states or the live brokers change."""
from kbroker.handlers import metadata as mh
from kbroker.server.metadata_cache import MetadataCache


def _update(cache, brokers, topics):
    """topics: {name: {partition: (leader, [replicas])}}"""
    cache.update({"controller_id": 0, "controller_epoch": 1,
                  "live_brokers": [{"id": b, "endpoints": [{"listener": "PLAINTEXT", "host": "h", "port": 9092 + b,
                                                            "security_protocol": 0}], "rack": None} for b in brokers],
                  "topic_states": [{"topic_name": t, "partition_states": [
                      {"partition_index": p, "leader": leader, "leader_epoch": 0, "isr": list(reps),
                       "replicas": list(reps), "offline_replicas": [], "zk_version": 0, "controller_epoch": 1}
                      for p, (leader, reps) in parts.items()]} for t, parts in topics.items()]}, 8)


def _answer(cache, name, version=9):
    return cache.memo(name, version == 0, lambda meta: mh._topic(cache.alive_broker_ids(), name, meta, version))


def test_memo_reused_until_the_topic_or_the_live_brokers_change():
    cache = MetadataCache()
    _update(cache, [0, 1], {"a": {0: (0, [0, 1]), 1: (1, [1, 0])}, "b": {0: (1, [1])}})
    first = _answer(cache, "a")
    assert [(p["partition_index"], p["leader_id"], p["error_code"]) for p in first["partitions"]] == [(0, 0, 0),
                                                                                                      (1, 1, 0)]
    assert _answer(cache, "a") is first                      # nothing changed: the same object
    b_first = _answer(cache, "b")
    _update(cache, [0, 1], {"a": {1: (0, [1, 0])}})           # a's partition 1 moves: a rebuilt, b kept
    second = _answer(cache, "a")
    assert second is not first and [p["leader_id"] for p in second["partitions"]] == [0, 0]
    assert _answer(cache, "b") is b_first
    _update(cache, [0], {})                                   # broker 1 dies: every answer rebuilt
    third = _answer(cache, "b")
    assert third is not b_first and third["partitions"][0]["error_code"] == 5 \
        and third["partitions"][0]["leader_id"] == -1 and third["partitions"][0]["offline_replicas"] == [1]
    assert _answer(cache, "missing") is None


def test_memo_v0_answer_is_kept_apart():
    cache = MetadataCache()
    _update(cache, [0], {"a": {0: (0, [0, 1])}})
    v0, v9 = _answer(cache, "a", 0), _answer(cache, "a", 9)
    assert v0["partitions"][0]["replica_nodes"] == [0] and v0["partitions"][0]["error_code"] == 9
    assert v9["partitions"][0]["replica_nodes"] == [0, 1] and v9["partitions"][0]["error_code"] == 0


def test_deleted_topic_leaves_the_memo():
    cache = MetadataCache()
    _update(cache, [0], {"a": {0: (0, [0])}})
    assert _answer(cache, "a") is not None
    _update(cache, [0], {"a": {0: (-2, [0])}})
    assert _answer(cache, "a") is None and "a" not in cache._memo
