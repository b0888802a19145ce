"""StreamThread: one group member running the tasks it was assigned (Kafka's StreamThread + TaskManager).

Each thread owns a confluent-kafka Consumer in group ``application.id`` (range assignor: see assignment.py),
subscribed to every source and repartition topic of the topology, a KafkaRecordCollector (its producer) shared by
its tasks, and, when needed, a restore consumer. Everything a thread does happens on its own Python thread; the
rebalance callbacks run inside ``consume()`` on that thread too, so tasks are never touched concurrently (except by
interactive queries, which read stores).

Loop (``run``):
  1. ``consume(max.poll.records, poll.ms)``; records are routed to the task of (subtopology of the topic, partition)
     as raw ConsumedRecords (StreamTask deserializes when processing);
  2. tasks waiting for restoration are restored (one at a time, the consumer's partitions of a restoring task are
     paused so nothing is fetched for it meanwhile);
  3. every running task processes what it has buffered (``process`` until it returns 0), stream-time punctuation
     after each batch, wall-clock punctuation once per loop;
  4. every ``commit.interval.ms`` (or sooner when a task asked: ``context.commit()``) the tasks are committed:
       at_least_once    flush_state (caches -> downstream, changelog writes) -> producer flush (all acked) ->
                        consumer.commit(offsets, synchronous) -> checkpoint files (changelog offsets acked);
       exactly_once_v2  flush_state -> send_offsets_to_transaction + commit_transaction; checkpoints only on a
                        clean close (a crash restores from the changelog's start, read_committed).
  (standby tasks are kept up to date by standby.py's thread; a task becoming active here releases its standby
  first, whose checkpoint makes the restoration read only the gap.)

Rebalance (eager, Kafka's pre-2.4 protocol): on revoke every task is committed and closed cleanly (stores
flushed, checkpoints written, also under EOS since the transaction is committed); on assign the tasks of the new
partitions are created and queued for restoration. A lost assignment (session expired) closes tasks dirty.
A TaskMigratedException (fenced producer, KIP-447 stale generation, lost member) aborts the transaction, closes
every task dirty -- under exactly_once_v2 their state directories are wiped, so they restore from the changelogs --
makes a new producer, and re-creates the tasks of the current assignment from the group's committed offsets.
Any other exception ends the thread and goes to KafkaStreams' uncaught exception handler.
"""
from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections import defaultdict

from kbroker.streams.errors import StreamsException, TaskMigratedException

log = logging.getLogger("kbroker.streams.stream_thread")

CREATED, STARTING, PARTITIONS_REVOKED, PARTITIONS_ASSIGNED, RUNNING, PENDING_SHUTDOWN, DEAD = (
    "CREATED", "STARTING", "PARTITIONS_REVOKED", "PARTITIONS_ASSIGNED", "RUNNING", "PENDING_SHUTDOWN", "DEAD")


def now_ms() -> int:
    return int(time.time() * 1000)


