"""ProcessorStateManager: a task's stores, their changelogs, restore and the .checkpoint file (Kafka's
ProcessorStateManager + the restore part of StoreChangelogReader, without Kafka's consumer: restore reads through
the RestoreConsumer protocol below, so the test driver and unit tests feed records from memory and the runtime (S5)
implements it over confluent-kafka).

Life cycle (one instance per task)::

    sm = ProcessorStateManager(task_id, app_id, state_dir, builders, changelogs, eos, config, thread_cache)
    sm.init_stores(collector, timestamp_fn)    # builds + inits every store; reads (EOS: then deletes) .checkpoint
    sm.restore(restore_consumer, listener)     # replays each logged store's changelog from checkpoint+1 to end
    ... processing: sm.get_store(name) ...
    sm.flush(); sm.update_changelog_offsets(collector_offsets); sm.checkpoint()    # at every commit (ALOS)
    sm.close(clean)                            # clean: flush + checkpoint (EOS writes it only here)

Task directory: "<state_dir>/<app_id>/<task id>" (Kafka's layout); RocksDB stores live under "rocksdb/<store>" (key-
value) or "<store>/<store>.<segment start>" (segmented window/session stores) in it.

EOS rule (Kafka's): under exactly_once_v2 the checkpoint is read and deleted at init, and written only by a clean
close; a task that finds no checkpoint wipes its persistent stores before opening them, so a crash always restores
from the changelog's start (read_committed).
"""

import contextlib
import logging
import os
import shutil
import time
from typing import Callable, NamedTuple, Optional, Protocol

from kbroker.streams.errors import ProcessorStateException, StreamsException
from kbroker.streams.state.base import StateStoreContext
from kbroker.streams.state.caching import ThreadCache, cache_size_from_config
from kbroker.streams.state.checkpoint import FILE_NAME, OffsetCheckpoint
from kbroker.streams.state.logging import join_timestamped

log = logging.getLogger(__name__)


class ChangelogRecord(NamedTuple):
    """One changelog record handed to a restore callback (value None: a tombstone)."""
    offset: int
    key: Optional[bytes]
    value: Optional[bytes]
    timestamp: int


class RestoreResult(NamedTuple):
    """Per restored store: first offset read, end offset (exclusive), records restored, wall ms taken."""
    start_offset: int
    end_offset: int
    records: int
    ms: int


class RestoreConsumer(Protocol):
    """What restore reads changelogs through (S5: a confluent-kafka consumer with assign(), read_committed under
    EOS; tests: MemoryRestoreConsumer)."""

    def offsets(self, topic: str, partition: int) -> tuple:
        """(beginning offset, end offset): the changelog partition's log start and (EOS: last stable) end."""

    def poll(self, topic: str, partition: int, position: int, max_records: int) -> tuple:
        """(records, next position): up to ``max_records`` ChangelogRecords at offsets >= ``position`` (offsets may
        skip: compaction, transaction markers) and the position to read next. Returns ([], position) only when it
        could read nothing within its own bounded wait."""

    def close(self) -> None: ...


class StateRestoreListener:
    """Kafka's StateRestoreListener (defaults do nothing). tp = (changelog topic, partition)."""

    def on_restore_start(self, tp, store_name, start_offset, end_offset): ...

    def on_batch_restored(self, tp, store_name, batch_end_offset, num_restored): ...

    def on_restore_end(self, tp, store_name, total_restored): ...


class MemoryRestoreConsumer:
    """A RestoreConsumer over in-memory changelogs: ``{(topic, partition): [ChangelogRecord | (key, value, ts)]}``
    (offsets are the list positions unless ChangelogRecords carry their own)."""

    def __init__(self, changelogs: dict | None = None):
        self.changelogs = {}
        for tp, records in (changelogs or {}).items():
            for r in records:
                self.append(tp[0], tp[1], r)
        self.closed = False

    def append(self, topic, partition, record):
        log = self.changelogs.setdefault((topic, partition), [])
        if not isinstance(record, ChangelogRecord):
            key, value, ts = record
            record = ChangelogRecord(log[-1].offset + 1 if log else 0, key, value, ts)
        log.append(record)
        return record.offset

    def offsets(self, topic, partition):
        log = self.changelogs.get((topic, partition), [])
        if not log:
            return 0, 0
        return log[0].offset, log[-1].offset + 1

    def poll(self, topic, partition, position, max_records):
        log = self.changelogs.get((topic, partition), [])
        out = [r for r in log if r.offset >= position][:max_records]
        if not out:
            return [], position
        return out, out[-1].offset + 1

    def close(self):
        self.closed = True


