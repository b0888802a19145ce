"""MetadataCache: UpdateMetadata of every served version, deletion by leader -2, controller-epoch fencing."""
from kbroker.protocol.apis import APIS
from kbroker.server.metadata_cache import BrokerEndpoint, CachedPartition, MetadataCache


def roundtrip(version, body):
    api = APIS[6]
    return api.decode_request(version, api.encode_request(version, body).getvalue())


def ps(p, leader, isr, replicas, **kw):
    d = {"partition_index": p, "controller_epoch": 3, "leader": leader, "leader_epoch": 4, "isr": isr,
         "zk_version": 7, "replicas": replicas, "offline_replicas": kw.get("offline", [])}
    if "topic" in kw:
        d["topic_name"] = kw["topic"]
    return d


BROKERS_V6 = [
    {"id": 2, "endpoints": [{"port": 9092, "host": "b2", "listener": "PLAINTEXT", "security_protocol": 0},
                            {"port": 9093, "host": "b2", "listener": "INTERNAL", "security_protocol": 1}],
     "rack": "r2"},
    {"id": 1, "endpoints": [{"port": 9192, "host": "b1", "listener": "PLAINTEXT", "security_protocol": 0}],
     "rack": None},
]


def test_update_v6_and_queries():
    c = MetadataCache()
    req = roundtrip(6, {"controller_id": 2, "controller_epoch": 3, "live_brokers": BROKERS_V6, "topic_states": [
        {"topic_name": "t", "partition_states": [ps(0, 1, [1, 2], [1, 2]), ps(1, -1, [2], [2, 3], offline=[3])]}]})
    assert c.update(req, 6) == []
    assert c.controller_id == 2 and c.controller_epoch == 3
    assert c.alive_brokers("PLAINTEXT") == [BrokerEndpoint(1, "b1", 9192, None), BrokerEndpoint(2, "b2", 9092, "r2")]
    assert c.alive_brokers("INTERNAL") == [BrokerEndpoint(2, "b2", 9093, "r2")]
    assert c.brokers[2].endpoints["INTERNAL"] == ("b2", 9093, "SSL")
    assert c.alive_broker_ids() == {1, 2}
    assert c.topics() == ["t"]
    assert c.partition("t", 1) == CachedPartition(-1, 4, [2], [2, 3], [3], 7, 3)
    assert c.leader("t", 0) == 1 and c.leader("t", 1) == -1 and c.leader("t", 5) is None and c.leader("x", 0) is None
    # Partial update: merged; a leader of -2 deletes; the broker list is replaced.
    req = roundtrip(6, {"controller_id": 2, "controller_epoch": 3, "live_brokers": BROKERS_V6[:1], "topic_states": [
        {"topic_name": "t", "partition_states": [ps(0, -2, [], [1, 2])]},
        {"topic_name": "u", "partition_states": [ps(0, 2, [2], [2])]}]})
    assert c.update(req, 6) == [("t", 0)]
    assert sorted(c.partitions("t")) == [1] and c.topics() == ["t", "u"]
    assert c.alive_broker_ids() == {2}
    req = roundtrip(6, {"controller_id": 2, "controller_epoch": 3, "live_brokers": BROKERS_V6[:1], "topic_states": [
        {"topic_name": "t", "partition_states": [ps(1, -2, [], [2, 3])]}]})
    assert c.update(req, 6) == [("t", 1)]
    assert c.topics() == ["u"] and not c.contains_topic("t")


def test_old_versions():
    c = MetadataCache()
    req = roundtrip(0, {"controller_id": 1, "controller_epoch": 1,
                        "live_brokers": [{"id": 1, "v0_host": "h", "v0_port": 9092}],
                        "ungrouped_partition_states": [ps(0, 1, [1], [1], topic="t")]})
    c.update(req, 0)
    assert c.alive_brokers("PLAINTEXT") == [BrokerEndpoint(1, "h", 9092, None)]
    assert c.partition("t", 0).offline_replicas == []
    req = roundtrip(1, {"controller_id": 1, "controller_epoch": 1, "live_brokers": [
        {"id": 1, "endpoints": [{"port": 9093, "host": "h", "security_protocol": 1}]}],
        "ungrouped_partition_states": []})
    c.update(req, 1)
    assert c.alive_brokers("SSL") == [BrokerEndpoint(1, "h", 9093, None)]
    req = roundtrip(4, {"controller_id": 1, "controller_epoch": 1, "live_brokers": [
        {"id": 1, "endpoints": [{"port": 9093, "host": "h", "listener": "EXT", "security_protocol": 0}], "rack": "r"}],
        "ungrouped_partition_states": [ps(0, 1, [1], [1, 2], topic="t", offline=[2])]})
    c.update(req, 4)
    assert c.alive_brokers("EXT") == [BrokerEndpoint(1, "h", 9093, "r")]
    assert c.partition("t", 0).offline_replicas == [2]


def test_controller_epoch_fencing():
    c = MetadataCache()
    assert c.accept_controller(1, 5)
    assert c.accept_controller(2, 5)      # same epoch: accepted
    assert not c.accept_controller(1, 4)  # older controller
    assert c.controller_epoch == 5 and c.controller_id == 2
    assert c.accept_controller(3, 6) and c.controller_id == 3


def test_broker_listeners_hear_of_brokers_that_joined():
    from kbroker.server.metadata_cache import MetadataCache

    def um(*ids):
        return {"controller_id": 1, "controller_epoch": 1, "topic_states": [],
                "live_brokers": [{"id": i, "endpoints": [{"port": 9092 + i, "host": "h", "listener": "PLAINTEXT",
                                                          "security_protocol": 0}], "rack": None} for i in ids]}
    cache = MetadataCache()
    heard = []
    cache.broker_listeners.append(heard.append)
    cache.update(um(1, 2, 3))
    cache.update(um(1, 3))                               # 2 gone: nothing joined
    cache.update(um(1, 3))
    cache.update(um(1, 2, 3))                            # 2 registered again
    assert heard == [frozenset({1, 2, 3}), frozenset({2})]
