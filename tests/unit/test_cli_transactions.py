"""kbroker-admin transactions (kafka-transactions.sh) over a fake admin client: exact table lines (Kafka's
prettyPrintTable: each cell padded to its column and followed by a TAB), Kafka's error messages on stderr with exit
1, the abort spec sent, find-hanging's filtering. The real broker path is tests/integration/test_txn_tools.py."""
import io

import pytest

from kbroker import errors
from kbroker.cli import transactions
from kbroker.client.admin import ProducerState, TransactionDescription, TransactionListing

NOW = 1_700_000_600_000


class FakeAdmin:
    def __init__(self, producers=None, listings=None, descriptions=None, topics=None, fail=None):
        self.producers = producers or {}          # {(t, p): [ProducerState]}
        self.listings = listings or {}            # {broker: [TransactionListing]}
        self.descriptions = descriptions or {}    # {tid: TransactionDescription}
        self.topics = topics or {}                # {topic: {p: [replicas]}}
        self.fail = fail or {}                    # {method: exception}
        self.calls = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def _maybe_fail(self, name):
        if name in self.fail:
            raise self.fail[name]

    def describe_producers(self, partitions, broker_id=None):
        self.calls.append(("describe_producers", sorted(partitions), broker_id))
        self._maybe_fail("describe_producers")
        return {tp: self.producers.get(tp, []) for tp in partitions}

    def list_transactions(self, state_filters=(), producer_id_filters=(), duration_filter_ms=-1):
        self.calls.append(("list_transactions", list(producer_id_filters), duration_filter_ms))
        self._maybe_fail("list_transactions")
        return {b: [x for x in ls if not producer_id_filters or x.producer_id in producer_id_filters]
                for b, ls in self.listings.items()}

    def describe_transactions(self, tids, missing_ok=False):
        self.calls.append(("describe_transactions", list(tids), missing_ok))
        self._maybe_fail("describe_transactions")
        out = {}
        for t in tids:
            if t not in self.descriptions and not missing_ok:
                raise errors.TransactionalIdNotFound("TRANSACTIONAL_ID_NOT_FOUND")
            out[t] = self.descriptions.get(t)
        return out

    def abort_transaction(self, topic, partition, pid, epoch, coordinator_epoch):
        self.calls.append(("abort", topic, partition, pid, epoch, coordinator_epoch))
        self._maybe_fail("abort_transaction")

    def list_topics(self, include_internal=True):
        return sorted(t for t in self.topics if include_internal or not t.startswith("__"))

    def metadata(self, names):
        return {"topics": [{"name": n, "error_code": 0, "partitions": [
            {"partition_index": p, "replica_nodes": r} for p, r in self.topics[n].items()]} for n in names]}


def run(admin, monkeypatch, capsys, *argv):
    monkeypatch.setattr(transactions, "AdminClient", lambda *a, **k: admin)
    out = io.StringIO()
    code = transactions.main(["--bootstrap-server", "h:1"] + list(argv), out=out, now_ms=lambda: NOW)
    return code, out.getvalue().splitlines(), capsys.readouterr().err


def test_list_rows_per_broker(monkeypatch, capsys):
    admin = FakeAdmin(listings={
        2: [TransactionListing("payments-app", 4001, "Ongoing")],
        1: [TransactionListing("a", 7, "CompleteCommit"), TransactionListing("b", 8, "Dead")]})
    code, lines, err = run(admin, monkeypatch, capsys, "list")
    assert code == 0 and err == ""
    assert lines == [
        "TransactionalId\tCoordinator\tProducerId\tTransactionState\t",
        "a              \t1          \t7         \tCompleteCommit  \t",
        "b              \t1          \t8         \tUnknown         \t",
        "payments-app   \t2          \t4001      \tOngoing         \t"]
    # The --list spelling and options after the command word are accepted too.
    code, lines2, _ = run(admin, monkeypatch, capsys, "--list", "--duration-filter", "5000")
    assert code == 0 and lines2 == lines and admin.calls[-1] == ("list_transactions", [], 5000)


