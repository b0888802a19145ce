"""The quickstart's step 8 on kbroker (issue 18): Apache Kafka's own Streams library and kbroker.streams' WordCount
over the same three lines, and kbroker-admin streams-application-reset against the groups they leave.

One kbroker broker (embedded backend) for the module. The input is the quickstart's file -- "all streams lead to
kafka", "hello kafka streams", "join kafka summit" -- in ``streams-plaintext-input`` (1 partition, as the quickstart
creates it), and the expected output is Kafka's documented one with the record cache off (Kafka 1.0+ quickstart,
``statestore.cache.max.bytes=0`` as WordCountDemo sets it): every count update, in input order::

    all 1, streams 1, lead 1, to 1, kafka 1, hello 1, kafka 2, streams 2, join 1, kafka 3, summit 1

(0.10.1's page shows 8 lines because its demo cached: one per word, the last values all 1, streams 2, lead 1, to 1,
kafka 3, hello 1, join 1, summit 1 -- asserted too, as the last value per key).

Kafka Streams 4.4.0 (tests/kafka_streams: our WordCount main with WordCountDemo's topology, skipped outside CI when
~/.m2 lacks it, a failure under CI=true) runs two applications in one JVM, ``at_least_once`` and
``exactly_once_v2``. Checked against kbroker, each from what Kafka's library itself did:

- both outputs are exactly the 11 records above (String keys, 8-byte big-endian Long values), the EOS one read
  ``read_committed`` and written in transactions (commit markers take offsets: its end offset is past 11, and its
  transactional id ``<app>-<process uuid>-1`` (EOS v2: one producer per thread) is listed by the coordinator);
- its InternalTopicManager created ``<app>-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition`` (cleanup.policy
  delete, segment.bytes 52428800, retention.ms -1) and ``...-changelog`` (cleanup.policy compact) with 1 partition,
  as dynamic topic configs; the changelog holds the store's updates (last value per word = the counts);
- its StreamsPartitionAssignor's group: protocol type ``consumer``, protocol ``stream``, Stable with one member.

kbroker.streams' WordCount (``python -m kbroker.streams.examples.wordcount``) over the same input gives the same
11 records in the same order, with both guarantees. kbroker-admin streams-application-reset refuses while Kafka's
application runs (Kafka's message), and afterwards resets the input offset to 0 and deletes exactly the two internal
topics; the application then reprocesses the input from scratch (the same 11 records again). Beside Kafka 4.4.0's
own StreamsResetter (tests/kafka_tools) on the same group and topics, it prints the same lines and exits alike.
The windowed example (tumbling counts + suppression) prints and writes only the final counts of a closed window.
"""
import os
import signal
import struct
import subprocess
import sys
import time

import pytest

from kbroker.cli.admin import main as admin_main
from kbroker.client.admin import AdminClient as KAdmin
from kbroker.client.admin import NewTopic as NewTopicK
from tests.integration.harness import REPO_ROOT, BrokerProcess, wait_until
from tests.kafka_streams import KafkaStreamsWordCount, classpath

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402

BROKER_OVERRIDES = {"offsets.topic.num.partitions": 1, "offsets.topic.replication.factor": 1,
                    "group.initial.rebalance.delay.ms": 0, "transaction.state.log.num.partitions": 1,
                    "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1,
                    "default.replication.factor": 1}
INPUT = "streams-plaintext-input"
OLD_INPUT = "streams-file-input"          # the 0.10.1 quickstart's name (wordcount --input-topic)
LINES = ["all streams lead to kafka", "hello kafka streams", "join kafka summit"]
EXPECTED = [("all", 1), ("streams", 1), ("lead", 1), ("to", 1), ("kafka", 1), ("hello", 1), ("kafka", 2),
            ("streams", 2), ("join", 1), ("kafka", 3), ("summit", 1)]
