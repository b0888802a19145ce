"""Topic administration for the request handlers: create, delete, add partitions, describe and alter configs.

Every change is written to the coordination backend (Kafka's znodes, through ``TopicStore``) and then carried out
by the active controller from its watches -- the same path a topic written by ``kbroker-admin --zookeeper`` or by
Kafka's own tools takes, in embedded and ZooKeeper mode alike. Calls that the client expects to be visible when
they return (CreateTopics, DeleteTopics, CreatePartitions) then wait, bounded by the request's timeout, until this
broker's metadata cache shows the result; a wait that runs out answers REQUEST_TIMED_OUT (7), as Kafka does, while
the change itself still completes.

Topic configs: ``/config/topics/<t>`` is the truth. A change is announced with a ``/config/changes`` sequential node;
every broker watches that and re-reads the overrides of the topics it hosts (``ConfigWatcher`` -> ``TopicConfigs``,
which owns the LogConfig each topic runs with here), so AlterConfigs sent to any broker takes effect on every
broker.

Partition ceilings (issue 8: a 70-byte CreateTopics of 1,000,000 partitions hung the broker for good). Kafka has
none by default; these refuse before any replica is assigned or znode written, in well under a millisecond:

* ``max.topic.partitions`` (10,000): a topic may not have more partitions (CreateTopics count or explicit
  assignment, CreatePartitions' new total, auto-creation) -> INVALID_PARTITIONS (37);
* ``max.request.partitions`` (10,000): partitions one CreateTopics / CreatePartitions request may add, all its
  topics together (checked by the handlers, ``PartitionAllowance``) -> INVALID_PARTITIONS for the topics beyond;
* ``max.broker.partitions`` (50,000; KIP-578's name): partition replicas one broker may host, counted from this
  broker's metadata plus what this broker created and its metadata does not show yet -> POLICY_VIOLATION (44).
  Brokers creating topics at the same moment can each pass the check (KIP-578 has the same race).

Every refusal carries a message naming the key and both numbers (CreateTopics v1+ and CreatePartitions send it).
"""
import logging
import time
from collections import Counter

import gevent

from kbroker import errors
from kbroker.config import (CONFIG_SOURCE_CODES, effective_topic_config, format_value,
                            log_config_for, validate_topic_config)
from kbroker.controller.assignment import assign_replicas_to_brokers, start_index_for_new_partitions
from kbroker.controller.topics import create_topic as write_new_topic, live_broker_hosts, live_brokers
from kbroker.coord.errors import NoNodeError
from kbroker.coord.metadata_store import validate_topic_name
from kbroker.coord.znodes import ConfigEntityChangeNotificationSequenceZNode
from kbroker.internal_topics import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC
from kbroker.log.config import LogConfig
from kbroker.timeslice import TimeSlice

log = logging.getLogger(__name__)

# Kafka's DescribeConfigsResponse ConfigSource: 1 TOPIC_CONFIG, 2 DYNAMIC_BROKER_CONFIG, 3
# DYNAMIC_DEFAULT_BROKER_CONFIG, 4 STATIC_BROKER_CONFIG, 5 DEFAULT_CONFIG.
_SOURCE_IDS = CONFIG_SOURCE_CODES
DEFAULT_TIMEOUT_MS = 30000
POLL_S = 0.02
# Defaults of the partition ceilings (kbroker/config/keys.py has the same), for brokers built without them.
MAX_TOPIC_PARTITIONS = 10000
MAX_REQUEST_PARTITIONS = 10000
MAX_BROKER_PARTITIONS = 50000
# A topic this broker created counts as pending (not yet in its metadata) for at most this long.
PENDING_S = 120.0


class ConfigDescription:
    """One DescribeConfigs entry; source_id uses Kafka's ConfigSource ids."""
    __slots__ = ("name", "value", "source_id", "read_only", "sensitive")

    def __init__(self, name, value, source_id, read_only=False, sensitive=False):
        self.name, self.value, self.source_id = name, value, source_id
        self.read_only, self.sensitive = read_only, sensitive


def wait_for(predicate, timeout_ms, what):
    """Bounded wait on the event loop (other greenlets -- the controller, LeaderAndIsr -- run meanwhile).
    A timeout <= 0 means "do not wait" (Kafka: the change is triggered and the call returns at once)."""
    if timeout_ms <= 0:
        return
    deadline = time.monotonic() + max(0, timeout_ms) / 1000.0
    while not predicate():
        if time.monotonic() >= deadline:
            raise errors.RequestTimedOut("timed out waiting for %s" % what)
        gevent.sleep(POLL_S)


