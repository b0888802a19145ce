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
The leader's address comes from ``connect(broker_id)`` (this broker's inter-broker listener in the metadata
cache, Kafka's rule), else the request's live_leaders; with neither the partition waits for the next LeaderAndIsr.
A request making this broker leader of many partitions is answered while their new epochs' checkpoints are still
being written (one syncfs), their appends held until those are durable; a later request about one of them waits
for that (``_prepare_leader_epochs``).

Bounded loop time (issue 8): one LeaderAndIsr may name every partition of a new topic (max.topic.partitions,
10,000), and hosting one is file work: a directory, a segment, the leader-epoch checkpoint. Done per partition on
the event loop it froze every client (1,000 partitions: 2-4.6 s, most of it fsyncs; 10,000: 9-27 s, and with the
directory descriptors gevent closes late, 7,502 of them failed with EMFILE). So a request's new partitions are hosted
in one batch by ``offload`` (the broker's worker thread): ``LogManager.create_logs`` (one directory fsync per log
dir, not per partition) and the Partition objects, whose epoch caches start ``fresh`` (no fsync for the first
checkpoint of a new directory, epoch_cache.py); the loop then registers them and applies the leadership changes in
time slices (``kbroker/timeslice.py``: it yields every 20 ms). While it yields, clients may see a new partition that
leads nothing yet (NOT_LEADER_OR_FOLLOWER, retriable), as in Kafka. ``apply_leader_and_isr`` and ``stop_replicas``
hold one lock (Kafka's replicaStateChangeLock), so a second controller request waits for the first to finish.

File: ``<log dir>/replication-offset-checkpoint`` (``kbroker/log/checkpoint.py`` format) holds the HW of every
hosted partition in that dir, written every ``replica.high.watermark.checkpoint.interval.ms`` and at shutdown, read
at construction so a restarted leader does not expose more than was committed.
"""
import logging
import os
import time

import gevent
import gevent.event
from gevent.lock import RLock
from gevent.pool import Pool

from kbroker import errors
from kbroker.config.keys import CONFIG_KEYS
from kbroker.log import dir_failure
from kbroker.log.checkpoint import OffsetCheckpoint
from kbroker.log.manager import MAX_FILE_NAME, future_dir_name
from kbroker.replica import epoch_cache
from kbroker.replica.fetcher import ReplicaFetcher
from kbroker.replica.log_dir_move import LogDirMove
from kbroker.replica.partition import IsrStats, Partition
from kbroker.timeslice import TimeSlice

log = logging.getLogger(__name__)
# Kafka's state.change.logger (config/logging.properties: state-change.log): each partition's LeaderAndIsr as this
# broker applied (or ignored) it at INFO, its StopReplica at TRACE (Kafka >= 2's levels).
state_change_log = logging.getLogger("state.change.logger")
TRACE = 5

HW_CHECKPOINT = "replication-offset-checkpoint"
# ISR shrinks in flight at once (maybe_shrink_isr): a few ISR write batches' worth; each waiting greenlet holds a
# few KB, so 2,000 cost a few MB for the seconds a mass shrink lasts.
SHRINK_CONCURRENCY = 2000
# How long a shutdown waits for leader-epoch checkpoints being written (_make_epochs_durable): a syncfs takes
# 0.1-0.7 s on this project's machine; a disk that hangs for a minute has failed anyway.
SHUTDOWN_EPOCH_WAIT_S = 60

# The keys read here; a dict ``config`` may omit them, and their defaults come from the broker key table.
_SETTINGS = ("replica.lag.time.max.ms", "replica.fetch.wait.max.ms", "replica.fetch.min.bytes",
             "replica.fetch.max.bytes", "replica.fetch.response.max.bytes", "replica.fetch.backoff.ms",
             "replica.socket.timeout.ms", "replica.socket.receive.buffer.bytes",
             "replica.high.watermark.checkpoint.interval.ms")


def _wall_ms():
    return int(time.time() * 1000)


def _in_place(fn, *args):
    return fn(*args)


def _write_checkpoints(name, by_dir, failures=None):
    """``{log dir: {tp: offset}}`` written as ``<log dir>/<name>`` (blocking: format, write, fsync). A dir whose
    write fails is reported to ``failures`` (its LogDirFailureChannel: the dir goes offline) and the others go on."""
    for d, offsets in by_dir.items():
        path = os.path.join(d, name)
        try:
            if dir_failure.INJECTED:
                dir_failure.check_injected(path)
            OffsetCheckpoint(path).write(offsets)
        except OSError as exc:
            if failures is None:
                raise
            failures.report(path, exc)


def _error_code(exc):
    """A partition's LeaderAndIsr / StopReplica error for ``exc``: its own code, KAFKA_STORAGE_ERROR (56) for a disk
    problem, else UNKNOWN_SERVER_ERROR (-1)."""
    if isinstance(exc, errors.KafkaError):
        return exc.code
    return errors.KAFKA_STORAGE_ERROR if isinstance(exc, OSError) else errors.UNKNOWN_SERVER_ERROR


class ReplicaManager:
    def __init__(self, broker_id, log_manager, log_config_for, isr_writer, connect, flusher=None, config=None,
                 partition_exists=None, clock=_wall_ms, offload=None, security=None, replication_quotas=None,
                 isr_eligible=None):
        """``log_config_for(topic) -> LogConfig``; ``isr_writer(topic, p, leader, leader_epoch, new_isr, zk_version)
        -> new zk_version | None``; ``connect(broker_id) -> (host, port) | None``; ``flusher(log)``;
        ``config``: anything with ``get(key, default)`` (BrokerConfig or a dict) for the replica.* keys;
        ``partition_exists(topic, p) -> bool`` (optional): tells NOT_LEADER_OR_FOLLOWER from
        UNKNOWN_TOPIC_OR_PARTITION for partitions not hosted here; ``offload(fn, *args) -> fn(*args)`` runs
        blocking file work off the event loop (a thread pool's apply; None: in place); ``security``: how the
        fetchers reach leaders' inter-broker listener (kbroker/security/client_channel.py; None: plaintext);
        ``replication_quotas``: kbroker/quota/replication.py ReplicationQuotas (KIP-73; None: no throttling) --
        its follower quota bounds the fetchers (the leader one is the Fetch handler's, through Services);
        ``isr_eligible(broker_id) -> bool``: may that broker's replicas join an ISR this broker leads -- registered,
        in this broker's metadata (KIP-841; partition.py's docstring; None: every broker)."""
        self.broker_id = broker_id
        self.offload = offload or _in_place
        self._state_lock = RLock()
        self.log_manager = log_manager
        self.log_config_for = log_config_for
        self.isr_writer = isr_writer
        self.connect = connect
        self.isr_eligible = isr_eligible
        self.flusher = flusher
        self.partition_exists = partition_exists
        self.clock = clock
        self.security = security
        self._follower_quota = replication_quotas.follower if replication_quotas is not None else None
        cfg = config or {}
        self.settings = {k: cfg.get(k, CONFIG_KEYS[k].default) for k in _SETTINGS}
        # The follower's SO_RCVBUF only when replica.socket.receive.buffer.bytes is set explicitly (> 0), as the
        # listener's socket buffers (BrokerConfig.socket_buffer_sizes): Kafka's default 65536 switches off Linux's
        # autotuning: with it, a follower takes at most 128 KiB (Linux doubles the value) per round trip from its
        # leader, and RF 3 acks=all produced 28 % less (bench_replication: 165k vs 232k records/s, same sitting,
        # docs/performance.md). A dict config (tests) names the key or not.
        is_set = getattr(cfg, "is_set", lambda key: key in cfg)
        rcvbuf = self.settings["replica.socket.receive.buffer.bytes"]
        self._follower_rcvbuf = rcvbuf if is_set("replica.socket.receive.buffer.bytes") and rcvbuf > 0 else None
        self._partitions = {}
        self._fetchers = {}
        self._moves = {}                 # {tp: LogDirMove} replicas moving to another log dir (log_dir_move.py)
        self._offline = set()            # tps whose log dir failed (KIP-112): KAFKA_STORAGE_ERROR until a restart
        # {tp: Event set once its new leader epoch's checkpoint is durable (or failed)}: partitions that lead, their
        # appends held, while _make_epochs_durable writes their checkpoints after the LeaderAndIsr was answered.
        self._epochs_pending = {}
        self.leadership_listeners = []   # fn(tp, was_leader, is_leader) after every applied change
        self.isr_stats = IsrStats()      # ISR shrinks/expands of every hosted partition (the metrics read it)
        # Set once this broker asks for controlled shutdown (``begin_controlled_shutdown``): it follows no new leader.
        self.in_controlled_shutdown = False
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

    def begin_controlled_shutdown(self):
        """This broker is stopping (KIP-841): a partition the controller moves away from it becomes a follower
        that does not fetch. Fetching, it would catch up at once and its new leader would put it back in the ISR
        (0.1 s later, issue 16), where acks=all writes wait for it again once it exits. Partitions it already
        follows keep fetching until the controller's StopReplica (it is in their ISR until then anyway)."""
        self.in_controlled_shutdown = True

    def shutdown(self):
        """Stop fetchers and periodic tasks, wake parked requests, checkpoint HWs (call before LogManager.shutdown)."""
        gevent.killall(self._tasks)
        self._tasks = []
        # Checkpoints still being written: done before the logs close (and the clean-shutdown marker is written).
        if not self.await_epochs_durable(SHUTDOWN_EPOCH_WAIT_S):
            log.error("shutdown: leader-epoch checkpoints still not written after %d s", SHUTDOWN_EPOCH_WAIT_S)
        for move in list(self._moves.values()):
            move.stop()
        self._moves.clear()
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
            if (topic, p) in self._offline:
                raise errors.KafkaStorageError("%s-%d is in an offline log dir of broker %d"
                                               % (topic, p, self.broker_id))
            if self.partition_exists is not None and self.partition_exists(topic, p):
                raise errors.NotLeaderOrFollower("%s-%d is not led by broker %d" % (topic, p, self.broker_id))
            raise errors.UnknownTopicOrPartition("%s-%d" % (topic, p))
        if not part.is_leader:
            raise errors.NotLeaderOrFollower("%s-%d is not led by broker %d" % (topic, p, self.broker_id))
        return part

    def fetcher_for(self, broker_id):
        return self._fetchers.get(broker_id)

    def fetchers(self):
        """{leader id: ReplicaFetcher} of the leaders this broker follows (a copy; the metrics read the lags)."""
        return dict(self._fetchers)

    # ----------------------------------------------------------------------------------------- LeaderAndIsr
    def apply_leader_and_isr(self, controller_id, controller_epoch, partition_states, live_leaders=()):
        """Apply ``partition_states`` ([``kbroker.cluster_state.PartitionLeadership``]) from controller
        ``controller_id``; ``live_leaders``: [(broker id, host, port)]. Returns {(topic, p): error code} (module
        docstring). ``controller_epoch`` is the request's; each state carries the epoch of its znode's writer.
        May yield: the new partitions' file work runs in ``offload``, the changes are applied in time slices."""
        with self._state_lock:
            self._await_new_epochs([st.tp for st in partition_states])
            result = {}
            accepted = []
            refreshed = 0       # partitions that took a new ISR in their leader epoch (refresh_state)
            slice_ = TimeSlice()
            for st in partition_states:
                slice_.tick()
                topic, p = tp = st.tp
                if self.broker_id not in st.replicas:
                    result[tp] = errors.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                if tp in self._offline:
                    result[tp] = errors.KAFKA_STORAGE_ERROR      # Kafka's HostedPartition.Offline (KIP-112)
                    continue
                part = self._partitions.get(tp)
                epoch = st.leader_and_isr.leader_epoch
                if part is not None and part.refresh_state(st.leader_and_isr):
                    # same leader and leader epoch, a newer znode version (partition epoch): only the ISR and
                    # the version are taken, as Kafka >= 2.8 accepts an equal leader epoch with a newer
                    # partition epoch. Without it a leader whose ISR write landed while its answer was lost
                    # (ZooKeeper outage) kept the stale version: every later ISR write "lost a race" and its
                    # ISR never changed again, even after a new controller re-sent the state (CI, ensemble down).
                    result[tp] = errors.NONE
                    la = st.leader_and_isr
                    refreshed += 1
                    state_change_log.info(
                        "Broker %d completed LeaderAndIsr request from controller %d epoch %d for the isr-update "
                        "transition for partition [%s,%d] (Leader:%d,ISR:%s,LeaderEpoch:%d,ZkVersion:%d): error 0",
                        self.broker_id, controller_id, controller_epoch, topic, p, la.leader,
                        ",".join(map(str, la.isr)), la.leader_epoch, la.zk_version)
                    continue
                if part is not None and epoch <= part.leader_epoch:
                    log.info("%s-%d: ignoring LeaderAndIsr from controller %d with leader epoch %d (have %d)",
                             topic, p, controller_id, epoch, part.leader_epoch)
                    state_change_log.info("Broker %d ignoring LeaderAndIsr request from controller %d epoch %d "
                                          "for partition [%s,%d] since its leader epoch %d is not higher than the "
                                          "current leader epoch %d", self.broker_id, controller_id, controller_epoch,
                                          topic, p, epoch, part.leader_epoch)
                    result[tp] = errors.STALE_CONTROLLER_EPOCH
                    continue
                accepted.append(st)
            if refreshed:
                log.info("LeaderAndIsr from controller %d epoch %d: %d partitions took a new ISR in their leader "
                         "epoch (each in state-change.log)", controller_id, controller_epoch, refreshed)
            result.update(self._host_new({st.tp: st for st in accepted}))
            gates = {}                              # tp -> (Partition, gate): appends held (_prepare_leader_epochs)
            applied = gevent.event.Event()          # set once every accepted state is applied (or failed)
            try:
                result.update(self._prepare_leader_epochs(accepted, result, gates, applied))
                self._apply_all(accepted, result, live_leaders, controller_id, controller_epoch, slice_)
            finally:
                applied.set()
                # make_leader opened the applied ones' gates; what is left (a partition whose make_leader failed,
                # an exception on the way) opens here: no append may wait forever.
                for part, gate in gates.values():
                    part.release_appends(gate)
            self._drop_idle_fetchers()
            # Answered in the request's order, whatever order the partitions were applied in.
            return {st.tp: result[st.tp] for st in partition_states if st.tp in result}

    def _apply_all(self, accepted, result, live_leaders, controller_id, controller_epoch, slice_):
        endpoints = {b: (h, port) for b, h, port in (live_leaders or ())}
        logged = state_change_log.isEnabledFor(logging.INFO)
        for st in self._apply_order(accepted):
            if st.tp not in result:
                result[st.tp] = self._apply_one(st, endpoints)
            if logged:
                la = st.leader_and_isr
                state_change_log.info(
                    "Broker %d completed LeaderAndIsr request from controller %d epoch %d for the %s "
                    "transition for partition [%s,%d] (Leader:%d,ISR:%s,LeaderEpoch:%d): error %d",
                    self.broker_id, controller_id, controller_epoch,
                    "become-leader" if la.leader == self.broker_id else "become-follower", st.tp[0], st.tp[1],
                    la.leader, ",".join(map(str, la.isr)), la.leader_epoch, result[st.tp])
            slice_.tick()

    def _apply_order(self, accepted):
        """``accepted`` with the partitions this broker already leads and keeps leading in a new epoch last: the new
        leaderships -- the partitions clients are waiting for -- first. After a broker failure the controller's
        broker got ~9,000 of each kind in one request (bench/controller_scale.py, 27,000 partitions); the bumped
        ones keep serving fetches in the meantime (their appends wait, ``_prepare_leader_epochs``)."""
        def bumps(st):
            part = self._partitions.get(st.tp)
            return part is not None and part.is_leader and st.leader_and_isr.leader == self.broker_id
        first = [st for st in accepted if not bumps(st)]
        return first + [st for st in accepted if bumps(st)] if len(first) < len(accepted) else accepted

    def _prepare_leader_epochs(self, accepted, result, gates, applied):
        """The new leader epochs of the hosted partitions this broker is to lead, recorded in their caches (at the
        log end) with every one's appends and markers held (``hold_appends``) from that moment until its checkpoint
        is durable, so no batch of a new epoch is written before the file naming it is, and none of the old epoch
        after it -- Kafka holds leaderIsrUpdateLock over makeLeader the same way. ``gates`` ({tp: (Partition,
        gate)}, the caller's, which releases whatever is still in it at the end) gets the holds.

        One partition (a small topic's failover) writes its checkpoint durably here, before it leads, as before.
        Many (a broker failure: thousands at once, each formerly two fsyncs on the event loop, 750 partitions 47 s
        on a busy disk) are written together by ``_make_epochs_durable`` in a greenlet -- ``offload``, one syncfs
        per file system -- *while* the request goes on: they are made leaders with their appends still held, and
        the LeaderAndIsr is answered before the sync returns. A survivor of a 27,000-partition failover got two
        LeaderAndIsr and then the UpdateMetadata that tell clients where the new leaders are; each request waited
        for its syncfs (0.1-0.8 s on this machine's shared disk) before the next one was read. Their holds move
        from ``gates`` to that greenlet, which releases them; meanwhile any request about one of them waits
        (``_await_new_epochs``), and the holds are released only once the request is applied too (``applied``
        set): a partition already leading must not append in its old epoch after a checkpoint naming the new one
        (so no leadership listener may wait for an append of it: both of the broker's spawn their loads).
        Followers (and new replicas) becoming leader leave their fetchers first, so no
        append moves a log end meanwhile; partitions this broker already leads (a new epoch after the controller
        shrank the ISR) keep serving fetches while their appends wait.

        Returns {tp: error code} of the partitions whose checkpoint could not be written here (the one-partition
        path): they do not lead (a bumped one is taken offline: nothing may be appended in the old epoch after a
        file that may name the new one)."""
        snaps = {}
        for st in accepted:
            tp = st.tp
            la = st.leader_and_isr
            part = self._partitions.get(tp)
            if tp in result or la.leader != self.broker_id or part is None:
                continue
            if not part.is_leader:
                self._remove_from_fetchers(tp)
            gates[tp] = (part, part.hold_appends())
            if part.epoch_cache.assign(la.leader_epoch, part.log.log_end_offset, flush=False):
                snaps[tp] = epoch_cache.snapshot(part.epoch_cache)
        if not snaps:
            return {}
        if len(snaps) > 1:
            done = gevent.event.Event()
            held = {}
            for tp in snaps:
                self._epochs_pending[tp] = done
                held[tp] = gates.pop(tp)
            bumps = sum(self._partitions[tp].is_leader for tp in snaps)
            gevent.spawn(self._make_epochs_durable, snaps, held, bumps, applied, done)
            return {}
        failed = {}
        for tp, (cache, _data, _version) in snaps.items():
            try:
                cache.flush()
            except Exception as e:  # noqa: BLE001 - that partition cannot lead: its error code
                failed[tp] = e
        for tp in failed:
            part, _gate = gates.pop(tp)
            if part.is_leader:
                log.error("%s-%d: its new leader epoch's checkpoint could not be written: it stops leading", *tp)
                part.make_offline()                     # opens the gate: held appends answer 6
                self._notify(tp, True, False)
            else:
                part.release_appends(_gate)
        return {tp: _error_code(e) for tp, e in failed.items()}

    def _make_epochs_durable(self, snaps, held, bumps, applied, done):
        """Greenlet (``_prepare_leader_epochs``): the checkpoints of ``snaps`` ({tp: epoch_cache.snapshot}) written
        together in ``offload``, then settled on the loop (a cache changed meanwhile, or one the batch could not
        write, is flushed again on its own); then, once the request is ``applied`` (make_leader stamped the new
        epochs), the appends ``held`` ({tp: (Partition, gate)}) go on. A partition whose checkpoint cannot be
        written at all leads no more, although its LeaderAndIsr was answered: it is taken offline (its held appends
        answer NOT_LEADER_OR_FOLLOWER) and its log dir reported failed (Kafka's LogDirFailureChannel: an I/O error on
        a checkpoint takes the dir offline; the controller hears of it through ``/log_dir_event_notification`` and
        elects other leaders)."""
        started = time.monotonic()
        failed = {}
        try:
            try:
                ok = self.offload(_write_together, list(snaps.values()))
            except Exception:  # noqa: BLE001 - settled one by one below
                log.exception("writing %d leader-epoch checkpoints together", len(snaps))
                ok = False
            log.log(logging.INFO if len(snaps) >= 100 else logging.DEBUG, "%d new leader epochs (%d of partitions "
                    "already led) written together in %.2f s", len(snaps), bumps, time.monotonic() - started)
            slice_ = TimeSlice()
            for tp, snap in snaps.items():
                slice_.tick()
                try:
                    epoch_cache.settle([snap], ok)     # on the loop: a cache changed meanwhile is flushed again
                except Exception as e:  # noqa: BLE001 - that partition cannot lead
                    failed[tp] = e
            applied.wait()
        except BaseException as e:  # a bug, or the greenlet killed: none of them leads on (nothing is assumed)
            failed.update((tp, e) for tp in snaps if tp not in failed)
            raise
        finally:
            for tp in snaps:
                if self._epochs_pending.get(tp) is done:
                    del self._epochs_pending[tp]
            for tp, e in failed.items():
                part, gate = held.pop(tp)
                log.error("%s-%d: its new leader epoch's checkpoint could not be written: it stops leading (%s)",
                          tp[0], tp[1], e)
                if isinstance(e, OSError):
                    dir_failure.storage_error(snaps[tp][0].path, e)
                was_leader = part.is_leader
                part.make_offline()                     # opens the gate: held appends answer 6
                if self._partitions.get(tp) is part:
                    self._notify(tp, was_leader, False)
            for part, gate in held.values():
                part.release_appends(gate)
            done.set()

    def await_epochs_durable(self, timeout=None):
        """Wait until every new leader epoch being made durable is (``_make_epochs_durable``); False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for done in set(self._epochs_pending.values()):
            if not done.wait(None if deadline is None else max(0.0, deadline - time.monotonic())):
                return False
        return True

    def _await_new_epochs(self, tps):
        """Wait until no partition of ``tps`` has a new leader epoch still being made durable
        (``_make_epochs_durable``): a request changing one of them sees its new epoch settled."""
        pending = self._epochs_pending
        if pending:
            for done in {pending[tp] for tp in tps if tp in pending}:
                done.wait()

    def _apply_one(self, st, endpoints):
        """One accepted state of a hosted partition: make it leader or follower; returns its error code."""
        topic, p = tp = st.tp
        la = st.leader_and_isr
        part = self._partitions[tp]
        try:
            leader = la.leader
            epoch = la.leader_epoch
            was_leader = part.is_leader
            self._remove_from_fetchers(tp)
            if leader == self.broker_id:
                part.make_leader(epoch, la.isr, st.replicas, la.zk_version, la.controller_epoch,
                                 keep_hold=tp in self._epochs_pending)
                # DEBUG: the state-change log has this line at INFO already (10,000 partitions: 0.4 s twice over)
                log.debug("%s-%d: leader, epoch %d, ISR %s", topic, p, epoch, part.isr)
            else:
                part.make_follower(leader, epoch, la.isr, st.replicas, la.zk_version, la.controller_epoch)
                if leader >= 0 and not self.in_controlled_shutdown:
                    self._add_to_fetcher(tp, part, leader, epoch, endpoints.get(leader))
                log.debug("%s-%d: follower of %d, epoch %d", topic, p, leader, epoch)
        except Exception as e:  # noqa: BLE001 - one partition's failure is its own error code
            log.exception("%s-%d: applying LeaderAndIsr failed", topic, p)
            return _error_code(e)
        self._notify(tp, was_leader, part.is_leader)
        return 0

    def _notify(self, tp, was_leader, is_leader):
        for fn in list(self.leadership_listeners):
            try:
                fn(tp, was_leader, is_leader)
            except Exception:  # noqa: BLE001 - a listener's bug must not undo the state change
                log.exception("leadership listener %r for %s-%d", fn, tp[0], tp[1])

    def _host_new(self, states):
        """Host every partition of ``states`` ({tp: PartitionLeadership}) not hosted yet, in one batch: logs created
        (or, after a restart, found) and Partition objects built, both in ``offload``, then registered here.
        Returns {tp: error code} for the partitions that could not be hosted (a log that could not be made:
        KAFKA_STORAGE_ERROR, 56)."""
        tps = [tp for tp in states if tp not in self._partitions]
        if not tps:
            return {}
        # The epoch a new leader starts is written to its checkpoint in offload too (make_leader then finds it there
        # and writes nothing): 10,000 first checkpoint files cost ~1.8 s of file creation on this disk.
        leading = {tp: states[tp].leader_and_isr.leader_epoch for tp in tps
                   if states[tp].leader_and_isr.leader == self.broker_id}
        lm = self.log_manager
        failed = {}
        configs = {}
        for topic in {tp[0] for tp in tps}:
            try:
                configs[topic] = self.log_config_for(topic)
            except Exception as e:  # noqa: BLE001 - the topic's partitions fail, the others go on
                log.exception("LogConfig of topic %s", topic)
                failed.update((tp, _error_code(e)) for tp in tps if tp[0] == topic)
        if lm.offline_dirs:
            # A replica whose log is not found may be in an offline dir: Kafka creates it elsewhere only for a new
            # partition (is_new), never an empty copy of a replica the failed disk holds (KIP-112).
            for tp in tps:
                if tp not in failed and not states[tp].is_new and lm.get_log(tp) is None:
                    log.error("%s-%d: no log in the online log dirs and log dirs %s are offline: not created",
                              tp[0], tp[1], lm.offline_dirs)
                    failed[tp] = errors.KAFKA_STORAGE_ERROR
        tps = [tp for tp in tps if tp not in failed]
        try:
            placements = lm.place_new_logs([tp for tp in tps if lm.get_log(tp) is None])
        except errors.KafkaStorageError:
            failed.update((tp, errors.KAFKA_STORAGE_ERROR) for tp in tps)
            return failed
        existing = {tp: lm.get_log(tp) for tp in tps if tp not in placements}
        started = time.monotonic()
        try:
            new_logs, built = self.offload(self._build_partitions, tps, configs, placements, existing, leading,
                                           dict(self._hw_checkpoint))
        except Exception as e:  # noqa: BLE001 - a bug: these partitions fail (a retry loads what was made)
            log.exception("hosting %d partitions", len(tps))
            failed.update((tp, _error_code(e)) for tp in tps)
            return failed
        lm.add_logs(new_logs)
        log.log(logging.INFO if len(tps) >= 100 else logging.DEBUG, "hosting %d new partitions took %.2f s "
                "(%d logs created)", len(tps), time.monotonic() - started, len(new_logs.logs))
        for tp in tps:
            part = built[tp]
            if isinstance(part, Partition):
                self._partitions[tp] = part
                if lm.future_log(tp) is not None:
                    self._start_move(tp)         # a move interrupted by a restart resumes
            else:
                log.error("%s-%d: cannot host the partition: %r", tp[0], tp[1], part)
                failed[tp] = _error_code(part)
        return failed

    def _build_partitions(self, tps, configs, placements, existing, leading, hw_checkpoint):
        """Blocking, in ``offload``: the logs of ``placements`` created (``LogManager.create_logs``), a Partition
        built for every tp, and the epoch of the ones this broker is to lead ({tp: epoch}) recorded in their epoch
        caches at the log end (what ``make_leader`` does first). Reads nothing this manager changes
        (``hw_checkpoint`` is a copy). Returns (NewLogs, {tp: Partition | the exception that stopped it})."""
        new_logs = self.log_manager.create_logs(placements, configs)
        built = dict(new_logs.failed)
        epochs = {}                              # tp -> epoch_cache.snapshot of a new leader epoch
        lag = self.settings["replica.lag.time.max.ms"]
        for tp in tps:
            if tp in built:
                continue
            topic, p = tp
            try:
                part = Partition(topic, p, new_logs.logs.get(tp) or existing[tp], configs[topic], self.broker_id,
                                 flusher=self.flusher, clock=self.clock, high_watermark=hw_checkpoint.get(tp, 0),
                                 isr_writer=self.isr_writer, isr_spawn=gevent.spawn, replica_lag_time_max_ms=lag,
                                 new_log=tp in new_logs.fresh, isr_stats=self.isr_stats,
                                 isr_eligible=self.isr_eligible)
                if tp in leading and part.epoch_cache.assign(leading[tp], part.log.log_end_offset, flush=False):
                    epochs[tp] = epoch_cache.snapshot(part.epoch_cache)
            except Exception as e:  # noqa: BLE001 - reported as this partition's error code
                built[tp] = e
                continue
            part.leader = -1                     # neither role until the LeaderAndIsr that created it is applied
            part.leader_epoch = -1
            built[tp] = part
        self._write_epochs(epochs, built)
        return new_logs, built

    @staticmethod
    def _write_epochs(epochs, failed):
        """Blocking: the epoch checkpoints of ``epochs`` ({tp: epoch_cache.snapshot}) written together, one syncfs
        per file system (epoch_cache.write_together); when that fails, each one durably on its own, and a
        partition whose checkpoint cannot be written goes into ``failed`` ({tp: exception})."""
        if not epochs:
            return
        try:
            epoch_cache.write_together(epochs.values())
            ok = True
        except OSError:
            log.exception("writing %d leader-epoch checkpoints together; writing them one by one", len(epochs))
            ok = False
        for tp, snap in epochs.items():
            try:
                epoch_cache.settle([snap], ok)
            except Exception as e:  # noqa: BLE001 - that partition cannot lead: its error code
                failed[tp] = e

    def _fetch_settings(self):
        s = self.settings
        return {"wait_ms": s["replica.fetch.wait.max.ms"], "min_bytes": s["replica.fetch.min.bytes"],
                "max_bytes": s["replica.fetch.max.bytes"], "response_max_bytes": s["replica.fetch.response.max.bytes"],
                "backoff_ms": s["replica.fetch.backoff.ms"], "socket_timeout_ms": s["replica.socket.timeout.ms"],
                "rcvbuf": self._follower_rcvbuf, "security": self.security,
                "quota": self._follower_quota}

    def _add_to_fetcher(self, tp, part, leader, epoch, endpoint):
        # This broker's own inter-broker listener first (``connect``: the metadata cache), as Kafka's makeFollowers
        # does: live_leaders carry the endpoint of the *controller's* inter-broker listener, which differs while a
        # cluster is rolled to another security.inter.broker.protocol (section 7.5), and a TLS/SASL fetcher on a
        # PLAINTEXT port never gets in. live_leaders only when the cache does not know the leader yet.
        cached = self.connect(leader) if self.connect is not None else None
        endpoint = cached if cached is not None else endpoint
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
        with self._state_lock:
            partitions = list(partitions)
            self._await_new_epochs([(topic, p) for topic, p, _delete in partitions])
            return self._stop_replicas(partitions)

    def _stop_replicas(self, partitions):
        result = {}
        detached = []                        # (tp, log, dir) of deleted partitions: directories removed in offload
        slice_ = TimeSlice()
        traced = state_change_log.isEnabledFor(TRACE)
        for topic, p, delete in partitions:
            tp = (topic, p)
            if traced:
                state_change_log.log(TRACE, "Broker %d handling StopReplica (delete=%s) for partition [%s,%d]",
                                     self.broker_id, "true" if delete else "false", topic, p)
            if tp in self._offline:
                result[tp] = errors.KAFKA_STORAGE_ERROR          # Kafka's HostedPartition.Offline (KIP-112)
                continue
            try:
                self._remove_from_fetchers(tp)
                part = self._partitions.pop(tp, None) if delete else self._partitions.get(tp)
                if part is not None:
                    was_leader = part.is_leader
                    part.make_offline()
                    self._notify(tp, was_leader, False)
                if delete:
                    self._hw_checkpoint.pop(tp, None)
                    self._cancel_move(tp)        # its future directory goes first: never one without the other
                    self.log_manager.preferred_dirs.pop(tp, None)
                    gone = self.log_manager.detach_log(tp)
                    if gone is not None:
                        detached.append(gone)
                result[tp] = 0
            except Exception as e:  # noqa: BLE001
                log.exception("%s-%d: StopReplica failed", topic, p)
                result[tp] = _error_code(e)
            slice_.tick()
        if detached:
            try:
                self.offload(self.log_manager.remove_log_dirs, detached)
            except Exception as e:  # noqa: BLE001 - the logs are closed and forgotten; their directories stay
                log.exception("removing the directories of %d deleted partitions", len(detached))
                for tp, _log, _dir in detached:
                    result[tp] = _error_code(e)
        self._drop_idle_fetchers()
        return result

    # ---------------------------------------------------------------------- log dirs (KIP-113, log_dir_move.py)
    def alter_log_dir(self, topic, p, log_dir):
        """Move the replica of ``topic``-``p`` to ``log_dir`` (AlterReplicaLogDirs; Kafka's
        ReplicaManager.alterReplicaLogDirs). Returns the partition's error code: INVALID_TOPIC_EXCEPTION (17) when
        the future directory's name would pass 255 bytes (Kafka's rule); LOG_DIR_NOT_FOUND (57) for a
        path that is not one of log.dirs (exactly, as Kafka compares them); REPLICA_NOT_AVAILABLE (9) for a replica
        not hosted here, whose log will then be created in ``log_dir`` (Kafka's preferred log dir; remembered only
        for a partition ``partition_exists`` knows);
        KAFKA_STORAGE_ERROR (56) when the future log cannot be made; else 0: already there (a move elsewhere is
        cancelled), already moving there, or a move started (another destination's move replaced). May yield."""
        lm = self.log_manager
        if len(future_dir_name(topic, p).encode()) > MAX_FILE_NAME:
            return errors.INVALID_TOPIC_EXCEPTION    # Kafka's "The topic name is too long" (KAFKA-4893)
        if log_dir not in lm.log_dirs:
            return errors.LOG_DIR_NOT_FOUND
        tp = (topic, p)
        with self._state_lock:
            self._await_new_epochs([tp])
            if tp not in self._partitions:
                # Only for partitions the cluster has: a client naming millions of made-up ones grows nothing.
                if self.partition_exists is None or self.partition_exists(topic, p):
                    lm.preferred_dirs[tp] = log_dir
                return errors.REPLICA_NOT_AVAILABLE
            if lm.log_dir_of(tp) == log_dir:
                self._cancel_move(tp)
                return 0
            future = lm.future_log(tp)
            if future is not None and future[1] == log_dir:
                if tp not in self._moves:
                    self._start_move(tp)
                return 0
            self._cancel_move(tp)
            try:
                log_ = self.offload(lm.make_future_log, tp, log_dir)
            except OSError as e:
                log.error("%s-%d: cannot create its future log in %s: %s", topic, p, log_dir, e)
                return errors.KAFKA_STORAGE_ERROR
            lm.add_future_log(tp, log_, log_dir)
            self._start_move(tp)
            log.info("%s-%d: moving from %s to %s", topic, p, lm.log_dir_of(tp), log_dir)
            return 0

    def _start_move(self, tp):
        self._moves[tp] = LogDirMove(self, tp).start()

    def _cancel_move(self, tp):
        """Stop the move of ``tp`` (if any) and remove its future log (its directory in ``offload``)."""
        move = self._moves.pop(tp, None)
        if move is not None:
            move.stop()
        gone = self.log_manager.detach_future(tp)
        if gone is not None:
            self.offload(self.log_manager.remove_log_dirs, [gone])

    def move_ended(self, move):
        """A LogDirMove's greenlet ended (done, failed or the partition went)."""
        if self._moves.get(move.tp) is move:
            del self._moves[move.tp]

    def log_dir_usage(self):
        """``[(log dir, [(tp, size bytes, offset lag, is_future)])]`` for every log dir, in log.dirs order
        (DescribeLogDirs): the lag of a current log is max(HW - LEO, 0), of a future log the current log's LEO
        minus its own (Kafka's getLogEndOffsetLag; -1 when the partition is not hosted any more). An offline log dir
        (KIP-112) has None instead of its list."""
        lm = self.log_manager
        by_dir = {d: [] for d in lm.log_dirs}
        slice_ = TimeSlice()             # 10,000 partitions: one size sum over the segments of each
        for tp, lg in lm.all_logs().items():
            slice_.tick()
            part = self._partitions.get(tp)
            lag = max(part.high_watermark - lg.log_end_offset, 0) if part is not None else -1
            d = lm.log_dir_of(tp)
            if d is not None:            # (deleted while the slice yielded)
                by_dir[d].append((tp, lg.size_in_bytes, lag, False))
        for tp, lg in lm.all_futures().items():
            slice_.tick()
            current, future = lm.get_log(tp), lm.future_log(tp)
            if future is not None:
                lag = current.log_end_offset - lg.log_end_offset if current is not None else -1
                by_dir[future[1]].append((tp, lg.size_in_bytes, lag, True))
        offline = lm.failures.offline
        return [(d, None if d in offline else sorted(by_dir[d])) for d in lm.log_dirs]

    # ------------------------------------------------------------------------- failed log dirs (KIP-112)
    def handle_log_dir_failure(self, log_dir):
        """``log_dir`` went offline (kbroker/log/dir_failure.py): every partition whose log is there stops fetching
        and leading here and answers KAFKA_STORAGE_ERROR (56) until a restart, moves into or out of it stop, the
        LogManager forgets its logs (Kafka's ReplicaManager.handleLogDirFailure). The broker then tells the controller
        (``/log_dir_event_notification``), which elects other leaders and takes this replica out of the ISRs.
        Returns the partitions taken offline."""
        lm = self.log_manager
        with self._state_lock:
            tps = sorted(tp for tp in self._partitions if lm.log_dir_of(tp) == log_dir)
            for tp in list(self._moves):
                future = lm.future_log(tp)
                if tp in tps or (future is not None and future[1] == log_dir):
                    self._moves.pop(tp).stop()
            for tp in tps:
                self._remove_from_fetchers(tp)
                part = self._partitions.pop(tp)
                was_leader = part.is_leader
                part.make_offline()          # parked produce/fetch requests wake and answer
                self._offline.add(tp)
                self._notify(tp, was_leader, False)
            lm.handle_dir_failure(log_dir)
            self._drop_idle_fetchers()
        log.error("log dir %s is offline: partitions %s stopped on broker %d", log_dir,
                  ", ".join("%s-%d" % tp for tp in tps) or "(none)", self.broker_id)
        return tps

    def offline_partitions(self):
        return set(self._offline)

    # -------------------------------------------------------------------------------------- periodic work
    def maybe_shrink_isr(self, now=None):
        """ISR expiry over every led partition; returns the partitions whose ISR shrank.

        The due shrinks run together, each in a greenlet of a pool of ``SHRINK_CONCURRENCY``, so their ZooKeeper
        writes meet in the broker's ISR write batches (kbroker/replica/isr_writes.py). One after another, each
        waited for its own round trip: a dead broker's ~4,800 followers took ~50 s to leave the ISRs of one
        survivor, and its controller noticed the death behind them (docs/performance.md, issue 15)."""
        now = self.clock() if now is None else now
        due = [(tp, part) for tp, part in list(self._partitions.items()) if part.out_of_sync_replicas(now)]
        if len(due) <= 1:
            return [tp for tp, part in due if part.maybe_shrink_isr(now)]
        pool = Pool(SHRINK_CONCURRENCY)
        jobs = [(tp, pool.spawn(part.maybe_shrink_isr, now)) for tp, part in due]
        pool.join()
        return [tp for tp, job in jobs if job.value]

    def high_watermarks(self):
        return {tp: part.high_watermark for tp, part in self._partitions.items()}

    def checkpoint_high_watermarks(self):
        """Write every log dir's replication-offset-checkpoint: the offsets gathered here, the files formatted and
        written (fsync) in ``offload`` -- 10,000 partitions make a 300 KB file, and an fsync on a busy disk takes
        tens of ms, every replica.high.watermark.checkpoint.interval.ms (5 s)."""
        hws = dict(self._hw_checkpoint)
        hws.update(self.high_watermarks())
        by_dir = {d: {} for d in self.log_manager.online_dirs}
        for tp, hw in hws.items():
            d = self.log_manager.log_dir_of(tp)
            if d in by_dir:
                by_dir[d][tp] = hw
        self._hw_checkpoint = hws
        self.offload(_write_checkpoints, HW_CHECKPOINT, by_dir, self.log_manager.failures)


def _write_together(snaps):
    """``offload``: epoch_cache.write_together; True when every checkpoint was written and synced."""
    try:
        epoch_cache.write_together(snaps)
    except OSError:
        log.exception("writing %d leader-epoch checkpoints together; writing them one by one", len(snaps))
        return False
    return True
