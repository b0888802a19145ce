"""Burrow (LinkedIn's lag monitor, Debian package `burrow` 1.2.1, binary `/usr/bin/Burrow`) reads kbroker's
`__consumer_offsets` itself and reports a live confluent-kafka group's lag exactly.

Burrow does not ask the broker for committed offsets: its `kafka` consumer module consumes every partition of
`__consumer_offsets` from the oldest offset and decodes the records with Kafka's schemas (key v0/v1 -> offset
commit, value v0/v1/v3; key v2 -> group metadata, value v0/v1 with members whose assignment is parsed with the
consumer protocol). So exact offsets *and* the owner/client id of each partition in its answer prove that the
bytes kbroker writes (offset key v1 + value v1, group metadata key v2 + value v1) are Kafka's.

Burrow 1.2.1 cannot run without ZooKeeper: its zookeeper coordinator is always configured and panics with
"No Zookeeper servers specified" (core/internal/zookeeper/coordinator.go:62) when `[zookeeper] servers` is empty;
it only uses it for its own root path/locks. A single-node ensemble (harness.ZkEnsemble) is enough.

Scenario: 3-partition topic with 10/15/20 records; a group member (client.id `burrow-probe`) consumes and commits
4/9/13 while staying in the group; Burrow started afterwards must report, on /v3/kafka/local/consumer/<g>/lag,
per partition `end.offset` = the committed offset, `current_lag` = log end offset - committed offset (6/6/7),
owner `/127.0.0.1` (and client id `burrow-probe` on the consumer detail endpoint); /v3/kafka/local/topic/<t> must report the log end offsets
[10, 15, 20]. Then the member commits 10/15/17 and Burrow (still tailing the offsets topic) must report lags 0/0/3.
No Burrow log line may say "failed to decode". Every wait is bounded.
"""
import json
import urllib.error
import urllib.request

import pytest

from tests.integration import harness
from tests.integration.harness import ZkEnsemble, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

TOPIC = "burrow-lag"
GROUP = "burrow-group"
CLIENT_ID = "burrow-probe"
END_OFFSETS = {0: 10, 1: 15, 2: 20}
FIRST_COMMIT = {0: 4, 1: 9, 2: 13}
SECOND_COMMIT = {0: 10, 1: 15, 2: 17}
# sarama (Burrow's Kafka client) picks its request versions from this setting instead of ApiVersions; 2.0.0 keeps
# every request it sends inside the Kafka 2.1 range kbroker serves.
KAFKA_VERSION = "2.0.0"


def burrow_config(zk_connect: str, bootstrap: str, http_port: int, workdir) -> str:
    """Burrow 1.2 TOML: one cluster + one consumer module named `local`, in-memory storage, caching evaluator,
    no notifiers. topic-refresh/offset-refresh are seconds (defaults 60/10; short here so the test is quick)."""
    return f"""\
[general]
pidfile="{workdir}/burrow.pid"

[logging]
level="info"

[zookeeper]
servers=["{zk_connect}"]
timeout=6
root-path="/burrow"

[client-profile.kbroker]
client-id="burrow"
kafka-version="{KAFKA_VERSION}"

[cluster.local]
class-name="kafka"
servers=["{bootstrap}"]
client-profile="kbroker"
topic-refresh=2
offset-refresh=1

[consumer.local]
class-name="kafka"
cluster="local"
servers=["{bootstrap}"]
client-profile="kbroker"
offsets-topic="__consumer_offsets"
group-whitelist=""
group-blacklist=""

[httpserver.default]
address="127.0.0.1:{http_port}"

[storage.default]
class-name="inmemory"
workers=4
intervals=10
expire-group=604800
min-distance=1

[evaluator.default]
class-name="caching"
expire-cache=1
"""


def http_json(port: int, path: str):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as resp:
        return json.loads(resp.read())


@pytest.fixture
def burrow_bin():
    path = harness.shutil.which("Burrow") or harness.shutil.which("burrow")
    if not path:
        harness.skip_or_fail("Burrow is not installed (apt-get install burrow; scripts/setup.sh)")
    if harness.zookeeper_classpath() is None or not harness.shutil.which("java"):
        harness.skip_or_fail("Debian's zookeeper package / java not installed (Burrow 1.2.1 needs ZooKeeper)")
    return path


@pytest.fixture
def zk1(tmp_path, burrow_bin):
    zk = ZkEnsemble(tmp_path / "zk", n=1)
    try:
        zk.start()
        yield zk
    finally:
        zk.close()


def _commit(consumer, offsets: dict) -> None:
    consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in sorted(offsets.items())], asynchronous=False)
    got = consumer.committed([TopicPartition(TOPIC, p) for p in sorted(offsets)], timeout=10)
    assert {tp.partition: tp.offset for tp in got} == offsets


