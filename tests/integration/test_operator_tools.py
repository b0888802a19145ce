"""The operator tools of issue 14 (I) as processes against one real broker, output checked against Kafka's format:
`kbroker-admin delete-records` (kafka-delete-records.sh), `get-offsets` (kafka-get-offsets.sh), `leader-election`
(kafka-leader-election.sh; the elections that move leaders are in test_admin_apis.py's cluster),
`broker-api-versions` (kafka-broker-api-versions.sh), and the console tools' group and key options
(`kbroker-console-consumer --group ... --property print.key=true`, `kbroker-console-producer --property
parse.key=true`).

One broker for the module; each test uses its own topics.
"""
import json
import os
import re
import subprocess
import sys

import pytest

from tests.integration.harness import REPO_ROOT, BrokerProcess, wait_until

TOOL_TIMEOUT = 60
OOR = ("org.apache.kafka.common.errors.OffsetOutOfRangeException: The requested offset is not within the range of "
       "offsets maintained by the server.")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("tools_broker"), overrides={
        "group.initial.rebalance.delay.ms": 0,
        # the DeleteRecords test waits for both within a second
        "log.flush.start.offset.checkpoint.interval.ms": 200, "log.retention.check.interval.ms": 200})
    try:
        b.start()
        yield b
    finally:
        b.close()


def run(module, *argv, stdin=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run([sys.executable, "-m", "kbroker.cli." + module, *map(str, argv)], input=stdin,
                          capture_output=True, timeout=TOOL_TIMEOUT, env=env, cwd=str(REPO_ROOT))
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")


def admin(broker, tool, *argv):
    return run("admin", tool, "--bootstrap-server", broker.bootstrap, *argv)


def create(broker, topic, partitions):
    from kbroker.client.admin import AdminClient, NewTopic
    with AdminClient(broker.bootstrap) as a:
        a.create_topics([NewTopic(topic, partitions, 1)])


def produce(broker, topic, lines, *props):
    argv = ["--bootstrap-server", broker.bootstrap, "--topic", topic]
    for p in props:
        argv += ["--property", p]
    rc, out, err = run("console_producer", *argv, stdin=("\n".join(lines) + "\n").encode())
    assert (rc, err) == (0, ""), err


def test_delete_records_and_get_offsets(broker, tmp_path):
    create(broker, "dt", 2)
    for p in range(2):
        produce(broker, "dt", ["%d:v%d" % (p, i) for i in range(5)], "parse.key=true", "key.separator=:")
    # keys "0" and "1" hash to different partitions: 5 records each (murmur2, checked by the offsets below)
    assert admin(broker, "get-offsets", "--topic", "dt") == (0, "dt:0:5\ndt:1:5\n", "")

    spec = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"partitions": [{"topic": "dt", "partition": 0, "offset": 3},
                                               {"topic": "dt", "partition": 1, "offset": 9},
                                               {"topic": "nope", "partition": 0, "offset": 0}], "version": 1}))
    assert admin(broker, "delete-records", "--offset-json-file", spec) == (0, (
        "Executing records delete operation\n"
        "Records delete operation completed:\n"
        "partition: dt-0\tlow_watermark: 3\n"
        "partition: dt-1\terror: " + OOR + "\n"
        "partition: nope-0\terror: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: This server "
        "does not host this topic-partition.\n"), "")

    assert admin(broker, "get-offsets", "--topic", "d.", "--time", "-2") == (0, "dt:0:3\ndt:1:0\n", "")
    assert admin(broker, "get-offsets", "--topic-partitions", "dt:1", "--time", "earliest") == (0, "dt:1:0\n", "")
    assert admin(broker, "get-offsets", "--topic", "dt", "--partitions", "0", "--time", "latest") == \
        (0, "dt:0:5\n", "")
    # no record at or after that time: no line (Kafka leaves out UNKNOWN_OFFSET)
    assert admin(broker, "get-offsets", "--topic", "dt", "--time", "99999999999999") == (0, "", "")
    assert admin(broker, "get-offsets", "--topic-partitions", "dt:0-1,nothing", "--time", "-2") == (0, "dt:0:3\n", "")
    # Kafka's order is the "topic-partition" strings': 10 and 11 before 2
    create(broker, "ord", 12)
    rc, out, _ = admin(broker, "get-offsets", "--topic", "ord")
    assert (rc, out) == (0, "".join("ord:%d:0\n" % p for p in (0, 1, 10, 11, 2, 3, 4, 5, 6, 7, 8, 9)))
    assert admin(broker, "get-offsets", "--topic", "dt", "--partitions", "0-1") == (
        1, "", "Error occurred: --partitions expects a comma separated list of numeric partition ids, but "
               "received: 0-1\n")
    assert admin(broker, "get-offsets", "--topic", "nothing.*") == \
        (1, "", "Error occurred: Could not match any topic-partitions with the specified filters\n")

    # the console consumer reading from the beginning starts at the new log start offset
    rc, out, _ = run("console_consumer", "--bootstrap-server", broker.bootstrap, "--topic", "dt", "--partition", 0,
                     "--from-beginning", "--timeout-ms", 3000, "--property", "print.offset=true")
    assert (rc, out) == (0, "Offset:3\tv3\nOffset:4\tv4\n")

    spec.write_text(json.dumps({"partitions": [{"topic": "dt", "partition": 0, "offset": 1},
                                               {"topic": "dt", "partition": 0, "offset": 2}]}))
    assert admin(broker, "delete-records", "--offset-json-file", spec) == (
        1, "", "Offset json file contains duplicate topic partitions: dt-0\n")
    spec.write_text(json.dumps({"partitions": [], "version": 2}))
    assert admin(broker, "delete-records", "--offset-json-file", spec) == \
        (1, "", "Not supported version field value 2\n")


