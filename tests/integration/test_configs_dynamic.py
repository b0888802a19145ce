"""Dynamic broker configs (KIP-226), configs for every entity, and the KIP-455 reassignment APIs (issue 14) on a
real 3-broker ZooKeeper cluster (one ensemble and one cluster for the module; the tests use their own topics and
keys and put back what they change).

1. confluent-kafka's AdminClient: IncrementalAlterConfigs on the cluster default (BROKER "") lowers
   message.max.bytes and a topic created before it refuses a 3,000-byte record at once (no restart), a 1,000-byte
   one still goes; DELETE restores it. DescribeConfigs of a broker: Kafka's sources and synonyms (static, dynamic
   default, per-broker); read-only and no-restart keys refused with Kafka's INVALID_REQUEST message. Kafka's
   Java Admin (tests/java's driver) does the same on the default and one broker.
2. ``kbroker-admin configs`` over --bootstrap-server: --describe --entity-type brokers asks each broker for its
   own resource (the old tool sent them all to one, which answered "unexpected broker id"), --entity-default,
   per-broker alter; over --zookeeper: topics and brokers, taking effect on the brokers. Outputs exact.
3. kafka-python's alter_partition_reassignments / list_partition_reassignments: a move completes (records
   readable from the new replica), one held back by a replication throttle is listed (replicas, adding,
   removing), given a new target (KIP-455: the replica only the old target added is deleted, the new one starts)
   and cancelled (the added replica goes, the old set stays); Kafka's per-partition error codes; the
   reassign-partitions tool's --bootstrap-server mode (--execute, --verify, --list, --cancel) over the same APIs.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.integration.harness import REPO_ROOT, wait_until
from tests.integration.java_driver import java_driver, ok  # noqa: F401 - fixture
from tests.integration.test_cluster_common import Cluster, consume, metadata, produce

pytestmark = [pytest.mark.zk, pytest.mark.timeout(240)]

WAIT_S = 30


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, zk_ensemble):   # zk_ensemble: tests/integration/conftest.py
    c = Cluster(tmp_path_factory.mktemp("cluster"), zk_ensemble, overrides={"auto.leader.rebalance.enable": "false"})
    try:
        c.start()
        yield c
    finally:
        c.close()


def admin_cli(cluster, *args, zookeeper=False, rc=0):
    where = ["--zookeeper", cluster.connect] if zookeeper else ["--bootstrap-server", cluster.bootstrap]
    done = subprocess.run([sys.executable, "-m", "kbroker.cli.admin", "configs", *where, *args],
                          capture_output=True, timeout=60, cwd=str(REPO_ROOT))
    assert done.returncode == rc, (args, done.stdout, done.stderr)
    return done.stdout.decode().splitlines(), done.stderr.decode()


def ck_admin(cluster):
    """One confluent-kafka AdminClient for the module (a client collected before its futures resolve destroys
    its handle)."""
    from confluent_kafka.admin import AdminClient
    if getattr(cluster, "ck_admin", None) is None:
        cluster.ck_admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    return cluster.ck_admin


_OPS = {"SET": 0, "DELETE": 1, "APPEND": 2, "SUBTRACT": 3}


def incremental(cluster, name, ops):
    """ops: [(key, "SET"|"DELETE", value)] on BROKER ``name`` -> None or (error code, message). A broker id goes
    through confluent-kafka's AdminClient; the cluster default ("") through a raw IncrementalAlterConfigs (neither
    confluent-kafka nor kafka-python accepts an empty broker resource name)."""
    if name == "":
        from kbroker.client.admin import AdminClient as KbAdmin
        with KbAdmin(cluster.bootstrap) as kb:
            resp = kb.cluster.any_connection().request("IncrementalAlterConfigs", {"validate_only": False,
                "resources": [{"resource_type": 4, "resource_name": "", "configs": [
                    {"name": k, "config_operation": _OPS[op], "value": v} for k, op, v in ops]}]})
        r = resp["responses"][0]
        return None if r["error_code"] == 0 else (r["error_code"], r["error_message"])
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    entries = [ConfigEntry(k, v, incremental_operation=getattr(AlterConfigOpType, op)) for k, op, v in ops]
    fut = ck_admin(cluster).incremental_alter_configs(
        [ConfigResource(ResourceType.BROKER, name, incremental_configs=entries)])
    try:
        list(fut.values())[0].result(30)
        return None
    except KafkaException as e:
        return e.args[0].code(), e.args[0].str()


def describe_broker(cluster, name):
    from confluent_kafka.admin import ConfigResource, ResourceType
    fut = ck_admin(cluster).describe_configs([ConfigResource(ResourceType.BROKER, name)])
    return list(fut.values())[0].result(30)


def create_topic(cluster, name, assignment):
    from kbroker.client.admin import AdminClient as KbAdmin
    with KbAdmin(cluster.bootstrap) as kb:
        kb.create_topic(name, replica_assignment=dict(enumerate(assignment)))
    cluster.wait_topic_everywhere(name, len(assignment))


def produce_one(bootstrap, topic, size):
    """-> the delivery error's code name, or None when the record was stored."""
    from confluent_kafka import Producer
    got = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.max.bytes": 10000000,
                  "message.send.max.retries": 0})
    p.produce(topic, b"x" * size, partition=0, on_delivery=lambda err, _m: got.append(err))
    p.flush(30)
    assert len(got) == 1
    return None if got[0] is None else got[0].name()


