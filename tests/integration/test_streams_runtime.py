"""The kbroker.streams runtime against a real kbroker (issue 18, "failover"): KafkaStreams instances as separate
processes (tests/integration/streams_app.py: a per-key count+sum aggregation over 6 partitions with a persistent,
change-logged store), kill -9 of one instance mid-stream and its restart; plus in-process checks of the
deserialization exception handlers, interactive queries and the internal-topic checks at start.

One broker for the module (group.min.session.timeout.ms=1000 so the apps' 3 s sessions are allowed: a killed
instance's partitions move after ~3 s; the transaction coordinator aborts a dead instance's open transaction 5 s
after it began (the app's transaction.timeout.ms) + <= 1 s cleanup interval).

Input: ``N`` records, key ``k<i % KEYS>``, value i as an 8-byte big-endian long, partitioned by murmur2 of the key
(Java's partitioner), so each key lives in one partition and one task. The truth per key: (count, sum). The output's
last value per key is the instance's aggregate "<count>,<sum>".

1. ``test_at_least_once_failover_with_standby`` -- A alone processes phase 1; B joins (num.standby.replicas=1 on
   both): B must host standbys of exactly A's active tasks and replay their changelogs. A is told (SIGUSR1) to crash
   at its next record, phase 2 is produced, A flushes and SIGKILLs itself reporting ``uncommitted`` U (records it
   processed since its last commit). B takes A's tasks over: their restoration starts from the standby's checkpoint
   (start offset > 0, fewer records than the changelog holds -- without standbys B has no local state for them and
   reads everything). A restarts. Final aggregates: every key's count >= truth, the excess summed over keys is
   exactly U (the records processed again; at_least_once's duplicates, bounded by one commit interval's records),
   and sums agree with counts. Restore times are printed.
2. ``test_exactly_once_v2_failover`` -- the same crash under exactly_once_v2 (two instances from the start): the
   output read read_committed has every key's aggregate EXACT (0 lost, 0 double-counted) although U > 0 records
   had been processed and written (in a transaction never committed), and read_uncommitted shows those aborted
   writes (so the check could see a duplicate).
3. ``test_deserialization_handlers`` -- in process: a 3-byte value for a Long serde at offset 2 of a 1-partition
   topic; logAndContinue: exactly the other records come out, in order; logAndFail: the thread dies with a
   StreamsException naming topic, partition and offset, the uncaught exception handler sees it, state ERROR.
4. ``test_repartition_topics_and_purge`` -- in process: the quickstart's WordCount (DSL, repartition topic) under
   exactly_once_v2: Kafka's counts, internal topics' partitions and configs, repartition records purged.
5. ``test_replace_thread`` -- in process: REPLACE_THREAD brings a failed thread back and every record comes out.
6. ``test_interactive_queries_and_internal_topic_checks`` -- in process: store() and query_metadata_for_key on a
   running instance; an existing changelog topic with the wrong partition count stops start() with a message
   naming it; a missing source topic too; unknown config keys are refused naming them.
"""
from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration import eos_checker
from tests.integration.harness import REPO_ROOT, BrokerProcess, HarnessError, tail, wait_until

pytestmark = pytest.mark.timeout(240)

PARTITIONS = 6
KEYS = 24
OVERRIDES = {
    "offsets.topic.replication.factor": 1, "offsets.topic.num.partitions": 3,
    "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1,
    "transaction.state.log.num.partitions": 3, "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000,
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("streams-rt"), overrides=OVERRIDES)
    b.start()
    try:
        yield b
    finally:
        b.close()


# ------------------------------------------------------------------------------------------------ helpers

def create_topics(bootstrap, *names, partitions=PARTITIONS):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
        f.result(30)