def test_console_group_resumes_and_key_properties(broker):
    create(broker, "cg", 1)
    produce(broker, "cg", ["k%d:v%d" % (i, i) for i in range(6)], "parse.key=true", "key.separator=:")
    props = ["--property", "print.key=true", "--property", "key.separator=|", "--property", "print.partition=true",
             "--property", "print.offset=true"]
    base = ["--bootstrap-server", broker.bootstrap, "--topic", "cg", "--group", "g1"]
    rc, out, err = run("console_consumer", *base, "--from-beginning", "--max-messages", 3, *props)
    assert (rc, out) == (0, "".join("Partition:0|Offset:%d|k%d|v%d\n" % (i, i, i) for i in range(3))), err
    assert err.endswith("Processed a total of 3 messages\n")
    # the same group resumes after what was printed (committed at exit); --from-beginning no longer matters
    rc, out, err = run("console_consumer", *base, "--from-beginning", "--max-messages", 2, *props)
    assert (rc, out) == (0, "Partition:0|Offset:3|k3|v3\nPartition:0|Offset:4|k4|v4\n"), err
    from kbroker.client.admin import AdminClient
    with AdminClient(broker.bootstrap) as a:
        assert a.list_group_offsets("g1") == {("cg", 0): 5}
    # headers and the null marker through the producer, printed back by the consumer
    create(broker, "ch", 1)
    produce(broker, "ch", ["h1:x,h2\tk7:v7", "h3:y\tNULL:NULL"], "parse.headers=true", "parse.key=true",
            "key.separator=:", "null.marker=NULL")
    rc, out, err = run("console_consumer", "--bootstrap-server", broker.bootstrap, "--topic", "ch", "--from-beginning",
                       "--max-messages", 2, "--property", "print.headers=true", "--property", "print.key=true")
    assert (rc, out) == (0, "h1:x,h2:null\tk7\tv7\nh3:y\tnull\tnull\n"), err
    # print.timestamp: CreateTime:<ms>
    rc, out, err = run("console_consumer", *base[:4], "--group", "g2", "--from-beginning", "--max-messages", 1,
                       "--property", "print.timestamp=true")
    assert rc == 0 and re.fullmatch(r"CreateTime:\d{13}\tv0\n", out), (out, err)


def test_leader_election_tool_on_one_broker(broker, tmp_path):
    create(broker, "le", 2)
    assert admin(broker, "leader-election", "--election-type", "preferred", "--topic", "le", "--partition", 0) == \
        (0, "Valid replica already elected for partitions le-0\n", "")
    spec = tmp_path / "el.json"
    spec.write_text(json.dumps({"partitions": [{"topic": "le", "partition": 1}, {"topic": "le", "partition": 7}]}))
    assert admin(broker, "leader-election", "--election-type", "PREFERRED", "--path-to-json-file", spec) == (1, (
        "Valid replica already elected for partitions le-1\n"
        "Error completing leader election (PREFERRED) for partition: le-7: "
        "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: The partition does not exist.\n"),
        "1 replica(s) could not be elected\n")
    rc, out, err = admin(broker, "leader-election", "--election-type", "unclean", "--all-topic-partitions")
    assert (rc, err) == (0, "") and out.startswith("Valid replica already elected for partitions ")
    assert {"le-0", "le-1"} <= set(out.strip().split("partitions ", 1)[1].split(", "))
    # Kafka 3.9's option checks and file messages
    assert admin(broker, "leader-election", "--topic", "le", "--partition", 0) == \
        (1, "", "Missing required option(s): election-type\n")
    assert admin(broker, "leader-election", "--election-type", "preferred", "--topic", "le",
                 "--all-topic-partitions") == \
        (1, "", "One and only one of the following options is required: topic, all-topic-partitions, "
                "path-to-json-file\n")
    assert admin(broker, "leader-election", "--election-type", "preferred", "--topic", "le") == \
        (1, "", "Missing required option(s): partition\n")
    assert admin(broker, "leader-election", "--election-type", "preferred", "--all-topic-partitions",
                 "--partition", 1) == (1, "", "Option partition is only allowed if topic is used\n")
    spec.write_text(json.dumps({"partitions": [{"topic": "le", "partition": 1}, {"topic": "le", "partition": 1}]}))
    assert admin(broker, "leader-election", "--election-type", "preferred", "--path-to-json-file", spec) == \
        (1, "", "Replica election data contains duplicate partitions: [le-1]\n")
    spec.write_text(json.dumps({"partition": []}))
    assert admin(broker, "leader-election", "--election-type", "preferred", "--path-to-json-file", spec) == \
        (1, "", 'Replica election data is missing "partitions" field\n')


