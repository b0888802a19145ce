"""AdminClient: topic administration, configs, metadata and offsets over kbroker's codec (blocking sockets).

Routing (Kafka's): CreateTopics, DeleteTopics, CreatePartitions and Alter/ListPartitionReassignments go to the
controller (Metadata v1+ ``controller_id``; any broker when the broker only speaks Metadata v0);
DescribeConfigs/AlterConfigs for topics and the cluster-default broker resource ("") go to any broker, for a broker
resource named by its id to that broker; ListOffsets goes to each partition's leader.

Every call raises on the first failed topic/resource/partition, with the ``KafkaError`` subclass of the wire code
(``kbroker.errors.error_for_code``) and the broker's own error message when it sent one (CreateTopics v1+,
DeleteTopics v5+, CreatePartitions, Describe/AlterConfigs). Successful calls return the per-item results.

Config entries are normalised across DescribeConfigs versions into ``ConfigEntry(name, value, source, is_default,
read_only, is_sensitive, synonyms)``; ``source`` uses Kafka's ConfigSource ids (1 DYNAMIC_TOPIC_CONFIG,
2 DYNAMIC_BROKER_CONFIG, 3 DYNAMIC_DEFAULT_BROKER_CONFIG, 4 STATIC_BROKER_CONFIG, 5 DEFAULT_CONFIG); a v0 answer only
has ``is_default``, so its source is 5 when default, else 1 for a topic and 4 for a broker. ``is_default`` is
``source == 5``, as in Kafka's Java ``ConfigEntry.isDefault()``: a value inherited from server.properties (4) is
*not* a default, which is why ``kafka-topics --describe`` lists it under Configs.

Consumer groups (the group coordinator of each group is found with FindCoordinator key_type 0, answered by any
broker): ListGroups goes to every broker (each lists only the groups it coordinates); DescribeGroups, OffsetFetch,
OffsetCommit and DeleteGroups go to the group's coordinator. COORDINATOR_LOAD_IN_PROGRESS (14),
COORDINATOR_NOT_AVAILABLE (15) and NOT_COORDINATOR (16) are retried -- FindCoordinator again, 100 ms apart -- until
``group_retry_s`` (10 s) has passed, like the Java admin client's retries; any other error raises.
Members' assignments are decoded with the "consumer" protocol codec (``kbroker.coordinator.consumer_protocol``);
a group of another protocol type, or bytes that do not decode, gives an empty assignment.
"""
import time
from collections import namedtuple
from dataclasses import dataclass, field

from kbroker import errors
from kbroker.client.cluster import Cluster, raise_for_code
from kbroker.client.connection import resolve_api
from kbroker.coordinator.consumer_protocol import PROTOCOL_TYPE as CONSUMER_PROTOCOL_TYPE, decode_assignment

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

# Consumer groups. ``assignment`` is a list of (topic, partition) in the order the leader wrote it.
Coordinator = namedtuple("Coordinator", "node_id host port")
GroupListing = namedtuple("GroupListing", "group_id protocol_type state")
GroupMember = namedtuple("GroupMember", "member_id group_instance_id client_id client_host assignment")
GroupDescription = namedtuple("GroupDescription", "group_id state protocol_type protocol members coordinator")

# Transactions (KIP-664). None = "absent" (the wire's -1): no open transaction, no marker yet, not started.
ProducerState = namedtuple("ProducerState", "producer_id producer_epoch last_sequence last_timestamp "
                                            "coordinator_epoch current_txn_start_offset")
TransactionListing = namedtuple("TransactionListing", "transactional_id producer_id state")
TransactionDescription = namedtuple("TransactionDescription", "coordinator_id transactional_id state producer_id "
                                                              "producer_epoch transaction_timeout_ms "
                                                              "transaction_start_time_ms topic_partitions")

# Wire codes after which a group request is sent again to a freshly looked-up coordinator.
COORDINATOR_RETRY_CODES = (14, 15, 16)   # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
GROUP_ID_NOT_FOUND = 69
# FindCoordinator key types.
GROUP_KEY = 0
TRANSACTION_KEY = 1


@dataclass
class NewTopic:
    """A topic to create. ``replica_assignment`` ({partition: [broker ids]}) replaces the two counts (both -1)."""
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    replica_assignment: dict = None
    configs: dict = field(default_factory=dict)


