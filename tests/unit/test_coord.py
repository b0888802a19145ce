import json
import os
import shutil
import subprocess
import sys
import threading
import time
import zlib

import pytest

import kbroker.coord.embedded as E
import kbroker.coord.journal as J
from kbroker import errors
from kbroker.coord import (
    BadVersionError, CoordinationError, EmbeddedBackend, NoChildrenForEphemeralsError, NodeExistsError, NoNodeError,
    NotEmptyError, PartitionState, TopicStore, ensure_persistent_paths, validate_topic_name,
)
from kbroker.coord.znodes import (
    PERSISTENT_PATHS, BrokerIdZNode, ClusterIdZNode, ConfigEntityChangeNotificationSequenceZNode, ConfigEntityZNode,
    ConsumerOffsetZNode, ControllerEpochZNode, ControllerZNode, DeleteTopicsZNode, IsrChangeNotificationSequenceZNode,
    TopicPartitionStateZNode, TopicZNode,
)


@pytest.fixture
def be(tmp_path):
    b = EmbeddedBackend(str(tmp_path)).start()
    yield b
    b.stop()


def reopen(b, tmp_path):
    b.stop()
    return EmbeddedBackend(str(tmp_path)).start()


# -- embedded backend basics -----------------------------------------------------------------------------------

def test_create_get_set_versions(be):
    assert be.create("/a", b"x") == "/a"
    data, stat = be.get("/a")
    assert data == b"x"
    assert stat.version == 0 and stat.ephemeral_owner == 0 and stat.ctime == stat.mtime
    st = be.set("/a", b"y")
    assert st.version == 1
    st = be.set("/a", b"z", version=1)
    assert st.version == 2
    assert be.get("/a") == (b"z", st)
    assert be.exists("/a") == st
    assert be.exists("/nope") is None


def test_bad_version(be):
    be.create("/a", b"")
    with pytest.raises(BadVersionError):
        be.set("/a", b"1", version=3)
    with pytest.raises(BadVersionError):
        be.delete("/a", version=1)
    be.delete("/a", version=0)
    assert be.exists("/a") is None


def test_node_exists_and_no_node(be):
    be.create("/a")
    with pytest.raises(NodeExistsError):
        be.create("/a")
    with pytest.raises(NoNodeError):
        be.create("/x/y")
    with pytest.raises(NoNodeError):
        be.get("/x")
    with pytest.raises(NoNodeError):
        be.set("/x", b"")
    with pytest.raises(NoNodeError):
        be.delete("/x")
    with pytest.raises(NoNodeError):
        be.get_children("/x")
    assert be.create("/x/y/z", b"d", makepath=True) == "/x/y/z"
    assert be.get("/x/y")[0] == b""
    assert be.get_children("/x") == ["y"]


def test_not_empty_and_recursive_delete(be):
    be.create("/t/p/0/state", b"s", makepath=True)
    be.create("/t/p/1", makepath=True)
    with pytest.raises(NotEmptyError):
        be.delete("/t")
    be.delete("/t", recursive=True)
    assert be.exists("/t") is None
    assert be.get_children("/") == []


def test_children_sorted(be):
    for n in ("b", "a", "c"):
        be.create("/p/" + n, makepath=True)
    assert be.get_children("/p") == ["a", "b", "c"]


def test_sequence_numbering_follows_cversion(be):
    be.ensure_path("/config/changes")
    p0 = be.create("/config/changes/config_change_", b"0", sequence=True)
    p1 = be.create("/config/changes/config_change_", b"1", sequence=True)
    assert p0 == "/config/changes/config_change_0000000000"
    assert p1 == "/config/changes/config_change_0000000001"
    be.delete(p0)
    be.create("/config/changes/other")
    # cversion counts creates and deletes: 2 creates + 1 delete + 1 create = 4
    assert be.create("/config/changes/config_change_", sequence=True) == "/config/changes/config_change_0000000004"


def test_bad_paths(be):
    for p in ("a", "/a/", "//a", "/a/../b", "/a/./b"):
        with pytest.raises(ValueError):
            be.create(p)
    with pytest.raises(ValueError):
        be.delete("/")


def test_ephemeral_owner_and_no_children(be):
    p = be.create("/brokers/ids/1", b"{}", ephemeral=True, makepath=True)
    assert be.get(p)[1].ephemeral_owner == be.session_id != 0
    assert be.get("/brokers/ids")[1].ephemeral_owner == 0
    with pytest.raises(NoChildrenForEphemeralsError):
        be.create("/brokers/ids/1/x")


def test_ephemeral_not_persisted_and_gone_on_stop(be, tmp_path):
    be.create("/brokers/ids/1", b"e", ephemeral=True, makepath=True)
    be.create("/keep", b"k")
    be.compact()  # changes go to the journal; a compaction (or the next start) writes them to the snapshot
    with open(be.snapshot_path) as f:
        paths = [n["path"] for n in json.load(f)["nodes"]]
    assert paths == ["/", "/brokers", "/brokers/ids", "/keep"]
    b2 = reopen(be, tmp_path)
    try:
        assert b2.get_children("/brokers/ids") == []
        assert b2.get("/keep")[0] == b"k"
    finally:
        b2.stop()


