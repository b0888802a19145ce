"""``kbroker-admin reassign-partitions``: Kafka 0.10.1's kafka-reassign-partitions.sh, talking to ZooKeeper
(``--bootstrap-server`` instead: Kafka >= 2.5's Admin API mode with --list and --cancel, kbroker/cli/reassign_admin.py).

    kbroker-admin reassign-partitions --zookeeper H:P[,H:P][/chroot] --generate \\
        --topics-to-move-json-file F --broker-list "1,2,3" [--disable-rack-aware]
    kbroker-admin reassign-partitions --zookeeper Z --execute --reassignment-json-file F [--throttle B/S]
    kbroker-admin reassign-partitions --zookeeper Z --verify  --reassignment-json-file F

Files (Kafka's JSON):

* topics to move: ``{"topics":[{"topic":"foo1"},{"topic":"foo2"}],"version":1}`` (``version`` optional);
* reassignment: ``{"version":1,"partitions":[{"topic":"foo1","partition":0,"replicas":[5,6]}]}`` -- the
  ``/admin/reassign_partitions`` znode's format (codec: kbroker.controller.admin_znodes); the first replica is the
  preferred leader. Later Kafka's per-partition ``log_dirs`` is read and ignored.

What each action does and prints on stdout (Kafka 0.10.1's text; ``<json>`` is the reassignment JSON on one line,
compact, partitions sorted by (topic, partition) -- Kafka prints them in hash order):

* ``--generate``: reads ``/brokers/topics/<t>`` for the listed topics (unknown topics are left out, as Kafka does,
  with a warning on stderr) and proposes, per topic, Kafka's assignReplicasToBrokers over the listed brokers that
  are registered (``kbroker.controller.assignment``; rack-aware when those brokers carry racks, random start index)
  keeping the topic's replication factor (that of its lowest partition). Writes nothing. Output::

      Current partition replica assignment
      <blank>
      <json>
      Proposed partition reassignment configuration
      <blank>
      <json>

* ``--execute``: validates the file, refuses with ``There is an existing assignment running.`` (stderr, exit 1;
  Kafka printed it on stdout and only re-applied a throttle) while ``/admin/reassign_partitions`` exists, prints
  the current assignment of every partition of the file's topics (for rollback), creates the znode and prints::

      Current partition replica assignment
      <blank>
      <json>
      <blank>
      Save this to use as the --reassignment-json-file option during rollback
      Successfully started reassignment of partitions.

  The active controller then moves the replicas (controller contract: add the new ones, wait for them to join the
  ISR, move leadership, drop the old ones) and removes each finished partition from the znode.
* ``--verify``: ``Status of partition reassignment: `` (Kafka's trailing space), then for each partition of the
  file (file order): ``is still in progress`` while it is listed in ``/admin/reassign_partitions``, ``completed
  successfully`` when ``/brokers/topics/<t>`` holds exactly the file's replica list, otherwise ``failed``, preceded
  by Kafka's ``ERROR: Assigned replicas (...) don't match the list of replicas for reassignment (...) for partition
  [t,p]`` line (the controller drops a request it cannot carry out, e.g. a target broker that is not live). Lines
  read ``Reassignment of partition [t,p] <status>``: 0.10.1 prints partitions as ``[topic,partition]``
  (TopicAndPartition); Kafka 1.0+ prints ``topic-partition``. Exit 0 whatever the statuses, as Kafka.

Validation of a reassignment file (Kafka's messages; partitions printed ``[t,p]``): no partitions -> ``Partition
reassignment data file is empty``; a partition twice -> ``Partition reassignment contains duplicate topic
partitions: ...``; a broker twice in one list -> ``Partition replica lists may not contain duplicate entries: [t,p]
contains multiple entries for B``; an empty list -> ``Empty replica list specified in partition reassignment.``;
unknown partitions -> ``The proposed assignment contains non-existent partitions: List([t,p], ...)``; brokers not
registered -> ``The proposed assignment contains non-existent brokerIDs: B,...`` (the last two checks are
Kafka 0.10.2's).

Replication throttle (KIP-73, Kafka 0.10.1's ``--throttle``, bytes/s; -1, the default, = none). ``--execute
--throttle N`` writes, before the reassignment znode, exactly what Kafka's tool writes:

* ``leader.replication.throttled.rate`` and ``follower.replication.throttled.rate`` = N in ``/config/brokers/<id>``
  (other keys of that znode kept) of every broker holding a current or proposed replica of the file's topics, each
  followed by a ``brokers/<id>`` ``/config/changes`` notification; then prints ``The throttle limit was set to N
  B/s``;
* per moved topic, ``leader.replication.throttled.replicas`` = the current replicas of its partitions whose replica
  list changes and ``follower.replication.throttled.replicas`` = the proposed replicas they do not have yet, both
  ``partition:broker,...`` (other topic overrides kept; a ``topics/<t>`` notification);
* and, before ``Successfully started...``, Kafka's ``Warning: You must run Verify periodically, until the
  reassignment completes, to ensure the throttle is removed. You can also alter the throttle by rerunning the
  Execute command passing a new value.``

While a reassignment runs, ``--execute --throttle N`` only re-applies the rates (Kafka's maybeLimit) and exits 0.
``--verify``, once every partition of the file completed successfully, removes the two rates from every registered
broker and the two lists from the file's topics, and prints ``Throttle was removed.`` if it removed anything.
``--replica-alter-log-dirs-throttle`` (Kafka 1.1+, moves between log directories) is refused: kbroker has no
AlterReplicaLogDirs, so there is nothing to throttle.

Errors: ``Partitions reassignment failed due to <message>`` on stderr, exit 1 (Kafka printed it and a stack trace
on stdout and exited 0). Usage errors: the problem and the usage on stderr, exit 1.
ZooKeeper sessions use Kafka's tool timeouts (30 s session and connect).
"""
import argparse
import json
import sys

