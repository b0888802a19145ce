"""The librdkafka-based tools of kbroker-admin against one broker (issue 14 item 2): producer-perf-test,
consumer-perf-test (Kafka's flags, progress and summary lines), verifiable-producer and verifiable-consumer
(Kafka's JSON event lines, checked the way kafkatest's services read them). One broker per module; each test its
own topics. The tools run as `python -m kbroker.cli.admin <tool>`, as the console script does.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from kbroker.client.admin import AdminClient
from tests.integration.harness import REPO_ROOT, BrokerProcess, wait_until

FLOAT = r"\d+\.\d+"
WINDOW = re.compile(r"^(\d+) records sent, (%s) records/sec \((%s) MB/sec\), (%s) ms avg latency, (%s) ms max "
                    r"latency\.$" % ((FLOAT,) * 4))
TOTAL = re.compile(r"^(\d+) records sent, (\d+\.\d{6}) records/sec \((\d+\.\d\d) MB/sec\), (\d+\.\d\d) ms avg "
                   r"latency, (\d+\.\d\d) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms "
                   r"99\.9th\.$")
DATE = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"
HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, "
          "fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
DETAILED_HEADER = ("time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                   "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
F4 = r"-?\d+\.\d{4}"


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    """One broker for the module; a new group's first join is not delayed (Kafka's 3 s default would be most of
    each consumer test's time)."""
    b = BrokerProcess(tmp_path_factory.mktemp("client_tools"), overrides={"group.initial.rebalance.delay.ms": 0})
    try:
        b.start()
        yield b
    finally:
        b.close()


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def admin(*argv, timeout=90):
    proc = subprocess.run([sys.executable, "-m", "kbroker.cli.admin", *map(str, argv)], capture_output=True,
                          timeout=timeout, env=_env(), cwd=str(REPO_ROOT))
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


