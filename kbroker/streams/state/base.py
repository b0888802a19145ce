"""The state-store contract shared by every layer of kbroker.streams' stores (Kafka's StateStore).

A store the application sees is a stack of wrappers over a *bytes* store, as Kafka builds it::

    Metered (typed: serdes)  ->  Caching (optional)  ->  ChangeLogging (optional)  ->  inner bytes store
                                                                                       (memory.py / rocksdb.py)

Every layer implements the same interface; the bytes layers take and return ``bytes`` keys and values, the metered
layer objects (serialized with the store's serdes, serde topic = the changelog topic name as Kafka does).

``init(context, root)``: ``root`` is the outermost store of the stack; the inner store registers *root* (and its
restore callback) with ``context.register`` so the state manager knows it by name. ``flush()`` pushes caches down and
makes writes durable (RocksDB: WAL-less flush); ``close()`` releases files; ``persistent()`` tells whether the data
survives a restart (checkpoints are written only for persistent stores, as Kafka does).
"""

import abc
from typing import Callable, NamedTuple, Optional


class ValueAndTimestamp(NamedTuple):
    """A timestamped store's value (Kafka's ValueAndTimestamp). Bytes form: 8-byte big-endian signed timestamp
    followed by the value's bytes (Kafka's ValueAndTimestampSerializer); a ``None`` value is a delete."""
    value: object
    timestamp: int


# Flush listener of a caching store (registered by the DSL on the typed store with ``set_flush_listener``):
# called once per key written since the last flush, on commit or cache eviction, as
#     listener(key, new_value, old_value, timestamp)
# key: the typed key (a Windowed for window/session stores); new_value None = deleted; old_value = the value the
# store held before these writes (None when ``send_old_values`` is False, or no prior value). Kafka's
# TimestampedCacheFlushListener: what makes a KTable emit "one update per key per commit".
FlushListener = Callable[[object, object, object, int], None]


class StateStore(abc.ABC):
    """Kafka's StateStore. Names are unique per topology; a store is bound to one task."""

    @abc.abstractmethod
    def name(self) -> str:
        """The store's name (also its changelog topic's middle part: "<app id>-<name>-changelog")."""

    @abc.abstractmethod
    def init(self, context: "StateStoreContext", root: "StateStore") -> None:
        """Open the store for ``context``'s task and register ``root`` with ``context.register``."""

    @abc.abstractmethod
    def flush(self) -> None:
        """Flush caches downstream and make the store's writes durable."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the store (idempotent)."""

    @abc.abstractmethod
    def persistent(self) -> bool:
        """True for stores whose data survives a restart (RocksDB)."""

    @abc.abstractmethod
    def is_open(self) -> bool:
        """True between init and close."""

    # Optional capabilities (defaults for stores without them).
    def set_flush_listener(self, listener: Optional[FlushListener], send_old_values: bool) -> bool:
        """Register the cache flush listener; returns False when no caching layer sits in the stack (the caller
        then forwards each update itself, as Kafka's WrappedStateStore.setFlushListener)."""
        return False

    def wrapped(self) -> Optional["StateStore"]:
        """The next store down the stack, or None for a bytes store."""
        return None


class StateStoreContext(abc.ABC):
    """What a store needs from its task (Kafka's StateStoreContext). ProcessorStateManager builds the concrete one
    (state_manager.StoreContext); a store never talks to the task directly."""

    @abc.abstractmethod
    def application_id(self) -> str: ...

    @abc.abstractmethod
    def task_id(self):
        """The task's TaskId (str(): "0_3")."""

    @abc.abstractmethod
    def app_config(self) -> dict: ...

    @abc.abstractmethod
    def state_dir(self) -> str:
        """The task's state directory "<state.dir>/<application.id>/<task id>" (created on demand)."""

    @abc.abstractmethod
    def register(self, store: StateStore, restore_callback: Callable[[list], None]) -> None:
        """Register ``store`` (the root) with the state manager. ``restore_callback(batch)`` receives lists of
        ChangelogRecord (key bytes, value bytes or None, timestamp) read from the store's changelog."""

    @abc.abstractmethod
    def changelog_topic(self, store_name: str) -> Optional[str]:
        """"<app id>-<store>-changelog" when the store is logged, else None."""

    @abc.abstractmethod
    def changelog_partition(self) -> int:
        """The partition change-logging writes to: the task's partition."""

    @abc.abstractmethod
    def record_collector(self):
        """The task's RecordCollector (send(topic, key, value, timestamp, headers, partition)); None in a context
        without one (then change-logging writes nothing)."""

    @abc.abstractmethod
    def timestamp(self) -> int:
        """The timestamp of the record being processed (the changelog record's timestamp), 0 outside processing."""

    @abc.abstractmethod
    def thread_cache(self):
        """The ThreadCache (caching.py) shared by the stream thread's tasks, or None (caching then disabled)."""

    def default_key_serde(self):
        """The serde for stores built without a key serde (config "default.key.serde"); None if unset."""
        return None

    def default_value_serde(self):
        return None


class KeyValueIterator:
    """An iterator of KeyValue items with Kafka's KeyValueIterator extras: ``peek_next_key()``, ``has_next()``,
    ``close()`` and use as a context manager. Iterating over a store returns one; it reads a snapshot taken when the
    range was opened for in-memory stores (Kafka's in-memory store does the same) and a live RocksDB iterator's
    view otherwise."""

    __slots__ = ("_it", "_next", "_has", "_closed")

    def __init__(self, iterable):
        self._it = iter(iterable)
        self._has = None
        self._next = None
        self._closed = False

    def _fill(self):
        if self._has is None:
            if self._closed:
                self._has = False
                return
            try:
                self._next = next(self._it)
                self._has = True
            except StopIteration:
                self._has = False

    def has_next(self) -> bool:
        self._fill()
        return self._has

    def peek_next_key(self):
        self._fill()
        if not self._has:
            raise StopIteration
        return self._next[0]

    def __iter__(self):
        return self

    def __next__(self):
        self._fill()
        if not self._has:
            raise StopIteration
        item = self._next
        self._has = None
        self._next = None
        return item

    def close(self):
        self._closed = True
        self._has = False
        self._next = None
        close = getattr(self._it, "close", None)
        if close is not None:
            close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
