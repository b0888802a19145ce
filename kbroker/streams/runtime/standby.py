"""Standby replicas (``num.standby.replicas`` = k > 0): shadow copies of other instances' task state, kept up to date
from the changelogs, so a task that fails over here restores only the gap (Kafka's StandbyTask).

Placement (librdkafka's range assignor places active tasks; standbys are placed here, by every instance alike):
after each rebalance this instance's StandbyManager describes the group (DescribeGroups through the admin client:
every member's client id -> process uuid, and its assignment), sorts the distinct process uuids into a ring, and
hosts a standby of every task whose ACTIVE owner is one of its 1st..k-th predecessors in that ring (metadata.py's
``standby_owners``; never its own active tasks). A task is (subtopology, partition) with logged stores.

A standby task has a ProcessorStateManager (standby=True: no caching, no changelog writes) over the same task
directory an active task of that id would use (``<state.dir>/<app>/<subtopology>_<partition>``); its own thread
(``<client>-StandbyUpdater``) replays the changelogs from the checkpoint onwards every ``commit.interval.ms``
(through ProcessorStateManager.restore with this manager's restore consumer: read_committed under EOS) and
writes the checkpoint. When a StreamThread of this instance is assigned the task, it calls ``release(tid)`` first:
the standby is closed cleanly (checkpoint written), then the active task opens the directory, reads the
checkpoint and restores only the records after it.
"""
from __future__ import annotations

import logging
import threading
import time

from kbroker.streams.runtime.metadata import GroupView, standby_owners

log = logging.getLogger("kbroker.streams.standby")

DESCRIBE_RETRY_S = 0.5      # the group may still be in a rebalance when described: retry
DESCRIBE_TRIES = 20


class StandbyManager(threading.Thread):
    """One per KafkaStreams (module docstring)."""

    def __init__(self, streams):
        super().__init__(name="%s-%s-StandbyUpdater" % (streams.client_id_prefix, streams.process_id), daemon=True)
        self.streams = streams
        self.config = streams.config
        self.lock = threading.RLock()
        self.standbys = {}                    # TaskId -> ProcessorStateManager
        self.updated = {}                     # TaskId -> records replayed (all time)
        self.rebalanced = threading.Event()
        self.stopping = threading.Event()
        self.consumer = None
        self.history = []                     # [(time, sorted task ids hosted)] after each placement

    # -- called by stream threads
    def on_rebalance(self):
        self.rebalanced.set()

    def release(self, tid) -> bool:
        """Close the standby of ``tid`` cleanly (checkpoint) before an active task of it opens the directory."""
        with self.lock:
            sm = self.standbys.pop(tid, None)
            if sm is None:
                return False
            self._close(tid, sm, clean=True)
            log.info("standby of task %s released for promotion (%d records replayed)", tid, self.updated.get(tid, 0))
            return True

    def tasks(self) -> dict:
        with self.lock:
            return {tid: frozenset(sm.changelog_partitions().values()) for tid, sm in self.standbys.items()}

    def stores(self, name, partition=None) -> list:
        with self.lock:
            out = []
            for tid, sm in sorted(self.standbys.items()):
                if partition is not None and tid.partition != partition:
                    continue
                s = sm.get_store(name)
                if s is not None:
                    out.append((tid, s))
            return out

    def shutdown(self):
        self.stopping.set()
        if self.is_alive() and self is not threading.current_thread():
            self.join(30)

    # -- the updater thread
    def run(self):
        from kbroker.streams.runtime.restore import KafkaRestoreConsumer
        interval = max(0.1, self.config["commit.interval.ms"] / 1000.0)
        self.consumer = KafkaRestoreConsumer(self.config.restore_consumer_config(
            "%s-%s-standby-consumer" % (self.streams.client_id_prefix, self.streams.process_id)))
        try:
            while not self.stopping.is_set():
                if self.rebalanced.is_set():
                    self.rebalanced.clear()
                    try:
                        self._place()
                    except Exception as exc:  # noqa: BLE001 - placement is retried at the next rebalance
                        log.warning("standby placement failed: %s", exc)
                self._update()
                self.stopping.wait(interval)
        finally:
            with self.lock:
                for tid, sm in list(self.standbys.items()):
                    self._close(tid, sm, clean=True)
                self.standbys.clear()
            self.consumer.close()

    def _wanted(self) -> set:
        streams = self.streams
        k = self.config["num.standby.replicas"]
        view = None
        for _ in range(DESCRIBE_TRIES):
            view = GroupView.describe(streams._admin_client(), self.config.application_id)
            if view.state.endswith("STABLE") and all(m.partitions for m in view.members):
                break
            if self.stopping.wait(DESCRIBE_RETRY_S):
                return set(self.standbys)
        procs = view.processes()
        me = streams.process_id
        wanted = set()
        for sid, sub in streams._subs.items():
            if not streams.changelogs_of(sub):
                continue
            for p in range(streams.plan.task_counts[sid]):
                active = view.active_owner(sorted(sub.source_topics), p)
                if active is not None and active != me and me in standby_owners(procs, active, k):
                    wanted.add(streams.task_id(sid, p))
        return wanted

    def _place(self):
        wanted = self._wanted()
        active_here = set()
        for t in self.streams.threads:
            active_here |= set(t.tasks)
        wanted -= active_here
        with self.lock:
            for tid in sorted(set(self.standbys) - wanted):
                self._close(tid, self.standbys.pop(tid), clean=True)
            for tid in sorted(wanted - set(self.standbys)):
                with self.streams.dirs_lock:      # not deleted by the state cleaner while opened
                    self.standbys[tid] = self._open(tid)
            self.history.append((time.time(), sorted(str(t) for t in self.standbys)))
            log.info("standby tasks hosted: %s", sorted(str(t) for t in self.standbys))

    def _open(self, tid):
        from kbroker.streams.state.state_manager import ProcessorStateManager
        streams = self.streams
        sub = streams.subtopology(tid.subtopology)
        sm = ProcessorStateManager(tid, self.config.application_id, self.config["state.dir"],
                                   streams.store_builders(sub), streams.changelogs_of(sub), streams.config.eos,
                                   streams.task_config(None), None, True)
        sm.init_stores(None, lambda: 0)
        return sm

    def _update(self):
        with self.lock:
            for tid, sm in sorted(self.standbys.items()):
                if self.stopping.is_set():
                    return
                try:
                    res = sm.restore(self.consumer, None) or {}
                    n = sum(r[2] for r in res.values())
                    self.updated[tid] = self.updated.get(tid, 0) + n
                    if n:
                        sm.checkpoint()
                except Exception as exc:  # noqa: BLE001 - a standby is best effort: retried next round
                    log.warning("standby %s: update failed: %s", tid, exc)

    def _close(self, tid, sm, clean: bool):
        try:
            sm.close(clean)
        except Exception as exc:  # noqa: BLE001
            log.warning("standby %s: close failed: %s", tid, exc)