from kbroker import errors
from kbroker.controller.admin_znodes import ReassignPartitionsZNode
from kbroker.controller.assignment import assign_replicas_to_brokers
from kbroker.controller.topics import live_broker_hosts
from kbroker.coord.errors import CoordinationError, NodeExistsError
from kbroker.coord.metadata_store import TopicStore
from kbroker.coord.znodes import ConfigEntityChangeNotificationSequenceZNode, ConfigEntityZNode
from kbroker.quota.replication import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS

from .common import (ArgParser, CommandError, UsageError, duplicates, json_int, live_brokers, load_json, read_file,
                     tp_str, usage_error, zookeeper)

ACTIONS = ("generate", "execute", "verify")

CURRENT_HEADING = "Current partition replica assignment"
PROPOSED_HEADING = "Proposed partition reassignment configuration"
ROLLBACK_NOTE = "Save this to use as the --reassignment-json-file option during rollback"
STARTED = "Successfully started reassignment of partitions."
RUNNING = "There is an existing assignment running."
STATUS_HEADING = "Status of partition reassignment: "
COMPLETED, IN_PROGRESS, FAILED = "completed successfully", "is still in progress", "failed"
THROTTLE_WARNING = ("Warning: You must run Verify periodically, until the reassignment completes, to ensure the "
                    "throttle is removed. You can also alter the throttle by rerunning the Execute command passing "
                    "a new value.")
THROTTLE_SET = "The throttle limit was set to %d B/s"
THROTTLE_REMOVED = "Throttle was removed."


# ---------------------------------------------------------------------------------------------- formatting

def format_reassignment_json(assignment):
    """{(topic, partition): [replicas]} -> the one-line reassignment JSON, partitions in (topic, partition) order."""
    return ReassignPartitionsZNode.encode(assignment).decode("utf-8")


def scala_list(items):
    """Scala's List.toString of TopicAndPartitions: ``List([t,0], [t,1])`` (quoted in Kafka's messages)."""
    return "List(%s)" % ", ".join(tp_str(tp) for tp in items)


# ---------------------------------------------------------------------------------------------- JSON files

def parse_topics_to_move(text):
    """``{"topics":[{"topic":"a"}],"version":1}`` -> ["a", ...] in file order; a topic twice is an error."""
    doc = load_json(text, "topics-to-move file")
    entries = doc.get("topics", []) if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise CommandError('topics-to-move file must be {"topics":[{"topic":"..."}],"version":1}')
    topics = []
    for e in entries:
        if not isinstance(e, dict) or not isinstance(e.get("topic"), str):
            raise CommandError('each entry of "topics" must be {"topic":"<name>"}, got %s' % json.dumps(e))
        topics.append(e["topic"])
    dup = duplicates(topics)
    if dup:
        raise CommandError("List of topics to reassign contains duplicate entries: %s" % ",".join(dup))
    return topics


