"""ReplicaManager: owns every partition this broker hosts, applies LeaderAndIsr / StopReplica, runs the follower
fetchers and the leader's ISR expiry, checkpoints high watermarks.

Ownership: ``_partitions`` ({(topic, p): Partition}) changes only in ``apply_leader_and_isr`` / ``stop_replicas``;
``_fetchers`` ({leader id: ReplicaFetcher}) holds exactly the partitions this broker follows with a known leader.
Logs belong to the LogManager (created here through ``get_or_create_log`` when a LeaderAndIsr names a partition
whose log is missing).

LeaderAndIsr rules (Kafka's ReplicaManager.becomeLeaderOrFollower; states are frozen ``PartitionLeadership`` values,
``kbroker/cluster_state.py``, decoded by the cluster handler): a state for a partition whose replicas do not
include this broker -> UNKNOWN_TOPIC_OR_PARTITION (3); a leader_epoch <= the one the partition has ->
STALE_CONTROLLER_EPOCH (11), nothing changes; otherwise leader == this broker -> ``Partition.make_leader`` (follower
state reset, the epoch's start offset = LEO recorded) and the partition leaves its fetcher; else
``make_follower`` and the partition joins the fetcher of the new leader (reconciling by leader epoch first).
The leader's address comes from the request's live_leaders, else ``connect(broker_id)``; with neither the
partition waits for the next LeaderAndIsr.

File: ``<log dir>/replication-offset-checkpoint`` (``kbroker/log/checkpoint.py`` format) holds the HW of every
hosted partition in that dir, written every ``replica.high.watermark.checkpoint.interval.ms`` and at shutdown, read
at construction so a restarted leader does not expose more than was committed.
"""
import logging
import os
import time

import gevent

from kbroker import errors
from kbroker.config.keys import CONFIG_KEYS
from kbroker.log.checkpoint import OffsetCheckpoint
from kbroker.replica.fetcher import ReplicaFetcher
from kbroker.replica.partition import Partition

log = logging.getLogger(__name__)

HW_CHECKPOINT = "replication-offset-checkpoint"

# The keys read here; a dict ``config`` may omit them, and their defaults come from the broker key table.
_SETTINGS = ("replica.lag.time.max.ms", "replica.fetch.wait.max.ms", "replica.fetch.min.bytes",
             "replica.fetch.max.bytes", "replica.fetch.response.max.bytes", "replica.fetch.backoff.ms",
             "replica.socket.timeout.ms", "replica.socket.receive.buffer.bytes",
             "replica.high.watermark.checkpoint.interval.ms")


def _wall_ms():
    return int(time.time() * 1000)


