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

from typing import Callable, NamedTuple, Optional, Protocol


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


class ProcessorStateManager:
    """One task's state (see the module docstring)."""

    def __init__(self, task_id, app_id: str, state_dir: str, stores: list, changelogs: dict, eos: bool,
                 config: dict | None = None, thread_cache=None, standby: bool = False):
        """stores: StoreBuilders of the task's subtopology; changelogs: {store name: changelog topic} for logged
        stores (Topology.changelog_topics gives them); config: the application's config (cache size, default
        serdes); thread_cache: the stream thread's ThreadCache (None: one is made from config, as the test driver
        needs); standby: a standby task (no caching, no change-logging writes)."""
        raise NotImplementedError

    def init_stores(self, collector, timestamp_fn: Callable[[], int]) -> None:
        """Build and init every store; ``collector`` receives changelog records, ``timestamp_fn()`` gives the
        current record's timestamp (the changelog records' timestamp)."""
        raise NotImplementedError

    def get_store(self, name: str):
        """The typed (metered) store, or None when the task has no store of that name."""
        raise NotImplementedError

    def store_names(self) -> list:
        raise NotImplementedError

    def changelog_partitions(self) -> dict:
        """{store name: (changelog topic, partition)} of the logged stores."""
        raise NotImplementedError

    def changelog_offsets(self) -> dict:
        """{(changelog topic, partition): offset of the last record the store holds} (known ones only)."""
        raise NotImplementedError

    def restore(self, restore_consumer, listener: StateRestoreListener | None = None, max_batch: int = 1000) -> dict:
        """Replay each logged store's changelog from checkpoint + 1 (or the beginning) to the end offset taken at
        start; returns {store name: RestoreResult}. ``restore_consumer``: a RestoreConsumer or a zero-argument
        factory of one."""
        raise NotImplementedError

    def update_changelog_offsets(self, offsets: dict) -> None:
        """Record {(changelog topic, partition): offset of the last acked record} from the collector."""
        raise NotImplementedError

    def flush(self) -> None:
        """Flush every store (caches forward downstream, changelog writes go to the collector)."""
        raise NotImplementedError

    def checkpoint(self, offsets: dict | None = None) -> None:
        """Write ".checkpoint" with the persistent logged stores' offsets (``offsets`` merged in first). Under EOS
        only close(clean=True) calls it."""
        raise NotImplementedError

    def close(self, clean: bool) -> None:
        """clean: flush + checkpoint + close stores; dirty: close stores only (EOS: the checkpoint stays absent, so
        the next start wipes and restores)."""
        raise NotImplementedError