LAST_VALUES = {"all": 1, "streams": 2, "lead": 1, "to": 1, "kafka": 3, "hello": 1, "join": 1, "summit": 1}
STORE = "KSTREAM-AGGREGATE-STATE-STORE-0000000003"
# windowed_count with 10 s windows, no grace: [0, 10000) closes when stream time reaches 10000 ("c" at 10500);
# the late "a" at 2000 is dropped; [10000, 20000) stays open (nothing newer).
WINDOWED_INPUT = [("a b", 1000), ("A", 9999), ("b", 4000), ("c", 10500), ("a", 2000)]
WINDOWED_FINAL = ["a@0/10000 2", "b@0/10000 2"]
JAVA_APPS = (("java-wc-alos", "java-out-alos", "at_least_once"), ("java-wc-eos", "java-out-eos", "exactly_once_v2"))
# kbroker.streams' WordCount: (application id, input, output, guarantee); the ALOS one reads the 0.10.1 topic name.
PY_APPS = (("py-wc-alos", OLD_INPUT, "py-out-alos", "at_least_once"),
           ("py-wc-eos", INPUT, "py-out-eos", "exactly_once_v2"))
# Short timeouts: the apps leave the group on close, and commit every 100 ms (EOS' default) so output shows fast.
STREAMS_EXTRA = {"commit.interval.ms": 100, "replication.factor": 1, "consumer.session.timeout.ms": 10000,
                 "consumer.heartbeat.interval.ms": 1000}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("streams-examples-broker"), overrides=BROKER_OVERRIDES)
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    outputs = [out for _, out, _ in JAVA_APPS] + [out for _, _, out, _ in PY_APPS] + ["windowed-out"]
    topics = [NewTopic(t, 1, 1) for t in (INPUT, OLD_INPUT, "windowed-in", *outputs)]
    for fut in admin.create_topics(topics, operation_timeout=10).values():
        fut.result(timeout=15)
    p = Producer({"bootstrap.servers": b.bootstrap})
    for topic in (INPUT, OLD_INPUT):
        for line in LINES:
            p.produce(topic, line.encode())
    for line, ts in WINDOWED_INPUT:
        p.produce("windowed-in", line.encode(), timestamp=ts)
    assert p.flush(15) == 0
    yield b
    b.close()


