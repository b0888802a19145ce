"""kbroker-admin: Kafka's operator tools over kbroker's own client (no gevent; plain blocking sockets).

    kbroker-admin topics  ...   == kafka-topics.sh  (also: kbroker-admin --list ..., i.e. topics flags without the
                                   sub-command word)
    kbroker-admin configs ...   == kafka-configs.sh (topics and brokers; users' SCRAM credentials: scram_users.py)
    kbroker-admin consumer-groups ... == kafka-consumer-groups.sh (kbroker/cli/consumer_groups.py)
    kbroker-admin reassign-partitions ... == kafka-reassign-partitions.sh (--zookeeper; kbroker/cli/reassign.py)
    kbroker-admin preferred-replica-election ... == kafka-preferred-replica-election.sh (--zookeeper;
                                   kbroker/cli/preferred_election.py)
    kbroker-admin zookeeper-security-migration ... == zookeeper-security-migration.sh (kbroker/cli/zk_migration.py)
    kbroker-admin acls ...      == kafka-acls.sh (--bootstrap-server or --authorizer-properties; kbroker/cli/acls.py)
    kbroker-admin producer-perf-test / consumer-perf-test ... == kafka-producer-perf-test.sh /
                                   kafka-consumer-perf-test.sh (kbroker/cli/perf_tools.py; librdkafka clients)
    kbroker-admin verifiable-producer / verifiable-consumer ... == kafka-verifiable-producer.sh /
                                   kafka-verifiable-consumer.sh (kbroker/cli/verifiable.py; librdkafka clients)
    kbroker-admin transactions ... == kafka-transactions.sh (kbroker/cli/transactions.py)
    kbroker-admin log-dirs ...  == kafka-log-dirs.sh (kbroker/cli/log_dirs.py)
    kbroker-admin dump-log ...  == kafka-dump-log.sh (kbroker/cli/dump_log.py; reads files, no broker)
    kbroker-admin streams-application-reset ... == kafka-streams-application-reset.sh (kbroker/cli/streams_reset.py)
    kbroker-admin delete-records / leader-election / get-offsets / broker-api-versions ... == Kafka's scripts of
                                   those names (kbroker/cli/operator_tools.py)

Topics take ``--bootstrap-server HOST:PORT[,HOST:PORT]`` or ``--zookeeper H:P[,H:P][/chroot]`` (the 0.10.1 mode that
edits the znode tree directly: ``topics_zk.py``); configs take either too (``--zookeeper``: topics in
``topic_configs_zk.py``, brokers in ``broker_configs_zk.py``, users/clients in ``client_quotas.py``).

Output layout: the **modern** (Kafka 2.8+/3.x, Java ``TopicCommand``/``ConfigCommand``) text, byte for byte:

    Created topic T.
    Topic: T<TAB>PartitionCount: 3<TAB>ReplicationFactor: 1<TAB>Configs: segment.bytes=1000
    <TAB>Topic: T<TAB>Partition: 0<TAB>Leader: 1<TAB>Replicas: 1<TAB>Isr: 1

``TopicId: <id>`` follows the topic name only when the broker reports a non-zero topic id (Metadata v10+), exactly as
Kafka prints it; kbroker serves Metadata up to v9, so it is absent. ``Configs:`` lists the entries whose source is not
DEFAULT_CONFIG (5) -- overrides *and* values inherited from server.properties, as Kafka does -- comma-joined in the
broker's order. ``Leader: none`` when a partition has no leader. The 3.7+ ``Elr:``/``LastKnownElr:`` fields (KRaft
only) are not printed. ``--list`` prints the sorted names (an empty line when there are none, like Kafka).
``--alter`` and ``--delete`` print nothing on success (3.x). ``--topic`` is a regular expression (full match; commas
mean "or") for everything but ``--create``, as in Kafka.

kafka-configs (3.x): ``Dynamic configs for topic T are:`` (``All configs for ...`` with ``--all``) then one line per
entry ``  k=v sensitive=false synonyms={SOURCE:k=v, ...}`` (sorted by name; sensitive values print as null);
``--alter`` prints ``Completed updating config for topic T.``. Alter = DescribeConfigs, apply ``--delete-config`` then
``--add-config`` to the current dynamic overrides, AlterConfigs with the complete set (AlterConfigs replaces it).

Errors: ``Error while executing topic command : <message>`` (``config command`` for configs) on **stderr**, exit 1
(Kafka 3.x prints this line on stdout; the project puts all diagnostics on stderr so stdout stays parseable). Usage
errors print the problem and the usage on stderr and exit 1, like Kafka's CommandLineUtils.
``--output json`` (kbroker extension) prints one JSON document on stdout instead of the text.

Layout: this module is the dispatcher (``main``) and the topics and configs commands. What the tools share
(errors, argument parser, output, JSON files, ZooKeeper session) is in common.py, what both topics modes share in
topics_common.py; every other command is a module of its own, imported on use. Nothing imports this module but
the ``kbroker-admin`` entry point (and tests).
"""
import argparse
import re
import sys

