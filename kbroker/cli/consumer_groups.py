"""kbroker-admin consumer-groups: Kafka's kafka-consumer-groups.sh over kbroker's own blocking client.

    kbroker-admin consumer-groups --bootstrap-server H:P --list
    ... --describe (--group G [--group G2 ...] | --all-groups) [--members | --state | --offsets]
    ... --reset-offsets (--group G | --all-groups) (--topic T[:P,P] ... | --all-topics)
        (--to-earliest | --to-latest | --to-offset N | --shift-by N | --to-datetime YYYY-MM-DDTHH:mm:SS.sss)
        [--dry-run (default) | --execute]
    ... --delete (--group G ... | --all-groups)
    --output json (kbroker extension) prints one JSON document on stdout instead of the text.

Text layout: Kafka 3.7+ (the Java ``ConsumerGroupCommand``), byte for byte on stdout. Every table line is a Java
``%-Ns`` format (left-justified, padded to N, never truncated), columns joined by one space:

    --describe  (per group, groups in id order): "\\n" before the header and before every row, "\\n" after the last:
        GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
        widths: GROUP/TOPIC/CONSUMER-ID/HOST = max(15, longest value); PARTITION 10; the three offsets 15;
        CLIENT-ID unpadded. Missing values print "-" (no commit: CURRENT-OFFSET and LAG; unknown log end).
        LAG = LOG-END-OFFSET - CURRENT-OFFSET. Rows: members that own partitions, most partitions first (ties keep
        the broker's member order), each member's partitions by (topic, partition); then committed partitions no
        member owns, by (topic, partition), with "-" for CONSUMER-ID/HOST/CLIENT-ID.
    --members:  "\\n" + header + "\\n", then one row + "\\n" per member (broker order); every row ends with one
        space after the #PARTITIONS column (Kafka's "%-15s "). GROUP/CONSUMER-ID/HOST/CLIENT-ID = max(15, longest);
        a GROUP-INSTANCE-ID column (max(17, longest)) appears when any member has one.
    --state:    "\\n" + header, "\\n" + row, "\\n": GROUP (max(15, len)) COORDINATOR (ID) (max(25, len);
        "host:port  (id)", two spaces) ASSIGNMENT-STRATEGY (20; "-" when none) STATE (20) #MEMBERS.
    --reset-offsets: "\\n" + header GROUP TOPIC PARTITION NEW-OFFSET (GROUP/TOPIC max(15, longest), PARTITION 10),
        "\\n" + row per partition in (group, topic, partition) order, then "\\n". Printed for --dry-run and
        --execute alike.
    --list: one group id per line, sorted (groups of protocol type "consumer" or "" only, like Kafka).
    --delete: "Deletion of requested consumer groups ('a', 'b') was successful."

Group-state notes go to stderr exactly as Kafka writes them (leading blank line): "Consumer group 'G' has no
active members." (Empty: the committed offsets are still shown), "Warning: Consumer group 'G' is rebalancing.",
"Error: Consumer group 'G' does not exist." (Dead / unknown: nothing printed for it). Kafka prints its "Error: ..."
lines on stdout and exits 0; kbroker puts them on stderr and exits 1 so scripts can tell (stdout stays parseable).

Reset plans (``compute_reset_plan``, pure): --to-earliest/--to-latest take the log start / end offset;
--to-offset N and --shift-by N (committed + N; a partition without a commit is a usage error) are clamped to
[log start, log end], as Kafka's checkOffsetsRange does; --to-datetime takes ListOffsets(timestamp) -- the first
offset whose timestamp is >= the time -- and falls back to the log end ("Warn: Partition P from topic T is empty.
Falling back to latest known offset.") when no record is that new. The datetime is Kafka's Utils.getDateTime:
``yyyy-MM-ddTHH:mm:ss.SSS`` with an optional zone ``Z``, ``+hh``, ``+hhmm``, ``+hh:mm`` (UTC when absent).
Resets are only allowed while the group is Empty or Dead (unknown): otherwise "Error: Assignments can only be reset
if the group 'G' is inactive, but the current state is Stable." and nothing is committed for it. --execute commits
with OffsetCommit generation -1 and an empty member id (the coordinator rejects that for a group with members).
--all-topics means every partition the group has a committed offset for; --topic T means every partition of T.
"""
import datetime as _dt
import json
import re
import sys

