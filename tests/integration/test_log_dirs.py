"""Several log.dirs on one real broker (KIP-113): DescribeLogDirs and AlterReplicaLogDirs through kafka-python's admin
client, a replica moved between the two directories while a producer writes to it, and ``kbroker-admin log-dirs``
(kafka-log-dirs.sh) -- its JSON compared with the answer, and with Kafka 4.4's own LogDirsCommand when Kafka's jars
are there (tests/kafka_tools).

Shown:
- every log dir answers, in log.dirs order; each partition's size equals the bytes of its segment files on disk,
  offset lag 0, not future; a topic filter limits the partitions; the file systems' total/usable bytes (v4);
- AlterReplicaLogDirs: a path that is not a log dir -> LOG_DIR_NOT_FOUND (57), a replica this broker does not host
  -> REPLICA_NOT_AVAILABLE (9), a move to where the replica already is -> NONE and nothing changes, a topic whose
  future directory name would pass 255 bytes -> INVALID_TOPIC_EXCEPTION (17);
- the move while a producer writes (acks=all, numbered records): DescribeLogDirs shows the future log in the target
  with a lag while it copies, then the partition only in the target; the old directory is gone from disk
  (log.segment.delete.delay.ms after the swap: Kafka keeps the old files that long for reads in flight); every
  acknowledged record is read back exactly once at consecutive offsets, and again after a restart (the log now
  loads from the target dir).
"""
import io
import json
import os
import subprocess
import threading
import time
from contextlib import redirect_stdout

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import NodeNotReadyError
from kafka.structs import TopicPartitionReplica

from kbroker.cli import log_dirs
from tests.integration.harness import BrokerProcess, wait_until
from tests.kafka_tools import classpath

pytestmark = pytest.mark.timeout(180)

LOG_DIR_NOT_FOUND = 57
REPLICA_NOT_AVAILABLE = 9
INVALID_TOPIC_EXCEPTION = 17


@pytest.fixture(scope="module")
def two_dirs(tmp_path_factory):
    base = tmp_path_factory.mktemp("log_dirs")
    dirs = [str(base / "d0"), str(base / "d1")]
    b = BrokerProcess(base / "broker", overrides={"log.dirs": ",".join(dirs), "log.segment.bytes": 64 * 1024,
                                                  "num.partitions": 1, "log.segment.delete.delay.ms": 500})
    try:
        b.start()
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=30000)
        admin.create_topics([NewTopic("ld", 2, 1), NewTopic("other", 1, 1)])
        producer = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all")
        for i in range(400):
            producer.send("ld", value=b"seed-%04d" % i, partition=i % 2)
        producer.flush()
        producer.close()
        yield b, dirs, admin
        admin.close()
    finally:
        b.close()


def _describe(admin):
    """{log dir: {(topic, p): (size, lag, is_future)}} from kafka-python's describe_log_dirs (one broker).
    kafka-python's admin raises NodeNotReadyError when it has no connected node at that moment (its one connection
    in reconnect backoff, seen under load): asked again within a bounded wait, as the client's own retry would."""
    (broker,) = wait_until(admin.describe_log_dirs, timeout=30, ignore=(NodeNotReadyError,),
                           message="kafka-python's describe_log_dirs")
    assert broker["broker"] == 0
    out = {}
    for d in broker["log_dirs"]:
        assert d["error_code"] == 0
        out[d["log_dir"]] = {(t["name"], p["partition_index"]): (p["partition_size"], p["offset_lag"],
                                                                 p["is_future_key"])
                             for t in d["topics"] for p in t["partitions"]}
    return out


def _segment_bytes(path):
    return sum(os.path.getsize(os.path.join(path, n)) for n in os.listdir(path) if n.endswith(".log"))


def _where(dirs, name):
    return [d for d in dirs if name in os.listdir(d)]


def test_describe_log_dirs_lists_every_dir_and_partition_sizes(two_dirs):
    b, dirs, admin = two_dirs
    got = _describe(admin)
    assert list(got) == dirs
    placed = {(t, p): _where(dirs, "%s-%d" % (t, p)) for t, p in (("ld", 0), ("ld", 1), ("other", 0))}
    assert all(len(v) == 1 for v in placed.values()), placed
    for tp, (d,) in placed.items():
        size, lag, future = got[d][tp]
        assert (size, lag, future) == (_segment_bytes(os.path.join(d, "%s-%d" % tp)), 0, False)
    assert {d for (d,) in placed.values()} == set(dirs)          # the partitions are spread over both dirs
    assert got[placed[("ld", 0)][0]][("ld", 0)][0] > 200 * 9     # 200 records of 9 bytes each, plus overhead
    raw = admin.describe_log_dirs()[0]["log_dirs"]
    assert all(d["total_bytes"] > 0 and 0 < d["usable_bytes"] <= d["total_bytes"] for d in raw)


def test_alter_replica_log_dirs_error_codes(two_dirs):
    b, dirs, admin = two_dirs
    here = _where(dirs, "other-0")[0]
    res = admin.alter_replica_log_dirs({TopicPartitionReplica("other", 0, 0): dirs[0] + "-nosuch",
                                        TopicPartitionReplica("nosuch", 3, 0): dirs[0]})
    codes = {(k.topic, k.partition): v.errno for k, v in res.items()}
    assert codes == {("other", 0): LOG_DIR_NOT_FOUND, ("nosuch", 3): REPLICA_NOT_AVAILABLE}
    res = admin.alter_replica_log_dirs({TopicPartitionReplica("other", 0, 0): here})
    assert [v.errno for v in res.values()] == [0]
    res = admin.alter_replica_log_dirs({TopicPartitionReplica("x" * 249, 0, 0): dirs[0]})
    assert [v.errno for v in res.values()] == [INVALID_TOPIC_EXCEPTION]   # its -future name would pass 255 bytes
    assert _where(dirs, "other-0") == [here] and not any("-future" in n for d in dirs for n in os.listdir(d))