class StreamThread(threading.Thread):
    """One StreamThread (module docstring). ``streams`` is the owning KafkaStreams (config, topology, plan,
    process id, listeners)."""

    def __init__(self, streams, index: int):
        self.streams = streams
        self.config = streams.config
        self.index = index
        self.thread_name = "%s-%s-StreamThread-%d" % (streams.client_id_prefix, streams.process_id, index)
        super().__init__(name=self.thread_name, daemon=True)
        self.eos = self.config.eos
        self.state = CREATED
        self.shutdown_requested = threading.Event()
        self.commit_requested = False
        self.tasks = {}                 # TaskId -> StreamTask (active, restored or restoring)
        self.restoring = []             # TaskIds waiting for their restoration, in order
        self.state_managers = {}        # TaskId -> ProcessorStateManager
        self.partition_task = {}        # (topic, partition) -> TaskId
        self.assignment = []            # [(topic, partition)] currently assigned
        self.consumer = None
        self.collector = None
        self.error = None
        self.last_commit = time.monotonic()
        self.processed = 0              # records processed (all time)
        self.restored = {}              # "<store> <changelog>-<p>" -> (records restored, ms), last restoration
        self.commits = 0
        self.tasks_committed = 0
        self.punctuated = 0
        self.dropped_closed = 0         # dropped-records of tasks already closed
        self._summary = (0, 0, 0)       # (processed, punctuated, tasks committed) at the last summary line
        self.paused = set()             # (topic, partition) paused: the task's queue is full
        self.check_shutdown_signal = False  # after an assignment, the first thread looks for a shutdown signal
        self.last_purge = time.monotonic()
        self.lock = threading.RLock()   # held while tasks are created/closed (IQ reads take it)

    # ------------------------------------------------------------------------------------------- client setup
    @property
    def consumer_client_id(self) -> str:
        from kbroker.streams.runtime.metadata import member_client_id
        return member_client_id(self.streams.client_id_prefix, self.streams.process_id, self.index,
                                self.config["application.server"])

    def _make_consumer(self):
        from confluent_kafka import Consumer
        return Consumer(self.config.main_consumer_config(self.consumer_client_id))

    def transactional_id(self) -> str:
        return "%s-%s-%d" % (self.config.application_id, self.streams.process_id, self.index)

    def _make_producer(self):
        from confluent_kafka import Producer
        return Producer(self.config.producer_config("%s-producer" % self.thread_name,
                                                    self.transactional_id() if self.eos else None))

    def thread_cache(self):
        """The thread's record cache shared by its tasks' stores (statestore.cache.max.bytes per thread), or
        None when the state package has none (each state manager then makes its own)."""
        if not hasattr(self, "_thread_cache"):
            try:
                from kbroker.streams.state.caching import ThreadCache
                self._thread_cache = ThreadCache(self.config["statestore.cache.max.bytes"])
            except ImportError:
                self._thread_cache = None
        return self._thread_cache

    def restore_consumer_factory(self):
        from kbroker.streams.runtime.restore import KafkaRestoreConsumer
        conf = self.config.restore_consumer_config("%s-restore-consumer" % self.thread_name)
        wait = None
        if self.eos:
            # an open transaction on a changelog being restored is a dead owner's: wait for its abort (bounded by
            # the transaction timeout, which the coordinator enforces, + 5 s)
            txn_ms = int(self.config.producer_config("x", "x").get("transaction.timeout.ms", 60000))
            wait = txn_ms / 1000.0 + 5.0
        return KafkaRestoreConsumer(conf, wait)

    # ------------------------------------------------------------------------------------------------- state
    def set_state(self, new):
        old, self.state = self.state, new
        if old != new:
            self.streams.on_thread_state_change(self, new, old)

    def shutdown(self):
        self.shutdown_requested.set()

    def request_commit(self):
        self.commit_requested = True

    # ---------------------------------------------------------------------------------------------- the loop
    def run(self):
        from kbroker.streams.runtime.record_collector import KafkaRecordCollector
        self.set_state(STARTING)
        try:
            self.collector = KafkaRecordCollector(self._make_producer, self.eos, self.thread_name)
            self.consumer = self._make_consumer()
            topics = sorted(self.streams.plan.source_partitions)
            self.consumer.subscribe(topics, on_assign=self._on_assign, on_revoke=self._on_revoke,
                                    on_lost=self._on_lost)
            self._loop()
            self._shutdown_cleanly()
        except BaseException as exc:  # noqa: BLE001 - the uncaught exception handler decides
            self.error = exc
            log.error("%s: thread failed: %s", self.thread_name, exc, exc_info=True)
            self._close_dirty_after_error()
            self.set_state(DEAD)
            self.streams.on_thread_died(self, exc)
            return
        self.set_state(DEAD)
        self.streams.on_thread_died(self, None)

    def _loop(self):
        max_records = self.config.max_poll_records()
        poll_s = self.config["poll.ms"] / 1000.0
        commit_s = self.config["commit.interval.ms"] / 1000.0
        summary_s = self.config["log.summary.interval.ms"] / 1000.0
        last_summary = time.monotonic()
        while not self.shutdown_requested.is_set():
            try:
                msgs = self.consumer.consume(num_messages=max_records, timeout=poll_s if not self.restoring else 0)
                self._route(msgs)
                if self.restoring:
                    self._restore_next()
                self._process()
                self._resume_drained()
                if time.monotonic() - last_summary >= summary_s:
                    last_summary = time.monotonic()
                    self._log_summary()
                if self.commit_requested or time.monotonic() - self.last_commit >= commit_s or any(
                        t.commit_requested for t in self.tasks.values()):
                    self.commit_all()
                if self.check_shutdown_signal:
                    self._check_shutdown_signal()
                if self.index == 1:
                    self.streams.maybe_clean_state()
                # RUNNING once the assignment's tasks are restored; after a revocation the thread stays
                # PARTITIONS_REVOKED until the next assignment (the join may span several polls)
                if self.state == PARTITIONS_ASSIGNED and not self.restoring:
                    self.set_state(RUNNING)
            except TaskMigratedException as exc:
                log.warning("%s: %s; closing tasks dirty and rejoining", self.thread_name, exc)
                self._handle_migrated()

    def _route(self, msgs):
        from kbroker.streams.task import ConsumedRecord
        batches = defaultdict(list)
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.fatal():
                    raise StreamsException("%s: consumer error: %s" % (self.thread_name, err))
                # not fatal (a subscribed topic not there yet, a broker down): librdkafka recovers by itself
                log.debug("%s: consumer: %s", self.thread_name, err)
                continue
            ts_type, ts = m.timestamp()
            batches[(m.topic(), m.partition())].append(ConsumedRecord(
                m.topic(), m.partition(), m.offset(), ts, m.key(), m.value(), m.headers() or []))
        limit = self.config["buffered.records.per.partition"]
        for (topic, partition), records in batches.items():
            tid = self.partition_task.get((topic, partition))
            task = self.tasks.get(tid)
            if task is None:       # fetched before a revocation: the new owner reads it from the committed offset
                continue
            if task.add_records(topic, partition, records) > limit and (topic, partition) not in self.paused:
                # Kafka's buffered.records.per.partition: stop fetching a partition whose queue is over it (a task
                # restoring, or idling for max.task.idle.ms) until it drains. Over, not at: one consume() brings
                # up to max.poll.records (1000, the same default), and pausing at once after every full batch
                # made librdkafka drop what it had prefetched for the partition (a resume fetches it again):
                # 8,085 records/s where 52,000 were possible (bench/streams.py, stateless).
                from confluent_kafka import TopicPartition
                self.consumer.pause([TopicPartition(topic, partition)])
                self.paused.add((topic, partition))

    def _check_shutdown_signal(self):
        """After a rebalance: a SHUTDOWN_APPLICATION signal member in the group shuts this instance down."""
        from kbroker.streams.runtime.metadata import GroupView
        self.check_shutdown_signal = False
        try:
            view = GroupView.describe(self.streams._admin_client(), self.config.application_id)
        except Exception as exc:  # noqa: BLE001 - checked again at the next rebalance
            log.debug("%s: describe for the shutdown signal failed: %s", self.thread_name, exc)
            return
        requesters = view.shutdown_requesters()
        if requesters:
            self.streams.on_application_shutdown_requested(requesters[0])

    def _resume_drained(self):
        if not self.paused:
            return
        from confluent_kafka import TopicPartition
        limit = self.config["buffered.records.per.partition"]
        drained = []
        for tp in self.paused:
            task = self.tasks.get(self.partition_task.get(tp))
            if task is None or (self.partition_task.get(tp) not in self.restoring
                                and task.buffered(tp[0], tp[1]) <= limit):
                drained.append(tp)
        if drained:
            try:
                self.consumer.resume([TopicPartition(t, p) for t, p in drained])
            except Exception as exc:  # noqa: BLE001 - no longer assigned: nothing to resume
                log.debug("%s: resume %s: %s", self.thread_name, drained, exc)
            self.paused.difference_update(drained)

    def metrics(self) -> dict:
        """This thread's counters since it started (tasks come and go with rebalances; these stay)."""
        return {"process-total": self.processed, "commit-total": self.commits, "punctuate-total": self.punctuated,
                "dropped-records-total": self.dropped_closed + sum(t.metrics["dropped-records"]
                                                                   for t in list(self.tasks.values()))}

    def _log_summary(self):
        log.info("%s: Processed %d total records, ran %d punctuators, and committed %d total tasks since the last "
                 "update", self.thread_name, self.processed - self._summary[0],
                 self.punctuated - self._summary[1], self.tasks_committed - self._summary[2])
        self._summary = (self.processed, self.punctuated, self.tasks_committed)

    def _process(self):
        now = now_ms()
        for tid, task in list(self.tasks.items()):
            if tid in self.restoring:
                continue
            while task.is_processable(now):
                n = task.process(1000)
                if not n:
                    break
                self.processed += n
                self.punctuated += bool(task.maybe_punctuate_stream_time())
            self.punctuated += bool(task.maybe_punctuate_wall_clock(now))

    # ------------------------------------------------------------------------------------------------- tasks
    def _create_task(self, tid):
        from kbroker.streams.state.state_manager import ProcessorStateManager
        from kbroker.streams.task import StreamTask
        streams = self.streams
        sub = streams.subtopology(tid.subtopology)
        builders = streams.store_builders(sub)
        changelogs = streams.changelogs_of(sub)
        task_dir = streams.task_dir(tid)
        if streams.standby is not None:
            streams.standby.release(tid)      # closes (and checkpoints) a standby of this task: promotion
        with streams.dirs_lock:      # the state cleaner never deletes a directory being opened
            if self.eos and not os.path.exists(os.path.join(task_dir, ".checkpoint")) and os.path.isdir(task_dir):
                # no checkpoint under EOS: the local state may hold uncommitted writes (Kafka's TaskCorrupted):
                # wipe it
                shutil.rmtree(task_dir, ignore_errors=True)
            config = streams.task_config(self)
            sm = None
            if builders:
                sm = ProcessorStateManager(tid, self.config.application_id, self.config["state.dir"], builders,
                                           changelogs, self.eos, config, self.thread_cache())
            task = StreamTask(tid, sub, streams.topology, config, sm, self.collector, now_ms)
            task.init_stores()
            self.state_managers[tid] = sm
            self.tasks[tid] = task
        self.restoring.append(tid)
        return task

    def _restore_next(self):
        tid = self.restoring[0]
        sm = self.state_managers[tid]
        started = time.monotonic()
        results = {}
        if sm is not None and sm.changelog_partitions():
            consumer = self.restore_consumer_factory()
            try:
                results = sm.restore(consumer, self.streams.restore_listener) or {}
            finally:
                consumer.close()
        for store, res in results.items():
            start, end, n, ms = res
            changelog = self.streams.changelogs_of(self.streams.subtopology(tid.subtopology)).get(store, "?")
            log.info("%s: restored %d records of %s (%s-%d) in %d ms", self.thread_name, n, store, changelog,
                     tid.partition, ms)
            self.restored["%s %s-%d" % (store, changelog, tid.partition)] = (n, ms)
            self.streams.on_restored(self, tid, store, changelog, start, end, n, ms)
        log.debug("%s: task %s restored in %.0f ms", self.thread_name, tid, (time.monotonic() - started) * 1000)
        self.restoring.pop(0)
        self.tasks[tid].init_processors()

    def _tasks_of(self, partitions):
        from kbroker.streams.runtime.assignment import tasks_of
        return tasks_of(partitions, self.streams.topic_subtopology, self.streams.task_id)

    def _on_assign(self, consumer, partitions):
        with self.lock:
            self.set_state(PARTITIONS_ASSIGNED)
            self.assignment = [(p.topic, p.partition) for p in partitions]
            self.paused.clear()        # a new assignment starts unpaused
            self.check_shutdown_signal = self.index == min(t.index for t in self.streams.threads)
            log.info("%s: assigned %s", self.thread_name, sorted(self.assignment))
            for tid, tps in sorted(self._tasks_of(self.assignment).items()):
                for tp in tps:
                    self.partition_task[tp] = tid
                if tid not in self.tasks:
                    self._create_task(tid)
            self.last_commit = time.monotonic()
            self._apply_source_resets(consumer, partitions)
        if self.streams.standby is not None:
            self.streams.standby.on_rebalance()

    def _apply_source_resets(self, consumer, partitions):
        """Per-source ``offset_reset`` (Topology.add_source): a partition of such a source without a committed
        offset starts at its beginning ("earliest") or end ("latest"); "none" fails the thread (Kafka's
        NoOffsetForPartitionException). Other partitions follow the consumer's auto.offset.reset."""
        from confluent_kafka import OFFSET_BEGINNING, OFFSET_END
        resets = self.streams.source_offset_resets
        if not partitions or not any(p.topic in resets for p in partitions):
            return
        committed = consumer.committed(list(partitions), timeout=30)
        changed = False
        for tp in committed:
            policy = resets.get(tp.topic)
            if policy is None or tp.offset >= 0:
                continue
            if policy == "none":
                raise StreamsException("No valid committed offset found for input topic %s (partition %d) and no "
                                       "valid reset policy configured (offset_reset='none')" % (tp.topic,
                                                                                               tp.partition))
            tp.offset = OFFSET_BEGINNING if policy == "earliest" else OFFSET_END
            changed = True
        if changed:
            consumer.assign(committed)      # replaces the default assign() after this callback

    def _on_revoke(self, consumer, partitions):
        with self.lock:
            self.set_state(PARTITIONS_REVOKED)
            log.info("%s: revoked %s", self.thread_name, sorted((p.topic, p.partition) for p in partitions))
            try:
                self.commit_all()
                self._close_tasks(clean=True)
            except TaskMigratedException as exc:
                log.warning("%s: commit on revocation failed: %s; closing tasks dirty", self.thread_name, exc)
                self._abort_and_close_dirty()
            self.assignment = []

    def _on_lost(self, consumer, partitions):
        with self.lock:
            log.warning("%s: assignment lost %s; closing tasks dirty", self.thread_name,
                        sorted((p.topic, p.partition) for p in partitions))
            self._abort_and_close_dirty()
            self.assignment = []

    def _close_tasks(self, clean: bool):
        for tid in list(self.tasks):
            self._close_task(tid, clean)
        self.partition_task.clear()
        self.restoring.clear()

    def _close_task(self, tid, clean: bool):
        if clean:
            self._checkpoint(tid)      # after a commit: every changelog record of the task is acknowledged
        task = self.tasks.pop(tid)
        self.state_managers.pop(tid, None)
        self.dropped_closed += task.metrics["dropped-records"]
        try:
            task.close(clean)
        except Exception as exc:  # noqa: BLE001 - a dirty close must go on with the other tasks
            if clean:
                raise
            log.warning("%s: dirty close of task %s: %s", self.thread_name, tid, exc)
        if not clean and self.eos:
            shutil.rmtree(self.streams.task_dir(tid), ignore_errors=True)

    def _abort_and_close_dirty(self):
        if self.collector is not None and self.eos:
            if not self.collector.abort_transaction():
                self.collector.new_producer()
        self._close_tasks(clean=False)

    def _handle_migrated(self):
        """Abort, close dirty, new producer, tasks of the current assignment re-created at the committed
        offsets."""
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition
        with self.lock:
            self._close_tasks(clean=False)
            self.collector.new_producer()
            if not self.assignment:
                return
            tps = [TopicPartition(t, p) for t, p in self.assignment]
            try:
                committed = self.consumer.committed(tps, timeout=30)
            except Exception as exc:  # noqa: BLE001 - not a member any more: the next poll rejoins
                log.warning("%s: committed() failed after migration: %s", self.thread_name, exc)
                return
            for tp in committed:
                if tp.offset < 0:
                    tp.offset = OFFSET_BEGINNING
                try:
                    self.consumer.seek(tp)
                except Exception as exc:  # noqa: BLE001 - revoked meanwhile
                    log.debug("%s: seek %s: %s", self.thread_name, tp, exc)
            for tid, tps_ in sorted(self._tasks_of(self.assignment).items()):
                for tp in tps_:
                    self.partition_task[tp] = tid
                self._create_task(tid)

    def _close_dirty_after_error(self):
        try:
            with self.lock:
                self._abort_and_close_dirty()
        except Exception as exc:  # noqa: BLE001 - already failing
            log.warning("%s: closing after an error: %s", self.thread_name, exc)
        for closer in (lambda: self.consumer and self.consumer.close(), lambda: self.collector and
                       self.collector.close()):
            try:
                closer()
            except Exception:  # noqa: BLE001
                pass

    def _shutdown_cleanly(self):
        self.set_state(PENDING_SHUTDOWN)
        with self.lock:
            try:
                self.commit_all()
                self._close_tasks(clean=True)
            except TaskMigratedException as exc:
                log.warning("%s: final commit failed: %s", self.thread_name, exc)
                self._abort_and_close_dirty()
        self.consumer.close()          # leaves the group (LeaveGroup): the others rebalance at once
        self.collector.close()

    # ------------------------------------------------------------------------------------------------ commit
    def commit_all(self):
        """Commit every active, restored task (module docstring, step 4)."""
        from confluent_kafka import KafkaException, TopicPartition
        self.commit_requested = False
        self.last_commit = time.monotonic()
        running = [(tid, t) for tid, t in self.tasks.items() if tid not in self.restoring]
        if not running:
            return
        for _, task in running:
            task.flush_state()
        offsets = {}
        for _, task in running:
            offsets.update(task.committable_offsets())
        tps = [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        if self.eos:
            self.collector.commit_transaction(tps, self.consumer.consumer_group_metadata())
        else:
            self.collector.flush()
            if tps:
                try:
                    self.consumer.commit(offsets=tps, asynchronous=False)
                except KafkaException as exc:
                    raise TaskMigratedException("%s: offset commit failed: %s" % (self.thread_name, exc)) from None
            for tid, task in running:
                self._checkpoint(tid)
        self.commits += 1
        self.tasks_committed += len(running)
        self.streams.on_committed(self, offsets)
        self._maybe_purge(offsets)

    def _maybe_purge(self, offsets):
        """Kafka's repartition.purge.interval.ms: delete the records of repartition topics below the committed
        offsets (DeleteRecords; asynchronous, a failure is only logged: the next purge covers it)."""
        interval = self.config["repartition.purge.interval.ms"] / 1000.0
        if time.monotonic() - self.last_purge < interval:
            return
        from confluent_kafka import TopicPartition
        repartition = self.streams.repartition_topic_names
        tps = [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items()) if t in repartition]
        if not tps:
            return
        self.last_purge = time.monotonic()

        def done(fut):
            if fut.exception() is not None:
                log.warning("%s: purging repartition records failed: %s", self.thread_name, fut.exception())
        try:
            for fut in self.streams._admin_client().delete_records(tps).values():
                fut.add_done_callback(done)
        except Exception as exc:  # noqa: BLE001 - purging is an optimisation
            log.warning("%s: purging repartition records failed: %s", self.thread_name, exc)

    def _checkpoint(self, tid):
        sm = self.state_managers.get(tid)
        if sm is None:
            return
        changelogs = self.streams.changelogs_of(self.streams.subtopology(tid.subtopology))
        acked = self.collector.acked_offsets
        offsets = {}
        for topic in changelogs.values():
            off = acked.get((topic, tid.partition))
            if off is not None:
                offsets[(topic, tid.partition)] = off - 1      # the last record's offset (restore from +1)
        if offsets:
            sm.update_changelog_offsets(offsets)
        if not self.eos:
            sm.checkpoint()
