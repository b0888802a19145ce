"""Interactive queries of local stores: Kafka's QueryableStoreTypes, StoreQueryParameters and the read-only composite
views over the same-named store of every local task (Kafka's CompositeReadOnly*Store).

KafkaStreams.store(params) (S5) collects the typed stores named ``params.store_name`` of its running active tasks
(standbys too with ``enable_stale_stores()``; one partition with ``with_partition(p)``) and calls
``build_composite(params, stores)``. Views are read-only (writes raise InvalidStateStoreException-like errors) and
check on every call that the stores are still open (a store closed by a rebalance raises
InvalidStateStoreException: the caller retries after the rebalance, as with Kafka).

Ordering of a composite ``range``/``all``: task by task (ascending partition), within a task the store's own order --
Kafka's composite iterators concatenate the same way (no global merge).
"""


from kbroker.streams.errors import InvalidStateStoreException
from kbroker.streams.state.base import KeyValueIterator
from kbroker.streams.state.keyvalue_store import KeyValueStore
from kbroker.streams.state.session_store import SessionStore
from kbroker.streams.state.window_store import WindowStore


def _unwrap_timestamped(store):
    return bool(getattr(store, "timestamped", False))


class QueryableStoreType:
    """Which store kind a query wants; ``accepts(store)`` / ``create(stores, store_name)``."""

    def __init__(self, kind, base, timestamped):
        self.kind = kind
        self._base = base
        self._timestamped = timestamped

    def accepts(self, store) -> bool:
        if not isinstance(store, self._base):
            return False
        # A plain key_value_store() query also accepts a timestamped store and strips the timestamps (Kafka's
        # ReadOnlyKeyValueStoreFacade); a timestamped query needs a timestamped store.
        return _unwrap_timestamped(store) or not self._timestamped

    def create(self, stores: list, store_name: str):
        strip = not self._timestamped
        return {"keyvalue": CompositeReadOnlyKeyValueStore, "window": CompositeReadOnlyWindowStore,
                "session": CompositeReadOnlySessionStore}[self.kind](stores, store_name, strip)

    def __repr__(self):
        return f"QueryableStoreTypes.{'timestamped_' if self._timestamped else ''}{self.kind}_store()"


class QueryableStoreTypes:
    @staticmethod
    def key_value_store() -> QueryableStoreType:
        return QueryableStoreType("keyvalue", KeyValueStore, False)

    @staticmethod
    def timestamped_key_value_store() -> QueryableStoreType:
        return QueryableStoreType("keyvalue", KeyValueStore, True)

    @staticmethod
    def window_store() -> QueryableStoreType:
        return QueryableStoreType("window", WindowStore, False)

    @staticmethod
    def timestamped_window_store() -> QueryableStoreType:
        return QueryableStoreType("window", WindowStore, True)

    @staticmethod
    def session_store() -> QueryableStoreType:
        return QueryableStoreType("session", SessionStore, False)


class StoreQueryParameters:
    """Kafka's StoreQueryParameters: from_name_and_type(name, type), with_partition(p), enable_stale_stores()."""

    def __init__(self, store_name, queryable_store_type, partition=None, stale_stores=False):
        self.store_name = store_name
        self.queryable_store_type = queryable_store_type
        self.partition = partition
        self.stale_stores = stale_stores

    @classmethod
    def from_name_and_type(cls, store_name, queryable_store_type) -> "StoreQueryParameters":
        return cls(store_name, queryable_store_type)

    def with_partition(self, partition) -> "StoreQueryParameters":
        return StoreQueryParameters(self.store_name, self.queryable_store_type, partition, self.stale_stores)

    def enable_stale_stores(self) -> "StoreQueryParameters":
        return StoreQueryParameters(self.store_name, self.queryable_store_type, self.partition, True)

    def __repr__(self):
        return (f"StoreQueryParameters(store_name={self.store_name}, type={self.queryable_store_type!r}, "
                f"partition={self.partition}, stale_stores={self.stale_stores})")


