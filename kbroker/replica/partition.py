"""A partition this broker hosts: its Log, leadership state, high watermark, leader-epoch cache, producer state,
the leader's view of its followers, and the waiters parked on it.

Roles (set by the ReplicaManager from LeaderAndIsr; a Partition built directly is its own sole leader, epoch 0):
* leader  -- ``make_leader``: appends client data stamped with ``leader_epoch`` (batch header field), records
  ``(leader_epoch, LEO)`` in the epoch cache, tracks every follower's LEO and last caught-up time from their
  Fetch requests, keeps the ISR and the high watermark;
* follower -- ``make_follower``: only ``append_as_follower`` (the leader's batches byte for byte, offsets kept)
  and ``truncate_to`` (by leader epoch, driven by the fetcher) change the log.

Invariants:
* Offsets are assigned from ``log.log_end_offset`` and the batch is appended in the same greenlet step (no gevent
  yield between them), so two produce requests never get the same offsets.
* ``high_watermark`` <= LEO. On the leader it is min LEO over the ISR and never goes backwards; a follower in the
  ISR whose LEO is not known yet (no fetch since this broker became leader) holds it. While an ISR write is in
  flight (the greenlet yields to ZooKeeper) the minimum is taken over the maximal ISR -- the current one plus any
  replica being added -- because ZooKeeper may already name the newcomer, and the controller may elect it.
  With ISR = [self] and no write in flight it is the LEO right after every append (no waiting, no greenlet
  switch for acks=all). On a follower it is
  min(leader HW, own LEO). Consumers never see records at or above it.
* A follower is caught up at time t when its fetch at t asked for offset >= the leader's LEO at t, or asked for
  offset >= the leader's LEO at its previous fetch (caught up as of that fetch; Kafka's rule). It leaves the ISR
  when not caught up for ``replica_lag_time_max_ms``; it rejoins when its LEO >= HW and >= the start offset of the
  current leader epoch, and its broker is ISR-eligible (``isr_eligible``: registered, in this broker's metadata;
  KIP-841). The controller takes a dead broker out of the ISRs without a new leader epoch, so a broker whose
  session expired while it still runs (a zombie) keeps fetching in that epoch: only this rule keeps it out.
  Every ISR change goes through ``isr_writer`` (conditional write of the partition state
  znode); a lost race (None) keeps the old ISR until the controller's next LeaderAndIsr.
* ``waiters`` (consumer fetches, delayed produces) wake on HW advances and role/ISR changes; ``replica_waiters``
  (follower fetches, which read up to the LEO) wake on every append.
* ``leadership`` counts the times this broker stopped leading; a delayed produce that started in another term
  answers NOT_LEADER_OR_FOLLOWER (its records may have been truncated since).

Transactions (KIP-98; the rules are in producer_state.py):
* ``last_stable_offset`` = min(first offset of the oldest transaction open or whose marker is not yet below the HW,
  HW); the same on followers from their own producer state and HW. read_committed reads stop below it
  (``read(..., isolation_level=1)``). It moves only with the HW or a marker append, both of which wake ``waiters``,
  so parked read_committed fetches re-read when it moves.
* Markers come from ``write_marker`` (leader, WriteTxnMarkers) or the leader's bytes (``append_as_follower``); both
  close the producer's transaction, and an ABORT of a non-empty one adds its ``.txnindex`` entry in the segment of
  the marker (``Log.add_aborted_txn``) before anything yields. ``aborted_transactions`` reads those files.
* The producer state is loaded at start and after a truncation from the newest producer snapshot at or below both
  the log end and the base of the first segment whose .txnindex recovery emptied (that is at or below the
  recovery point after a crash), then the log's batches and markers after it are replayed (``Log.producer_batches``),
  which re-adds the emptied .txnindex entries; no usable snapshot -> the whole log is replayed. Snapshots are
  taken by the Log at segment rolls and clean shutdown (``Log.producer_snapshot_source``, log.py).
"""
import logging
import time

import gevent.event

from kbroker import errors
from kbroker.errors import NotEnoughReplicas, NotLeaderOrFollower
from kbroker.log import producer_snapshot
from kbroker.record import (RecordConfig, batch_header, replica_fields, replicated_batches, stored_append,
                            validate_for_append)
from kbroker.record.control import marker_batch, marker_of
from kbroker.replica.epoch_cache import LeaderEpochCache
from kbroker.replica.producer_state import ProducerStateManager

log = logging.getLogger(__name__)


def now_ms():
    return int(time.time() * 1000)