def spawn(*argv):
    return subprocess.Popen([sys.executable, "-m", "kbroker.cli.admin", *map(str, argv)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=_env(), cwd=str(REPO_ROOT))


def create(bootstrap, topic, partitions=1):
    from confluent_kafka.admin import AdminClient, NewTopic

    a = AdminClient({"bootstrap.servers": bootstrap})
    a.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def read_values(bootstrap, topic, partitions=1):
    from tests.integration.test_replication_common import read_all

    return [v for p, recs in sorted(read_all(bootstrap, topic, partitions).items()) for _, v in recs]


def test_producer_and_consumer_perf_lines(shared_broker):
    bs = shared_broker.bootstrap
    create(bs, "perf")
    # the consumer reads while the producer writes 4,000 records of 100 bytes at 2,000/s (~2 s): both print
    # progress lines every 300 ms
    consumer = spawn("consumer-perf-test", "--bootstrap-server", bs, "--topic", "perf", "--messages", 4000,
                     "--show-detailed-stats", "--reporting-interval", 300, "--timeout", 30000, "--group", "perf-live")
    with AdminClient(bs) as a:   # the consumer has joined
        wait_until(lambda: a.describe_groups(["perf-live"])["perf-live"].state == "Stable", 30, 0.1,
                   ignore=(Exception,))
    rc, out, err = admin("producer-perf-test", "--topic", "perf", "--num-records", 4000, "--record-size", 100,
                         "--throughput", 2000, "--producer-props", "bootstrap.servers=%s" % bs, "acks=all",
                         "--reporting-interval", 300)
    assert rc == 0, err
    lines = out.splitlines()
    windows = [WINDOW.match(line) for line in lines[:-1]]
    assert len(windows) >= 3 and all(windows), out
    total = TOTAL.match(lines[-1])
    assert total, out
    assert int(total.group(1)) == 4000 and sum(int(w.group(1)) for w in windows) <= 4000
    assert 1500 <= float(total.group(2)) <= 2100, out        # throttled at 2,000 records/s
    p50, p95, p99, p999 = map(int, total.groups()[5:])
    assert p50 <= p95 <= p99 <= p999 <= float(total.group(5))
    values = read_values(bs, "perf")
    assert len(values) == 4000 and len(set(values)) == 1 and re.fullmatch(rb"[A-Z]{100}", values[0])

    cout, cerr = consumer.communicate(timeout=60)
    assert consumer.returncode == 0, cerr
    clines = cout.decode().splitlines()
    assert clines[0] == DETAILED_HEADER
    progress = [re.fullmatch(r"(%s), 0, (%s), (%s), (\d+), (%s), (\d+), (-?\d+), (%s), (%s)" % (DATE, F4, F4, F4, F4,
                                                                                              F4), line)
                for line in clines[1:]]
    assert len(progress) >= 2 and all(progress), cout
    counts = [int(m.group(4)) for m in progress]
    assert counts == sorted(counts) and counts[-1] <= 4000
    assert [m.group(2) for m in progress] == ["%.4f" % (c * 100 / 1048576.0) for c in counts]

    # summary mode over the same 4,000 records: header, then the one line with exact totals
    rc, out, err = admin("consumer-perf-test", "--bootstrap-server", bs, "--topic", "perf", "--messages", 4000,
                         "--group", "perf-summary")
    assert rc == 0, err
    header, line = out.splitlines()
    assert header == HEADER
    m = re.fullmatch(r"(%s), (%s), (%s), (%s), (\d+), (%s), (\d+), (-?\d+), (%s), (%s)" % (DATE, DATE, F4, F4, F4, F4,
                                                                                         F4), line)
    assert m, line
    assert m.group(3) == "%.4f" % (4000 * 100 / 1048576.0) and m.group(5) == "4000"
    rc, out, err = admin("consumer-perf-test", "--bootstrap-server", bs, "--topic", "perf", "--messages", 4001,
                         "--hide-header", "--timeout", 1500)
    assert rc == 0 and out.splitlines()[0].startswith("WARNING: Exiting before consuming the expected number of "
                                                      "messages: timeout (1500 ms) exceeded.")
    assert re.match(r"%s, %s, %s, %s, 4000, " % (DATE, DATE, F4, F4), out.splitlines()[1]), out


def test_perf_usage_errors(shared_broker):
    rc, out, err = admin("producer-perf-test", "--topic", "x", "--num-records", 1, "--throughput", -1,
                         "--producer-props", "bootstrap.servers=%s" % shared_broker.bootstrap)
    assert rc == 1 and err.startswith("Either --record-size or --payload-file must be specified but not both.\n")
    rc, out, err = admin("producer-perf-test", "--topic", "x", "--num-records", 1, "--throughput", -1,
                         "--record-size", 1, "--producer-props", "bootstrap.servers=%s" % shared_broker.bootstrap,
                         "no.such.key=1")
    assert rc == 1 and "no.such.key" in err


def test_verifiable_producer_events(shared_broker):
    bs = shared_broker.bootstrap
    create(bs, "verif", 2)
    t0 = int(time.time() * 1000)
    rc, out, err = admin("verifiable-producer", "--bootstrap-server", bs, "--topic", "verif", "--max-messages", 50,
                         "--value-prefix", 7, "--repeating-keys", 5)
    assert rc == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    names = [e["name"] for e in events]
    assert names == ["startup_complete"] + ["producer_send_success"] * 50 + ["shutdown_complete", "tool_data"]
    assert all(list(e)[:2] == ["timestamp", "name"] and t0 <= e["timestamp"] <= time.time() * 1000 for e in events)
    sends = events[1:51]
    assert sorted(e["value"] for e in sends) == sorted("7.%d" % i for i in range(50))
    assert all(e["key"] == str(int(e["value"].split(".")[1]) % 5) and e["topic"] == "verif" for e in sends)
    assert all(set(e) == {"timestamp", "name", "key", "value", "partition", "offset", "topic"} for e in sends)
    by_partition = {}
    for e in sends:
        by_partition.setdefault(e["partition"], []).append(e["offset"])
    assert all(sorted(o) == list(range(len(o))) for o in by_partition.values())
    tool = events[-1]
    assert (tool["sent"], tool["acked"], tool["target_throughput"]) == (50, 50, -1)
    assert isinstance(tool["avg_throughput"], float) and tool["avg_throughput"] > 0


def test_verifiable_consumer_events(shared_broker):
    bs = shared_broker.bootstrap
    create(bs, "verif-c", 2)
    rc, out, err = admin("verifiable-producer", "--bootstrap-server", bs, "--topic", "verif-c", "--max-messages", 30)
    assert rc == 0, err
    rc, out, err = admin("verifiable-consumer", "--bootstrap-server", bs, "--topic", "verif-c", "--group-id",
                         "vc", "--max-messages", 30, "--session-timeout", 10000, "--verbose")
    assert rc == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    names = [e["name"] for e in events]
    assert names[0] == "startup_complete" and names[-1] == "shutdown_complete"
    assigned = [e for e in events if e["name"] == "partitions_assigned"]
    assert [sorted((p["topic"], p["partition"]) for p in assigned[0]["partitions"])] == \
        [[("verif-c", 0), ("verif-c", 1)]]
    consumed = [e for e in events if e["name"] == "records_consumed"]
    assert sum(e["count"] for e in consumed) == 30
    assert all(e["count"] == sum(p["count"] for p in e["partitions"]) for e in consumed)
    data = [e for e in events if e["name"] == "record_data"]
    assert sorted(int(e["value"]) for e in data) == list(range(30))
    committed = [e for e in events if e["name"] == "offsets_committed"]
    assert len(committed) == len(consumed) and all(e["success"] is True for e in committed)
    final = {}
    for e in committed:
        for o in e["offsets"]:
            final[o["partition"]] = o["offset"]
    # the committed offsets cover every record: the end offsets of both partitions
    ends = {}
    for e in data:
        ends[e["partition"]] = max(ends.get(e["partition"], 0), e["offset"] + 1)
    assert final == ends and sum(final.values()) == 30
    # each records_consumed is followed by its offsets_committed, naming the batch's last offset + 1
    for i, name in enumerate(names):
        if name == "records_consumed":
            nxt = next(e for e in events[i + 1:] if e["name"] in ("offsets_committed", "records_consumed"))
            assert nxt["name"] == "offsets_committed"
            assert {(o["partition"], o["offset"]) for o in nxt["offsets"]} == \
                {(p["partition"], p["maxOffset"] + 1) for p in events[i]["partitions"]}


def test_verifiable_producer_stops_on_sigterm(shared_broker):
    bs = shared_broker.bootstrap
    create(bs, "verif-t")
    proc = spawn("verifiable-producer", "--bootstrap-server", bs, "--topic", "verif-t", "--throughput", 200)
    lines = []
    wait_until(lambda: lines.append(proc.stdout.readline()) or sum(b"producer_send_success" in x for x in lines) >= 20,
               30, 0)
    proc.send_signal(signal.SIGTERM)
    rest = proc.stdout.read()     # (communicate() would skip what readline() has buffered)
    err = proc.stderr.read()
    proc.wait(30)
    events = [json.loads(x) for x in lines + rest.splitlines() if x.strip()]
    assert proc.returncode == 0, err
    assert [e["name"] for e in events[-2:]] == ["shutdown_complete", "tool_data"]
    tool = events[-1]
    successes = sum(e["name"] == "producer_send_success" for e in events)
    assert tool["acked"] == successes == tool["sent"] and tool["target_throughput"] == 200
    assert len(read_values(bs, "verif-t")) == successes


def test_producer_perf_payload_file_transactions_metrics(shared_broker, tmp_path):
    bs = shared_broker.bootstrap
    create(bs, "perf-tx")
    payloads = tmp_path / "payloads.txt"
    payloads.write_text("alpha|beta|gamma")
    rc, out, err = admin("producer-perf-test", "--topic", "perf-tx", "--num-records", 300, "--throughput", -1,
                         "--payload-file", payloads, "--payload-delimiter", "|", "--bootstrap-server", bs,
                         "--transactional-id", "perf-tx-1", "--transaction-duration-ms", 100, "--print-metrics")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[:2] == ["Reading payloads from: %s" % payloads, "Number of messages read: 3"]
    total = next(line for line in lines if TOTAL.match(line))
    assert total.startswith("300 records sent, ")
    table = lines[lines.index("") + 1:]
    assert re.fullmatch(r"Metric Name +: Value", table[0]) and len(table) > 5, out
    assert any(re.fullmatch(r"producer:txmsgs +: 300", line) for line in table), table
    # read_committed sees all 300 (committed transactions), each one of the payloads
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bs, "group.id": "perf-tx-check", "isolation.level": "read_committed",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition("perf-tx", 0, 0)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 300 and time.monotonic() < deadline:
            got += [m.value() for m in c.consume(500, 0.5) if m.error() is None]
    finally:
        c.close()
    assert len(got) == 300 and set(got) <= {b"alpha", b"beta", b"gamma"}
    from kbroker.client.admin import AdminClient as KAdmin
    with KAdmin(bs) as a:
        assert a.describe_transactions(["perf-tx-1"])["perf-tx-1"].state == "CompleteCommit"


def test_verifiable_producer_send_errors(shared_broker):
    from confluent_kafka.admin import AdminClient as CAdmin, NewTopic

    bs = shared_broker.bootstrap
    a = CAdmin({"bootstrap.servers": bs})
    a.create_topics([NewTopic("verif-err", 1, 1, config={"max.message.bytes": "10"})])["verif-err"].result(30)
    rc, out, err = admin("verifiable-producer", "--bootstrap-server", bs, "--topic", "verif-err", "--max-messages", 3)
    assert rc == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    assert [e["name"] for e in events] == ["startup_complete"] + ["producer_send_error"] * 3 + \
        ["shutdown_complete", "tool_data"]
    errors = events[1:4]
    assert sorted(e["value"] for e in errors) == ["0", "1", "2"]
    assert all(list(e) == ["timestamp", "name", "exception", "message", "topic", "key", "value"] for e in errors)
    assert all(e["exception"] == "KafkaError.MSG_SIZE_TOO_LARGE" and e["topic"] == "verif-err" and e["key"] is None
               for e in errors), errors
    assert (events[-1]["sent"], events[-1]["acked"]) == (3, 0)