def produce(bootstrap, topic, start, n, values=None):
    """Records start..start+n-1 (key k<i % KEYS>, value i as a Long), murmur2-partitioned; returns the truth
    {key: (count, sum)} of these records."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "linger.ms": 5,
                  "enable.idempotence": True})
    failed = []
    truth = {}
    for i in range(start, start + n):
        key = "k%d" % (i % KEYS)
        p.produce(topic, key=key.encode(), value=struct.pack(">q", i),
                  on_delivery=lambda err, msg: err is not None and failed.append(err))
        c, s = truth.get(key, (0, 0))
        truth[key] = (c + 1, s + i)
    assert p.flush(30) == 0 and not failed, failed[:3]
    return truth


def merge(a, b):
    out = dict(a)
    for k, (c, s) in b.items():
        c0, s0 = out.get(k, (0, 0))
        out[k] = (c0 + c, s0 + s)
    return out


def last_values(records: dict) -> dict:
    """{key: (count, sum)} from the last output record of each key ({partition: [(offset, key, value)]})."""
    out = {}
    for p in sorted(records):
        for _, key, value in records[p]:
            c, s = value.decode().split(",")
            out[key.decode()] = (int(c), int(s))
    return out


def wait_committed(bootstrap, group, topic, ends, apps, timeout=60.0):
    def done():
        for a in apps:
            if a.proc.poll() is not None:
                raise HarnessError("app %s exited with %s\n%s" % (a.name, a.proc.returncode, tail(a.log, 40)))
        got = eos_checker.committed_offsets(bootstrap, group, topic, PARTITIONS)
        return got if got == ends else None

    from confluent_kafka import KafkaException
    return wait_until(done, timeout, 0.3, "group %s committed == %s" % (group, ends), ignore=(KafkaException,))


class App:
    """One streams_app process; stdout (JSON lines) and stderr go to <dir>/<name>.log."""

    def __init__(self, directory: Path, name: str, args: list):
        self.log = Path(directory) / ("%s.log" % name)
        self.name = name
        self.args = args
        self.proc = None

    def start(self) -> "App":
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "tests.integration.streams_app", *self.args],
                                         stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=str(REPO_ROOT), env=env)
        return self

    def events(self, kind=None, since_pid=None) -> list:
        out = []
        try:
            lines = self.log.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return out
        pid = None
        for line in lines:
            if not line.startswith("{"):
                continue
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("event") == "started":
                pid = e.get("pid")
            if since_pid is not None and pid != since_pid:
                continue
            if kind is None or e.get("event") == kind:
                out.append(e)
        return out

    def wait_event(self, kind, pred=lambda e: True, timeout=30.0):
        def found():
            if self.proc.poll() is not None and kind != "crash":
                raise HarnessError("app %s exited with %s\n%s" % (self.name, self.proc.returncode, tail(self.log, 40)))
            hits = [e for e in self.events(kind, since_pid=self.proc.pid) if pred(e)]
            return hits[-1] if hits else None
        return wait_until(found, timeout, 0.1, "%s: event %s" % (self.name, kind))

    def stop(self, timeout=30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise HarnessError("app %s did not stop\n%s" % (self.name, tail(self.log, 40))) from None

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def apps():
    started = []
    yield started
    for a in started:
        a.kill()


def app_args(broker, app_id, inp, out, state_dir, guarantee, standby=0, crash_after=40):
    return ["--bootstrap", broker.bootstrap, "--application-id", app_id, "--input", inp, "--output", out,
            "--state-dir", str(state_dir), "--guarantee", guarantee, "--standby", str(standby),
            "--commit-interval-ms", "300", "--crash-after-armed", str(crash_after)]


def crash(app, phase2):
    """Arm app's crash (SIGUSR1), then run phase2() (produces input); returns the crash event."""
    app.proc.send_signal(signal.SIGUSR1)
    phase2()
    rc = app.proc.wait(120)
    assert rc == -signal.SIGKILL, "rc %s\n%s" % (rc, tail(app.log, 40))
    ev = app.events("crash")
    assert len(ev) == 1 and ev[0]["undelivered"] == 0 and not ev[0]["delivery_error"], ev
    return ev[0]


def print_restores(*apps_):
    for a in apps_:
        for e in a.events("restored"):
            print("restore %s: task %s %s-%d [%d, %d): %d records in %d ms" % (
                a.name, e["task"], e["changelog"], e["partition"], e["start"], e["end"], e["records"], e["ms"]))


# ------------------------------------------------------------------------------------------------- tests

def test_at_least_once_failover_with_standby(broker, apps, tmp_path):
    alos_failover(broker, apps, tmp_path, "rt-alos", 300, 40)


@pytest.mark.soak
@pytest.mark.timeout(900)
def test_at_least_once_failover_with_standby_soak(broker, apps, tmp_path):
    """.venv/bin/python -m pytest -m soak tests/integration/test_streams_runtime.py"""
    alos_failover(broker, apps, tmp_path, "rt-alos-soak", 20000, 3000, timeout=300)