def test_broker_api_versions(broker):
    from kbroker.client.connection import BrokerConnection
    rc, out, err = admin(broker, "broker-api-versions")
    assert (rc, err) == (0, "")
    lines = out.split("\n")
    assert lines[0] == "%s (id: %d rack: null) -> (" % (broker.bootstrap, broker.broker_id)
    assert lines[-2:] == [")", ""]
    body = lines[1:-2]
    with BrokerConnection(broker.host, broker.port) as conn:
        ranges = conn.api_ranges
    # one line per API key, ascending; each advertised one with its range, Kafka 3.9's others UNSUPPORTED
    keys = [int(re.match(r"\t\w+\((\d+)\): ", line).group(1)) for line in body]
    assert keys == sorted(keys) and set(ranges) <= set(keys) and len(keys) == len(set(keys))
    assert "\tProduce(0): %d to %d [usable: %d]," % (ranges[0][0], ranges[0][1], min(11, ranges[0][1])) in body
    assert "\tDeleteRecords(21): 0 to 2 [usable: 2]," in body
    assert "\tOffsetDelete(47): 0 [usable: 0]," in body
    assert "\tCreateDelegationToken(38): UNSUPPORTED," in body
    assert sum(1 for line in body if line.endswith("UNSUPPORTED,") or line.endswith("UNSUPPORTED")) == \
        len(keys) - len(ranges)
    assert body[-1].endswith("]") or body[-1].endswith("UNSUPPORTED")


def test_log_start_survives_kill9_and_retention_deletes_below_it(broker, tmp_path):
    """(Last: it restarts the module's broker.) The start offset is in log-start-offset-checkpoint within the
    checkpoint interval, a kill -9 restart keeps it, and retention removes the segments wholly below it while the
    segment holding it stays."""
    from kbroker.client.admin import AdminClient, NewTopic
    with AdminClient(broker.bootstrap) as a:
        a.create_topics([NewTopic("ks", 1, 1, configs={"segment.bytes": "200"})])
    from kbroker.client.simple import SimpleClient, make_batch
    with SimpleClient(broker.bootstrap) as c:            # one record per batch: segments of 2 batches (85 bytes)
        for i in range(12):
            assert c.produce_batches("ks", {0: make_batch([(None, b"value-%02d" % i)])}, -1, 10000)[0].error_code == 0
    part_dir = os.path.join(broker.properties()["log.dirs"], "ks-0")
    before = sorted(f for f in os.listdir(part_dir) if f.endswith(".log"))
    assert len(before) >= 4, before
    spec = tmp_path / "ks.json"
    spec.write_text(json.dumps({"partitions": [{"topic": "ks", "partition": 0, "offset": 7}], "version": 1}))
    rc, out, _ = admin(broker, "delete-records", "--offset-json-file", spec)
    assert (rc, out.splitlines()[-1]) == (0, "partition: ks-0\tlow_watermark: 7")
    checkpoint = os.path.join(broker.properties()["log.dirs"], "log-start-offset-checkpoint")
    wait_until(lambda: "ks 0 7\n" in open(checkpoint).read(), 10, 0.05, "ks-0 checkpointed at 7")
    # retention: every segment whose successor starts at or below 7 goes; the one holding 7 stays
    bases = sorted(int(f[:-4]) for f in before)
    keep = [b for i, b in enumerate(bases) if i + 1 == len(bases) or bases[i + 1] > 7]
    wait_until(lambda: sorted(int(f[:-4]) for f in os.listdir(part_dir) if f.endswith(".log")) == keep, 10, 0.05,
               "segments below offset 7 deleted")
    assert keep[0] <= 7
    broker.restart(kill=True)
    assert admin(broker, "get-offsets", "--topic", "ks", "--time", "earliest") == (0, "ks:0:7\n", "")
    rc, out, _ = run("console_consumer", "--bootstrap-server", broker.bootstrap, "--topic", "ks", "--from-beginning",
                     "--max-messages", 5, "--timeout-ms", 5000)
    assert (rc, out) == (0, "".join("value-%02d\n" % i for i in range(7, 12)))