from kbroker.client.admin import (DEFAULT_CONFIG, DYNAMIC_TOPIC_CONFIG, RESOURCE_BROKER, RESOURCE_TOPIC,
                                  SOURCE_NAMES, AdminClient, NewTopic)
from kbroker.errors import KafkaError

from . import client_quotas, operator_tools
from .client_quotas import EntityNameAction, check_entities
from .common import ArgParser, CommandError, UsageError, emit, usage_error
from .topics_common import (NAME_COLLISION_WARNING, ZERO_UUID, ensure_topics_exist, format_partition_line,
                            format_topic_line, parse_replica_assignment, parse_topic_configs, topic_filter, uuid_str)


# ---------------------------------------------------------------------------------------------- errors

def _run(fn, args, what):
    """``fn(args)``'s exit status; a failure prints ``Error while executing <what> command : <message>`` on stderr
    and gives 1."""
    try:
        return fn(args)
    except (CommandError, KafkaError, OSError, ValueError) as e:
        msg = getattr(e, "message", None) or str(e)
        print("Error while executing %s command : %s" % (what, msg), file=sys.stderr)
        return 1


# ---------------------------------------------------------------------------------------------- topics

def topics_parser():
    p = ArgParser(prog="kbroker-admin topics", description="Create, delete, describe, or change a topic.",
                  add_help=True)
    p.add_argument("--bootstrap-server", metavar="HOST:PORT", help="the broker(s) to connect to (required)")
    p.add_argument("--zookeeper", metavar="H:P[/CHROOT]", help="edit ZooKeeper's znodes directly (Kafka 0.10 mode)")
    actions = p.add_argument_group("actions (exactly one)")
    for a in ("create", "list", "describe", "alter", "delete"):
        actions.add_argument("--" + a, action="store_true")
    p.add_argument("--topic", help="topic name; a regular expression except with --create")
    p.add_argument("--partitions", type=int, help="number of partitions (create: broker default if omitted)")
    p.add_argument("--replication-factor", type=int, help="replication factor (broker default if omitted)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="topic config override")
    p.add_argument("--replica-assignment", metavar="B1:B2,B3:B4", help="replicas of partition 0, 1, ...")
    p.add_argument("--if-not-exists", action="store_true", help="create: do nothing if the topic exists")
    p.add_argument("--if-exists", action="store_true", help="alter/delete/describe: do nothing if it is missing")
    p.add_argument("--topics-with-overrides", action="store_true", help="describe: only topics with overrides")
    p.add_argument("--under-replicated-partitions", action="store_true")
    p.add_argument("--unavailable-partitions", action="store_true")
    p.add_argument("--exclude-internal", action="store_true", help="leave out internal topics")
    p.add_argument("--output", choices=("text", "json"), default="text", help="output format (kbroker extension)")
    return p


def parse_topics_args(argv):
    """Parse and check kafka-topics arguments (Kafka's checkArgs rules); raises UsageError."""
    args = topics_parser().parse_args(argv)
    if args.zookeeper is not None and args.bootstrap_server:
        raise UsageError("Only one of --bootstrap-server or --zookeeper must be specified")
    chosen = [a for a in ("create", "list", "describe", "alter", "delete") if getattr(args, a)]
    if len(chosen) != 1:
        raise UsageError("Command must include exactly one action: --list, --describe, --create, --alter or --delete")
    args.action = chosen[0]
    if not args.bootstrap_server and args.zookeeper is None:
        raise UsageError('Missing required argument "[bootstrap-server]"')
    if args.action in ("create", "alter", "delete") and not args.topic:
        raise UsageError('Missing required argument "[topic]"')
    if args.action == "alter" and args.partitions is None:
        raise UsageError('Missing required argument "[partitions]"')

    def invalid(opt, with_actions):
        if args.action not in with_actions:
            raise UsageError('Option "[%s]" can\'t be used with option "[%s]"' % (opt, args.action))

    if args.config:
        invalid("config", ("create",))
    if args.partitions is not None:
        invalid("partitions", ("create", "alter"))
    if args.replication_factor is not None:
        invalid("replication-factor", ("create",))
    if args.replica_assignment is not None:
        invalid("replica-assignment", ("create", "alter"))
        if args.action == "create" and (args.partitions is not None or args.replication_factor is not None):
            raise UsageError('Option "[replica-assignment]" can\'t be used with option "[partitions]" or '
                             '"[replication-factor]"')
    if args.if_not_exists:
        invalid("if-not-exists", ("create",))
    if args.if_exists:
        invalid("if-exists", ("alter", "delete", "describe"))
    for opt in ("topics_with_overrides", "under_replicated_partitions", "unavailable_partitions"):
        if getattr(args, opt):
            invalid(opt.replace("_", "-"), ("describe",))
    if args.zookeeper is not None:
        from kbroker.cli.topics_zk import check_args
        check_args(args)
    return args


def _matching_topics(admin, args):
    names = admin.list_topics(include_internal=not args.exclude_internal)
    if args.topic:
        match = topic_filter(args.topic)
        names = [n for n in names if match(n)]
    return names


def topics_create(admin, args):
    assignment = parse_replica_assignment(args.replica_assignment) if args.replica_assignment else None
    if args.replication_factor is not None and not 1 <= args.replication_factor <= 32767:
        raise CommandError("The replication factor must be between 1 and 32767 inclusive")
    if args.partitions is not None and args.partitions < 1:
        raise CommandError("The partitions must be greater than 0")
    configs = parse_topic_configs(args.config)
    lines = []
    if "." in args.topic or "_" in args.topic:
        lines.append(NAME_COLLISION_WARNING)
    topic = NewTopic(args.topic,
                     -1 if args.partitions is None else args.partitions,
                     -1 if args.replication_factor is None else args.replication_factor,
                     assignment, configs)
    try:
        res = admin.create_topics([topic])[args.topic]
    except KafkaError as e:
        if e.code == 36 and args.if_not_exists:  # TOPIC_ALREADY_EXISTS
            emit(args, [], {"topic": args.topic, "created": False})
            return 0
        raise
    lines.append("Created topic %s." % args.topic)
    emit(args, lines, {"topic": args.topic, "created": True, "partitions": res.get("num_partitions", -1),
                       "replication_factor": res.get("replication_factor", -1)})
    return 0


def topics_list(admin, args):
    names = _matching_topics(admin, args)
    if args.output == "json":
        emit(args, [], names)
    else:
        print("\n".join(names))
    return 0


def describe_topics(admin, names):
    """-> [dict(name, topic_id, partitions=[...], configs=[ConfigEntry])] in name order."""
    if not names:
        return []
    meta = admin.metadata(names)
    by_name = {t["name"]: t for t in meta["topics"]}
    cfgs = admin.describe_configs([(RESOURCE_TOPIC, n) for n in names])
    out = []
    for n in names:
        t = by_name.get(n)
        if t is None or t["error_code"]:
            continue
        parts = sorted(t["partitions"], key=lambda p: p["partition_index"])
        out.append({"name": n, "topic_id": t.get("topic_id"), "partitions": parts,
                    "configs": cfgs.get((RESOURCE_TOPIC, n), []),
                    "live": {b["node_id"] for b in meta["brokers"]}})
    return out


def topics_describe(admin, args):
    names = _matching_topics(admin, args)
    ensure_topics_exist(names, args)
    report_partitions_only = args.under_replicated_partitions or args.unavailable_partitions
    lines, doc = [], []
    for d in describe_topics(admin, names):
        overrides = [(e.name, e.value) for e in d["configs"] if e.source != DEFAULT_CONFIG]
        parts = d["partitions"]
        rf = len(parts[0]["replica_nodes"]) if parts else 0
        tid = d["topic_id"] if d["topic_id"] and bytes(d["topic_id"]) != ZERO_UUID else None
        show_topic = not report_partitions_only and (not args.topics_with_overrides or overrides)
        if show_topic:
            lines.append(format_topic_line(d["name"], tid, len(parts), rf, overrides))
        entry = {"topic": d["name"], "topic_id": uuid_str(tid) if tid else None, "partition_count": len(parts),
                 "replication_factor": rf, "configs": dict(overrides), "partitions": []}
        for p in parts:
            leader = p["leader_id"]
            under = len(p["isr_nodes"]) < len(p["replica_nodes"])
            unavailable = leader < 0 or leader not in d["live"]
            if args.topics_with_overrides:
                continue
            if report_partitions_only and not ((args.under_replicated_partitions and under)
                                               or (args.unavailable_partitions and unavailable)):
                continue
            lines.append(format_partition_line(d["name"], p["partition_index"], leader, p["replica_nodes"],
                                               p["isr_nodes"]))
            entry["partitions"].append({"partition": p["partition_index"], "leader": leader if leader >= 0 else None,
                                        "replicas": list(p["replica_nodes"]), "isr": list(p["isr_nodes"])})
        if show_topic or entry["partitions"]:
            doc.append(entry)
    emit(args, lines, doc)
    return 0


def topics_alter(admin, args):
    names = _matching_topics(admin, args)
    ensure_topics_exist(names, args)
    if not names:
        emit(args, [], [])
        return 0
    assignment = parse_replica_assignment(args.replica_assignment) if args.replica_assignment else None
    spec = {}
    for n in names:
        if assignment is None:
            spec[n] = args.partitions
        else:
            current = len(admin.cluster.partitions_for(n, refresh=True))
            spec[n] = (args.partitions, [assignment[p] for p in sorted(assignment) if p >= current])
    admin.create_partitions(spec)
    emit(args, [], [{"topic": n, "partition_count": args.partitions} for n in names])
    return 0


def topics_delete(admin, args):
    names = _matching_topics(admin, args)
    ensure_topics_exist(names, args)
    if names:
        admin.delete_topics(names)
    emit(args, [], [{"topic": n, "deleted": True} for n in names])
    return 0


_TOPIC_ACTIONS = {"create": topics_create, "list": topics_list, "describe": topics_describe,
                  "alter": topics_alter, "delete": topics_delete}


def topics_main(argv):
    try:
        args = parse_topics_args(argv)
    except UsageError as e:
        usage_error(topics_parser(), e)
        return 1

    def run(a):
        if a.zookeeper is not None:
            from kbroker.cli.topics_zk import run_zk
            return run_zk(a)
        with AdminClient(a.bootstrap_server) as admin:
            return _TOPIC_ACTIONS[a.action](admin, a)
    return _run(run, args, "topic")


# ---------------------------------------------------------------------------------------------- configs

_ENTITY_TYPES = {"topics": RESOURCE_TOPIC, "brokers": RESOURCE_BROKER}
_ENTITY_WORD = {RESOURCE_TOPIC: "topic", RESOURCE_BROKER: "broker"}
# The source that makes an entry "dynamic" for each entity type (what --describe shows without --all); a broker's
# is DYNAMIC_BROKER_CONFIG (2), the cluster default's ("" = --entity-default) DYNAMIC_DEFAULT_BROKER_CONFIG (3).
_DYNAMIC_SOURCE = {RESOURCE_TOPIC: DYNAMIC_TOPIC_CONFIG, RESOURCE_BROKER: 2}
_DEFAULT_BROKER_SOURCE = 3


def _dynamic_source(rtype, name):
    return _DYNAMIC_SOURCE[rtype] if not (rtype == RESOURCE_BROKER and name == "") else _DEFAULT_BROKER_SOURCE


# Split on commas that are not inside [...] (Kafka's "(?=[^\]]*(?:\[|$))" lookahead), so k=[a,b] stays one item.
_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"


def parse_add_config(s):
    """kafka-configs --add-config 'k=v,k2=[a,b]' -> {'k': 'v', 'k2': 'a,b'}."""
    out = {}
    if not s:
        return out
    for item in re.split("," + _OUTSIDE_BRACKETS, s):
        parts = re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, item)
        if len(parts) != 2:
            raise CommandError('requirement failed: Invalid entity config: all configs to be added must be in the '
                               'format "key=val".')
        out[parts[0].strip()] = re.sub(r"[\[\]]", "", parts[1]).strip()
    return out


