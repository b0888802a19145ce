"""The broker: wires configuration, coordination backend, log manager, hosted partitions and the network server.

Ownership:
- topic metadata (assignments, topic configs, partition state) lives in the coordination backend, under Kafka's
  znode paths, read and written only through ``TopicStore``;
- ``self.partitions`` (the partitions this broker hosts) is owned by the broker and changes only in
  ``_host_topic`` / ``_unhost_topic``;
- the logs are owned by ``LogManager``.

In embedded mode (no ``zookeeper.connect``) this broker is the whole cluster: it is the controller, leads every
partition, and applies topic changes synchronously. The cluster controller (ZooKeeper mode) will drive the same
``_host_topic`` / ``_unhost_topic`` entry points from LeaderAndIsr/StopReplica.
"""
import logging
import time

import gevent
from gevent.threadpool import ThreadPool

from kbroker import errors
from kbroker.config import (DEFAULT_CONFIG, STATIC_BROKER_CONFIG, TOPIC_CONFIG, effective_topic_config, format_value,
                            log_config_for, validate_topic_config)
from kbroker.coord.embedded import EmbeddedBackend
from kbroker.coord.metadata_store import TopicStore, validate_topic_name
from kbroker.coord.znodes import BrokerIdZNode, ensure_persistent_paths
from kbroker.log.config import LogConfig
from kbroker.log.log import Log
from kbroker.log.manager import LogManager
from kbroker.replica.partition import Partition
from kbroker.server.loopcall import make_owner_call
from kbroker.server.router import Router
from kbroker.server.server import KafkaServer

log = logging.getLogger(__name__)

INTERNAL_TOPICS = frozenset(["__consumer_offsets", "__transaction_state"])


class BrokerEndpoint:
    __slots__ = ("id", "host", "port", "rack")

    def __init__(self, id, host, port, rack=None):
        self.id, self.host, self.port, self.rack = id, host, port, rack


class PartitionState:
    __slots__ = ("leader", "replicas", "isr", "leader_epoch")

    def __init__(self, leader, replicas, isr, leader_epoch):
        self.leader, self.replicas, self.isr, self.leader_epoch = leader, replicas, isr, leader_epoch


class ConfigDescription:
    """One DescribeConfigs entry; source_id uses Kafka's ConfigSource ids."""
    __slots__ = ("name", "value", "source_id", "read_only", "sensitive")

    def __init__(self, name, value, source_id, read_only=False, sensitive=False):
        self.name, self.value, self.source_id = name, value, source_id
        self.read_only, self.sensitive = read_only, sensitive


# Kafka's DescribeConfigsResponse ConfigSource: 1 TOPIC_CONFIG, 4 STATIC_BROKER_CONFIG, 5 DEFAULT_CONFIG.
_SOURCE_IDS = {TOPIC_CONFIG: 1, STATIC_BROKER_CONFIG: 4, DEFAULT_CONFIG: 5}