def read_counts(bootstrap, topic, committed_only):
    """The (word, count) records of partition 0 of ``topic`` up to its end at the call (the last stable offset
    under read_committed), decoded String / 8-byte big-endian Long, in offset order."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "examples-reader", "enable.auto.commit": False,
                  "isolation.level": "read_committed" if committed_only else "read_uncommitted"})
    try:
        tp = TopicPartition(topic, 0)
        end = c.get_watermark_offsets(tp, timeout=10)[1]
        c.assign([TopicPartition(topic, 0, 0)])
        out, deadline = [], time.monotonic() + 15
        while c.position([tp])[0].offset < end:
            assert time.monotonic() < deadline, (topic, end, out)
            m = c.poll(0.2)
            if m is not None and not m.error():
                out.append((m.key().decode(), struct.unpack(">q", m.value())[0]))
        return out
    finally:
        c.close()


def wait_counts(bootstrap, topic, committed_only, n=len(EXPECTED), timeout=30.0):
    got = {}

    def enough():
        got["r"] = read_counts(bootstrap, topic, committed_only)
        return len(got["r"]) >= n
    wait_until(enough, timeout, 0.3, "%d records in %s (now %r)" % (n, topic, got.get("r")))
    return got["r"]


def describe_group(bootstrap, group):
    with KAdmin(bootstrap) as admin:
        coord = admin.find_coordinator(group)
        resp = admin.cluster.connection(coord.node_id).request(
            "DescribeGroups", {"groups": [group], "include_authorized_operations": False})
        return resp["groups"][0]


def reset_tool(*argv):
    """kbroker-admin streams-application-reset in-process -> (exit status, stdout lines, stderr)."""
    import contextlib
    import io
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = admin_main(["streams-application-reset", *argv])
    return status, out.getvalue().splitlines(), err.getvalue()


# -------------------------------------------------------------------------------- Kafka's Streams on kbroker

@pytest.fixture(scope="module")
def java_run(broker, tmp_path_factory):
    """Kafka's two WordCount applications run until both outputs hold the 11 records; what is only visible while
    they run is recorded (group descriptions, the reset tool's refusal, the transactions), then they are closed."""
    jars = classpath()
    app = KafkaStreamsWordCount(tmp_path_factory.mktemp("streams-java"), jars, broker.bootstrap, INPUT, JAVA_APPS,
                                extra=STREAMS_EXTRA)
    app.start()
    seen = {}
    try:
        for app_id, out, guarantee in JAVA_APPS:
            app.wait_state(app_id, "RUNNING", 90)
        for app_id, out, guarantee in JAVA_APPS:
            seen[app_id] = wait_counts(broker.bootstrap, out, guarantee != "at_least_once")
        seen["groups"] = {app_id: wait_until(lambda a=app_id: (lambda g: g if g["group_state"] == "Stable" else None)(
            describe_group(broker.bootstrap, a)), 20, 0.2, "group %s Stable" % app_id)
            for app_id, _, _ in JAVA_APPS}
        seen["refused"] = reset_tool("--bootstrap-server", broker.bootstrap, "--application-id", "java-wc-alos",
                                     "--input-topics", INPUT)
        with KAdmin(broker.bootstrap) as admin:
            seen["transactions"] = [t for listing in admin.list_transactions().values() for t in listing]
    finally:
        code = app.stop()
    assert code == 0, app.log_tail()
    assert app.closed == {a: ("NOT_RUNNING", True) for a, _, _ in JAVA_APPS}
    seen["app"] = app
    return seen


def test_kafka_streams_wordcount_output_exact(broker, java_run):
    assert java_run["app"].version == "4.4.0"
    for app_id, out, guarantee in JAVA_APPS:
        assert java_run[app_id] == EXPECTED, (guarantee, java_run[app_id])
        assert dict(java_run[app_id]) == LAST_VALUES
        # A second rebalance (Streams re-joins once its internal topics exist) may show as REBALANCING again.
        states = java_run["app"].states[app_id]
        # The listener's last line can be lost: KafkaStreams.setState calls the listener after releasing its lock,
        # from the shutdown thread, so close() may return -- and the driver print CLOSED and System.exit -- before
        # the NOT_RUNNING line is out (a CI run saw [..., 'PENDING_SHUTDOWN']). The CLOSED line carries the final
        # state: java_run asserted NOT_RUNNING there for every app.
        if states[-1] == "PENDING_SHUTDOWN":
            states = states + ["NOT_RUNNING"]
        assert states[:2] == ["REBALANCING", "RUNNING"] and states[-2:] == ["PENDING_SHUTDOWN", "NOT_RUNNING"], \
            states
        assert set(states) == {"REBALANCING", "RUNNING", "PENDING_SHUTDOWN", "NOT_RUNNING"}, states
    # Nothing more was written after the 11 (no duplicates from a retried batch or a second rebalance).
    assert read_counts(broker.bootstrap, "java-out-alos", False) == EXPECTED


def test_kafka_streams_eos_output_is_transactional(broker, java_run):
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "examples-wm"})
    try:
        low, high = c.get_watermark_offsets(TopicPartition("java-out-eos", 0), timeout=10)
    finally:
        c.close()
    # 11 data records + at least one commit marker (commit.interval.ms 100 may split them over transactions).
    assert low == 0 and high > len(EXPECTED), high
    assert read_counts(broker.bootstrap, "java-out-eos", False) == EXPECTED   # no aborted duplicates either
    eos = [t for t in java_run["transactions"] if t.transactional_id.startswith("java-wc-eos-")]
    assert len(eos) == 1 and eos[0].transactional_id.endswith("-1"), java_run["transactions"]
    assert not [t for t in java_run["transactions"] if t.transactional_id.startswith("java-wc-alos")]