def test_describe_open_and_closed(monkeypatch, capsys):
    admin = FakeAdmin(descriptions={
        "app": TransactionDescription(1, "app", "Ongoing", 4001, 3, 60000, NOW - 2500, [("in", 0), ("out", 11)]),
        "idle": TransactionDescription(0, "idle", "Empty", 4002, 0, 60000, None, [])})
    code, lines, _ = run(admin, monkeypatch, capsys, "describe", "--transactional-id", "app")
    assert code == 0
    assert lines == [
        "CoordinatorId\tTransactionalId\tProducerId\tProducerEpoch\tTransactionState\tTransactionTimeoutMs\t"
        "CurrentTransactionStartTimeMs\tTransactionDurationMs\tTopicPartitions\t",
        "1            \tapp            \t4001      \t3            \tOngoing         \t60000               \t"
        "1700000597500                \t2500                 \tin-0,out-11    \t"]
    code, lines, _ = run(admin, monkeypatch, capsys, "describe", "--transactional-id", "idle")
    assert lines[1] == ("0            \tidle           \t4002      \t0            \tEmpty           \t"
                        "60000               \tNone                         \tNone                 \t"
                        "               \t")


def test_describe_unknown_id(monkeypatch, capsys):
    code, lines, err = run(FakeAdmin(), monkeypatch, capsys, "describe", "--transactional-id", "nope")
    assert code == 1 and lines == []
    assert err == ("Failed to describe transaction state of transactional-id `nope`: DescribeTransactions request "
                   "for transactionalId `nope` failed because the ID could not be found. Enable debug logging for "
                   "additional detail.\n")


def test_describe_producers(monkeypatch, capsys):
    admin = FakeAdmin(producers={("t", 0): [ProducerState(1000, 0, 9, 1_700_000_000_000, None, None),
                                            ProducerState(1001, 2, 4, 1_700_000_000_500, 7, 42)]})
    code, lines, _ = run(admin, monkeypatch, capsys, "describe-producers", "--topic", "t", "--partition", "0")
    assert code == 0
    assert lines == [
        "ProducerId\tProducerEpoch\tLatestCoordinatorEpoch\tLastSequence\tLastTimestamp\t"
        "CurrentTransactionStartOffset\t",
        "1000      \t0            \t-1                    \t9           \t1700000000000\t"
        "None                         \t",
        "1001      \t2            \t7                     \t4           \t1700000000500\t"
        "42                           \t"]
    assert admin.calls == [("describe_producers", [("t", 0)], None)]


def test_describe_producers_errors(monkeypatch, capsys):
    admin = FakeAdmin(fail={"describe_producers": errors.TopicAuthorizationFailed("denied")})
    code, _, err = run(admin, monkeypatch, capsys, "describe-producers", "--topic", "t", "--partition", "3")
    assert code == 1
    assert err == ("Failed to describe producers for partition t-3 on leader: Failed to describe active producers "
                   "for partition t-3 due to authorization failure on topic `t`. Enable debug logging for "
                   "additional detail.\n")
    admin = FakeAdmin(fail={"describe_producers": errors.NotLeaderOrFollower("not here")})
    code, _, err = run(admin, monkeypatch, capsys, "describe-producers", "--topic", "t", "--partition", "3",
                       "--broker-id", "2")
    assert err == ("Failed to describe producers for partition t-3 on broker 2: Failed to describe active "
                   "producers for partition t-3 on brokerId 2. Enable debug logging for additional detail.\n")


def test_abort_by_start_offset_uses_the_producer_state(monkeypatch, capsys):
    admin = FakeAdmin(producers={("t", 1): [ProducerState(1000, 0, 9, 1, None, None),
                                            ProducerState(1001, 2, 4, 1, None, 42)]})
    code, lines, err = run(admin, monkeypatch, capsys, "abort", "--topic", "t", "--partition", "1",
                           "--start-offset", "42")
    assert (code, lines, err) == (0, [], "")
    # No marker yet for the producer (coordinator epoch absent): 0, as Kafka.
    assert admin.calls[-1] == ("abort", "t", 1, 1001, 2, 0)
    code, lines, err = run(admin, monkeypatch, capsys, "abort", "--topic", "t", "--partition", "1",
                           "--start-offset", "41")
    assert code == 1
    assert err == "Could not find any open transactions starting at offset 41 on partition t-1\n"