def parse_reassignment(text):
    """The reassignment file -> [((topic, partition), [replicas])] in file order, duplicates kept (Kafka's
    parsePartitionReassignmentDataWithoutDedup); a document without "partitions" gives []."""
    doc = load_json(text, "reassignment file")
    if not isinstance(doc, dict):
        raise CommandError('reassignment file must be {"version":1,"partitions":[...]}')
    entries = doc.get("partitions", [])
    if not isinstance(entries, list):
        raise CommandError('"partitions" must be a list')
    out = []
    for e in entries:
        if not isinstance(e, dict) or not isinstance(e.get("topic"), str) or "partition" not in e \
                or not isinstance(e.get("replicas"), list):
            raise CommandError('each partition must be {"topic":"<name>","partition":<int>,"replicas":[<int>...]}, '
                               'got %s' % json.dumps(e))
        tp = (e["topic"], json_int(e["partition"], "partition"))
        out.append((tp, [json_int(r, "replica of %s" % tp_str(tp)) for r in e["replicas"]]))
    return out


# ---------------------------------------------------------------------------------------------- ZooKeeper reads

def current_assignment(store, topics):
    """{(topic, partition): [replicas]} of every partition of ``topics`` that exist (unknown ones skipped)."""
    out = {}
    for t in dict.fromkeys(topics):
        try:
            assignment = store.assignment(t)
        except errors.UnknownTopicOrPartition:
            continue
        for p, replicas in assignment.items():
            out[(t, p)] = list(replicas)
    return out


def validate_reassignment(store, entries):
    """Kafka's parseAndValidate (+ 0.10.2's broker check) -> {(topic, partition): [replicas]} in file order."""
    if not entries:
        raise CommandError("Partition reassignment data file is empty")
    dup_tps = duplicates([tp for tp, _ in entries])
    if dup_tps:
        raise CommandError("Partition reassignment contains duplicate topic partitions: %s"
                           % ",".join(tp_str(tp) for tp in dup_tps))
    dup_replicas = [(tp, duplicates(r)) for tp, r in entries if duplicates(r)]
    if dup_replicas:
        raise CommandError("Partition replica lists may not contain duplicate entries: %s" % ". ".join(
            "%s contains multiple entries for %s" % (tp_str(tp), ",".join(map(str, d))) for tp, d in dup_replicas))
    if any(not r for _, r in entries):
        raise CommandError("Empty replica list specified in partition reassignment.")
    existing = current_assignment(store, [tp[0] for tp, _ in entries])
    missing = [tp for tp, _ in entries if tp not in existing]
    if missing:
        raise CommandError("The proposed assignment contains non-existent partitions: " + scala_list(missing))
    registered = set(live_brokers(store.backend))
    unknown = sorted({b for _, r in entries for b in r} - registered)
    if unknown:
        raise CommandError("The proposed assignment contains non-existent brokerIDs: " + ",".join(map(str, unknown)))
    return dict(entries)


def reassignments_in_progress(backend):
    """{(topic, partition): [replicas]} listed in /admin/reassign_partitions (empty when the znode is absent)."""
    data, _ = backend.get_or_none(ReassignPartitionsZNode.path())
    if data is None:
        return {}
    try:
        return ReassignPartitionsZNode.decode(data)
    except (ValueError, KeyError, TypeError):
        return {}


# ---------------------------------------------------------------------------------------------- actions

def parse_broker_list(s):
    try:
        ids = [int(x.strip()) for x in s.split(",")]
    except ValueError:
        raise CommandError("Invalid broker list %r: expected comma-separated broker ids" % s) from None
    dup = duplicates(ids)
    if dup:
        raise CommandError("Broker list contains duplicate entries: %s" % ",".join(map(str, dup)))
    return ids


