"""``kbroker-admin reassign-partitions --bootstrap-server H:P``: Kafka >= 2.5's kafka-reassign-partitions.sh over the
KIP-455 Admin APIs (AlterPartitionReassignments / ListPartitionReassignments, sent to the controller) instead of
the ``/admin/reassign_partitions`` znode (``--zookeeper``: kbroker/cli/reassign.py).

    --execute --reassignment-json-file F [--additional]
    --verify  --reassignment-json-file F
    --list
    --cancel  --reassignment-json-file F

Output, Kafka 3.x's text (partitions ``topic-partition``, sorted by topic then partition):

* ``--execute``: refuses ``Cannot execute because there is an existing partition assignment.  Use --additional to
  override this and create a new partition assignment in addition to the existing one.`` while any reassignment is
  listed (unless ``--additional``); prints ``Current partition replica assignment``, a blank line, the current
  assignment JSON of the file's partitions, a blank line, ``Save this to use as the --reassignment-json-file option
  during rollback``, then ``Successfully started partition reassignment(s) for t-0,t-1``. Partitions the
  controller refuses: ``Error reassigning partition(s):`` and one ``t-p: <message>`` line each (exit 1).
* ``--verify``: ``Status of partition reassignment:`` then per partition ``Reassignment of partition t-p is still
  in progress.`` (listed by the controller), ``... is completed.`` (replicas as in the file), or ``There is no active
  reassignment of partition t-p, but replica set is 1,2 rather than 3,4.``
* ``--list``: ``Current partition reassignments:`` and ``t-p: replicas: 1,2,3. adding: 3. removing: 1.`` lines, or
  ``No partition reassignments found.``
* ``--cancel``: cancels the file's partitions that are being reassigned (their replicas go back to what they were):
  ``Successfully cancelled partition reassignment(s) for: t-0,t-1``, or ``None of the specified partition
  reassignments are active.``

The file is checked first as with ``--zookeeper`` (Kafka's messages: empty, duplicate partitions, duplicate
replicas, empty list). Every error prints the ZooKeeper mode's ``Partitions reassignment failed due to <message>``
on stderr and exits 1.
"""
import sys

from kbroker.client.admin import AdminClient

from .common import ArgParser, CommandError, UsageError, duplicates, read_file, usage_error
from .reassign import CURRENT_HEADING, ROLLBACK_NOTE, format_reassignment_json, parse_reassignment

ACTIONS = ("execute", "verify", "list", "cancel")
EXISTING = ("Cannot execute because there is an existing partition assignment.  Use --additional to override this "
            "and create a new partition assignment in addition to the existing one.")


def tp_name(tp):
    return "%s-%d" % tp


def _sorted(tps):
    return sorted(tps)


def parser():
    p = ArgParser(prog="kbroker-admin reassign-partitions",
                  description="Move topic partitions between brokers over the Admin API (--bootstrap-server).")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    for a in ACTIONS:
        p.add_argument("--" + a, action="store_true")
    p.add_argument("--reassignment-json-file", metavar="FILE")
    p.add_argument("--additional", action="store_true", help="execute: even while other reassignments run")
    return p


def parse_args(argv):
    args = parser().parse_args(argv)
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        raise UsageError("Command must include exactly one action: --execute, --verify, --list or --cancel "
                         "(--generate and --throttle need --zookeeper in kbroker)")
    args.action = chosen[0]
    if args.action != "list" and not args.reassignment_json_file:
        raise UsageError("Missing required argument \"[reassignment-json-file]\" for --%s" % args.action)
    if args.additional and args.action != "execute":
        raise UsageError('Option "[additional]" can only be used with "[execute]"')
    return args


def load_targets(path):
    """The reassignment file -> {(topic, p): [replicas]} in file order, with Kafka's checks."""
    entries = parse_reassignment(read_file(path))
    if not entries:
        raise CommandError("Partition reassignment data file is empty")
    dup = duplicates([tp for tp, _ in entries])
    if dup:
        raise CommandError("Partition reassignment contains duplicate topic partitions: %s"
                           % ",".join(tp_name(tp) for tp in dup))
    for tp, replicas in entries:
        d = duplicates(replicas)
        if d:
            raise CommandError("Partition replica lists may not contain duplicate entries: %s contains multiple "
                               "entries for %s" % (tp_name(tp), ",".join(map(str, d))))
        if not replicas:
            raise CommandError("Empty replica list specified in partition reassignment.")
    return dict(entries)


