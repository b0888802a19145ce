"""``kbroker-admin topics --zookeeper H:P[,H:P][/chroot]``: kafka-topics.sh's 0.10 mode, editing znodes directly.

Writes exactly what Kafka 0.10.1's TopicCommand/AdminUtils wrote, so a kbroker or Kafka controller watching the
tree acts on it:

* ``--create``: ``/config/topics/<t>`` (``{"version":1,"config":{...}}``, written even when empty) and then
  ``/brokers/topics/<t>`` (``{"version":1,"partitions":{"0":[1,2]}}``). The assignment is
  kbroker.controller.assignment (Kafka's assignReplicasToBrokers, rack-aware when the registered brokers carry
  racks) over the live brokers under ``/brokers/ids``, unless ``--replica-assignment`` gives it. As in 0.10, both
  ``--partitions`` and ``--replication-factor`` are required without an explicit assignment (there is no broker
  to supply defaults).
* ``--alter --partitions N``: rewrites ``/brokers/topics/<t>`` with the added partitions (version-conditional),
  placed like Kafka's addPartitions (continuing from partition 0's first replica); with ``--replica-assignment``
  the list covers all partitions, as in this tool's --bootstrap-server mode, and the entries for the new ones are
  used.
* ``--delete``: creates ``/admin/delete_topics/<t>`` (the controller deletes the topic when
  ``delete.topic.enable``); internal topics are refused.
* ``--list`` / ``--describe``: read ``/brokers/topics``, the partition ``state`` znodes (leader, isr) and
  ``/config/topics/<t>``; ``Configs:`` shows the topic's overrides (ZooKeeper knows nothing of broker defaults).
  A partition without a state znode (no controller has acted yet) shows ``Leader: none`` and an empty ``Isr:``.

Output is the same text (and ``--output json`` documents) as the --bootstrap-server mode (admin.py; the shared
parsing and lines are in topics_common.py). Errors: ``Error while executing topic command : <message>`` on
stderr, exit 1; a ZooKeeper that cannot be reached within 30 s (the tool's session and connection timeout,
Kafka's too; common.zookeeper) is such an error.
"""

from kbroker import errors
from kbroker.config import ConfigError, validate_topic_config
from kbroker.controller.assignment import assign_replicas_to_brokers, start_index_for_new_partitions
from kbroker.controller.topics import live_broker_hosts
from kbroker.coord.errors import CoordinationError, NodeExistsError
from kbroker.coord.metadata_store import TopicStore
from kbroker.coord.znodes import DeleteTopicsZNode
from kbroker.internal_topics import GROUP_METADATA_TOPIC, INTERNAL_TOPICS

from .common import TIMEOUT_MS, CommandError, UsageError, emit, live_brokers, zookeeper
from .topics_common import (NAME_COLLISION_WARNING, ensure_topics_exist, format_partition_line, format_topic_line,
                            parse_replica_assignment, parse_topic_configs, topic_filter)


def check_args(args):
    """The 0.10 rules that only apply to --zookeeper (the rest is admin.parse_topics_args)."""
    if args.action == "create" and args.replica_assignment is None:
        if args.partitions is None:
            raise UsageError('Missing required argument "[partitions]"')
        if args.replication_factor is None:
            raise UsageError('Missing required argument "[replication-factor]"')


def _matching(store, args):
    names = store.topics()
    if args.exclude_internal:
        names = [n for n in names if n not in INTERNAL_TOPICS]
    if args.topic:
        match = topic_filter(args.topic)
        names = [n for n in names if match(n)]
    return names


def zk_create(store, args):
    lines = []
    if "." in args.topic or "_" in args.topic:
        lines.append(NAME_COLLISION_WARNING)
    configs = parse_topic_configs(args.config)
    try:
        validate_topic_config(configs)
    except ConfigError as e:
        raise CommandError(str(e)) from None
    if args.replica_assignment:
        assignment = parse_replica_assignment(args.replica_assignment)
    else:
        if args.partitions < 1:
            raise CommandError("The partitions must be greater than 0")
        if not 1 <= args.replication_factor <= 32767:
            raise CommandError("The replication factor must be between 1 and 32767 inclusive")
        assignment = assign_replicas_to_brokers(live_brokers(store.backend), args.partitions,
                                                args.replication_factor, hosts=live_broker_hosts(store.backend))
    try:
        store.create_topic(args.topic, assignment, configs)
    except errors.TopicAlreadyExists:
        if args.if_not_exists:
            emit(args, [], {"topic": args.topic, "created": False})
            return 0
        raise
    lines.append("Created topic %s." % args.topic)
    emit(args, lines, {"topic": args.topic, "created": True, "partitions": len(assignment),
                       "replication_factor": len(assignment[0])})
    return 0


