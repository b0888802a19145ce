"""kbroker-admin streams-application-reset: Kafka's ``kafka-streams-application-reset.sh`` (StreamsResetter, 4.x).

Resets a Kafka Streams application (Apache Kafka's or kbroker.streams') so it reprocesses its input from scratch:

1. refuses while the group ``--application-id`` has members (``--force`` removes them with LeaveGroup v3+, as
   Kafka's removeMembersFromConsumerGroup does): a running instance would commit over the reset;
2. commits new offsets for the partitions of ``--input-topics`` (default: each partition's log start offset;
   ``--to-earliest``, ``--to-latest``, ``--to-offset N``, ``--shift-by N``, ``--to-datetime``, ``--by-duration``,
   ``--from-file``) and of the deprecated ``--intermediate-topics`` (their log end: what the application wrote to
   them is not read again);
3. deletes the application's internal topics: every topic named ``<application.id>-...`` that ends with
   ``-changelog``, ``-repartition``, ``-subscription-registration-topic``, ``-subscription-response-topic`` or is a
   foreign-key-join topic (Kafka's matchesInternalTopicFormat), input and intermediate topics excepted (KAFKA-7930);
   ``--internal-topics`` narrows that to a subset (anything outside it is refused).

Output topics and the instances' local state (``state.dir``) are not touched: ``KafkaStreams.cleanup()`` (or
deleting ``<state.dir>/<application.id>``) is the user's step, as in Kafka.

Output (stdout), line for line as Kafka's tool prints it, e.g. for ``--input-topics in --dry-run``::

    ----Dry run displays the actions which will be performed when running Streams Reset Tool----
    Reset-offsets for input topics [in]
    Following input topics offsets will be reset to (for consumer group wc)
    Topic: in Partition: 0 Offset: 0
    Done.
    Deleting inferred internal topics [wc-KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog, ...]
    Done.

Partitions are listed in (topic, partition) order and inferred topics sorted (Kafka iterates HashSets: an
unspecified order); otherwise the lines are those of Kafka 4.4.0's tool (tests/integration/test_streams_examples.py
runs both). A topic of ``--input-topics`` that does not exist is listed after ``Following input topics are not
found, skipping them`` and makes the exit status 1; the rest still runs. Errors print ``ERROR: <Java exception
class>: <message>`` on stderr (what Kafka's ``"ERROR: " + e`` prints) and exit 1; a bad command line prints the
problem and the usage on stderr and exits 1 (Kafka's CommandLineUtils.printUsageAndExit).

The pure parts -- argument checks (``parse_args``), the offsets (``reset_offsets``, ``clamp``), the internal topics
(``inferred_internal_topics``, ``topics_to_delete``), the time formats (``parse_datetime``, ``parse_duration``) --
take no broker and are unit-tested (tests/unit/test_streams_reset.py); ``run`` does the I/O through
kbroker.client.admin.AdminClient.
"""
import datetime as _dt
import re
import sys
import time

from kbroker.client.admin import AdminClient
from kbroker.errors import KafkaError

from .common import ArgParser, CommandError, UsageError, usage_error

EARLIEST, LATEST = -2, -1
USAGE = ("This tool helps to quickly reset an application in order to reprocess its data from scratch.\n"
         "* This tool resets offsets of input topics to the earliest available offset (by default), or to a specific "
         "defined position.\n"
         "* This tool deletes the internal topics that were created by Kafka Streams (topics starting with "
         "\"<application.id>-\").\n"
         "* This tool will not delete output topics nor clean up the local state of the application instances "
         "(KafkaStreams.cleanup(), or delete <state.dir>/<application.id>).\n"
         "*** Warning! This tool makes irreversible changes to your application. Run it once with \"--dry-run\" "
         "to preview them.")