def test_kafka_streams_internal_topics(broker, java_run):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    md = admin.list_topics(timeout=10)
    want = {"%s-%s-%s" % (app_id, STORE, kind): kind for app_id, _, _ in JAVA_APPS
            for kind in ("repartition", "changelog")}
    for name in want:
        assert name in md.topics and len(md.topics[name].partitions) == 1, sorted(md.topics)
    dynamic = confluent_kafka.admin.ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    resources = [ConfigResource("topic", name) for name in sorted(want)]
    for res, fut in admin.describe_configs(resources, request_timeout=10).items():
        configs = fut.result(timeout=15)
        if want[res.name] == "changelog":
            expect = {"cleanup.policy": "compact"}
        else:   # Kafka's RepartitionTopicConfig
            expect = {"cleanup.policy": "delete", "segment.bytes": "52428800", "retention.ms": "-1"}
        got = {k: (configs[k].value, configs[k].source) for k in expect}
        assert got == {k: (v, dynamic) for k, v in expect.items()}, (res.name, got)
    # The changelog: the store's puts, value = the 8-byte count (the timestamped store logs the plain value).
    changelog = read_counts(broker.bootstrap, "java-wc-alos-%s-changelog" % STORE, False)
    assert changelog == EXPECTED


def test_kafka_streams_group_uses_the_streams_assignor(java_run):
    for app_id, _, _ in JAVA_APPS:
        g = java_run["groups"][app_id]
        assert (g["error_code"], g["protocol_type"], g["protocol_data"], len(g["members"])) == (
            0, "consumer", "stream", 1), g
        assert g["members"][0]["client_id"].startswith(app_id + "-") and \
            g["members"][0]["client_id"].endswith("-StreamThread-1-consumer")


# -------------------------------------------------------------------------------- the reset tool

def test_reset_refused_while_the_application_runs(java_run):
    status, lines, err = java_run["refused"]
    assert status == 1 and lines == []
    assert err.startswith("ERROR: java.lang.IllegalStateException: Consumer group 'java-wc-alos' is still active "
                          "and has following members: [(memberId=java-wc-alos-"), err
    assert err.rstrip().endswith("Make sure to stop all running application instances before running the reset "
                                 "tool. You can use option '--force' to remove active members from the group."), err


@pytest.fixture(scope="module")
def reset_run(broker, java_run):
    """streams-application-reset of Kafka's ALOS application once it stopped: a dry run, then the real one."""
    app_id = "java-wc-alos"
    seen = {}
    with KAdmin(broker.bootstrap) as admin:
        wait_until(lambda: not admin.describe_groups([app_id])[app_id].members, 15, 0.2, "the group to be empty")
        seen["before"] = admin.list_group_offsets(app_id)
    argv = ["--bootstrap-server", broker.bootstrap, "--application-id", app_id, "--input-topics", INPUT]
    seen["dry"] = reset_tool(*argv, "--dry-run")
    with KAdmin(broker.bootstrap) as admin:
        seen["after_dry"] = (admin.list_group_offsets(app_id), admin.list_topics())
    seen["real"] = reset_tool(*argv)
    with KAdmin(broker.bootstrap) as admin:
        seen["after"] = admin.list_group_offsets(app_id)
        seen["topics"] = wait_until(lambda: (lambda t: t if not [x for x in t if x.startswith(app_id + "-")]
                                             else None)(admin.list_topics()), 15, 0.2, "the internal topics deleted")
    return seen