def test_abort_by_producer_and_its_errors(monkeypatch, capsys):
    admin = FakeAdmin()
    base = ["abort", "--topic", "t", "--partition", "0"]
    assert run(admin, monkeypatch, capsys, *base, "--producer-id", "5", "--producer-epoch", "1",
               "--coordinator-epoch", "-1")[0] == 0
    assert admin.calls[-1] == ("abort", "t", 0, 5, 1, 0)
    code, _, err = run(admin, monkeypatch, capsys, *base)
    assert code == 1 and err.startswith("The transaction to abort must be identified either with --start-offset")
    code, _, err = run(admin, monkeypatch, capsys, *base, "--producer-id", "5")
    assert (code, err) == (1, "Missing required argument --producer-epoch\n")
    code, _, err = run(admin, monkeypatch, capsys, *base, "--producer-id", "5", "--producer-epoch", "1")
    assert (code, err) == (1, "Missing required argument --coordinator-epoch\n")
    admin = FakeAdmin(fail={"abort_transaction": errors.TransactionCoordinatorFenced("fenced")})
    code, _, err = run(admin, monkeypatch, capsys, *base, "--producer-id", "5", "--producer-epoch", "1",
                       "--coordinator-epoch", "3")
    assert code == 1
    spec = "AbortTransactionSpec(topicPartition=t-0, producerId=5, producerEpoch=1, coordinatorEpoch=3)"
    assert err == ("Failed to abort transaction %s: WriteTxnMarkers request with %s failed since the provided "
                   "coordinator epoch 3 has been fenced by the active coordinator. Enable debug logging for "
                   "additional detail.\n" % (spec, spec))


def test_find_hanging(monkeypatch, capsys):
    old = NOW - 20 * 60_000 - 1       # 20 minutes ago: past the default 15
    admin = FakeAdmin(
        topics={"t": {0: [1], 1: [2]}, "u": {0: [1, 2]}, "__consumer_offsets": {0: [1]}},
        producers={("t", 0): [ProducerState(10, 0, 3, old, 4, 100),      # id unknown to every coordinator
                              ProducerState(11, 1, 3, old, 4, 200),      # its transaction includes t-0
                              ProducerState(12, 0, 3, NOW - 1000, 4, 300)],   # recent: not a candidate
                   ("u", 0): [ProducerState(11, 1, 3, old, 4, 50),       # not in its transaction: hanging
                              ProducerState(13, 0, 5, old, None, None)]},     # no open transaction
        listings={1: [TransactionListing("app", 11, "Ongoing")]},
        descriptions={"app": TransactionDescription(1, "app", "Ongoing", 11, 1, 60000, old, [("t", 0)])})
    code, lines, err = run(admin, monkeypatch, capsys, "find-hanging", "--broker-id", "1")
    assert (code, err) == (0, "")
    assert lines == [
        "Topic\tPartition\tProducerId\tProducerEpoch\tCoordinatorEpoch\tStartOffset\tLastTimestamp\tDuration(min)\t",
        "t    \t0        \t10        \t0            \t4               \t100        \t%d\t20           \t" % old,
        "u    \t0        \t11        \t1            \t4               \t50         \t%d\t20           \t" % old]
    assert admin.calls[0] == ("describe_producers", [("t", 0), ("u", 0)], 1)
    assert admin.calls[1] == ("list_transactions", [10, 11], -1)
    # A long enough --max-transaction-timeout finds nothing: the header only, no further request.
    admin.calls.clear()
    code, lines, _ = run(admin, monkeypatch, capsys, "find-hanging", "--topic", "t", "--max-transaction-timeout", "30")
    assert lines == [
        "Topic\tPartition\tProducerId\tProducerEpoch\tCoordinatorEpoch\tStartOffset\tLastTimestamp\tDuration(min)\t"]
    assert [c[0] for c in admin.calls] == ["describe_producers"]


@pytest.mark.parametrize("argv, message", [
    (["find-hanging"], "The `find-hanging` command requires either --topic or --broker-id to limit the scope of "
                       "the search\n"),
    (["find-hanging", "--broker-id", "1", "--partition", "0"], "The --partition argument requires --topic to be "
                                                                "provided\n"),
])
def test_find_hanging_scope(monkeypatch, capsys, argv, message):
    code, lines, err = run(FakeAdmin(), monkeypatch, capsys, *argv)
    assert (code, lines, err) == (1, [], message)


def test_usage_errors(monkeypatch, capsys):
    monkeypatch.setattr(transactions, "AdminClient", lambda *a, **k: pytest.fail("no client for a usage error"))
    assert transactions.main(["list"]) == 1
    assert "argument --bootstrap-server is required" in capsys.readouterr().err
    assert transactions.main(["--bootstrap-server", "h:1"]) == 1
    assert "a command is required" in capsys.readouterr().err
    assert transactions.main(["--bootstrap-server", "h:1", "describe"]) == 1
    assert "--transactional-id" in capsys.readouterr().err