def zk_list(store, args):
    names = _matching(store, args)
    if args.output == "json":
        emit(args, [], names)
    else:
        print("\n".join(names))
    return 0


def zk_describe(store, args):
    names = _matching(store, args)
    ensure_topics_exist(names, args)
    live = set(live_brokers(store.backend))
    report_partitions_only = args.under_replicated_partitions or args.unavailable_partitions
    lines, doc = [], []
    for name in names:
        try:
            assignment = store.assignment(name)
        except errors.UnknownTopicOrPartition:
            continue  # deleted while we were listing
        overrides = list(store.topic_config(name).items())
        rf = len(assignment[0]) if assignment else 0
        show_topic = not report_partitions_only and (not args.topics_with_overrides or overrides)
        if show_topic:
            lines.append(format_topic_line(name, None, len(assignment), rf, overrides))
        entry = {"topic": name, "topic_id": None, "partition_count": len(assignment), "replication_factor": rf,
                 "configs": dict(overrides), "partitions": []}
        for p, replicas in assignment.items():
            if args.topics_with_overrides:
                continue
            state = store.partition_state(name, p)
            leader, isr = (state.leader, list(state.isr)) if state else (-1, [])
            under = len(isr) < len(replicas)
            unavailable = leader < 0 or leader not in live
            if report_partitions_only and not ((args.under_replicated_partitions and under)
                                               or (args.unavailable_partitions and unavailable)):
                continue
            lines.append(format_partition_line(name, p, leader, replicas, isr))
            entry["partitions"].append({"partition": p, "leader": leader if leader >= 0 else None,
                                        "replicas": list(replicas), "isr": isr})
        if show_topic or entry["partitions"]:
            doc.append(entry)
    emit(args, lines, doc)
    return 0


def zk_alter(store, args):
    names = _matching(store, args)
    ensure_topics_exist(names, args)
    given = parse_replica_assignment(args.replica_assignment) if args.replica_assignment else None
    brokers = None
    for name in names:
        if name == GROUP_METADATA_TOPIC:
            raise CommandError("The number of partitions for the offsets topic cannot be changed.")
        current = store.assignment(name)
        if args.partitions <= len(current):
            raise CommandError("Topic currently has %d partitions, which is higher than the requested %d."
                               % (len(current), args.partitions))
        rf = len(current[0])
        if given is not None:
            missing = [p for p in range(len(current), args.partitions) if p not in given]
            if missing:
                raise CommandError("Replica assignment lists %d partitions but %d are needed"
                                   % (len(given), args.partitions))
            new = {p: given[p] for p in range(len(current), args.partitions)}
        else:
            brokers = live_brokers(store.backend) if brokers is None else brokers
            new = assign_replicas_to_brokers(brokers, args.partitions - len(current), rf,
                                             start_index=start_index_for_new_partitions(current, brokers),
                                             start_partition_id=len(current),
                                             hosts=live_broker_hosts(store.backend))
        store.add_partitions(name, new)
    emit(args, [], [{"topic": n, "partition_count": args.partitions} for n in names])
    return 0


def zk_delete(store, args):
    names = _matching(store, args)
    ensure_topics_exist(names, args)
    for name in names:
        if name in INTERNAL_TOPICS:
            raise CommandError("Topic %s is a kafka internal topic and is not allowed to be marked for deletion."
                               % name)
        try:
            store.backend.create(DeleteTopicsZNode.path(name), DeleteTopicsZNode.encode(), makepath=True)
        except NodeExistsError:
            pass  # already marked: the controller is on it
    emit(args, [], [{"topic": n, "deleted": True} for n in names])
    return 0


ACTIONS = {"create": zk_create, "list": zk_list, "describe": zk_describe, "alter": zk_alter, "delete": zk_delete}


def run_zk(args):
    """Run one parsed topics command against ``args.zookeeper``; returns the exit status (errors raise)."""
    # This module's TIMEOUT_MS, read per call, so a test can lower it here.
    with zookeeper(args.zookeeper, timeout_ms=TIMEOUT_MS) as backend:
        try:
            return ACTIONS[args.action](TopicStore(backend), args)
        except CoordinationError as e:
            raise CommandError("ZooKeeper: %s" % e) from None
