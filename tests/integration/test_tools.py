"""kbroker-admin and the console tools as processes against a real broker process (tests/integration/harness.py).

One broker per module (`shared_broker`, broker.id 0, no static topic overrides in its server.properties), so every
test uses its own topic names. The tools run as `python -m kbroker.cli.<tool>`, exactly as the console scripts do.
"""
import os
import subprocess
import sys

import pytest

from kbroker.client.partitioner import partition_for_key
from tests.integration.harness import REPO_ROOT

TOOL_TIMEOUT = 60


def run(module, *argv, stdin=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run([sys.executable, "-m", "kbroker.cli." + module, *map(str, argv)], input=stdin,
                          capture_output=True, timeout=TOOL_TIMEOUT, env=env, cwd=str(REPO_ROOT))
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")


@pytest.fixture
def tools(shared_broker):
    bs = ["--bootstrap-server", shared_broker.bootstrap]

    class Tools:
        broker_id = shared_broker.broker_id

        @staticmethod
        def topics(*argv):
            return run("admin", "topics", *bs, *argv)

        @staticmethod
        def configs(*argv):
            return run("admin", "configs", *bs, *argv)

        @staticmethod
        def produce(topic, data, *argv):
            return run("console_producer", *bs, "--topic", topic, *argv, stdin=data)

        @staticmethod
        def consume(topic, *argv):
            return run("console_consumer", *bs, "--topic", topic, *argv)
    return Tools


def _partition_line(topic, p, b):
    return "\tTopic: %s\tPartition: %d\tLeader: %d\tReplicas: %d\tIsr: %d\n" % (topic, p, b, b, b)


def test_topic_lifecycle_exact_output(tools):
    b = tools.broker_id
    assert tools.topics("--create", "--topic", "life", "--partitions", 3, "--replication-factor", 1,
                        "--config", "segment.bytes=1000000") == (0, "Created topic life.\n", "")
    assert tools.topics("--create", "--topic", "life-two", "--partitions", 1, "--replication-factor", 1) == \
        (0, "Created topic life-two.\n", "")
    assert tools.topics("--list", "--topic", "life.*") == (0, "life\nlife-two\n", "")

    rc, out, err = tools.topics("--describe", "--topic", "life")
    assert (rc, err) == (0, "")
    assert out == ("Topic: life\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: segment.bytes=1000000\n"
                   + "".join(_partition_line("life", p, b) for p in range(3)))

    assert tools.topics("--alter", "--topic", "life", "--partitions", 5) == (0, "", "")
    rc, out, _ = tools.topics("--describe", "--topic", "life")
    assert out.splitlines()[0] == "Topic: life\tPartitionCount: 5\tReplicationFactor: 1\tConfigs: segment.bytes=1000000"
    assert out.count("\n") == 6 and out.endswith(_partition_line("life", 4, b))

    assert tools.topics("--describe", "--topic", "life.*", "--topics-with-overrides") == \
        (0, "Topic: life\tPartitionCount: 5\tReplicationFactor: 1\tConfigs: segment.bytes=1000000\n", "")

    assert tools.topics("--delete", "--topic", "life-two") == (0, "", "")
    assert tools.topics("--list", "--topic", "life.*") == (0, "life\n", "")
    assert tools.topics("--delete", "--topic", "life-two") == \
        (1, "", "Error while executing topic command : Topic 'life-two' does not exist as expected\n")
    assert tools.topics("--delete", "--topic", "life-two", "--if-exists") == (0, "", "")


def test_topic_errors(tools):
    assert tools.topics("--create", "--topic", "dup", "--partitions", 1, "--replication-factor", 1)[0] == 0
    assert tools.topics("--create", "--topic", "dup", "--partitions", 1, "--replication-factor", 1) == \
        (1, "", "Error while executing topic command : Topic 'dup' already exists.\n")
    assert tools.topics("--create", "--topic", "dup", "--partitions", 1, "--if-not-exists") == (0, "", "")
    rc, out, err = tools.topics("--alter", "--topic", "dup", "--partitions", 1)
    assert (rc, out) == (1, "")
    assert err.startswith("Error while executing topic command : ")
    rc, out, err = tools.topics("--create", "--topic", "rf", "--partitions", 1, "--replication-factor", 3)
    assert (rc, out) == (1, "")
    assert err.startswith("Error while executing topic command : ")
    assert tools.topics("--describe", "--topic", "nope") == \
        (1, "", "Error while executing topic command : Topic 'nope' does not exist as expected\n")


def test_describe_json(tools):
    import json
    assert tools.topics("--create", "--topic", "js", "--partitions", 2, "--replication-factor", 1)[0] == 0
    rc, out, _ = tools.topics("--describe", "--topic", "js", "--output", "json")
    b = tools.broker_id
    assert json.loads(out) == [{"topic": "js", "topic_id": None, "partition_count": 2, "replication_factor": 1,
                                "configs": {}, "partitions": [
                                    {"partition": p, "leader": b, "replicas": [b], "isr": [b]} for p in (0, 1)]}]


def test_configs_alter_and_describe(tools):
    assert tools.topics("--create", "--topic", "cfg", "--partitions", 1, "--replication-factor", 1,
                        "--config", "segment.bytes=1000000")[0] == 0
    assert tools.configs("--entity-type", "topics", "--entity-name", "cfg", "--alter",
                         "--add-config", "retention.ms=86400000,cleanup.policy=[compact,delete]") == \
        (0, "Completed updating config for topic cfg.\n", "")
    rc, out, err = tools.configs("--entity-type", "topics", "--entity-name", "cfg", "--describe")
    assert (rc, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "Dynamic configs for topic cfg are:"
    # Entries are sorted by name; the synonyms list is whatever the broker reports.
    assert [line.split(" synonyms={")[0] for line in lines[1:]] == [
        "  cleanup.policy=compact,delete sensitive=false",
        "  retention.ms=86400000 sensitive=false",
        "  segment.bytes=1000000 sensitive=false"]
    assert tools.configs("--topic", "cfg", "--alter", "--delete-config", "segment.bytes,retention.ms") == \
        (0, "Completed updating config for topic cfg.\n", "")
    assert tools.topics("--describe", "--topic", "cfg", "--topics-with-overrides") == \
        (0, "Topic: cfg\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: cleanup.policy=compact,delete\n", "")
    assert tools.configs("--topic", "cfg", "--alter", "--delete-config", "segment.bytes") == \
        (1, "", "Error while executing config command : Invalid config(s): segment.bytes\n")
    rc, out, err = tools.configs("--topic", "cfg", "--alter", "--add-config", "segment.bytes=abc")
    assert (rc, out) == (1, "")
    assert err.startswith("Error while executing config command : ")


def test_console_round_trip_with_keys(tools):
    assert tools.topics("--create", "--topic", "keyed", "--partitions", 3, "--replication-factor", 1)[0] == 0
    lines = [("k%d" % (i % 4), "value-%d" % i) for i in range(12)]
    data = "".join("%s:%s\n" % kv for kv in lines).encode()
    assert tools.produce("keyed", data, "--property", "parse.key=true", "--property", "key.separator=:") == \
        (0, "", "")
    rc, out, err = tools.consume("keyed", "--from-beginning", "--max-messages", 12, "--timeout-ms", 10000,
                                 "--property", "print.key=true", "--property", "print.partition=true",
                                 "--property", "key.separator=|")
    assert (rc, err) == (0, "Processed a total of 12 messages\n")
    got = [line.split("|") for line in out.splitlines()]
    assert len(got) == 12
    # Every record sits on the partition Kafka's murmur2 partitioner picks for its key, and each partition keeps
    # the producer's order.
    for part, key, value in got:
        assert part == "Partition:%d" % partition_for_key(key.encode(), 3)
    for p in range(3):
        mine = [(k, v) for part, k, v in got if part == "Partition:%d" % p]
        assert mine == [kv for kv in lines if partition_for_key(kv[0].encode(), 3) == p]
    assert sorted((k, v) for _p, k, v in got) == sorted(lines)


def test_console_unkeyed_round_robin_and_offsets(tools):
    assert tools.topics("--create", "--topic", "rr", "--partitions", 2, "--replication-factor", 1)[0] == 0
    assert tools.produce("rr", b"a\nb\nc\nd\ne") == (0, "", "")  # last line without newline still counts
    assert tools.consume("rr", "--partition", 0, "--offset", "earliest", "--timeout-ms", 1500) == \
        (0, "a\nc\ne\n", "Processed a total of 3 messages\n")
    assert tools.consume("rr", "--partition", 1, "--offset", 1, "--timeout-ms", 1500,
                         "--property", "print.offset=true") == \
        (0, "Offset:1\td\n", "Processed a total of 1 messages\n")
    # From the log end, nothing arrives before the timeout.
    assert tools.consume("rr", "--timeout-ms", 1000) == (0, "", "Processed a total of 0 messages\n")


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_console_compression(tools, codec):
    topic = "comp-" + codec
    assert tools.topics("--create", "--topic", topic, "--partitions", 1, "--replication-factor", 1)[0] == 0
    payload = "".join("line %d %s\n" % (i, "x" * (i % 50)) for i in range(200)).encode()
    assert tools.produce(topic, payload, "--compression-codec", codec) == (0, "", "")
    assert tools.consume(topic, "--from-beginning", "--max-messages", 200, "--timeout-ms", 10000) == \
        (0, payload.decode(), "Processed a total of 200 messages\n")


def test_producer_missing_separator(tools):
    assert tools.topics("--create", "--topic", "sep", "--partitions", 1, "--replication-factor", 1)[0] == 0
    rc, out, err = tools.produce("sep", b"a:1\nnokey\nb:2\n", "--property", "parse.key=true",
                                 "--property", "key.separator=:")
    assert (rc, out, err) == (1, "", "ERROR No key separator found on line number 2: 'nokey'\n")
    assert tools.consume("sep", "--from-beginning", "--timeout-ms", 1500, "--property", "print.key=true") == \
        (0, "a\t1\n", "Processed a total of 1 messages\n")
