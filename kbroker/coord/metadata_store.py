"""Topic metadata over any CoordinationBackend, written exactly where and how Kafka writes it.

Order of writes follows Kafka's AdminUtils so that a crash leaves what Kafka would leave and watchers see a
complete topic: create writes ``/config/topics/<t>`` first, then ``/brokers/topics/<t>`` (the node the controller
watches); a config change rewrites ``/config/topics/<t>`` then appends ``/config/changes/config_change_<seq>``.
Partition additions are a version-conditional set of ``/brokers/topics/<t>`` (retried on a concurrent change).

Topic names (``validate_topic_name``): 1..249 chars of ``[a-zA-Z0-9._-]``, not ``.`` or ``..``; two names that
differ only by ``.`` vs ``_`` collide (metric names would clash), so the second one is refused.
"""

import re

from kbroker import errors

from .errors import BadVersionError, NodeExistsError, NoNodeError
from .znodes import (
    IsrChangeNotificationSequenceZNode,
    ClusterIdZNode, ConfigEntityChangeNotificationSequenceZNode, ConfigEntityZNode, DeleteTopicsZNode,
    TopicPartitionStateZNode, TopicPartitionsZNode, TopicsZNode, TopicZNode,
)

MAX_NAME_LENGTH = 249
# Partitions per ISR change notification node: ~45 bytes each in JSON (a 40-character topic name), so 5,000 make
# ~225 KB, well under ZooKeeper's 1 MiB jute.maxbuffer, and the controller reads them in one get.
ISR_NOTIFICATION_MAX = 5000
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name):
    """Raise InvalidTopicException (17) unless ``name`` is a legal Kafka topic name."""
    if not isinstance(name, str) or name == "":
        raise errors.InvalidTopicException("Topic name is illegal: it is empty")
    if name in (".", ".."):
        raise errors.InvalidTopicException("Topic name cannot be '.' or '..'")
    if len(name) > MAX_NAME_LENGTH:
        raise errors.InvalidTopicException(
            "Topic name is illegal: %d characters, at most %d are allowed" % (len(name), MAX_NAME_LENGTH))
    if not _LEGAL.fullmatch(name):
        raise errors.InvalidTopicException(
            "Topic name %r is illegal: only ASCII letters, digits, '.', '_' and '-' are allowed" % name)
    return name


def _legal(name):
    try:
        validate_topic_name(name)
    except errors.InvalidTopicException:
        return False
    return True


def collision_key(name):
    """Names equal under this key collide ('.' and '_' map to the same metric name)."""
    return name.replace(".", "_")


def _check_assignment(assignment, first_partition=0):
    if not assignment:
        raise errors.InvalidPartitions("at least one partition is required")
    ids = sorted(assignment)
    if ids != list(range(first_partition, first_partition + len(ids))):
        raise errors.InvalidReplicaAssignment(
            "partition ids must be consecutive from %d, got %s" % (first_partition, ids))
    sizes = {len(r) for r in assignment.values()}
    if len(sizes) != 1 or 0 in sizes:
        raise errors.InvalidReplicaAssignment("every partition needs the same, non-zero number of replicas")
    for p, replicas in assignment.items():
        if len(set(replicas)) != len(replicas):
            raise errors.InvalidReplicaAssignment("partition %d lists a broker twice: %s" % (p, list(replicas)))


