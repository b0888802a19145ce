"""Cluster mode, the undisturbed path: 3 broker processes on a real 3-node ZooKeeper ensemble (chroot /kb).

One ensemble and one cluster for the module; the tests run in file order and only the last two touch ZooKeeper
nodes (one node lost, then the quorum lost and regained), each restoring the ensemble before it ends.
Covers issue 4: topics from the wire (CreateTopics) and from `kbroker-admin topics --zookeeper` reach every broker's
Metadata with leaders spread over the brokers; clients produce/consume across all leaders; the znodes match Kafka's
JSON (kafka-digest.md §E.1) field by field; ZooKeeper node loss is invisible to clients; quorum loss freezes
leadership changes without stopping produce to existing leaders, and the cluster heals when the quorum returns.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter

import pytest

from tests.integration.harness import REPO_ROOT, wait_until
from tests.integration.test_cluster_common import (
    FAILOVER_WAIT_S, SESSION_TIMEOUT_MS, Cluster, consume, create_topics, metadata, produce,
    records_for, reference_znodes)

pytestmark = [pytest.mark.zk, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, zk_ensemble):   # zk_ensemble: tests/integration/conftest.py
    c = Cluster(tmp_path_factory.mktemp("cluster"), zk_ensemble)
    try:
        c.start()
        yield c
    finally:
        c.close()


def admin_zk(cluster, *args, timeout=60):
    return subprocess.run([sys.executable, "-m", "kbroker.cli.admin", "topics", "--zookeeper", cluster.connect,
                           *args], capture_output=True, text=True, timeout=timeout, cwd=str(REPO_ROOT))


def snapshot(cluster, topics):
    """What clients see: every broker's brokers, controller and (leader, replicas) per partition."""
    out = {}
    for b in cluster.running():
        md = metadata(b, topics)
        out[b.broker_id] = (sorted(md["brokers"].items()), md["controller"],
                            {t: {p: (s["leader"], s["replicas"]) for p, s in md["topics"][t]["partitions"].items()}
                             for t in topics})
    return out


# ------------------------------------------------------------------------------------------------ topics