def parse_delete_config(items):
    out = []
    for s in items or ():
        out += [k.strip() for k in s.split(",") if k.strip()]
    return out


def configs_parser():
    p = ArgParser(prog="kbroker-admin configs", description="Add/remove entity config for a topic or broker.")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT")
    p.add_argument("--zookeeper", help=argparse.SUPPRESS)
    p.add_argument("--describe", action="store_true")
    p.add_argument("--alter", action="store_true")
    p.add_argument("--entity-type", action="append", choices=sorted(_ENTITY_TYPES) + ["clients", "users"],
                   help="repeatable: users and clients together name a user+client-id quota entity")
    p.add_argument("--entity-name", dest="entity_names", action=EntityNameAction)
    p.add_argument("--entity-default", dest="entity_names", action=EntityNameAction, nargs=0,
                   help="the <default> entity of clients/users (paired with --entity-type in order)")
    p.add_argument("--topic", help="shorthand for --entity-type topics --entity-name TOPIC")
    p.add_argument("--user", help="shorthand for --entity-type users --entity-name USER")
    p.add_argument("--user-defaults", action="store_true", help="shorthand for --entity-type users --entity-default")
    p.add_argument("--client", help="shorthand for --entity-type clients --entity-name CLIENT")
    p.add_argument("--client-defaults", action="store_true",
                   help="shorthand for --entity-type clients --entity-default")
    p.add_argument("--add-config", metavar="K1=V1,K2=[A,B]")
    p.add_argument("--delete-config", action="append", default=[], metavar="K1,K2")
    p.add_argument("--all", action="store_true", help="describe: every config, not only the dynamic ones")
    p.add_argument("--output", choices=("text", "json"), default="text")
    return p


