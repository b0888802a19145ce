"""Leaders' ISR changes written to ZooKeeper together: one batch of conditional writes and one notification.

A partition leader changes its ISR (a follower fell behind for replica.lag.time.max.ms, or caught up again) with a
conditional write of the partition state znode at the version it knows, then announces the change to the
controller under ``/isr_change_notification``. Kafka 0.10 made each write a round trip of its own
(``ReplicationUtils.updateLeaderAndIsr``); so did kbroker, and when a broker of a 27,000-partition cluster died,
each survivor's leaders shrank ~4,800 ISRs one write and one notification after another: 80-125 a second, ~50 s
in which the controller's own broker (sharing that ZooKeeper session and event loop) noticed the death only after
62.5 s (docs/performance.md, issue 15 session 9). Here every write requested while a batch is in flight joins
the next batch:

* ``write(...)`` queues the request and blocks the calling greenlet until its batch is written (the caller,
  ``Partition._change_isr``, needs the new znode version); the loop runs on meanwhile.
* One writer greenlet takes up to ``MAX_BATCH`` queued requests and writes them with one
  ``TopicStore.set_partition_states_if`` (ZooKeeper multi transactions of up to 1,000 conditional sets, pipelined:
  a few round trips for thousands), then one notification node per 5,000 changed partitions (Kafka's
  notification format lists many partitions per node; Kafka 0.10 also batched them, every 2.5 s).
* A request alone in the queue is written at once: batching adds no delay, it only merges what piles up.

A write that failed (its znode moved on: BadVersionError; or its answer was lost with the connection) is re-read:
if the znode holds exactly what was written, the write was ours and applied before its answer was lost (Kafka's
``ReplicationUtils.checkLeaderAndIsrZkData``), so its version is taken; otherwise the answer is None and the
leader keeps its old ISR until the controller's next LeaderAndIsr (a controller decision won the race).

Requests are independent: ZooKeeper applies a multi transaction whole or not at all, and ``set_many`` re-sends a
failed transaction item by item so one partition's lost race never fails another's write.
"""
import logging

import gevent
from gevent.event import AsyncResult, Event

from kbroker.coord.errors import CoordinationError

log = logging.getLogger("kbroker.replica.isr")

# Most requests in one batch: 10 of ZooKeeper's multi transactions (1,000 sets each, coord/zk.py MULTI_SETS), a
# few MB of requests; more queued wait for the next batch, sent as soon as this one is answered.
MAX_BATCH = 10_000
# A failed notification (no ZooKeeper connection) is retried this much later, or with the next batch.
NOTIFY_RETRY_S = 1.0


class IsrWriteBatcher:
    """``write(topic, p, leader, leader_epoch, controller_epoch, new_isr, zk_version) -> new version or None``,
    batched (module docstring). ``topic_store``: a kbroker.coord.metadata_store.TopicStore."""

    def __init__(self, topic_store):
        self.topic_store = topic_store
        self._queue = []                 # [(write tuple, AsyncResult)]
        self._inflight = []              # the batch being written
        self._wake = Event()
        self._writer = None
        self._unannounced = []           # [(topic, p)] written but not yet notified (a failed notification)
        self.batches = 0                 # batches written (tests, logs)
        self.largest = 0                 # most requests in one batch

    def write(self, topic, p, leader, leader_epoch, controller_epoch, new_isr, zk_version):
        result = AsyncResult()
        self._queue.append(((topic, p, leader, list(new_isr), leader_epoch, controller_epoch, zk_version), result))
        if self._writer is None or self._writer.dead:
            self._writer = gevent.spawn(self._run)
        self._wake.set()
        return result.get()

    def stop(self):
        if self._writer is not None:
            self._writer.kill()
            self._writer = None
        queued, self._queue, self._inflight = self._inflight + self._queue, [], []
        for _w, result in queued:
            if not result.ready():
                result.set(None)         # the broker is stopping: the leader keeps its old ISR

    def _run(self):
        while True:
            woken = self._wake.wait(timeout=NOTIFY_RETRY_S if self._unannounced else None)
            self._wake.clear()
            if not woken:                # a failed notification's retry is due (the next batch would carry it)
                self._announce([])
            while self._queue:
                batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
                self._inflight = batch
                try:
                    self._write(batch)
                except Exception:  # noqa: BLE001 - never leave a caller waiting: its write counts as lost
                    log.exception("ISR write batch of %d partitions failed", len(batch))
                    for _w, result in batch:
                        if not result.ready():
                            result.set(None)
                self._inflight = []

    def _write(self, batch):
        writes = [w for w, _r in batch]
        self.batches += 1
        self.largest = max(self.largest, len(writes))
        try:
            outcomes = self.topic_store.set_partition_states_if(writes)
        except Exception as e:  # noqa: BLE001 - the whole batch failed (no connection): each request re-reads
            log.warning("ISR writes of %d partitions failed: %s; re-reading their states", len(writes), e)
            outcomes = [e] * len(writes)
        versions = self._versions(writes, outcomes)
        changed = [(w[0], w[1]) for w, v in zip(writes, versions) if v is not None]
        self._announce(changed)
        for (_w, result), v in zip(batch, versions):
            result.set(v)
        if len(writes) > 1:
            log.info("wrote %d ISR changes in one batch (%d applied)", len(writes), len(changed))

    def _announce(self, changed):
        """Notify the controller of ``changed`` and of what an earlier failed notification left; a failure keeps
        them all for the next batch or ``NOTIFY_RETRY_S`` later (the writes stand: until the controller reads them
        its metadata shows the old ISRs)."""
        tps = self._unannounced + changed
        if not tps:
            return
        try:
            self.topic_store.notify_isr_changes(tps)
            self._unannounced = []
        except Exception as e:  # noqa: BLE001
            log.warning("ISR change notification of %d partitions failed (%s); retrying in %.0f s", len(tps), e,
                        NOTIFY_RETRY_S)
            self._unannounced = tps

    def _versions(self, writes, outcomes):
        """The new version of each write, or None: a failed write's znode is re-read (all of them in one pipelined
        read: a batch that lost its race against the controller can hold hundreds) and the write is ours when the
        znode holds exactly what it wrote (applied, its answer lost), else lost."""
        failed = [i for i, v in enumerate(outcomes) if isinstance(v, Exception)]
        versions = [None if isinstance(v, Exception) else v for v in outcomes]
        if not failed:
            return versions
        try:
            states = self.topic_store.partition_states([(writes[i][0], writes[i][1]) for i in failed])
        except CoordinationError as e:
            log.warning("%d ISR updates failed (%s) and their states could not be re-read: %s", len(failed),
                        outcomes[failed[0]], e)
            return versions
        lost = []
        for i, now in zip(failed, states):
            topic, p, leader, isr, epoch, cepoch, version = writes[i]
            if now is not None and (now.leader, now.leader_epoch, list(now.isr), now.controller_epoch) == \
                    (leader, epoch, isr, cepoch):
                log.info("ISR update of %s-%d: our own write was applied (zk version %d)", topic, p, now.zk_version)
                versions[i] = now.zk_version
            else:
                lost.append("%s-%d" % (topic, p))
        if lost:
            log.info("ISR updates of %d partitions lost a race (%s, first: %s); waiting for the controller",
                     len(lost), outcomes[failed[0]], ", ".join(lost[:5]))
        return versions