def test_wire_and_zookeeper_topics_reach_every_broker(cluster):
    create_topics(cluster.bootstrap, [("wire6", 6, 1), ("wire-rf3", 3, 3)])
    done = admin_zk(cluster, "--create", "--topic", "zk6", "--partitions", "6", "--replication-factor", "1")
    assert done.returncode == 0, done.stderr
    assert "Created topic" in done.stdout

    for topic, n, rf in (("wire6", 6, 1), ("wire-rf3", 3, 3), ("zk6", 6, 1)):
        lead = cluster.wait_topic_everywhere(topic, n)
        # Kafka's round-robin assignment over 3 brokers: each leads exactly n / 3 partitions.
        assert Counter(lead.values()) == {0: n // 3, 1: n // 3, 2: n // 3}, (topic, lead)
        for b in cluster.brokers:
            t = metadata(b, [topic])["topics"][topic]
            for p, s in t["partitions"].items():
                assert len(s["replicas"]) == rf and len(set(s["replicas"])) == rf
                assert s["leader"] == s["replicas"][0], (topic, p, s)   # a new partition's leader is preferred
                assert s["error"] == 0
        # Every broker's answer names the three brokers with their racks.
        for b in cluster.brokers:
            assert {i: r for i, (_, _, r) in metadata(b, [])["brokers"].items()} == {0: "r0", 1: "r1", 2: "r2"}

    # The tool's describe reads the state the controller wrote.
    done = admin_zk(cluster, "--describe", "--topic", "zk6")
    assert done.returncode == 0, done.stderr
    lines = [ln for ln in done.stdout.splitlines() if "Partition:" in ln and "PartitionCount" not in ln]
    assert len(lines) == 6 and all("Leader: none" not in ln for ln in lines), done.stdout


def test_clients_produce_and_consume_across_all_leaders(cluster):
    for topic in ("wire6", "zk6"):
        lead = cluster.wait_topic_everywhere(topic, 6)
        assert set(lead.values()) == {0, 1, 2}
        records = records_for(topic, range(6), per_partition=7)
        produce(cluster.bootstrap, topic, records)
        got = consume(cluster.bootstrap, topic, list(range(6)), expected=42)
        assert got == records


# ----------------------------------------------------------------------------------------------- znodes

def _same_fields(ours, ref, where):
    """Exact key set and per-key value type; maps keyed by ids (partitions, config) compare their values' types."""
    assert isinstance(ours, dict) and isinstance(ref, dict), where
    assert set(ours) == set(ref), f"{where}: keys {sorted(ours)} != reference {sorted(ref)}"
    for k, rv in ref.items():
        ov = ours[k]
        assert type(ov) is type(rv), f"{where}.{k}: {type(ov).__name__} != reference {type(rv).__name__}"
        if isinstance(rv, list) and rv and ov:
            assert {type(x) for x in ov} == {type(x) for x in rv}, f"{where}.{k} element types"
        if isinstance(rv, dict) and rv and ov:
            assert {type(x) for x in ov.values()} == {type(x) for x in rv.values()}, f"{where}.{k} value types"
            assert all(isinstance(x, str) for x in ov), f"{where}.{k} keys"


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_znodes_match_kafka_json(cluster):
    ref = reference_znodes()
    if ref is None:
        pytest.skip("reference digest absent")
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for f in admin.create_topics([NewTopic("cfg-topic", 2, 2, config={"retention.ms": "86400000",
                                                                     "cleanup.policy": "delete"})],
                                 operation_timeout=20).values():
        f.result(30)
    cluster.wait_topic_everywhere("cfg-topic", 2)

    # /brokers/ids/<id>: kbroker writes Kafka's version 4 (0.10.2+: adds listener_security_protocol_map to the
    # 0.10.1 version 3 shown in the digest); every 0.10.1 field is present with its type, rack because it is set.
    for b in cluster.brokers:
        data, stat = cluster.zk.get(f"/brokers/ids/{b.broker_id}")
        reg = json.loads(data)
        assert stat.ephemeralOwner != 0
        ref_reg = dict(ref["/brokers/ids/<id>"], listener_security_protocol_map={"PLAINTEXT": "PLAINTEXT"})
        _same_fields(reg, ref_reg, f"/brokers/ids/{b.broker_id}")
        assert reg["version"] == 4
        assert reg["endpoints"] == [f"PLAINTEXT://{b.host}:{b.port}"]
        assert (reg["host"], reg["port"], reg["jmx_port"], reg["rack"]) == (b.host, b.port, -1, f"r{b.broker_id}")
        assert reg["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
        assert abs(int(reg["timestamp"]) - time.time() * 1000) < 3600e3

    # /brokers/topics/<T>: version 1, partition id (string) -> replica list; same for wire- and tool-made topics.
    for topic in ("wire6", "zk6", "cfg-topic"):
        assign = cluster.get_json(f"/brokers/topics/{topic}")
        _same_fields(assign, ref["/brokers/topics/<T>"], f"/brokers/topics/{topic}")
        assert assign["version"] == 1
        md = metadata(cluster.brokers[0], [topic])["topics"][topic]["partitions"]
        assert assign["partitions"] == {str(p): s["replicas"] for p, s in md.items()}
        for p in md:
            state, stat = cluster.state(topic, p)
            _same_fields(state, ref["/brokers/topics/<T>/partitions/<P>/state"], f"{topic}-{p} state")
            assert stat.ephemeralOwner == 0   # persistent, as Kafka's code creates it
            assert state["version"] == 1 and state["leader"] == md[p]["leader"]
            assert state["isr"] == md[p]["isr"]
            assert state["controller_epoch"] <= cluster.controller_epoch()

    ctl, stat = cluster.zk.get("/controller")
    ctl = json.loads(ctl)
    _same_fields(ctl, ref["/controller"], "/controller")
    assert stat.ephemeralOwner != 0 and ctl["version"] == 1 and ctl["brokerid"] in (0, 1, 2)
    epoch_raw = cluster.zk.get("/controller_epoch")[0]
    assert epoch_raw == str(int(epoch_raw)).encode() and int(epoch_raw) >= 1   # plain integer text
    assert isinstance(ref["/controller_epoch"], int)

    cfg = cluster.get_json("/config/topics/cfg-topic")
    _same_fields(cfg, ref["/config/topics/<T>"], "/config/topics/cfg-topic")
    assert cfg == {"version": 1, "config": {"retention.ms": "86400000", "cleanup.policy": "delete"}}
    assert cluster.get_json("/config/topics/wire6") == {"version": 1, "config": {}}   # written even if empty

    cid = cluster.get_json("/cluster/id")
    _same_fields(cid, ref["/cluster/id"], "/cluster/id")
    assert cid["version"] == "1" and len(cid["id"]) == 22

    # An AlterConfigs writes the entity node and a version-2 change notification; every broker applies it.
    before = set(cluster.zk.get_children("/config/changes"))
    res = ConfigResource(ConfigResource.Type.TOPIC, "cfg-topic", set_config={"retention.ms": "3600000"})
    for f in admin.alter_configs([res]).values():
        f.result(20)
    assert cluster.get_json("/config/topics/cfg-topic")["config"]["retention.ms"] == "3600000"
    new = sorted(set(cluster.zk.get_children("/config/changes")) - before)
    assert len(new) == 1 and new[0].startswith("config_change_") and len(new[0]) == len("config_change_") + 10
    change = cluster.get_json(f"/config/changes/{new[0]}")
    _same_fields(change, ref["/config/changes/config_change_<10-digit seq>"], new[0])
    assert change == {"version": 2, "entity_path": "topics/cfg-topic"}
    for b in cluster.brokers:
        one = AdminClient({"bootstrap.servers": b.bootstrap})

        def applied():
            res_b = ConfigResource(ConfigResource.Type.TOPIC, "cfg-topic")
            entries = one.describe_configs([res_b])[res_b].result(10)
            return entries["retention.ms"].value == "3600000"

        wait_until(applied, 15, 0.2, f"broker {b.broker_id} to apply retention.ms", ignore=(Exception,))


# ----------------------------------------------------------------------------------------- ZooKeeper loss

def test_losing_one_zookeeper_node_changes_nothing_for_clients(cluster):
    ens = cluster.ensemble
    topics = ["wire6", "zk6"]
    before = snapshot(cluster, topics)
    owners = {i: cluster.zk.exists(f"/brokers/ids/{i}").ephemeralOwner for i in range(3)}
    epoch = cluster.controller_epoch()
    victim = ens.leader()   # the most disruptive node to lose: the quorum re-elects
    assert victim is not None
    ens.kill(victim)
    t0 = time.monotonic()
    try:
        # Keep clients busy for longer than a session timeout, then check nothing they can see moved.
        rounds = 0
        while time.monotonic() - t0 < SESSION_TIMEOUT_MS / 1000 + 2 or rounds < 2:
            records = records_for(f"zkloss{rounds}", range(6), per_partition=2)
            produce(cluster.bootstrap, "wire6", records)
            rounds += 1
        ens.wait_serving([i for i in range(3) if i != victim], 30)
        assert snapshot(cluster, topics) == before
        assert {i: cluster.zk.exists(f"/brokers/ids/{i}").ephemeralOwner for i in range(3)} == owners
        assert cluster.controller_epoch() == epoch
        got = consume(cluster.bootstrap, "wire6", list(range(6)), expected=7 * 6 + rounds * 12)
        assert sum(len(v) for v in got.values()) == 7 * 6 + rounds * 12
    finally:
        ens.start_node(victim, wait=True)


def test_quorum_loss_freezes_leadership_and_heals(cluster):
    ens = cluster.ensemble
    ens.wait_serving(range(3), 30)
    cluster.wait_converged()
    topics = ["wire6", "zk6"]
    before = snapshot(cluster, topics)
    lost = [0, 1]
    for i in lost:
        ens.stop_node(i)
    try:
        # Produce to existing leaders needs no ZooKeeper: it keeps working.
        during = records_for("noquorum", range(6), per_partition=3)
        produce(cluster.bootstrap, "zk6", during)
        # A topic creation cannot happen without a quorum: nothing reaches any broker's Metadata.
        try:
            create_topics(cluster.bootstrap, [("during-outage", 3, 1)], timeout=5)
        except Exception:  # noqa: BLE001 - the expected outcome: a timeout or an error code
            pass
        for b in cluster.brokers:
            assert "during-outage" not in metadata(b, None)["topics"]
        assert snapshot(cluster, topics) == before
    finally:
        for i in lost:
            ens.start_node(i, wait=False)
        ens.wait_serving(range(3), 60)

    # Healed: all brokers registered, a controller, and a new topic gets leaders everywhere and serves clients.
    cluster.wait_converged(FAILOVER_WAIT_S + 30)
    create_topics(cluster.bootstrap, [("after-outage", 3, 1)])
    lead = cluster.wait_topic_everywhere("after-outage", 3)
    assert sorted(lead.values()) == [0, 1, 2]
    after = records_for("after-outage", range(3), per_partition=4)
    produce(cluster.bootstrap, "after-outage", after)
    assert consume(cluster.bootstrap, "after-outage", [0, 1, 2], expected=12) == after
    got = consume(cluster.bootstrap, "zk6", list(range(6)), expected=7 * 6 + 18)
    for p in range(6):
        assert got[p][-3:] == during[p]
