"""``kbroker-admin transactions`` (kafka-transactions.sh) against a real kbroker-server: exact output lines.

The table is Kafka's prettyPrintTable (every cell padded to its column's width, then a TAB). Shown, on one broker:

- a confluent-kafka transactional producer's id through its life: ``describe`` Empty after initTransactions
  (no start time: None/None, no partitions), Ongoing with its partition and start time once it wrote (the
  duration counted from the tool's clock), CompleteCommit after the commit; ``list`` shows it with its coordinator
  (broker 0); ``describe-producers`` shows its open transaction's first offset (0), last sequence and the records'
  own timestamp, then no open transaction and coordinator epoch 0 after the COMMIT marker; ``find-hanging`` finds
  nothing (its transaction is old enough to be a candidate, but the coordinator knows it);
- a hanging transaction (a transactional batch written with a producer id no coordinator knows, 20 minutes old):
  ``find-hanging`` by topic and by broker lists it (Duration(min) 20), a longer ``--max-transaction-timeout``
  does not; ``abort --start-offset`` refuses an offset where no transaction starts and aborts the right one (the
  ABORT marker at offset 2, LSO 0 -> 3); ``abort --producer-id/--producer-epoch/--coordinator-epoch`` aborts
  another, a coordinator epoch below the one the partition recorded is TRANSACTION_COORDINATOR_FENCED (52) with
  Kafka's message and writes nothing;
- errors with Kafka's messages on stderr and exit 1 (unknown transactional id, unknown topic, usage), and the
  ``kbroker-admin`` entry point with ``--command-config``;
- Kafka's own Admin client (tests/java's driver, when built) reads the same producers, listings and
  descriptions over the same APIs and aborts a hanging transaction.
"""
import io
import subprocess
import sys

import pytest

from kbroker.cli import transactions
from kbroker.client.admin import AdminClient
from kbroker.record import Record, build_batch
from tests.integration.harness import REPO_ROOT, BrokerProcess, wait_until
from tests.integration.java_driver import java_driver, ok  # noqa: F401 - fixture
from tests.integration.test_clients_common import TIMEOUT, create_topic, now_ms
from tests.integration.test_clients_idempotence import Raw

pytestmark = pytest.mark.timeout(180)

MINUTE = 60_000
HINT = " Enable debug logging for additional detail."
DESCRIBE_HEADER = ("CoordinatorId\tTransactionalId\tProducerId\tProducerEpoch\tTransactionState\t"
                   "TransactionTimeoutMs\tCurrentTransactionStartTimeMs\tTransactionDurationMs\tTopicPartitions\t")
PRODUCERS_HEADER = ("ProducerId\tProducerEpoch\tLatestCoordinatorEpoch\tLastSequence\tLastTimestamp\t"
                    "CurrentTransactionStartOffset\t")
LIST_HEADER = "TransactionalId\tCoordinator\tProducerId\tTransactionState\t"
HANGING_HEADER = ("Topic\tPartition\tProducerId\tProducerEpoch\tCoordinatorEpoch\tStartOffset\tLastTimestamp\t"
                  "Duration(min)\t")