def test_persistence_across_reopen(tmp_path):
    b = EmbeddedBackend(str(tmp_path)).start()
    b.create("/a", b'{"x":1}')
    b.set("/a", b'{"x":2}')
    b.create("/bin", b"\xff\x00\x01")
    b.create("/s/q_", sequence=True, makepath=True)
    stat_a = b.get("/a")[1]
    b2 = reopen(b, tmp_path)
    try:
        assert b2.get("/a") == (b'{"x":2}', stat_a)
        assert b2.get("/bin")[0] == b"\xff\x00\x01"
        # the sequence counter survives the restart
        assert b2.create("/s/q_", sequence=True) == "/s/q_0000000001"
        assert os.path.isdir(os.path.join(str(tmp_path), "__kbroker_meta"))
        assert not os.path.exists(b2.snapshot_path + ".tmp")
    finally:
        b2.stop()


def test_snapshot_is_readable_json(be):
    be.create("/cluster/id", ClusterIdZNode.encode("abc"), makepath=True)
    be.compact()
    with open(be.snapshot_path) as f:
        doc = json.load(f)
    node = [n for n in doc["nodes"] if n["path"] == "/cluster/id"][0]
    assert node["data"] == '{"version":"1","id":"abc"}'


def test_corrupt_snapshot_refused(tmp_path):
    meta = tmp_path / "__kbroker_meta"
    meta.mkdir()
    (meta / "tree.json").write_text("{not json")
    with pytest.raises(CoordinationError, match="corrupt"):
        EmbeddedBackend(str(tmp_path)).start()


def test_second_instance_locked_out(be, tmp_path):
    with pytest.raises(CoordinationError, match="in use"):
        EmbeddedBackend(str(tmp_path)).start()


def test_not_started(tmp_path):
    with pytest.raises(CoordinationError):
        EmbeddedBackend(str(tmp_path)).get("/")


# -- watches ------------------------------------------------------------------------------------------------------

def test_data_watch_fires(be):
    seen = []
    be.watch_data("/w", lambda d, s: seen.append((d, s.version if s else None)))
    be.create("/w", b"1")
    be.set("/w", b"2")
    be.delete("/w")
    assert seen == [(None, None), (b"1", 0), (b"2", 1), (None, None)]


def test_children_watch_fires(be):
    be.ensure_path("/brokers/ids")
    seen = []
    be.watch_children("/brokers/ids", seen.append)
    be.create("/brokers/ids/2", ephemeral=True)
    be.create("/brokers/ids/1", ephemeral=True)
    be.set("/brokers/ids/1", b"x")  # data change: no children event
    be.delete("/brokers/ids/2")
    assert seen == [[], ["2"], ["1", "2"], ["1"]]


def test_watch_cancel_and_return_false(be):
    a, b = [], []
    w = be.watch_data("/n", lambda d, s: a.append(d))
    be.watch_data("/n", lambda d, s: b.append(d) or (False if d == b"1" else None))
    be.create("/n", b"1")
    w.cancel()
    be.set("/n", b"2")
    assert a == [None, b"1"]
    assert b == [None, b"1"]


def test_watch_fires_on_ephemeral_removal_at_stop(tmp_path):
    b = EmbeddedBackend(str(tmp_path)).start()
    b.ensure_path("/brokers/ids")
    seen = []
    b.watch_children("/brokers/ids", seen.append)
    b.create("/brokers/ids/0", ephemeral=True)
    b.stop()
    assert seen == [[], ["0"], []]


def test_watch_callback_error_does_not_break_mutation(be):
    be.watch_data("/e", lambda d, s: 1 / 0 if d else None)
    be.create("/e", b"x")
    assert be.get("/e")[0] == b"x"


def test_watch_callback_may_mutate(be):
    def on_change(children):
        if "trigger" in children and be.exists("/out") is None:
            be.create("/out", b"done")
    be.ensure_path("/in")
    be.watch_children("/in", on_change)
    be.create("/in/trigger")
    assert be.get("/out")[0] == b"done"


# -- znode codecs (Kafka's exact JSON) -------------------------------------------------------------------------