# ---------------------------------------------------------------------------------------------- 1. AdminClient

def test_lower_message_max_bytes_takes_effect_without_restart(cluster):
    create_topic(cluster, "mmb", [[0]])
    assert produce_one(cluster.bootstrap, "mmb", 3000) is None
    assert incremental(cluster, "", [("message.max.bytes", "SET", "2000")]) is None
    # broker 0 (the leader) applies the cluster default through its /config/changes watch
    wait_until(lambda: describe_broker(cluster, "0")["message.max.bytes"].value == "2000", WAIT_S, 0.1)
    entry = describe_broker(cluster, "0")["message.max.bytes"]
    assert (entry.source, entry.is_read_only) == (3, False)         # DYNAMIC_DEFAULT_BROKER_CONFIG
    assert produce_one(cluster.bootstrap, "mmb", 3000) == "MSG_SIZE_TOO_LARGE"
    assert produce_one(cluster.bootstrap, "mmb", 1000) is None
    assert incremental(cluster, "", [("message.max.bytes", "DELETE", None)]) is None
    wait_until(lambda: describe_broker(cluster, "0")["message.max.bytes"].value == "1048588", WAIT_S, 0.1)
    assert produce_one(cluster.bootstrap, "mmb", 3000) is None


def test_describe_sources_and_synonyms_and_refusals(cluster):
    # log.flush.interval.messages=1 is in every broker's server.properties (test_cluster_common BROKER_OVERRIDES)
    e = describe_broker(cluster, "1")["log.flush.interval.messages"]
    assert (e.value, e.source) == ("1", 4)
    assert incremental(cluster, "", [("log.flush.interval.messages", "SET", "500")]) is None

    def flush_messages():
        e = describe_broker(cluster, "1")["log.flush.interval.messages"]
        return e.value, e.source
    wait_until(lambda: flush_messages() == ("500", 3), WAIT_S, 0.1)      # the default reaches broker 1
    assert incremental(cluster, "1", [("log.flush.interval.messages", "SET", "700")]) is None
    assert flush_messages() == ("700", 2)
    from kbroker.client.admin import AdminClient as KbAdmin, RESOURCE_BROKER
    with KbAdmin(cluster.bootstrap) as kb:
        entry = {x.name: x for x in kb.describe_configs([(RESOURCE_BROKER, "1")])[(RESOURCE_BROKER, "1")]}
        assert [tuple(s) for s in entry["log.flush.interval.messages"].synonyms] == [
            ("log.flush.interval.messages", "700", 2), ("log.flush.interval.messages", "500", 3),
            ("log.flush.interval.messages", "1", 4), ("log.flush.interval.messages", "9223372036854775807", 5)]
        assert (entry["broker.id"].value, entry["broker.id"].read_only) == ("1", True)
        default = kb.describe_configs([(RESOURCE_BROKER, "")])[(RESOURCE_BROKER, "")]
        assert [(x.name, x.value, x.source) for x in default] == [("log.flush.interval.messages", "500", 3)]
    assert incremental(cluster, "1", [("log.flush.interval.messages", "DELETE", None)]) is None
    assert flush_messages() == ("500", 3)
    assert incremental(cluster, "", [("log.flush.interval.messages", "DELETE", None)]) is None
    wait_until(lambda: flush_messages() == ("1", 4), WAIT_S, 0.1)
    assert incremental(cluster, "1", [("broker.id", "SET", "5")]) == (
        42, "Invalid config value for resource ConfigResource(type=BROKER, name='1'): Cannot update these configs "
            "dynamically: Set(broker.id)")
    code, msg = incremental(cluster, "1", [("num.io.threads", "SET", "16")])
    assert code == 42 and "Cannot update these configs dynamically in kbroker: Set(num.io.threads)" in msg
    code, msg = incremental(cluster, "1", [("log.retention.ms", "SET", "soon")])
    assert code == 42 and "Invalid value 'soon' for configuration log.retention.ms" in msg