class StoreContext(StateStoreContext):
    """The concrete StateStoreContext a ProcessorStateManager hands its stores."""

    def __init__(self, manager: "ProcessorStateManager", collector, timestamp_fn):
        self._m = manager
        self._collector = collector
        self._timestamp_fn = timestamp_fn
        self._override = []

    def application_id(self):
        return self._m.app_id

    def task_id(self):
        return self._m.task_id

    def app_config(self):
        return self._m.config

    def state_dir(self):
        os.makedirs(self._m.task_dir, exist_ok=True)
        return self._m.task_dir

    def register(self, store, restore_callback):
        self._m._register(store, restore_callback)

    def changelog_topic(self, store_name):
        return self._m.changelogs.get(store_name)

    def changelog_partition(self):
        return self._m.partition

    def record_collector(self):
        return None if self._m.standby else self._collector

    def timestamp(self):
        if self._override:
            return self._override[-1]
        if self._timestamp_fn is None:
            return 0
        ts = self._timestamp_fn()
        return 0 if ts is None else ts

    @contextlib.contextmanager
    def timestamp_scope(self, timestamp):
        """Changelog writes inside use ``timestamp`` (a cache flush writes each entry with its own record's)."""
        self._override.append(timestamp)
        try:
            yield
        finally:
            self._override.pop()

    def thread_cache(self):
        return None if self._m.standby else self._m.thread_cache

    def default_key_serde(self):
        return self._m._default_serde("default.key.serde", True)

    def default_value_serde(self):
        return self._m._default_serde("default.value.serde", False)


def _task_partition(task_id):
    partition = getattr(task_id, "partition", None)
    if partition is None:
        partition = int(str(task_id).rsplit("_", 1)[-1])
    return partition