def parse_configs_args(argv):
    args = configs_parser().parse_args(argv)
    # Kafka pairs the types with the names / defaults in command-line order ('' = <default>).
    args.entity_types, args.entity_names = args.entity_type or [], args.entity_names or []
    # --user/--user-defaults, then --client/--client-defaults, come after the --entity-type ones (Kafka's order).
    for etype, name, default in (("users", args.user, args.user_defaults),
                                 ("clients", args.client, args.client_defaults)):
        if name is not None or default:
            args.entity_types.append(etype)
            args.entity_names.append(name if name is not None else "")
    args.entity_type = args.entity_types[0] if args.entity_types else None
    args.entity_name = args.entity_names[0] if args.entity_names else None
    quota_entity = bool(args.entity_types) and set(args.entity_types) <= {"users", "clients"}
    problem = check_entities(args.entity_types, args.entity_names) if quota_entity else None
    if problem:
        raise UsageError(problem)
    # Dynamic broker configs in ZooKeeper mode: kbroker/cli/broker_configs_zk.py; topics: topic_configs_zk.py.
    zk_brokers = args.zookeeper is not None and args.entity_types == ["brokers"]
    brokers = args.entity_types == ["brokers"] or zk_brokers
    if not quota_entity and (len(args.entity_types) > 1 or len(args.entity_names) > 1
                             or (args.entity_name == "" and not brokers)):
        raise UsageError("one --entity-type and --entity-name (--entity-default only for brokers) for %s"
                         % ",".join(args.entity_types))
    if args.zookeeper is not None and args.bootstrap_server:
        raise UsageError("Only one of --bootstrap-server or --zookeeper must be specified")
    if not args.bootstrap_server and args.zookeeper is None:
        raise UsageError('Missing required argument "[bootstrap-server]"')
    if args.describe == args.alter:
        raise UsageError("Command must include exactly one action: --describe, --alter")
    if args.topic:
        if args.entity_type not in (None, "topics") or args.entity_name:
            raise UsageError("--topic can't be combined with --entity-type/--entity-name")
        args.entity_type, args.entity_name = "topics", args.topic
        args.entity_types, args.entity_names = ["topics"], [args.topic]
    if not args.entity_type:
        raise UsageError("At least one entity type must be specified")
    if args.alter:
        if not args.entity_name and not ((quota_entity or brokers) and args.entity_name == ""):
            raise UsageError("an entity name must be specified with --alter of %s" % args.entity_type)
        if not args.add_config and not args.delete_config:
            raise UsageError("At least one of --add-config or --delete-config must be specified with --alter")
    elif args.add_config or args.delete_config:
        raise UsageError("--add-config and --delete-config are only valid with --alter")
    if args.all and not args.describe:
        raise UsageError("--all is only valid with --describe")
    if args.all and args.entity_type == "users":
        raise UsageError("--all is not supported for users")
    args.resource_type = _ENTITY_TYPES.get(args.entity_type)
    return args


