"""What the two modes of ``kbroker-admin topics`` share: option parsing and the describe output.

The --bootstrap-server mode (admin.py, over the Kafka protocol) and the --zookeeper mode (topics_zk.py, over the
znode tree) parse ``--topic``, ``--replica-assignment`` and ``--config`` alike and print the same lines, so a
script cannot tell which mode answered. Formats (Kafka 3.x TopicCommand, byte for byte):

    Topic: T<TAB>PartitionCount: 3<TAB>ReplicationFactor: 1<TAB>Configs: segment.bytes=1000
    <TAB>Topic: T<TAB>Partition: 0<TAB>Leader: 1<TAB>Replicas: 1<TAB>Isr: 1

``TopicId: <id>`` follows the name only for a non-zero topic id; ``Leader: none`` when there is no leader.
"""
import base64
import re

from .common import CommandError, UsageError

ZERO_UUID = b"\x00" * 16

NAME_COLLISION_WARNING = ("WARNING: Due to limitations in metric names, topics with a period ('.') or underscore "
                          "('_') could collide. To avoid issues it is best to use either, but not both.")


def uuid_str(b):
    """Kafka's Uuid.toString(): URL-safe base64 of the 16 bytes without padding."""
    return base64.urlsafe_b64encode(bytes(b)).decode("ascii").rstrip("=")


def topic_filter(pattern):
    """Kafka's IncludeList: trims, drops spaces and surrounding quotes, ',' means '|'; full-match regex."""
    p = pattern.strip().replace(",", "|").replace(" ", "")
    p = re.sub(r"^[\"']+", "", p)
    p = re.sub(r"[\"']+$", "", p)
    try:
        rx = re.compile(p)
    except re.error as e:
        raise CommandError("Invalid topic regex %r: %s" % (pattern, e))
    return lambda name: rx.fullmatch(name) is not None


def parse_replica_assignment(s):
    """'0:1,1:2' -> {0: [0, 1], 1: [1, 2]}: comma per partition, colon per replica (Kafka's format)."""
    out = {}
    for i, part in enumerate(s.split(",")):
        try:
            brokers = [int(x.strip()) for x in part.split(":")]
        except ValueError:
            raise UsageError("Invalid replica assignment %r" % s)
        dup = sorted({b for b in brokers if brokers.count(b) > 1})
        if dup:
            raise CommandError("Partition replica lists may not contain duplicate entries: %s"
                               % ",".join(map(str, dup)))
        if out and len(brokers) != len(out[0]):
            raise CommandError("Partition %d has different replication factor: [%s]"
                               % (i, ", ".join(map(str, brokers))))
        out[i] = brokers
    return out


def parse_topic_configs(items):
    """['k=v', ...] -> {k: v}; Kafka splits on '=' with optional spaces and needs exactly two parts."""
    out = {}
    for item in items or ():
        parts = re.split(r"\s*=\s*", item)
        if len(parts) != 2:
            raise CommandError('requirement failed: Invalid topic config: all configs to be added must be in the '
                               'format "key=val".')
        out[parts[0].strip()] = parts[1].strip()
    return out


def ensure_topics_exist(names, args):
    """--topic matched nothing and --if-exists is absent: ``Topic '<pattern>' does not exist as expected``."""
    if args.topic and not names and not args.if_exists:
        raise CommandError("Topic '%s' does not exist as expected" % args.topic)


def format_topic_line(name, topic_id, partition_count, replication_factor, configs):
    """The per-topic describe line. ``configs``: [(key, value)] already filtered to the non-default ones."""
    out = "Topic: %s" % name
    if topic_id and bytes(topic_id) != ZERO_UUID:
        out += "\tTopicId: %s" % uuid_str(topic_id)
    out += "\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s" % (
        partition_count, replication_factor, ",".join("%s=%s" % (k, v) for k, v in configs))
    return out


def format_partition_line(name, partition, leader, replicas, isr):
    """The per-partition describe line; a negative or absent ``leader`` prints ``none``."""
    return "\tTopic: %s\tPartition: %d\tLeader: %s\tReplicas: %s\tIsr: %s" % (
        name, partition, "none" if leader is None or leader < 0 else leader,
        ",".join(map(str, replicas)), ",".join(map(str, isr)))