def test_replica_moves_between_log_dirs_while_producing(two_dirs):
    b, dirs, admin = two_dirs
    (src,) = _where(dirs, "ld-0")
    dst = dirs[1] if src == dirs[0] else dirs[0]
    producer = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", linger_ms=2)
    acked, stop, failures = [], threading.Event(), []
    seed = 200                                                    # ld-0 already holds seed-0000, -0002, ...

    def produce():
        i = 0
        while not stop.is_set():
            value = b"live-%06d" % i + b"x" * 300
            fut = producer.send("ld", value=value, partition=0)
            fut.add_callback(lambda md, v=value: acked.append((md.offset, v)))
            fut.add_errback(failures.append)
            i += 1
            if i % 50 == 0:
                time.sleep(0.002)
    writer = threading.Thread(target=produce, daemon=True)
    writer.start()
    try:
        wait_until(lambda: len(acked) > 2000, 30, message="the producer got going")
        res = admin.alter_replica_log_dirs({TopicPartitionReplica("ld", 0, 0): dst})
        assert [v.errno for v in res.values()] == [0]
        got = _describe(admin)
        if ("ld", 0) in got[src]:                                # still copying: the current log, and the future
            assert got[src][("ld", 0)][2] is False               # one once the copy began
            assert got[dst].get(("ld", 0), (0, 0, True))[2] is True
        else:                                                    # done already (a small log on a fast machine)
            assert got[dst][("ld", 0)][2] is False
        wait_until(lambda: _where(dirs, "ld-0") == [dst] and not any(
            n.startswith("ld-0.") for d in dirs for n in os.listdir(d)), 60,
            message="ld-0 moved to %s and the old directory removed" % dst)
        moved_at = len(acked)
        wait_until(lambda: len(acked) > moved_at + 1000, 30, message="the producer goes on after the swap")
    finally:
        stop.set()
        writer.join(10)
        producer.flush()
        producer.close()
    assert failures == []
    got = _describe(admin)
    assert ("ld", 0) not in got[src] and got[dst][("ld", 0)][1:] == (0, False)
    expected = {off: v for off, v in acked}
    assert len(expected) == len(acked)
    assert sorted(expected) == list(range(seed, seed + len(acked)))

    def read_all():
        c = KafkaConsumer(bootstrap_servers=b.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=10000,
                          enable_auto_commit=False, fetch_max_bytes=4 << 20)
        c.assign([TopicPartition("ld", 0)])
        out = {}
        for m in c:
            assert m.offset not in out
            out[m.offset] = m.value
            if m.offset == seed + len(acked) - 1:
                break
        c.close()
        return out
    records = read_all()
    assert sorted(records) == list(range(seed + len(acked)))
    assert all(records[off] == v for off, v in expected.items())
    b.restart()
    assert _where(dirs, "ld-0") == [dst]
    assert read_all() == records


def test_log_dirs_tool_prints_kafkas_json(two_dirs):
    b, dirs, admin = two_dirs
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert log_dirs.main(["--bootstrap-server", b.bootstrap, "--describe", "--topic-list", "ld"]) == 0
    lines = buf.getvalue().splitlines()
    assert lines[:2] == ["Querying brokers for log directories information",
                         "Received log directory information from brokers 0"]
    doc = json.loads(lines[2])
    assert lines[2] == json.dumps(doc, separators=(",", ":")) and len(lines) == 3
    got = _describe(admin)
    assert doc == {"brokers": [{"broker": 0, "logDirs": [
        {"partitions": [{"partition": "%s-%d" % tp, "size": size, "offsetLag": lag, "isFuture": fut}
                        for tp, (size, lag, fut) in sorted(got[d].items()) if tp[0] == "ld"],
         "error": None, "logDir": d} for d in dirs]}], "version": 1}
    err = subprocess.run([os.sys.executable, "-m", "kbroker.cli.admin", "log-dirs", "--bootstrap-server",
                          b.bootstrap, "--describe", "--broker-list", "0,5"], capture_output=True, text=True,
                         timeout=60)
    assert (err.returncode, err.stdout) == (1, "")
    assert err.stderr.strip() == ("ERROR: The given brokers do not exist from --broker-list: 5. Current existent "
                                  "brokers: 0")
    try:
        cp = classpath()
    except pytest.skip.Exception:
        return                                                   # Kafka's jars absent: kbroker's own checks only
    java = subprocess.run(["java", "-XX:TieredStopAtLevel=1", "-Xmx256m", "-cp", cp,
                           "org.apache.kafka.tools.LogDirsCommand", "--bootstrap-server", b.bootstrap, "--describe",
                           "--topic-list", "ld"], capture_output=True, text=True, timeout=120)
    assert java.returncode == 0, java.stderr
    jlines = java.stdout.splitlines()
    assert jlines[:2] == lines[:2]

    def canonical(d):
        for broker in d["brokers"]:
            broker["logDirs"].sort(key=lambda x: x["logDir"])
            for ld in broker["logDirs"]:
                ld["partitions"].sort(key=lambda x: x["partition"])
        return d
    assert canonical(json.loads(jlines[2])) == canonical(json.loads(log_dirs_json(b)))


def log_dirs_json(b):
    buf = io.StringIO()
    with redirect_stdout(buf):
        log_dirs.main(["--bootstrap-server", b.bootstrap, "--describe", "--topic-list", "ld"])
    return buf.getvalue().splitlines()[2]
