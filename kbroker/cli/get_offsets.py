"""``kbroker-admin get-offsets``: Kafka's kafka-get-offsets.sh (``GetOffsetShell``): ListOffsets (2) to each
partition's leader.

    kbroker-admin get-offsets --bootstrap-server H:P [--topic REGEX] [--partitions 0,1,3]
        [--topic-partitions t1:0-2,t2,t3:4-,:-3] [--time -1|-2|-3|<ms>|latest|earliest|max-timestamp]
        [--exclude-internal-topics] [--command-config FILE]

Kafka 3.9's GetOffsetShell rules: ``--topic`` is a regular expression matching whole topic names (commas mean "or";
all topics without it), ``--partitions`` a comma list of partition ids; ``--topic-partitions`` a comma list of
``<topic regex>[:<partition pattern>]``, the pattern ``N``, ``N-M`` (M exclusive), ``N-`` or ``-M`` (not with
``--topic``/``--partitions``). ``--time`` (default latest): -1/latest the log end (high watermark), -2/earliest the
log start offset, -3/max-timestamp the record with the largest timestamp, or a timestamp in ms (the first record at or
after it). ``--broker-list`` stands in for ``--bootstrap-server``.

Output (stdout): one ``topic:partition:offset`` line per partition in the order of the ``topic-partition`` strings
(Kafka's TreeMap over ``TopicPartition.toString``: ``t-10`` before ``t-2``); a partition without such a record (a
timestamp after the last one: offset -1) prints no line. A partition that fails is left out and ``Skip getting offsets
for topic-partition t-0 due to error: <exception>`` goes to stderr. Command errors print ``Error occurred: <message>``
on stderr, exit 1: ``Could not match any topic-partitions with the specified filters``, ``--topic-partitions cannot be
used with --topic or --partitions``, ``Malformed time argument X. Please use ...``, ``--partitions expects a comma
separated list of numeric partition ids, but received: X``; a missing ``--bootstrap-server``: the problem and the
usage.
"""
import re
import sys

from kbroker import errors
from kbroker.client.cluster import Cluster

from .common import ArgParser, CommandError, parse_command_line, usage_error
from .java_errors import exception_text

TIME_NAMES = {"latest": -1, "earliest": -2, "max-timestamp": -3}


def parser():
    p = ArgParser(prog="kbroker-admin get-offsets", description="Get the offsets of topic partitions "
                                                                 "(kafka-get-offsets.sh).")
    p.add_argument("--bootstrap-server", help="REQUIRED: the server(s) to connect to")
    p.add_argument("--broker-list", help="DEPRECATED, use --bootstrap-server instead")
    p.add_argument("--topic", help="the topic(s) to get the offsets for: a regular expression (all topics if "
                                   "not given)")
    p.add_argument("--partitions", help="comma separated list of partition ids or ranges (0,1,3-5); all if not "
                                        "given")
    p.add_argument("--topic-partitions", help="comma separated list of <topic regex>[:<partition ids or ranges>]")
    p.add_argument("--time", default="latest", help="timestamp of the offsets: -1 or latest, -2 or earliest, -3 or "
                                                    "max-timestamp, or a timestamp in ms (default latest)")
    p.add_argument("--exclude-internal-topics", action="store_true", help="leave out internal topics")
    return p


_RULE = re.compile(r"([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?")


def parse_partition_ids(text):
    """``--partitions``: ``"0,1,3"`` -> a predicate (every partition when empty); CommandError otherwise."""
    if not text:
        return lambda p: True
    try:
        ids = {int(x) for x in text.split(",")}
    except ValueError:
        raise CommandError("--partitions expects a comma separated list of numeric partition ids, but received: %s"
                           % text) from None
    return ids.__contains__


def parse_rule(spec):
    """One ``--topic-partitions`` item -> (topic regex, partition predicate) (Kafka's parseRuleSpec)."""
    m = _RULE.fullmatch(spec)
    if m is None:
        raise CommandError("Invalid rule specification: %s" % spec)
    topic, single, lower, upper = m.groups()
    rx = _regex(topic or ".*")
    if single:
        n = int(single)
        return rx, lambda p: p == n
    if lower or upper:
        lo = int(lower) if lower else 0
        hi = int(upper) if upper else None
        return rx, lambda p: p >= lo and (hi is None or p < hi)
    return rx, lambda p: True