# Kafka's order of the reset options: checkInvalidArgs runs with each as "used" in turn, so the message names
# the first one given (in this order) and the first other one given.
RESET_OPTIONS = ("to_offset", "to_datetime", "by_duration", "to_earliest", "to_latest", "from_file", "shift_by")
INTERNAL_SUFFIXES = ("-changelog", "-repartition", "-subscription-registration-topic",
                     "-subscription-response-topic")
_FK_TOPIC = re.compile(r".+-KTABLE-FK-JOIN-SUBSCRIPTION-(REGISTRATION|RESPONSE)-\d+-topic")
MAX_REMOVE_MEMBERS_RETRIES = 3       # Kafka's MAX_REMOVE_MEMBERS_FROM_CONSUMER_GROUP_RETRIES
UNKNOWN_MEMBER_ID = 25


class JavaError(Exception):
    """A failure Kafka's tool reports as ``ERROR: <java class>: <message>``."""

    def __init__(self, java_class, message):
        super().__init__(message)
        self.java_class = java_class

    def __str__(self):
        return "%s: %s" % (self.java_class, self.args[0])


# ---------------------------------------------------------------------------------------------- arguments

def _csv(value):
    return [t for t in value.split(",") if t]


def parser():
    p = ArgParser(prog="kbroker-admin streams-application-reset", description=USAGE,
                  formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    p.add_argument("--application-id", metavar="id", help="REQUIRED: The Kafka Streams application ID "
                   "(application.id).")
    p.add_argument("--bootstrap-server", metavar="server to connect to", default="localhost:9092",
                   help="The server(s) to connect to, HOST1:PORT1,HOST2:PORT2 (default: localhost:9092)")
    p.add_argument("--input-topics", metavar="list", action="append", type=_csv, default=[],
                   help="Comma-separated list of user input topics: their offsets are reset (earliest by default)")
    p.add_argument("--intermediate-topics", metavar="list", action="append", type=_csv, default=None,
                   help="[deprecated] Comma-separated list of intermediate user topics: offsets set to their end")
    p.add_argument("--internal-topics", metavar="list", action="append", type=_csv, default=[],
                   help="Comma-separated list of internal topics to delete: a subset of those the tool infers")
    p.add_argument("--to-offset", type=int, metavar="N", help="Reset offsets to a specific offset.")
    p.add_argument("--to-datetime", metavar="YYYY-MM-DDThh:mm:ss.sss",
                   help="Reset offsets to offset from datetime (local time unless a zone Z/+hh:mm is given)")
    p.add_argument("--by-duration", metavar="PnDTnHnMnS",
                   help="Reset offsets to offset by duration from current timestamp.")
    p.add_argument("--to-earliest", action="store_true", help="Reset offsets to earliest offset.")
    p.add_argument("--to-latest", action="store_true", help="Reset offsets to latest offset.")
    p.add_argument("--from-file", metavar="file", help="Reset offsets to values defined in CSV file "
                   "(lines TOPIC,PARTITION,OFFSET).")
    p.add_argument("--shift-by", type=int, metavar="number-of-offsets",
                   help="Reset offsets shifting current offset by 'n', where 'n' can be positive or negative")
    p.add_argument("--config-file", metavar="file name", help="(DEPRECATED) use --command-config")
    p.add_argument("--force", action="store_true", help="Force the removal of members of the consumer group.")
    p.add_argument("--dry-run", action="store_true", help="Display the actions that would be performed without "
                   "executing the reset commands.")
    return p


def parse_args(argv):
    """The checked options (``scenario``: one of RESET_OPTIONS or None; topic lists flattened; ``datetime_ms``,
    ``duration_ms`` parsed); raises UsageError with Kafka's messages."""
    args = parser().parse_args(argv)
    if not args.application_id:
        raise UsageError("Missing required option(s) [application-id]")
    given = [o for o in RESET_OPTIONS if getattr(args, o) not in (None, False)]
    if len(given) > 1:
        raise UsageError('Option "[%s]" can\'t be used with option "[%s]"'
                         % (given[0].replace("_", "-"), given[1].replace("_", "-")))
    args.scenario = given[0] if given else None
    args.intermediate_given = args.intermediate_topics is not None
    for name in ("input_topics", "intermediate_topics", "internal_topics"):
        setattr(args, name, [t for chunk in (getattr(args, name) or []) for t in chunk])
    args.datetime_ms = parse_datetime(args.to_datetime) if args.to_datetime is not None else None
    args.duration_ms = parse_duration(args.by_duration) if args.by_duration is not None else None
    return args


_DATETIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})(Z|[+-]\d{2}(?::?\d{2})?)?")


