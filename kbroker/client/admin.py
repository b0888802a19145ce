"""AdminClient: topic administration, configs, metadata and offsets over kbroker's codec (blocking sockets).

Routing (Kafka's): CreateTopics, DeleteTopics and CreatePartitions go to the controller (Metadata v1+
``controller_id``; any broker when the broker only speaks Metadata v0); DescribeConfigs/AlterConfigs for topics go
to any broker; ListOffsets goes to each partition's leader.

Every call raises on the first failed topic/resource/partition, with the ``KafkaError`` subclass of the wire code
(``kbroker.errors.error_for_code``) and the broker's own error message when it sent one (CreateTopics v1+,
DeleteTopics v5+, CreatePartitions, Describe/AlterConfigs). Successful calls return the per-item results.

Config entries are normalised across DescribeConfigs versions into ``ConfigEntry(name, value, source, is_default,
read_only, is_sensitive, synonyms)``; ``source`` uses Kafka's ConfigSource ids (1 DYNAMIC_TOPIC_CONFIG,
2 DYNAMIC_BROKER_CONFIG, 3 DYNAMIC_DEFAULT_BROKER_CONFIG, 4 STATIC_BROKER_CONFIG, 5 DEFAULT_CONFIG); a v0 answer only
has ``is_default``, so its source is 5 when default, else 1 for a topic and 4 for a broker. ``is_default`` is
``source == 5``, as in Kafka's Java ``ConfigEntry.isDefault()``: a value inherited from server.properties (4) is
*not* a default, which is why ``kafka-topics --describe`` lists it under Configs.
"""
from collections import namedtuple
from dataclasses import dataclass, field

from kbroker.client.cluster import Cluster, raise_for_code

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4

SOURCE_NAMES = {
    0: "UNKNOWN_CONFIG", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}
DYNAMIC_TOPIC_CONFIG = 1
DEFAULT_CONFIG = 5

# ListOffsets special timestamps.
LATEST = -1
EARLIEST = -2

ConfigEntry = namedtuple("ConfigEntry", "name value source is_default read_only is_sensitive synonyms")
ConfigSynonym = namedtuple("ConfigSynonym", "name value source")


@dataclass
class NewTopic:
    """A topic to create. ``replica_assignment`` ({partition: [broker ids]}) replaces the two counts (both -1)."""
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    replica_assignment: dict = None
    configs: dict = field(default_factory=dict)