class PartitionAllowance:
    """What is left of ``max.request.partitions`` for the topics of one CreateTopics / CreatePartitions request."""

    __slots__ = ("limit", "used")

    def __init__(self, limit):
        self.limit, self.used = limit, 0

    def take(self, name, n):
        """Count ``n`` partitions for topic ``name``, or refuse them (INVALID_PARTITIONS) when they do not fit."""
        n = max(0, n)
        if self.used + n > self.limit:
            raise errors.InvalidPartitions(
                "Topic '%s' would bring the partitions this request adds to %d; max.request.partitions is %d"
                % (name, self.used + n, self.limit))
        self.used += n


class TopicAdmin:
    """Topic administration over ``store`` (TopicStore), bounded by ``config``'s ceilings, waiting on ``cache``
    (this broker's MetadataCache) for changes to show. ``apply_topic_config(topic, overrides)`` makes a config
    change this broker accepted take effect on its live partitions at once (other brokers follow through
    ``/config/changes``). Owns only the partitions created here that the cache does not show yet (``_pending``)."""

    def __init__(self, store, config, cache, apply_topic_config):
        self.store = store
        self.config = config
        self.cache = cache
        self._apply_topic_config = apply_topic_config
        # {topic: (monotonic time, {broker id: new replicas}, partition count once done)}: partitions created here
        # that the metadata cache may not show yet
        self._pending = {}

    # ------------------------------------------------------------------------------------- ceilings
    def _limit(self, key, default):
        return self.config.get(key, default)

    def request_allowance(self):
        return PartitionAllowance(self._limit("max.request.partitions", MAX_REQUEST_PARTITIONS))

    def requested_partitions(self, num_partitions, assignment=None):
        """Partitions a CreateTopics entry asks for (-1 = num.partitions), without looking at the assignment."""
        if assignment:
            return len(assignment)
        return self.config["num.partitions"] if num_partitions == -1 else num_partitions

    def current_partitions(self, name):
        """Partitions of ``name`` in this broker's metadata (0 when it shows none)."""
        return len(self.cache.partitions(name))

    def check_topic_partitions(self, name, n):
        limit = self._limit("max.topic.partitions", MAX_TOPIC_PARTITIONS)
        if n > limit:
            raise errors.InvalidPartitions("Topic '%s' would have %d partitions; max.topic.partitions is %d"
                                           % (name, n, limit))

    def _hosted_replicas(self):
        """Counter {broker id: partition replicas}: this broker's metadata plus topics created here that the
        metadata does not show yet. O(partitions) in Python: ~10 ms per 50,000."""
        cache = self.cache
        counts = Counter()
        for topic in cache.topics():
            for part in cache.partitions(topic).values():
                counts.update(part.replicas)
        now = time.monotonic()
        for topic, (since, added, total) in list(self._pending.items()):
            if now - since > PENDING_S or len(cache.partitions(topic)) >= total:
                del self._pending[topic]
            else:
                counts.update(added)
        return counts

    def _check_broker_partitions(self, name, new_assignment):
        limit = self._limit("max.broker.partitions", MAX_BROKER_PARTITIONS)
        added = Counter()
        for replicas in new_assignment.values():
            added.update(replicas)
        hosted = self._hosted_replicas()
        for broker_id, n in sorted(added.items()):
            if hosted[broker_id] + n > limit:
                raise errors.PolicyViolation(
                    "Placing the partitions of '%s' would put %d partition replicas on broker %d; "
                    "max.broker.partitions is %d" % (name, hosted[broker_id] + n, broker_id, limit))
        return added

    def _note_pending(self, name, added, total):
        _since, before, _total = self._pending.get(name, (None, Counter(), 0))
        self._pending[name] = (time.monotonic(), before + added, total)

    # ------------------------------------------------------------------------------------------- create
    def create_topic(self, name, num_partitions, replication_factor, assignment=None, configs=None,
                     validate_only=False, timeout_ms=DEFAULT_TIMEOUT_MS):
        self.check_topic_partitions(name, self.requested_partitions(num_partitions, assignment))
        kwargs = dict(default_partitions=self.config["num.partitions"],
                      default_replication_factor=self.config["default.replication.factor"],
                      validate_configs=validate_topic_config)  # ConfigError is INVALID_CONFIG (40)
        # Validate and place the replicas first, so the per-broker ceiling sees where they would go; the plan is
        # then written as an explicit assignment (placement picks a random start, a second run would differ).
        plan = write_new_topic(self.store, name, num_partitions, replication_factor, assignment, configs, True,
                               **kwargs)
        added = self._check_broker_partitions(name, plan)
        if validate_only:
            return plan
        write_new_topic(self.store, name, -1, -1, plan, configs, False, **kwargs)
        self._note_pending(name, added, len(plan))
        wait_for(lambda: self._visible(name, len(plan)), timeout_ms, "topic %s to be created" % name)
        return plan

    def _visible(self, name, n_partitions):
        parts = self.cache.partitions(name) if self.cache.contains_topic(name) else {}
        return len(parts) >= n_partitions

    def auto_create_topic(self, name, wait_ms=2000):
        """Metadata's auto-creation: create with the broker defaults; wait briefly so the first answer usually
        has leaders (the caller answers LEADER_NOT_AVAILABLE otherwise, and the client retries). An illegal name
        raises InvalidTopicException (17)."""
        validate_topic_name(name)
        try:
            self.create_topic(name, -1, -1, timeout_ms=wait_ms)
        except (errors.TopicAlreadyExists, errors.RequestTimedOut):
            pass

    def ensure_offsets_topic(self):
        """Create __consumer_offsets on first use (offsets.topic.* settings, replication factor capped by the
        live brokers, compacted). Its partitions are loaded as LeaderAndIsr makes this broker their leader."""
        if self.cache.contains_topic(GROUP_METADATA_TOPIC):
            return
        cfg = self.config
        rf = max(1, min(cfg["offsets.topic.replication.factor"], len(self.cache.alive_broker_ids())))
        configs = {"cleanup.policy": "compact", "segment.bytes": str(cfg["offsets.topic.segment.bytes"]),
                   "compression.type": "producer"}
        try:
            self.create_topic(GROUP_METADATA_TOPIC, cfg["offsets.topic.num.partitions"], rf, configs=configs)
            log.info("created %s with %d partitions", GROUP_METADATA_TOPIC, cfg["offsets.topic.num.partitions"])
        except errors.TopicAlreadyExists:
            pass

    def ensure_transaction_state_topic(self):
        """Create __transaction_state on first use (FindCoordinator for a transactional id), with Kafka's enforced
        configs (compacted, no unclean election; written uncompressed) and the transaction.state.log.* settings. The
        replication factor is capped by the live brokers like the offsets topic's, and min.insync.replicas by that
        factor: a one-broker cluster would otherwise refuse every transaction write (Kafka answers
        COORDINATOR_NOT_AVAILABLE there until the settings are lowered)."""
        if self.cache.contains_topic(TRANSACTION_STATE_TOPIC):
            return
        cfg = self.config
        rf = max(1, min(cfg["transaction.state.log.replication.factor"], len(self.cache.alive_broker_ids())))
        # compression.type stays "producer" (the only value kbroker accepts): the coordinator writes uncompressed.
        configs = {"cleanup.policy": "compact", "compression.type": "producer",
                   "unclean.leader.election.enable": "false",
                   "min.insync.replicas": str(min(cfg["transaction.state.log.min.isr"], rf)),
                   "segment.bytes": str(cfg["transaction.state.log.segment.bytes"])}
        try:
            self.create_topic(TRANSACTION_STATE_TOPIC, cfg["transaction.state.log.num.partitions"], rf,
                              configs=configs)
            log.info("created %s with %d partitions", TRANSACTION_STATE_TOPIC,
                     cfg["transaction.state.log.num.partitions"])
        except errors.TopicAlreadyExists:
            pass

    # ------------------------------------------------------------------------------------------- delete
    def delete_topic(self, name, timeout_ms=DEFAULT_TIMEOUT_MS):
        if not self.store.exists(name):
            raise errors.UnknownTopicOrPartition("Topic '%s' does not exist." % name)
        if not self.config["delete.topic.enable"]:
            raise errors.TopicDeletionDisabled("Topic deletion is disabled (delete.topic.enable=false).")
        self.store.mark_for_deletion(name)
        wait_for(lambda: not self.cache.contains_topic(name) and not self.store.exists(name), timeout_ms,
                 "topic %s to be deleted" % name)

    # --------------------------------------------------------------------------------------- partitions
    def create_partitions(self, name, count, assignment=None, validate_only=False, timeout_ms=DEFAULT_TIMEOUT_MS):
        current = self.store.assignment(name)  # UnknownTopicOrPartition when missing
        if self.store.is_marked_for_deletion(name):
            # Kafka's KafkaApis.handleCreatePartitionsRequest: INVALID_TOPIC_EXCEPTION (17) for a topic queued for
            # deletion. Growing it would race the controller removing its znode (then: UNKNOWN_TOPIC_OR_PARTITION).
            raise errors.InvalidTopicException("The topic is queued for deletion.")
        if count <= len(current):
            raise errors.InvalidPartitions("Topic currently has %d partitions, %d would not be an increase."
                                           % (len(current), count))
        self.check_topic_partitions(name, count)
        brokers = live_brokers(self.store.backend)
        live = {b for b, _ in brokers}
        rf = len(current[min(current)])
        if assignment:
            if len(assignment) != count - len(current):
                raise errors.InvalidReplicaAssignment("Increasing the number of partitions by %d but %d assignments "
                                                      "provided." % (count - len(current), len(assignment)))
            new = {len(current) + i: [int(r) for r in reps] for i, reps in enumerate(assignment)}
            for reps in new.values():
                if len(reps) != rf or len(set(reps)) != len(reps) or any(r not in live for r in reps):
                    raise errors.InvalidReplicaAssignment("replica list %s is not %d distinct live brokers"
                                                          % (reps, rf))
        else:
            if rf > len(brokers):
                raise errors.InvalidReplicationFactor("replication factor %d larger than available brokers %d"
                                                      % (rf, len(brokers)))
            new = assign_replicas_to_brokers(brokers, count - len(current), rf,
                                             start_index=start_index_for_new_partitions(current, brokers),
                                             start_partition_id=len(current),
                                             hosts=live_broker_hosts(self.store.backend))
        added = self._check_broker_partitions(name, new)
        if validate_only:
            return new
        self.store.add_partitions(name, new)
        self._note_pending(name, added, count)
        wait_for(lambda: self._visible(name, count), timeout_ms, "partitions of %s to be created" % name)
        return new

    # ------------------------------------------------------------------------------------------ configs
    def describe_topic_config(self, name):
        """[ConfigDescription] for every topic-level key, sorted by name (DescribeConfigs)."""
        if not self.store.exists(name):
            raise errors.UnknownTopicOrPartition("Topic '%s' does not exist." % name)
        entries = effective_topic_config(self.config, read_overrides(self.store, name))
        return [ConfigDescription(e.name, format_value(e.value), _SOURCE_IDS.get(e.source, 5))
                for _, e in sorted(entries.items())]

    def describe_broker_config(self):
        return [ConfigDescription(name, None if shown == "[hidden]" else shown,
                                  5 if source == "default" else 4, read_only=True, sensitive=shown == "[hidden]")
                for name, shown, source in self.config.describe()]

    def alter_topic_config(self, name, configs, validate_only=False):
        """Kafka's (non-incremental) AlterConfigs: ``configs`` replaces the topic's whole override set."""
        if not self.store.exists(name):
            raise errors.UnknownTopicOrPartition("Topic '%s' does not exist." % name)
        configs = {k: v for k, v in configs.items() if v is not None}
        validate_topic_config(configs)  # ConfigError is INVALID_CONFIG (40), naming the key and the value
        if validate_only:
            return
        self.store.set_topic_config(name, configs)  # also writes the /config/changes notification
        self._apply_topic_config(name, configs)