from kbroker.client.admin import EARLIEST, LATEST, AdminClient
from kbroker.errors import KafkaError

from .common import ArgParser, CommandError, UsageError, usage_error

MISSING = "-"
ACTIONS = ("list", "describe", "delete", "reset_offsets")
SCENARIOS = ("to_earliest", "to_latest", "to_offset", "shift_by", "to_datetime")
REBALANCING = ("PreparingRebalance", "CompletingRebalance", "AwaitingSync", "Assigning", "Reconciling")

# Kafka's Errors descriptions for the codes a group tool reports per group (68 and 69 are not in kbroker.errors).
GROUP_ERRORS = {
    15: ("COORDINATOR_NOT_AVAILABLE", "The coordinator is not available."),
    16: ("NOT_COORDINATOR", "This is not the correct coordinator."),
    24: ("INVALID_GROUP_ID", "The configured groupId is invalid."),
    30: ("GROUP_AUTHORIZATION_FAILED", "Group authorization failed."),
    68: ("NON_EMPTY_GROUP", "The group is not empty."),
    69: ("GROUP_ID_NOT_FOUND", "The group id does not exist."),
}


def _opt(name):
    return "[%s]" % name.replace("_", "-")


# ---------------------------------------------------------------------------------------------- arguments

def parser():
    p = ArgParser(prog="kbroker-admin consumer-groups",
                  description="List all consumer groups, describe a consumer group, delete consumer group info, or "
                              "reset consumer group offsets.")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT", help="the broker(s) to connect to (required)")
    actions = p.add_argument_group("actions (exactly one)")
    actions.add_argument("--list", action="store_true", help="list all consumer groups")
    actions.add_argument("--describe", action="store_true", help="describe consumer group(s): offsets and lag")
    actions.add_argument("--delete", action="store_true", help="delete consumer group(s) (they must be empty)")
    actions.add_argument("--reset-offsets", action="store_true", help="reset the committed offsets of group(s)")
    p.add_argument("--group", action="append", default=[], help="the consumer group (repeatable)")
    p.add_argument("--all-groups", action="store_true", help="apply to every consumer group")
    p.add_argument("--members", action="store_true", help="describe: the members of the group")
    p.add_argument("--state", action="store_true", help="describe: the state of the group")
    p.add_argument("--offsets", action="store_true", help="describe: offsets and lag (the default)")
    p.add_argument("--topic", action="append", default=[], metavar="TOPIC[:P,P]",
                   help="reset: a topic, optionally with partitions (repeatable)")
    p.add_argument("--all-topics", action="store_true", help="reset: every partition the group has committed")
    p.add_argument("--to-earliest", action="store_true", help="reset to the log start offset")
    p.add_argument("--to-latest", action="store_true", help="reset to the log end offset")
    p.add_argument("--to-offset", type=int, metavar="N", help="reset to offset N (clamped to the log)")
    p.add_argument("--shift-by", type=int, metavar="N", help="move the committed offset by N (may be negative)")
    p.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
                   help="reset to the first offset at or after this time (UTC unless a zone is given)")
    p.add_argument("--dry-run", action="store_true", help="only print the plan (the default)")
    p.add_argument("--execute", action="store_true", help="commit the plan")
    p.add_argument("--timeout", type=int, default=5000, metavar="MS",
                   help="how long to keep retrying while the group coordinator is unavailable (default 5000)")
    p.add_argument("--output", choices=("text", "json"), default="text", help="output format (kbroker extension)")
    return p


