"""The transaction coordinator over the wire (one broker process, raw protocol for the exact error codes):
FindCoordinator key type 1 and ``__transaction_state``'s creation, fencing codes per API version, transaction
timeout limits, AddPartitionsToTxn's partial failures, DescribeTransactions / ListTransactions, the coordinator's
state surviving kill -9, the expiry of idle transactional ids and the abort of timed-out transactions (both driven
by their cleanup intervals, so the keys are seen taking effect)."""
from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from kbroker import errors
from kbroker.client.connection import BrokerConnection
from tests.integration.harness import BrokerProcess, wait_until

pytestmark = pytest.mark.timeout(180)

OVERRIDES = {"transaction.state.log.num.partitions": 5, "transaction.max.timeout.ms": 120000,
             "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200,
             "transaction.remove.expired.transaction.cleanup.interval.ms": 200,
             "transactional.id.expiration.ms": 600000}


@pytest.fixture(scope="module")
def tbroker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("txn_coordinator"), overrides=OVERRIDES)
    b.start()
    yield b
    b.close()


@pytest.fixture
def conn(tbroker):
    c = BrokerConnection(tbroker.host, tbroker.port, client_id="raw")
    yield c
    c.close()


def find(conn, tid, version=3):
    return conn.request(10, {"key": tid, "key_type": 1}, version=version)


def ready(conn, tid):
    """FindCoordinator until the id's coordinator answers (the topic is created and its partition loaded)."""
    def ok():
        r = find(conn, tid)
        if r["error_code"]:
            return False
        d = conn.request(65, {"transactional_ids": [tid]}, version=0)["transaction_states"][0]
        return d["error_code"] in (0, errors.TRANSACTIONAL_ID_NOT_FOUND)
    wait_until(ok, 30, 0.1, "the coordinator of %r" % tid)


def init(conn, tid, timeout_ms=60000, version=4, pid=-1, epoch=-1):
    return conn.request(22, {"transactional_id": tid, "transaction_timeout_ms": timeout_ms, "producer_id": pid,
                             "producer_epoch": epoch}, version=version)


def add(conn, tid, pid, epoch, parts, version=3):
    topics = {}
    for t, p in parts:
        topics.setdefault(t, []).append(p)
    r = conn.request(24, {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
                          "v3_and_below_producer_epoch": epoch,
                          "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]},
                     version=version)
    return {(t["name"], pr["partition_index"]): pr["partition_error_code"]
            for t in r["results_by_topic_v3_and_below"] for pr in t["results_by_partition"]}


def end(conn, tid, pid, epoch, commit, version=3):
    return conn.request(26, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                             "committed": commit}, version=version)["error_code"]


def describe(conn, tid):
    return conn.request(65, {"transactional_ids": [tid]}, version=0)["transaction_states"][0]


def create_topic(conn, name, partitions=2):
    r = conn.request(19, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1}],
                          "timeout_ms": 10000}, version=4)
    assert r["topics"][0]["error_code"] in (0, errors.TOPIC_ALREADY_EXISTS)
    wait_until(lambda: all(p["leader_id"] >= 0 for t in conn.request(3, {"topics": [{"name": name}]}, version=4)
                           ["topics"] for p in t["partitions"]), 10)


# --------------------------------------------------------------------------------------------------- tests

def test_find_coordinator_creates_the_transaction_state_topic(conn, tbroker):
    ready(conn, "find-me")
    r = find(conn, "find-me")
    assert (r["error_code"], r["node_id"], r["port"]) == (0, 0, tbroker.port)
    r4 = conn.request(10, {"key_type": 1, "coordinator_keys": ["a", "b"]}, version=4)
    assert [(c["key"], c["error_code"], c["node_id"]) for c in r4["coordinators"]] == [("a", 0, 0), ("b", 0, 0)]
    md = conn.request(3, {"topics": [{"name": "__transaction_state"}]}, version=4)["topics"][0]
    assert md["is_internal"] and len(md["partitions"]) == 5
    cfg = conn.request(32, {"resources": [{"resource_type": 2, "resource_name": "__transaction_state",
                                           "configuration_keys": None}]}, version=1)["results"][0]["configs"]
    values = {c["name"]: c["value"] for c in cfg}
    # compacted; min.insync.replicas 2 (Kafka's default) capped by the one-broker replication factor
    assert values["cleanup.policy"] == "compact" and values["min.insync.replicas"] == "1"
    assert values["unclean.leader.election.enable"] == "false"