def format_config_line(entry):
    value = "null" if entry.is_sensitive or entry.value is None else entry.value
    syn = ", ".join("%s:%s=%s" % (SOURCE_NAMES.get(s.source, "UNKNOWN_CONFIG"), s.name,
                                  "null" if entry.is_sensitive or s.value is None else s.value)
                    for s in entry.synonyms)
    return "  %s=%s sensitive=%s synonyms={%s}" % (entry.name, value, "true" if entry.is_sensitive else "false", syn)


def configs_describe(admin, args):
    """Kafka's describe: a broker's resource is asked of that broker (AdminClient routing); without
    --entity-name every broker, then the cluster default ("Default configs for brokers in the cluster are:")."""
    rtype = args.resource_type
    if args.entity_name is not None and (args.entity_name or rtype == RESOURCE_BROKER):
        names = [args.entity_name]
    elif rtype == RESOURCE_TOPIC:
        names = admin.list_topics()
    else:
        admin.metadata([])
        names = [str(b) for b in sorted(admin.cluster.brokers)] + [""]
    lines, doc = [], []
    for name in names:
        entries = admin.describe_configs([(rtype, name)])[(rtype, name)]
        if not args.all:
            entries = [e for e in entries if e.source == _dynamic_source(rtype, name)]
        entries = sorted(entries, key=lambda e: e.name)
        if rtype == RESOURCE_BROKER and name == "":
            lines.append("Default configs for brokers in the cluster are:")
        else:
            lines.append("%s configs for %s %s are:" % ("All" if args.all else "Dynamic", _ENTITY_WORD[rtype],
                                                        name))
        lines += [format_config_line(e) for e in entries]
        doc.append({"entity_type": args.entity_type, "entity_name": name,
                    "configs": [{"name": e.name, "value": None if e.is_sensitive else e.value,
                                 "source": SOURCE_NAMES.get(e.source, "UNKNOWN_CONFIG"),
                                 "sensitive": e.is_sensitive} for e in entries]})
    emit(args, lines, doc)
    return 0