def parse_args(argv):
    """Parse and check arguments (Kafka's ConsumerGroupCommandOptions.checkArgs rules); raises UsageError."""
    args = parser().parse_args(argv)
    if not args.bootstrap_server:
        raise UsageError('Missing required argument "[bootstrap-server]"')
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        raise UsageError("Command must include exactly one action: --list, --describe, --delete, --reset-offsets")
    args.action = action = chosen[0]

    def invalid(opt, allowed):
        if action not in allowed:
            raise UsageError('Option "%s" can\'t be used with option "%s"' % (_opt(opt), _opt(action)))

    if action in ("describe", "delete", "reset_offsets"):
        if not args.group and not args.all_groups:
            raise UsageError("Option %s takes one of these options: [all-groups], [group]" % _opt(action))
    if args.group and args.all_groups:
        raise UsageError('Option "[group]" can\'t be used with option "[all-groups]"')
    if args.group:
        invalid("group", ("describe", "delete", "reset_offsets"))
    if args.all_groups:
        invalid("all_groups", ("describe", "delete", "reset_offsets"))
    for opt in ("members", "state", "offsets"):
        if getattr(args, opt):
            invalid(opt, ("describe",))
    if sum(map(bool, (args.members, args.offsets, args.state))) > 1:
        raise UsageError("Option [describe] takes at most one of these options: [members], [offsets], [state]")
    if args.topic and action == "delete":
        raise UsageError("The consumer does not support topic-specific offset deletion from a consumer group.")
    for opt in ("topic", "all_topics", "dry_run", "execute") + SCENARIOS:
        value = getattr(args, opt)
        if value not in (None, False, []):
            invalid(opt, ("reset_offsets",))

    args.scenario = None
    if action == "reset_offsets":
        if args.dry_run and args.execute:
            raise UsageError("Option [reset-offsets] only accepts one of [execute] and [dry-run]")
        used = [s for s in SCENARIOS if getattr(args, s) not in (None, False)]
        if not used:
            raise UsageError("Option [reset-offsets] requires one of the following scenarios: "
                             + ", ".join(_opt(s) for s in SCENARIOS))
        if len(used) > 1:
            raise UsageError('Option "%s" can\'t be used with option "%s"' % (_opt(used[1]), _opt(used[0])))
        args.scenario = used[0]
        if not args.topic and not args.all_topics:
            raise UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
        if args.topic and args.all_topics:
            raise UsageError('Option "[topic]" can\'t be used with option "[all-topics]"')
        args.topics = [parse_topic_arg(t) for t in args.topic]
        args.datetime_ms = parse_datetime(args.to_datetime) if args.scenario == "to_datetime" else None
    return args


def parse_topic_arg(arg):
    """'t' -> ('t', None) (every partition); 't:0,2' -> ('t', [0, 2]) (Kafka's --topic form for resets)."""
    if ":" not in arg:
        return arg, None
    parts = arg.split(":")
    if len(parts) != 2 or not parts[0]:
        raise UsageError("Invalid topic arg '%s', expected topic name and partitions" % arg)
    out = []
    for p in parts[1].split(","):
        try:
            out.append(int(p))
        except ValueError:
            raise UsageError("Invalid partition '%s' specified in topic arg '%s'" % (p, arg))
    return parts[0], out


_DATETIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})(Z|[+-]\d{2}(?::?\d{2})?)?")