def alos_failover(broker, apps, tmp_path, app_id, n, crash_after, timeout=60.0):
    """Test 1 of the module docstring with ``n`` records per phase, the crash ``crash_after`` records after arming."""
    inp, out = app_id + "-in", app_id + "-out"
    create_topics(broker.bootstrap, inp, out)
    truth = produce(broker.bootstrap, inp, 0, n)
    args = lambda name: app_args(broker, app_id, inp, out, tmp_path / name, "at_least_once",  # noqa: E731
                                 standby=1, crash_after=crash_after)
    a = App(tmp_path, "A", args("A")).start()
    apps.append(a)
    ends1 = eos_checker.end_offsets(broker.bootstrap, inp, PARTITIONS)
    wait_committed(broker.bootstrap, app_id, inp, ends1, [a], timeout)
    b = App(tmp_path, "B", args("B")).start()
    apps.append(b)
    # B hosts standbys of exactly A's active tasks (3 of 6 with two members) and has replayed their changelogs
    sb = b.wait_event("standby", lambda e: len(e["tasks"]) == 3)
    hosted = set(sb["tasks"])
    a_sb = a.wait_event("standby", lambda e: len(e["tasks"]) == 3)
    assert hosted.isdisjoint(a_sb["tasks"]) and len(hosted | set(a_sb["tasks"])) == PARTITIONS, (sb, a_sb)
    wanted = sum(ends1[int(t.split("_")[1])] for t in hosted)    # one changelog record per input record
    b.wait_event("standby", lambda e: set(e["tasks"]) == hosted and e["replayed"] >= wanted, timeout=timeout)

    ev = crash(a, lambda: truth.update(merge(truth, produce(broker.bootstrap, inp, n, n))))
    uncommitted = ev["uncommitted"]
    # the crash came crash_after records after arming: up to that many since the last commit (every 300 ms), at
    # least the last one
    assert 1 <= uncommitted <= crash_after, ev
    # B restores A's former tasks from its standbys' checkpoints: only the gap
    for t in hosted:
        r = b.wait_event("restored", lambda e, t=t: e["task"] == t and e["t"] >= ev["t"], timeout=30)
        assert r["start"] > 0 and r["records"] < r["end"], ("standby not used", r)
    a2 = App(tmp_path, "A2", args("A")).start()
    apps.append(a2)
    # A2 must be in the group before the check: B alone may have committed everything already, and a SIGTERM
    # during A2's imports (before its handler exists) kills it with -15 (seen once in CI).
    a2.wait_event("state", lambda e: e["new"] == "RUNNING", timeout=timeout)
    ends = eos_checker.end_offsets(broker.bootstrap, inp, PARTITIONS)
    assert sum(ends.values()) == 2 * n
    wait_committed(broker.bootstrap, app_id, inp, ends, [a2, b], timeout)
    assert a2.stop() == 0 and b.stop() == 0
    got = last_values(eos_checker.read_records(broker.bootstrap, out, PARTITIONS, "read_uncommitted"))
    assert set(got) == set(truth)
    excess = 0
    for key, (c, s) in truth.items():
        gc, gs = got[key]
        assert gc >= c and gs >= s, (key, got[key], truth[key])
        excess += gc - c
    print_restores(a, b, a2)
    print("at_least_once: %d records processed twice (the killed instance's uncommitted records: %d)"
          % (excess, uncommitted))
    assert excess == uncommitted


def test_exactly_once_v2_failover(broker, apps, tmp_path):
    eos_failover(broker, apps, tmp_path, "rt-eos", 300, 40)


@pytest.mark.soak
@pytest.mark.timeout(900)
def test_exactly_once_v2_failover_soak(broker, apps, tmp_path):
    """.venv/bin/python -m pytest -m soak tests/integration/test_streams_runtime.py"""
    eos_failover(broker, apps, tmp_path, "rt-eos-soak", 20000, 3000, timeout=300)


