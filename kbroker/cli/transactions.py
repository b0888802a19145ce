"""``kbroker-admin transactions``: Kafka's kafka-transactions.sh (TransactionsCommand, KIP-664) over kbroker's
blocking admin client.

    kbroker-admin transactions --bootstrap-server H:P [--command-config FILE] COMMAND [options]

    list              [--duration-filter MS]                   ListTransactions (66) to every broker
    describe          --transactional-id ID                    FindCoordinator (key type 1) + DescribeTransactions (65)
    describe-producers --topic T --partition P [--broker-id B] DescribeProducers (61) to the leader (or broker B)
    abort             --topic T --partition P
                      (--start-offset N | --producer-id P --producer-epoch E --coordinator-epoch C)
                                                               WriteTxnMarkers (27) ABORT to the leader
    find-hanging      (--broker-id B | --topic T [--partition P]) [--max-transaction-timeout MIN (15)]

The options may also follow the command word (kafka-transactions.sh wants ``--bootstrap-server`` before it; both
work here), and ``--list``, ``--describe``, ``--describe-producers``, ``--abort`` and ``--find-hanging`` are read
as the command words. ``--command-config`` is taken by kbroker-admin's dispatcher (kbroker/client/client_config.py).

Output (stdout): Kafka's ``prettyPrintTable``, byte for byte -- every cell left-justified to its column's width
(the longest of the header and the cells) and followed by one TAB, the header line first:

    list:               TransactionalId Coordinator ProducerId TransactionState
                        (rows per broker in broker id order, each broker's in its answer's order)
    describe:           CoordinatorId TransactionalId ProducerId ProducerEpoch TransactionState TransactionTimeoutMs
                        CurrentTransactionStartTimeMs TransactionDurationMs TopicPartitions
                        (start time and duration "None" when no transaction is open; duration = now - start;
                        partitions ``topic-p`` comma-joined, sorted)
    describe-producers: ProducerId ProducerEpoch LatestCoordinatorEpoch LastSequence LastTimestamp
                        CurrentTransactionStartOffset  (-1 when no marker yet, "None" when no open transaction)
    find-hanging:       Topic Partition ProducerId ProducerEpoch CoordinatorEpoch StartOffset LastTimestamp
                        Duration(min)  (sorted by topic, partition, producer id)
    abort:              nothing on success.

find-hanging (Kafka's rules): the partitions of ``--topic`` (or of every non-internal topic, with ``--broker-id``
among their replicas) are asked for their producers (DescribeProducers, 500 partitions per request, of
``--broker-id``'s replica when given); an open transaction whose producer wrote last more than
``--max-transaction-timeout`` minutes ago is a candidate; it hangs when ListTransactions (filtered by producer id)
knows no transactional id for its producer, when DescribeTransactions does not find that id, or when the id's
current transaction does not include the partition.

Errors: Kafka's ``printErrorAndExit`` on stderr, exit 1: ``<what failed>: <the admin client's message>. Enable
debug logging for additional detail.`` with the Java admin handlers' messages; usage errors print the problem and
the usage, exit 1.
"""
import argparse
import sys
import time

from kbroker import errors
from kbroker.client.admin import AdminClient

from .common import ArgParser, UsageError, usage_error

COMMANDS = ("list", "describe", "describe-producers", "abort", "find-hanging")
MAX_BATCH_SIZE = 500   # partitions per DescribeProducers of find-hanging (Kafka's MAX_BATCH_SIZE)
DEBUG_HINT = " Enable debug logging for additional detail."

LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                    "TopicPartitions")
PRODUCERS_HEADERS = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                     "CurrentTransactionStartOffset")
HANGING_HEADERS = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                   "LastTimestamp", "Duration(min)")
# The Java admin's TransactionState names; anything else a broker sends prints as Unknown (TransactionState.parse).
KNOWN_STATES = ("Ongoing", "PrepareAbort", "PrepareCommit", "CompleteAbort", "CompleteCommit", "Empty",
                "PrepareEpochFence")