def test_kafka_java_admin_alters_and_describes_broker_configs(cluster, java_driver):  # noqa: F811 - fixture
    """Kafka's own Java Admin (what kafka-configs.sh 4.x runs): incrementalAlterConfigs on the cluster default
    (resource "") and on broker 2, describeConfigs with Kafka's source names, a read-only key refused."""
    steps = [
        {"op": "alter_configs", "resources": [
            {"type": "broker", "name": "", "ops": [{"name": "log.retention.bytes", "value": "5000000"}]},
            {"type": "broker", "name": "2", "ops": [{"name": "log.segment.bytes", "value": "2000000"},
                                                    {"name": "log.cleanup.policy", "value": "compact",
                                                     "op": "APPEND"}]}]},
        {"op": "alter_configs", "resources": [
            {"type": "broker", "name": "2", "ops": [{"name": "zookeeper.connect", "value": "elsewhere:2181"}]}]},
    ]
    altered, refused = java_driver(cluster.bootstrap, steps)
    assert ok(altered)["results"] == {"": None, "2": None}
    assert refused["results"]["2"]["error"]["type"] == "InvalidRequestException"
    assert "Cannot update these configs dynamically: Set(zookeeper.connect)" in refused["results"]["2"]["error"][
        "message"]

    def described():
        got = ok(java_driver(cluster.bootstrap, [{"op": "describe_configs", "resources": [
            {"type": "broker", "name": "2"}, {"type": "broker", "name": ""}]}])[0])["results"]
        return {k: (got["2"]["entries"][k]["value"], got["2"]["entries"][k]["source"], got["2"]["entries"][k][
            "readOnly"]) for k in ("log.retention.bytes", "log.segment.bytes", "log.cleanup.policy",
                                   "zookeeper.connect")}, sorted(got[""]["entries"])
    wait_until(lambda: described()[0]["log.retention.bytes"][1] == "DYNAMIC_DEFAULT_BROKER_CONFIG", WAIT_S, 0.5)
    broker2, default = described()
    assert broker2 == {"log.retention.bytes": ("5000000", "DYNAMIC_DEFAULT_BROKER_CONFIG", False),
                       "log.segment.bytes": ("2000000", "DYNAMIC_BROKER_CONFIG", False),
                       "log.cleanup.policy": ("delete,compact", "DYNAMIC_BROKER_CONFIG", False),
                       "zookeeper.connect": (cluster.connect, "STATIC_BROKER_CONFIG", True)}
    assert default == ["log.retention.bytes"]
    ok(java_driver(cluster.bootstrap, [{"op": "alter_configs", "resources": [
        {"type": "broker", "name": "", "ops": [{"name": "log.retention.bytes", "op": "DELETE"}]},
        {"type": "broker", "name": "2", "ops": [{"name": "log.segment.bytes", "op": "DELETE"},
                                                {"name": "log.cleanup.policy", "op": "DELETE"}]}]}])[0])


# ---------------------------------------------------------------------------------------------- 2. the tool