def test_reinit_fences_the_previous_producer_with_the_code_its_version_knows(conn):
    ready(conn, "fence")
    create_topic(conn, "fence-t")
    first = init(conn, "fence")
    assert first["error_code"] == 0
    pid, epoch = first["producer_id"], first["producer_epoch"]
    second = init(conn, "fence")
    assert (second["error_code"], second["producer_id"], second["producer_epoch"]) == (0, pid, epoch + 1)
    # the first instance is fenced: PRODUCER_FENCED (90) for versions that know it, else INVALID_PRODUCER_EPOCH
    assert add(conn, "fence", pid, epoch, [("fence-t", 0)], version=2) == {("fence-t", 0): errors.PRODUCER_FENCED}
    assert add(conn, "fence", pid, epoch, [("fence-t", 0)], version=1) == {
        ("fence-t", 0): errors.INVALID_PRODUCER_EPOCH}
    assert end(conn, "fence", pid, epoch, True, version=2) == errors.PRODUCER_FENCED
    assert end(conn, "fence", pid, epoch, True, version=0) == errors.INVALID_PRODUCER_EPOCH
    ao = conn.request(25, {"transactional_id": "fence", "producer_id": pid, "producer_epoch": epoch,
                           "group_id": "g"}, version=1)
    assert ao["error_code"] == errors.INVALID_PRODUCER_EPOCH
    # KIP-360 with an epoch that is neither the current nor the last one
    assert init(conn, "fence", version=4, pid=pid, epoch=epoch + 7)["error_code"] == errors.PRODUCER_FENCED
    assert init(conn, "fence", version=3, pid=pid, epoch=epoch + 7)["error_code"] == errors.INVALID_PRODUCER_EPOCH
    assert init(conn, "fence", version=4, pid=pid, epoch=-1)["error_code"] == errors.INVALID_REQUEST
    # an unknown producer id for the transactional id
    assert add(conn, "fence", pid + 100, epoch + 1, [("fence-t", 0)]) == {
        ("fence-t", 0): errors.INVALID_PRODUCER_ID_MAPPING}


def test_transaction_timeout_above_the_maximum_is_refused(conn):
    ready(conn, "tmo")
    assert init(conn, "tmo", timeout_ms=120001)["error_code"] == errors.INVALID_TRANSACTION_TIMEOUT
    assert init(conn, "tmo", timeout_ms=0)["error_code"] == errors.INVALID_TRANSACTION_TIMEOUT
    r = init(conn, "tmo", timeout_ms=120000)
    assert r["error_code"] == 0 and r["producer_epoch"] == 0
    assert describe(conn, "tmo")["transaction_timeout_ms"] == 120000


def test_add_partitions_all_or_nothing(conn):
    ready(conn, "parts")
    create_topic(conn, "parts-t", 3)
    r = init(conn, "parts")
    pid, epoch = r["producer_id"], r["producer_epoch"]
    got = add(conn, "parts", pid, epoch, [("parts-t", 0), ("parts-t", 9), ("no-such-topic", 0),
                                          ("__consumer_offsets", 0)])
    assert got == {("parts-t", 0): errors.OPERATION_NOT_ATTEMPTED, ("parts-t", 9): errors.UNKNOWN_TOPIC_OR_PARTITION,
                   ("no-such-topic", 0): errors.UNKNOWN_TOPIC_OR_PARTITION,
                   ("__consumer_offsets", 0): errors.TOPIC_AUTHORIZATION_FAILED}
    assert describe(conn, "parts")["transaction_state"] == "Empty"
    assert end(conn, "parts", pid, epoch, True) == errors.INVALID_TXN_STATE
    assert add(conn, "parts", pid, epoch, [("parts-t", 0), ("parts-t", 2)]) == {("parts-t", 0): 0, ("parts-t", 2): 0}
    d = describe(conn, "parts")
    assert (d["transaction_state"], d["producer_id"], d["producer_epoch"]) == ("Ongoing", pid, epoch)
    assert d["topics"] == [{"topic": "parts-t", "partitions": [0, 2]}] and d["transaction_start_time_ms"] > 0
    listed = conn.request(66, {"state_filters": ["Ongoing", "Nope"], "producer_id_filters": [pid]}, version=1)
    assert listed["unknown_state_filters"] == ["Nope"]
    assert [(s["transactional_id"], s["producer_id"], s["transaction_state"])
            for s in listed["transaction_states"]] == [("parts", pid, "Ongoing")]
    assert describe(conn, "never-seen")["error_code"] == errors.TRANSACTIONAL_ID_NOT_FOUND