def parse_datetime(s, local_tz=None):
    """Kafka's Utils.getDateTime: ``YYYY-MM-DDThh:mm:ss.sss`` with an optional zone (``Z``, ``+hh``, ``+hhmm``,
    ``+hh:mm``; none = the local time zone, as Java's default) -> epoch ms. UsageError as Kafka's ParseException."""
    if "T" not in s:
        raise UsageError("Error parsing timestamp. It does not contain a 'T' according to ISO8601 format: %s" % s)
    m = _DATETIME.fullmatch(s)
    if m is None:
        raise UsageError('Unparseable date: "%s"' % s)
    year, month, day, hour, minute, second, millis = (int(x) for x in m.groups()[:7])
    zone = m.group(8)
    if zone is None:
        tz = local_tz
    elif zone == "Z":
        tz = _dt.timezone.utc
    else:
        digits = zone[1:].replace(":", "")
        hh, mm = int(digits[:2]), int(digits[2:] or 0)
        if hh > 23 or mm > 59:
            raise UsageError('Unparseable date: "%s"' % s)
        tz = _dt.timezone((1 if zone[0] == "+" else -1) * _dt.timedelta(hours=hh, minutes=mm))
    try:
        # Java parses strictly (setLenient(false)): 2021-02-30 or 25:00 are errors, not rolled over.
        t = _dt.datetime(year, month, day, hour, minute, second, millis * 1000, tzinfo=tz)
    except ValueError:
        raise UsageError('Unparseable date: "%s"' % s) from None
    if tz is None:
        t = t.astimezone()              # naive = local time (Java's TimeZone.getDefault())
    return int(t.timestamp() * 1000 + (0.5 if t.timestamp() >= 0 else -0.5))


_DURATION = re.compile(r"([-+]?)P(?:([-+]?\d+)D)?"
                       r"(T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?", re.IGNORECASE)


def parse_duration(s):
    """Java's Duration.parse (ISO-8601 ``PnDTnHnMn.nS``; signs allowed per part and in front) -> milliseconds
    (truncated toward zero, as Duration.toMillis). UsageError "Text cannot be parsed to a Duration" otherwise."""
    m = _DURATION.fullmatch(s)
    if m is None or (m.group(3) is not None and m.group(3).upper() == "T") or not any(
            m.group(i) for i in (2, 4, 5, 6)):
        raise UsageError("Text cannot be parsed to a Duration: %s" % s)
    days, hours, minutes, secs = (int(m.group(i) or 0) for i in (2, 4, 5, 6))
    frac = m.group(7) or ""
    nanos = int((frac + "000000000")[:9]) if frac else 0
    if m.group(6) and m.group(6).startswith("-"):
        nanos = -nanos
    total_ns = ((days * 24 + hours) * 60 + minutes) * 60 * 10**9 + secs * 10**9 + nanos
    if m.group(1) == "-":
        total_ns = -total_ns
    return int(total_ns / 10**6)


def parse_reset_plan(text):
    """A ``--from-file`` CSV (``TOPIC,PARTITION,OFFSET`` per line) -> {(topic, partition): offset}; JavaError
    (ParseException) as Kafka's parseResetPlan."""
    if not text:
        raise JavaError("java.text.ParseException", "Error parsing reset plan CSV file. It is empty,")
    out = {}
    for line in text.split("\n"):
        parts = line.split(",")
        if len(parts) != 3:
            raise JavaError("java.text.ParseException",
                            "Reset plan CSV file is not following the format `TOPIC,PARTITION,OFFSET`.")
        try:
            out[(parts[0], int(parts[1]))] = int(parts[2])
        except ValueError as e:
            raise JavaError("java.lang.NumberFormatException", str(e)) from None
    return out