def read_overrides(store, name):
    """The topic's overrides (``/config/topics/<t>``), {} when it has none."""
    try:
        return store.topic_config(name)
    except NoNodeError:
        return {}


def default_log_config(config):
    """The LogConfig of a topic without overrides: the broker's log.* keys."""
    return LogConfig(**log_config_for(config, {}))


class TopicConfigs:
    """The LogConfig each topic's partitions run with on this broker: the broker's keys plus the topic's overrides,
    read from ``store`` the first time a topic is asked for and kept (``_overrides``, the only state here) until
    a change -- ``apply`` (AlterConfigs accepted here), ``reload`` (a ``/config/changes`` notification, whoever made
    the change) -- or the topic's deletion (``forget``, a MetadataCache deletion listener, so a re-created topic
    reads its overrides afresh). ``hosted()`` -> {(topic, p): Partition} are the live partitions switched at once;
    ``logs()`` -> the LogManager, which reads ``log_config`` for the logs it loads or creates and whose
    ``set_topic_config`` switches the topic's open logs (it is the one writer of ``Log.config``; a Partition keeps
    what it needs itself). Both are callables because the LogManager is built after this (it loads logs with it)."""

    def __init__(self, config, store, logs, hosted):
        self.config = config
        self.store = store
        self._logs = logs
        self._hosted = hosted
        self._overrides = {}

    def log_config(self, topic):
        if topic not in self._overrides:
            self._overrides[topic] = read_overrides(self.store, topic)
        return LogConfig(**log_config_for(self.config, self._overrides[topic]))

    def overrides(self, topic):
        """The topic's raw overrides (read like ``log_config``; the replication quotas' throttled-replica lists)."""
        if topic not in self._overrides:
            self._overrides[topic] = read_overrides(self.store, topic)
        return self._overrides[topic]

    def apply(self, topic, overrides):
        """New overrides for a topic: live partitions switch to the new LogConfig at once."""
        self._overrides[topic] = dict(overrides)
        lc = self.log_config(topic)
        for (t, _p), part in list(self._hosted().items()):
            if t == topic:
                part.set_config(lc)
        self._logs().set_topic_config(topic, lc)

    def reapply_all(self, topics=()):
        """The broker-level defaults changed (dynamic broker configs, kbroker/config/dynamic.py): every hosted
        topic, and every topic of ``topics`` (logs open here), switches to its LogConfig recomputed from them.
        One pass over the partitions and one over the logs (not one per topic), in 20 ms slices of the event loop
        (a first read of a topic's overrides is a coordination round trip)."""
        by_topic = {}
        for (t, _p), part in list(self._hosted().items()):
            by_topic.setdefault(t, []).append(part)
        configs = {}
        ts = TimeSlice()
        for topic in sorted(set(by_topic) | set(topics)):
            lc = configs[topic] = self.log_config(topic)
            for part in by_topic.get(topic, ()):
                part.set_config(lc)
            ts.tick()
        self._logs().set_topic_configs(configs)

    def reload(self):
        """Re-read the overrides of every hosted topic; apply the ones that changed. Topics cached but no longer
        hosted here (moved away) are dropped, to be read afresh if they come back (their throttled-replica lists
        must not be stale then)."""
        hosted = {t for t, _ in self._hosted()}
        for topic in [t for t in self._overrides if t not in hosted]:
            del self._overrides[topic]
        for topic in sorted(hosted):
            current = read_overrides(self.store, topic)
            if current != self._overrides.get(topic):
                log.info("topic %s config changed: %s", topic, current)
                self.apply(topic, current)

    def forget(self, deleted):
        """MetadataCache deletion listener: ``deleted`` = [(topic, p)]."""
        for topic, _p in deleted:
            self._overrides.pop(topic, None)


