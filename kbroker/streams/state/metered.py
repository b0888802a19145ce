"""The typed outermost layer (Kafka's MeteredKeyValueStore / MeteredWindowStore / MeteredSessionStore).

Serializes keys and values with the store's serdes (serde topic = "<application.id>-<store>-changelog", as Kafka
passes the changelog topic to serdes of stores), deserializes what the bytes stack returns, counts operations in
``self.metrics`` (put, put-if-absent, put-all, get, delete, range, prefix-scan, fetch, remove, flush, restore is
counted by the state manager) and translates the cache flush listener to typed arguments.

Serdes None resolve at init to the context's default.key.serde / default.value.serde; with none configured the
store raises StreamsException naming the store. Timestamped stores take and return ValueAndTimestamp (bytes:
8-byte timestamp + value bytes). A None key raises ValueError ("key cannot be null", Kafka's NPE).
"""

import struct
from collections import Counter

from kbroker.streams.errors import StreamsException
from kbroker.streams.keyvalue import KeyValue, Window, Windowed
from kbroker.streams.serdes import as_serializer
from kbroker.streams.state.base import KeyValueIterator, StateStore, ValueAndTimestamp
from kbroker.streams.state.keyvalue_store import KeyValueStore
from kbroker.streams.state.session_store import SessionStore
from kbroker.streams.state.window_store import WindowStore

_TS = struct.Struct(">q")


class ValueAndTimestampSerde:
    """Kafka's ValueAndTimestampSerde: 8-byte big-endian timestamp + the inner serde's bytes; None <-> None."""

    def __init__(self, inner):
        self.inner = inner

    def serialize(self, topic, data):
        if data is None:
            return None
        if not isinstance(data, ValueAndTimestamp):
            raise TypeError(f"a timestamped store takes ValueAndTimestamp values, got {type(data).__name__}")
        raw = self.inner.serialize(topic, data.value)
        if raw is None:
            return None
        return _TS.pack(data.timestamp) + raw

    def deserialize(self, topic, data):
        if data is None:
            return None
        return ValueAndTimestamp(self.inner.deserialize(topic, data[8:]), _TS.unpack_from(data)[0])


class _MeteredBase(StateStore):
    def __init__(self, inner, key_serde, value_serde, timestamped=False):
        self.inner = inner
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.timestamped = timestamped
        self.topic = None
        self.context = None
        self.metrics = Counter()
        self._vserde = None

    def name(self):
        return self.inner.name()

    def wrapped(self):
        return self.inner

    def persistent(self):
        return self.inner.persistent()

    def is_open(self):
        return self.inner.is_open()

    def init(self, context, root):
        self.context = context
        if context is not None:
            self.topic = f"{context.application_id()}-{self.name()}-changelog"
            if self.key_serde is None:
                self.key_serde = context.default_key_serde()
            if self.value_serde is None:
                self.value_serde = context.default_value_serde()
        if self.key_serde is None or self.value_serde is None:
            raise StreamsException(f"store {self.name()}: no {'key' if self.key_serde is None else 'value'} serde "
                                   "given and no default.key.serde/default.value.serde configured")
        self._vserde = ValueAndTimestampSerde(self.value_serde) if self.timestamped else self.value_serde
        self.inner.init(context, root)

    def flush(self):
        self.metrics["flush"] += 1
        self.inner.flush()

    def close(self):
        self.inner.close()

    def _k(self, key):
        if key is None:
            raise ValueError("key cannot be null")
        return self.key_serde.serialize(self.topic, key)

    def _kb(self, key):
        """A range bound: None stays None (unbounded)."""
        return None if key is None else self.key_serde.serialize(self.topic, key)

    def _v(self, value):
        return self._vserde.serialize(self.topic, value)

    def _dk(self, data):
        return self.key_serde.deserialize(self.topic, data)

    def _dv(self, data):
        return None if data is None else self._vserde.deserialize(self.topic, data)

    def _dwindowed(self, kv):
        return KeyValue(Windowed(self._dk(kv.key.key), kv.key.window), self._dv(kv.value))

    def set_flush_listener(self, listener, send_old_values):
        if listener is None:
            return self.inner.set_flush_listener(None, send_old_values)

        def typed(key, new, old, timestamp):
            if isinstance(key, Windowed):
                key = Windowed(self._dk(key.key), key.window)
            else:
                key = self._dk(key)
            listener(key, self._dv(new), self._dv(old), timestamp)
        return self.inner.set_flush_listener(typed, send_old_values)