@pytest.fixture(scope="module")
def tools_broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("txn_tools"), overrides={
        "transaction.state.log.num.partitions": 2, "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1})
    try:
        b.start()
        yield b
    finally:
        b.close()


@pytest.fixture(scope="module")
def admin(tools_broker):
    client = AdminClient(tools_broker.bootstrap)
    yield client
    client.close()


def tool(broker, capsys, *argv, now=None):
    """Run the tool in process -> (exit code, stdout lines, stderr text)."""
    out = io.StringIO()
    code = transactions.main(["--bootstrap-server", broker.bootstrap] + list(argv), out=out,
                             now_ms=(lambda: now) if now is not None else None)
    return code, out.getvalue().splitlines(), capsys.readouterr().err


def lso(admin, topic):
    return admin.list_offsets(topic, {0: -1}, isolation_level=1)[0][0]


def test_a_transactional_id_through_its_life(tools_broker, admin, capsys):
    from confluent_kafka import Producer

    create_topic(tools_broker.bootstrap, "tools-t", partitions=1)
    producer = Producer({"bootstrap.servers": tools_broker.bootstrap, "transactional.id": "tools-app",
                         "transaction.timeout.ms": 60000, "linger.ms": 5})
    producer.init_transactions(TIMEOUT)
    pid = admin.describe_transactions(["tools-app"])["tools-app"].producer_id
    assert pid >= 0

    code, lines, err = tool(tools_broker, capsys, "describe", "--transactional-id", "tools-app")
    assert (code, err) == (0, "")
    assert lines == [DESCRIBE_HEADER,
                     "0            \ttools-app      \t%-10d\t0            \tEmpty           \t60000               \t"
                     "None                         \tNone                 \t               \t" % pid]

    old = now_ms() - 20 * MINUTE        # the records' own timestamps: 20 minutes ago
    before = now_ms()
    producer.begin_transaction()
    producer.produce("tools-t", key=b"k0", value=b"v0", partition=0, timestamp=old)
    producer.produce("tools-t", key=b"k1", value=b"v1", partition=0, timestamp=old + 1)
    assert producer.flush(TIMEOUT) == 0
    after = now_ms()
    start = admin.describe_transactions(["tools-app"])["tools-app"].transaction_start_time_ms
    assert before <= start <= after
    code, lines, _ = tool(tools_broker, capsys, "describe", "--transactional-id", "tools-app", now=start + 1234)
    assert lines == [DESCRIBE_HEADER,
                     "0            \ttools-app      \t%-10d\t0            \tOngoing         \t60000               \t"
                     "%-29d\t1234                 \ttools-t-0      \t" % (pid, start)]

    code, lines, _ = tool(tools_broker, capsys, "describe-producers", "--topic", "tools-t", "--partition", "0")
    assert code == 0
    assert lines == [PRODUCERS_HEADER,
                     "%-10d\t0            \t-1                    \t1           \t%d\t0                            \t"
                     % (pid, old + 1)]
    code, lines, _ = tool(tools_broker, capsys, "list")
    assert lines == [LIST_HEADER, "tools-app      \t0          \t%-10d\tOngoing         \t" % pid]
    # Old enough to be a candidate (20 > 15 minutes), but its coordinator knows the transaction: not hanging.
    code, lines, err = tool(tools_broker, capsys, "find-hanging", "--topic", "tools-t")
    assert (code, lines, err) == (0, [HANGING_HEADER], "")
    assert lso(admin, "tools-t") == 0

    producer.commit_transaction(TIMEOUT)                    # COMMIT marker at 2
    wait_until(lambda: lso(admin, "tools-t") == 3, timeout=TIMEOUT, message="LSO 3 after the commit")
    d = admin.describe_transactions(["tools-app"])["tools-app"]
    # Kafka keeps the finished transaction's start time (prepareComplete) and empties its partitions.
    assert (d.state, d.topic_partitions, d.transaction_start_time_ms) == ("CompleteCommit", [], start)
    code, lines, _ = tool(tools_broker, capsys, "describe", "--transactional-id", "tools-app", now=start + 5000)
    assert lines == [DESCRIBE_HEADER,
                     "0            \ttools-app      \t%-10d\t0            \tCompleteCommit  \t60000               \t"
                     "%-29d\t5000                 \t               \t" % (pid, start)]
    code, lines, _ = tool(tools_broker, capsys, "list")
    assert lines == [LIST_HEADER, "tools-app      \t0          \t%-10d\tCompleteCommit  \t" % pid]
    (state,) = admin.describe_producers([("tools-t", 0)])[("tools-t", 0)]
    code, lines, _ = tool(tools_broker, capsys, "describe-producers", "--topic", "tools-t", "--partition", "0")
    assert lines == [PRODUCERS_HEADER,
                     "%-10d\t0            \t0                     \t1           \t%d\tNone                         \t"
                     % (pid, state.last_timestamp)]
    assert state.last_timestamp >= after                    # the marker's time, not the records'


def ghost_batch(pid, epoch, seq, ts, n=2):
    return build_batch([Record(i, ts + i, b"g%d" % i, b"ghost-%d" % (seq + i)) for i in range(n)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True)


def ghost_write(raw, topic, batch):
    """Produce a transactional batch no coordinator knows about (a 'hanging' transaction); -> base offset."""
    resp = raw.call(0, 7, {"transactional_id": "ghost", "acks": -1, "timeout_ms": 10_000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    p = resp["responses"][0]["partition_responses"][0]
    assert p["error_code"] == 0, p
    return p["base_offset"]


def test_find_hanging_and_abort(tools_broker, admin, capsys):
    topic = "tools-h"
    create_topic(tools_broker.bootstrap, topic, partitions=1)
    raw = Raw(tools_broker)
    pid, epoch = raw.init_producer_id()
    ts = now_ms() - 20 * MINUTE
    assert ghost_write(raw, topic, ghost_batch(pid, epoch, 0, ts)) == 0          # open at 0-1
    assert lso(admin, topic) == 0

    row = "tools-h\t0        \t%-10d\t0            \t-1              \t0          \t%d\t20           \t" % (pid, ts + 1)
    clock = ts + 1 + 20 * MINUTE + 5
    code, lines, err = tool(tools_broker, capsys, "find-hanging", "--topic", topic, now=clock)
    assert (code, lines, err) == (0, ["Topic  \tPartition\tProducerId\tProducerEpoch\tCoordinatorEpoch\t"
                                      "StartOffset\tLastTimestamp\tDuration(min)\t", row], "")
    code, lines, _ = tool(tools_broker, capsys, "find-hanging", "--broker-id", "0", now=clock)
    assert lines[1:] == [row]
    code, lines, _ = tool(tools_broker, capsys, "find-hanging", "--topic", topic, "--partition", "0",
                          "--max-transaction-timeout", "30", now=clock)
    assert lines == [HANGING_HEADER]

    code, lines, err = tool(tools_broker, capsys, "abort", "--topic", topic, "--partition", "0", "--start-offset", "1")
    assert (code, lines, err) == (1, [], "Could not find any open transactions starting at offset 1 on partition "
                                         "tools-h-0\n")
    assert lso(admin, topic) == 0
    code, lines, err = tool(tools_broker, capsys, "abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
    assert (code, lines, err) == (0, [], "")
    assert lso(admin, topic) == 3                                               # ABORT marker at 2
    (state,) = admin.describe_producers([(topic, 0)])[(topic, 0)]
    assert (state.producer_id, state.coordinator_epoch, state.current_txn_start_offset) == (pid, 0, None)
    code, lines, _ = tool(tools_broker, capsys, "find-hanging", "--topic", topic, now=clock)
    assert lines == [HANGING_HEADER]

    # The pre-3.0 form: the producer named, coordinator epoch 7 recorded by the marker.
    assert ghost_write(raw, topic, ghost_batch(pid, epoch, 2, ts)) == 3         # open at 3-4
    assert lso(admin, topic) == 3
    base = ["abort", "--topic", topic, "--partition", "0", "--producer-id", str(pid), "--producer-epoch", str(epoch)]
    code, lines, err = tool(tools_broker, capsys, *base, "--coordinator-epoch", "7")
    assert (code, lines, err) == (0, [], "")
    assert lso(admin, topic) == 6                                               # ABORT at 5
    assert ghost_write(raw, topic, ghost_batch(pid, epoch, 4, ts)) == 6         # open at 6-7
    # An older coordinator epoch than the partition recorded (7): fenced, nothing written.
    code, lines, err = tool(tools_broker, capsys, *base, "--coordinator-epoch", "-1")
    spec = ("AbortTransactionSpec(topicPartition=tools-h-0, producerId=%d, producerEpoch=%d, coordinatorEpoch=0)"
            % (pid, epoch))
    assert (code, lines) == (1, [])
    assert err == ("Failed to abort transaction %s: WriteTxnMarkers request with %s failed since the provided "
                   "coordinator epoch 0 has been fenced by the active coordinator.%s\n" % (spec, spec, HINT))
    assert lso(admin, topic) == 6
    assert admin.list_offsets(topic, {0: -1})[0][0] == 8
    code, _, err = tool(tools_broker, capsys, *base, "--coordinator-epoch", "7")
    assert (code, err) == (0, "")
    assert lso(admin, topic) == 9                                               # ABORT at 8


def test_errors(tools_broker, capsys):
    code, lines, err = tool(tools_broker, capsys, "describe", "--transactional-id", "nobody")
    assert (code, lines) == (1, [])
    assert err == ("Failed to describe transaction state of transactional-id `nobody`: DescribeTransactions "
                   "request for transactionalId `nobody` failed because the ID could not be found.%s\n" % HINT)
    code, lines, err = tool(tools_broker, capsys, "describe-producers", "--topic", "nope", "--partition", "0")
    assert (code, lines) == (1, [])
    assert err == ("Failed to describe producers for partition nope-0 on leader: UNKNOWN_TOPIC_OR_PARTITION: topic "
                   "nope.%s\n" % HINT)
    code, lines, err = tool(tools_broker, capsys, "abort", "--topic", "tools-t", "--partition", "0")
    assert (code, lines) == (1, [])
    assert err == ("The transaction to abort must be identified either with --start-offset (for brokers on 3.0 or "
                   "above) or with --producer-id, --producer-epoch, and --coordinator-epoch (for older brokers)\n")


def test_entry_point_with_command_config(tools_broker, tmp_path):
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=PLAINTEXT\n")
    done = subprocess.run([sys.executable, "-m", "kbroker.cli.admin", "transactions", "--command-config",
                           str(props), "--bootstrap-server", tools_broker.bootstrap, "list"],
                          capture_output=True, text=True, timeout=60, cwd=str(REPO_ROOT))
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[0] == LIST_HEADER
    done = subprocess.run([sys.executable, "-m", "kbroker.cli.admin", "transactions", "--bootstrap-server",
                           tools_broker.bootstrap, "describe"], capture_output=True, text=True, timeout=60,
                          cwd=str(REPO_ROOT))
    assert done.returncode == 1 and "--transactional-id" in done.stderr and done.stdout == ""


def test_java_admin_reads_the_same_state(tools_broker, admin, capsys, java_driver):  # noqa: F811 - the fixture
    """Kafka's own Admin (kafka-clients 4.x, what kafka-transactions.sh runs) over the same APIs: describeProducers
    (61) of a hanging transaction, listTransactions (66) and describeTransactions (65) equal to the tool's view,
    an unknown id TransactionalIdNotFoundException, abortTransaction (27) closes the hanging one (LSO 0 -> 3)."""
    from confluent_kafka import Producer

    topic = "tools-j"
    create_topic(tools_broker.bootstrap, topic, partitions=1)
    Producer({"bootstrap.servers": tools_broker.bootstrap, "transactional.id": "tools-java-app",
              "transaction.timeout.ms": 45000}).init_transactions(TIMEOUT)
    raw = Raw(tools_broker)
    pid, epoch = raw.init_producer_id()
    ts = now_ms() - 20 * MINUTE
    assert ghost_write(raw, topic, ghost_batch(pid, epoch, 0, ts)) == 0
    steps = [{"op": "describe_producers", "topic": topic, "partitions": [0]},
             {"op": "list_transactions"},
             {"op": "describe_transactions", "ids": ["tools-java-app", "nobody"]},
             {"op": "abort_transaction", "topic": topic, "partition": 0, "producerId": pid, "producerEpoch": epoch,
              "coordinatorEpoch": 3},
             {"op": "describe_producers", "topic": topic, "partitions": [0]}]
    before, listed, described, aborted, after = (ok(s) for s in java_driver(tools_broker.bootstrap, steps))
    assert before["results"] == {"0": [{"producerId": pid, "producerEpoch": epoch, "lastSequence": 1,
                                        "lastTimestamp": ts + 1, "coordinatorEpoch": None,
                                        "currentTransactionStartOffset": 0}]}
    ours = admin.list_transactions()
    assert listed["transactions"] == sorted(({"transactionalId": x.transactional_id, "producerId": x.producer_id,
                                              "state": x.state} for ls in ours.values() for x in ls),
                                            key=lambda x: x["transactionalId"])
    assert "tools-java-app" in [x["transactionalId"] for x in listed["transactions"]]
    d = admin.describe_transactions(["tools-java-app"])["tools-java-app"]
    assert described["results"]["tools-java-app"] == {
        "coordinatorId": 0, "state": "Empty", "producerId": d.producer_id, "producerEpoch": 0,
        "transactionTimeoutMs": 45000, "transactionStartTimeMs": None, "topicPartitions": []}
    assert described["results"]["nobody"]["error"]["type"].endswith("TransactionalIdNotFoundException")
    assert "error" not in aborted
    assert lso(admin, topic) == 3
    (state,) = after["results"]["0"]
    assert (state["producerId"], state["coordinatorEpoch"], state["currentTransactionStartOffset"]) == (pid, 3, None)