# ---------------------------------------------------------------------------------------------- the plan

def matches_internal_topic_format(name):
    """Kafka's StreamsResetter.matchesInternalTopicFormat."""
    return name.endswith(INTERNAL_SUFFIXES) or _FK_TOPIC.fullmatch(name) is not None


def inferred_internal_topics(app_id, all_topics, input_topics=(), intermediate_topics=()):
    """The topics the tool deletes by default, in ``all_topics``' order: ``<app_id>-...`` with an internal
    suffix, except topics given as input or intermediate (KAFKA-7930)."""
    skip = set(input_topics) | set(intermediate_topics)
    return [t for t in all_topics if t not in skip and t.startswith(app_id + "-") and matches_internal_topic_format(t)]


def topics_to_delete(app_id, all_topics, input_topics, intermediate_topics, internal_topics):
    """-> (topics, the header line). ``internal_topics`` (``--internal-topics``) must be a subset of the inferred
    ones (JavaError IllegalArgumentException with Kafka's message otherwise)."""
    inferred = inferred_internal_topics(app_id, all_topics, input_topics, intermediate_topics)
    if internal_topics:
        if not set(internal_topics) <= set(inferred):
            raise JavaError("java.lang.IllegalArgumentException",
                            "Invalid topic specified in the --internal-topics option. Ensure that the topics "
                            "specified are all internal topics. Do a dry run without the --internal-topics option "
                            "to see the list of all internal topics that can be deleted.")
        return list(internal_topics), "Deleting specified internal topics %s" % java_list(internal_topics)
    return inferred, "Deleting inferred internal topics %s" % java_list(inferred)


def java_list(items):
    """Java's List.toString: ``[a, b]``."""
    return "[%s]" % ", ".join(str(x) for x in items)


def clamp(offsets, earliest, latest, out):
    """Kafka's checkOffsetRange: each offset into [log start, log end], printing its notes on ``out`` (a list)."""
    valid = {}
    for tp, off in offsets.items():
        end, begin = latest[tp], earliest[tp]
        if off < end:
            if off > begin:
                valid[tp] = off
            else:
                out.append("New offset (%d) is lower than earliest offset. Value will be set to %d" % (off, begin))
                valid[tp] = begin
        else:
            out.append("New offset (%d) is higher than latest offset. Value will be set to %d" % (off, end))
            valid[tp] = end
    return valid


def reset_offsets(args, tps, earliest, latest, committed, by_time=None, plan=None, out=None):
    """New offsets of the input partitions ``tps`` for ``args.scenario`` -> {tp: offset}; notes appended to ``out``.

    ``earliest``/``latest``: {tp: log start / end}; ``committed``: {tp: committed offset} (a partition without
    one starts at its log end, the Java consumer's auto.offset.reset=latest: what ``--shift-by`` counts from);
    ``by_time``: {tp: ListOffsets(timestamp) offset or None/-1} for --to-datetime/--by-duration; ``plan``: the
    parsed --from-file.
    """
    out = [] if out is None else out
    scenario = args.scenario
    if scenario in (None, "to_earliest"):
        return {tp: earliest[tp] for tp in tps}
    if scenario == "to_latest":
        return {tp: latest[tp] for tp in tps}
    if scenario == "to_offset":
        return clamp({tp: args.to_offset for tp in tps}, earliest, latest, out)
    if scenario == "shift_by":
        return clamp({tp: committed.get(tp, latest[tp]) + args.shift_by for tp in tps}, earliest, latest, out)
    if scenario == "from_file":
        missing = [tp for tp in tps if tp not in plan]
        if missing:
            raise JavaError("java.lang.NullPointerException", "the reset plan has no offset for %s-%d" % missing[0])
        return clamp({tp: plan[tp] for tp in tps}, earliest, latest, out)
    # to_datetime / by_duration
    new = {}
    for tp in tps:
        off = (by_time or {}).get(tp)
        if off is None or off < 0:
            new[tp] = latest[tp]
            out.append("Partition %d from topic %s is empty, without a committed record. Falling back to latest "
                       "known offset." % (tp[1], tp[0]))
        else:
            new[tp] = off
    return new