def test_configs_tool_brokers_over_bootstrap(cluster):
    # every broker is asked for its own resource, then the cluster default
    assert admin_cli(cluster, "--describe", "--entity-type", "brokers") == ([
        "Dynamic configs for broker 0 are:", "Dynamic configs for broker 1 are:", "Dynamic configs for broker 2 are:",
        "Default configs for brokers in the cluster are:"], "")
    assert admin_cli(cluster, "--entity-type", "brokers", "--entity-default", "--alter", "--add-config",
                     "log.retention.ms=3600000") == (
        ["Completed updating default config for brokers in the cluster."], "")
    assert admin_cli(cluster, "--entity-type", "brokers", "--entity-name", "2", "--alter", "--add-config",
                     "log.retention.ms=7200000,min.insync.replicas=2") == (
        ["Completed updating config for broker 2."], "")
    assert admin_cli(cluster, "--describe", "--entity-type", "brokers", "--entity-default") == ([
        "Default configs for brokers in the cluster are:",
        "  log.retention.ms=3600000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000,"
        " DEFAULT_CONFIG:log.retention.hours=168}"], "")
    assert admin_cli(cluster, "--describe", "--entity-type", "brokers", "--entity-name", "2") == ([
        "Dynamic configs for broker 2 are:",
        "  log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=7200000, "
        "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000, DEFAULT_CONFIG:log.retention.hours=168}",
        "  min.insync.replicas=2 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:min.insync.replicas=2, "
        "DEFAULT_CONFIG:min.insync.replicas=1}"], "")
    assert admin_cli(cluster, "--entity-type", "brokers", "--entity-name", "2", "--alter", "--add-config",
                     "broker.id=7", rc=1) == ([], "Error while executing config command : Invalid config value for "
                                               "resource ConfigResource(type=BROKER, name='2'): Cannot update these "
                                               "configs dynamically: Set(broker.id)\n")
    # a topic without overrides on broker 2 runs with its per-broker retention (DescribeConfigs answered by 2)
    from kbroker.client.admin import AdminClient as KbAdmin
    create_topic(cluster, "ret", [[2]])
    with KbAdmin(cluster.bootstrap) as kb:
        conn = kb.cluster.connection(2)
        resp = conn.request("DescribeConfigs", {"resources": [{"resource_type": 2, "resource_name": "ret",
                                                               "configuration_keys": ["retention.ms"]}],
                                                "include_synonyms": True})
        c = resp["results"][0]["configs"][0]
        assert (c["value"], c["config_source"]) == ("7200000", 2)
    assert admin_cli(cluster, "--entity-type", "brokers", "--entity-name", "2", "--alter", "--delete-config",
                     "log.retention.ms,min.insync.replicas") == (["Completed updating config for broker 2."], "")
    assert admin_cli(cluster, "--entity-type", "brokers", "--entity-default", "--alter", "--delete-config",
                     "log.retention.ms") == (["Completed updating default config for brokers in the cluster."], "")


def test_configs_tool_over_zookeeper(cluster):
    create_topic(cluster, "zkc", [[1]])
    assert admin_cli(cluster, "--entity-type", "topics", "--entity-name", "zkc", "--alter", "--add-config",
                     "retention.ms=60000,cleanup.policy=[compact,delete]", zookeeper=True) == (
        ["Completed updating config for entity: topic 'zkc'."], "")
    assert admin_cli(cluster, "--entity-type", "topics", "--entity-name", "zkc", "--describe", zookeeper=True) == (
        ["Configs for topic 'zkc' are cleanup.policy=compact,delete,retention.ms=60000"], "")
    # the broker hosting it applies the change (DescribeConfigs shows the override)
    wait_until(lambda: admin_cli(cluster, "--entity-type", "topics", "--entity-name", "zkc", "--describe")[0] == [
        "Dynamic configs for topic zkc are:",
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete,"
        " DEFAULT_CONFIG:log.cleanup.policy=delete}",
        "  retention.ms=60000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=60000}"], WAIT_S, 0.2)
    assert admin_cli(cluster, "--entity-type", "topics", "--entity-name", "zkc", "--alter", "--add-config",
                     "retention.ms=x", zookeeper=True, rc=1)[1].startswith(
        "Error while executing config command : Invalid value 'x' for configuration retention.ms")
    assert admin_cli(cluster, "--entity-type", "topics", "--entity-name", "nope", "--describe", zookeeper=True,
                     rc=1) == ([], "Error while executing config command : Topic 'nope' does not exist\n")
    # brokers over ZooKeeper: a dynamic key reaches the broker
    assert admin_cli(cluster, "--entity-type", "brokers", "--entity-name", "1", "--alter", "--add-config",
                     "message.max.bytes=5000", zookeeper=True) == (
        ["Completed updating config for entity: brokers '1'."], "")
    wait_until(lambda: describe_broker(cluster, "1")["message.max.bytes"].value == "5000", WAIT_S, 0.1)
    assert admin_cli(cluster, "--entity-type", "brokers", "--entity-name", "1", "--alter", "--delete-config",
                     "message.max.bytes", zookeeper=True)[0] == ["Completed updating config for entity: brokers '1'."]
    wait_until(lambda: describe_broker(cluster, "1")["message.max.bytes"].source == 5, WAIT_S, 0.1)