class ToolError(Exception):
    """Kafka's printErrorAndExit: the message goes to stderr as is, exit 1."""


# ---------------------------------------------------------------------------------------------- arguments

def parser():
    p = ArgParser(prog="kbroker-admin transactions",
                  description="This tool is used to analyze the transactional state of producers in the cluster. "
                              "It can be used to detect and recover from hanging transactions.")
    p.add_argument("--bootstrap-server", metavar="host:port",
                   help="hostname and port for the broker to connect to, in the form `host:port` (multiple "
                        "comma-separated entries can be given)")
    sub = p.add_subparsers(dest="command", title="commands", metavar="COMMAND")

    def command(name, help_):
        s = sub.add_parser(name, help=help_)
        # Accepted after the command word too; SUPPRESS keeps a value given before it.
        s.add_argument("--bootstrap-server", metavar="host:port", default=argparse.SUPPRESS)
        return s

    s = command("list", "list transactions")
    s.add_argument("--duration-filter", type=int, metavar="MS",
                   help="Duration (in millis) to filter by: if < 0, all transactions will be returned; otherwise, "
                        "only transactions running longer than this duration will be returned")
    s = command("describe", "describe the state of an active transactional-id")
    s.add_argument("--transactional-id", required=True, help="transactional id")
    s = command("describe-producers", "describe the states of active producers for a topic partition")
    s.add_argument("--broker-id", type=int, help="optional broker id to describe the producer state on a specific "
                                                 "replica")
    s.add_argument("--topic", required=True, help="topic name")
    s.add_argument("--partition", type=int, required=True, help="partition number")
    s = command("abort", "abort a hanging transaction (requires administrative privileges)")
    s.add_argument("--topic", required=True, help="topic name")
    s.add_argument("--partition", type=int, required=True, help="partition number")
    s.add_argument("--start-offset", type=int, help="start offset of the transaction to abort (brokers on 3.0+)")
    s.add_argument("--producer-id", type=int, help="producer id (brokers older than 3.0)")
    s.add_argument("--producer-epoch", type=int, help="producer epoch (brokers older than 3.0)")
    s.add_argument("--coordinator-epoch", type=int, help="coordinator epoch (brokers older than 3.0)")
    s = command("find-hanging", "find hanging transactions")
    s.add_argument("--broker-id", type=int, help="broker id to search for hanging transactions")
    s.add_argument("--max-transaction-timeout", type=int, default=15, metavar="MINUTES",
                   help="maximum transaction timeout in minutes to limit the scope of the search (15 minutes by "
                        "default)")
    s.add_argument("--topic", help="topic name to limit search to (required if --partition is specified)")
    s.add_argument("--partition", type=int, help="partition number")
    return p


def parse_args(argv):
    """The parsed command line; ``--list`` style command words are read as ``list``. Raises UsageError."""
    argv = [a[2:] if a.startswith("--") and a[2:] in COMMANDS else a for a in argv]
    args = parser().parse_args(argv)
    if not args.command:
        raise UsageError("too few arguments: a command is required (%s)" % ", ".join(COMMANDS))
    if not args.bootstrap_server:
        raise UsageError("argument --bootstrap-server is required")
    if args.command == "abort" and args.producer_epoch is not None and not -1 <= args.producer_epoch <= 32767:
        raise UsageError("argument --producer-epoch: %d is not a short" % args.producer_epoch)
    return args


# ---------------------------------------------------------------------------------------------- output

def pretty_table(headers, rows):
    """Kafka's ToolsUtils.prettyPrintTable as lines: cells padded to the column width, each followed by a TAB."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row)]
    return ["".join(c.ljust(w) + "\t" for c, w in zip(row, widths)) for row in [list(headers)] + rows]


def _tp(topic, partition):
    return "%s-%d" % (topic, partition)


def _fail(what, exc):
    """ToolError with Kafka's ``<what>: <message>. Enable debug logging ...``."""
    return ToolError("%s: %s.%s" % (what, exc, DEBUG_HINT))