def parse_datetime(s):
    """Kafka's Utils.getDateTime -> epoch milliseconds; UsageError when it would not parse there either."""
    if "T" not in (s or ""):
        raise UsageError("Error parsing timestamp. It does not contain a 'T' according to ISO8601 format: %r" % s)
    m = _DATETIME.fullmatch(s)
    if m is None:
        raise UsageError('Unparseable date: "%s" (expected YYYY-MM-DDTHH:mm:SS.sss with an optional zone Z, '
                         '+hh, +hhmm or +hh:mm)' % s)
    year, month, day, hour, minute, second, millis = (int(x) for x in m.groups()[:7])
    zone = m.group(8) or "Z"
    offset_min = 0
    if zone != "Z":
        digits = zone[1:].replace(":", "")
        hh, mm = int(digits[:2]), int(digits[2:] or 0)
        if hh > 23 or mm > 59:
            raise UsageError('Unparseable date: "%s" (bad zone offset)' % s)
        offset_min = (hh * 60 + mm) * (1 if zone[0] == "+" else -1)
    try:
        # Kafka parses strictly (setLenient(false)): 2021-02-30 or 25:00 are errors, not rolled over.
        t = _dt.datetime(year, month, day, hour, minute, second, millis * 1000, tzinfo=_dt.timezone.utc)
    except ValueError as e:
        raise UsageError('Unparseable date: "%s" (%s)' % (s, e))
    epoch = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
    return (t - epoch) // _dt.timedelta(milliseconds=1) - offset_min * 60000


# ---------------------------------------------------------------------------------------------- formatting

def _cell(v):
    return MISSING if v is None else str(v)


def _w(minimum, values):
    return max([minimum] + [len(_cell(v)) for v in values])


OFFSET_HEADER = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                 "CLIENT-ID")


def format_offsets(rows):
    """One group's --describe table. ``rows``: dicts with the keys of ``offset_row``."""
    g = _w(15, [r["group"] for r in rows])
    t = _w(15, [r["topic"] for r in rows])
    c = _w(15, [r["consumer_id"] for r in rows])
    h = _w(15, [r["host"] for r in rows])
    fmt = "\n%%-%ds %%-%ds %%-10s %%-15s %%-15s %%-15s %%-%ds %%-%ds %%s" % (g, t, c, h)
    out = fmt % OFFSET_HEADER
    for r in rows:
        out += fmt % tuple(_cell(r[k]) for k in ("group", "topic", "partition", "current_offset", "log_end_offset",
                                                 "lag", "consumer_id", "host", "client_id"))
    return out + "\n"