class _Composite:
    """Read-only view over the same-named store of several tasks."""

    def __init__(self, stores, store_name, strip_timestamps):
        self._stores = list(stores)
        self._name = store_name
        self._strip = strip_timestamps

    def name(self):
        return self._name

    def _live(self):
        for s in self._stores:
            if not s.is_open():
                raise InvalidStateStoreException(
                    f"The state store, {self._name}, may have migrated to another instance.")
        return self._stores

    def _v(self, store, value):
        if self._strip and value is not None and _unwrap_timestamped(store):
            return value.value
        return value

    def _chain(self, fn):
        def gen():
            for s in self._live():
                for kv in fn(s):
                    yield type(kv)(kv.key, self._v(s, kv.value))
        return KeyValueIterator(gen())

    def __getattr__(self, name):
        if name.startswith(("put", "delete", "remove")):
            raise InvalidStateStoreException(f"store {self._name} is read-only through interactive queries")
        raise AttributeError(name)


class CompositeReadOnlyKeyValueStore(_Composite):
    def get(self, key):
        for s in self._live():
            v = s.get(key)
            if v is not None:
                return self._v(s, v)
        return None

    def range(self, from_key, to_key):
        return self._chain(lambda s: s.range(from_key, to_key))

    def reverse_range(self, from_key, to_key):
        return self._chain(lambda s: s.reverse_range(from_key, to_key))

    def all(self):
        return self._chain(lambda s: s.all())

    def reverse_all(self):
        return self._chain(lambda s: s.reverse_all())

    def prefix_scan(self, prefix, prefix_serializer=None):
        return self._chain(lambda s: s.prefix_scan(prefix, prefix_serializer))

    def approximate_num_entries(self):
        total = sum(s.approximate_num_entries() for s in self._live())
        return min(total, (1 << 63) - 1)


class CompositeReadOnlyWindowStore(_Composite):
    def fetch(self, key, window_start_ms):
        for s in self._live():
            v = s.fetch(key, window_start_ms)
            if v is not None:
                return self._v(s, v)
        return None

    def fetch_range(self, key, time_from, time_to):
        # A key lives in one task: the first store with windows for it answers (Kafka's composite does the same).
        for s in self._live():
            items = list(s.fetch_range(key, time_from, time_to))
            if items:
                return KeyValueIterator([type(kv)(kv.key, self._v(s, kv.value)) for kv in items])
        return KeyValueIterator([])

    def backward_fetch(self, key, time_from, time_to):
        return KeyValueIterator(reversed(list(self.fetch_range(key, time_from, time_to))))

    def fetch_keys(self, key_from, key_to, time_from, time_to):
        return self._chain(lambda s: s.fetch_keys(key_from, key_to, time_from, time_to))

    def backward_fetch_keys(self, key_from, key_to, time_from, time_to):
        return self._chain(lambda s: s.backward_fetch_keys(key_from, key_to, time_from, time_to))

    def fetch_all(self, time_from, time_to):
        return self._chain(lambda s: s.fetch_all(time_from, time_to))

    def backward_fetch_all(self, time_from, time_to):
        return self._chain(lambda s: s.backward_fetch_all(time_from, time_to))

    def all(self):
        return self._chain(lambda s: s.all())

    def backward_all(self):
        return self._chain(lambda s: s.backward_all())


class CompositeReadOnlySessionStore(_Composite):
    def fetch(self, key):
        for s in self._live():
            items = list(s.fetch(key))
            if items:
                return KeyValueIterator([type(kv)(kv.key, self._v(s, kv.value)) for kv in items])
        return KeyValueIterator([])

    def backward_fetch(self, key):
        return KeyValueIterator(reversed(list(self.fetch(key))))

    def fetch_range(self, key_from, key_to):
        return self._chain(lambda s: s.fetch_range(key_from, key_to))

    def find_sessions(self, key, earliest_session_end, latest_session_start):
        for s in self._live():
            items = list(s.find_sessions(key, earliest_session_end, latest_session_start))
            if items:
                return KeyValueIterator([type(kv)(kv.key, self._v(s, kv.value)) for kv in items])
        return KeyValueIterator([])

    def fetch_session(self, key, session_start, session_end):
        for s in self._live():
            v = s.fetch_session(key, session_start, session_end)
            if v is not None:
                return self._v(s, v)
        return None


def build_composite(params: StoreQueryParameters, stores: list):
    """A read-only view over ``stores`` (typed stores, ordered by task) of ``params.queryable_store_type``; raises
    InvalidStateStoreException when a store does not match the type."""
    qtype = params.queryable_store_type
    for s in stores:
        if not qtype.accepts(s):
            raise InvalidStateStoreException(
                f"Cannot get state store {params.store_name} because the queryable store type [{qtype!r}] does not "
                f"accept the actual store type [{type(s).__name__}].")
    return qtype.create(stores, params.store_name)
