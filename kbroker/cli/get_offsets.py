"""``kbroker-admin get-offsets``: Kafka's kafka-get-offsets.sh (``GetOffsetShell``): ListOffsets (2) to each
partition's leader.

    kbroker-admin get-offsets --bootstrap-server H:P [--topic REGEX] [--partitions 0,1,3-5]
        [--topic-partitions t1:0-2,t2,t3:4] [--time -1|-2|-3|<ms>|latest|earliest|max-timestamp]
        [--exclude-internal-topics] [--command-config FILE]

``--topic`` is a regular expression matching whole topic names (all topics without it), ``--partitions`` a comma
list of ids and ranges; ``--topic-partitions`` a comma list of ``<topic regex>[:<partitions>]`` (not with
``--topic``/``--partitions``). ``--time`` (default -1): -1/latest the log end (high watermark), -2/earliest the log
start offset, -3/max-timestamp the record with the largest timestamp, or a timestamp in ms (the first record at or
after it). ``--broker-list`` is accepted for ``--bootstrap-server``, as Kafka 3.x still does.

Output (stdout): one ``topic:partition:offset`` line per partition, sorted by topic then partition; -1 when there is no
such record (a timestamp after the last record), as Kafka prints it. A partition that fails (no leader, an error code)
is left out and ``Skip getting offsets for topic-partition t-0 due to error: <exception>`` goes to stderr. No topic
partition matching: ``Error occurred: Could not match any topic-partitions with the specified filters`` on stderr,
exit 1. Usage errors: the problem and the usage on stderr, exit 1.
"""
import re
import sys

from kbroker import errors
from kbroker.client.cluster import Cluster

from .common import ArgParser, CommandError, UsageError, usage_error
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
    p.add_argument("--time", default="-1", help="timestamp of the offsets: -1 or latest, -2 or earliest, -3 or "
                                                "max-timestamp, or a timestamp in ms (default -1)")
    p.add_argument("--exclude-internal-topics", action="store_true", help="leave out internal topics")
    return p


def parse_partitions(text):
    """``"0,1,3-5"`` -> a predicate over partition ids; UsageError naming the bad part."""
    ranges = []
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d*))?", part)
        if not m:
            raise UsageError("Invalid partition or range: %r" % part)
        lo = int(m.group(1))
        hi = lo if m.group(2) is None else (int(m.group(2)) if m.group(2) else None)
        if hi is not None and hi < lo:
            raise UsageError("Invalid partition range: %r" % part)
        ranges.append((lo, hi))
    return lambda p: any(lo <= p and (hi is None or p <= hi) for lo, hi in ranges)


def parse_time(text):
    if text in TIME_NAMES:
        return TIME_NAMES[text]
    try:
        value = int(text)
    except ValueError:
        raise UsageError("Malformed time argument %s. Please use -1 or latest / -2 or earliest / -3 or "
                         "max-timestamp, or a specified long format timestamp" % text) from None
    if value < -3:
        raise UsageError("Unsupported time argument %s" % text)
    return value


def filters(opts):
    """[(compiled topic regex, partition predicate)] from the options."""
    if opts.topic_partitions is not None:
        if opts.topic is not None or opts.partitions is not None:
            raise UsageError("--topic-partitions cannot be used with --topic or --partitions")
        out = []
        for item in opts.topic_partitions.split(","):
            topic, sep, parts = item.partition(":")
            out.append((_regex(topic or ".*"), parse_partitions(parts) if sep else (lambda p: True)))
        return out
    parts = parse_partitions(opts.partitions) if opts.partitions else (lambda p: True)
    return [(_regex(opts.topic or ".*"), parts)]


def _regex(text):
    try:
        return re.compile(text)
    except re.error as e:
        raise UsageError("Invalid topic regular expression %r: %s" % (text, e)) from None


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
                else:
                    out[(t["name"], pr["partition_index"])] = pr["offset"]
    return out


def main(argv):
    p = parser()
    try:
        opts = p.parse_args(argv)
        bootstrap = opts.bootstrap_server or opts.broker_list
        if not bootstrap:
            raise UsageError("Missing required option(s) [bootstrap-server]")
        flts = filters(opts)
        timestamp = parse_time(opts.time)
    except UsageError as e:
        usage_error(p, e)
        return 1
    except SystemExit as e:            # --help
        return e.code or 0
    try:
        with Cluster(bootstrap) as cluster:
            offsets = get_offsets(cluster, flts, timestamp, opts.exclude_internal_topics, sys.stderr)
    except (CommandError, errors.KafkaError, OSError) as e:
        print("Error occurred: %s" % (getattr(e, "message", None) or e), file=sys.stderr)
        return 1
    for (t, part), offset in sorted(offsets.items()):
        print("%s:%d:%d" % (t, part, offset))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