class Broker:
    def __init__(self, config):
        self.config = config
        self.broker_id = config["broker.id"]
        self.rack = config.get("broker.rack")
        self.backend = EmbeddedBackend(config.log_dirs[0])
        self.topic_store = TopicStore(self.backend)
        self.partitions = {}
        self.topic_configs = {}
        self.cluster_id = None
        self.log_manager = None
        self.server = None
        self.router = Router()
        self._tasks = []
        self._pool = ThreadPool(1)
        self._next_pid = None
        self.group_coordinator = None
        self.started = False

    # -------------------------------------------------------------------------------------------- lifecycle
    def start(self):
        cfg = self.config
        self.backend.start()
        ensure_persistent_paths(self.backend)
        if self.broker_id < 0:
            self.broker_id = self._generate_broker_id()
        self.cluster_id = self.topic_store.cluster_id()
        # Worker threads (cleaner) change a log's segment list only through the event loop's thread.
        Log.owner_call = staticmethod(make_owner_call(gevent.get_hub()))
        self.log_manager = LogManager(cfg.log_dirs, self._default_log_config(), broker_id=self.broker_id)
        for topic in self.topic_store.topics():
            self._host_topic(topic)
        self._start_group_coordinator()
        self.server = KafkaServer(self, self.router, cfg.listeners, cfg["socket.request.max.bytes"])
        self.server.start()
        self._register()
        self._tasks = [
            gevent.spawn(self._every, cfg["log.retention.check.interval.ms"], self._check_retention),
            # Every second at most: rolled segments and flush.ms deadlines are fsynced promptly even though
            # log.flush.scheduler.interval.ms defaults to Long.MAX (Kafka flushes rolled segments at once too).
            gevent.spawn(self._every, min(cfg["log.flush.scheduler.interval.ms"], 1000), self._flush),
            gevent.spawn(self._every, cfg["log.flush.offset.checkpoint.interval.ms"], self._checkpoint),
        ]
        if cfg["log.cleaner.enable"]:
            self._tasks.append(gevent.spawn(self._every, cfg["log.cleaner.backoff.ms"], self._clean))
        self.started = True
        log.info("kbroker %d started (cluster %s)", self.broker_id, self.cluster_id)

    def shutdown(self):
        log.info("shutting down broker %d", self.broker_id)
        self._stop_group_coordinator()
        if self.server:
            self.server.stop(wake=self._wake_waiters)
        gevent.killall(self._tasks)
        if self.log_manager:
            self.log_manager.shutdown()
        try:
            self.backend.stop()
        except Exception:  # noqa: BLE001 - shutdown must finish
            log.exception("stopping the coordination backend")
        self.started = False

    def _wake_waiters(self):
        """Wake every parked long-poll Fetch (they see their connection closing and answer now)."""
        for part in list(self.partitions.values()):
            part._wake()

    def _every(self, interval_ms, fn):
        interval = max(0.01, min(interval_ms, 2 ** 31) / 1000.0)
        while True:
            gevent.sleep(interval)
            try:
                fn()
            except Exception:  # noqa: BLE001 - a periodic task must keep running
                log.exception("periodic task %s", fn.__name__)

    def _check_retention(self):
        self.log_manager.check_retention(int(time.time() * 1000))

    def _flush(self):
        # fsync blocks: run it on a native thread so the event loop keeps serving requests.
        self._pool.apply(self.log_manager.flush_dirty, (int(time.time() * 1000),))

    def _flush_log(self, lg):
        self._pool.apply(lg.flush)

    def _checkpoint(self):
        self._pool.apply(self.log_manager.checkpoint_recovery_points)

    def _clean(self):
        # Log compaction reads and rewrites whole segments: off the event loop, like fsync.
        self._pool.apply(self.log_manager.clean_once,
                         (int(time.time() * 1000), self.config["log.cleaner.dedupe.buffer.size"]))

    def _generate_broker_id(self):
        import os
        from kbroker.log.manager import read_properties
        for d in self.config.log_dirs:
            meta = os.path.join(d, "meta.properties")
            if os.path.exists(meta):
                stored = read_properties(meta).get("broker.id")
                if stored is not None:
                    return int(stored)
        path = self.backend.create("/brokers/seqid/id-", b"", sequence=True, makepath=True)
        return self.config["reserved.broker.max.id"] + int(path.rsplit("-", 1)[1]) + 1

    def _register(self):
        ports = self.server.bound_ports()
        self.endpoints = []
        for name, host, port in self.config.advertised_listeners:
            if port == 0:
                port = ports.get(name, port)
            self.endpoints.append((name, host, port))
        data = BrokerIdZNode.encode(self.endpoints, self.config.listener_security_protocol_map, rack=self.rack)
        path = BrokerIdZNode.path(self.broker_id)
        if self.backend.exists(path):
            self.backend.delete(path)
        self.backend.create(path, data, ephemeral=True, makepath=True)

    # ----------------------------------------------------------------------------------------- cluster view
    def live_brokers(self, listener=None):
        out = []
        for name, host, port in self.endpoints:
            if listener is None or name == listener:
                out.append(BrokerEndpoint(self.broker_id, host, port, self.rack))
                break
        return out

    def live_broker_ids(self):
        return {self.broker_id}

    def controller_id(self):
        return self.broker_id

    def topic_names(self):
        return sorted(self.topic_configs)

    def is_internal(self, name):
        return name in INTERNAL_TOPICS

    @staticmethod
    def valid_topic_name(name):
        try:
            validate_topic_name(name)
            return True
        except errors.KafkaError:
            return False

    def topic_metadata(self, name):
        if name not in self.topic_configs:
            return None
        out = {}
        for p, replicas in self.topic_store.assignment(name).items():
            part = self.partitions.get((name, p))
            if part is not None:
                out[p] = PartitionState(part.leader, list(part.replicas), list(part.isr), part.leader_epoch)
            else:
                out[p] = PartitionState(-1, list(replicas), [], -1)
        return out

    def local_partition(self, topic, p):
        return self.partitions.get((topic, p))

    def leader_partition(self, topic, p):
        part = self.partitions.get((topic, p))
        if part is None:
            if topic in self.topic_configs and p in self.topic_store.assignment(topic):
                raise errors.NotLeaderOrFollower("%s-%d is not led by broker %d" % (topic, p, self.broker_id))
            raise errors.UnknownTopicOrPartition("%s-%d" % (topic, p))
        if not part.is_leader:
            raise errors.NotLeaderOrFollower("%s-%d is not led by broker %d" % (topic, p, self.broker_id))
        return part

    # -------------------------------------------------------------------------------------------- topics
    def _default_log_config(self):
        return LogConfig(**log_config_for(self.config, {}))

    def log_config(self, topic):
        return LogConfig(**log_config_for(self.config, self.topic_configs.get(topic, {})))

    def _host_topic(self, topic):
        overrides = self.topic_store.topic_config(topic)
        self.topic_configs[topic] = overrides
        lc = self.log_config(topic)
        for p, replicas in self.topic_store.assignment(topic).items():
            if self.broker_id not in replicas or (topic, p) in self.partitions:
                continue
            lg = self.log_manager.get_or_create_log((topic, p), lc)
            part = Partition(topic, p, lg, lc, self.broker_id, flusher=self._flush_log)
            part.replicas = list(replicas)
            part.isr = [self.broker_id]
            self.partitions[(topic, p)] = part
            self.topic_store.set_partition_state(topic, p, self.broker_id, [self.broker_id], 0, 1)

    def _unhost_topic(self, topic):
        for tp in [tp for tp in self.partitions if tp[0] == topic]:
            part = self.partitions.pop(tp)
            part.leader = -1
            part._wake()
            self.log_manager.delete_log(tp)
        self.topic_configs.pop(topic, None)

    def _validate_configs(self, configs):
        try:
            return validate_topic_config(configs)
        except Exception as e:  # ConfigError names the key
            raise errors.InvalidConfig(str(e))

    def plan_assignment(self, num_partitions, replication_factor, start=0):
        live = sorted(self.live_broker_ids())
        if replication_factor > len(live):
            raise errors.InvalidReplicationFactor(
                "replication factor %d larger than available brokers %d" % (replication_factor, len(live)))
        return {p: [live[(p + i) % len(live)] for i in range(replication_factor)]
                for p in range(start, start + num_partitions)}

    def create_topic(self, name, num_partitions, replication_factor, assignment=None, configs=None,
                     validate_only=False):
        """Validate and create a topic; raises KafkaError subclasses with Kafka's codes."""
        validate_topic_name(name)
        if name in self.topic_configs:
            raise errors.TopicAlreadyExists("Topic '%s' already exists." % name)
        configs = dict(configs or {})
        self._validate_configs(configs)
        if assignment:
            if num_partitions != -1 or replication_factor != -1:
                raise errors.InvalidRequest("both replica assignment and partition count/replication factor given")
            ids = sorted(assignment)
            if ids != list(range(len(ids))):
                raise errors.InvalidReplicaAssignment("partitions must be numbered 0..n-1")
            live = self.live_broker_ids()
            for p, reps in assignment.items():
                if not reps or len(set(reps)) != len(reps) or any(r not in live for r in reps):
                    raise errors.InvalidReplicaAssignment("bad replica list %s for partition %d" % (reps, p))
        else:
            if num_partitions == -1:
                num_partitions = self.config["num.partitions"]
            if replication_factor == -1:
                replication_factor = self.config["default.replication.factor"]
            if num_partitions <= 0:
                raise errors.InvalidPartitions("Number of partitions must be larger than 0.")
            if replication_factor <= 0:
                raise errors.InvalidReplicationFactor("Replication factor must be larger than 0.")
            assignment = self.plan_assignment(num_partitions, replication_factor)
        if validate_only:
            return assignment
        self.topic_store.create_topic(name, assignment, configs)
        self._host_topic(name)
        return assignment

    def auto_create_topic(self, name):
        validate_topic_name(name)
        self.create_topic(name, self.config["num.partitions"], self.config["default.replication.factor"])

    def delete_topic(self, name):
        if name not in self.topic_configs:
            raise errors.UnknownTopicOrPartition("Topic '%s' does not exist." % name)
        if not self.config["delete.topic.enable"]:
            raise errors.KafkaError("topic deletion is disabled (delete.topic.enable=false)")
        self._unhost_topic(name)
        self.topic_store.delete_topic(name)

    def create_partitions(self, name, count, assignment=None, validate_only=False):
        if name not in self.topic_configs:
            raise errors.UnknownTopicOrPartition("Topic '%s' does not exist." % name)
        current = self.topic_store.assignment(name)
        if count <= len(current):
            raise errors.InvalidPartitions("Topic currently has %d partitions, %d would not be an increase."
                                           % (len(current), count))
        rf = len(next(iter(current.values())))
        if assignment:
            if len(assignment) != count - len(current):
                raise errors.InvalidReplicaAssignment("assignment must cover exactly the new partitions")
            new = {len(current) + i: list(reps) for i, reps in enumerate(assignment)}
            live = self.live_broker_ids()
            for p, reps in new.items():
                if not reps or any(r not in live for r in reps):
                    raise errors.InvalidReplicaAssignment("bad replica list %s" % reps)
        else:
            new = self.plan_assignment(count - len(current), rf, start=len(current))
        if validate_only:
            return new
        self.topic_store.add_partitions(name, new)
        self._host_topic(name)
        return new

    # -------------------------------------------------------------------------------------------- configs
    def describe_topic_config(self, name):
        """[ConfigDescription] for every topic-level key, sorted by name (DescribeConfigs)."""
        if name not in self.topic_configs:
            raise errors.UnknownTopicOrPartition("Topic '%s' does not exist." % name)
        entries = effective_topic_config(self.config, self.topic_configs[name])
        return [ConfigDescription(e.name, format_value(e.value), _SOURCE_IDS.get(e.source, 5))
                for _, e in sorted(entries.items())]

    def describe_broker_config(self):
        return [ConfigDescription(name, None if shown == "[hidden]" else shown,
                                  5 if source == "default" else 4, read_only=True,
                                  sensitive=shown == "[hidden]")
                for name, shown, source in self.config.describe()]

    def alter_topic_config(self, name, configs, validate_only=False, incremental=False):
        if name not in self.topic_configs:
            raise errors.UnknownTopicOrPartition("Topic '%s' does not exist." % name)
        configs = {k: v for k, v in configs.items() if v is not None}
        self._validate_configs(configs)
        if validate_only:
            return
        self.topic_store.set_topic_config(name, configs)
        self.topic_configs[name] = configs
        lc = self.log_config(name)
        for (t, _p), part in self.partitions.items():
            if t == name:
                part.set_config(lc)

    # -------------------------------------------------------------------------------------- producer ids
    def next_producer_id(self):
        """Producer ids are leased in blocks of 1000 from /latest_producer_id_block (Kafka's ZK layout)."""
        if self._next_pid is None or self._next_pid > self._pid_block_end:
            self._lease_pid_block()
        pid = self._next_pid
        self._next_pid += 1
        return pid

    def _lease_pid_block(self):
        import json
        path = "/latest_producer_id_block"
        while True:
            if not self.backend.exists(path):
                start = 0
                try:
                    data = json.dumps({"version": 1, "broker": self.broker_id, "block_start": str(start),
                                       "block_end": str(start + 999)}, separators=(",", ":")).encode()
                    self.backend.create(path, data, makepath=True)
                except Exception:  # noqa: BLE001 - someone else created it: retry the conditional path
                    continue
            else:
                raw, stat = self.backend.get(path)
                cur = json.loads(raw)
                start = int(cur["block_end"]) + 1
                data = json.dumps({"version": 1, "broker": self.broker_id, "block_start": str(start),
                                   "block_end": str(start + 999)}, separators=(",", ":")).encode()
                try:
                    self.backend.set(path, data, version=stat.version)
                except Exception:  # noqa: BLE001 - lost the race: read again
                    continue
            self._next_pid, self._pid_block_end = start, start + 999
            return

    # ------------------------------------------------------------------------------------ group coordinator
    # The consumer-group coordinator (kbroker/coordinator) owns the groups of the __consumer_offsets partitions
    # this broker leads. In embedded mode that is every partition; the cluster controller will call
    # group_coordinator.load_partition / unload_partition on leadership changes.
    def _start_group_coordinator(self):
        from kbroker.coordinator.coordinator import LOADING, GroupCoordinator
        from kbroker.coordinator.offsets_log import TOPIC, OffsetsStore
        from kbroker.coordinator.timers import GeventScheduler
        cfg = self.config
        coord = GroupCoordinator(cfg, GeventScheduler(), OffsetsStore(self, cfg["offsets.load.buffer.size"]),
                                 topic_exists=self._group_partition_exists)
        self.group_coordinator = coord
        led = sorted(p for (t, p), part in self.partitions.items() if t == TOPIC and part.is_leader)
        for p in led:
            coord.owned[p] = LOADING       # COORDINATOR_LOAD_IN_PROGRESS until each partition is replayed
        if led:
            self._tasks.append(gevent.spawn(self._load_group_partitions, led))
        self._tasks.append(gevent.spawn(self._every, cfg["offsets.retention.check.interval.ms"],
                                        self._expire_group_offsets))

    def _load_group_partitions(self, partitions):
        started = time.monotonic()
        for p in partitions:
            self.group_coordinator.load_partition(p)
            gevent.sleep(0)                # let requests in between partitions
        log.info("group coordinator loaded %d partitions in %.3f s", len(partitions), time.monotonic() - started)

    def _expire_group_offsets(self):
        removed = self.group_coordinator.expire_offsets()
        if removed:
            log.info("expired %d committed offsets", removed)

    def _stop_group_coordinator(self):
        if self.group_coordinator is not None:
            self.group_coordinator.shutdown()

    def _group_partition_exists(self, tp):
        topic, p = tp
        if topic not in self.topic_configs:
            return False
        if (topic, p) in self.partitions:
            return True
        try:
            return p in self.topic_store.assignment(topic)
        except errors.KafkaError:
            return False

    def ensure_offsets_topic(self):
        """Create __consumer_offsets on first use (offsets.topic.* settings, replication factor capped by the
        live brokers, compacted) and load the partitions this broker leads (empty: loaded at once)."""
        from kbroker.coordinator.offsets_log import TOPIC
        if TOPIC in self.topic_configs:
            return
        cfg = self.config
        rf = min(cfg["offsets.topic.replication.factor"], len(self.live_broker_ids()))
        configs = {"cleanup.policy": "compact", "segment.bytes": str(cfg["offsets.topic.segment.bytes"]),
                   "compression.type": "producer"}
        try:
            self.create_topic(TOPIC, cfg["offsets.topic.num.partitions"], rf, configs=configs)
        except errors.TopicAlreadyExists:
            return
        log.info("created %s with %d partitions", TOPIC, cfg["offsets.topic.num.partitions"])
        for (t, p), part in sorted(self.partitions.items()):
            if t == TOPIC and part.is_leader:
                self.group_coordinator.load_partition(p)
