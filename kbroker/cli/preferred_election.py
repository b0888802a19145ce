"""``kbroker-admin preferred-replica-election``: Kafka 0.10.1's kafka-preferred-replica-election.sh (ZooKeeper).

    kbroker-admin preferred-replica-election --zookeeper H:P[,H:P][/chroot] [--path-to-json-file F]

Moves the leadership of each listed partition back to its preferred replica (the first of its assigned replicas)
by creating ``/admin/preferred_replica_election`` = ``{"version":1,"partitions":[{"topic":"t","partition":0}]}``
(codec: kbroker.controller.admin_znodes); the active controller elects the preferred replica where it is live and
in the ISR (leaving the others alone) and deletes the znode.

Input: ``F`` = ``{"partitions":[{"topic":"foo","partition":1},{"topic":"foobar","partition":2}]}`` (``version``
optional); without ``--path-to-json-file`` every partition of every topic under ``/brokers/topics``. A file
without a ``partitions`` list -> ``Preferred replica election data is empty``; a partition twice -> ``Preferred
replica election data contains duplicate partitions: [t,p],...``. Partitions that do not exist are written anyway
(the controller ignores them), as Kafka does.

Output on stdout (Kafka 0.10.1's lines; partitions in (topic, partition) order where Kafka used hash order)::

    Created preferred replica election path with {"version":1,"partitions":[{"topic":"t","partition":0}]}
    Successfully started preferred replica election for partitions Set([t,0], [t,1])

(``[t,p]`` and ``Set(...)`` are the 0.10.1 Scala toStrings; Kafka 1.0+ prints ``t-p``.) When the znode already
exists: ``Preferred replica leader election currently in progress for Set(...). Aborting operation``. Errors print
``Failed to start preferred replica election`` and the reason on stderr, exit 1 (Kafka: stdout plus a stack trace,
exit 0). Usage errors: the problem and the usage on stderr, exit 1.
"""
import json
import sys

from kbroker import errors
from kbroker.controller.admin_znodes import PreferredReplicaElectionZNode
from kbroker.coord.errors import CoordinationError, NodeExistsError
from kbroker.coord.metadata_store import TopicStore

from .common import (ArgParser, CommandError, UsageError, duplicates, json_int, load_json, read_file, tp_str,
                     usage_error, zookeeper)

EMPTY = "Preferred replica election data is empty"


def scala_set(tps):
    return "Set(%s)" % ", ".join(tp_str(tp) for tp in tps)


def parse_election_data(text):
    """The JSON file -> sorted [(topic, partition)]; raises CommandError with Kafka's messages."""
    doc = load_json(text, "preferred replica election file")
    entries = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise CommandError(EMPTY)
    tps = []
    for e in entries:
        if not isinstance(e, dict) or not isinstance(e.get("topic"), str) or "partition" not in e:
            raise CommandError('each partition must be {"topic":"<name>","partition":<int>}, got %s' % json.dumps(e))
        tps.append((e["topic"], json_int(e["partition"], "partition")))
    dup = duplicates(tps)
    if dup:
        raise CommandError("Preferred replica election data contains duplicate partitions: %s"
                           % ",".join(tp_str(tp) for tp in dup))
    return sorted(tps)


def all_partitions(store):
    out = []
    for topic in store.topics():
        try:
            out += [(topic, p) for p in store.assignment(topic)]
        except errors.UnknownTopicOrPartition:
            continue  # deleted while we were listing
    return sorted(out)


def start_election(backend, tps, out):
    """Create the znode for ``tps`` (sorted [(topic, partition)]) and print Kafka's line."""
    data = PreferredReplicaElectionZNode.encode(tps)
    try:
        backend.create(PreferredReplicaElectionZNode.path(), data, makepath=True)
    except NodeExistsError:
        current, _ = backend.get_or_none(PreferredReplicaElectionZNode.path())
        try:
            pending = sorted(PreferredReplicaElectionZNode.decode(current)) if current is not None else []
        except (ValueError, KeyError, TypeError):
            pending = []
        raise CommandError("Preferred replica leader election currently in progress for %s. Aborting operation"
                           % scala_set(pending)) from None
    print("Created preferred replica election path with %s" % data.decode("utf-8"), file=out)


def parser():
    p = ArgParser(prog="kbroker-admin preferred-replica-election",
                  description="Move partition leadership to the preferred replicas "
                              "(like kafka-preferred-replica-election.sh).")
    p.add_argument("--zookeeper", metavar="H:P[,H:P][/CHROOT]",
                   help="REQUIRED: the ZooKeeper connect string of the cluster (zookeeper.connect)")
    p.add_argument("--path-to-json-file", metavar="FILE",
                   help='{"partitions":[{"topic":"foo","partition":1}]}; default: all existing partitions')
    return p


def main(argv=None, backend=None, out=None, err=None):
    """Exit status. ``backend``: an already started CoordinationBackend to use instead of ``--zookeeper``."""
    out, err = out or sys.stdout, err or sys.stderr
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parser().parse_args(argv)
        if not args.zookeeper:
            raise UsageError('Missing required argument "[zookeeper]"')
    except UsageError as e:
        usage_error(parser(), e, err)
        return 1
    try:
        given = parse_election_data(read_file(args.path_to_json_file)) if args.path_to_json_file else None
        with zookeeper(args.zookeeper, backend) as b:
            tps = given if given is not None else all_partitions(TopicStore(b))
            start_election(b, tps, out)
    except (CommandError, CoordinationError) as e:
        print("Failed to start preferred replica election", file=err)
        print(str(e) or type(e).__name__, file=err)
        return 1
    print("Successfully started preferred replica election for partitions %s" % scala_set(tps), file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