def format_member(m):
    """A member as Kafka 4.4's MemberDescription.toString prints a classic group's member."""
    parts = ",".join("%s-%d" % tp for tp in sorted(m.assignment or []))
    return ("(memberId=%s, groupInstanceId=%s, rackId=null, clientId=%s, host=%s, assignment=(topicPartitions=%s), "
            "targetAssignment=Optional.empty, memberEpoch=Optional.empty, upgraded=Optional.empty)"
            % (m.member_id, m.group_instance_id if m.group_instance_id is not None else "null", m.client_id,
               m.client_host, parts))


# ---------------------------------------------------------------------------------------------- I/O

def remove_active_members(admin, group, force, say):
    """Kafka's maybeDeleteActiveConsumers: JavaError while members remain (unless ``force``: LeaveGroup v3+ for
    all of them, retried up to 3 times on UNKNOWN_MEMBER_ID -- a member that left by itself)."""
    retries = 0
    while True:
        desc = admin.describe_groups([group])[group]
        if not desc.members or desc.state == "Dead":
            return
        if not force:
            raise JavaError("java.lang.IllegalStateException",
                            "Consumer group '%s' is still active and has following members: %s. Make sure to stop "
                            "all running application instances before running the reset tool. You can use option "
                            "'--force' to remove active members from the group."
                            % (group, java_list(format_member(m) for m in desc.members)))
        say("Force deleting all active members in the group: " + group)
        coord = admin.find_coordinator(group)
        conn = admin.cluster.connection(coord.node_id)
        body = {"group_id": group, "member_id": "",
                "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                             "reason": "member was removed by an admin: streams-application-reset --force"}
                            for m in desc.members]}
        resp = conn.request("LeaveGroup", body)
        codes = [resp["error_code"]] + [m["error_code"] for m in resp.get("members") or []]
        bad = [c for c in codes if c]
        if not bad:
            return
        if all(c == UNKNOWN_MEMBER_ID for c in bad) and retries < MAX_REMOVE_MEMBERS_RETRIES:
            retries += 1
            continue
        raise JavaError("org.apache.kafka.common.KafkaException",
                        "removing the members of group %s failed with error code %d" % (group, bad[0]))


def _partitions(admin, topics):
    out = []
    for t in topics:
        out += [(t, p) for p in admin.cluster.partitions_for(t, refresh=True)]
    return sorted(out)