def generate_assignment(store, broker_list, topics, disable_rack_aware=False, start_index=-1, rng=None, warn=None):
    """-> (proposed, current), both {(topic, partition): [replicas]}. ``start_index`` >= 0 fixes the start index
    (and replica shift) of every topic's assignment, making the proposal deterministic; -1 is Kafka's random."""
    current = current_assignment(store, topics)
    registered = live_brokers(store.backend)
    brokers = {b: registered[b] for b in sorted(set(broker_list)) if b in registered}
    left_out = sorted(set(broker_list) - set(registered))
    if left_out and warn:
        warn("WARNING: brokers %s are not registered and were left out of the proposal"
             % ",".join(map(str, left_out)))
    missing_topics = [t for t in topics if not any(tp[0] == t for tp in current)]
    if missing_topics and warn:
        warn("WARNING: topics %s do not exist and were left out" % ",".join(missing_topics))
    with_rack = [b for b, r in brokers.items() if r is not None]
    if disable_rack_aware:
        brokers = {b: None for b in brokers}
    elif with_rack and len(with_rack) < len(brokers):
        raise CommandError("Not all brokers have rack information. Add --disable-rack-aware in command line to make "
                           "replica assignment without rack information.")
    hosts = live_broker_hosts(store.backend)  # several brokers per host: no two replicas on one host
    proposed = {}
    for topic in dict.fromkeys(tp[0] for tp in sorted(current)):
        parts = sorted(p for t, p in current if t == topic)
        rf = len(current[(topic, parts[0])])
        try:
            layout = assign_replicas_to_brokers(brokers, len(parts), rf, start_index=start_index, rng=rng,
                                                hosts=hosts)
        except errors.KafkaError as e:
            raise CommandError(getattr(e, "message", None) or str(e)) from None
        for p, replicas in layout.items():
            proposed[(topic, p)] = replicas
    return proposed, current


def action_generate(backend, args, out, err):
    topics = parse_topics_to_move(read_file(args.topics_to_move_json_file))
    brokers = parse_broker_list(args.broker_list)
    proposed, current = generate_assignment(TopicStore(backend), brokers, topics, args.disable_rack_aware,
                                            warn=lambda m: print(m, file=err))
    print("%s\n\n%s" % (CURRENT_HEADING, format_reassignment_json(current)), file=out)
    print("%s\n\n%s" % (PROPOSED_HEADING, format_reassignment_json(proposed)), file=out)
    return 0


# ---------------------------------------------------------------------------------------------- throttle

def _write_entity_config(backend, entity_type, name, update, remove=()):
    """Rewrite /config/<entity_type>/<name> with ``update`` set and ``remove`` dropped (other keys kept), then
    announce it (Kafka's AdminUtils.changeEntityConfig) -> whether anything changed."""
    path = ConfigEntityZNode.path(entity_type, name)
    data, _ = backend.get_or_none(path)
    config = ConfigEntityZNode.decode(data) if data else {}
    new = {k: v for k, v in config.items() if k not in remove}
    new.update(update)
    if new == config:
        return False
    if data is None:
        backend.create(path, ConfigEntityZNode.encode(new), makepath=True)
    else:
        backend.set(path, ConfigEntityZNode.encode(new))
    backend.create(ConfigEntityChangeNotificationSequenceZNode.path_prefix(),
                   ConfigEntityChangeNotificationSequenceZNode.encode("%s/%s" % (entity_type, name)),
                   sequence=True, makepath=True)
    return True


def throttled_replicas(current, proposed):
    """-> {topic: (leader list, follower list)} as Kafka's assignThrottledReplicas: for each partition whose replica
    list changes, its current replicas (leader side) and the proposed ones it does not have (follower side), each
    ``partition:broker`` joined by commas, partitions in order."""
    out = {}
    for tp in sorted(proposed):
        old, new = current.get(tp, []), proposed[tp]
        leader, follower = out.setdefault(tp[0], ([], []))
        if list(old) == list(new):
            continue
        leader.extend("%d:%d" % (tp[1], b) for b in old)
        follower.extend("%d:%d" % (tp[1], b) for b in new if b not in old)
    return {t: (",".join(ls), ",".join(fs)) for t, (ls, fs) in out.items()}


