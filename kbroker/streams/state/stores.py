"""Kafka's Stores factory, the store suppliers and StoreBuilder.

A *supplier* makes the bytes store (memory.py / rocksdb.py); a *builder* stacks the layers over it::

    build() = Metered(serdes) -> Caching (if enabled) -> ChangeLogging (if enabled) -> supplier.get()

Builder defaults are Kafka's: logging enabled (changelog topic "<application.id>-<store>-changelog", extra topic
configs from ``with_logging_enabled(config)``), caching disabled (the DSL's Materialized turns it on). A window store
that retains duplicates is never cached (Kafka disables it: a cache would collapse the duplicates).

Serdes: Serde objects of kbroker.streams.serdes (``.serialize(topic, obj)`` / ``.deserialize(topic, data)``); None
means the application's default.key.serde / default.value.serde, resolved at init.

Timestamped builders (``timestamped_key_value_store_builder`` / ``timestamped_window_store_builder``): values are
ValueAndTimestamp; stored bytes = 8-byte timestamp + value bytes (Kafka's format); the changelog carries the plain
value bytes with the timestamp as the record timestamp, as Kafka's ChangeLoggingTimestamped* stores write it.
"""

MIN_SEGMENT_INTERVAL_MS = 60_000   # Kafka's floor for a segmented store's segment interval


def _check_name(name):
    if not isinstance(name, str) or not name:
        raise ValueError("store name must be a non-empty string")
    return name


def _check_non_negative(what, value):
    if not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} cannot be negative (got {value!r})")
    return value


class KeyValueBytesStoreSupplier:
    """Makes a bytes KeyValueStore: kind "rocksdb", "memory" or "lru" (Stores.lru_map: ``max_entries`` keys)."""

    def __init__(self, name, kind, max_entries=None):
        self._name = _check_name(name)
        self.kind = kind
        self.max_entries = max_entries

    def name(self):
        return self._name

    def metrics_scope(self):
        return "rocksdb" if self.kind == "rocksdb" else "in-memory"

    def get(self):
        if self.kind == "rocksdb":
            from kbroker.streams.state.rocksdb import RocksDBKeyValueStore
            return RocksDBKeyValueStore(self._name)
        if self.kind == "lru":
            from kbroker.streams.state.memory import LRUKeyValueStore
            return LRUKeyValueStore(self._name, self.max_entries)
        from kbroker.streams.state.memory import InMemoryKeyValueStore
        return InMemoryKeyValueStore(self._name)