class AdminClient:
    def __init__(self, bootstrap, client_id="kbroker-admin", timeout=30):
        self.cluster = Cluster(bootstrap, client_id=client_id, timeout=timeout)

    def close(self):
        self.cluster.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------------------------------ topics

    def metadata(self, topics=None, allow_auto_topic_creation=False):
        """The raw Metadata response dict (topics None = all topics)."""
        return self.cluster.metadata(topics, allow_auto_topic_creation=allow_auto_topic_creation)

    def list_topics(self, include_internal=True):
        resp = self.cluster.metadata(None)
        return sorted(t["name"] for t in resp["topics"]
                      if not t["error_code"] and (include_internal or not t["is_internal"]))

    def create_topics(self, new_topics, timeout_ms=30000, validate_only=False):
        """Create ``NewTopic``s -> {name: result dict (num_partitions, replication_factor, configs, ...)}."""
        topics = []
        for t in new_topics:
            assignment = t.replica_assignment or {}
            topics.append({
                "name": t.name,
                "num_partitions": -1 if assignment else t.num_partitions,
                "replication_factor": -1 if assignment else t.replication_factor,
                "assignments": [{"partition_index": p, "broker_ids": list(b)} for p, b in sorted(assignment.items())],
                "configs": [{"name": k, "value": v} for k, v in (t.configs or {}).items()],
            })
        resp = self.cluster.controller().request(
            "CreateTopics", {"topics": topics, "timeout_ms": timeout_ms, "validate_only": validate_only})
        out = {}
        for r in resp["topics"]:
            raise_for_code(r["error_code"], r["error_message"], "creating topic %s" % r["name"])
            out[r["name"]] = r
        return out

    def create_topic(self, name, num_partitions=-1, replication_factor=-1, configs=None, replica_assignment=None,
                     timeout_ms=30000, validate_only=False):
        return self.create_topics([NewTopic(name, num_partitions, replication_factor, replica_assignment,
                                            dict(configs or {}))], timeout_ms, validate_only)[name]

    def delete_topics(self, names, timeout_ms=30000):
        names = list(names)
        resp = self.cluster.controller().request(
            "DeleteTopics", {"topic_names": names, "topics": [{"name": n} for n in names], "timeout_ms": timeout_ms})
        out = {}
        for r in resp["responses"]:
            raise_for_code(r["error_code"], r["error_message"], "deleting topic %s" % r["name"])
            out[r["name"]] = r
        for n in names:
            self.cluster.topics.pop(n, None)
        return out

    def create_partitions(self, new_counts, timeout_ms=30000, validate_only=False):
        """``new_counts``: {topic: total_count} or {topic: (total_count, [[broker ids] per new partition])}."""
        topics = []
        for name, spec in new_counts.items():
            count, assignments = (spec, None) if isinstance(spec, int) else spec
            topics.append({"name": name, "count": count,
                           "assignments": None if assignments is None
                           else [{"broker_ids": list(b)} for b in assignments]})
        resp = self.cluster.controller().request(
            "CreatePartitions", {"topics": topics, "timeout_ms": timeout_ms, "validate_only": validate_only})
        out = {}
        for r in resp["results"]:
            raise_for_code(r["error_code"], r["error_message"], "adding partitions to %s" % r["name"])
            out[r["name"]] = r
        return out

    # ------------------------------------------------------------------------------------------ configs

    def describe_configs(self, resources, keys=None, include_synonyms=True):
        """``resources``: [(resource_type, name)] -> {(resource_type, name): [ConfigEntry]} in broker order."""
        resources = list(resources)
        conn = self.cluster.any_connection()
        resp = conn.request("DescribeConfigs", {
            "resources": [{"resource_type": t, "resource_name": n,
                           "configuration_keys": None if keys is None else list(keys)} for t, n in resources],
            "include_synonyms": include_synonyms})
        version = conn.last_version
        out = {}
        for r in resp["results"]:
            what = "%s %s" % ("topic" if r["resource_type"] == RESOURCE_TOPIC else "broker", r["resource_name"])
            raise_for_code(r["error_code"], r["error_message"], "describing configs of " + what)
            out[(r["resource_type"], r["resource_name"])] = [
                _entry(c, r["resource_type"], version) for c in r["configs"]]
        return out

    def topic_configs(self, topic):
        return self.describe_configs([(RESOURCE_TOPIC, topic)])[(RESOURCE_TOPIC, topic)]

    def alter_configs(self, changes, validate_only=False):
        """``changes``: {(resource_type, name): {key: value}} -- the COMPLETE new override set of each resource
        (AlterConfigs is not incremental: keys left out return to their defaults)."""
        resp = self.cluster.any_connection().request("AlterConfigs", {
            "resources": [{"resource_type": t, "resource_name": n,
                           "configs": [{"name": k, "value": v} for k, v in cfg.items()]}
                          for (t, n), cfg in changes.items()],
            "validate_only": validate_only})
        for r in resp["responses"]:
            raise_for_code(r["error_code"], r["error_message"], "altering configs of %s" % r["resource_name"])
        return resp

    # ------------------------------------------------------------------------------------------ offsets

    def list_offsets(self, topic, timestamps, isolation_level=0):
        """``timestamps``: {partition: ts (LATEST -1, EARLIEST -2, or ms)} -> {partition: (offset, timestamp)}."""
        return list_offsets(self.cluster, topic, timestamps, isolation_level)


def list_offsets(cluster, topic, timestamps, isolation_level=0):
    """ListOffsets to each partition's leader. An offset of -1 means no record has a timestamp >= ts."""
    by_leader = {}
    for p, ts in timestamps.items():
        by_leader.setdefault(cluster.leader_for(topic, p), {})[p] = ts
    out = {}
    for leader, parts in by_leader.items():
        conn = cluster.connection(leader)
        resp = conn.request("ListOffsets", {
            "replica_id": -1, "isolation_level": isolation_level,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": p, "timestamp": ts, "max_num_offsets": 1} for p, ts in sorted(parts.items())]}]})
        for t in resp["topics"]:
            for pr in t["partitions"]:
                raise_for_code(pr["error_code"], None, "listing offsets of %s-%d" % (topic, pr["partition_index"]))
                if conn.last_version == 0:
                    offs = pr["old_style_offsets"]
                    out[pr["partition_index"]] = (offs[0] if offs else -1, -1)
                else:
                    out[pr["partition_index"]] = (pr["offset"], pr["timestamp"])
    return out


def _entry(c, resource_type, version):
    if version == 0:
        source = DEFAULT_CONFIG if c["is_default"] else (
            DYNAMIC_TOPIC_CONFIG if resource_type == RESOURCE_TOPIC else 4)
    else:
        source = c["config_source"]
    synonyms = [ConfigSynonym(s["name"], s["value"], s["source"]) for s in c.get("synonyms") or ()]
    return ConfigEntry(c["name"], c["value"], source, source == DEFAULT_CONFIG, c["read_only"], c["is_sensitive"],
                       synonyms)


__all__ = ["AdminClient", "NewTopic", "ConfigEntry", "ConfigSynonym", "RESOURCE_TOPIC", "RESOURCE_BROKER",
           "SOURCE_NAMES", "LATEST", "EARLIEST", "list_offsets"]