def parse_time(text):
    """Kafka's parseOffsetSpec: latest / earliest / max-timestamp, or a long (-1, -2, -3 the same three)."""
    if text in TIME_NAMES:
        return TIME_NAMES[text]
    try:
        return int(text)
    except ValueError:
        raise CommandError("Malformed time argument %s. Please use -1 or latest / -2 or earliest / -3 or "
                           "max-timestamp, or a specified long format timestamp" % text) from None


def filters(opts):
    """[(compiled topic regex, partition predicate)] from the options."""
    if opts.topic_partitions is not None:
        if opts.topic is not None or opts.partitions is not None:
            raise CommandError("--topic-partitions cannot be used with --topic or --partitions")
        return [parse_rule(item) for item in opts.topic_partitions.split(",")]
    return [(_regex((opts.topic or ".*").replace(",", "|")), parse_partition_ids(opts.partitions))]


def _regex(text):
    try:
        return re.compile(text)
    except re.error as e:
        raise CommandError("Invalid topic regular expression %r: %s" % (text, e)) from None


def get_offsets(cluster, flts, timestamp, exclude_internal, err):
    """{(topic, p): offset} for every matching partition that answered; the others reported on ``err``."""
    md = cluster.metadata(None)
    internal = {t["name"] for t in md["topics"] if t.get("is_internal")}
    chosen = sorted((t, p) for t, parts in cluster.topics.items() for p in parts
                    if not (exclude_internal and t in internal)
                    and any(rx.fullmatch(t) and pred(p) for rx, pred in flts))
    if not chosen:
        raise CommandError("Could not match any topic-partitions with the specified filters")
    by_leader = {}
    for t, p in chosen:
        leader = cluster.topics[t][p].leader
        if leader < 0:
            print("Skip getting offsets for topic-partition %s-%d due to error: %s"
                  % (t, p, exception_text(errors.LEADER_NOT_AVAILABLE)), file=err)
            continue
        by_leader.setdefault(leader, {}).setdefault(t, []).append(p)
    out = {}
    for leader, topics in sorted(by_leader.items()):
        resp = cluster.connection(leader).request("ListOffsets", {
            "replica_id": -1, "isolation_level": 0,
            "topics": [{"name": t, "partitions": [{"partition_index": p, "timestamp": timestamp,
                                                   "current_leader_epoch": -1, "max_num_offsets": 1} for p in ps]}
                       for t, ps in topics.items()]})
        for t in resp["topics"]:
            for pr in t["partitions"]:
                if pr["error_code"]:
                    print("Skip getting offsets for topic-partition %s-%d due to error: %s"
                          % (t["name"], pr["partition_index"], exception_text(pr["error_code"])), file=err)
                elif pr["offset"] != -1:                       # UNKNOWN_OFFSET: no line (Kafka's)
                    out[(t["name"], pr["partition_index"])] = pr["offset"]
    return out


def main(argv):
    p = parser()
    opts, code = parse_command_line(p, argv)
    if opts is None:
        return code
    bootstrap = opts.bootstrap_server or opts.broker_list
    if not bootstrap:
        usage_error(p, "Missing required argument \"[bootstrap-server]\"")
        return 1
    try:
        flts = filters(opts)
        timestamp = parse_time(opts.time)
        with Cluster(bootstrap) as cluster:
            offsets = get_offsets(cluster, flts, timestamp, opts.exclude_internal_topics, sys.stderr)
    except (CommandError, errors.KafkaError, OSError) as e:
        print("Error occurred: %s" % (getattr(e, "message", None) or e), file=sys.stderr)
        return 1
    for (t, part), offset in sorted(offsets.items(), key=lambda item: "%s-%d" % item[0]):
        print("%s:%d:%d" % (t, part, offset))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