def format_members(group, members):
    """One group's --describe --members table. ``members``: dicts (consumer_id, group_instance_id, host,
    client_id, partitions)."""
    with_instance = any(m["group_instance_id"] for m in members)
    g = _w(15, [group])
    c = _w(15, [m["consumer_id"] for m in members])
    i = max([17] + [len(m["group_instance_id"] or "") for m in members])
    h = _w(15, [m["host"] for m in members])
    cl = _w(15, [m["client_id"] for m in members])
    if with_instance:
        fmt = "%%-%ds %%-%ds %%-%ds %%-%ds %%-%ds %%-15s " % (g, c, i, h, cl)
        header = ("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
    else:
        fmt = "%%-%ds %%-%ds %%-%ds %%-%ds %%-15s " % (g, c, h, cl)
        header = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
    out = "\n" + fmt % header + "\n"
    for m in members:
        cells = [group, m["consumer_id"]] + ([m["group_instance_id"] or ""] if with_instance else []) + \
            [m["host"], m["client_id"], str(m["partitions"])]
        out += fmt % tuple(cells) + "\n"
    return out


def format_state(group, coordinator, strategy, state, n_members):
    """--describe --state. ``coordinator``: (node_id, host, port)."""
    node, host, port = coordinator
    coord = "%s:%d  (%d)" % (host, port, node)
    fmt = "\n%%-%ds %%-%ds %%-20s %%-20s %%s" % (max(15, len(group)), max(25, len(coord)))
    return (fmt % ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
            + fmt % (group, coord, strategy or MISSING, state, n_members) + "\n")


def format_reset_plan(plan):
    """``plan``: {group: {(topic, partition): new_offset}} -> Kafka's printOffsetsToReset text."""
    g = max([15] + [len(x) for x in plan])
    t = max([15] + [len(tp[0]) for offsets in plan.values() for tp in offsets])
    fmt = "\n%%-%ds %%-%ds %%-10s %%s" % (g, t)
    out = fmt % ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET") if plan else ""
    for group in sorted(plan):
        for (topic, p), off in sorted(plan[group].items()):
            out += fmt % (group, topic, p, off)
    return out + "\n"


def state_note(group, state, n_rows):
    """Kafka's shouldPrintMemberState -> (stderr text or None, is_error, print_table)."""
    if state == "Dead":
        return "\nError: Consumer group '%s' does not exist." % group, True, False
    if state == "Empty":
        return "\nConsumer group '%s' has no active members." % group, False, n_rows > 0
    if state in REBALANCING:
        return "\nWarning: Consumer group '%s' is rebalancing." % group, False, n_rows > 0
    if state == "Stable":
        return None, False, n_rows > 0
    return "\nError: Expected a valid consumer group state, but found '%s'." % state, True, False


# ---------------------------------------------------------------------------------------------- reset plans

def tp_str(tp):
    return "%s-%d" % tp


def compute_reset_plan(scenario, partitions, earliest=None, latest=None, committed=None, by_time=None, value=None):
    """New offsets for ``partitions`` ([(topic, partition)]) -> ({tp: offset}, [warning lines]).

    ``earliest``/``latest``: {tp: log start / log end offset}; ``committed``: {tp: committed offset};
    ``by_time``: {tp: ListOffsets(timestamp) offset, -1 or None when no record is that new}; ``value``: N of
    --to-offset / --shift-by. Raises UsageError for --shift-by on a partition without a committed offset.
    """
    plan, warnings = {}, []

    def clamp(tp, off):
        hi, lo = latest[tp], earliest[tp]
        return hi if off > hi else lo if off < lo else off

    for tp in partitions:
        if scenario == "to_earliest":
            plan[tp] = earliest[tp]
        elif scenario == "to_latest":
            plan[tp] = latest[tp]
        elif scenario == "to_offset":
            plan[tp] = clamp(tp, value)
        elif scenario == "shift_by":
            if tp not in (committed or {}):
                raise UsageError("Cannot shift offset for partition %s since there is no current committed offset"
                                 % tp_str(tp))
            plan[tp] = clamp(tp, committed[tp] + value)
        elif scenario == "to_datetime":
            off = (by_time or {}).get(tp)
            if off is None or off < 0:
                warnings.append("\nWarn: Partition %d from topic %s is empty. Falling back to latest known offset."
                                % (tp[1], tp[0]))
                off = latest[tp]
            plan[tp] = off
        else:
            raise ValueError("unknown reset scenario %r" % scenario)
    return plan, warnings


# ---------------------------------------------------------------------------------------------- service

def log_offsets(admin, partitions, timestamp):
    """{tp: offset or None} via ListOffsets, topic by topic; a topic that fails (deleted, no leader) gives None."""
    by_topic = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    out = {}
    for topic, parts in by_topic.items():
        try:
            res = admin.list_offsets(topic, {p: timestamp for p in parts})
        except KafkaError:
            res = {}
        for p in parts:
            off = res.get(p, (None, None))[0]
            out[(topic, p)] = off
    return out


def offset_rows(group, desc, committed, log_end):
    """Kafka's collectGroupsOffsets -> list of row dicts (see the module docstring for the order)."""
    rows, assigned = [], set()
    owners = sorted((m for m in desc.members if m.assignment), key=lambda m: -len(set(m.assignment)))
    for m in owners:
        tps = sorted(set(m.assignment))
        assigned.update(tps)
        rows += [_row(group, tp, committed, log_end, m.member_id, m.client_host, m.client_id) for tp in tps]
    rows += [_row(group, tp, committed, log_end, MISSING, MISSING, MISSING)
             for tp in sorted(set(committed) - assigned)]
    return rows


def _row(group, tp, committed, log_end, consumer_id, host, client_id):
    cur = committed.get(tp)
    leo = log_end.get(tp)
    lag = leo - cur if cur is not None and cur != -1 and leo is not None else None
    return {"group": group, "topic": tp[0], "partition": tp[1], "current_offset": cur, "log_end_offset": leo,
            "lag": lag, "consumer_id": consumer_id, "host": host, "client_id": client_id}


class Output:
    """Collects stdout text, stderr notes and the JSON document; ``failed`` decides the exit code."""

    def __init__(self, args):
        self.json = args.output == "json"
        self.doc = []
        self.failed = False

    def text(self, s):
        if not self.json:
            sys.stdout.write(s)

    def note(self, s, error=False):
        print(s, file=sys.stderr)
        self.failed = self.failed or error


def _group_ids(admin, args):
    if args.all_groups:
        return [g.group_id for g in _consumer_groups(admin)]
    seen = []
    for g in args.group:
        if g not in seen:
            seen.append(g)
    return seen


def _consumer_groups(admin):
    return [g for g in admin.list_groups() if g.protocol_type in ("consumer", "")]


def do_list(admin, args, out):
    groups = _consumer_groups(admin)
    out.text("".join(g.group_id + "\n" for g in groups))
    out.doc = [{"group": g.group_id, "protocol_type": g.protocol_type, "state": g.state} for g in groups]


def do_describe(admin, args, out):
    groups = sorted(_group_ids(admin, args))
    descs = admin.describe_groups(groups)
    for gid in groups:
        desc = descs[gid]
        if args.members:
            members = [{"consumer_id": m.member_id, "group_instance_id": m.group_instance_id, "host": m.client_host,
                        "client_id": m.client_id, "partitions": len(m.assignment),
                        "assignment": [{"topic": t, "partition": p} for t, p in sorted(m.assignment)]}
                       for m in desc.members]
            note, err, show = state_note(gid, desc.state, len(members))
            if show:
                out.text(format_members(gid, members))
            out.doc.append({"group": gid, "state": desc.state, "members": members})
        elif args.state:
            note, err, show = state_note(gid, desc.state, 1)
            c = desc.coordinator
            if show:
                out.text(format_state(gid, c, desc.protocol, desc.state, len(desc.members)))
            out.doc.append({"group": gid, "state": desc.state, "assignment_strategy": desc.protocol or None,
                            "members": len(desc.members),
                            "coordinator": {"id": c.node_id, "host": c.host, "port": c.port}})
        else:
            committed = admin.list_group_offsets(gid) if desc.state != "Dead" else {}
            tps = set(committed) | {tp for m in desc.members for tp in m.assignment}
            log_end = log_offsets(admin, sorted(tps), LATEST) if tps else {}
            rows = offset_rows(gid, desc, committed, log_end)
            note, err, show = state_note(gid, desc.state, len(rows))
            if show:
                out.text(format_offsets(rows))
            out.doc.append({"group": gid, "state": desc.state,
                            "partitions": [{k: v for k, v in r.items() if k != "group"} for r in rows]})
        if note:
            out.note(note, err)


def partitions_to_reset(admin, args, committed):
    """The (topic, partition)s a reset covers; raises CommandError for unknown topics/partitions."""
    if args.all_topics:
        return sorted(committed)
    out, missing = [], []
    for topic, parts in args.topics:
        try:
            existing = admin.cluster.partitions_for(topic, refresh=True)
        except KafkaError:
            existing = []
            if parts is None:
                raise CommandError("This server does not host this topic-partition: topic %s does not exist"
                                   % topic)
        for p in (existing if parts is None else parts):
            (out if p in existing else missing).append((topic, p))
    if missing:
        raise CommandError('The partitions "%s" do not exist' % ",".join(tp_str(tp) for tp in missing))
    return sorted(set(out))


def do_reset(admin, args, out):
    if not args.dry_run and not args.execute:
        out.note("WARN: No action will be performed as the --execute option is missing. "
                 "Add --dry-run to keep this (default) behaviour without the warning.")
    plan = {}
    for gid in _group_ids(admin, args):
        state = admin.describe_groups([gid])[gid].state
        if state not in ("Empty", "Dead"):
            out.note("\nError: Assignments can only be reset if the group '%s' is inactive, but the current state "
                     "is %s." % (gid, state), error=True)
            plan[gid] = {}
            continue
        committed = admin.list_group_offsets(gid)
        tps = partitions_to_reset(admin, args, committed)
        need = {"to_earliest": ("e",), "to_latest": ("l",), "to_offset": ("e", "l"), "shift_by": ("e", "l"),
                "to_datetime": ("t", "l")}[args.scenario]
        earliest = log_offsets(admin, tps, EARLIEST) if "e" in need else None
        latest = log_offsets(admin, tps, LATEST) if "l" in need else None
        by_time = log_offsets(admin, tps, args.datetime_ms) if "t" in need else None
        for name, got in (("starting", earliest), ("ending", latest)):
            bad = [tp for tp in tps if got is not None and got.get(tp) is None]
            if bad:
                raise CommandError("Error getting %s offset of topic partition: %s" % (name, tp_str(bad[0])))
        value = args.to_offset if args.scenario == "to_offset" else args.shift_by
        new, warnings = compute_reset_plan(args.scenario, tps, earliest, latest, committed, by_time, value)
        for w in warnings:
            out.note(w)
        if args.execute and new:
            admin.alter_group_offsets(gid, new)
        plan[gid] = new
        out.doc.append({"group": gid, "executed": bool(args.execute),
                        "partitions": [{"topic": t, "partition": p, "new_offset": o}
                                       for (t, p), o in sorted(new.items())]})
    out.text(format_reset_plan(plan))


def _error_text(e):
    code = getattr(e, "code", None)
    if code in GROUP_ERRORS:
        return "%s: %s" % GROUP_ERRORS[code]
    return getattr(e, "message", None) or str(e)


def do_delete(admin, args, out):
    groups = _group_ids(admin, args)
    results = admin.delete_groups(groups)
    ok = [g for g in groups if results[g] is None]
    failed = [g for g in groups if results[g] is not None]
    quoted = ", ".join("'%s'" % g for g in ok)
    if not failed:
        out.text("Deletion of requested consumer groups (%s) was successful.\n" % quoted)
    else:
        out.note("\nError: Deletion of some consumer groups failed:", error=True)
        for g in failed:
            out.note("* Group '%s' could not be deleted due to: %s" % (g, _error_text(results[g])), error=True)
        if ok:
            out.text("\nThese consumer groups were deleted successfully: %s\n" % quoted)
    out.doc = [{"group": g, "deleted": results[g] is None,
                "error": None if results[g] is None else _error_text(results[g])} for g in groups]


_ACTIONS = {"list": do_list, "describe": do_describe, "delete": do_delete, "reset_offsets": do_reset}


def run(admin, args):
    """Run the parsed command against ``admin`` (an AdminClient or a test double) -> exit code."""
    out = Output(args)
    try:
        _ACTIONS[args.action](admin, args, out)
    except UsageError as e:
        usage_error(parser(), e)
        return 1
    except (CommandError, KafkaError, OSError, ValueError) as e:
        print("\nError: Executing consumer group command failed due to %s" % _error_text(e), file=sys.stderr)
        return 1
    if out.json:
        print(json.dumps(out.doc))
    return 1 if out.failed else 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parse_args(argv)
    except UsageError as e:
        usage_error(parser(), e)
        return 1
    try:
        admin = AdminClient(args.bootstrap_server, group_retry_s=max(args.timeout, 0) / 1000.0)
    except (KafkaError, OSError, ValueError) as e:
        print("\nError: Executing consumer group command failed due to %s" % _error_text(e), file=sys.stderr)
        return 1
    with admin:
        return run(admin, args)


if __name__ == "__main__":
    sys.exit(main())