def test_broker_id_znode():
    assert BrokerIdZNode.path(3) == "/brokers/ids/3"
    raw = BrokerIdZNode.encode([("PLAINTEXT", "h1", 9092), ("SSL", "h1", 9093)],
                               {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "SASL_SSL": "SASL_SSL"},
                               rack="r1", timestamp_ms=1476000000000)
    assert raw == (b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","SSL":"SSL"},'
                   b'"endpoints":["PLAINTEXT://h1:9092","SSL://h1:9093"],"jmx_port":-1,"host":"h1",'
                   b'"timestamp":"1476000000000","port":9092,"version":4,"rack":"r1"}')
    obj = json.loads(raw)
    assert obj["version"] == 4 and obj["timestamp"] == "1476000000000" and obj["jmx_port"] == -1
    reg = BrokerIdZNode.decode(raw)
    assert reg.endpoints == [("PLAINTEXT", "h1", 9092), ("SSL", "h1", 9093)]
    assert reg.security_protocol_map == {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"}
    assert (reg.host, reg.port, reg.rack, reg.timestamp, reg.version) == ("h1", 9092, "r1", 1476000000000, 4)


def test_broker_id_znode_no_plaintext_and_ipv6():
    raw = BrokerIdZNode.encode([("INTERNAL", "::1", 9094)], {"INTERNAL": "SSL"}, timestamp_ms=1)
    obj = json.loads(raw)
    assert obj["host"] is None and obj["port"] == -1
    assert obj["endpoints"] == ["INTERNAL://[::1]:9094"]
    assert "rack" not in obj
    assert BrokerIdZNode.decode(raw).endpoints == [("INTERNAL", "::1", 9094)]


def test_broker_id_znode_decodes_kafka_0101_v3():
    raw = (b'{"version":3,"host":"h1","port":9092,"endpoints":["PLAINTEXT://h1:9092","SSL://h1:9093"],'
           b'"jmx_port":-1,"timestamp":"1476000000000","rack":"r1"}')
    reg = BrokerIdZNode.decode(raw)
    assert reg.security_protocol_map == {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"}
    assert reg.endpoints[1] == ("SSL", "h1", 9093)
    assert reg.version == 3


def test_topic_znode():
    assert TopicZNode.path("t") == "/brokers/topics/t"
    raw = TopicZNode.encode({10: [3, 1], 0: [1, 2], 2: [2, 3], 1: [3, 1]})
    assert raw == b'{"version":1,"partitions":{"0":[1,2],"1":[3,1],"2":[2,3],"10":[3,1]}}'
    assert TopicZNode.decode(raw) == {0: [1, 2], 1: [3, 1], 2: [2, 3], 10: [3, 1]}
    modern = b'{"version":3,"topic_id":"x","partitions":{"0":[1]},"adding_replicas":{},"removing_replicas":{}}'
    assert TopicZNode.decode(modern) == {0: [1]}


def test_partition_state_znode():
    assert TopicPartitionStateZNode.path("t", 4) == "/brokers/topics/t/partitions/4/state"
    raw = TopicPartitionStateZNode.encode(leader=1, leader_epoch=0, isr=[1, 2, 3], controller_epoch=1)
    assert raw == b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}'
    assert TopicPartitionStateZNode.decode(raw, 5) == PartitionState(1, 0, [1, 2, 3], 1, 5)


def test_partition_state_znode_bytes_are_the_json_codecs():
    # The state znode is formatted directly (a failover writes thousands); the bytes must stay what the JSON codec
    # makes of the same object, in Kafka's key order.
    import json
    import random
    rnd = random.Random(7)
    for _ in range(500):
        leader, epoch, ce = rnd.randint(-1, 2**31 - 1), rnd.randint(0, 2**31 - 1), rnd.randint(0, 2**31 - 1)
        isr = [rnd.randint(0, 2**31 - 1) for _ in range(rnd.randint(0, 5))]
        want = json.dumps({"controller_epoch": ce, "leader": leader, "version": 1, "leader_epoch": epoch, "isr": isr},
                          separators=(",", ":")).encode()
        assert TopicPartitionStateZNode.encode(leader, epoch, tuple(isr), ce) == want
    assert TopicPartitionStateZNode.encode(True, 0, [False], 1) == (
        b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[0]}')


def test_config_znodes():
    assert ConfigEntityZNode.path("topics", "t") == "/config/topics/t"
    raw = ConfigEntityZNode.encode({"retention.ms": 86400000, "cleanup.policy": ["compact", "delete"],
                                    "preallocate": True})
    assert raw == (b'{"version":1,"config":{"retention.ms":"86400000","cleanup.policy":"compact,delete",'
                   b'"preallocate":"true"}}')
    assert ConfigEntityZNode.encode({}) == b'{"version":1,"config":{}}'
    assert ConfigEntityZNode.decode(raw)["retention.ms"] == "86400000"
    N = ConfigEntityChangeNotificationSequenceZNode
    assert N.path_prefix() == "/config/changes/config_change_"
    assert N.encode("topics/t") == b'{"version":2,"entity_path":"topics/t"}'
    assert N.decode(b'{"version":1,"entity_type":"topic","entity_name":"t"}') == "topics/t"


def test_controller_cluster_misc_znodes():
    assert ControllerZNode.path() == "/controller"
    assert ControllerZNode.encode(1, timestamp_ms=1476000000000) == \
        b'{"version":1,"brokerid":1,"timestamp":"1476000000000"}'
    assert ControllerZNode.decode(b'{"version":1,"brokerid":7,"timestamp":"1"}') == 7
    assert ControllerZNode.decode(b"7") == 7
    assert ControllerEpochZNode.path() == "/controller_epoch"
    assert ControllerEpochZNode.encode(3) == b"3"
    assert ControllerEpochZNode.decode(b"3") == 3
    assert ClusterIdZNode.path() == "/cluster/id"
    assert ClusterIdZNode.encode("AbCdEfGhIjKlMnOpQrStUv") == b'{"version":"1","id":"AbCdEfGhIjKlMnOpQrStUv"}'
    cid = ClusterIdZNode.generate()
    assert len(cid) == 22 and all(c.isalnum() or c in "-_" for c in cid)
    assert DeleteTopicsZNode.path("t") == "/admin/delete_topics/t"
    assert DeleteTopicsZNode.encode() == b""
    assert IsrChangeNotificationSequenceZNode.encode([("t", 0)]) == \
        b'{"version":1,"partitions":[{"topic":"t","partition":0}]}'
    assert ConsumerOffsetZNode.path("g", "t", 2) == "/consumers/g/offsets/t/2"
    assert ConsumerOffsetZNode.decode(ConsumerOffsetZNode.encode(42)) == 42


def test_ensure_persistent_paths(be):
    ensure_persistent_paths(be)
    ensure_persistent_paths(be)  # idempotent
    for p in PERSISTENT_PATHS:
        assert be.exists(p) is not None
    for p in ("/brokers/ids", "/brokers/topics", "/config/topics", "/config/changes", "/admin/delete_topics",
              "/isr_change_notification", "/brokers/seqid", "/consumers"):
        assert p in PERSISTENT_PATHS


# -- TopicStore -----------------------------------------------------------------------------------------------

@pytest.fixture
def store(be):
    ensure_persistent_paths(be)
    return TopicStore(be)


def test_create_topic_writes_config_then_topic(store, be):
    order = []

    def recorder(label):
        def fn(data, stat):
            if data is not None:
                order.append(label)
        return fn  # returns None: a watch callback returning exactly False would cancel itself

    be.watch_data("/config/topics/t", recorder("config"))
    be.watch_data("/brokers/topics/t", recorder("topic"))
    store.create_topic("t", {0: [1, 2], 1: [2, 1]}, {"retention.ms": "1000"})
    assert order == ["config", "topic"]
    assert be.get("/brokers/topics/t")[0] == b'{"version":1,"partitions":{"0":[1,2],"1":[2,1]}}'
    assert be.get("/config/topics/t")[0] == b'{"version":1,"config":{"retention.ms":"1000"}}'
    assert store.topics() == ["t"]
    assert store.assignment("t") == {0: [1, 2], 1: [2, 1]}
    assert store.topic_config("t") == {"retention.ms": "1000"}


def test_create_topic_without_configs_writes_empty_config(store, be):
    store.create_topic("u", {0: [0]})
    assert be.get("/config/topics/u")[0] == b'{"version":1,"config":{}}'


def test_create_topic_errors(store):
    store.create_topic("a.b", {0: [1]})
    with pytest.raises(errors.TopicAlreadyExists) as ei:
        store.create_topic("a.b", {0: [1]})
    assert ei.value.code == 36
    with pytest.raises(errors.InvalidTopicException, match="collides"):
        store.create_topic("a_b", {0: [1]})
    with pytest.raises(errors.InvalidReplicaAssignment):
        store.create_topic("x", {0: [1, 2], 1: [1]})
    with pytest.raises(errors.InvalidReplicaAssignment):
        store.create_topic("x", {0: [1, 1]})
    with pytest.raises(errors.InvalidReplicaAssignment):
        store.create_topic("x", {0: [1], 2: [1]})
    with pytest.raises(errors.InvalidPartitions):
        store.create_topic("x", {})
    with pytest.raises(errors.InvalidTopicException) as ei:
        store.create_topic("bad name", {0: [1]})
    assert ei.value.code == 17
    assert store.topics() == ["a.b"]


def test_delete_topic(store, be):
    store.create_topic("t", {0: [1]}, {"cleanup.policy": "compact"})
    store.set_partition_state("t", 0, 1, [1], 0, 1)
    store.mark_for_deletion("t")
    store.mark_for_deletion("t")  # idempotent
    assert store.topics_marked_for_deletion() == ["t"]
    store.delete_topic("t")
    assert store.topics() == []
    assert be.exists("/config/topics/t") is None
    assert store.topics_marked_for_deletion() == []
    with pytest.raises(errors.UnknownTopicOrPartition):
        store.delete_topic("t")
    with pytest.raises(errors.UnknownTopicOrPartition):
        store.mark_for_deletion("t")
    with pytest.raises(errors.UnknownTopicOrPartition):
        store.assignment("t")


def test_add_partitions(store, be):
    store.create_topic("t", {0: [1, 2], 1: [2, 1]})
    full = store.add_partitions("t", {2: [1, 2], 3: [2, 1]})
    assert full == {0: [1, 2], 1: [2, 1], 2: [1, 2], 3: [2, 1]}
    assert be.get("/brokers/topics/t")[1].version == 1
    # the full assignment may be passed back with more partitions
    assert len(store.add_partitions("t", {**full, 4: [1, 2]})) == 5
    with pytest.raises(errors.InvalidPartitions):
        store.add_partitions("t", full)
    with pytest.raises(errors.InvalidReplicaAssignment):
        store.add_partitions("t", {0: [2, 1], 5: [1, 2]})
    with pytest.raises(errors.InvalidReplicaAssignment):
        store.add_partitions("t", {6: [1, 2]})  # gap: 5 missing
    with pytest.raises(errors.InvalidReplicaAssignment):
        store.add_partitions("t", {5: [1]})  # replication factor differs
    with pytest.raises(errors.UnknownTopicOrPartition):
        store.add_partitions("nope", {0: [1]})


def test_set_topic_config_notifies(store, be):
    store.create_topic("t", {0: [1]})
    seen = []
    be.watch_children("/config/changes", seen.append)
    store.set_topic_config("t", {"retention.ms": 5, "cleanup.policy": "compact"})
    assert store.topic_config("t") == {"retention.ms": "5", "cleanup.policy": "compact"}
    assert seen[-1] == ["config_change_0000000000"]
    data, _ = be.get("/config/changes/config_change_0000000000")
    assert data == b'{"version":2,"entity_path":"topics/t"}'
    store.set_topic_config("t", {})
    assert store.topic_config("t") == {}
    assert be.get_children("/config/changes") == ["config_change_0000000000", "config_change_0000000001"]
    with pytest.raises(errors.UnknownTopicOrPartition):
        store.set_topic_config("nope", {})


def test_partition_state(store):
    store.create_topic("t", {0: [1, 2]})
    assert store.partition_state("t", 0) is None
    assert store.set_partition_state("t", 0, leader=1, isr=[1, 2], leader_epoch=0, controller_epoch=1) == 0
    st = store.partition_state("t", 0)
    assert st == PartitionState(1, 0, [1, 2], 1, 0)
    assert store.set_partition_state("t", 0, 1, [1], 0, 1, expected_version=0) == 1
    with pytest.raises(BadVersionError):
        store.set_partition_state("t", 0, 1, [1, 2], 0, 1, expected_version=0)
    assert store.partition_state("t", 0).isr == [1]
    assert store.partitions_with_state("t") == [0]


def test_cluster_id_created_once(store, tmp_path):
    cid = store.cluster_id()
    assert len(cid) == 22
    assert store.cluster_id() == cid
    b2 = reopen(store.backend, tmp_path)
    try:
        assert TopicStore(b2).cluster_id() == cid
    finally:
        b2.stop()


@pytest.mark.parametrize("name", ["a", "A-b_c.9", "x" * 249, "__consumer_offsets"])
def test_valid_topic_names(name):
    assert validate_topic_name(name) == name


@pytest.mark.parametrize("name", ["", ".", "..", "x" * 250, "a b", "a/b", "é", "a:b", None])
def test_invalid_topic_names(name):
    with pytest.raises(errors.InvalidTopicException) as ei:
        validate_topic_name(name)
    assert ei.value.code == 17


def test_create_many_reports_per_item_in_order(be):
    be.create("/a", b"x")
    out = be.create_many([("/a", b"dup", False), ("/b/c/d", b"deep", True), ("/e/f", b"orphan", False),
                          ("/g", b"plain", False)])
    assert out[0].__class__ is NodeExistsError and out[2].__class__ is NoNodeError
    assert out[1] == "/b/c/d" and out[3] == "/g"
    assert be.get("/a")[0] == b"x" and be.get("/b/c/d")[0] == b"deep" and be.get("/g")[0] == b"plain"
    assert be.exists("/e") is None
    assert be.create_many([]) == []


def test_set_many_reports_per_item_and_is_fenced_by_check(be):
    be.create("/controller_epoch", b"1")
    for p in ("/a", "/b", "/c"):
        be.create(p, b"0")
    be.set("/b", b"moved")
    waves = []
    out = be.set_many([("/a", b"1", 0), ("/b", b"1", 0), ("/nope", b"1", 0), ("/c", b"1", -1)],
                      check=("/controller_epoch", 0), on_wave=lambda ix, res: waves.append((list(ix), list(res))))
    assert out[0].version == 1 and out[1].__class__ is BadVersionError and out[2].__class__ is NoNodeError
    # on_wave: every item's final result exactly once, before the call returned.
    assert sorted(i for ix, _res in waves for i in ix) == [0, 1, 2, 3]
    assert all(out[i] is r for ix, res in waves for i, r in zip(ix, res))
    assert out[3].version == 1 and be.get("/b")[0] == b"moved" and be.get("/c")[0] == b"1"
    be.set("/controller_epoch", b"2")
    with pytest.raises(BadVersionError) as ei:
        be.set_many([("/a", b"zombie", 1)], check=("/controller_epoch", 0))
    assert ei.value.path == "/controller_epoch" and be.get("/a")[0] == b"1"
    got = be.get_many(["/a", "/nope"])
    assert got[0][0] == b"1" and got[0][1].version == 1 and got[1] == (None, None)
    be.delete_many(["/a", "/nope", "/b"])
    assert be.exists("/a") is None and be.exists("/b") is None and be.get("/c")[0] == b"1"


def test_czxid_unique_increasing_and_survives_restart(tmp_path):
    """czxid is the broker epoch's source (KIP-380): a node deleted and created again, even across a restart and
    even when ephemeral, must get a strictly larger one."""
    b = EmbeddedBackend(str(tmp_path)).start()
    b.create("/brokers/ids/1", b"{}", ephemeral=True, makepath=True)
    first = b.get("/brokers/ids/1")[1].czxid
    ids_parent = b.get("/brokers/ids")[1].czxid
    assert 0 < ids_parent < first
    b.delete("/brokers/ids/1")
    b.create("/brokers/ids/1", b"{}", ephemeral=True)
    second = b.get("/brokers/ids/1")[1].czxid
    assert second == first + 1
    b2 = reopen(b, tmp_path)
    try:
        assert b2.exists("/brokers/ids/1") is None
        assert b2.get("/brokers/ids")[1].czxid == ids_parent
        b2.create("/brokers/ids/1", b"{}", ephemeral=True)
        assert b2.get("/brokers/ids/1")[1].czxid == second + 1
    finally:
        b2.stop()


# -- embedded store: journal, snapshot, compaction, recovery (issue 8) -------------------------------------------


def _meta(tmp):
    return os.path.join(str(tmp), E.META_DIR)


def _journal_lines(tmp):
    files = J.journal_files(_meta(tmp))
    out = []
    for _first, path in files:
        with open(path, "rb") as f:
            out += f.read().split(b"\n")[:-1]
    return out


def _tree_state(b, path="/"):
    """Every node under ``path``: {path: (data, version, cversion, czxid)} (cversion read from the node)."""
    out = {}
    node = b._find(path)
    out[path] = (node.data, node.version, node.cversion, node.czxid)
    for child in b.get_children(path):
        out.update(_tree_state(b, path.rstrip("/") + "/" + child))
    return out


def _crash_copy(src_tmp, dst_tmp):
    """The metadata directory as a crash would leave it right now (files as they are; the lock is not copied)."""
    dst = _meta(dst_tmp)
    os.makedirs(dst)
    for name in os.listdir(_meta(src_tmp)):
        if name != ".lock":
            shutil.copy(os.path.join(_meta(src_tmp), name), os.path.join(dst, name))
    return dst


def test_journal_record_format(be, tmp_path):
    be.create("/a", b'{"x":1}')
    be.create("/e", b"", ephemeral=True)
    be.set("/a", b"\xff")
    be.set("/e", b"nothing journaled")
    be.delete("/a")
    be.delete("/e")
    lines = _journal_lines(tmp_path)
    docs = []
    for line in lines:
        crc, payload = line.split(b" ", 1)
        assert int(crc, 16) == zlib.crc32(payload)
        docs.append(json.loads(payload))
    seq0 = docs[0]["seq"]
    assert [d["seq"] for d in docs] == list(range(seq0, seq0 + 5))
    create, eph_create, set_a, del_a, del_e = docs
    assert create["put"]["path"] == "/a" and create["put"]["data"] == '{"x":1}' and create["cv"][0] == "/"
    assert create["zxid"] == create["put"]["czxid"]
    assert set(eph_create) == {"seq", "zxid", "cv"} and eph_create["zxid"] == create["zxid"] + 1
    assert set_a["put"]["data_b64"] == "/w==" and set_a["put"]["version"] == 1 and "cv" not in set_a
    assert del_a["del"] == "/a" and del_a["cv"] == ["/", create["cv"][1] + 2]
    assert set(del_e) == {"seq", "cv"}


def test_restart_replays_the_journal_and_writes_a_fresh_snapshot(tmp_path):
    b = EmbeddedBackend(str(tmp_path)).start()
    for i in range(50):
        b.create("/t/p%d" % i, b"v%d" % i, makepath=True)
    b.set("/t/p3", b"changed")
    b.delete("/t/p4")
    seq = b._durable_seq
    want = _tree_state(b)
    b.stop()
    b2 = EmbeddedBackend(str(tmp_path)).start()
    try:
        assert _tree_state(b2) == want
        with open(b2.snapshot_path) as f:
            doc = json.load(f)
        assert doc["seq"] == seq and len(doc["nodes"]) == 1 + 1 + 49
        # the journal files were folded into the snapshot; an empty one takes the next records
        assert [first for first, _ in J.journal_files(_meta(tmp_path))] == [seq + 1]
        assert _journal_lines(tmp_path) == []
    finally:
        b2.stop()


@pytest.mark.parametrize("cut", ["no_newline", "half", "first_byte", "crc", "garbage_line"])
def test_torn_last_write_is_cut_off_and_earlier_records_survive(tmp_path, cut):
    """A crash in the middle of a write: the last batch of records reached the disk only partly. Everything
    written before it survives; the torn part is cut off (it was never acknowledged)."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    b = EmbeddedBackend(str(src)).start()
    try:
        b.create("/keep", b"k")
        b.set("/keep", b"k2")
        want = _tree_state(b)
        b.create("/lost", b"l")  # its record will be damaged
        meta = _crash_copy(src, dst)
    finally:
        b.stop()
    ((_first, path),) = J.journal_files(meta)
    with open(path, "rb") as f:
        data = f.read()
    last_start = data.rstrip(b"\n").rfind(b"\n") + 1
    last = data[last_start:]
    damaged = {
        "no_newline": last[:-1],
        "half": last[:len(last) // 2],
        "first_byte": last[:1],
        "crc": (b"0" if last[:1] != b"0" else b"1") + last[1:],
        "garbage_line": b"\x00" * 40 + b"\n",
    }[cut]
    with open(path, "wb") as f:
        f.write(data[:last_start] + damaged)
    b2 = EmbeddedBackend(str(dst)).start()
    try:
        assert _tree_state(b2) == want
        assert b2.exists("/lost") is None
        b2.create("/after", b"a")  # the store goes on from the last good record
        seq = b2._durable_seq
    finally:
        b2.stop()
    b3 = EmbeddedBackend(str(dst)).start()
    try:
        assert b3.get("/keep")[0] == b"k2" and b3.get("/after")[0] == b"a" and b3._durable_seq == seq
    finally:
        b3.stop()


def test_damage_before_the_last_file_or_a_gap_is_refused(tmp_path):
    """Only the last write can be torn; damage in an older journal file, or a missing file, lost acknowledged
    changes: start refuses instead of silently dropping them."""
    b = EmbeddedBackend(str(tmp_path)).start()
    b.create("/a", b"1")
    with b._lock:
        b._flushing = True
    b._run(b._journal.rotate, b._durable_seq + 1)  # a second journal file, as compaction starts one
    with b._lock:
        b._flushing = False
    b.create("/b", b"2")
    files = J.journal_files(_meta(tmp_path))
    assert len(files) == 2
    meta_ok = _crash_copy(tmp_path, tmp_path / "gap")
    meta_bad = _crash_copy(tmp_path, tmp_path / "bad")
    b.stop()
    os.unlink(J.journal_files(meta_ok)[0][1])  # the older file is gone: records missing
    with pytest.raises(CoordinationError, match="missing|damaged"):
        EmbeddedBackend(str(tmp_path / "gap")).start()
    older = J.journal_files(meta_bad)[0][1]
    with open(older, "r+b") as f:
        f.seek(3)
        f.write(b"z")
    with pytest.raises(CoordinationError, match="damaged"):
        EmbeddedBackend(str(tmp_path / "bad")).start()


def test_compaction_folds_the_journal_into_the_snapshot(tmp_path, monkeypatch):
    monkeypatch.setattr(E, "COMPACT_MIN_BYTES", 4096)
    b = EmbeddedBackend(str(tmp_path)).start()
    try:
        for i in range(300):
            b.create("/c/n%03d" % i, b"x" * 20, makepath=True)
        with open(b.snapshot_path) as f:
            snap = json.load(f)
        assert snap["seq"] > 0  # compacted along the way (inline: no gevent here)
        journal_bytes = sum(os.path.getsize(p) for _, p in J.journal_files(_meta(tmp_path)))
        assert journal_bytes <= 2 * max(4096, os.path.getsize(b.snapshot_path))
        first_files = [first for first, _ in J.journal_files(_meta(tmp_path))]
        assert all(first > snap["seq"] for first in first_files)
        want = _tree_state(b)
        b.compact()
        with open(b.snapshot_path) as f:
            snap = json.load(f)
        assert snap["seq"] == b._durable_seq and len(snap["nodes"]) == 302
        assert _journal_lines(tmp_path) == []
    finally:
        b.stop()
    b2 = EmbeddedBackend(str(tmp_path)).start()
    try:
        assert _tree_state(b2) == want
    finally:
        b2.stop()


def test_crash_during_compaction_loses_nothing(tmp_path):
    """Compaction writes tree.json.tmp, renames it over tree.json, then deletes the journal files it covered. A crash
    before the rename leaves the tmp file (deleted at start); one after it leaves covered journal files, whose
    records the snapshot already holds (skipped by seq, not applied twice)."""
    b = EmbeddedBackend(str(tmp_path)).start()
    b.create("/x", b"1")
    b.set("/x", b"2")
    want = _tree_state(b)
    old_files = {p: open(p, "rb").read() for _, p in J.journal_files(_meta(tmp_path))}
    b.compact()
    b.create("/y", b"3")
    want_y = dict(_tree_state(b))
    meta = _crash_copy(tmp_path, tmp_path / "after_rename")
    b.stop()
    for path, data in old_files.items():  # the deletion never happened
        with open(os.path.join(meta, os.path.basename(path)), "wb") as f:
            f.write(data)
    with open(os.path.join(meta, E.SNAPSHOT + ".tmp"), "wb") as f:
        f.write(b'{"format":1,"seq":999')  # and a torn tmp of another compaction
    b2 = EmbeddedBackend(str(tmp_path / "after_rename")).start()
    try:
        assert _tree_state(b2) == want_y
        assert b2.get("/x")[1].version == 1 == want["/x"][1]
        assert not os.path.exists(b2.snapshot_path + ".tmp")
    finally:
        b2.stop()


def test_old_single_document_snapshot_loads(tmp_path):
    meta = tmp_path / "__kbroker_meta"
    meta.mkdir()
    (meta / "tree.json").write_text(json.dumps({"format": 1, "nodes": [
        {"path": "/", "version": 0, "cversion": 1, "ctime": 0, "mtime": 0, "data": ""},
        {"path": "/old", "version": 3, "cversion": 0, "ctime": 5, "mtime": 6, "data": "v"}]}))
    b = EmbeddedBackend(str(tmp_path)).start()
    try:
        assert b.get("/old")[0] == b"v" and b.get("/old")[1].version == 3
        assert b.get("/old")[1].czxid == 0
        b.create("/new")
        assert b.get("/new")[1].czxid == 1
    finally:
        b.stop()


class _GatedPool:
    """A stand-in for the gevent pool with real threads: ``apply`` runs in the caller after the gate opens,
    counting calls (flushes); ``spawn`` runs at once."""

    def __init__(self):
        self.gate = threading.Event()
        self.gate.set()
        self.applies = 0
        self.batches = []

    def apply(self, fn, args):
        self.gate.wait(10)
        self.applies += 1
        if getattr(fn, "__name__", "") == "append":
            self.batches.append(len(args[0]))
        return fn(*args)

    def spawn(self, fn, *args):
        fn(*args)
        return _Done()


class _Done:
    def ready(self):
        return True

    def wait(self, timeout=None):
        return None


def test_concurrent_changes_share_flushes_and_are_durable_when_acknowledged(tmp_path):
    pool = _GatedPool()
    b = EmbeddedBackend(str(tmp_path), pool=pool).start()
    acked = []
    try:
        pool.gate.clear()
        threads = [threading.Thread(target=lambda i=i: acked.append(b.create("/g%02d" % i, b"x"))) for i in range(20)]
        for t in threads:
            t.start()
        time.sleep(0.2)
        assert acked == []  # nothing acknowledged while the write is held
        pool.gate.set()
        for t in threads:
            t.join(10)
        assert len(acked) == 20
        assert sum(pool.batches) == 20 and len(pool.batches) < 20  # group commit
        assert b._durable_seq == b._last_seq
    finally:
        b.stop()
    meta = _meta(tmp_path)
    b2 = EmbeddedBackend(str(tmp_path)).start()
    try:
        assert sorted(b2.get_children("/")) == sorted(p[1:] for p in acked)
    finally:
        b2.stop()
    assert os.path.isdir(meta)


def test_reads_wait_until_changes_are_durable(tmp_path):
    pool = _GatedPool()
    b = EmbeddedBackend(str(tmp_path), pool=pool).start()
    try:
        pool.gate.clear()
        writer = threading.Thread(target=b.create, args=("/w", b"x"))
        writer.start()
        time.sleep(0.1)
        seen = []
        reader = threading.Thread(target=lambda: seen.append(b.exists("/w")))
        reader.start()
        time.sleep(0.2)
        assert seen == []  # the node exists in memory, but a crash now would lose it: the read waits
        pool.gate.set()
        writer.join(10)
        reader.join(10)
        assert seen[0] is not None
    finally:
        b.stop()


def test_failed_journal_write_makes_the_store_read_only(tmp_path):
    class FailingPool(_GatedPool):
        def apply(self, fn, args):
            if getattr(fn, "__name__", "") == "append":
                raise OSError(28, "No space left on device")
            return fn(*args)

    b = EmbeddedBackend(str(tmp_path), pool=FailingPool()).start()
    try:
        with pytest.raises(CoordinationError, match="No space left"):
            b.create("/a", b"x")
        with pytest.raises(CoordinationError, match="read-only"):
            b.create("/b", b"x")
        with pytest.raises(CoordinationError, match="read-only"):
            b.set("/a", b"y")
        assert b.get("/a")[0] == b"x"  # reads go on (from memory)
    finally:
        b.stop()


def test_create_many_of_10000_partition_states_is_fast_and_survives_restart(tmp_path):
    """The controller's new-partition path: the old store rewrote and fsync'd the whole tree per create (10,000
    states took 535 s); the journal writes ~20 flushes."""
    b = EmbeddedBackend(str(tmp_path)).start()
    items = [("/brokers/topics/t/partitions/%d/state" % p, b'{"leader":0}', True) for p in range(10000)]
    t0 = time.monotonic()
    out = b.create_many(items)
    took = time.monotonic() - t0
    assert out == [path for path, _, _ in items]
    assert took < 10, took
    b.stop()
    b2 = EmbeddedBackend(str(tmp_path)).start()
    try:
        assert len(b2.get_children("/brokers/topics/t/partitions")) == 10000
        assert b2.get("/brokers/topics/t/partitions/9999/state")[0] == b'{"leader":0}'
    finally:
        b2.stop()


_GEVENT_SCRIPT = r'''
from gevent import monkey; monkey.patch_all()
import json, sys, time
import gevent
import kbroker.coord.embedded as E
import kbroker.coord.journal as J

slow = J.Journal.append
def append(self, records):  # a slow disk: 0.3 s per write + fsync, in the native thread
    time.sleep(0.3)
    return slow(self, records)
J.Journal.append = append

b = E.EmbeddedBackend(sys.argv[1]).start()
gaps = []
def bystander():
    last = time.monotonic()
    while True:
        gevent.sleep(0.005)
        now = time.monotonic(); gaps.append(now - last); last = now
watch = gevent.spawn(bystander)
killed = gevent.spawn(b.create, "/killed", b"k")
gevent.sleep(0.1)
killed.kill()                      # its connection went away while it waited for the fsync
t0 = time.monotonic()
b.create("/after", b"a")           # the store goes on
took = time.monotonic() - t0
watch.kill()
b.stop()
b = E.EmbeddedBackend(sys.argv[1]).start()
print(json.dumps({"worst_gap": max(gaps), "took": took, "children": b.get_children("/"),
                  "pool": type(b._pool).__name__}))
b.stop()
'''


def test_under_gevent_fsync_is_off_the_loop_and_a_killed_waiter_breaks_nothing(tmp_path):
    """The broker's case: gevent patched. A 0.3 s write + fsync runs in a native thread (the loop's longest gap
    stays far below it); a greenlet killed while waiting for its fsync leaves the store working, and its change,
    written by the flushing greenlet, is there after a restart."""
    out = subprocess.run([sys.executable, "-c", _GEVENT_SCRIPT, str(tmp_path)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["pool"] == "ThreadPool"
    assert got["children"] == ["after", "killed"]
    assert got["took"] >= 0.25          # it really waited for its (slow) fsync
    assert got["worst_gap"] < 0.15, got  # while the loop kept running


def test_add_partitions_to_a_topic_deleted_after_the_read_is_unknown_topic(store, be):
    """A DeleteTopics the controller completes between add_partitions' read and its conditional set: the set
    finds no znode. That is UNKNOWN_TOPIC_OR_PARTITION, not an unexpected error (the fuzz on ZooKeeper hit it)."""
    store.create_topic("t", {0: [1]})
    real_set = be.set

    def set_after_the_delete(path, data, version=-1):
        store.delete_topic("t")
        return real_set(path, data, version=version)

    be.set = set_after_the_delete
    with pytest.raises(errors.UnknownTopicOrPartition):
        store.add_partitions("t", {1: [1]})


def test_a_topic_queued_for_deletion_is_not_grown(store, be):
    """Kafka answers CreatePartitions for a topic queued for deletion with INVALID_TOPIC_EXCEPTION (17)."""
    from kbroker.topic_admin import TopicAdmin
    store.create_topic("t", {0: [1]})
    admin = TopicAdmin(store, {}, None, None)
    assert not store.is_marked_for_deletion("t")
    store.mark_for_deletion("t")
    assert store.is_marked_for_deletion("t")
    with pytest.raises(errors.InvalidTopicException) as e:
        admin.create_partitions("t", 2)
    assert e.value.code == 17 and "queued for deletion" in str(e.value)
    assert store.assignment("t") == {0: [1]}