def test_coordinator_state_survives_kill9(tmp_path):
    b = BrokerProcess(tmp_path, overrides={"transaction.state.log.num.partitions": 3})
    b.start()
    try:
        c = BrokerConnection(b.host, b.port, client_id="raw")
        ready(c, "durable")
        create_topic(c, "durable-t", 2)
        r = init(c, "durable")
        pid, epoch = r["producer_id"], r["producer_epoch"]
        assert add(c, "durable", pid, epoch, [("durable-t", 1)]) == {("durable-t", 1): 0}
        c.close()
        b.kill9()
        b.start()
        c = BrokerConnection(b.host, b.port, client_id="raw")
        ready(c, "durable")
        d = describe(c, "durable")
        assert (d["transaction_state"], d["producer_id"], d["producer_epoch"], d["topics"]) == (
            "Ongoing", pid, epoch, [{"topic": "durable-t", "partitions": [1]}])
        # the old producer still owns its transaction after the restart
        assert add(c, "durable", pid, epoch, [("durable-t", 0)]) == {("durable-t", 0): 0}
        c.close()
    finally:
        b.close()


def test_idle_transactional_ids_expire(tmp_path):
    b = BrokerProcess(tmp_path, overrides={"transaction.state.log.num.partitions": 2,
                                           "transactional.id.expiration.ms": 1500,
                                           "transaction.remove.expired.transaction.cleanup.interval.ms": 200})
    b.start()
    try:
        c = BrokerConnection(b.host, b.port, client_id="raw")
        ready(c, "short-lived")
        r = init(c, "short-lived")
        assert r["error_code"] == 0 and describe(c, "short-lived")["transaction_state"] == "Empty"
        wait_until(lambda: describe(c, "short-lived")["error_code"] == errors.TRANSACTIONAL_ID_NOT_FOUND, 15, 0.1,
                   "the idle id to expire")
        # a new instance starts from a new producer id at epoch 0
        again = init(c, "short-lived")
        assert again["error_code"] == 0 and again["producer_id"] != r["producer_id"] and again["producer_epoch"] == 0
        c.close()
    finally:
        b.close()