def _message(e):
    return getattr(e, "message", None) or str(e)


# ---------------------------------------------------------------------------------------------- commands

def list_transactions(admin, args, now_ms):
    duration = args.duration_filter if args.duration_filter is not None else -1
    try:
        by_broker = admin.list_transactions(duration_filter_ms=duration)
    except errors.KafkaError as e:
        raise _fail("Failed to list transactions", _message(e)) from None
    rows = [[x.transactional_id, str(node), str(x.producer_id), _state(x.state)]
            for node, listings in sorted(by_broker.items()) for x in listings]
    return pretty_table(LIST_HEADERS, rows)


def _state(name):
    return name if name in KNOWN_STATES else "Unknown"


def describe_transaction(admin, args, now_ms):
    tid = args.transactional_id
    try:
        d = admin.describe_transactions([tid])[tid]
    except errors.KafkaError as e:
        raise _fail("Failed to describe transaction state of transactional-id `%s`" % tid,
                    _describe_txn_message(tid, e)) from None
    if d.transaction_start_time_ms is None:
        start = duration = "None"
    else:
        start, duration = str(d.transaction_start_time_ms), str(now_ms() - d.transaction_start_time_ms)
    row = [str(d.coordinator_id), tid, str(d.producer_id), str(d.producer_epoch), _state(d.state),
           str(d.transaction_timeout_ms), start, duration, ",".join(_tp(t, p) for t, p in d.topic_partitions)]
    return pretty_table(DESCRIBE_HEADERS, [row])


def _describe_txn_message(tid, e):
    """The Java admin's DescribeTransactionsHandler messages."""
    prefix = "DescribeTransactions request for transactionalId `%s` failed" % tid
    if e.code == errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
        return prefix + " due to authorization failure"
    if e.code == errors.TRANSACTIONAL_ID_NOT_FOUND:
        return prefix + " because the ID could not be found"
    if e.code in (errors.COORDINATOR_LOAD_IN_PROGRESS, errors.COORDINATOR_NOT_AVAILABLE, errors.NOT_COORDINATOR,
                  -1) or not isinstance(e, errors.KafkaError):
        return _message(e)
    return prefix + " due to unexpected error"


def _describe_producers(admin, topic, partition, broker_id):
    """[ProducerState] of one partition; ToolError with Kafka's message on failure."""
    try:
        return admin.describe_producers([(topic, partition)], broker_id)[(topic, partition)]
    except errors.KafkaError as e:
        where = "leader" if broker_id is None else "broker %d" % broker_id
        raise _fail("Failed to describe producers for partition %s on %s" % (_tp(topic, partition), where),
                    _describe_producers_message(topic, partition, broker_id, e)) from None


def _describe_producers_message(topic, partition, broker_id, e):
    """The Java admin's DescribeProducersHandler messages."""
    tp = _tp(topic, partition)
    code = getattr(e, "code", None)
    if code == errors.TOPIC_AUTHORIZATION_FAILED:
        return "Failed to describe active producers for partition %s due to authorization failure on topic `%s`" \
            % (tp, topic)
    if code == errors.NOT_LEADER_OR_FOLLOWER and broker_id is not None:
        return "Failed to describe active producers for partition %s on brokerId %d" % (tp, broker_id)
    if code == errors.INVALID_TOPIC_EXCEPTION:
        return "Failed to fetch metadata for partition %s due to invalid topic error: %s" % (tp, _message(e))
    if code in (errors.UNKNOWN_TOPIC_OR_PARTITION, errors.NOT_LEADER_OR_FOLLOWER, errors.LEADER_NOT_AVAILABLE,
                errors.BROKER_NOT_AVAILABLE):
        return _message(e)
    return "Failed to describe active producers for partition %s due to unexpected error" % tp