def _lag_matches(port: int, committed: dict):
    """The lag answer when it reports every partition with the expected offsets, else None (not yet)."""
    try:
        answer = http_json(port, f"/v3/kafka/local/consumer/{GROUP}/lag")
    except urllib.error.HTTPError:  # 404 until Burrow has stored an offset for the group
        return None
    status = answer.get("status") or {}
    parts = {(p["topic"], p["partition"]): p for p in status.get("partitions") or [] if p}
    if sorted(parts) != [(TOPIC, p) for p in sorted(committed)]:
        return None
    for p, offset in committed.items():
        got = parts[(TOPIC, p)]
        if not got.get("end") or got["end"]["offset"] != offset:
            return None
        if got["current_lag"] != END_OFFSETS[p] - offset or not got.get("owner"):
            return None
    return status


def test_burrow_reports_group_lag(broker_factory, zk1, burrow_bin, tmp_path):
    broker = broker_factory(overrides={"group.initial.rebalance.delay.ms": 0})
    bootstrap = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept referenced: a collected handle fails its futures
    admin.create_topics([NewTopic(TOPIC, len(END_OFFSETS), 1)])[TOPIC].result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for p, n in END_OFFSETS.items():
        for i in range(n):
            producer.produce(TOPIC, key=b"k%d" % i, value=b"p%d-%d" % (p, i), partition=p)
    assert producer.flush(30) == 0
    del admin, producer  # destroyed now, not after the broker stops (no reconnect noise at teardown)

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "client.id": CLIENT_ID,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
    burrow = None
    try:
        consumer.subscribe([TOPIC])
        # Consume until every partition has delivered the records below the first commit point.
        seen = {p: -1 for p in END_OFFSETS}

        def consumed_enough():
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                seen[msg.partition()] = max(seen[msg.partition()], msg.offset())
            return all(seen[p] >= FIRST_COMMIT[p] - 1 for p in END_OFFSETS)

        wait_until(consumed_enough, 60, 0, "the group member to consume up to the first commit point")
        assert sorted(tp.partition for tp in consumer.assignment()) == sorted(END_OFFSETS)
        _commit(consumer, FIRST_COMMIT)

        workdir = tmp_path / "burrow"
        workdir.mkdir()
        http_port = harness.free_port()
        (workdir / "burrow.toml").write_text(burrow_config(zk1.connect_string, bootstrap, http_port, workdir))
        log_path = workdir / "burrow.log"
        burrow = harness._spawn([burrow_bin, "-config-dir", workdir], log_path, None, workdir, "Burrow")

        def lag_reported(committed):
            if burrow.poll() is not None:
                raise harness.HarnessError(f"Burrow exited with {burrow.returncode}\n{harness.tail(log_path)}")
            consumer.poll(0.05)  # keep the member's poll loop alive (heartbeats run in librdkafka's thread)
            return _lag_matches(http_port, committed)

        try:
            status = wait_until(lambda: lag_reported(FIRST_COMMIT), 60, 0.3, "Burrow to report the first commit",
                                ignore=(OSError,))
        except harness.HarnessError as exc:
            raise harness.HarnessError(f"{exc}\n--- Burrow log ---\n{harness.tail(log_path, 40)}") from None
        parts = {p["partition"]: p for p in status["partitions"]}
        assert {p: parts[p]["end"]["offset"] for p in parts} == FIRST_COMMIT
        assert {p: parts[p]["current_lag"] for p in parts} == {0: 6, 1: 6, 2: 7}
        assert status["totallag"] == 19
        assert status["partition_count"] == 3
        # From the group metadata record (key v2, value v1, member assignment parsed): the member's client host.
        # (Burrow 1.2.1's caching evaluator copies only the owner into /lag, so client_id is "" there.)
        assert {parts[p]["owner"] for p in parts} == {"/127.0.0.1"}

        topic = http_json(http_port, f"/v3/kafka/local/topic/{TOPIC}")
        assert topic["offsets"] == [END_OFFSETS[p] for p in sorted(END_OFFSETS)]
        detail = http_json(http_port, f"/v3/kafka/local/consumer/{GROUP}")["topics"][TOPIC]
        assert [[o["offset"] for o in part["offsets"] if o][-1] for part in detail] == \
            [FIRST_COMMIT[p] for p in sorted(FIRST_COMMIT)]
        assert {(part["owner"], part["client_id"]) for part in detail} == {("/127.0.0.1", CLIENT_ID)}
        assert [part["current-lag"] for part in detail] == [6, 6, 7]

        # Burrow keeps tailing __consumer_offsets: a later commit shows up without restarting it.
        _commit(consumer, SECOND_COMMIT)
        status = wait_until(lambda: lag_reported(SECOND_COMMIT), 30, 0.3, "Burrow to report the second commit",
                            ignore=(OSError,))
        assert {p["partition"]: p["current_lag"] for p in status["partitions"]} == {0: 0, 1: 0, 2: 3}
        assert status["totallag"] == 3

        log_text = log_path.read_text(errors="replace")
        assert "failed to decode" not in log_text, harness.tail(log_path, 40)
        assert '"level":"error"' not in log_text, harness.tail(log_path, 40)
    finally:
        if burrow is not None:
            harness._terminate(burrow, 10)
        consumer.close()