def set_throttle_rates(backend, brokers, throttle, out):
    """Kafka's maybeLimit: both rates on every broker involved."""
    rate = str(throttle)
    for b in sorted(set(brokers)):
        _write_entity_config(backend, "brokers", str(b), {LEADER_RATE: rate, FOLLOWER_RATE: rate})
    print(THROTTLE_SET % throttle, file=out)


def remove_throttle(backend, topics, statuses, out):
    """Kafka's removeThrottle: once every partition completed, the rates from all registered brokers and the
    replica lists from ``topics``."""
    if not all(status == COMPLETED for _, status, _ in statuses):
        return
    changed = False
    for b in sorted(live_brokers(backend)):
        changed |= _write_entity_config(backend, "brokers", str(b), {}, (LEADER_RATE, FOLLOWER_RATE))
    for t in dict.fromkeys(topics):
        if backend.exists(ConfigEntityZNode.path("topics", t)) is not None:
            changed |= _write_entity_config(backend, "topics", t, {}, (LEADER_REPLICAS, FOLLOWER_REPLICAS))
    if changed:
        print(THROTTLE_REMOVED, file=out)


def action_execute(backend, args, out, err):
    store = TopicStore(backend)
    wanted = validate_reassignment(store, parse_reassignment(read_file(args.reassignment_json_file)))
    current = current_assignment(store, [tp[0] for tp in wanted])
    brokers = {b for replicas in list(current.values()) + list(wanted.values()) for b in replicas}
    if backend.exists(ReassignPartitionsZNode.path()) is not None:
        print(RUNNING, file=err)
        if args.throttle >= 0:
            set_throttle_rates(backend, brokers, args.throttle, out)   # Kafka: only the rates change
            return 0
        return 1
    print("%s\n\n%s\n\n%s" % (CURRENT_HEADING, format_reassignment_json(current), ROLLBACK_NOTE), file=out)
    if args.throttle >= 0:
        print(THROTTLE_WARNING, file=out)
        set_throttle_rates(backend, brokers, args.throttle, out)
        for topic, (leader, follower) in throttled_replicas(current, wanted).items():
            _write_entity_config(backend, "topics", topic, {LEADER_REPLICAS: leader, FOLLOWER_REPLICAS: follower})
    try:
        backend.create(ReassignPartitionsZNode.path(), ReassignPartitionsZNode.encode(wanted), makepath=True)
    except NodeExistsError:
        # Another tool got there between our check and the create (Kafka's ZkNodeExistsException message).
        raise CommandError("Partition reassignment currently in progress for %s. Aborting operation"
                           % scala_list(sorted(reassignments_in_progress(backend)))) from None
    print(STARTED, file=out)
    return 0


def verify_statuses(store, wanted):
    """{(topic, partition): [replicas]} -> [((topic, partition), status, assigned replicas)] in ``wanted``'s order."""
    running = reassignments_in_progress(store.backend)
    out = []
    for tp, replicas in wanted.items():
        if tp in running:
            out.append((tp, IN_PROGRESS, None))
            continue
        try:
            assigned = store.assignment(tp[0]).get(tp[1], [])
        except errors.UnknownTopicOrPartition:
            assigned = []
        out.append((tp, COMPLETED if list(assigned) == list(replicas) else FAILED, assigned))
    return out


def action_verify(backend, args, out, err):
    # Kafka's parsePartitionReassignmentData: duplicates collapse (the last entry wins), nothing else is checked.
    wanted = dict(parse_reassignment(read_file(args.reassignment_json_file)))
    print(STATUS_HEADING, file=out)
    statuses = verify_statuses(TopicStore(backend), wanted)
    for tp, status, assigned in statuses:
        if status == FAILED:
            print("ERROR: Assigned replicas (%s) don't match the list of replicas for reassignment (%s) for "
                  "partition %s" % (",".join(map(str, assigned)), ",".join(map(str, wanted[tp])), tp_str(tp)),
                  file=out)
    for tp, status, _ in statuses:
        print("Reassignment of partition %s %s" % (tp_str(tp), status), file=out)
    remove_throttle(backend, [tp[0] for tp in wanted], statuses, out)
    return 0


_ACTIONS = {"generate": action_generate, "execute": action_execute, "verify": action_verify}


# ---------------------------------------------------------------------------------------------- arguments