def eos_failover(broker, apps, tmp_path, app_id, n, crash_after, timeout=60.0):
    """Test 2 of the module docstring with ``n`` records per phase, the crash ``crash_after`` records after arming."""
    inp, out = app_id + "-in", app_id + "-out"
    create_topics(broker.bootstrap, inp, out)
    truth = produce(broker.bootstrap, inp, 0, n)
    args = lambda name: app_args(broker, app_id, inp, out, tmp_path / name, "exactly_once_v2",  # noqa: E731
                                 crash_after=crash_after)
    a = App(tmp_path, "A", args("A")).start()
    b = App(tmp_path, "B", args("B")).start()
    apps.extend([a, b])
    ends1 = eos_checker.end_offsets(broker.bootstrap, inp, PARTITIONS)
    wait_committed(broker.bootstrap, app_id, inp, ends1, [a, b], timeout)
    a.wait_event("state", lambda e: e["new"] == "RUNNING")
    ev = crash(a, lambda: truth.update(merge(truth, produce(broker.bootstrap, inp, n, n))))
    assert 1 <= ev["uncommitted"] <= crash_after, ev
    # B takes every task over (A's after its session expired) and restores A's ones read_committed up to the last
    # stable offset, while A's transaction is still open (aborted by the coordinator after its 5 s timeout)
    wait_until(lambda: {e["task"] for e in b.events("restored", since_pid=b.proc.pid) if e["t"] >= ev["t"]}
               == {"0_%d" % p for p in range(PARTITIONS)}, timeout, 0.2, "B restored all 6 tasks after the crash")
    a2 = App(tmp_path, "A2", args("A")).start()
    apps.append(a2)
    a2.wait_event("state", lambda e: e["new"] == "RUNNING", timeout=timeout)   # in the group (as above)
    ends = eos_checker.end_offsets(broker.bootstrap, inp, PARTITIONS)
    wait_committed(broker.bootstrap, app_id, inp, ends, [a2, b], timeout + 30)
    assert a2.stop() == 0 and b.stop() == 0
    committed = eos_checker.read_committed(broker.bootstrap, out, PARTITIONS)
    got = last_values(committed)
    wrong = {k: (got.get(k), v) for k, v in truth.items() if got.get(k) != v}
    print_restores(a, b, a2)
    assert not wrong, "aggregates not exact under exactly_once_v2: %s" % wrong
    # the crashed instance's writes are in the log, aborted: read_uncommitted sees more output than read_committed
    everything = eos_checker.read_records(broker.bootstrap, out, PARTITIONS, "read_uncommitted")
    n_all, n_committed = sum(map(len, everything.values())), sum(map(len, committed.values()))
    print("exactly_once_v2: %d output records committed, %d aborted (the crash's %d uncommitted records)"
          % (n_committed, n_all - n_committed, ev["uncommitted"]))
    assert n_all - n_committed >= ev["uncommitted"]


# -------------------------------------------------------------------------------------- in-process checks

def _stateless(inp, out):
    from kbroker.streams.serdes import Serdes
    from kbroker.streams.topology import Topology
    return (Topology().add_source("src", inp, key_deserializer=Serdes.String(), value_deserializer=Serdes.Long())
            .add_sink("sink", out, "src", key_serializer=Serdes.String(), value_serializer=Serdes.Long()))


def _config(broker, app_id, tmp_path, **extra):
    conf = {"application.id": app_id, "bootstrap.servers": broker.bootstrap, "state.dir": str(tmp_path / "state"),
            "commit.interval.ms": 100, "replication.factor": 1, "consumer.session.timeout.ms": 3000,
            "consumer.heartbeat.interval.ms": 500}
    conf.update(extra)
    return conf


def test_deserialization_handlers(broker, tmp_path):
    from confluent_kafka import Producer

    from kbroker.streams.errors import StreamsException
    from kbroker.streams.runtime import KafkaStreams
    inp = "rt-bad-in"
    create_topics(broker.bootstrap, inp, "rt-bad-out-c", "rt-bad-out-f", partitions=1)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    values = [struct.pack(">q", 10), struct.pack(">q", 11), b"bad", struct.pack(">q", 13), struct.pack(">q", 14)]
    for v in values:
        p.produce(inp, key=b"k", value=v, partition=0)
    assert p.flush(10) == 0

    ks = KafkaStreams(_stateless(inp, "rt-bad-out-c"), _config(
        broker, "rt-bad-c", tmp_path, **{"default.deserialization.exception.handler": "logAndContinue"}))
    ks.start()
    try:
        wait_committed_1 = lambda: eos_checker.committed_offsets(broker.bootstrap, "rt-bad-c", inp, 1) == {0: 5}  # noqa
        wait_until(wait_committed_1, 30, 0.2, "rt-bad-c committed offset 5")
    finally:
        assert ks.close(30)
    dropped = ks.metrics()["dropped-records-total"]
    outs = eos_checker.read_records(broker.bootstrap, "rt-bad-out-c", 1, "read_uncommitted")[0]
    assert [struct.unpack(">q", v)[0] for _, _, v in outs] == [10, 11, 13, 14]
    assert dropped == 1

    seen = []
    ks = KafkaStreams(_stateless(inp, "rt-bad-out-f"), _config(broker, "rt-bad-f", tmp_path))
    ks.set_uncaught_exception_handler(lambda exc: seen.append(exc) or "SHUTDOWN_CLIENT")
    ks.start()
    try:
        wait_until(lambda: ks.state == "ERROR", 30, 0.1, "state ERROR after logAndFail")
    finally:
        ks.close(10)
    assert len(seen) == 1 and isinstance(seen[0], StreamsException), seen
    text = str(seen[0])
    assert "topic %s" % inp in text and "partition 0" in text and "offset 2" in text, text