class ProcessorStateManager:
    """One task's state (see the module docstring)."""

    def __init__(self, task_id, app_id: str, state_dir: str, stores: list, changelogs: dict, eos: bool,
                 config: dict | None = None, thread_cache=None, standby: bool = False):
        """stores: StoreBuilders of the task's subtopology; changelogs: {store name: changelog topic} for logged
        stores (Topology.changelog_topics gives them); config: the application's config (cache size, default
        serdes); thread_cache: the stream thread's ThreadCache (None: one is made from config, as the test driver
        needs); standby: a standby task (no caching, no change-logging writes)."""
        self.task_id = task_id
        self.app_id = app_id
        self.partition = _task_partition(task_id)
        self.task_dir = os.path.join(state_dir, app_id, str(task_id))
        self.builders = {b.name(): b for b in stores}
        if len(self.builders) != len(stores):
            raise ProcessorStateException(f"task {task_id}: two stores share a name")
        self.changelogs = {name: topic for name, topic in (changelogs or {}).items()
                           if name in self.builders and self.builders[name].logging_enabled()}
        self.eos = eos
        self.config = dict(config or {})
        self.standby = standby
        self.thread_cache = thread_cache if thread_cache is not None else \
            ThreadCache(cache_size_from_config(self.config))
        self._checkpoint_file = OffsetCheckpoint(os.path.join(self.task_dir, FILE_NAME))
        self._stores = {}           # name -> root (typed) store, registration order
        self._callbacks = {}        # name -> restore callback of the bytes store
        self._offsets = {}          # (topic, partition) -> offset of the last record the store holds
        self._context = None
        self._serdes = {}
        self._closed = False

    # -- set-up -----------------------------------------------------------------------------------------------------
    def register(self, store, restore_callback):
        """Kafka's registerStore: a store (the root of its stack) and its restore callback (a list of
        ChangelogRecord per call); stores do it themselves from init through their context."""
        self._register(store, restore_callback)

    def _register(self, store, callback):
        name = store.name()
        if name in self._stores:
            raise ProcessorStateException(f"store {name} has already been registered")
        self._stores[name] = store
        self._callbacks[name] = callback

    def _default_serde(self, key, is_key):
        if key not in self._serdes:
            value = self.config.get(key)
            if value is None:
                self._serdes[key] = None
            else:
                from kbroker.streams.serdes import serde_from_config
                self._serdes[key] = serde_from_config(value, self.config, is_key)
        return self._serdes[key]

    def _tp(self, name):
        return self.changelogs[name], self.partition

    def _checkpointable(self, name):
        return name in self.changelogs and self.builders[name].persistent()

    def _store_dirs(self, name):
        b = self.builders[name]
        if not b.persistent():
            return []
        if b.store_type == "keyvalue":
            return [os.path.join(self.task_dir, "rocksdb", name)]
        return [os.path.join(self.task_dir, name)]

    def _wipe(self, name):
        for d in self._store_dirs(name):
            shutil.rmtree(d, ignore_errors=True)

    def init_stores(self, collector, timestamp_fn: Callable[[], int] | None = None) -> None:
        """Build and init every store; ``collector`` receives changelog records, ``timestamp_fn()`` gives the
        current record's timestamp (the changelog records' timestamp)."""
        try:
            checkpointed = self._checkpoint_file.read()
        except (ValueError, UnicodeDecodeError) as e:
            log.warning("task %s: unreadable %s (%s): state wiped, restoring from the changelogs' start",
                        self.task_id, self._checkpoint_file.path, e)
            checkpointed = {}
            for name in self.builders:
                self._wipe(name)
        if self.eos and not self.standby:
            # A crash from here on must not find a checkpoint: the stores may then hold uncommitted writes. (A
            # standby only ever holds committed data -- it reads read_committed -- so its checkpoint stays valid.)
            self._checkpoint_file.delete()
        self._context = StoreContext(self, collector, timestamp_fn)
        for name, builder in self.builders.items():
            tp = self._tp(name) if name in self.changelogs else None
            if self._checkpointable(name) and tp in checkpointed:
                self._offsets[tp] = checkpointed[tp]
            elif self.eos and builder.persistent() and name in self.changelogs:
                # EOS without a checkpoint: local state may hold writes of aborted transactions -> start empty and
                # restore everything (Kafka's TaskCorruptedException path). ALOS restores over what is there.
                self._wipe(name)
            self._init_store(builder)

    def _init_store(self, builder):
        store = builder.build()
        store.init(self._context, store)
        if store.name() not in self._stores:
            self._register(store, getattr(store, "restore_batch", None))

    # -- access -----------------------------------------------------------------------------------------------------
    def get_store(self, name: str):
        return self._stores.get(name)

    def store_names(self) -> list:
        return list(self._stores)

    def changelog_partitions(self) -> dict:
        return {name: self._tp(name) for name in self.changelogs}

    def changelog_offsets(self) -> dict:
        return dict(self._offsets)

    # -- restore ----------------------------------------------------------------------------------------------------
    def _apply(self, name, records):
        if self.builders[name].timestamped:
            # a timestamped store's changelog holds the plain value; the record timestamp is the embedded one
            records = [ChangelogRecord(r.offset, r.key, join_timestamped(r.value, r.timestamp), r.timestamp)
                       for r in records]
        self._callbacks[name](records)

    def apply_changelog_records(self, name: str, records: list) -> None:
        """Standby tasks: apply ChangelogRecords read from ``name``'s changelog and remember the last offset."""
        if records:
            self._apply(name, records)
            self._offsets[self._tp(name)] = records[-1].offset

    def restore(self, restore_consumer, listener: StateRestoreListener | None = None, max_batch: int = 1000,
                max_empty_polls: int = 10) -> dict:
        """Replay each logged store's changelog from checkpoint + 1 (or the beginning) to the end offset taken at
        start; returns {store name: RestoreResult}. ``restore_consumer``: a RestoreConsumer or a zero-argument
        factory of one. A changelog that stops yielding before its end offset for ``max_empty_polls`` polls in a
        row raises ProcessorStateException naming it."""
        consumer = restore_consumer if hasattr(restore_consumer, "poll") else restore_consumer()
        results = {}
        for name in list(self.changelogs):
            topic, partition = tp = self._tp(name)
            begin, end = consumer.offsets(topic, partition)
            known = self._offsets.get(tp)
            start = begin if known is None else known + 1
            if known is not None and (start > end or start < begin):
                # The checkpoint is outside the changelog (topic recreated or truncated): start over, as Kafka does
                # on OffsetOutOfRange during restore.
                log.warning("task %s: checkpoint %d of %s-%d outside [%d, %d]: wiping store %s", self.task_id, known,
                            topic, partition, begin, end, name)
                self._reset_store(name)
                start = begin
            if start >= end:
                results[name] = RestoreResult(start, end, 0, 0)
                continue
            t0 = time.monotonic()
            if listener is not None:
                listener.on_restore_start(tp, name, start, end)
            position, total, empty = start, 0, 0
            while position < end:
                records, position = consumer.poll(topic, partition, position, max_batch)
                records = [r for r in records if r.offset < end]
                if not records:
                    empty += 1
                    if empty >= max_empty_polls and position < end:
                        raise ProcessorStateException(
                            f"restoring store {name} from {topic}-{partition}: no records at position {position} "
                            f"before end offset {end}")
                    continue
                empty = 0
                self._apply(name, records)
                total += len(records)
                self._offsets[tp] = records[-1].offset
                if listener is not None:
                    listener.on_batch_restored(tp, name, records[-1].offset, len(records))
            ms = int((time.monotonic() - t0) * 1000)
            if listener is not None:
                listener.on_restore_end(tp, name, total)
            log.info("restored %d records of %s (%s-%d) in %d ms", total, name, topic, partition, ms)
            results[name] = RestoreResult(start, end, total, ms)
        return results

    def _reset_store(self, name):
        store = self._stores.pop(name)
        self._callbacks.pop(name, None)
        store.close()
        self._wipe(name)
        self._offsets.pop(self._tp(name), None)
        self._init_store(self.builders[name])

    # -- commit -----------------------------------------------------------------------------------------------------
    def update_changelog_offsets(self, offsets: dict) -> None:
        """Record {(changelog topic, partition): offset of the last acked record} from the collector."""
        mine = {self._tp(n) for n in self.changelogs}
        for tp, offset in offsets.items():
            if tuple(tp) in mine:
                self._offsets[tuple(tp)] = offset

    def flush(self) -> None:
        """Flush every store (caches forward downstream, changelog writes go to the collector)."""
        first = None
        for name, store in self._stores.items():
            try:
                store.flush()
            except Exception as e:   # flush the others, then report the first failure (Kafka does the same)
                log.error("task %s: flushing store %s failed: %s", self.task_id, name, e)
                first = first or e
        if first is not None:
            if isinstance(first, StreamsException):
                raise first
            raise ProcessorStateException(f"task {self.task_id}: flushing stores failed: {first}") from first

    def checkpoint(self, offsets: dict | None = None, _closing: bool = False) -> None:
        """Write ".checkpoint" with the persistent logged stores' offsets (``offsets`` merged in first). Under EOS
        only close(clean=True) writes it for an active task (other calls merge the offsets and return); a standby
        checkpoints at every call (it holds only committed data: it reads read_committed), as Kafka's StandbyTask."""
        if offsets:
            self.update_changelog_offsets(offsets)
        if self.eos and not _closing and not self.standby:
            return
        data = {}
        for name in self.changelogs:
            tp = self._tp(name)
            if self._checkpointable(name) and tp in self._offsets:
                data[tp] = self._offsets[tp]
        if not data and not os.path.exists(self._checkpoint_file.path):
            return
        self._checkpoint_file.write(data)

    def close(self, clean: bool) -> None:
        """clean: flush + checkpoint + close stores; dirty: drop cached writes, close stores and (EOS) wipe the
        persistent stores so the next start restores them from the changelog."""
        if self._closed:
            return
        self._closed = True
        first = None
        if clean:
            try:
                self.flush()
                self.checkpoint(_closing=True)
            except Exception as e:
                first = e
        for name, store in self._stores.items():
            try:
                if not clean:
                    layer = store
                    while layer is not None:
                        drop = getattr(layer, "drop_cache", None)
                        if drop is not None:
                            drop()
                        layer = layer.wrapped()
                store.close()
            except Exception as e:
                log.error("task %s: closing store %s failed: %s", self.task_id, name, e)
                first = first or e
        if not clean and self.eos:
            for name in self.builders:
                self._wipe(name)
        if first is not None:
            if isinstance(first, StreamsException):
                raise first
            raise ProcessorStateException(f"task {self.task_id}: closing state failed: {first}") from first