def current_replicas(admin, tps):
    """{(topic, p): [replicas]} from Metadata; a partition missing there is an error naming it."""
    admin.cluster.metadata(sorted({t for t, _ in tps}))
    out = {}
    for t, p in tps:
        info = admin.cluster.topics.get(t, {}).get(p)
        if info is None:
            raise CommandError("Unable to find partition: %s" % tp_name((t, p)))
        out[(t, p)] = list(info.replicas)
    return out


def execute(admin, args, out):
    targets = load_targets(args.reassignment_json_file)
    if admin.list_partition_reassignments() and not args.additional:
        raise CommandError(EXISTING)
    current = current_replicas(admin, list(targets))
    print("%s\n\n%s\n\n%s" % (CURRENT_HEADING, format_reassignment_json(current), ROLLBACK_NOTE), file=out)
    results = admin.alter_partition_reassignments(targets)
    failed = {tp: msg for tp, (code, msg) in results.items() if code}
    if failed:
        raise CommandError("Error reassigning partition(s):\n" + "\n".join(
            "%s: %s" % (tp_name(tp), failed[tp]) for tp in _sorted(failed)))
    print("Successfully started partition reassignment%s for %s" % (
        "" if len(targets) == 1 else "s", ",".join(tp_name(tp) for tp in _sorted(targets))), file=out)
    return 0


def verify(admin, args, out):
    targets = load_targets(args.reassignment_json_file)
    ongoing = admin.list_partition_reassignments(list(targets))
    current = current_replicas(admin, list(targets))
    lines = ["Status of partition reassignment:"]
    for tp in _sorted(targets):
        if tp in ongoing:
            lines.append("Reassignment of partition %s is still in progress." % tp_name(tp))
        elif current[tp] == targets[tp]:
            lines.append("Reassignment of partition %s is completed." % tp_name(tp))
        else:
            lines.append("There is no active reassignment of partition %s, but replica set is %s rather than %s."
                         % (tp_name(tp), ",".join(map(str, current[tp])), ",".join(map(str, targets[tp]))))
    print("\n".join(lines), file=out)
    return 0


def list_(admin, _args, out):
    ongoing = admin.list_partition_reassignments()
    if not ongoing:
        print("No partition reassignments found.", file=out)
        return 0
    lines = ["Current partition reassignments:"]
    for tp in _sorted(ongoing):
        replicas, adding, removing = ongoing[tp]
        lines.append("%s: replicas: %s.%s%s" % (
            tp_name(tp), ",".join(map(str, replicas)),
            " adding: %s." % ",".join(map(str, adding)) if adding else "",
            " removing: %s." % ",".join(map(str, removing)) if removing else ""))
    print("\n".join(lines), file=out)
    return 0


def cancel(admin, args, out):
    targets = load_targets(args.reassignment_json_file)
    ongoing = admin.list_partition_reassignments(list(targets))
    if not ongoing:
        print("None of the specified partition reassignments are active.", file=out)
        return 0
    results = admin.alter_partition_reassignments({tp: None for tp in ongoing})
    failed = {tp: msg for tp, (code, msg) in results.items() if code}
    if failed:
        raise CommandError("Error cancelling partition reassignment%s for:\n%s" % (
            "" if len(failed) == 1 else "s", "\n".join("%s: %s" % (tp_name(tp), failed[tp])
                                                      for tp in _sorted(failed))))
    print("Successfully cancelled partition reassignment%s for: %s" % (
        "" if len(ongoing) == 1 else "s", ",".join(tp_name(tp) for tp in _sorted(ongoing))), file=out)
    return 0


_ACTIONS = {"execute": execute, "verify": verify, "list": list_, "cancel": cancel}


def main(argv, out=None, err=None):
    out, err = out or sys.stdout, err or sys.stderr
    try:
        args = parse_args(argv)
    except UsageError as e:
        usage_error(parser(), e, err)
        return 1
    try:
        with AdminClient(args.bootstrap_server) as admin:
            return _ACTIONS[args.action](admin, args, out)
    except Exception as e:  # noqa: BLE001 - CommandError, KafkaError, OSError: one line, exit 1
        print("Partitions reassignment failed due to %s" % (str(e) or type(e).__name__), file=err)
        return 1