def test_reset_after_the_application_stopped(reset_run):
    app_id = "java-wc-alos"
    internal = ["%s-%s-changelog" % (app_id, STORE), "%s-%s-repartition" % (app_id, STORE)]
    # Kafka Streams commits its repartition topic's offsets too (11 words went through it).
    assert reset_run["before"] == {(INPUT, 0): 3, (internal[1], 0): 11}
    body = ["Reset-offsets for input topics [%s]" % INPUT,
            "Following input topics offsets will be reset to (for consumer group %s)" % app_id,
            "Topic: %s Partition: 0 Offset: 0" % INPUT,
            "Done.",
            "Deleting inferred internal topics [%s]" % ", ".join(internal),
            "Done."]
    dry_banner = "----Dry run displays the actions which will be performed when running Streams Reset Tool----"
    assert reset_run["dry"] == (0, [dry_banner] + body, "")
    offsets, topics = reset_run["after_dry"]
    assert offsets == reset_run["before"] and set(internal) <= set(topics)      # a dry run changes nothing
    assert reset_run["real"] == (0, body, "")
    # The repartition topic's committed offset went with the topic (the broker tombstones the offsets of deleted
    # partitions, Kafka's onPartitionsDeleted): a re-created repartition topic is read from its start.
    assert reset_run["after"] == {(INPUT, 0): 0}
    # Only the application's own internal topics went: the other app's, the inputs and the outputs stay.
    assert {INPUT, OLD_INPUT, "java-out-alos", "java-out-eos", "java-wc-eos-%s-changelog" % STORE,
            "java-wc-eos-%s-repartition" % STORE} <= set(reset_run["topics"])


# -------------------------------------------------------------------------------- kbroker.streams' WordCount

def start_wordcount(broker, tmp, app_id, input_topic, output_topic, guarantee):
    """``python -m kbroker.streams.examples.wordcount`` as a user runs it (stderr to <tmp>/<app_id>.log)."""
    log = open(tmp / ("%s.log" % app_id), "ab")
    argv = [sys.executable, "-m", "kbroker.streams.examples.wordcount", "--bootstrap-server", broker.bootstrap,
            "--application-id", app_id, "--input-topic", input_topic, "--output-topic", output_topic,
            "--processing-guarantee", guarantee, "--state-dir", str(tmp / ("state-" + app_id)),
            "--commit-interval-ms", "100"]
    argv += ["--config=%s=%s" % kv for kv in STREAMS_EXTRA.items() if kv[0] != "commit.interval.ms"]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                            cwd=str(REPO_ROOT), env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
    log.close()
    return proc


def stop_wordcount(proc, tmp, app_id):
    """SIGTERM (the example closes the application: commit, leave the group) -> its exit status."""
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(40)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
        raise AssertionError("wordcount %s did not exit on SIGTERM:\n%s"
                             % (app_id, (tmp / ("%s.log" % app_id)).read_text()[-3000:]))


@pytest.fixture(scope="module")
def python_run(broker, tmp_path_factory):
    """kbroker.streams' WordCount, both guarantees at once, until both outputs hold 11 records; then stopped."""
    tmp = tmp_path_factory.mktemp("streams-python")
    procs = {app_id: start_wordcount(broker, tmp, app_id, src, out, g) for app_id, src, out, g in PY_APPS}
    seen = {}
    try:
        for app_id, _, out, guarantee in PY_APPS:
            seen[app_id] = wait_counts(broker.bootstrap, out, guarantee != "at_least_once", timeout=60)
    finally:
        seen["exit"] = {app_id: stop_wordcount(proc, tmp, app_id) for app_id, proc in procs.items()}
    seen["tmp"] = tmp
    return seen


def test_kbroker_streams_wordcount_quickstart(broker, python_run):
    assert python_run["exit"] == {app_id: 0 for app_id, _, _, _ in PY_APPS}
    for app_id, _, out, guarantee in PY_APPS:
        assert python_run[app_id] == EXPECTED, (guarantee, python_run[app_id])
        assert dict(python_run[app_id]) == LAST_VALUES
    # After the close: still exactly the 11 (the final commit wrote nothing twice).
    assert read_counts(broker.bootstrap, "py-out-alos", False) == EXPECTED
    assert read_counts(broker.bootstrap, "py-out-eos", False) == EXPECTED