class ConfigWatcher:
    """Applies the config changes announced under ``/config/changes``: topic configs to the partitions this broker
    hosts (``reload()``, TopicConfigs.reload, in a greenlet of its own after each new notification), and -- when
    ``user_changed`` is given -- a user's SCRAM credentials (``user_changed(user)`` for each new notification whose
    entity path is ``users/<user>``; kbroker/security/scram_store.py), and -- when ``entity_changed`` is given --
    the client quotas (``entity_changed(path)`` for each new notification whose entity path starts with
    ``users/`` or ``clients/``: ``clients/C``, ``users/U``, ``users/U/clients/C``; kbroker/quota/store.py)."""

    PATH = "/config/changes"

    def __init__(self, backend, reload, user_changed=None, entity_changed=None):
        self.backend = backend
        self.reload = reload
        self.user_changed = user_changed
        self.entity_changed = entity_changed
        self.seen = None

    def start(self):
        self.backend.ensure_path(self.PATH)
        self.backend.watch_children(self.PATH, self._changed)

    def _changed(self, children, *_):
        names = set(children or ())
        new = names - self.seen if self.seen is not None else set()
        if self.seen is not None and names <= self.seen:
            self.seen = names
            return
        self.seen = names
        # Re-read the overrides of every topic hosted here; a change notification names one entity, but reading
        # all hosted topics is simple and cheap next to how rarely configs change.
        gevent.spawn(self.reload)
        if (self.user_changed is not None or self.entity_changed is not None) and new:
            gevent.spawn(self._users, sorted(new))

    def _users(self, notifications):
        """Re-read the users the new notifications name (the first call's existing ones were loaded at start)."""
        for name in notifications:
            data, _ = self.backend.get_or_none("%s/%s" % (self.PATH, name))
            try:
                entity = ConfigEntityChangeNotificationSequenceZNode.decode(data) if data else ""
            except (ValueError, KeyError, TypeError):
                log.warning("ignoring malformed config change notification %s", name)
                continue
            if self.user_changed is not None and entity.startswith("users/") and "/" not in entity[len("users/"):]:
                self.user_changed(entity[len("users/"):])
            if self.entity_changed is not None and entity.startswith(("users/", "clients/")):
                self.entity_changed(entity)