class AdminClient:
    def __init__(self, bootstrap, client_id="kbroker-admin", timeout=30, group_retry_s=10.0):
        self.cluster = Cluster(bootstrap, client_id=client_id, timeout=timeout)
        self.group_retry_s = group_retry_s

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

    def _config_groups(self, resources):
        """[(connection, [resource])]: a broker resource named by a broker id goes to that broker (only it knows
        its own configs), every other resource (topics, the cluster default "") to any broker -- Kafka's
        AdminClient routing."""
        groups = {}
        for t, n in resources:
            node = int(n) if t == RESOURCE_BROKER and n.strip().isdigit() else None
            groups.setdefault(node, []).append((t, n))
        return [(self.cluster.any_connection() if node is None else self.cluster.connection(node), rs)
                for node, rs in groups.items()]

    def describe_configs(self, resources, keys=None, include_synonyms=True):
        """``resources``: [(resource_type, name)] -> {(resource_type, name): [ConfigEntry]} in broker order."""
        out = {}
        for conn, group in self._config_groups(list(resources)):
            resp = conn.request("DescribeConfigs", {
                "resources": [{"resource_type": t, "resource_name": n,
                               "configuration_keys": None if keys is None else list(keys)} for t, n in group],
                "include_synonyms": include_synonyms})
            version = conn.last_version
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
        for conn, group in self._config_groups(list(changes)):
            resp = conn.request("AlterConfigs", {
                "resources": [{"resource_type": t, "resource_name": n,
                               "configs": [{"name": k, "value": v} for k, v in changes[(t, n)].items()]}
                              for t, n in group],
                "validate_only": validate_only})
            for r in resp["responses"]:
                raise_for_code(r["error_code"], r["error_message"], "altering configs of %s" % r["resource_name"])
        return resp

    # ------------------------------------------------------------------------------------------ reassignments

    def alter_partition_reassignments(self, targets, timeout_ms=60000):
        """AlterPartitionReassignments (KIP-455), sent to the controller: ``targets`` {(topic, p): [replicas] or
        None = cancel} -> {(topic, p): (error code, message)} (the per-partition answers, nothing raised for them)."""
        by_topic = {}
        for (t, p), replicas in targets.items():
            by_topic.setdefault(t, []).append({"partition_index": p,
                                               "replicas": None if replicas is None else list(replicas)})
        resp = self.cluster.controller().request("AlterPartitionReassignments", {
            "timeout_ms": timeout_ms, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})
        raise_for_code(resp["error_code"], resp["error_message"], "altering partition reassignments")
        return {(t["name"], p["partition_index"]): (p["error_code"], p["error_message"])
                for t in resp["responses"] for p in t["partitions"]}

    def list_partition_reassignments(self, partitions=None, timeout_ms=60000):
        """ListPartitionReassignments (KIP-455): {(topic, p): (replicas, adding, removing)} of the ongoing ones
        among ``partitions`` ([(topic, p)] or None = all)."""
        topics = None
        if partitions is not None:
            by_topic = {}
            for t, p in partitions:
                by_topic.setdefault(t, []).append(p)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
        resp = self.cluster.controller().request("ListPartitionReassignments", {"timeout_ms": timeout_ms,
                                                                               "topics": topics})
        raise_for_code(resp["error_code"], resp["error_message"], "listing partition reassignments")
        return {(t["name"], p["partition_index"]): (p["replicas"], p["adding_replicas"], p["removing_replicas"])
                for t in resp["topics"] for p in t["partitions"]}

    # ------------------------------------------------------------------------------------------ offsets

    def list_offsets(self, topic, timestamps, isolation_level=0):
        """``timestamps``: {partition: ts (LATEST -1, EARLIEST -2, or ms)} -> {partition: (offset, timestamp)}."""
        return list_offsets(self.cluster, topic, timestamps, isolation_level)

    # ------------------------------------------------------------------------------------------ consumer groups

    def find_coordinator(self, group_id):
        """The group's coordinator as ``Coordinator(node_id, host, port)``; its address joins ``cluster.brokers``."""
        return self._retry_coordinator(group_id, lambda: self._find_coordinator_once(group_id))

    def _find_coordinator_once(self, group_id, key_type=GROUP_KEY):
        """One FindCoordinator for ``group_id`` -- a transactional id with ``key_type`` TRANSACTION_KEY (1)."""
        conn = self.cluster.any_connection()
        resp = conn.request("FindCoordinator", {"key": group_id, "key_type": key_type,
                                                "coordinator_keys": [group_id]})
        if conn.last_version >= 4:
            c = resp["coordinators"][0]
            code, message, node, host, port = c["error_code"], c["error_message"], c["node_id"], c["host"], c["port"]
        else:
            code, message = resp["error_code"], resp.get("error_message")
            node, host, port = resp["node_id"], resp["host"], resp["port"]
        raise_for_code(code, message, "finding the coordinator of %s %s"
                       % ("group" if key_type == GROUP_KEY else "transactional id", group_id))
        self.cluster.brokers[node] = (host, port)
        return Coordinator(node, host, port)

    def _retry_coordinator(self, group_id, fn, codes=COORDINATOR_RETRY_CODES):
        """Run ``fn`` until it stops failing with a coordinator error (``codes``) or ``group_retry_s`` has
        passed."""
        deadline = time.monotonic() + self.group_retry_s
        while True:
            try:
                return fn()
            except (errors.KafkaError, OSError) as e:
                code = getattr(e, "code", None)
                retry = code in codes or isinstance(e, (errors.NetworkException, OSError))
                if not retry or time.monotonic() >= deadline:
                    raise
            time.sleep(0.1)

    def _coordinator_request(self, group_id, api, body, check):
        """Send ``body`` to the group's coordinator; ``check(resp, version, coordinator)`` raises on errors and
        returns the result (a coordinator error there makes the whole exchange retry)."""
        def once():
            coord = self._find_coordinator_once(group_id)
            conn = self.cluster.connection(coord.node_id)
            resp = conn.request(api, body)
            return check(resp, conn.last_version, coord)
        return self._retry_coordinator(group_id, once)

    def list_groups(self):
        """Every group of every broker -> [GroupListing(group_id, protocol_type, state or None)] sorted by id."""
        self.cluster.metadata([])
        out = {}
        for node in sorted(self.cluster.brokers):
            def once(node=node):
                conn = self.cluster.connection(node)
                resp = conn.request("ListGroups", {"states_filter": [], "types_filter": []})
                raise_for_code(resp["error_code"], None, "listing the groups of broker %d" % node)
                return resp["groups"], conn.last_version
            groups, version = self._retry_coordinator("", once)
            for g in groups:
                # ListGroups v4+ reports the state; older versions do not (None).
                out[g["group_id"]] = GroupListing(g["group_id"], g["protocol_type"],
                                                  g["group_state"] if version >= 4 else None)
        return [out[k] for k in sorted(out)]

    def describe_groups(self, group_ids):
        """{group_id: GroupDescription} in the order asked. An unknown group is described as state "Dead" with no
        members (what the broker answers; GROUP_ID_NOT_FOUND from newer brokers is mapped to the same)."""
        out = {}
        for gid in group_ids:
            def check(resp, version, coord, gid=gid):
                g = next((x for x in resp["groups"] if x["group_id"] == gid), None)
                if g is None:
                    raise errors.KafkaError("DescribeGroups answer does not mention group %s" % gid)
                if g["error_code"] == GROUP_ID_NOT_FOUND:
                    return GroupDescription(gid, "Dead", "", "", [], coord)
                raise_for_code(g["error_code"], None, "describing group %s" % gid)
                members = [GroupMember(m["member_id"], m.get("group_instance_id"), m["client_id"], m["client_host"],
                                       _member_assignment(g["protocol_type"], m["member_assignment"]))
                           for m in g["members"]]
                return GroupDescription(gid, g["group_state"], g["protocol_type"], g["protocol_data"], members, coord)
            out[gid] = self._coordinator_request(gid, "DescribeGroups",
                                                 {"groups": [gid], "include_authorized_operations": False}, check)
        return out

    def list_group_offsets(self, group_id, partitions=None):
        """Committed offsets -> {(topic, partition): offset}; partitions without a commit (offset -1) are left out.
        ``partitions`` None means every committed partition (OffsetFetch v2+ ``topics`` null; v0/v1 cannot say
        "all", so every partition of every topic is asked for)."""
        def check(resp, version, coord):
            if version >= 8:
                g = resp["groups"][0]
                raise_for_code(g["error_code"], None, "fetching the offsets of group %s" % group_id)
                topics = g["topics"]
            else:
                raise_for_code(resp.get("error_code", 0), None, "fetching the offsets of group %s" % group_id)
                topics = resp["topics"]
            out = {}
            for t in topics:
                for p in t["partitions"]:
                    raise_for_code(p["error_code"], None, "fetching the offset of %s-%d for group %s"
                                   % (t["name"], p["partition_index"], group_id))
                    if p["committed_offset"] >= 0:
                        out[(t["name"], p["partition_index"])] = p["committed_offset"]
            return out

        conn = self.cluster.any_connection()
        version = conn.pick_version(resolve_api("OffsetFetch"))
        if partitions is None and version < 2:
            self.cluster.metadata(None)
            partitions = [(t, p) for t in sorted(self.cluster.topics) for p in sorted(self.cluster.topics[t])]
        topics = None if partitions is None else _by_topic(partitions)
        body = {"group_id": group_id, "topics": topics, "require_stable": False,
                "groups": [{"group_id": group_id, "topics": topics}]}
        return self._coordinator_request(group_id, "OffsetFetch", body, check)

    def alter_group_offsets(self, group_id, offsets, generation_id=-1, member_id="", metadata=""):
        """Commit ``offsets`` ({(topic, partition): offset}) for the group. Generation -1 with an empty member id is
        the "admin" commit Kafka accepts only while the group has no members (else UNKNOWN_MEMBER_ID 25 /
        ILLEGAL_GENERATION 22 / REBALANCE_IN_PROGRESS 27 raise)."""
        topics = [{"name": t, "partitions": [
            {"partition_index": p, "committed_offset": offsets[(t, p)], "committed_leader_epoch": -1,
             "commit_timestamp": -1, "committed_metadata": metadata} for p in parts]}
            for t, parts in ((x["name"], x["partition_indexes"]) for x in _by_topic(offsets))]
        body = {"group_id": group_id, "generation_id_or_member_epoch": generation_id, "member_id": member_id,
                "group_instance_id": None, "retention_time_ms": -1, "topics": topics}

        def check(resp, version, coord):
            for t in resp["topics"]:
                for p in t["partitions"]:
                    raise_for_code(p["error_code"], None, "committing the offset of %s-%d for group %s"
                                   % (t["name"], p["partition_index"], group_id))
            return resp
        self._coordinator_request(group_id, "OffsetCommit", body, check)

    def delete_groups(self, group_ids):
        """Delete groups (each must be empty) -> {group_id: None when deleted, else the KafkaError}; never raises
        for a per-group error, so a tool can report every group."""
        out = {}
        for gid in group_ids:
            def check(resp, version, coord, gid=gid):
                r = next((x for x in resp["results"] if x["group_id"] == gid), None)
                if r is None:
                    raise errors.KafkaError("DeleteGroups answer does not mention group %s" % gid)
                if r["error_code"] in COORDINATOR_RETRY_CODES:
                    raise_for_code(r["error_code"], None, "deleting group %s" % gid)
                return r["error_code"]
            code = self._coordinator_request(gid, "DeleteGroups", {"groups_names": [gid]}, check)
            if code:
                try:
                    raise_for_code(code, None, "deleting group %s" % gid)
                except errors.KafkaError as e:
                    out[gid] = e
            else:
                out[gid] = None
        return out

    def partition_offsets(self, partitions, timestamp):
        """ListOffsets for many topics -> {(topic, partition): (offset, timestamp)} (LATEST -1, EARLIEST -2 or ms)."""
        out = {}
        for topic, parts in ((x["name"], x["partition_indexes"]) for x in _by_topic(partitions)):
            for p, res in list_offsets(self.cluster, topic, {p: timestamp for p in parts}).items():
                out[(topic, p)] = res
        return out

    # ------------------------------------------------------------------------------------------ transactions

    def describe_producers(self, partitions, broker_id=None):
        """DescribeProducers (61) -> {(topic, partition): [ProducerState]} for ``partitions`` [(topic, p)], asked of
        each partition's leader, or of ``broker_id``'s replica when given (any replica answers from its own
        producer state). NOT_LEADER_OR_FOLLOWER from a leader is retried after a metadata refresh for
        ``group_retry_s`` (a leader moved), never when ``broker_id`` was named; every other per-partition error
        raises, naming the partition."""
        pending = sorted(set(partitions))
        out = {}
        deadline = time.monotonic() + self.group_retry_s
        while pending:
            by_node = {}
            for t, p in pending:
                node = broker_id if broker_id is not None else self.cluster.leader_for(t, p)
                by_node.setdefault(node, []).append((t, p))
            retry = []
            for node, tps in sorted(by_node.items()):
                resp = self.cluster.connection(node).request("DescribeProducers", {"topics": [
                    {"name": x["name"], "partition_indexes": x["partition_indexes"]} for x in _by_topic(tps)]})
                for t in resp["topics"]:
                    for pr in t["partitions"]:
                        tp = (t["name"], pr["partition_index"])
                        code = pr["error_code"]
                        if code == errors.NOT_LEADER_OR_FOLLOWER and broker_id is None \
                                and time.monotonic() < deadline:
                            retry.append(tp)
                            continue
                        raise_for_code(code, pr["error_message"], "describing the producers of %s-%d on %s"
                                       % (tp[0], tp[1], "leader" if broker_id is None else "broker %d" % node))
                        out[tp] = [_producer_state(x) for x in pr["active_producers"]]
            pending = retry
            if pending:
                time.sleep(0.1)
                self.cluster.metadata([t for t, _ in pending])
        return {tp: out[tp] for tp in sorted(set(partitions))}

    def list_transactions(self, state_filters=(), producer_id_filters=(), duration_filter_ms=-1):
        """ListTransactions (66) to every broker (each lists the transactional ids it coordinates) -> {broker id:
        [TransactionListing]} in broker id order. COORDINATOR_LOAD_IN_PROGRESS (14) is retried for
        ``group_retry_s``; any other error raises, naming the broker. ``duration_filter_ms`` >= 0 needs v1 (Kafka
        3.8+, KIP-994): a broker that only speaks v0 cannot filter, so it is refused rather than ignored."""
        self.cluster.metadata([])
        body = {"state_filters": list(state_filters), "producer_id_filters": list(producer_id_filters),
                "duration_filter": duration_filter_ms}
        out = {}
        for node in sorted(self.cluster.brokers):
            def once(node=node):
                conn = self.cluster.connection(node)
                if duration_filter_ms >= 0 and conn.pick_version(resolve_api("ListTransactions")) < 1:
                    raise errors.UnsupportedVersion("broker %d cannot filter transactions by duration "
                                                    "(ListTransactions v1)" % node)
                resp = conn.request("ListTransactions", body)
                code = resp["error_code"]
                if code == errors.COORDINATOR_LOAD_IN_PROGRESS:
                    raise_for_code(code, None, "listing the transactions of broker %d" % node)
                raise_for_code(code, None, "ListTransactions request sent to broker %d" % node)
                return [TransactionListing(x["transactional_id"], x["producer_id"], x["transaction_state"])
                        for x in resp["transaction_states"]]
            out[node] = self._retry_coordinator("", once, codes=(errors.COORDINATOR_LOAD_IN_PROGRESS,))
        return out

    def describe_transactions(self, transactional_ids, missing_ok=False):
        """DescribeTransactions (65) to each id's transaction coordinator (FindCoordinator key type 1) ->
        {transactional id: TransactionDescription} in the order asked. Coordinator errors (14, 15, 16) are
        retried for ``group_retry_s`` with a fresh lookup; TRANSACTIONAL_ID_NOT_FOUND (105) raises unless
        ``missing_ok`` (then the id maps to None); any other error raises."""
        out = {}
        for tid in transactional_ids:
            def once(tid=tid):
                coord = self._find_coordinator_once(tid, TRANSACTION_KEY)
                resp = self.cluster.connection(coord.node_id).request(
                    "DescribeTransactions", {"transactional_ids": [tid]})
                st = next((x for x in resp["transaction_states"] if x["transactional_id"] == tid), None)
                if st is None:
                    raise errors.KafkaError("DescribeTransactions answer does not mention %s" % tid)
                if st["error_code"] == errors.TRANSACTIONAL_ID_NOT_FOUND and missing_ok:
                    return None
                raise_for_code(st["error_code"], None, "describing transactional id %s" % tid)
                tps = sorted((t["topic"], p) for t in st["topics"] for p in t["partitions"])
                start = st["transaction_start_time_ms"]
                return TransactionDescription(coord.node_id, tid, st["transaction_state"], st["producer_id"],
                                              st["producer_epoch"], st["transaction_timeout_ms"],
                                              start if start >= 0 else None, tps)
            out[tid] = self._retry_coordinator(tid, once)
        return out

    def abort_transaction(self, topic, partition, producer_id, producer_epoch, coordinator_epoch):
        """WriteTxnMarkers (27) with an ABORT marker for one partition, to its leader (what Kafka's
        ``Admin.abortTransaction`` sends: the operator closes a hanging transaction; the broker wants ClusterAction
        on the Cluster). NOT_LEADER_OR_FOLLOWER, REPLICA_NOT_AVAILABLE, BROKER_NOT_AVAILABLE and
        UNKNOWN_TOPIC_OR_PARTITION are retried after a metadata refresh for ``group_retry_s``; any other error
        raises."""
        body = {"markers": [{"producer_id": producer_id, "producer_epoch": producer_epoch,
                             "transaction_result": False, "coordinator_epoch": coordinator_epoch,
                             "topics": [{"name": topic, "partition_indexes": [partition]}]}]}
        retriable = (errors.NOT_LEADER_OR_FOLLOWER, errors.REPLICA_NOT_AVAILABLE, errors.BROKER_NOT_AVAILABLE,
                     errors.UNKNOWN_TOPIC_OR_PARTITION)
        deadline = time.monotonic() + self.group_retry_s
        refresh = False
        while True:
            try:
                leader = self.cluster.leader_for(topic, partition, refresh=refresh)
                resp = self.cluster.connection(leader).request("WriteTxnMarkers", body)
                code = next((pr["error_code"] for m in resp["markers"] if m["producer_id"] == producer_id
                             for t in m["topics"] if t["name"] == topic
                             for pr in t["partitions"] if pr["partition_index"] == partition), None)
                if code is None:
                    raise errors.KafkaError("WriteTxnMarkers answer does not mention %s-%d of producer %d"
                                            % (topic, partition, producer_id))
                if code not in retriable or time.monotonic() >= deadline:
                    raise_for_code(code, None, "aborting the transaction of producer %d on %s-%d"
                                   % (producer_id, topic, partition))
                    return
            except (errors.LeaderNotAvailable, errors.UnknownTopicOrPartition):
                if time.monotonic() >= deadline:
                    raise
            refresh = True
            time.sleep(0.1)


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