def test_kbroker_streams_equals_kafka_streams(broker, java_run, python_run):
    """The oracle: Kafka's library and ours give the same records in the same order, and name and configure
    their internal topics alike."""
    for (java_app, java_out, guarantee), (py_app, _, py_out, py_guarantee) in zip(JAVA_APPS, PY_APPS):
        assert guarantee == py_guarantee
        assert python_run[py_app] == java_run[java_app]
    from kbroker.streams.examples import wordcount
    java_description = java_run["app"].topology["java-wc-alos"].strip()
    assert str(wordcount.build_topology(INPUT, "java-out-alos").describe()).strip() == java_description
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    md = admin.list_topics(timeout=10)
    keys = ("cleanup.policy", "segment.bytes", "retention.ms")
    for kind in ("changelog", "repartition"):
        java_topic, py_topic = ("%s-%s-%s" % (app, STORE, kind) for app in ("java-wc-eos", "py-wc-eos"))
        assert len(md.topics[py_topic].partitions) == len(md.topics[java_topic].partitions) == 1
        described = admin.describe_configs([ConfigResource("topic", java_topic), ConfigResource("topic", py_topic)],
                                           request_timeout=10)
        java_cfg, py_cfg = ({k: (c[k].value, c[k].source) for k in keys}
                            for c in (f.result(timeout=15) for f in described.values()))
        assert py_cfg == java_cfg, (kind, py_cfg, java_cfg)


def test_reset_then_reprocess_from_scratch(broker, reset_run, tmp_path_factory):
    """After streams-application-reset, kbroker.streams' WordCount under Kafka's application id reads the input
    again from offset 0 with empty state (the internal topics are gone): the same 11 records follow the first 11."""
    tmp = tmp_path_factory.mktemp("streams-reprocess")
    proc = start_wordcount(broker, tmp, "java-wc-alos", INPUT, "java-out-alos", "at_least_once")
    try:
        got = wait_counts(broker.bootstrap, "java-out-alos", False, n=2 * len(EXPECTED), timeout=60)
    finally:
        assert stop_wordcount(proc, tmp, "java-wc-alos") == 0
    assert got == EXPECTED + EXPECTED
    with KAdmin(broker.bootstrap) as admin:
        assert admin.list_group_offsets("java-wc-alos")[(INPUT, 0)] == 3


def test_reset_force_removes_the_members(broker):
    """--force: the members of a live group are removed with LeaveGroup v3+ (Kafka's removeMembersFromConsumerGroup)
    before the (dry) run; without it the tool refuses."""
    group = "force-me"
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "session.timeout.ms": 6000,
                  "enable.auto.commit": False})
    try:
        c.subscribe([INPUT])
        wait_until(lambda: c.poll(0.1) is not None or c.assignment(), 20, 0.05, "the consumer's assignment")
        argv = ["--bootstrap-server", broker.bootstrap, "--application-id", group, "--input-topics", INPUT,
                "--dry-run"]
        status, lines, err = reset_tool(*argv)
        assert status == 1 and "Consumer group 'force-me' is still active" in err
        status, lines, err = reset_tool(*argv, "--force")
        assert (status, err) == (0, ""), err
        assert lines[:2] == ["Force deleting all active members in the group: %s" % group,
                             "----Dry run displays the actions which will be performed when running Streams Reset "
                             "Tool----"]
    finally:
        c.close()


# -------------------------------------------------------------------------------- the reset tool beside Kafka's

def kafka_reset_tool(*argv):
    """Kafka 4.4.0's own kafka-streams-application-reset (org.apache.kafka.tools.StreamsResetter, tests/kafka_tools'
    jars) -> (exit status, stdout lines)."""
    from tests import kafka_tools
    done = subprocess.run(["java", *kafka_tools.JVM_FLAGS, "-cp", kafka_tools.classpath(),
                           "org.apache.kafka.tools.StreamsResetter", *argv], capture_output=True, timeout=60)
    return done.returncode, done.stdout.decode().splitlines()