def parser():
    p = ArgParser(prog="kbroker-admin reassign-partitions",
                  description="Move topic partitions between brokers (like kafka-reassign-partitions.sh).")
    p.add_argument("--zookeeper", metavar="H:P[,H:P][/CHROOT]",
                   help="REQUIRED: the ZooKeeper connect string of the cluster (zookeeper.connect)")
    p.add_argument("--generate", action="store_true", help="propose a reassignment (writes nothing)")
    p.add_argument("--execute", action="store_true", help="start the reassignment in --reassignment-json-file")
    p.add_argument("--verify", action="store_true", help="report the status of --reassignment-json-file")
    p.add_argument("--reassignment-json-file", metavar="FILE",
                   help='{"version":1,"partitions":[{"topic":"foo","partition":1,"replicas":[1,2,3]}]}')
    p.add_argument("--topics-to-move-json-file", metavar="FILE",
                   help='generate: {"topics":[{"topic":"foo"},{"topic":"foo1"}],"version":1}')
    p.add_argument("--broker-list", metavar='"0,1,2"', help="generate: the brokers to move the partitions to")
    p.add_argument("--disable-rack-aware", action="store_true", help="generate: ignore the brokers' racks")
    p.add_argument("--throttle", metavar="BYTES/S", default="-1",
                   help="execute: bound replication of the moved partitions to this many bytes/s (-1: none)")
    p.add_argument("--replica-alter-log-dirs-throttle", metavar="BYTES/S", help=argparse.SUPPRESS)
    return p


def parse_args(argv):
    """Kafka's validateAndParseArgs rules; raises UsageError."""
    args = parser().parse_args(argv)
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        raise UsageError("Command must include exactly one action: --generate, --execute or --verify")
    args.action = chosen[0]
    if not args.zookeeper:
        raise UsageError('Missing required argument "[zookeeper]"')
    if args.replica_alter_log_dirs_throttle is not None:
        raise UsageError("--replica-alter-log-dirs-throttle is not supported: kbroker does not move replicas "
                         "between log directories (no AlterReplicaLogDirs)")
    try:
        args.throttle = int(args.throttle)
    except ValueError:
        raise UsageError("Cannot parse argument '%s' of option throttle" % args.throttle) from None
    if args.throttle < -1:
        raise UsageError("--throttle must be a number of bytes/s >= 0 (or -1: no throttle)")

    def invalid(opt, value):
        if value:
            raise UsageError('Option "[%s]" can\'t be used with option "[%s]"' % (args.action, opt))

    if args.action == "verify":
        if not args.reassignment_json_file:
            raise UsageError("If --verify option is used, command must include --reassignment-json-file that was "
                             "used during the --execute option")
        invalid("topics-to-move-json-file", args.topics_to_move_json_file)
        invalid("disable-rack-aware", args.disable_rack_aware)
        invalid("broker-list", args.broker_list)
        invalid("throttle", args.throttle >= 0)
    elif args.action == "generate":
        if not (args.topics_to_move_json_file and args.broker_list):
            raise UsageError("If --generate option is used, command must include both --topics-to-move-json-file "
                             "and --broker-list options")
        invalid("reassignment-json-file", args.reassignment_json_file)
        invalid("throttle", args.throttle >= 0)
    else:
        if not args.reassignment_json_file:
            raise UsageError("If --execute option is used, command must include --reassignment-json-file that was "
                             "output during the --generate option")
        invalid("topics-to-move-json-file", args.topics_to_move_json_file)
        invalid("disable-rack-aware", args.disable_rack_aware)
        invalid("broker-list", args.broker_list)
    return args


# ---------------------------------------------------------------------------------------------- entry point

def main(argv=None, backend=None, out=None, err=None):
    """Exit status. ``backend``: an already started CoordinationBackend to use instead of ``--zookeeper``."""
    out, err = out or sys.stdout, err or sys.stderr
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parse_args(argv)
    except UsageError as e:
        usage_error(parser(), e, err)
        return 1
    try:
        with zookeeper(args.zookeeper, backend) as b:
            return _ACTIONS[args.action](b, args, out, err)
    except (CommandError, CoordinationError) as e:
        print("Partitions reassignment failed due to %s" % (str(e) or type(e).__name__), file=err)
        return 1


if __name__ == "__main__":
    sys.exit(main())