def topic_configs(broker, topic, keys=("cleanup.policy",)):
    from confluent_kafka.admin import AdminClient, ConfigResource
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    parts = len(admin.list_topics(topic, timeout=10).topics[topic].partitions)
    [fut] = admin.describe_configs([ConfigResource("topic", topic)]).values()
    got = fut.result(10)
    return parts, {k: got[k].value for k in keys}


def test_repartition_topics_and_purge(broker, tmp_path):
    """The quickstart's WordCount (a repartition topic before the count) through the runtime under
    exactly_once_v2: Kafka's output, the internal topics' partitions and configs, and repartition.purge.interval.ms=0
    purging the repartition topic below the committed offsets (its log start offset moves)."""
    from confluent_kafka import Producer, TopicPartition

    from kbroker.streams.examples.wordcount import STRING_SERDE, build_topology
    from kbroker.streams.runtime import KafkaStreams
    inp, out = "rt-wc-in", "rt-wc-out"
    create_topics(broker.bootstrap, inp, out, partitions=2)
    ks = KafkaStreams(build_topology(inp, out), _config(broker, "rt-wc", tmp_path, **{
        "processing.guarantee": "exactly_once_v2", "cache.max.bytes.buffering": 0, "repartition.purge.interval.ms": 0,
        "default.key.serde": STRING_SERDE, "default.value.serde": STRING_SERDE,
        "replication.factor": -1}))     # Kafka's default: the broker's default.replication.factor
    ks.start()
    try:
        p = Producer({"bootstrap.servers": broker.bootstrap})
        for line in ("all streams lead to kafka", "hello kafka streams", "join kafka summit"):
            p.produce(inp, value=line.encode(), partition=0)
        assert p.flush(10) == 0
        rep = "rt-wc-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition"
        wait_until(lambda: sum(eos_checker.committed_offsets(broker.bootstrap, "rt-wc", rep, 2).values()) == 11,
                   30, 0.2, "11 words through the repartition topic")
        from confluent_kafka import Consumer
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "rt-wc-check"})
        try:
            wait_until(lambda: sum(c.get_watermark_offsets(TopicPartition(rep, q), timeout=5, cached=False)[0]
                                   for q in range(2)) > 0, 30, 0.2, "repartition records purged")
        finally:
            c.close()
    finally:
        assert ks.close(30)
    got = {}
    for part in eos_checker.read_committed(broker.bootstrap, out, 2).values():
        for _, k, v in part:
            got[k.decode()] = struct.unpack(">q", v)[0]
    assert got == {"all": 1, "streams": 2, "lead": 1, "to": 1, "kafka": 3, "hello": 1, "join": 1, "summit": 1}
    assert topic_configs(broker, rep, ("cleanup.policy", "retention.ms", "segment.bytes")) == (
        2, {"cleanup.policy": "delete", "retention.ms": "-1", "segment.bytes": "52428800"})
    assert topic_configs(broker, "rt-wc-KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog") == (
        2, {"cleanup.policy": "compact"})


def test_source_offset_reset_latest(broker, tmp_path):
    """Topology.add_source(offset_reset="latest"): without committed offsets the source starts at the end (the
    consumer's own auto.offset.reset is Streams' earliest): records written before the start are not read. Also
    the state cleaner (state.cleanup.delay.ms)."""
    from confluent_kafka import Producer

    from kbroker.streams.runtime import KafkaStreams
    from kbroker.streams.serdes import Serdes
    from kbroker.streams.topology import Topology
    inp, out = "rt-latest-in", "rt-latest-out"
    create_topics(broker.bootstrap, inp, out, partitions=2)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(4):
        p.produce(inp, key=b"k", value=struct.pack(">q", i), partition=i % 2)
    assert p.flush(10) == 0
    topo = (Topology().add_source("s", inp, key_deserializer=Serdes.String(), value_deserializer=Serdes.Long(),
                                  offset_reset="latest")
            .add_sink("k", out, "s", key_serializer=Serdes.String(), value_serializer=Serdes.Long()))
    # state.cleanup.delay.ms=0: an unused task directory is deleted at once (Kafka's cleaner), others stay
    obsolete, other = tmp_path / "state" / "rt-latest" / "0_9", tmp_path / "state" / "rt-latest" / "not-a-task"
    obsolete.mkdir(parents=True)
    other.mkdir()
    ks = KafkaStreams(topo, _config(broker, "rt-latest", tmp_path, **{"state.cleanup.delay.ms": 0}))
    ks.start()
    try:
        wait_until(lambda: ks.state == "RUNNING", 30, 0.1, "RUNNING")
        wait_until(lambda: not obsolete.exists(), 10, 0.1, "obsolete task directory 0_9 deleted")
        assert other.is_dir()
        for i in range(4, 8):
            p.produce(inp, key=b"k", value=struct.pack(">q", i), partition=i % 2)
        assert p.flush(10) == 0
        wait_until(lambda: eos_checker.committed_offsets(broker.bootstrap, "rt-latest", inp, 2) == {0: 4, 1: 4}, 30,
                   0.2, "the 4 new records committed")
    finally:
        assert ks.close(30)
    got = sorted(struct.unpack(">q", v)[0] for part in
                 eos_checker.read_records(broker.bootstrap, out, 2, "read_uncommitted").values() for _, _, v in part)
    assert got == [4, 5, 6, 7]