def same_order(lines):
    """Kafka's tool lists partitions and inferred topics in Java HashSet order (unspecified); ours sorts them: both
    sorted here -- each run of "Topic: T Partition: P ..." lines, and the topic list of the "Deleting" line."""
    import re
    out, block = [], []
    for line in lines:
        if line.startswith("Topic: ") and " Partition: " in line:
            block.append(line)
            continue
        out += sorted(block)
        block = []
        m = re.fullmatch(r"(Deleting (?:inferred|specified) internal topics )\[(.*)\]", line)
        if m:
            line = "%s[%s]" % (m.group(1), ", ".join(sorted(t for t in m.group(2).split(", ") if t)))
        out.append(line)
    return out + sorted(block)


@pytest.mark.parametrize("argv", [
    ["--input-topics", "rs-in,rs-nope", "--intermediate-topics", "rs-mid", "--dry-run"],
    ["--input-topics", "rs-in,rs-app-in-changelog", "--to-offset", "7", "--internal-topics", "rs-app-s-changelog",
     "--dry-run"],
    ["--input-topics", "rs-in", "--shift-by", "-2", "--dry-run"],
    ["--dry-run"],
], ids=["intermediate-missing", "to-offset-specified-internal", "shift-by", "nothing"])
def test_reset_output_equals_kafkas_tool(broker, argv):
    """Kafka's tool and ours against the same group and topics print the same lines (up to Java's HashSet order)
    and exit alike. The input's partition 0 holds 5 records, partition 1 holds 5; committed offsets 3 and 4."""
    with KAdmin(broker.bootstrap) as admin:
        if "rs-in" not in admin.list_topics():
            admin.create_topics([NewTopicK(t, n, 1, None, {}) for t, n in (
                ("rs-in", 2), ("rs-mid", 1), ("rs-app-s-changelog", 1), ("rs-app-r-repartition", 1),
                ("rs-app-in-changelog", 1))])
            p = Producer({"bootstrap.servers": broker.bootstrap})
            for i in range(10):
                p.produce("rs-in", b"x", partition=i % 2)
                p.produce("rs-mid", b"y")
            assert p.flush(15) == 0
        admin.alter_group_offsets("rs-app", {("rs-in", 0): 3, ("rs-in", 1): 4})
    full = ["--bootstrap-server", broker.bootstrap, "--application-id", "rs-app", *argv]
    java_status, java_lines = kafka_reset_tool(*full)
    status, lines, err = reset_tool(*full)
    assert (status, same_order(lines)) == (java_status, same_order(java_lines)), (err, java_lines, lines)


def test_windowed_count_example_prints_final_counts(broker, tmp_path):
    """``python -m kbroker.streams.examples.windowed_count``: tumbling counts with suppression on the real runtime,
    final results only, on stdout and in the output topic (String key word@start, Long count)."""
    argv = [sys.executable, "-m", "kbroker.streams.examples.windowed_count", "--bootstrap-server", broker.bootstrap,
            "--input-topic", "windowed-in", "--output-topic", "windowed-out", "--window-ms", "10000",
            "--state-dir", str(tmp_path / "state"), "--commit-interval-ms", "100",
            "--config", "consumer.session.timeout.ms=10000"]
    with open(tmp_path / "windowed.log", "wb") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
                                cwd=str(REPO_ROOT), env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
    try:
        got = wait_counts(broker.bootstrap, "windowed-out", False, n=len(WINDOWED_FINAL), timeout=60)
    finally:
        assert stop_wordcount(proc, tmp_path, "windowed") == 0
    printed = proc.stdout.read().decode().splitlines()
    assert printed == WINDOWED_FINAL
    assert got == [("a@0", 2), ("b@0", 2)]