def describe_producers(admin, args, now_ms):
    producers = _describe_producers(admin, args.topic, args.partition, args.broker_id)
    rows = [[str(s.producer_id), str(s.producer_epoch),
             str(s.coordinator_epoch if s.coordinator_epoch is not None else -1), str(s.last_sequence),
             str(s.last_timestamp),
             "None" if s.current_txn_start_offset is None else str(s.current_txn_start_offset)]
            for s in producers]
    return pretty_table(PRODUCERS_HEADERS, rows)


def abort(admin, args, now_ms):
    topic, partition = args.topic, args.partition
    if args.start_offset is None and args.producer_id is None:
        raise ToolError("The transaction to abort must be identified either with --start-offset (for brokers on "
                        "3.0 or above) or with --producer-id, --producer-epoch, and --coordinator-epoch (for older "
                        "brokers)")
    if args.start_offset is None:
        if args.producer_epoch is None:
            raise ToolError("Missing required argument --producer-epoch")
        if args.coordinator_epoch is None:
            raise ToolError("Missing required argument --coordinator-epoch")
        # A transaction that hung before its producer id ever got a marker shows coordinator epoch -1: 0 is at or
        # below every leader epoch, so the marker is accepted (Kafka's rule).
        spec = (args.producer_id, args.producer_epoch, max(args.coordinator_epoch, 0))
    else:
        try:
            producers = admin.describe_producers([(topic, partition)])[(topic, partition)]
        except errors.KafkaError as e:
            raise _fail("Failed to validate producer state for partition %s" % _tp(topic, partition),
                        _describe_producers_message(topic, partition, None, e)) from None
        found = next((s for s in producers if s.current_txn_start_offset == args.start_offset), None)
        if found is None:
            raise ToolError("Could not find any open transactions starting at offset %d on partition %s"
                            % (args.start_offset, _tp(topic, partition)))
        spec = (found.producer_id, found.producer_epoch,
                found.coordinator_epoch if found.coordinator_epoch is not None else 0)
    try:
        admin.abort_transaction(topic, partition, *spec)
    except errors.KafkaError as e:
        text = "AbortTransactionSpec(topicPartition=%s, producerId=%d, producerEpoch=%d, coordinatorEpoch=%d)" \
            % ((_tp(topic, partition),) + spec)
        raise _fail("Failed to abort transaction " + text, _abort_message(text, spec, e)) from None
    return []


def _abort_message(spec_text, spec, e):
    """The Java admin's AbortTransactionHandler messages."""
    head = "WriteTxnMarkers request with " + spec_text
    code = getattr(e, "code", None)
    if code == errors.CLUSTER_AUTHORIZATION_FAILED:
        return head + " failed due to cluster authorization error"
    if code == errors.INVALID_PRODUCER_EPOCH:
        return head + " failed due an invalid producer epoch"
    if code == errors.TRANSACTION_COORDINATOR_FENCED:
        return head + " failed since the provided coordinator epoch %d has been fenced by the active coordinator" \
            % spec[2]
    if isinstance(code, int) and code > 0:
        return head + " failed due to unexpected error: " + errors.error_name(code)
    return _message(e)