def configs_alter(admin, args):
    rtype, name = args.resource_type, args.entity_name
    to_add = parse_add_config(args.add_config)
    to_delete = parse_delete_config(args.delete_config)
    entries = admin.describe_configs([(rtype, name)])[(rtype, name)]
    current = {e.name: e.value for e in entries if e.source == _dynamic_source(rtype, name)}
    missing = [k for k in to_delete if k not in current]
    if missing:
        raise CommandError("Invalid config(s): %s" % ",".join(missing))
    new = {k: v for k, v in current.items() if k not in to_delete}
    new.update(to_add)
    admin.alter_configs({(rtype, name): new})
    done = ("Completed updating default config for brokers in the cluster." if rtype == RESOURCE_BROKER and name == ""
            else "Completed updating config for %s %s." % (_ENTITY_WORD[rtype], name))
    emit(args, [done],
         {"entity_type": args.entity_type, "entity_name": name, "configs": new})
    return 0


def configs_main(argv):
    try:
        args = parse_configs_args(argv)
    except UsageError as e:
        usage_error(configs_parser(), e)
        return 1

    def run(a):
        if a.entity_type == "brokers" and a.zookeeper is not None:
            from kbroker.cli import broker_configs_zk
            return broker_configs_zk.run(a, parse_add_config(a.add_config), parse_delete_config(a.delete_config))
        if a.entity_type == "topics" and a.zookeeper is not None:
            from kbroker.cli import topic_configs_zk
            return topic_configs_zk.run(a, parse_add_config(a.add_config), parse_delete_config(a.delete_config))
        if a.entity_type in ("users", "clients"):
            return client_quotas.run(a, parse_add_config(a.add_config), parse_delete_config(a.delete_config),
                                     AdminClient)
        with AdminClient(a.bootstrap_server) as admin:
            return (configs_alter if a.alter else configs_describe)(admin, a)
    return _run(run, args, "config")