class ReplicaManager:
    def __init__(self, broker_id, log_manager, log_config_for, isr_writer, connect, flusher=None, config=None,
                 partition_exists=None, clock=_wall_ms):
        """``log_config_for(topic) -> LogConfig``; ``isr_writer(topic, p, leader, leader_epoch, new_isr, zk_version)
        -> new zk_version | None``; ``connect(broker_id) -> (host, port) | None``; ``flusher(log)``;
        ``config``: anything with ``get(key, default)`` (BrokerConfig or a dict) for the replica.* keys;
        ``partition_exists(topic, p) -> bool`` (optional): tells NOT_LEADER_OR_FOLLOWER from
        UNKNOWN_TOPIC_OR_PARTITION for partitions not hosted here."""
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.log_config_for = log_config_for
        self.isr_writer = isr_writer
        self.connect = connect
        self.flusher = flusher
        self.partition_exists = partition_exists
        self.clock = clock
        cfg = config or {}
        self.settings = {k: cfg.get(k, CONFIG_KEYS[k].default) for k in _SETTINGS}
        self._partitions = {}
        self._fetchers = {}
        self.leadership_listeners = []   # fn(tp, was_leader, is_leader) after every applied change
        self._tasks = []
        self._hw_checkpoint = {}
        for d in log_manager.log_dirs:
            self._hw_checkpoint.update(OffsetCheckpoint(os.path.join(d, HW_CHECKPOINT)).read())

    # ------------------------------------------------------------------------------------------- lifecycle
    def start(self):
        """Spawn the ISR expiry (every replica.lag.time.max.ms / 2) and the HW checkpoint loops."""
        lag = self.settings["replica.lag.time.max.ms"]
        self._tasks = [gevent.spawn(self._every, lag / 2.0, self.maybe_shrink_isr),
                       gevent.spawn(self._every, self.settings["replica.high.watermark.checkpoint.interval.ms"],
                                    self.checkpoint_high_watermarks)]
        return self

    def shutdown(self):
        """Stop fetchers and periodic tasks, wake parked requests, checkpoint HWs (call before LogManager.shutdown)."""
        gevent.killall(self._tasks)
        self._tasks = []
        for f in list(self._fetchers.values()):
            f.stop()
        self._fetchers.clear()
        for part in self._partitions.values():
            part._wake()
        try:
            self.checkpoint_high_watermarks()
        except OSError:
            log.exception("writing %s at shutdown", HW_CHECKPOINT)

    @staticmethod
    def _every(interval_ms, fn):
        interval = max(0.01, interval_ms / 1000.0)
        while True:
            gevent.sleep(interval)
            try:
                fn()
            except Exception:  # noqa: BLE001 - periodic work keeps running
                log.exception("replica task %s", fn.__name__)

    # -------------------------------------------------------------------------------------------- queries
    def get_partition(self, topic, p):
        return self._partitions.get((topic, p))

    def partitions(self):
        return dict(self._partitions)

    def leader_partition(self, topic, p):
        part = self._partitions.get((topic, p))
        if part is None:
            if self.partition_exists is not None and self.partition_exists(topic, p):
                raise errors.NotLeaderOrFollower("%s-%d is not led by broker %d" % (topic, p, self.broker_id))
            raise errors.UnknownTopicOrPartition("%s-%d" % (topic, p))
        if not part.is_leader:
            raise errors.NotLeaderOrFollower("%s-%d is not led by broker %d" % (topic, p, self.broker_id))
        return part

    def fetcher_for(self, broker_id):
        return self._fetchers.get(broker_id)

    # ----------------------------------------------------------------------------------------- LeaderAndIsr
    def apply_leader_and_isr(self, controller_id, controller_epoch, partition_states, live_leaders=()):
        """Apply ``partition_states`` ([``kbroker.cluster_state.PartitionLeadership``]) from controller
        ``controller_id``; ``live_leaders``: [(broker id, host, port)]. Returns {(topic, p): error code} (module
        docstring). ``controller_epoch`` is the request's; each state carries the epoch of its znode's writer."""
        result = {}
        endpoints = {b: (h, port) for b, h, port in (live_leaders or ())}
        for st in partition_states:
            topic, p = tp = st.tp
            la = st.leader_and_isr
            replicas = st.replicas
            if self.broker_id not in replicas:
                result[tp] = errors.UNKNOWN_TOPIC_OR_PARTITION
                continue
            part = self._partitions.get(tp)
            epoch = la.leader_epoch
            if part is not None and epoch <= part.leader_epoch:
                log.info("%s-%d: ignoring LeaderAndIsr from controller %d with leader epoch %d (have %d)",
                         topic, p, controller_id, epoch, part.leader_epoch)
                result[tp] = errors.STALE_CONTROLLER_EPOCH
                continue
            try:
                if part is None:
                    part = self._host(topic, p)
                leader = la.leader
                was_leader = part.is_leader
                self._remove_from_fetchers(tp)
                if leader == self.broker_id:
                    part.make_leader(epoch, la.isr, replicas, la.zk_version, la.controller_epoch)
                    log.info("%s-%d: leader, epoch %d, ISR %s", topic, p, epoch, part.isr)
                else:
                    part.make_follower(leader, epoch, la.isr, replicas, la.zk_version, la.controller_epoch)
                    if leader >= 0:
                        self._add_to_fetcher(tp, part, leader, epoch, endpoints.get(leader))
                    log.info("%s-%d: follower of %d, epoch %d", topic, p, leader, epoch)
                result[tp] = 0
                self._notify(tp, was_leader, part.is_leader)
            except Exception as e:  # noqa: BLE001 - one partition's failure is its own error code
                log.exception("%s-%d: applying LeaderAndIsr failed", topic, p)
                result[tp] = e.code if isinstance(e, errors.KafkaError) else (
                    errors.KAFKA_STORAGE_ERROR if isinstance(e, OSError) else errors.UNKNOWN_SERVER_ERROR)
        self._drop_idle_fetchers()
        return result

    def _notify(self, tp, was_leader, is_leader):
        for fn in list(self.leadership_listeners):
            try:
                fn(tp, was_leader, is_leader)
            except Exception:  # noqa: BLE001 - a listener's bug must not undo the state change
                log.exception("leadership listener %r for %s-%d", fn, tp[0], tp[1])

    def _host(self, topic, p):
        lc = self.log_config_for(topic)
        lg = self.log_manager.get_or_create_log((topic, p), lc)
        part = Partition(topic, p, lg, lc, self.broker_id, flusher=self.flusher, clock=self.clock,
                         high_watermark=self._hw_checkpoint.get((topic, p), 0), isr_writer=self.isr_writer,
                         replica_lag_time_max_ms=self.settings["replica.lag.time.max.ms"])
        part.leader = -1                     # neither role until the LeaderAndIsr that created it is applied
        part.leader_epoch = -1
        self._partitions[(topic, p)] = part
        return part

    def _fetch_settings(self):
        s = self.settings
        return {"wait_ms": s["replica.fetch.wait.max.ms"], "min_bytes": s["replica.fetch.min.bytes"],
                "max_bytes": s["replica.fetch.max.bytes"], "response_max_bytes": s["replica.fetch.response.max.bytes"],
                "backoff_ms": s["replica.fetch.backoff.ms"], "socket_timeout_ms": s["replica.socket.timeout.ms"],
                "rcvbuf": s["replica.socket.receive.buffer.bytes"]}

    def _add_to_fetcher(self, tp, part, leader, epoch, endpoint):
        if endpoint is None:
            endpoint = self.connect(leader) if self.connect is not None else None
        if endpoint is None:
            log.warning("%s-%d: no address for leader %d; waiting for the next LeaderAndIsr", tp[0], tp[1], leader)
            return
        host, port = endpoint
        f = self._fetchers.get(leader)
        if f is not None and (f.host, f.port) != (host, port):
            f.stop()                         # the leader moved to another address (restart on a new port)
            f = None
        if f is None:
            f = self._fetchers[leader] = ReplicaFetcher(self.broker_id, leader, host, port,
                                                        self._fetch_settings()).start()
        f.add_partition(tp, part, epoch)

    def _remove_from_fetchers(self, tp):
        for f in self._fetchers.values():
            f.remove_partition(tp)

    def _drop_idle_fetchers(self):
        for b, f in list(self._fetchers.items()):
            if not f.states:
                f.stop()
                del self._fetchers[b]

    # ------------------------------------------------------------------------------------------ StopReplica
    def stop_replicas(self, controller_epoch, partitions):
        result = {}
        for topic, p, delete in partitions:
            tp = (topic, p)
            try:
                self._remove_from_fetchers(tp)
                part = self._partitions.pop(tp, None) if delete else self._partitions.get(tp)
                if part is not None:
                    was_leader = part.is_leader
                    part.make_offline()
                    self._notify(tp, was_leader, False)
                if delete:
                    self._hw_checkpoint.pop(tp, None)
                    if self.log_manager.get_log(tp) is not None:
                        self.log_manager.delete_log(tp)
                result[tp] = 0
            except Exception as e:  # noqa: BLE001
                log.exception("%s-%d: StopReplica failed", topic, p)
                result[tp] = errors.KAFKA_STORAGE_ERROR if isinstance(e, OSError) else errors.UNKNOWN_SERVER_ERROR
        self._drop_idle_fetchers()
        return result

    # -------------------------------------------------------------------------------------- periodic work
    def maybe_shrink_isr(self, now=None):
        """ISR expiry over every led partition; returns the partitions whose ISR shrank."""
        now = self.clock() if now is None else now
        return [tp for tp, part in list(self._partitions.items()) if part.is_leader and part.maybe_shrink_isr(now)]

    def high_watermarks(self):
        return {tp: part.high_watermark for tp, part in self._partitions.items()}

    def checkpoint_high_watermarks(self):
        """Write every log dir's replication-offset-checkpoint (blocking fsync; small files)."""
        hws = dict(self._hw_checkpoint)
        hws.update(self.high_watermarks())
        by_dir = {d: {} for d in self.log_manager.log_dirs}
        for tp, hw in hws.items():
            d = self.log_manager.log_dir_of(tp)
            if d is not None:
                by_dir[d][tp] = hw
        for d, offsets in by_dir.items():
            OffsetCheckpoint(os.path.join(d, HW_CHECKPOINT)).write(offsets)
        self._hw_checkpoint = hws