def find_hanging(admin, args, now_ms):
    if args.topic is None and args.broker_id is None:
        raise ToolError("The `find-hanging` command requires either --topic or --broker-id to limit the scope of "
                        "the search")
    if args.partition is not None and args.topic is None:
        raise ToolError("The --partition argument requires --topic to be provided")
    max_timeout_ms = args.max_transaction_timeout * 60_000
    candidates = []   # (topic, partition, ProducerState)
    partitions = _partitions_to_search(admin, args)
    for i in range(0, len(partitions), MAX_BATCH_SIZE):
        batch = partitions[i:i + MAX_BATCH_SIZE]
        try:
            states = admin.describe_producers(batch, args.broker_id)
        except errors.KafkaError as e:
            raise _fail("Failed to describe producers for %d partitions on broker %s"
                        % (len(batch), "Optional[%d]" % args.broker_id if args.broker_id is not None
                           else "Optional.empty"), _message(e)) from None
        now = now_ms()
        for (t, p), producers in states.items():
            for s in producers:
                if s.current_txn_start_offset is not None and now - s.last_timestamp > max_timeout_ms:
                    candidates.append((t, p, s))
    hanging = _hanging(admin, candidates) if candidates else []
    now = now_ms()
    rows = [[t, str(p), str(s.producer_id), str(s.producer_epoch),
             str(s.coordinator_epoch if s.coordinator_epoch is not None else -1), str(s.current_txn_start_offset),
             str(s.last_timestamp), str((now - s.last_timestamp) // 60_000)]
            for t, p, s in sorted(hanging, key=lambda c: (c[0], c[1], c[2].producer_id))]
    return pretty_table(HANGING_HEADERS, rows)


def _partitions_to_search(admin, args):
    if args.topic is not None and args.partition is not None:
        return [(args.topic, args.partition)]
    # Kafka lists with ListTopicsOptions defaults: internal topics (__consumer_offsets, ...) are not searched.
    topics = [args.topic] if args.topic is not None else admin.list_topics(include_internal=False)
    out = []
    for i in range(0, len(topics), MAX_BATCH_SIZE):
        batch = topics[i:i + MAX_BATCH_SIZE]
        meta = admin.metadata(batch)
        for t in meta["topics"]:
            if t["error_code"]:
                raise _fail("Failed to describe %d topics" % len(batch),
                            "%s: topic %s" % (errors.error_name(t["error_code"]), t["name"]))
            for p in sorted(t["partitions"], key=lambda x: x["partition_index"]):
                if args.broker_id is None or args.broker_id in p["replica_nodes"]:
                    out.append((t["name"], p["partition_index"]))
    return out


def _hanging(admin, candidates):
    """The candidates whose transaction the coordinator does not know (Kafka's filterHangingTransactions)."""
    pids = sorted({s.producer_id for _, _, s in candidates})
    try:
        listings = admin.list_transactions(producer_id_filters=pids)
    except errors.KafkaError as e:
        raise _fail("Failed to list transactions for %d producers" % len(pids), _message(e)) from None
    tid_of = {x.producer_id: x.transactional_id for ls in listings.values() for x in ls if x.producer_id in pids}
    try:
        descriptions = admin.describe_transactions(sorted(set(tid_of.values())), missing_ok=True)
    except errors.KafkaError as e:
        raise _fail("Failed to describe %d transactions" % len(set(tid_of.values())), _message(e)) from None
    out = []
    for t, p, s in candidates:
        tid = tid_of.get(s.producer_id)
        d = descriptions.get(tid) if tid is not None else None
        if d is None or (t, p) not in d.topic_partitions:
            out.append((t, p, s))
    return out


_RUN = {"list": list_transactions, "describe": describe_transaction, "describe-producers": describe_producers,
        "abort": abort, "find-hanging": find_hanging}


def main(argv=None, out=None, now_ms=None):
    """Run the tool; ``out`` (stdout) receives the table, ``now_ms`` (the wall clock) is what durations count
    from (tests pass both)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    out = sys.stdout if out is None else out
    now_ms = now_ms or (lambda: int(time.time() * 1000))
    try:
        args = parse_args(argv)
    except UsageError as e:
        usage_error(parser(), e)
        return 1
    try:
        with AdminClient(args.bootstrap_server, client_id="kbroker-transactions") as admin:
            lines = _RUN[args.command](admin, args, now_ms)
    except ToolError as e:
        print(str(e), file=sys.stderr)
        return 1
    except (errors.KafkaError, OSError, ValueError) as e:
        print("%s.%s" % (_message(e), DEBUG_HINT), file=sys.stderr)
        return 1
    for line in lines:
        print(line, file=out)
    return 0