# ---------------------------------------------------------------------------------------------- entry point

def consumer_groups_main(argv):
    # The tools are imported on use: each command loads only its own dependencies (the ZooKeeper tools load
    # kbroker.coord and kbroker.controller, which topics --bootstrap-server never needs).
    from kbroker.cli.consumer_groups import main as cg_main
    return cg_main(argv)


def reassign_partitions_main(argv):
    if any(a == "--bootstrap-server" or a.startswith("--bootstrap-server=") for a in argv):
        from kbroker.cli.reassign_admin import main as reassign_admin_main   # Kafka >= 2.5's mode (KIP-455)
        return reassign_admin_main(argv)
    from kbroker.cli.reassign import main as reassign_main
    return reassign_main(argv)


def preferred_replica_election_main(argv):
    from kbroker.cli.preferred_election import main as election_main
    return election_main(argv)


def acls_main(argv):
    from kbroker.cli.acls import main as acls_main_
    return acls_main_(argv)


def client_tool_main(name, argv):
    # The librdkafka tools read --producer.config / --consumer.config themselves (Kafka's client properties,
    # kbroker/client/rdkafka_props.py), so main() hands them the arguments before client_config takes those options.
    from kbroker.cli import perf_tools, verifiable
    tools = {"producer-perf-test": perf_tools.producer_main, "consumer-perf-test": perf_tools.consumer_main,
             "verifiable-producer": verifiable.producer_main, "verifiable-consumer": verifiable.consumer_main}
    return tools[name](argv)