def test_wall_clock_punctuation(broker, tmp_path):
    """A processor's WALL_CLOCK_TIME punctuation runs in the stream thread's loop without input (every 100 ms), and
    what it forwards reaches the sink."""
    from kbroker.streams.processor import Processor, PunctuationType, Record
    from kbroker.streams.runtime import KafkaStreams
    from kbroker.streams.serdes import Serdes
    from kbroker.streams.topology import Topology
    inp, out = "rt-punct-in", "rt-punct-out"
    create_topics(broker.bootstrap, inp, out, partitions=1)

    class Ticker(Processor):
        def init(self, context):
            self.n = 0
            context.schedule(100, PunctuationType.WALL_CLOCK_TIME, self.tick)
            self.context = context

        def tick(self, now):
            self.n += 1
            self.context.forward(Record("tick", self.n, now))

        def process(self, record):
            pass

    topo = (Topology().add_source("s", inp, key_deserializer=Serdes.String(), value_deserializer=Serdes.String())
            .add_processor("p", Ticker, "s")
            .add_sink("k", out, "p", key_serializer=Serdes.String(), value_serializer=Serdes.Long()))
    ks = KafkaStreams(topo, _config(broker, "rt-punct", tmp_path))
    ks.start()
    try:
        def ticks():
            part = eos_checker.read_records(broker.bootstrap, out, 1, "read_uncommitted", timeout=10)[0]
            return [struct.unpack(">q", v)[0] for _, _, v in part]
        got = wait_until(lambda: (lambda t: t if len(t) >= 3 else None)(ticks()), 30, 0.3, "3 ticks in the output")
    finally:
        assert ks.close(30)
    assert got[:3] == [1, 2, 3] and ks.metrics()["punctuate-total"] >= 3


def test_replace_thread(broker, tmp_path):
    """An exception in a processor ends the thread; the handler answers REPLACE_THREAD: a new thread with the same
    index takes the tasks back (the failed record is processed again) and every record comes out."""
    from kbroker.streams.processor import Processor
    from kbroker.streams.runtime import KafkaStreams
    from kbroker.streams.serdes import Serdes
    from kbroker.streams.topology import Topology
    inp, out = "rt-rt-in", "rt-rt-out"
    create_topics(broker.bootstrap, inp, out, partitions=1)
    failed = []

    class FailOnce(Processor):
        def init(self, context):
            self.context = context

        def process(self, record):
            if record.value == 3 and not failed:
                failed.append(record.value)
                raise RuntimeError("boom at 3")
            self.context.forward(record)

    topo = (Topology().add_source("s", inp, key_deserializer=Serdes.String(), value_deserializer=Serdes.Long())
            .add_processor("p", FailOnce, "s")
            .add_sink("k", out, "p", key_serializer=Serdes.String(), value_serializer=Serdes.Long()))
    seen = []
    ks = KafkaStreams(topo, _config(broker, "rt-replace", tmp_path))
    ks.set_uncaught_exception_handler(lambda exc: seen.append(exc) or "REPLACE_THREAD")
    ks.start()
    first = ks.threads[0]
    try:
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(6):
            p.produce(inp, key=b"k", value=struct.pack(">q", i), partition=0)
        assert p.flush(10) == 0
        wait_until(lambda: eos_checker.committed_offsets(broker.bootstrap, "rt-replace", inp, 1) == {0: 6}, 30, 0.2,
                   "all 6 records committed by the replacement thread")
        assert ks.state == "RUNNING" and ks.threads[0] is not first and ks.threads[0].index == 1
    finally:
        assert ks.close(30)
    assert len(seen) == 1 and "boom at 3" in repr(seen[0].__cause__ or seen[0]), seen
    assert ks.metrics()["process-total"] >= 6      # the failed thread's records and its replacement's
    values = [struct.unpack(">q", v)[0] for _, _, v in
              eos_checker.read_records(broker.bootstrap, out, 1, "read_uncommitted")[0]]
    # at_least_once: 0..2 may come out twice (processed before the failure, not committed), 3..5 once
    assert sorted(set(values)) == list(range(6)) and values[-3:] == [3, 4, 5], values