class MeteredKeyValueStore(_MeteredBase, KeyValueStore):
    def get(self, key):
        self.metrics["get"] += 1
        return self._dv(self.inner.get(self._k(key)))

    def put(self, key, value):
        self.metrics["put"] += 1
        self.inner.put(self._k(key), self._v(value))

    def put_if_absent(self, key, value):
        self.metrics["put-if-absent"] += 1
        return self._dv(self.inner.put_if_absent(self._k(key), self._v(value)))

    def put_all(self, entries):
        self.metrics["put-all"] += 1
        self.inner.put_all([(self._k(k), self._v(v)) for k, v in entries])

    def delete(self, key):
        self.metrics["delete"] += 1
        return self._dv(self.inner.delete(self._k(key)))

    def _typed(self, it):
        return KeyValueIterator(KeyValue(self._dk(kv.key), self._dv(kv.value)) for kv in it)

    def range(self, from_key, to_key):
        self.metrics["range"] += 1
        return self._typed(self.inner.range(self._kb(from_key), self._kb(to_key)))

    def reverse_range(self, from_key, to_key):
        self.metrics["range"] += 1
        return self._typed(self.inner.reverse_range(self._kb(from_key), self._kb(to_key)))

    def all(self):
        self.metrics["range"] += 1
        return self._typed(self.inner.all())

    def reverse_all(self):
        self.metrics["range"] += 1
        return self._typed(self.inner.reverse_all())

    def prefix_scan(self, prefix, prefix_serializer=None):
        self.metrics["prefix-scan"] += 1
        ser = as_serializer(prefix_serializer) if prefix_serializer is not None else self.key_serde.serialize
        return self._typed(self.inner.prefix_scan(ser(self.topic, prefix)))

    def approximate_num_entries(self):
        return self.inner.approximate_num_entries()


class MeteredWindowStore(_MeteredBase, WindowStore):
    def window_size(self):
        return self.inner.window_size()

    def retention_period(self):
        return self.inner.retention_period()

    def put(self, key, value, window_start_ms):
        self.metrics["put"] += 1
        self.inner.put(self._k(key), self._v(value), window_start_ms)

    def fetch(self, key, window_start_ms):
        self.metrics["fetch"] += 1
        return self._dv(self.inner.fetch(self._k(key), window_start_ms))

    def fetch_range(self, key, time_from, time_to):
        self.metrics["fetch"] += 1
        return KeyValueIterator(KeyValue(kv.key, self._dv(kv.value))
                                for kv in self.inner.fetch_range(self._k(key), time_from, time_to))

    def backward_fetch(self, key, time_from, time_to):
        self.metrics["fetch"] += 1
        return KeyValueIterator(KeyValue(kv.key, self._dv(kv.value))
                                for kv in self.inner.backward_fetch(self._k(key), time_from, time_to))

    def fetch_keys(self, key_from, key_to, time_from, time_to):
        self.metrics["fetch"] += 1
        return KeyValueIterator(self._dwindowed(kv) for kv in
                                self.inner.fetch_keys(self._kb(key_from), self._kb(key_to), time_from, time_to))

    def backward_fetch_keys(self, key_from, key_to, time_from, time_to):
        self.metrics["fetch"] += 1
        return KeyValueIterator(self._dwindowed(kv) for kv in
                                self.inner.backward_fetch_keys(self._kb(key_from), self._kb(key_to), time_from,
                                                               time_to))

    def fetch_all(self, time_from, time_to):
        self.metrics["fetch"] += 1
        return KeyValueIterator(self._dwindowed(kv) for kv in self.inner.fetch_all(time_from, time_to))

    def backward_fetch_all(self, time_from, time_to):
        self.metrics["fetch"] += 1
        return KeyValueIterator(self._dwindowed(kv) for kv in self.inner.backward_fetch_all(time_from, time_to))

    def all(self):
        return KeyValueIterator(self._dwindowed(kv) for kv in self.inner.all())

    def backward_all(self):
        return KeyValueIterator(self._dwindowed(kv) for kv in self.inner.backward_all())


class MeteredSessionStore(_MeteredBase, SessionStore):
    def retention_period(self):
        return self.inner.retention_period()

    def _wk(self, windowed_key):
        if windowed_key is None or windowed_key.key is None:
            raise ValueError("key cannot be null")
        return Windowed(self._k(windowed_key.key), Window(*windowed_key.window))

    def put(self, windowed_key, value):
        self.metrics["put"] += 1
        self.inner.put(self._wk(windowed_key), self._v(value))

    def remove(self, windowed_key):
        self.metrics["remove"] += 1
        self.inner.remove(self._wk(windowed_key))

    def _typed(self, it):
        return KeyValueIterator(self._dwindowed(kv) for kv in it)

    def find_sessions(self, key, earliest_session_end, latest_session_start):
        self.metrics["fetch"] += 1
        return self._typed(self.inner.find_sessions(self._k(key), earliest_session_end, latest_session_start))

    def backward_find_sessions(self, key, earliest_session_end, latest_session_start):
        self.metrics["fetch"] += 1
        return self._typed(self.inner.backward_find_sessions(self._k(key), earliest_session_end,
                                                             latest_session_start))

    def find_sessions_range(self, key_from, key_to, earliest_session_end, latest_session_start):
        self.metrics["fetch"] += 1
        return self._typed(self.inner.find_sessions_range(self._kb(key_from), self._kb(key_to),
                                                          earliest_session_end, latest_session_start))

    def fetch_session(self, key, session_start, session_end):
        self.metrics["fetch"] += 1
        return self._dv(self.inner.fetch_session(self._k(key), session_start, session_end))

    def fetch(self, key):
        self.metrics["fetch"] += 1
        return self._typed(self.inner.fetch(self._k(key)))

    def backward_fetch(self, key):
        self.metrics["fetch"] += 1
        return self._typed(self.inner.backward_fetch(self._k(key)))

    def fetch_range(self, key_from, key_to):
        self.metrics["fetch"] += 1
        return self._typed(self.inner.fetch_range(self._kb(key_from), self._kb(key_to)))