class AppendResult:
    __slots__ = ("base_offset", "last_offset", "log_append_time", "log_start_offset", "duplicate")

    def __init__(self, base_offset, last_offset, log_append_time, log_start_offset, duplicate=False):
        self.base_offset = base_offset
        self.last_offset = last_offset
        self.log_append_time = log_append_time
        self.log_start_offset = log_start_offset
        self.duplicate = duplicate


class IsrStats:
    """ISR changes this broker made as leader (Kafka's ReplicaManager IsrShrinksPerSec / IsrExpandsPerSec): one
    instance per ReplicaManager shared by its Partitions, so the counts outlive a deleted partition; read by the
    metrics collectors (kbroker/metrics/cluster.py). Written only by ``Partition._change_isr`` (event loop)."""
    __slots__ = ("shrinks", "expands")

    def __init__(self):
        self.shrinks = 0
        self.expands = 0


class ReplicaState:
    """The leader's view of one follower (reset whenever this broker becomes leader)."""
    __slots__ = ("leo", "last_caught_up_ms", "last_fetch_leader_leo", "last_fetch_ms", "log_start")

    def __init__(self, last_caught_up_ms):
        self.leo = -1                       # unknown until the follower's first fetch
        self.log_start = -1                 # the follower's log start offset, from its Fetch (v5+), -1 unknown
        self.last_caught_up_ms = last_caught_up_ms
        self.last_fetch_leader_leo = -1
        self.last_fetch_ms = 0

    def __repr__(self):
        return "ReplicaState(leo=%d, caught_up=%d)" % (self.leo, self.last_caught_up_ms)