def test_shutdown_application(broker, tmp_path):
    """SHUTDOWN_APPLICATION from one instance's handler stops BOTH instances (ERROR), the other one through the
    signal member it sees in the group after the rebalance that member causes."""
    from confluent_kafka import Producer

    from kbroker.streams.processor import Processor
    from kbroker.streams.runtime import KafkaStreams
    from kbroker.streams.serdes import Serdes
    from kbroker.streams.topology import Topology
    inp, out = "rt-sa-in", "rt-sa-out"
    create_topics(broker.bootstrap, inp, out, partitions=1)

    class Fail(Processor):
        def process(self, record):
            raise RuntimeError("poison %d" % record.value)

    topo = (Topology().add_source("s", inp, key_deserializer=Serdes.String(), value_deserializer=Serdes.Long())
            .add_processor("p", Fail, "s")
            .add_sink("k", out, "p", key_serializer=Serdes.String(), value_serializer=Serdes.Long()))
    handled = []
    instances = []
    try:
        for name in ("a", "b"):
            k = KafkaStreams(topo, _config(broker, "rt-sa", tmp_path / name))
            k.set_uncaught_exception_handler(lambda exc, name=name: handled.append(name) or "SHUTDOWN_APPLICATION")
            k.start()
            instances.append(k)
        wait_until(lambda: all(k.state == "RUNNING" for k in instances), 30, 0.1, "both RUNNING")
        p = Producer({"bootstrap.servers": broker.bootstrap})
        p.produce(inp, key=b"k", value=struct.pack(">q", 1), partition=0)
        assert p.flush(10) == 0
        wait_until(lambda: [k.state for k in instances] == ["ERROR", "ERROR"], 30, 0.2,
                   "both instances in ERROR after SHUTDOWN_APPLICATION")
        assert len(handled) == 1, handled        # one instance owned the partition and failed; the other followed
    finally:
        for k in instances:
            k.close(10)


def test_key_metadata_and_stale_stores_with_standbys(broker, tmp_path):
    """Two in-process instances with num.standby.replicas=1: query_metadata_for_key names the active host (the
    instance running the key's task) and the other as standby host; the standby's stores answer stale queries
    (enable_stale_stores) with the same values; metadata_for_all_stream_clients lists both."""
    from kbroker.streams.partitioner import default_partition
    from kbroker.streams.runtime import HostInfo, KafkaStreams
    from kbroker.streams.serdes import Serdes
    from kbroker.streams.state.queryable import QueryableStoreTypes, StoreQueryParameters
    from tests.integration.streams_app import build_topology

    inp, out = "rt-sb-in", "rt-sb-out"
    create_topics(broker.bootstrap, inp, out)
    truth = produce(broker.bootstrap, inp, 0, 120)
    hosts = {"a": HostInfo("host-a", 1001), "b": HostInfo("host-b", 1002)}
    instances = {}
    try:
        for name, host in hosts.items():
            instances[name] = KafkaStreams(build_topology(inp, out), _config(broker, "rt-sb", tmp_path / name, **{
                "application.server": str(host), "num.standby.replicas": 1}))
            instances[name].start()
        ends = eos_checker.end_offsets(broker.bootstrap, inp, PARTITIONS)
        wait_until(lambda: eos_checker.committed_offsets(broker.bootstrap, "rt-sb", inp, PARTITIONS) == ends
                   and all(k.state == "RUNNING" and len(k.standby.tasks()) == 3 for k in instances.values()),
                   30, 0.2, "both instances RUNNING with 3 standby tasks each")
        key = "k7"
        p = default_partition(key.encode(), PARTITIONS)
        active = next(n for n, k in instances.items() if any(t.partition == p for th in k.threads for t in th.tasks))
        other = "b" if active == "a" else "a"
        for k in instances.values():
            md = k.query_metadata_for_key("totals", key, Serdes.String())
            assert md.partition == p and md.active_host == hosts[active] and md.standby_hosts == {hosts[other]}
        stale = StoreQueryParameters.from_name_and_type("totals", QueryableStoreTypes.key_value_store()) \
            .enable_stale_stores().with_partition(p)
        wait_until(lambda: instances[other].store(stale).get(key) == "%d,%d" % truth[key], 10, 0.1,
                   "the standby's store has the active's value")
        assert instances[active].store(stale).get(key) == "%d,%d" % truth[key]
        metas = sorted(instances["a"].metadata_for_all_stream_clients(), key=lambda m: m.host_info)
        assert [m.host_info for m in metas] == [hosts["a"], hosts["b"]]
        for m in metas:
            assert len(m.topic_partitions) == 3 and len(m.standby_topic_partitions) == 3
            assert {q for _, q in m.topic_partitions}.isdisjoint(q for _, q in m.standby_topic_partitions)
    finally:
        for k in instances.values():
            k.close(30)