def test_timed_out_transaction_is_aborted_and_its_producer_fenced(conn):
    ready(conn, "slow")
    create_topic(conn, "slow-t", 1)
    r = init(conn, "slow", timeout_ms=1000)
    pid, epoch = r["producer_id"], r["producer_epoch"]
    assert add(conn, "slow", pid, epoch, [("slow-t", 0)]) == {("slow-t", 0): 0}
    wait_until(lambda: describe(conn, "slow")["transaction_state"] == "CompleteAbort", 15, 0.1, "the timeout abort")
    assert describe(conn, "slow")["producer_epoch"] == epoch + 1
    # the ABORT marker (offset 0: nothing else was written) ends the partition
    offs = conn.request(2, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": "slow-t", "partitions": [{"partition_index": 0, "timestamp": -1}]}]}, version=2)
    assert offs["topics"][0]["partitions"][0]["offset"] == 1
    assert end(conn, "slow", pid, epoch, True) == errors.PRODUCER_FENCED
    assert add(conn, "slow", pid, epoch, [("slow-t", 0)]) == {("slow-t", 0): errors.PRODUCER_FENCED}


def _kafka_tools_classpath():
    """Every jar of the local Maven cache when it holds Kafka's tools (DumpLogSegments and its dependencies), else
    None: this cross-check with Kafka's own decoder runs where Kafka has been fetched."""
    repo = Path.home() / ".m2" / "repository"
    if not list((repo / "org" / "apache" / "kafka" / "kafka-tools").glob("*/kafka-tools-*.jar")):
        return None
    jars = sorted(str(p) for p in repo.rglob("*.jar")
                  if not p.name.endswith(("-sources.jar", "-javadoc.jar", "-tests.jar")))
    return ":".join(jars)


def test_kafkas_dump_log_decodes_the_transaction_log(tmp_path):
    classpath = _kafka_tools_classpath()
    if classpath is None or shutil.which("java") is None:
        pytest.skip("Kafka's tools are not in the local Maven cache")
    b = BrokerProcess(tmp_path, overrides={"transaction.state.log.num.partitions": 1})
    b.start()
    try:
        c = BrokerConnection(b.host, b.port, client_id="raw")
        ready(c, "dumped")
        create_topic(c, "dumped-t", 2)
        r = init(c, "dumped", timeout_ms=45000)
        pid = r["producer_id"]
        assert add(c, "dumped", pid, 0, [("dumped-t", 1), ("dumped-t", 0)]) == {("dumped-t", 1): 0, ("dumped-t", 0): 0}
        c.close()
    finally:
        b.stop()
    segment = tmp_path / "logs" / "__transaction_state-0" / "00000000000000000000.log"
    out = subprocess.run(["java", "-cp", classpath, "org.apache.kafka.tools.DumpLogSegments", "--files",
                          str(segment), "--transaction-log-decoder", "--print-data-log"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    payloads = [json.loads(line.split(" payload: ", 1)[1]) for line in out.stdout.splitlines()
                if " payload: " in line]
    keys = [json.loads(line.split(" key: ", 1)[1].split(" payload: ")[0]) for line in out.stdout.splitlines()
            if " payload: " in line]
    assert keys == [{"type": "0", "data": {"transactionalId": "dumped"}}] * 2
    assert [(p["version"], p["data"]["producerId"], p["data"]["producerEpoch"], p["data"]["transactionTimeoutMs"],
             p["data"]["transactionStatus"], p["data"]["transactionPartitions"]) for p in payloads] == [
        ("0", pid, 0, 45000, "Empty", None),
        ("0", pid, 0, 45000, "Ongoing", [{"topic": "dumped-t", "partitionIds": [0, 1]}])]


# ------------------------------------------------------------------------------------------- real clients

def _producer(bootstrap, tid, **extra):
    from confluent_kafka import Producer
    conf = {"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5}
    conf.update(extra)
    return Producer(conf)


def _committed_view(bootstrap, topic, partition, expect, timeout=20.0):
    """(values a read_committed consumer sees, its end offset = the LSO) once it has ``expect`` values."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "v-%s-%d" % (topic, partition),
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        got = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(got) < expect:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append((m.offset(), m.value().decode()))
        # nothing more arrives after the expected values (a short extra poll)
        extra_deadline = time.monotonic() + 1.0
        while time.monotonic() < extra_deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append((m.offset(), m.value().decode()))
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)
        return got, hi
    finally:
        c.close()


def test_second_instance_fences_the_first_and_aborts_its_transaction(conn, tbroker):
    from confluent_kafka import KafkaException
    create_topic(conn, "fence-out", 1)
    bs = tbroker.bootstrap
    p1 = _producer(bs, "fence-app")
    p1.init_transactions(30)
    p1.begin_transaction()
    for i in range(4):
        p1.produce("fence-out", value="first-%d" % i, partition=0)
    assert p1.flush(10) == 0                       # offsets 0..3 written, transaction open
    d = describe(conn, "fence-app")
    assert d["transaction_state"] == "Ongoing" and d["topics"] == [{"topic": "fence-out", "partitions": [0]}]
    epoch1 = d["producer_epoch"]
    p2 = _producer(bs, "fence-app")
    p2.init_transactions(30)                       # CONCURRENT_TRANSACTIONS while p1's is aborted, then epoch + 2
    d = describe(conn, "fence-app")
    assert (d["transaction_state"], d["producer_epoch"]) == ("Empty", epoch1 + 2)
    with pytest.raises(KafkaException) as e:
        p1.commit_transaction(10)
    assert e.value.args[0].fatal() and e.value.args[0].code() == -144        # librdkafka's _FENCED
    # p1's four records are aborted (ABORT marker at offset 4); p2 commits two after them
    p2.begin_transaction()
    p2.produce("fence-out", value="second-0", partition=0)
    p2.produce("fence-out", value="second-1", partition=0)
    p2.commit_transaction(30)
    got, end_offset = _committed_view(bs, "fence-out", 0, 2)
    assert got == [(5, "second-0"), (6, "second-1")] and end_offset == 8    # COMMIT marker at 7


def test_timeout_abort_writes_the_abort_marker_and_fences_the_producer(conn, tbroker):
    from confluent_kafka import KafkaException
    create_topic(conn, "slow-out", 1)
    bs = tbroker.bootstrap
    p = _producer(bs, "slow-app", **{"transaction.timeout.ms": 1500})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce("slow-out", value="late-%d" % i, partition=0)
    assert p.flush(10) == 0
    epoch = describe(conn, "slow-app")["producer_epoch"]
    # the cleanup task (every 200 ms here) aborts it once 1.5 s have passed: epoch + 1, markers, CompleteAbort
    wait_until(lambda: describe(conn, "slow-app")["transaction_state"] == "CompleteAbort", 20, 0.1,
               "the timed-out transaction to be aborted")
    assert describe(conn, "slow-app")["producer_epoch"] == epoch + 1
    got, end_offset = _committed_view(bs, "slow-out", 0, 0)
    assert got == [] and end_offset == 4                         # 3 aborted records + the ABORT marker
    with pytest.raises(KafkaException) as e:
        p.commit_transaction(10)
    assert e.value.args[0].fatal() and e.value.args[0].code() == -144         # _FENCED: its epoch was bumped
