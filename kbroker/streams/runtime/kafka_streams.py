"""KafkaStreams: the client that runs a Topology on a Kafka cluster (Kafka's org.apache.kafka.streams.KafkaStreams).

Life cycle and states (Kafka's KafkaStreams.State and its transitions)::

    CREATED --start()--> REBALANCING <--> RUNNING
       |                     |               |
       +-----close()----> PENDING_SHUTDOWN -> NOT_RUNNING
    a thread's uncaught exception with SHUTDOWN_CLIENT (the default) -> PENDING_ERROR -> ERROR

REBALANCING while any thread is (re)joining, restoring or not yet assigned; RUNNING when every thread is.
``set_state_listener(fn(new, old))`` is called on every transition (from the thread that made it).

``start()`` (in the caller's thread, before any thread runs): checks the clients' configurations against
librdkafka, reads the source topics' partition counts, computes and creates the internal topics
(internal_topics.py; a wrong partition count or a missing source topic raises here and the state goes to ERROR),
then starts ``num.stream.threads`` StreamThreads. ``close(timeout_s=None)``: every thread commits, writes its
checkpoints, closes its tasks and leaves the group; returns False when a thread was still running at the timeout.

Uncaught exceptions (Kafka's StreamsUncaughtExceptionHandler): ``set_uncaught_exception_handler(fn(exc) ->
"REPLACE_THREAD" | "SHUTDOWN_CLIENT" | "SHUTDOWN_APPLICATION")``. REPLACE_THREAD starts a new thread with the
same index (its tasks were closed dirty: the group gives them back after the rebalance, restored from the
changelogs); SHUTDOWN_CLIENT (also without a handler) stops every thread -> ERROR; SHUTDOWN_APPLICATION stops
this instance the same way and asks every other instance to do so: Kafka carries the request in the Streams
assignor's error code, which librdkafka's range assignor cannot; here a *signal member* joins the group (a consumer
whose client id is ``<client.id>-<process uuid>-shutdown-application``, metadata.py), which makes every member
rebalance; after each rebalance the first thread of every instance describes the group and, seeing a signal
member, shuts its instance down (PENDING_ERROR -> ERROR). The signal member stays until no Streams member is left
in the group (bounded by SIGNAL_MAX_S).

Identity: ``process_id`` is a UUID kept in the state directory (``_process_id``); the consumers' client ids carry it and
``application.server`` (metadata.py) so any instance can tell who hosts which task from DescribeGroups.

Interactive queries: ``store(StoreQueryParameters)`` -> a read-only view over this instance's running active
tasks' stores of that name (standby stores too with ``enable_stale_stores()``); ``query_metadata_for_key`` /
``metadata_for_all_stream_clients`` describe the group. ``cleanup()`` deletes ``<state.dir>/<application.id>``
(only while not running).
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import threading
import time
import uuid

from kbroker.streams.errors import (InvalidStateStoreException, StreamsException, StreamsNotStartedException,
                                    UnknownStateStoreException)
from kbroker.streams.runtime import stream_thread as st
from kbroker.streams.runtime.config import StreamsConfig

log = logging.getLogger("kbroker.streams")

CREATED, REBALANCING, RUNNING, PENDING_SHUTDOWN, NOT_RUNNING, PENDING_ERROR, ERROR = (
    "CREATED", "REBALANCING", "RUNNING", "PENDING_SHUTDOWN", "NOT_RUNNING", "PENDING_ERROR", "ERROR")
_TRANSITIONS = {
    CREATED: {REBALANCING, PENDING_SHUTDOWN, PENDING_ERROR},
    REBALANCING: {RUNNING, REBALANCING, PENDING_SHUTDOWN, PENDING_ERROR},
    RUNNING: {REBALANCING, PENDING_SHUTDOWN, PENDING_ERROR},
    PENDING_SHUTDOWN: {NOT_RUNNING},
    NOT_RUNNING: set(),
    PENDING_ERROR: {ERROR},
    ERROR: set(),
}
REPLACE_THREAD, SHUTDOWN_CLIENT, SHUTDOWN_APPLICATION = "REPLACE_THREAD", "SHUTDOWN_CLIENT", "SHUTDOWN_APPLICATION"
SIGNAL_MAX_S = 120.0      # longest a SHUTDOWN_APPLICATION signal member stays in the group


class KafkaStreams:
    """See the module docstring. ``config``: a dict of Streams keys (or a StreamsConfig)."""

    def __init__(self, topology, config):
        self.config = config if isinstance(config, StreamsConfig) else StreamsConfig(config)
        self.topology = topology
        self.process_id, self._dir_lock = _process_id(self.config)
        self.client_id_prefix = self.config["client.id"] or self.config.application_id
        self.state = CREATED
        self._state_lock = threading.RLock()
        self._state_listener = None
        self._handler = None
        self.threads = []
        self.plan = None
        self.restore_listener = None
        self.global_restore_listener = None
        self.standby = None
        self._subs = {}
        self.topic_subtopology = {}
        self._closing = threading.Event()
        self._signal_stop = threading.Event()
        self._dead_threads = []          # threads replaced after an uncaught exception (their metrics count)
        self.dirs_lock = threading.Lock()   # task directories: opened (tasks, standbys) vs deleted (cleaner)
        self._next_clean = 0.0
        self.restore_log = []            # (thread, task id, store, changelog, start, end, records, ms)
        self.committed_offsets = {}      # (topic, partition) -> next offset, last commit of any thread here
        self._admin = None
        self.repartition_topic_names = frozenset()
        self.source_offset_resets = {}   # source topic -> "earliest" | "latest" | "none" (Topology.add_source)

    # ---------------------------------------------------------------------------------------------- states
    def set_state_listener(self, listener) -> None:
        if self.state != CREATED:
            raise StreamsException("Can only set StateListener before calling start(); state is %s" % self.state)
        self._state_listener = listener

    def set_uncaught_exception_handler(self, handler) -> None:
        if self.state != CREATED:
            raise StreamsException("Can only set UncaughtExceptionHandler before calling start(); state is %s"
                                   % self.state)
        self._handler = handler

    def set_global_state_restore_listener(self, listener) -> None:
        """Kafka's setGlobalStateRestoreListener: a StateRestoreListener for every store restoration."""
        if self.state != CREATED:
            raise StreamsException("Can only set GlobalStateRestoreListener before calling start()")
        self.restore_listener = listener

    def _set_state(self, new) -> bool:
        with self._state_lock:
            old = self.state
            if new == old and new != REBALANCING:
                return False
            if new not in _TRANSITIONS[old]:
                return False
            self.state = new
        log.info("stream-client [%s] State transition from %s to %s", self.client_id_prefix, old, new)
        if self._state_listener is not None and new != old:
            try:
                self._state_listener(new, old)
            except Exception:  # noqa: BLE001 - a listener's bug must not kill a stream thread
                log.exception("state listener failed")
        return True

    def on_thread_state_change(self, thread, new, old) -> None:
        if self.state in (PENDING_SHUTDOWN, NOT_RUNNING, PENDING_ERROR, ERROR):
            return
        live = [t for t in self.threads if t.state != st.DEAD]
        if not live:
            return
        if all(t.state == st.RUNNING for t in live):
            self._set_state(RUNNING)
        elif new in (st.PARTITIONS_REVOKED, st.PARTITIONS_ASSIGNED, st.STARTING):
            if self.state != REBALANCING:
                self._set_state(REBALANCING)

    def on_thread_died(self, thread, exc) -> None:
        if exc is None or self._closing.is_set():
            return
        action = SHUTDOWN_CLIENT
        if self._handler is not None:
            try:
                action = self._handler(exc) or SHUTDOWN_CLIENT
            except Exception:  # noqa: BLE001 - a handler that raises shuts the client down
                log.exception("uncaught exception handler failed")
        action = getattr(action, "name", action)
        log.error("stream-thread [%s] uncaught exception %r: %s", thread.thread_name, exc, action)
        if action == REPLACE_THREAD:
            new = st.StreamThread(self, thread.index)
            self._dead_threads.append(thread)
            self.threads = [new if t is thread else t for t in self.threads]
            new.start()
            return
        if action == SHUTDOWN_APPLICATION:
            threading.Thread(target=self._signal_application_shutdown, name="streams-shutdown-signal",
                             daemon=True).start()
        self._set_state(PENDING_ERROR)
        threading.Thread(target=self._shutdown_after_error, name="streams-error-shutdown", daemon=True).start()

    def on_application_shutdown_requested(self, requester: str) -> None:
        """A thread saw another instance's SHUTDOWN_APPLICATION signal member: shut this instance down."""
        if self._closing.is_set() or self.state in (PENDING_ERROR, ERROR):
            return
        log.error("stream-client [%s] shutdown of the application requested by %s", self.client_id_prefix,
                  requester)
        self._set_state(PENDING_ERROR)
        threading.Thread(target=self._shutdown_after_error, name="streams-error-shutdown", daemon=True).start()

    def _signal_application_shutdown(self):
        """The signal member (module docstring): joins the group, polls until no Streams member is left."""
        from confluent_kafka import Consumer

        from kbroker.streams.runtime.metadata import GroupView, shutdown_signal_client_id
        conf = self.config.main_consumer_config(shutdown_signal_client_id(self.client_id_prefix, self.process_id))
        consumer = Consumer(conf)
        deadline = time.monotonic() + SIGNAL_MAX_S
        try:
            consumer.subscribe(sorted(self.plan.source_partitions))
            next_check = 0.0
            while time.monotonic() < deadline and not self._signal_stop.is_set():
                consumer.consume(num_messages=100, timeout=0.2)     # membership only: records are ignored
                if time.monotonic() >= next_check:
                    next_check = time.monotonic() + 1.0
                    try:
                        view = GroupView.describe(self._admin_client(), self.config.application_id)
                    except Exception as exc:  # noqa: BLE001 - retried next second
                        log.debug("shutdown signal: describe failed: %s", exc)
                        continue
                    if not view.processes():
                        break
        except Exception as exc:  # noqa: BLE001 - best effort
            log.warning("shutdown signal member failed: %s", exc)
        finally:
            consumer.close()

    def _shutdown_after_error(self):
        self._closing.set()
        for t in self.threads:
            t.shutdown()
        for t in self.threads:
            if t is not threading.current_thread():
                t.join(60)
        self._close_shared()
        self._set_state(ERROR)

    def on_restored(self, thread, tid, store, changelog, start, end, n, ms) -> None:
        self.restore_log.append((thread.thread_name, str(tid), store, changelog, start, end, n, ms))

    def on_committed(self, thread, offsets) -> None:
        self.committed_offsets.update(offsets)

    # ------------------------------------------------------------------------------------ topology helpers
    def subtopology(self, sid):
        return self._subs[sid]

    def task_id(self, sid, partition):
        from kbroker.streams.processor import TaskId
        return TaskId(sid, partition)

    def store_builders(self, sub) -> list:
        builders = self.topology.store_builders()
        return [builders[name] for name in sorted(sub.stores)]

    def changelogs_of(self, sub) -> dict:
        """{store name: changelog topic} of the sub-topology's logged stores."""
        return {spec.store: topic for topic, spec in self._changelogs.items() if spec.subtopology == sub.id}

    def task_dir(self, tid) -> str:
        return os.path.join(self.config["state.dir"], self.config.application_id, str(tid))

    def task_config(self, thread) -> dict:
        return self.config.task_config()

    # ------------------------------------------------------------------------------------------- lifecycle
    def _admin_client(self):
        if self._admin is None:
            from confluent_kafka.admin import AdminClient
            self._admin = AdminClient(self.config.admin_config("%s-admin" % self.client_id_prefix))
        return self._admin

    def start(self) -> None:
        from kbroker.streams.runtime import internal_topics
        if self.state != CREATED:
            raise StreamsException("KafkaStreams can only be started once (state %s)" % self.state)
        try:
            self.config.validate_clients()
            app_id = self.config.application_id
            admin = self._admin_client()
            subs = self.topology.subtopologies(app_id)
            if any(sub.source_patterns for sub in subs):
                raise StreamsException("pattern sources are not supported by the kbroker.streams runtime")
            self._subs = {sub.id: sub for sub in subs}
            self.topic_subtopology = {t: sub.id for sub in subs for t in sub.source_topics}
            self.source_offset_resets = {}
            for t in self.topic_subtopology:
                node = self.topology.source_for_topic(t, app_id)
                if node is not None and node.offset_reset is not None:
                    self.source_offset_resets[t] = node.offset_reset
            self._changelogs = self.topology.changelog_topics(app_id)
            repartition = self.topology.repartition_topics(app_id)
            self.repartition_topic_names = frozenset(repartition)
            user_topics = {t for sub in subs for t in sub.source_topics if t not in repartition}
            self.plan = internal_topics.plan(self.topology, app_id,
                                             internal_topics.topic_partitions(admin, user_topics), self.config)
            internal_topics.ensure(admin, self.plan, self.config["replication.factor"])
        except Exception:
            self._set_state(PENDING_ERROR)
            self._close_shared()
            self._set_state(ERROR)
            raise
        self._set_state(REBALANCING)
        os.makedirs(os.path.join(self.config["state.dir"], app_id), exist_ok=True)
        if self.config["num.standby.replicas"] > 0:
            from kbroker.streams.runtime.standby import StandbyManager
            self.standby = StandbyManager(self)
            self.standby.start()
        self.threads = [st.StreamThread(self, i + 1) for i in range(self.config["num.stream.threads"])]
        for t in self.threads:
            t.start()
        if not self.threads:
            self._set_state(RUNNING)          # num.stream.threads=0: nothing to rebalance (Kafka's behaviour)

    def close(self, timeout_s: float | None = None) -> bool:
        """Graceful shutdown (module docstring); True when every thread finished within ``timeout_s``."""
        self._signal_stop.set()             # a SHUTDOWN_APPLICATION signal member leaves now
        if self.state in (NOT_RUNNING, ERROR):
            return True
        self._closing.set()
        if self.state != PENDING_ERROR:
            self._set_state(PENDING_SHUTDOWN)
        for t in self.threads:
            t.shutdown()
        ok = True
        for t in self.threads:
            if t is threading.current_thread():
                continue
            t.join(timeout_s)
            ok = ok and not t.is_alive()
        self._close_shared()
        if self.state == PENDING_SHUTDOWN:
            self._set_state(NOT_RUNNING)
        return ok

    def _close_shared(self):
        if self.standby is not None:
            self.standby.shutdown()
        self._admin = None
        if self._dir_lock is not None:
            self._dir_lock.close()          # releases the flock: a later instance may take the process id
            self._dir_lock = None

    def maybe_clean_state(self) -> list:
        """Kafka's state cleaner: delete the task directories under ``<state.dir>/<application.id>`` that no active
        or standby task of this instance uses and that were last modified (checkpoint written, store opened) at
        least ``state.cleanup.delay.ms`` ago. Runs at most every min(delay, 60 s); returns the names deleted."""
        delay_ms = self.config["state.cleanup.delay.ms"]
        now = time.monotonic()
        if now < self._next_clean:
            return []
        self._next_clean = now + min(delay_ms / 1000.0, 60.0)
        app_dir = os.path.join(self.config["state.dir"], self.config.application_id)
        deleted = []
        with self.dirs_lock:
            owned = {str(tid) for t in list(self.threads) for tid in list(t.tasks)}
            if self.standby is not None:
                owned |= {str(tid) for tid in list(self.standby.standbys)}
            try:
                names = os.listdir(app_dir)
            except OSError:
                return []
            for name in sorted(names):
                path = os.path.join(app_dir, name)
                if name in owned or not _TASK_DIR.match(name) or not os.path.isdir(path):
                    continue
                try:
                    age_ms = (time.time() - os.path.getmtime(path)) * 1000
                except OSError:
                    continue
                if age_ms >= delay_ms:
                    log.info("Deleting obsolete state directory %s for task %s as %d ms has elapsed (cleanup delay "
                             "is %d ms).", path, name, age_ms, delay_ms)
                    shutil.rmtree(path, ignore_errors=True)
                    deleted.append(name)
        return deleted

    def cleanup(self) -> None:
        """Delete this application's local state directory (Kafka's cleanUp: only when not running)."""
        if self.state not in (CREATED, NOT_RUNNING, ERROR):
            raise StreamsException("Cannot clean up while running (state %s)" % self.state)
        shutil.rmtree(os.path.join(self.config["state.dir"], self.config.application_id), ignore_errors=True)

    # --------------------------------------------------------------------------------- interactive queries
    def _local_stores(self, name, partition=None, stale=False) -> list:
        out = []
        for t in self.threads:
            with t.lock:
                for tid in sorted(t.tasks):
                    if tid in t.restoring or (partition is not None and tid.partition != partition):
                        continue
                    sm = t.state_managers.get(tid)
                    store = sm.get_store(name) if sm is not None else None
                    if store is not None:
                        out.append((tid, store))
        if stale and self.standby is not None:
            out.extend(self.standby.stores(name, partition))
        return [s for _, s in sorted(out, key=lambda x: (x[0].partition, x[0].subtopology))]

    def store(self, params):
        from kbroker.streams.state.queryable import build_composite
        if self.state == CREATED:
            raise StreamsNotStartedException("KafkaStreams has not been started, you can retry after calling "
                                             "start()")
        name = params.store_name
        if name not in self.topology.store_builders():
            raise UnknownStateStoreException("Cannot get state store %s because no such store is registered in the "
                                             "topology." % name)
        if self.state != RUNNING and not (params.stale_stores and self.state == REBALANCING):
            raise InvalidStateStoreException("KafkaStreams is not in state RUNNING (state %s), so the store %s "
                                             "cannot be queried now" % (self.state, name))
        stores = self._local_stores(name, params.partition, params.stale_stores)
        return build_composite(params, stores)

    def _group_view(self):
        from kbroker.streams.runtime.metadata import GroupView
        return GroupView.describe(self._admin_client(), self.config.application_id)

    def query_metadata_for_key(self, store_name, key, key_serializer):
        """KeyQueryMetadata(active_host, standby_hosts, partition) of the key in the store's sub-topology."""
        from kbroker.streams.partitioner import default_partition
        from kbroker.streams.runtime.metadata import UNAVAILABLE, HostInfo, KeyQueryMetadata, standby_owners
        sid = self.topology.subtopology_of_store(store_name)
        if sid is None or self.plan is None:
            raise UnknownStateStoreException("no store %s (or not started)" % store_name)
        sub = self._subs[sid]
        ser = getattr(key_serializer, "serialize", None) or getattr(key_serializer, "serializer", None) \
            or key_serializer
        kb = ser(sub_topic(sub), key)
        partition = default_partition(kb, self.plan.task_counts[sid])
        view = self._group_view()
        active = view.active_owner(sorted(sub.source_topics), partition)
        standbys = standby_owners(view.processes(), active, self.config["num.standby.replicas"])
        active_host = HostInfo.parse(view.server_of(active)) if active else UNAVAILABLE
        return KeyQueryMetadata(active_host, frozenset(HostInfo.parse(view.server_of(p)) for p in standbys),
                                partition)

    def metadata_for_all_stream_clients(self) -> list:
        from kbroker.streams.runtime.metadata import HostInfo, StreamsMetadata, standby_owners
        view = self._group_view()
        procs = view.processes()
        out = []
        k = self.config["num.standby.replicas"]
        for proc in procs:
            parts = view.partitions_of(proc)
            stores, sb_stores, sb_parts = set(), set(), set()
            for sid, sub in self._subs.items():
                if any(t for t, _ in parts if t in sub.source_topics):
                    stores |= set(sub.stores)
                for p in range(self.plan.task_counts[sid]):
                    if proc in standby_owners(procs, view.active_owner(sorted(sub.source_topics), p), k):
                        for store, topic in self.changelogs_of(sub).items():
                            sb_stores.add(store)
                            sb_parts.add((topic, p))
            out.append(StreamsMetadata(HostInfo.parse(view.server_of(proc)), proc, frozenset(stores),
                                       frozenset(parts), frozenset(sb_stores), frozenset(sb_parts)))
        return out

    def metrics(self) -> dict:
        """Totals over this instance's threads (replaced ones included): process-total, commit-total,
        punctuate-total, dropped-records-total (records skipped by logAndContinue or an invalid timestamp)."""
        out = {"process-total": 0, "commit-total": 0, "punctuate-total": 0, "dropped-records-total": 0}
        for t in self.threads + self._dead_threads:
            for k, v in t.metrics().items():
                out[k] += v
        return out

    def local_thread_metadata(self) -> list:
        from kbroker.streams.runtime.metadata import TaskMetadata, ThreadMetadata
        out = []
        for t in self.threads:
            with t.lock:
                active = frozenset(TaskMetadata(tid, frozenset(tp for tp, x in t.partition_task.items() if x == tid))
                                   for tid in t.tasks)
            standby = frozenset()
            if self.standby is not None and t.index == 1:
                standby = frozenset(TaskMetadata(tid, frozenset(tps)) for tid, tps in self.standby.tasks().items())
            out.append(ThreadMetadata(t.thread_name, t.state, t.consumer_client_id,
                                      "%s-restore-consumer" % t.thread_name, frozenset(["%s-producer" % t.thread_name]),
                                      active, standby))
        return out


