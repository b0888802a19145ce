"""Admin APIs of issue 14 item 1 (I) against a real 3-broker cluster on a real ZooKeeper ensemble, through the
clients operators use: confluent-kafka's AdminClient (delete_records, elect_leaders, describe_cluster), kafka-python's
KafkaAdminClient (delete_group_offsets), raw requests where no client exposes a case.

1. DeleteRecords: the low watermark answered, ListOffsets earliest, a Fetch below it OFFSET_OUT_OF_RANGE on the leader
   AND on every follower's log-start-offset-checkpoint (the followers took the leader's start from Fetch), -1 = the
   high watermark, the error codes (above the HW 1, compacted topic 44, unknown topic 3);
2. ElectLeaders: preferred after the leader was bounced (0, then 84 ELECTION_NOT_NEEDED), a preferred replica that is
   down (80), unclean for a partition whose only in-sync replica is down (83 while no replica is live, then the live
   out-of-sync replica elected by `kbroker-admin leader-election --election-type UNCLEAN`), unknown partition (3);
3. DescribeCluster: the cluster id, controller and brokers; v1 endpoint type 2 answers 114;
4. OffsetDelete: a subscribed topic of an active group 86, an unsubscribed one deleted, everything once the group is
   empty, an unknown group 69.

One ensemble and one cluster for the module; tests run in file order and each uses its own topics (the
elections run last: they leave broker 2 down).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.integration.harness import REPO_ROOT, wait_until
from tests.integration.test_cluster_common import FAILOVER_WAIT_S, Cluster, produce

pytestmark = [pytest.mark.zk, pytest.mark.timeout(180)]

RECORDS = 10


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, zk_ensemble):   # zk_ensemble: tests/integration/conftest.py
    c = Cluster(tmp_path_factory.mktemp("cluster"), zk_ensemble, overrides={
        "auto.leader.rebalance.enable": "false",
        # the followers' log start offsets reach their checkpoint files within a fraction of a second
        "log.flush.start.offset.checkpoint.interval.ms": 200,
        "replica.fetch.wait.max.ms": 100,
        "group.initial.rebalance.delay.ms": 0,                 # the OffsetDelete group forms at once
    })
    try:
        c.start()
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def admin(cluster):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def create(admin, topic, assignment, config=None):
    from confluent_kafka.admin import NewTopic
    fut = admin.create_topics([NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment,
                                        config=config or {})],
                              operation_timeout=20)
    fut[topic].result(30)


def kcode(exc_info_value):
    """The Kafka error code inside a confluent-kafka KafkaException."""
    return exc_info_value.args[0].code()


def raw(cluster, api, body, version=None, node=None):
    from kbroker.client.cluster import Cluster as KCluster
    with KCluster(cluster.bootstrap) as kc:
        conn = kc.connection(node) if node is not None else kc.any_connection()
        return conn.request(api, body, version=version)


def fetch_code(cluster, node, topic, offset):
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": offset,
                                                        "current_leader_epoch": -1, "log_start_offset": -1,
                                                        "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}
    resp = raw(cluster, "Fetch", body, version=11, node=node)
    pr = resp["responses"][0]["partitions"][0]
    return pr["error_code"], pr["log_start_offset"]


def checkpoint_start(broker, topic):
    path = os.path.join(broker.properties()["log.dirs"], "log-start-offset-checkpoint")
    try:
        with open(path) as f:
            lines = f.read().split("\n")
    except FileNotFoundError:
        return None
    for line in lines[2:]:
        parts = line.split()
        if len(parts) == 3 and parts[0] == topic and parts[1] == "0":
            return int(parts[2])
    return None


def test_delete_records(cluster, admin):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec
    create(admin, "dr", [[1, 0, 2]])
    cluster.wait_topic_everywhere("dr", 1)
    produce(cluster.bootstrap, "dr", {0: [b"r%d" % i for i in range(RECORDS)]})

    res = admin.delete_records([TopicPartition("dr", 0, 4)], operation_timeout=20)
    assert res[TopicPartition("dr", 0)].result(30).low_watermark == 4
    got = admin.list_offsets({TopicPartition("dr", 0): OffsetSpec.earliest()})[TopicPartition("dr", 0)].result(30)
    assert got.offset == 4
    assert fetch_code(cluster, 1, "dr", 3) == (1, 4)         # OFFSET_OUT_OF_RANGE below the new start
    assert fetch_code(cluster, 1, "dr", 4) == (0, 4)
    # every replica took the leader's start: their own checkpoint files say so
    for b in cluster.brokers:
        wait_until(lambda b=b: checkpoint_start(b, "dr") == 4, 10, 0.05, f"broker {b.broker_id} checkpointed 4")

    res = admin.delete_records([TopicPartition("dr", 0, -1)], operation_timeout=20)   # -1: the high watermark
    assert res[TopicPartition("dr", 0)].result(30).low_watermark == RECORDS

    with pytest.raises(Exception) as e:
        admin.delete_records([TopicPartition("dr", 0, RECORDS + 1)])[TopicPartition("dr", 0)].result(30)
    assert kcode(e.value) == 1                                # above the high watermark
    create(admin, "dr-compact", [[0, 1]], {"cleanup.policy": "compact"})
    cluster.wait_topic_everywhere("dr-compact", 1)
    with pytest.raises(Exception) as e:
        admin.delete_records([TopicPartition("dr-compact", 0, 0)])[TopicPartition("dr-compact", 0)].result(30)
    assert kcode(e.value) == 44                               # POLICY_VIOLATION
    resp = raw(cluster, "DeleteRecords", {"topics": [{"name": "nope", "partitions": [
        {"partition_index": 0, "offset": 0}]}], "timeout_ms": 1000})
    assert resp["topics"][0]["partitions"][0]["error_code"] == 3


def test_describe_cluster(cluster, admin):
    desc = admin.describe_cluster(include_authorized_operations=True).result(30)
    assert desc.cluster_id == json.loads(cluster.zk.get("/cluster/id")[0])["id"]
    assert desc.controller.id == cluster.controller_id()
    assert sorted((n.id, n.port) for n in desc.nodes) == sorted(
        (b.broker_id, b.port) for b in cluster.brokers)
    assert len(desc.authorized_operations) == 7               # no authorizer: every Cluster operation
    resp = raw(cluster, "DescribeCluster", {"include_cluster_authorized_operations": False, "endpoint_type": 2},
               version=1)
    assert resp["error_code"] == 114 and resp["brokers"] == []


def test_offset_delete(cluster, admin):
    from confluent_kafka import Consumer, TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartition as KTP
    create(admin, "od", [[0, 1]])
    create(admin, "od2", [[1, 2]])
    cluster.wait_topic_everywhere("od", 1)
    cluster.wait_topic_everywhere("od2", 1)
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "odg", "enable.auto.commit": False,
                  "session.timeout.ms": 6000})
    c.subscribe(["od"])
    wait_until(lambda: (c.poll(0.2), c.assignment())[1] != [], 30, 0, "odg assigned")
    c.commit(offsets=[TopicPartition("od", 0, 0), TopicPartition("od2", 0, 0)], asynchronous=False)
    ka = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        got = ka.delete_group_offsets("odg", [KTP("od", 0), KTP("od2", 0)])
        codes = {(tp.topic, tp.partition): (err.errno, err.__name__) for tp, err in got.items()}
        assert codes == {("od", 0): (86, "GroupSubscribedToTopicError"), ("od2", 0): (0, "NoError")}, got
        assert _committed("odg", cluster) == {("od", 0): 0}
        c.close()
        got = ka.delete_group_offsets("odg", [KTP("od", 0)])
        assert {tp.topic: getattr(err, "errno", err) for tp, err in got.items()} == {"od": 0}
        assert _committed("odg", cluster) == {}
        resp = raw(cluster, "OffsetDelete", {"group_id": "no-such-group", "topics": [
            {"name": "od", "partitions": [{"partition_index": 0}]}]},
            node=_coordinator(cluster, "no-such-group"))
        assert resp["error_code"] == 69 and resp["topics"] == []
    finally:
        ka.close()


def _committed(group, cluster):
    from kbroker.client.admin import AdminClient as KAdmin
    with KAdmin(cluster.bootstrap) as ka:
        return ka.list_group_offsets(group)


def _coordinator(cluster, group):
    from kbroker.client.admin import AdminClient as KAdmin
    with KAdmin(cluster.bootstrap) as ka:
        return ka.find_coordinator(group)[0]


def _leader(cluster, topic):
    return cluster.state(topic, 0)[0]["leader"]


def test_elect_leaders(cluster, admin):
    from confluent_kafka import TopicPartition
    from confluent_kafka import ElectionType
    from confluent_kafka.admin import AdminClient
    create(admin, "el", [[1, 0, 2]])
    create(admin, "uc", [[2, 1]])
    cluster.wait_topic_everywhere("el", 1)
    cluster.wait_topic_everywhere("uc", 1)
    produce(cluster.bootstrap, "uc", {0: [b"x"]})
    wait_until(lambda: cluster.state("uc", 0)[0]["isr"] == [2, 1], 10, 0.05, "uc fully in sync")

    # preferred: bounce the leader, leadership moves away and stays away (no auto rebalance) until asked
    cluster.broker(1).restart()
    cluster.wait_converged()
    wait_until(lambda: 1 in cluster.state("el", 0)[0]["isr"], FAILOVER_WAIT_S, 0.05, "broker 1 back in sync")
    assert _leader(cluster, "el") != 1
    # the controller may have moved with the bounce: a client that cached the old one gets NOT_CONTROLLER (41)
    # per partition, as from Kafka; a fresh client asks the new one
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    tp = TopicPartition("el", 0)
    res = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(30)
    assert res[tp] is None                                    # no error
    assert _leader(cluster, "el") == 1
    assert cluster.wait_topic_everywhere("el", 1)[0] == 1
    res = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(30)
    assert (res[tp].code(), res[tp].name()) == (84, "ELECTION_NOT_NEEDED")

    # unclean: uc's only in-sync replica (2) goes down after its follower (1) did
    cluster.broker(1).stop()
    wait_until(lambda: cluster.state("uc", 0)[0]["isr"] == [2], FAILOVER_WAIT_S, 0.1, "uc ISR [2]")
    cluster.broker(2).stop()
    wait_until(lambda: _leader(cluster, "uc") == -1, FAILOVER_WAIT_S, 0.1, "uc offline")
    utp = TopicPartition("uc", 0)
    res = admin.elect_leaders(ElectionType.UNCLEAN, [utp]).result(30)
    assert (res[utp].code(), res[utp].name()) == (83, "ELIGIBLE_LEADERS_NOT_AVAILABLE")    # nobody live
    cluster.broker(1).start()
    cluster.wait_converged()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    assert _leader(cluster, "uc") == -1                       # unclean.leader.election.enable=false: stays offline
    res = admin.elect_leaders(ElectionType.PREFERRED, [utp]).result(30)
    # the preferred replica (2) is down
    assert (res[utp].code(), res[utp].name()) == (80, "PREFERRED_LEADER_NOT_AVAILABLE")
    # the unclean election through Kafka's tool (kafka-leader-election.sh's lines)
    done = subprocess.run([sys.executable, "-m", "kbroker.cli.admin", "leader-election", "--bootstrap-server",
                           cluster.bootstrap, "--election-type", "UNCLEAN", "--topic", "uc", "--partition", "0"],
                          capture_output=True, text=True, timeout=60, cwd=str(REPO_ROOT))
    assert (done.returncode, done.stdout, done.stderr) == (
        0, "Successfully completed leader election (UNCLEAN) for partitions uc-0\n", "")
    assert _leader(cluster, "uc") == 1 and cluster.state("uc", 0)[0]["isr"] == [1]
    res = admin.elect_leaders(ElectionType.UNCLEAN, [utp]).result(30)
    assert res[utp].name() == "ELECTION_NOT_NEEDED"           # a live leader: nothing to do
    unknown = TopicPartition("el", 7)
    res = admin.elect_leaders(ElectionType.PREFERRED, [unknown]).result(30)
    assert res[unknown].code() == 3                           # (the last test: broker 2 stays down)