def _by_topic(partitions):
    """[(topic, partition)] -> [{"name": topic, "partition_indexes": [sorted partitions]}] in topic order."""
    by = {}
    for t, p in partitions:
        by.setdefault(t, set()).add(p)
    return [{"name": t, "partition_indexes": sorted(by[t])} for t in sorted(by)]


def _producer_state(x):
    """A DescribeProducers entry -> ProducerState; -1 ("none") becomes None for the coordinator epoch and the
    open transaction's first offset, as the Java admin's OptionalInt/OptionalLong."""
    return ProducerState(x["producer_id"], x["producer_epoch"], x["last_sequence"], x["last_timestamp"],
                         x["coordinator_epoch"] if x["coordinator_epoch"] >= 0 else None,
                         x["current_txn_start_offset"] if x["current_txn_start_offset"] >= 0 else None)


def _member_assignment(protocol_type, data):
    """A member's assignment bytes -> [(topic, partition)]; empty for non-consumer groups or undecodable bytes."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE or not data:
        return []
    try:
        _, a = decode_assignment(bytes(data))
    except Exception:   # SchemaError/ValueError: a client wrote bytes we cannot read; describe must still work
        return []
    return [(t["topic"], p) for t in a["assigned_partitions"] for p in t["partitions"]]


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
           "SOURCE_NAMES", "LATEST", "EARLIEST", "list_offsets", "Coordinator", "GroupListing", "GroupMember",
           "GroupDescription", "ProducerState", "TransactionListing", "TransactionDescription"]