# ---------------------------------------------------------------------------------------------- 3. KIP-455

def kp_admin(cluster):
    from kafka.admin import KafkaAdminClient
    return KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30000)


def reassign_cli(cluster, *args):
    done = subprocess.run([sys.executable, "-m", "kbroker.cli.admin", "reassign-partitions", "--bootstrap-server",
                           cluster.bootstrap, *args], capture_output=True, timeout=60, cwd=str(REPO_ROOT))
    assert done.returncode == 0 and done.stderr == b"", (args, done.stdout, done.stderr)
    return done.stdout.decode().splitlines()


def test_reassignment_apis_move_list_and_cancel(cluster, tmp_path):
    from kafka import TopicPartition
    create_topic(cluster, "mv", [[0]])
    produce(cluster.bootstrap, "mv", {0: [b"r%d" % i for i in range(50)]})
    kp = kp_admin(cluster)
    try:
        assert kp.alter_partition_reassignments({TopicPartition("mv", 0): [1]}) == {TopicPartition("mv", 0): None}
        wait_until(lambda: metadata(cluster.brokers[2], ["mv"])["topics"]["mv"]["partitions"][0]["replicas"] == [1],
                   WAIT_S, 0.1)
        assert kp.list_partition_reassignments() == {}
        got = consume(cluster.bootstrap, "mv", [0], 50)
        assert got[0] == [b"r%d" % i for i in range(50)]
        back = tmp_path / "mv.json"
        back.write_text(json.dumps({"version": 1, "partitions": [{"topic": "mv", "partition": 0, "replicas": [2]}]}))
        assert reassign_cli(cluster, "--execute", "--reassignment-json-file", str(back)) == [
            "Current partition replica assignment", "",
            '{"version":1,"partitions":[{"topic":"mv","partition":0,"replicas":[1]}]}', "",
            "Save this to use as the --reassignment-json-file option during rollback",
            "Successfully started partition reassignment for mv-0"]
        wait_until(lambda: reassign_cli(cluster, "--verify", "--reassignment-json-file", str(back)) == [
            "Status of partition reassignment:", "Reassignment of partition mv-0 is completed."], WAIT_S, 0.2)
        # per-partition errors (Kafka's codes)
        res = kp.alter_partition_reassignments({TopicPartition("mv", 7): [1], TopicPartition("mv", 0): [1, 1]})
        assert {tp.partition: e.errno for tp, e in res.items()} == {7: 3, 0: 39}
        assert kp.alter_partition_reassignments({TopicPartition("mv", 0): [9]})[TopicPartition("mv", 0)].errno \
            == 39                                               # a broker that is not alive
        from kbroker.client.admin import AdminClient as KbAdmin
        with KbAdmin(cluster.bootstrap) as kb:                  # kafka-python refuses an empty list itself
            assert kb.alter_partition_reassignments({("mv", 0): []}) == {("mv", 0): (
                39, "Empty replica list specified in partition reassignment.")}
        res = kp.alter_partition_reassignments({TopicPartition("mv", 0): None})
        assert res[TopicPartition("mv", 0)].errno == 85                    # NO_REASSIGNMENT_IN_PROGRESS

        # held back: broker 0 sends throttled replicas at 1 byte/s once the first fetch is done
        create_topic(cluster, "cx", [[0]])
        produce(cluster.bootstrap, "cx", {0: [b"y" * 100000 for _ in range(30)]})        # 3 MB > one fetch
        assert admin_cli(cluster, "--entity-name", "cx", "--entity-type", "topics", "--alter", "--add-config",
                         "leader.replication.throttled.replicas=0:0,"
                         "follower.replication.throttled.replicas=[0:2,0:1]")[0]
        assert incremental(cluster, "0", [("leader.replication.throttled.rate", "SET", "1")]) is None
        wait_until(lambda: describe_broker(cluster, "0")["leader.replication.throttled.rate"].value == "1", WAIT_S)
        tp = TopicPartition("cx", 0)
        assert kp.alter_partition_reassignments({tp: [0, 2]}) == {tp: None}
        assert kp.list_partition_reassignments() == {tp: {"replicas": [0, 2], "adding_replicas": [2],
                                                          "removing_replicas": []}}
        assert kp.list_partition_reassignments([tp]) == kp.list_partition_reassignments()
        assert kp.list_partition_reassignments([TopicPartition("mv", 0)]) == {}
        wait_until(lambda: (cluster.brokers[2].log_dir / "cx-0").exists(), WAIT_S, 0.1)   # broker 2 follows
        # a new target replaces the old one (KIP-455): 2, which only the old target added, is cut and deleted
        assert kp.alter_partition_reassignments({tp: [0, 1]}) == {tp: None}
        assert kp.list_partition_reassignments() == {tp: {"replicas": [0, 1], "adding_replicas": [1],
                                                          "removing_replicas": []}}
        state = json.loads(cluster.zk.get("/admin/reassign_partitions")[0])
        assert state["partitions"] == [{"topic": "cx", "partition": 0, "replicas": [0, 1]}]
        wait_until(lambda: not (cluster.brokers[2].log_dir / "cx-0").exists(), WAIT_S, 0.1)
        wait_until(lambda: (cluster.brokers[1].log_dir / "cx-0").exists(), WAIT_S, 0.1)
        # the tool over the same APIs (kafka-reassign-partitions.sh --bootstrap-server, Kafka 3.x's text)
        plan = tmp_path / "cx.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "cx", "partition": 0, "replicas": [0, 1]}]}))
        assert reassign_cli(cluster, "--list") == ["Current partition reassignments:",
                                                   "cx-0: replicas: 0,1. adding: 1."]
        assert reassign_cli(cluster, "--verify", "--reassignment-json-file", str(plan)) == [
            "Status of partition reassignment:", "Reassignment of partition cx-0 is still in progress."]
        assert reassign_cli(cluster, "--cancel", "--reassignment-json-file", str(plan)) == [
            "Successfully cancelled partition reassignment for: cx-0"]                  # cancel
        assert kp.list_partition_reassignments() == {}
        assert reassign_cli(cluster, "--verify", "--reassignment-json-file", str(plan)) == [
            "Status of partition reassignment:",
            "There is no active reassignment of partition cx-0, but replica set is 0 rather than 0,1."]
        assert reassign_cli(cluster, "--list") == ["No partition reassignments found."]
        assert kp.alter_partition_reassignments({tp: None})[tp].errno == 85     # nothing left to cancel
        wait_until(lambda: all(metadata(b, ["cx"])["topics"]["cx"]["partitions"][0]["replicas"] == [0]
                               for b in cluster.brokers), WAIT_S, 0.1)
        assert not cluster.zk.exists("/admin/reassign_partitions")
        # the added replica's log is deleted on broker 1
        wait_until(lambda: not (cluster.brokers[1].log_dir / "cx-0").exists(), WAIT_S, 0.1)
        got = consume(cluster.bootstrap, "cx", [0], 30)
        assert len(got[0]) == 30
    finally:
        incremental(cluster, "0", [("leader.replication.throttled.rate", "DELETE", None)])
        kp.close()