_CLIENT_TOOLS = ("producer-perf-test", "consumer-perf-test", "verifiable-producer", "verifiable-consumer")


def transactions_main(argv):
    from kbroker.cli.transactions import main as transactions_main_
    return transactions_main_(argv)


def log_dirs_main(argv):
    from kbroker.cli.log_dirs import main as log_dirs_main_
    return log_dirs_main_(argv)


def dump_log_main(argv):
    from kbroker.cli.dump_log import main as dump_log_main_
    return dump_log_main_(argv)


def zookeeper_security_migration_main(argv):
    from kbroker.cli.zk_migration import main as migration_main
    return migration_main(argv)


_COMMANDS = {"topics": topics_main, "configs": configs_main, "consumer-groups": consumer_groups_main,
             "reassign-partitions": reassign_partitions_main,
             "preferred-replica-election": preferred_replica_election_main,
             "zookeeper-security-migration": zookeeper_security_migration_main, "acls": acls_main,
             "transactions": transactions_main, "log-dirs": log_dirs_main, "dump-log": dump_log_main,
             "streams-application-reset": lambda argv: __import__("kbroker.cli.streams_reset",
                                                                  fromlist=["main"]).main(argv),
             **operator_tools.COMMANDS}

USAGE = """usage: kbroker-admin <command> [options]

  topics   create, delete, describe, list or alter topics (like kafka-topics.sh)
  configs  describe or alter topic/broker configs (like kafka-configs.sh)
  consumer-groups  list, describe, reset offsets of or delete consumer groups (like kafka-consumer-groups.sh)
  reassign-partitions  generate, execute or verify a partition reassignment (like kafka-reassign-partitions.sh)
  preferred-replica-election  move leadership to the preferred replicas (like kafka-preferred-replica-election.sh)
  zookeeper-security-migration  set secure or open ACLs on the cluster's znodes (like zookeeper-security-migration.sh)
  acls     add, remove or list ACLs (like kafka-acls.sh)
  producer-perf-test / consumer-perf-test  measure produce / consume throughput and latency (like kafka-*-perf-test.sh)
  verifiable-producer / verifiable-consumer  JSON event lines for test harnesses (like kafka-verifiable-*.sh)
  transactions  list, describe, find hanging or abort transactions (like kafka-transactions.sh)
  log-dirs  describe the brokers' log directories (like kafka-log-dirs.sh)
  dump-log  print log, index, txnindex and snapshot files (like kafka-dump-log.sh)
  streams-application-reset  reset a Streams application for reprocessing (like kafka-streams-application-reset.sh)
""" + operator_tools.USAGE + """
kbroker-admin <command> --help shows the options of a command. Any command takes --command-config FILE: Kafka's
client properties (security.protocol, ssl.truststore.*, ssl.keystore.*, sasl.mechanism, sasl.jaas.config) to reach
a TLS or SASL listener."""


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in _CLIENT_TOOLS:
        return client_tool_main(argv[0], argv[1:])
    try:  # --command-config client.properties, for every command (kbroker/client/client_config.py)
        from kbroker.client import client_config
        argv = client_config.apply(argv)
    except ValueError as e:
        print("ERROR %s" % e, file=sys.stderr)
        return 1
    if argv and argv[0] in _COMMANDS:
        return _COMMANDS[argv[0]](argv[1:])
    if argv and argv[0].startswith("--") and argv[0] not in ("--help", "-h"):
        return topics_main(argv)  # kafka-topics flags without the sub-command word
    print(USAGE, file=sys.stdout if argv[:1] in (["--help"], ["-h"]) else sys.stderr)
    return 0 if argv[:1] in (["--help"], ["-h"]) else 1


if __name__ == "__main__":
    sys.exit(main())