def reset_topic_offsets(admin, args, all_topics, say):
    """Step 2 (Kafka's maybeResetInputAndSeekToEndIntermediateTopicOffsets) -> exit status (1: a topic missing)."""
    inputs, intermediates = args.input_topics, args.intermediate_topics
    if args.intermediate_given:
        say("WARN: `--intermediate-topics` is deprecated and will be removed in a future release")
    if not inputs and not intermediates:
        say("No input or intermediate topics specified. Skipping seek.")
        return 0
    if inputs:
        say("Reset-offsets for input topics " + java_list(inputs))
    if intermediates:
        say("Seek-to-end for intermediate topics " + java_list(intermediates))
    status = 0
    missing_in = [t for t in inputs if t not in all_topics]
    missing_mid = [t for t in intermediates if t not in all_topics]
    if missing_in:
        say("Following input topics are not found, skipping them")
        for t in missing_in:
            say("Topic: " + t)
        status = 1
    if missing_mid:
        say("Following intermediate topics are not found, skipping them")
        for t in missing_mid:
            say("Topic:" + t)                           # sic: Kafka prints no space here
        status = 1
    in_tps = _partitions(admin, [t for t in dict.fromkeys(inputs) if t in all_topics])
    mid_tps = _partitions(admin, [t for t in dict.fromkeys(intermediates) if t in all_topics and t not in inputs])
    if not in_tps and not mid_tps:
        return status
    group = args.application_id
    new = {}
    if in_tps:
        say("Following input topics offsets will be reset to (for consumer group %s)" % group)
        earliest = {tp: o for tp, (o, _) in admin.partition_offsets(in_tps, EARLIEST).items()}
        latest = {tp: o for tp, (o, _) in admin.partition_offsets(in_tps, LATEST).items()}
        committed = admin.list_group_offsets(group, in_tps)
        by_time = plan = None
        if args.scenario in ("to_datetime", "by_duration"):
            ts = args.datetime_ms if args.scenario == "to_datetime" else int(time.time() * 1000) - args.duration_ms
            by_time = {tp: o for tp, (o, _) in admin.partition_offsets(in_tps, ts).items()}
        elif args.scenario == "from_file":
            from .common import read_file
            plan = parse_reset_plan(read_file(args.from_file))
        notes = []
        offsets = reset_offsets(args, in_tps, earliest, latest, committed, by_time, plan, notes)
        for line in notes:
            say(line)
        for tp in in_tps:
            say("Topic: %s Partition: %d Offset: %d" % (tp[0], tp[1], offsets[tp]))
        new.update(offsets)
    if mid_tps:
        say("Following intermediate topics offsets will be reset to end (for consumer group %s)" % group)
        for tp in mid_tps:
            say("Topic: " + tp[0])
        new.update({tp: o for tp, (o, _) in admin.partition_offsets(mid_tps, LATEST).items()})
    if not args.dry_run:
        admin.alter_group_offsets(group, new)
    say("Done.")
    return status


def delete_internal_topics(admin, args, all_topics, say):
    """Step 3 (Kafka's maybeDeleteInternalTopics) -> 0; JavaError when a deletion fails."""
    topics, header = topics_to_delete(args.application_id, all_topics, args.input_topics, args.intermediate_topics,
                                      args.internal_topics)
    say(header)
    if not args.dry_run and topics:
        try:
            admin.delete_topics(topics)
        except KafkaError as e:      # the answer's first failed topic (kbroker.client raises on it)
            print("ERROR: deleting topics %s: %s" % (java_list(topics), getattr(e, "message", None) or e),
                  file=sys.stderr)
            raise JavaError("java.lang.RuntimeException", "Encountered an error deleting one or more topics") from None
    say("Done.")
    return 0


def run(args, admin_factory=AdminClient, say=print):
    """The reset against the cluster -> exit status."""
    with admin_factory(args.bootstrap_server) as admin:
        remove_active_members(admin, args.application_id, args.force, say)
        all_topics = admin.list_topics(include_internal=True)
        if args.dry_run:
            say("----Dry run displays the actions which will be performed when running Streams Reset Tool----")
        status = reset_topic_offsets(admin, args, all_topics, say)
        return status | delete_internal_topics(admin, args, all_topics, say)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parse_args(argv)
    except UsageError as e:
        usage_error(parser(), e)
        return 1
    except SystemExit as e:          # --help
        return e.code or 0
    try:
        if args.config_file is not None:
            print("Option --config-file has been deprecated and will be removed in a future version. "
                  "Use --command-config instead.")
            from kbroker.client import client_config
            client_config.install(args.config_file)
        return run(args)
    except JavaError as e:
        print("ERROR: %s" % e, file=sys.stderr)
    except (CommandError, KafkaError, OSError, ValueError) as e:
        print("ERROR: %s: %s" % (type(e).__name__, getattr(e, "message", None) or e), file=sys.stderr)
    return 1