PROCESS_FILE = "kafka-streams-process-metadata"
_TASK_DIR = re.compile(r"^\d+_\d+$")          # "<subtopology>_<partition>"


def _process_id(config):
    """(process id, lock file object or None). The id is kept in ``<state.dir>/<application.id>/
    kafka-streams-process-metadata`` (JSON ``{"processId": uuid}``, Kafka 3.4+'s file): a restarted instance keeps
    its id, hence its transactional ids under exactly_once_v2, so its first init_transactions fences (aborts) what
    its previous incarnation left open instead of leaving it to the transaction timeout. The directory is locked
    (flock on ``.process.lock``) while the instance lives; when another instance holds it (two instances sharing a
    state directory), or the file cannot be read or written, the instance gets a fresh UUID that is not kept --
    two live instances must never share transactional ids."""
    import fcntl
    import json
    app_dir = os.path.join(config["state.dir"], config.application_id)
    path = os.path.join(app_dir, PROCESS_FILE)
    try:
        os.makedirs(app_dir, exist_ok=True)
        lock = open(os.path.join(app_dir, ".process.lock"), "a")
    except OSError as exc:
        log.warning("cannot lock the state directory %s: %s; using a fresh process id", app_dir, exc)
        return str(uuid.uuid4()), None
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        log.warning("state directory %s is used by another instance; using a fresh process id", app_dir)
        return str(uuid.uuid4()), None
    try:
        with open(path) as f:
            return str(uuid.UUID(json.load(f)["processId"])), lock
    except (OSError, ValueError, KeyError, TypeError):
        pass
    pid = str(uuid.uuid4())
    try:
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"processId": pid}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("cannot keep the process id in %s: %s", path, exc)
    return pid, lock


def sub_topic(sub) -> str:
    """A topic of the sub-topology, for serializers that want one."""
    return sorted(sub.source_topics)[0] if sub.source_topics else ""