class Partition:
    def __init__(self, topic, index, log, log_config, broker_id, flusher=None, clock=now_ms, high_watermark=None,
                 isr_writer=None, replica_lag_time_max_ms=10000, new_log=False, isr_stats=None, isr_spawn=None,
                 isr_eligible=None):
        """``flusher(log)`` fsyncs a log off the event loop (flush.messages); ``clock()`` -> ms;
        ``high_watermark``: the checkpointed HW (None: the LEO -- a standalone leader); ``isr_writer`` as in
        the module docstring (None: ISR changes apply locally, zk_version + 1); ``new_log``: the log was just
        created in a new directory (nothing to rebuild; the epoch cache's first write needs no fsync,
        epoch_cache.py); ``isr_stats``: the ReplicaManager's ``IsrStats`` (None: the partition's own);
        ``isr_spawn(fn, *args)``: runs an ISR expansion's write in a greenlet of its own, so the follower's Fetch
        that caught up is answered without waiting for ZooKeeper (None: the expansion is written in the call);
        ``isr_eligible(broker_id) -> bool``: may that broker's replica join the ISR (None: any; module docstring)."""
        self.topic = topic
        self.index = index
        self.log = log
        self.broker_id = broker_id
        self.flusher = flusher
        self.clock = clock
        self.isr_writer = isr_writer
        self.isr_spawn = isr_spawn
        self.isr_eligible = isr_eligible
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.leader = broker_id
        self.leader_epoch = 0
        self.controller_epoch = 0
        self.zk_version = 0
        self.replicas = [broker_id]
        self.isr = [broker_id]
        self.followers = {}
        self.leadership = 0
        self.isr_stats = isr_stats if isr_stats is not None else IsrStats()
        self._isr_write_pending = False
        # Set while the checkpoint of a new leader epoch of this partition is written together with thousands of
        # others (ReplicaManager._prepare_leader_epochs), which may outlast make_leader: appends wait for it, as
        # Kafka's appends wait for leaderIsrUpdateLock during makeLeader. None almost always.
        self._append_gate = None
        # The ISR being written to ZooKeeper, None when no write is in flight. Until the write lands the high
        # watermark is computed over the union of both ISRs (Kafka's "maximal ISR", KIP-497): a replica being added
        # is already named in ZooKeeper, where the controller may elect it, so the HW must not pass its LEO.
        self._pending_isr = None
        leo = log.log_end_offset
        self.high_watermark = leo if high_watermark is None else max(log.log_start_offset, min(high_watermark, leo))
        self.producers = ProducerStateManager()
        log.producer_snapshot_source = lambda: self.producers.snapshot_entries(log.log_start_offset)
        self.waiters = set()
        self.replica_waiters = set()
        self.set_config(log_config)
        if not new_log:
            self._rebuild_producers()
        self.epoch_cache = LeaderEpochCache.load(log, fresh=new_log)

    def replace_log(self, new_log, epoch_cache):
        """The log-dir move (log_dir_move.py) swapped the log for its copy in another log dir: the same offsets and
        bytes, so the producer state, HW and roles stay; the epoch cache now lives in the new directory."""
        self.log = new_log
        self.epoch_cache = epoch_cache
        new_log.producer_snapshot_source = lambda: self.producers.snapshot_entries(new_log.log_start_offset)

    def set_config(self, log_config):
        """The topic's LogConfig, for what the partition itself applies (min.insync.replicas, flush.messages, record
        validation). The Log's own config is the LogManager's to set (``set_topic_config``), never written here."""
        self.log_config = log_config
        self.record_config = RecordConfig(
            max_message_bytes=log_config.max_message_bytes,
            timestamp_type=log_config.message_timestamp_type,
            timestamp_difference_max_ms=log_config.message_timestamp_difference_max_ms,
            compacted=log_config.compacts,
            leader_epoch=self.leader_epoch,
        )

    def __repr__(self):
        return "Partition(%s-%d leader=%d epoch=%d isr=%s hw=%d leo=%d)" % (
            self.topic, self.index, self.leader, self.leader_epoch, self.isr, self.high_watermark,
            self.log.log_end_offset)

    # ---------------------------------------------------------------------------------------------- state
    @property
    def is_leader(self):
        return self.leader == self.broker_id

    @property
    def log_end_offset(self):
        return self.log.log_end_offset

    @property
    def log_start_offset(self):
        return self.log.log_start_offset

    @property
    def last_stable_offset(self):
        """First offset of the oldest unstable transaction, capped by the HW (= HW when none): module docstring."""
        hw = self.high_watermark
        producers = self.producers
        if not producers.ongoing and not producers.unreplicated:
            return hw
        first = producers.first_unstable_offset(hw)
        return first if first is not None and first < hw else hw

    def check_leader_epoch(self, current_leader_epoch):
        """KIP-320 fencing of a request's current_leader_epoch (-1: the sender does not know it)."""
        if current_leader_epoch == -1 or current_leader_epoch == self.leader_epoch:
            return
        if current_leader_epoch < self.leader_epoch:
            raise errors.FencedLeaderEpoch("%s-%d: epoch %d is older than the current %d"
                                           % (self.topic, self.index, current_leader_epoch, self.leader_epoch))
        raise errors.UnknownLeaderEpoch("%s-%d: epoch %d is newer than the current %d"
                                        % (self.topic, self.index, current_leader_epoch, self.leader_epoch))

    # ---------------------------------------------------------------------------------------- transitions
    def make_leader(self, leader_epoch, isr, replicas, zk_version, controller_epoch=0, keep_hold=False):
        """``keep_hold``: appends held by ``hold_appends`` stay held (the ReplicaManager releases them once this
        epoch's checkpoint is durable, which it may still be writing when it answers the LeaderAndIsr)."""
        now = self.clock()
        was_leader = self.is_leader
        self.controller_epoch = controller_epoch
        self.leader = self.broker_id
        self.leader_epoch = leader_epoch
        self.record_config.leader_epoch = leader_epoch
        self.replicas = list(replicas)
        self.isr = list(isr) if isr else [self.broker_id]
        self.zk_version = zk_version
        # The new epoch starts at our LEO: followers asking for an older epoch truncate to where it ended here.
        # (Held: the epoch is recorded already, its checkpoint being written -- a flush here would be a second one.)
        self.epoch_cache.assign(leader_epoch, self.log.log_end_offset, flush=not keep_hold)
        # Still leading (a new epoch from the controller, e.g. after it changed the ISR): what we know of the
        # followers stays true, our log was never truncated. Otherwise ISR members count as caught up now (in sync
        # by the controller's word) and the others never were; their LEOs are unknown until they fetch.
        old = self.followers if was_leader else {}
        self.followers = {r: old.get(r) or ReplicaState(now if r in self.isr else 0)
                          for r in self.replicas if r != self.broker_id}
        self.maybe_advance_hw()
        if not keep_hold:
            self._open_gate()  # appends held for this epoch (hold_appends) go on, stamped with it
        self._wake()

    def make_follower(self, leader, leader_epoch, isr, replicas, zk_version, controller_epoch=0):
        if self.is_leader:
            self.leadership += 1
        self.controller_epoch = controller_epoch
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.record_config.leader_epoch = leader_epoch
        self.replicas = list(replicas)
        self.isr = list(isr)
        self.zk_version = zk_version
        self.followers = {}
        self._open_gate()      # held appends answer NOT_LEADER_OR_FOLLOWER
        self._wake()

    def make_offline(self):
        """Neither leader nor fetching (StopReplica): parked requests answer NOT_LEADER_OR_FOLLOWER."""
        if self.is_leader:
            self.leadership += 1
        self.leader = -1
        self.followers = {}
        self._open_gate()
        self._wake()

    # ---------------------------------------------------------------------------------------- leader write
    def hold_appends(self):
        """Appends and markers wait from now until ``release_appends(gate)``: the log end stays where it is while
        a new epoch starting there is made durable. Returns the gate. Never called from an append."""
        gate = self._append_gate = gevent.event.Event()
        return gate

    def release_appends(self, gate):
        if self._append_gate is gate:
            self._append_gate = None
        gate.set()

    def _open_gate(self):
        """A role change ends any hold at once: in make_leader, before the leadership listeners run (one waiting
        for an append held here would otherwise wait for its own release)."""
        gate = self._append_gate
        if gate is not None:
            self.release_appends(gate)

    def _wait_for_gate(self):
        gate = self._append_gate
        while gate is not None:      # re-read: a later LeaderAndIsr may have set another gate meanwhile
            gate.wait()
            gate = self._append_gate

    def append(self, records, produce_version, acks):
        if self._append_gate is not None:
            self._wait_for_gate()
        if not self.is_leader:
            raise NotLeaderOrFollower("broker %d is not the leader of %s-%d" % (self.broker_id, self.topic,
                                                                                 self.index))
        if acks == -1 and len(self.isr) < self.log_config.min_insync_replicas:
            raise NotEnoughReplicas("ISR %s is smaller than min.insync.replicas=%d"
                                    % (self.isr, self.log_config.min_insync_replicas))
        lg = self.log
        now = now_ms()
        info = validate_for_append(records, lg.log_end_offset, now, self.record_config, produce_version)
        pid = info.producer_id
        if pid >= 0:
            # An internal writer's batch without sequence (the group coordinator's TxnOffsetCommit) skips the
            # sequence checks: Kafka's AppendOrigin.COORDINATOR.
            coordinator = produce_version is None and info.base_sequence < 0
            dup = self.producers.check(pid, info.producer_epoch, info.base_sequence, info.last_sequence,
                                       info.is_transactional, coordinator)
            if dup is not None:
                return AppendResult(dup[0], dup[1], -1, lg.log_start_offset, duplicate=True)
        lg.append(info)
        if self.epoch_cache.latest_epoch != info.leader_epoch:
            # A standalone Partition (never made leader) or the first append after a log reset.
            self.epoch_cache.assign(info.leader_epoch, info.first_offset)
        if pid >= 0:
            # Before the flush below: the flusher yields (fsync in the worker pool), and a retry of this batch
            # handled meanwhile must find it in the producer state, or it is appended twice.
            self.producers.update(pid, info.producer_epoch, info.base_sequence, info.last_sequence,
                                  info.first_offset, info.last_offset, info.is_transactional, info.max_timestamp)
        return self._appended(lg, info)

    def write_marker(self, producer_id, producer_epoch, coordinator_epoch, commit):
        """Append a COMMIT/ABORT marker for ``producer_id`` (leader only; WriteTxnMarkers, acks=all semantics):
        NotLeaderOrFollower, NotEnoughReplicas (ISR below min.insync.replicas), InvalidProducerEpoch (epoch older
        than the producer's), TransactionCoordinatorFenced (coordinator epoch older than the last marker's). Closes
        the producer's transaction; an ABORT indexes it. Returns the AppendResult of the marker's offset."""
        if self._append_gate is not None:
            self._wait_for_gate()
        if not self.is_leader:
            raise NotLeaderOrFollower("broker %d is not the leader of %s-%d" % (self.broker_id, self.topic,
                                                                                 self.index))
        if len(self.isr) < self.log_config.min_insync_replicas:
            raise NotEnoughReplicas("ISR %s is smaller than min.insync.replicas=%d"
                                    % (self.isr, self.log_config.min_insync_replicas))
        self.producers.check_marker(producer_id, producer_epoch, coordinator_epoch)
        lg = self.log
        now = now_ms()
        batch = marker_batch(producer_id, producer_epoch, coordinator_epoch, commit, now)
        info = validate_for_append(batch, lg.log_end_offset, now, self.record_config, None)
        lg.append(info)
        if self.epoch_cache.latest_epoch != info.leader_epoch:
            self.epoch_cache.assign(info.leader_epoch, info.first_offset)
        self.producers.on_high_watermark(self.high_watermark)
        aborted = self.producers.complete_txn(producer_id, producer_epoch, coordinator_epoch, commit,
                                              info.first_offset, info.max_timestamp)
        if aborted is not None:
            lg.add_aborted_txn(aborted)
        return self._appended(lg, info)

    def _appended(self, lg, info):
        """What follows every leader append: flush.messages, the HW with ISR = [self], waking fetchers."""
        if self.flusher is not None and lg.unflushed_messages >= self.log_config.flush_interval_messages:
            # flush.messages reached: fsync before acknowledging, as Kafka does after the append.
            self.flusher(lg)
        if len(self.isr) == 1 and self._pending_isr is None:
            self.high_watermark = lg.log_end_offset        # ISR = [self]: committed at once
            self._wake()
        elif self.replica_waiters:
            for ev in list(self.replica_waiters):
                ev.set()
        return AppendResult(info.first_offset, info.last_offset, info.log_append_time, lg.log_start_offset)

    def ack_status(self, last_offset, leadership):
        """acks=all completion for a batch ending at ``last_offset`` appended in term ``leadership``:
        None while waiting, else the error code to answer (0 when replicated to the whole ISR)."""
        if not self.is_leader or self.leadership != leadership:
            return errors.NOT_LEADER_OR_FOLLOWER
        if self.high_watermark > last_offset:
            if len(self.isr) < self.log_config.min_insync_replicas:
                return errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            return 0
        return None

    # ------------------------------------------------------------------------------------ leader: followers
    def update_follower(self, replica_id, fetch_offset, now=None):
        """A follower's Fetch at ``fetch_offset`` = its LEO: caught-up time, ISR expansion, HW advance."""
        st = self.followers.get(replica_id)
        if st is None or not self.is_leader:
            return
        now = self.clock() if now is None else now
        leo = self.log.log_end_offset
        if fetch_offset >= leo:
            st.last_caught_up_ms = max(st.last_caught_up_ms, now)
        elif fetch_offset >= st.last_fetch_leader_leo >= 0:
            st.last_caught_up_ms = max(st.last_caught_up_ms, st.last_fetch_ms)
        st.last_fetch_leader_leo = leo
        st.last_fetch_ms = now
        st.leo = fetch_offset
        if (replica_id not in self.isr and fetch_offset >= self.high_watermark
                and fetch_offset >= self.epoch_cache.start_offset_of(self.leader_epoch)
                and (self.isr_eligible is None or self.isr_eligible(replica_id))):
            # In the background with ``isr_spawn``: a restarted follower catches up on thousands of partitions in
            # a few fetches, and one write after another, each waited for in turn, kept its fetches waiting
            # ~10 ms a partition; in greenlets of their own the writes meet in the broker's ISR write batches.
            self._change_isr(self.isr + [replica_id], wait=self.isr_spawn is None)
        self.maybe_advance_hw()

    def read_for_follower(self, replica_id, fetch_offset, max_bytes, min_one=True, record=True, log_start_offset=-1):
        """Bytes from ``fetch_offset`` up to the LEO for follower ``replica_id``; ``record``: this fetch reports
        the follower's LEO (the first pass of a request, not the re-reads after a wait) and its log start offset
        (``log_start_offset``, Fetch v5+; what ``low_watermark`` and a waiting DeleteRecords read)."""
        sl = self.log.read(fetch_offset, max_bytes, None, min_one)
        if record:
            st = self.followers.get(replica_id)
            if st is not None and log_start_offset != st.log_start:
                st.log_start = log_start_offset
                if self.waiters:
                    self._wake()            # a DeleteRecords waiting for the replicas' low watermark
            self.update_follower(replica_id, fetch_offset)
        return sl

    # ------------------------------------------------------------------------------- leader: DeleteRecords
    def delete_records(self, offset):
        """Move the leader's log start offset to ``offset`` (-1: the high watermark); returns the new log start
        offset. Kafka's Partition.deleteRecordsOnLeader: PolicyViolation (44) unless cleanup.policy has delete,
        OffsetOutOfRange (1) for an offset above the high watermark or below -1. Followers follow from the
        ``log_start_offset`` of their next Fetch answer (``apply_leader_log_start_offset``)."""
        if not self.is_leader:
            raise NotLeaderOrFollower("%s-%d is not led here" % (self.topic, self.index))
        if not self.log_config.deletes:
            raise errors.PolicyViolation("Records of partition %s-%d can not be deleted due to the configured policy"
                                         % (self.topic, self.index))
        if offset == -1:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            raise errors.OffsetOutOfRange("Cannot increment the log start offset to %d of partition %s-%d since it "
                                          "is larger than the high watermark %d"
                                          % (offset, self.topic, self.index, self.high_watermark))
        if self.log.maybe_increment_log_start_offset(offset):
            self._log_start_moved()
            self._wake()                    # parked follower fetches answer the new start at once
        return self.log.log_start_offset

    def low_watermark(self):
        """The smallest log start offset over this leader and its ISR followers that reported one (Kafka's
        lowWatermarkIfLeader counts the followers on live brokers; the ISR is this broker's view of those): what a
        DeleteRecords answers and waits for."""
        low = self.log.log_start_offset
        for r in self.isr:
            st = self.followers.get(r)
            if st is not None and st.log_start < low:
                low = st.log_start           # -1 until the follower's first Fetch reports its start
        return low

    def apply_leader_log_start_offset(self, leader_log_start):
        """Follower: take the leader's log start offset from a Fetch answer (Kafka's ReplicaFetcherThread), capped at
        the own high watermark so the start never passes what this replica knows is committed."""
        target = min(leader_log_start, self.high_watermark)
        if target > self.log.log_start_offset and self.log.maybe_increment_log_start_offset(target):
            self._log_start_moved()

    def _log_start_moved(self):
        """The leader-epoch cache forgets epochs wholly below the new start (Kafka: truncateFromStart)."""
        self.epoch_cache.truncate_from_start(self.log.log_start_offset)

    def maximal_isr(self):
        """The ISR plus any replica a pending ISR write adds: what the high watermark must wait for."""
        if self._pending_isr is None:
            return self.isr
        return self.isr + [r for r in self._pending_isr if r not in self.isr]

    def maybe_advance_hw(self):
        new = self.log.log_end_offset
        for r in self.maximal_isr():
            if r == self.broker_id:
                continue
            st = self.followers.get(r)
            if st is None:
                continue
            if st.leo < new:
                new = st.leo
        if new > self.high_watermark:
            self.high_watermark = new
            # Consumers and delayed produces only: follower fetches wait for data, not for the HW (as Kafka).
            if self.waiters:
                for ev in list(self.waiters):
                    ev.set()
            return True
        return False

    def out_of_sync_replicas(self, now=None):
        """The followers in the ISR not caught up for replica_lag_time_max_ms (empty when not leading)."""
        if not self.is_leader or len(self.isr) <= 1:
            return set()
        now = self.clock() if now is None else now
        lag = self.replica_lag_time_max_ms
        out = set()
        for r in self.isr:
            if r == self.broker_id:
                continue
            st = self.followers.get(r)
            if st is None or now - st.last_caught_up_ms > lag:
                out.add(r)
        return out

    def maybe_shrink_isr(self, now=None):
        """Drop followers not caught up for replica_lag_time_max_ms (run every lag/2). True if the ISR changed."""
        out = self.out_of_sync_replicas(now)
        if not out:
            return False
        log.info("%s-%d: shrinking ISR %s by %s", self.topic, self.index, self.isr, sorted(out))
        return self._change_isr([r for r in self.isr if r not in out])

    def refresh_state(self, la):
        """A LeaderAndIsr state ``la`` with our leader and leader epoch but a newer ``zk_version``: take its ISR and
        version (the controller's or a lost-answer write of ours changed the znode since we last knew it) and
        return True; False (nothing changed) for any other state, which the normal LeaderAndIsr rules handle."""
        if la.leader_epoch != self.leader_epoch or la.leader != self.leader or la.zk_version <= self.zk_version:
            return False
        if log.isEnabledFor(logging.DEBUG):
            # at DEBUG: a broker failure brings thousands at once (one INFO line per LeaderAndIsr says how many,
            # and state-change.log has each partition's, as Kafka's does)
            log.debug("%s-%d: ISR %s at znode version %d from the controller (had %s at %d), leader epoch %d",
                      self.topic, self.index, list(la.isr), la.zk_version, self.isr, self.zk_version,
                      self.leader_epoch)
        self.zk_version = la.zk_version
        if self.is_leader:
            self.isr = list(la.isr) if self.broker_id in la.isr else self.isr
            self.maybe_advance_hw()
            self._wake()
        else:
            self.isr = list(la.isr)
        return True

    def _change_isr(self, new_isr, wait=True):
        """Write ``new_isr`` (through ``isr_writer``) and take it once written; True if it was taken. At most one
        write in flight (another change meanwhile is dropped: the next check retries it). ``wait`` False: the
        write runs in ``isr_spawn`` and this returns False at once (the ISR changes when the write lands)."""
        if self._isr_write_pending:
            return False
        epoch, leadership = self.leader_epoch, self.leadership
        if self.isr_writer is None:
            return self._take_isr(new_isr, epoch, leadership, self.zk_version + 1)
        self._isr_write_pending = True
        self._pending_isr = list(new_isr)
        if not wait:
            # The znode version of now, not of when the greenlet runs: a LeaderAndIsr landing in between (a new
            # epoch, a new version) must make this write fail, not pass with the old epoch at the new version.
            self.isr_spawn(self._write_isr, list(new_isr), epoch, leadership, self.zk_version)
            return False
        return self._write_isr(new_isr, epoch, leadership, self.zk_version)

    def _write_isr(self, new_isr, epoch, leadership, zk_version):
        try:
            version = self.isr_writer(self.topic, self.index, self.broker_id, epoch, list(new_isr), zk_version)
        except Exception:  # noqa: BLE001 - a failed write is a lost race: keep the old ISR
            log.exception("%s-%d: ISR write failed", self.topic, self.index)
            version = None
        finally:
            self._isr_write_pending = False
            self._pending_isr = None
        return self._take_isr(new_isr, epoch, leadership, version)

    def _take_isr(self, new_isr, epoch, leadership, version):
        if version is None or self.leader_epoch != epoch or self.leadership != leadership or not self.is_leader:
            return False
        if len(new_isr) < len(self.isr):
            self.isr_stats.shrinks += 1
        else:
            self.isr_stats.expands += 1
        self.isr = list(new_isr)
        self.zk_version = version
        self.maybe_advance_hw()
        self._wake()
        return True

    # ------------------------------------------------------------------------------------- follower write
    def append_as_follower(self, data):
        """Append the whole batches of ``data`` (a leader's fetch answer, maybe ending in a partial batch) that lie
        at or after our LEO, unchanged. Returns the number of bytes appended; CorruptMessage on a bad batch."""
        try:
            entries = replicated_batches(data)        # CRC-checked scan entries of the whole batches
        except errors.CorruptMessage as exc:
            raise errors.CorruptMessage("%s-%d: corrupt batch from the leader: %s"
                                        % (self.topic, self.index, exc)) from None
        if not entries:
            return 0                                  # nothing, or one partial batch: the next fetch gets it whole
        lg = self.log
        leo = lg.log_end_offset
        i = 0
        while i < len(entries) and entries[i][3] < leo:
            i += 1                                    # already held (the leader answers from the batch holding leo)
        if i == len(entries):
            return 0
        if entries[i][2] < leo:
            self.truncate_to(entries[i][2])           # we hold part of a batch: take the leader's whole one
        entries = entries[i:]
        view = memoryview(data)
        start = entries[0][0]
        end = entries[-1][0] + entries[-1][1]
        seg_bytes = lg.config.segment_bytes
        # Epochs and producer state follow the appended batches before anything yields: the flush below runs in the
        # worker pool, and if this broker is made leader meanwhile, a producer's retry of a batch copied here must
        # be recognised as a duplicate (seen in a rolling bounce: the same sequence appended at two offsets). They
        # follow each append, not the whole answer: a roll in the next append snapshots the producer state, which
        # must then hold every batch below the roll.
        if end - start <= seg_bytes:
            self._append_entries(lg, view, entries)
            self._follow(lg, data, entries)
        else:
            for e in entries:                         # never hand the log more than one segment's worth at once
                self._append_entries(lg, view, [e])
                self._follow(lg, data, [e])
        if self.flusher is not None and lg.unflushed_messages >= self.log_config.flush_interval_messages:
            self.flusher(lg)                          # flush.messages applies to replicated data too
        if self.replica_waiters:
            for ev in list(self.replica_waiters):
                ev.set()
        return end - start

    def _follow(self, lg, data, entries):
        """Epoch cache, producer state and .txnindex after appending the leader's batches ``entries``."""
        cache = self.epoch_cache
        producers = self.producers
        for pos, _size, base, last, _ts, _count in entries:
            epoch, pid, pepoch, seq = replica_fields(data, pos)
            if epoch > cache.latest_epoch:
                cache.assign(epoch, base)
            if pid >= 0:
                h = batch_header(data, pos)
                if h.is_control:
                    marker = marker_of(data, pos)
                    if marker is not None:
                        producers.on_high_watermark(self.high_watermark)
                        aborted = producers.complete_txn(pid, pepoch, marker.coordinator_epoch, marker.commit, base,
                                                         h.max_timestamp)
                        if aborted is not None:
                            lg.add_aborted_txn(aborted)
                else:
                    producers.update(pid, pepoch, seq, seq + (last - base) if seq >= 0 else -1, base, last,
                                     h.is_transactional, h.max_timestamp)

    @staticmethod
    def _append_entries(lg, view, entries):
        lg.append(stored_append(view, entries))     # the leader's bytes unchanged, with their scan entries

    def update_follower_hw(self, leader_hw):
        hw = min(leader_hw, self.log.log_end_offset)
        if hw != self.high_watermark and hw >= 0:
            self.high_watermark = hw
            self._wake()

    def truncate_to(self, offset):
        """Cut the log to ``offset`` (follower reconciliation); epoch cache, producer state and HW follow."""
        if not self.log.truncate_to(offset):
            return False
        log.info("%s-%d: truncated to %d", self.topic, self.index, offset)
        self.epoch_cache.truncate_from_end(self.log.log_end_offset)
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
        self._rebuild_producers()
        return True

    def truncate_fully_and_start_at(self, offset):
        log.info("%s-%d: truncated fully, restarting at %d", self.topic, self.index, offset)
        self.log.truncate_fully_and_start_at(offset)
        self.epoch_cache.clear()
        self.producers.clear()
        self.high_watermark = offset

    def _rebuild_producers(self):
        """Producer state from the newest usable snapshot plus the log's batches and markers after it (module
        docstring); re-adds missing .txnindex entries."""
        lg = self.log
        producers = self.producers
        producer_snapshot.delete_above(lg.dir, lg.log_end_offset)
        limit = lg.log_end_offset
        stale = lg.stale_txn_index_from()
        if stale is not None and stale < limit:
            limit = stale
        found = producer_snapshot.latest(lg.dir, limit)
        if found is None:
            producers.rebuild(lg.producer_batches(), self.high_watermark, lg.add_aborted_txn)
        else:
            offset, entries = found
            producers.load_snapshot(entries, offset, lg.log_start_offset)
            producers.replay(lg.producer_batches(offset), self.high_watermark, lg.add_aborted_txn)
        lg.clear_stale_txn_index()

    # ----------------------------------------------------------------------------------------------- read
    def read(self, offset, max_bytes, min_one=True, up_to_hw=True, isolation_level=0):
        """FetchSlice for [offset, HW) (or up to the LEO when ``up_to_hw`` is false; below the LSO when
        ``isolation_level`` is 1, read_committed); raises OffsetOutOfRange."""
        if isolation_level == 1:
            return self.log.read(offset, max_bytes, self.last_stable_offset, min_one)
        return self.log.read(offset, max_bytes, self.high_watermark if up_to_hw else None, min_one)

    def aborted_transactions(self, fetch_offset, upper_offset):
        """``[(producer_id, first_offset)]`` of the aborted transactions overlapping [fetch_offset, upper_offset),
        from the .txnindex files (what a read_committed Fetch answers)."""
        return [(t.producer_id, t.first_offset) for t in self.log.aborted_transactions(fetch_offset, upper_offset)]

    def read_committed(self, offset, max_bytes, min_one=True):
        """A read_committed Fetch of one partition: ``(FetchSlice below the LSO, LSO, aborted transactions
        overlapping the slice)`` (Kafka's LocalLog.read with includeAbortedTxns; nothing read -> [])."""
        lso = self.last_stable_offset
        sl = self.log.read(offset, max_bytes, lso, min_one)
        if sl.size == 0:
            return sl, lso, []
        upper = min(lso, self.log.fetch_upper_offset(sl))
        return sl, lso, self.aborted_transactions(offset, upper)

    # -------------------------------------------------------------------------------------------- waiters
    def add_waiter(self, ev, follower=False):
        (self.replica_waiters if follower else self.waiters).add(ev)

    def remove_waiter(self, ev, follower=False):
        (self.replica_waiters if follower else self.waiters).discard(ev)

    def _wake(self):
        if self.waiters:
            for ev in list(self.waiters):
                ev.set()
        if self.replica_waiters:
            for ev in list(self.replica_waiters):
                ev.set()