def test_interactive_queries_and_internal_topic_checks(broker, tmp_path):
    from kbroker.streams.errors import StreamsException
    from kbroker.streams.partitioner import default_partition
    from kbroker.streams.runtime import HostInfo, KafkaStreams, StreamsConfigError
    from kbroker.streams.state.queryable import QueryableStoreTypes, StoreQueryParameters
    from kbroker.streams.serdes import Serdes
    from tests.integration.streams_app import build_topology

    inp, out = "rt-iq-in", "rt-iq-out"
    create_topics(broker.bootstrap, inp, out)
    truth = produce(broker.bootstrap, inp, 0, 120)
    # two threads: two group members in one instance, each with part of the tasks; IQ spans both
    ks = KafkaStreams(build_topology(inp, out), _config(broker, "rt-iq", tmp_path, **{
        "application.server": "node-a:7070", "num.stream.threads": 2}))
    ks.start()
    try:
        wait_until(lambda: eos_checker.committed_offsets(broker.bootstrap, "rt-iq", inp, PARTITIONS)
                   == eos_checker.end_offsets(broker.bootstrap, inp, PARTITIONS), 30, 0.2, "rt-iq processed")
        wait_until(lambda: ks.state == "RUNNING", 10, 0.1, "RUNNING")
        store = ks.store(StoreQueryParameters.from_name_and_type("totals", QueryableStoreTypes.key_value_store()))
        assert {k: tuple(map(int, store.get(k).split(","))) for k in truth} == truth
        md = ks.query_metadata_for_key("totals", "k5", Serdes.String())
        assert md.partition == default_partition(b"k5", PARTITIONS)
        assert md.active_host == HostInfo("node-a", 7070) and md.standby_hosts == frozenset()
        [meta] = ks.metadata_for_all_stream_clients()
        assert meta.host_info == HostInfo("node-a", 7070) and meta.state_store_names == frozenset(["totals"])
        assert meta.topic_partitions == frozenset((inp, p) for p in range(PARTITIONS))
        threads = ks.local_thread_metadata()
        assert [t.thread_state for t in threads] == ["RUNNING", "RUNNING"]
        assert sorted(m.task_id.partition for t in threads for m in t.active_tasks) == list(range(PARTITIONS))
        assert all(t.active_tasks for t in threads), threads
        assert threads[1].consumer_client_id == "rt-iq-%s-StreamThread-2-consumer@node-a%%3A7070" % ks.process_id
    finally:
        assert ks.close(30)
    assert ks.state == "NOT_RUNNING"
    assert topic_configs(broker, "rt-iq-totals-changelog") == (PARTITIONS, {"cleanup.policy": "compact"})

    # an internal topic with the wrong partition count stops startup, naming it
    create_topics(broker.bootstrap, "rt-bad-count-totals-changelog", partitions=2)
    ks = KafkaStreams(build_topology(inp, out), _config(broker, "rt-bad-count", tmp_path))
    with pytest.raises(StreamsException, match="rt-bad-count-totals-changelog has invalid partitions: expected: 6; "
                                               "actual: 2"):
        ks.start()
    assert ks.state == "ERROR"
    ks = KafkaStreams(build_topology("rt-no-such-topic", out), _config(broker, "rt-missing", tmp_path))
    with pytest.raises(StreamsException, match="rt-no-such-topic"):
        ks.start()
    with pytest.raises(StreamsConfigError, match="Unknown configuration key.*: bogus.key, other.bogus"):
        KafkaStreams(build_topology(inp, out), _config(broker, "x", tmp_path, **{"bogus.key": 1, "other.bogus": 2}))
    with pytest.raises(StreamsConfigError, match="Invalid value exactly_once for configuration processing.guarantee"):
        KafkaStreams(build_topology(inp, out), _config(broker, "x", tmp_path, **{"processing.guarantee":
                                                                               "exactly_once"}))