class WindowBytesStoreSupplier:
    """Makes a bytes WindowStore. ``segment_interval``: the RocksDB segment span, Kafka's max(retention / 2, 60 s)."""

    def __init__(self, name, kind, retention_ms, window_size_ms, retain_duplicates):
        self._name = _check_name(name)
        self.kind = kind
        self.retention_ms = _check_non_negative("retentionPeriod", retention_ms)
        self.window_size_ms = _check_non_negative("windowSize", window_size_ms)
        if window_size_ms > retention_ms:
            # Kafka's message (Stores.persistentWindowStore / inMemoryWindowStore)
            raise ValueError(f"The retention period of the window store {name} must be no smaller than its window "
                             f"size. Got size=[{window_size_ms}], retention=[{retention_ms}]")
        self.retain_duplicates = bool(retain_duplicates)
        self.segment_interval_ms = max(retention_ms // 2, MIN_SEGMENT_INTERVAL_MS)

    def name(self):
        return self._name

    def get(self):
        if self.kind == "rocksdb":
            from kbroker.streams.state.rocksdb import RocksDBWindowStore
            return RocksDBWindowStore(self._name, self.retention_ms, self.window_size_ms, self.retain_duplicates,
                                      self.segment_interval_ms)
        from kbroker.streams.state.memory import InMemoryWindowStore
        return InMemoryWindowStore(self._name, self.retention_ms, self.window_size_ms, self.retain_duplicates)


class SessionBytesStoreSupplier:
    def __init__(self, name, kind, retention_ms):
        self._name = _check_name(name)
        self.kind = kind
        self.retention_ms = _check_non_negative("retentionPeriod", retention_ms)
        self.segment_interval_ms = max(retention_ms // 2, MIN_SEGMENT_INTERVAL_MS)

    def name(self):
        return self._name

    def get(self):
        if self.kind == "rocksdb":
            from kbroker.streams.state.rocksdb import RocksDBSessionStore
            return RocksDBSessionStore(self._name, self.retention_ms, self.segment_interval_ms)
        from kbroker.streams.state.memory import InMemorySessionStore
        return InMemorySessionStore(self._name, self.retention_ms)


class StoreBuilder:
    """Kafka's StoreBuilder. ``store_type``: "keyvalue", "window" or "session"; ``timestamped``: values are
    ValueAndTimestamp (see the module docstring)."""

    def __init__(self, supplier, key_serde, value_serde, store_type, timestamped=False):
        self.supplier = supplier
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.store_type = store_type
        self.timestamped = timestamped
        self._caching = False
        self._logging = True
        self._log_config = {}

    def name(self) -> str:
        return self.supplier.name()

    def with_caching_enabled(self) -> "StoreBuilder":
        self._caching = True
        return self

    def with_caching_disabled(self) -> "StoreBuilder":
        self._caching = False
        return self

    def with_logging_enabled(self, config: dict | None = None) -> "StoreBuilder":
        self._logging = True
        self._log_config = dict(config or {})
        return self

    def with_logging_disabled(self) -> "StoreBuilder":
        self._logging = False
        self._log_config = {}
        return self

    def logging_enabled(self) -> bool:
        return self._logging

    def caching_enabled(self) -> bool:
        if self.store_type == "window" and self.supplier.retain_duplicates:
            return False
        return self._caching

    def log_config(self) -> dict:
        return dict(self._log_config)

    def is_windowed(self) -> bool:
        """True for window and session stores (their changelogs are "compact,delete" with retention)."""
        return self.store_type != "keyvalue"

    def retention_ms(self):
        """The store's retention (window/session stores), None for key-value stores."""
        return getattr(self.supplier, "retention_ms", None)

    def persistent(self) -> bool:
        return self.supplier.kind == "rocksdb"

    def build(self):
        """A fresh store stack (one per task)."""
        from kbroker.streams.state import caching, logging as changelogging, metered
        inner = self.supplier.get()
        t = self.store_type
        if self._logging:
            inner = {"keyvalue": changelogging.ChangeLoggingKeyValueStore,
                     "window": changelogging.ChangeLoggingWindowStore,
                     "session": changelogging.ChangeLoggingSessionStore}[t](inner, timestamped=self.timestamped)
        if self.caching_enabled():
            inner = {"keyvalue": caching.CachingKeyValueStore,
                     "window": caching.CachingWindowStore,
                     "session": caching.CachingSessionStore}[t](inner)
        cls = {"keyvalue": metered.MeteredKeyValueStore,
               "window": metered.MeteredWindowStore,
               "session": metered.MeteredSessionStore}[t]
        return cls(inner, self.key_serde, self.value_serde, timestamped=self.timestamped)


class Stores:
    """Kafka's Stores factory (static methods, snake_case names)."""

    @staticmethod
    def persistent_key_value_store(name) -> KeyValueBytesStoreSupplier:
        return KeyValueBytesStoreSupplier(name, "rocksdb")

    @staticmethod
    def persistent_timestamped_key_value_store(name) -> KeyValueBytesStoreSupplier:
        return KeyValueBytesStoreSupplier(name, "rocksdb")

    @staticmethod
    def in_memory_key_value_store(name) -> KeyValueBytesStoreSupplier:
        return KeyValueBytesStoreSupplier(name, "memory")

    @staticmethod
    def lru_map(name, max_cache_size) -> KeyValueBytesStoreSupplier:
        """Kafka's Stores.lruMap: an in-memory key-value store bounded to ``max_cache_size`` keys (LRU evicted)."""
        _check_non_negative("maxCacheSize", max_cache_size)
        return KeyValueBytesStoreSupplier(name, "lru", max_cache_size)

    @staticmethod
    def persistent_window_store(name, retention_ms, window_size_ms, retain_duplicates=False):
        return WindowBytesStoreSupplier(name, "rocksdb", retention_ms, window_size_ms, retain_duplicates)

    @staticmethod
    def persistent_timestamped_window_store(name, retention_ms, window_size_ms, retain_duplicates=False):
        return WindowBytesStoreSupplier(name, "rocksdb", retention_ms, window_size_ms, retain_duplicates)

    @staticmethod
    def in_memory_window_store(name, retention_ms, window_size_ms, retain_duplicates=False):
        return WindowBytesStoreSupplier(name, "memory", retention_ms, window_size_ms, retain_duplicates)

    @staticmethod
    def persistent_session_store(name, retention_ms) -> SessionBytesStoreSupplier:
        return SessionBytesStoreSupplier(name, "rocksdb", retention_ms)

    @staticmethod
    def in_memory_session_store(name, retention_ms) -> SessionBytesStoreSupplier:
        return SessionBytesStoreSupplier(name, "memory", retention_ms)

    @staticmethod
    def key_value_store_builder(supplier, key_serde=None, value_serde=None) -> StoreBuilder:
        return StoreBuilder(supplier, key_serde, value_serde, "keyvalue")

    @staticmethod
    def timestamped_key_value_store_builder(supplier, key_serde=None, value_serde=None) -> StoreBuilder:
        return StoreBuilder(supplier, key_serde, value_serde, "keyvalue", timestamped=True)

    @staticmethod
    def window_store_builder(supplier, key_serde=None, value_serde=None) -> StoreBuilder:
        return StoreBuilder(supplier, key_serde, value_serde, "window")

    @staticmethod
    def timestamped_window_store_builder(supplier, key_serde=None, value_serde=None) -> StoreBuilder:
        return StoreBuilder(supplier, key_serde, value_serde, "window", timestamped=True)

    @staticmethod
    def session_store_builder(supplier, key_serde=None, value_serde=None) -> StoreBuilder:
        return StoreBuilder(supplier, key_serde, value_serde, "session")