class TopicStore:
    """Broker-facing topic metadata API. All methods raise kbroker.errors exceptions for Kafka-level failures."""

    def __init__(self, backend):
        self.backend = backend

    # -- topics -----------------------------------------------------------------------------------------------

    def topics(self):
        try:
            return self.backend.get_children(TopicsZNode.path())
        except NoNodeError:
            return []

    def exists(self, name):
        """False for an illegal name: it names no topic, and must not become a path into another znode (a
        DeleteTopics of 't/partitions' used to find topic t's partitions znode and delete topic t)."""
        if not _legal(name):
            return False
        return self.backend.exists(TopicZNode.path(name)) is not None

    def create_topic(self, name, assignment, configs=None):
        """Write config then assignment. TopicAlreadyExists (36) if present; InvalidTopicException on a collision."""
        validate_topic_name(name)
        assignment = {int(p): [int(b) for b in r] for p, r in assignment.items()}
        _check_assignment(assignment)
        if self.exists(name):
            raise errors.TopicAlreadyExists("Topic '%s' already exists." % name)
        key = collision_key(name)
        clash = sorted(t for t in self.topics() if t != name and collision_key(t) == key)
        if clash:
            raise errors.InvalidTopicException(
                "Topic '%s' collides with existing topics: %s" % (name, ", ".join(clash)))
        self._write_config(name, dict(configs or {}))
        try:
            self.backend.create(TopicZNode.path(name), TopicZNode.encode(assignment), makepath=True)
        except NodeExistsError:
            raise errors.TopicAlreadyExists("Topic '%s' already exists." % name) from None

    def assignment(self, name):
        """{partition: [replicas]}; UnknownTopicOrPartition (3) if the topic does not exist (or the name is illegal)."""
        try:
            if not _legal(name):
                raise NoNodeError(name)
            data, _ = self.backend.get(TopicZNode.path(name))
        except NoNodeError:
            raise errors.UnknownTopicOrPartition("Topic '%s' does not exist" % name) from None
        return TopicZNode.decode(data)

    def add_partitions(self, name, new_assignment):
        """Append partitions. ``new_assignment`` holds the new partitions (existing ones may be repeated unchanged).

        Returns the full assignment. InvalidPartitions (37) if nothing is added; InvalidReplicaAssignment (39) if
        an existing partition would change or the replica counts differ.
        """
        path = TopicZNode.path(name)
        while True:
            try:
                data, stat = self.backend.get(path)
            except NoNodeError:
                raise errors.UnknownTopicOrPartition("Topic '%s' does not exist" % name) from None
            current = TopicZNode.decode(data)
            added = {}
            for p, replicas in new_assignment.items():
                p, replicas = int(p), [int(b) for b in replicas]
                if p in current:
                    if current[p] != replicas:
                        raise errors.InvalidReplicaAssignment(
                            "partition %d of '%s' exists with replicas %s" % (p, name, current[p]))
                    continue
                added[p] = replicas
            if not added:
                raise errors.InvalidPartitions(
                    "Topic '%s' already has %d partitions; the count can only grow" % (name, len(current)))
            _check_assignment(added, first_partition=len(current))
            rf = len(next(iter(current.values()))) if current else None
            if rf is not None and len(next(iter(added.values()))) != rf:
                raise errors.InvalidReplicaAssignment(
                    "new partitions need %d replicas like the existing ones" % rf)
            merged = dict(current)
            merged.update(added)
            try:
                self.backend.set(path, TopicZNode.encode(merged), version=stat.version)
            except BadVersionError:
                continue  # somebody else changed the topic meanwhile; re-read and re-check
            except NoNodeError:
                # Deleted since the read (a DeleteTopics the controller completed meanwhile).
                raise errors.UnknownTopicOrPartition("Topic '%s' does not exist" % name) from None
            return merged

    def mark_for_deletion(self, name):
        """Kafka's delete request: create ``/admin/delete_topics/<t>`` for the controller to act on."""
        if not self.exists(name):
            raise errors.UnknownTopicOrPartition("Topic '%s' does not exist" % name)
        try:
            self.backend.create(DeleteTopicsZNode.path(name), DeleteTopicsZNode.encode(), makepath=True)
        except NodeExistsError:
            pass

    def is_marked_for_deletion(self, name):
        """Whether ``/admin/delete_topics/<name>`` exists: a DeleteTopics the controller has not completed."""
        return self.backend.exists(DeleteTopicsZNode.path(name)) is not None

    def topics_marked_for_deletion(self):
        try:
            return self.backend.get_children(DeleteTopicsZNode.path())
        except NoNodeError:
            return []

    def delete_topic(self, name):
        """Remove all of the topic's metadata (what the controller does when deletion completes).

        Order: ``/brokers/topics/<t>`` (subtree), ``/config/topics/<t>``, then the deletion marker.
        UnknownTopicOrPartition (3) if the topic does not exist (a stale marker is still cleared).
        """
        missing = False
        try:
            self.backend.delete(TopicZNode.path(name), recursive=True)
        except NoNodeError:
            missing = True
        for path in (ConfigEntityZNode.path("topics", name), DeleteTopicsZNode.path(name)):
            try:
                self.backend.delete(path, recursive=True)
            except NoNodeError:
                pass
        if missing:
            raise errors.UnknownTopicOrPartition("Topic '%s' does not exist" % name)

    # -- configs ------------------------------------------------------------------------------------------------

    def topic_config(self, name):
        """The topic's overrides as {key: string}; {} when none were set."""
        try:
            data, _ = self.backend.get(ConfigEntityZNode.path("topics", name))
        except NoNodeError:
            return {}
        return ConfigEntityZNode.decode(data)

    def set_topic_config(self, name, configs):
        """Replace the topic's overrides, then notify every broker through /config/changes."""
        if not self.exists(name):
            raise errors.UnknownTopicOrPartition("Topic '%s' does not exist" % name)
        self._write_config(name, dict(configs))
        self.backend.create(ConfigEntityChangeNotificationSequenceZNode.path_prefix(),
                            ConfigEntityChangeNotificationSequenceZNode.encode("topics/" + name),
                            sequence=True, makepath=True)

    def _write_config(self, name, configs):
        path = ConfigEntityZNode.path("topics", name)
        data = ConfigEntityZNode.encode(configs)
        try:
            self.backend.set(path, data)
        except NoNodeError:
            try:
                self.backend.create(path, data, makepath=True)
            except NodeExistsError:
                self.backend.set(path, data)

    # -- partition state ---------------------------------------------------------------------------------------

    def set_partition_state(self, name, partition, leader, isr, leader_epoch, controller_epoch, expected_version=None):
        """Write ``.../partitions/<p>/state``; returns its new data version (Kafka's zkVersion).

        With ``expected_version`` the write is conditional (ISR updates by the leader) and may raise
        BadVersionError from kbroker.coord.errors; without it the node is created or overwritten (controller).
        """
        path = TopicPartitionStateZNode.path(name, partition)
        data = TopicPartitionStateZNode.encode(leader, leader_epoch, isr, controller_epoch)
        if expected_version is not None:
            return self.backend.set(path, data, version=expected_version).version
        try:
            return self.backend.set(path, data).version
        except NoNodeError:
            try:
                self.backend.create(path, data, makepath=True)
                return 0
            except NodeExistsError:
                return self.backend.set(path, data).version

    def set_partition_states_if(self, writes):
        """Conditional writes of several ``.../partitions/<p>/state`` znodes (leaders' ISR changes) in one
        ``backend.set_many``: ``writes`` [(name, partition, leader, isr, leader_epoch, controller_epoch,
        expected_version)] -> one entry per write, in order: its new data version, or the CoordinationError the
        single conditional write would have raised (BadVersionError, NoNodeError, ConnectionLossError)."""
        results = self.backend.set_many(
            [(TopicPartitionStateZNode.path(name, p), TopicPartitionStateZNode.encode(leader, epoch, isr, cepoch),
              version) for name, p, leader, isr, epoch, cepoch, version in writes])
        return [r if isinstance(r, Exception) else r.version for r in results]

    def notify_isr_changes(self, tps):
        """Announce several partitions' ISR changes: sequential nodes of up to ``ISR_NOTIFICATION_MAX`` partitions
        each (Kafka's format lists many per node: ReplicaManager.maybePropagateIsrChanges)."""
        tps = list(tps)
        for i in range(0, len(tps), ISR_NOTIFICATION_MAX):
            self.backend.create(IsrChangeNotificationSequenceZNode.path_prefix(),
                                IsrChangeNotificationSequenceZNode.encode(tps[i:i + ISR_NOTIFICATION_MAX]),
                                sequence=True, makepath=True)

    def partition_state(self, name, partition):
        """PartitionState(leader, leader_epoch, isr, controller_epoch, zk_version) or None if never written."""
        try:
            data, stat = self.backend.get(TopicPartitionStateZNode.path(name, partition))
        except NoNodeError:
            return None
        return TopicPartitionStateZNode.decode(data, stat.version)

    def partition_states(self, tps):
        """``partition_state`` of several partitions in one pipelined read: [PartitionState or None] in order."""
        got = self.backend.get_many([TopicPartitionStateZNode.path(t, p) for t, p in tps])
        return [None if data is None else TopicPartitionStateZNode.decode(data, stat.version) for data, stat in got]

    def partitions_with_state(self, name):
        try:
            return sorted(int(p) for p in self.backend.get_children(TopicPartitionsZNode.path(name)))
        except NoNodeError:
            return []

    # -- cluster ----------------------------------------------------------------------------------------------

    def cluster_id(self):
        """The cluster id, created on first call (create-if-absent; a lost race reads the winner's id)."""
        path = ClusterIdZNode.path()
        try:
            data, _ = self.backend.get(path)
            return ClusterIdZNode.decode(data)
        except NoNodeError:
            pass
        cid = ClusterIdZNode.generate()
        try:
            self.backend.create(path, ClusterIdZNode.encode(cid), makepath=True)
            return cid
        except NodeExistsError:
            data, _ = self.backend.get(path)
            return ClusterIdZNode.decode(data)
