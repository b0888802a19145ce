"""Change-logging layers (Kafka's ChangeLoggingKeyValueBytesStore, ChangeLoggingWindowBytesStore,
ChangeLoggingSessionBytesStore and their Timestamped variants).

Every write reaching the store below is also sent to the task's RecordCollector as a changelog record::

    collector.send(changelog topic, key, value, timestamp, headers=[], partition=task partition)

- key-value: key = the store key bytes, value = the value bytes (None: a tombstone for a delete);
- window: key = Kafka's window changelog key, store key + 8-byte window start + 4-byte seqnum (window_store.py);
- session: key = Kafka's session key, store key + 8-byte end + 8-byte start (session_store.py);
- timestamp = the record being processed's (the cache's entry timestamp when a cache flush writes), except
  timestamped stores: their value bytes (8-byte timestamp + value) are logged as the plain value with the embedded
  timestamp as the record timestamp, and restore rebuilds them (Kafka's format, so a Java application's changelog
  and ours read the same).
The topic is "<application.id>-<store>-changelog"; nothing is sent when the context has no collector or the store
is not logged (then this layer is not built at all).
"""

import struct

from kbroker.streams.state import session_store as sks
from kbroker.streams.state import window_store as wks
from kbroker.streams.state.base import StateStore
from kbroker.streams.state.keyvalue_store import KeyValueStore
from kbroker.streams.state.session_store import SessionStore
from kbroker.streams.state.window_store import WindowStore

_TS = struct.Struct(">q")


def split_timestamped(value: bytes | None, default_ts: int):
    """(plain value, timestamp) of a timestamped value's bytes (8-byte ts + value)."""
    if value is None:
        return None, default_ts
    return value[8:], _TS.unpack_from(value)[0]


def join_timestamped(value: bytes | None, timestamp: int):
    """The timestamped bytes for a changelog (plain value, record timestamp); None stays None."""
    if value is None:
        return None
    return _TS.pack(timestamp) + bytes(value)


class _LoggingBase(StateStore):
    def __init__(self, inner, timestamped=False):
        self.inner = inner
        self.timestamped = timestamped
        self.context = None
        self.topic = None
        self.partition = None
        self.records_logged = 0

    def name(self):
        return self.inner.name()

    def wrapped(self):
        return self.inner

    def persistent(self):
        return self.inner.persistent()

    def is_open(self):
        return self.inner.is_open()

    def flush(self):
        self.inner.flush()

    def close(self):
        self.inner.close()

    @property
    def observed_stream_time(self):
        return getattr(self.inner, "observed_stream_time", None)

    def init(self, context, root):
        self.context = context
        self.inner.init(context, root)
        if context is not None:
            self.topic = context.changelog_topic(self.name())
            self.partition = context.changelog_partition()

    def _log(self, key, value):
        ctx = self.context
        if ctx is None or self.topic is None:
            return
        collector = ctx.record_collector()
        if collector is None:
            return
        ts = ctx.timestamp()
        if self.timestamped:
            value, ts = split_timestamped(value, ts)
        collector.send(self.topic, key, value, ts, [], self.partition)
        self.records_logged += 1


class ChangeLoggingKeyValueStore(_LoggingBase, KeyValueStore):
    def init(self, context, root):
        super().init(context, root)
        if hasattr(self.inner, "eviction_listener"):
            # an LRU map's evictions are deletes the changelog must carry (Kafka logs them as tombstones)
            self.inner.eviction_listener = lambda key: self._log(bytes(key), None)

    def get(self, key):
        return self.inner.get(key)

    def put(self, key, value):
        self.inner.put(key, value)
        self._log(bytes(key), value)

    def put_if_absent(self, key, value):
        old = self.inner.put_if_absent(key, value)
        if old is None:
            self._log(bytes(key), value)
        return old

    def put_all(self, entries):
        entries = list(entries)
        self.inner.put_all(entries)
        for k, v in entries:
            self._log(bytes(k), v)

    def delete(self, key):
        old = self.inner.delete(key)
        self._log(bytes(key), None)
        return old

    def range(self, from_key, to_key):
        return self.inner.range(from_key, to_key)

    def reverse_range(self, from_key, to_key):
        return self.inner.reverse_range(from_key, to_key)

    def all(self):
        return self.inner.all()

    def reverse_all(self):
        return self.inner.reverse_all()

    def prefix_scan(self, prefix, prefix_serializer=None):
        return self.inner.prefix_scan(prefix, prefix_serializer)

    def approximate_num_entries(self):
        return self.inner.approximate_num_entries()


class ChangeLoggingWindowStore(_LoggingBase, WindowStore):
    def window_size(self):
        return self.inner.window_size()

    def retention_period(self):
        return self.inner.retention_period()

    def put(self, key, value, window_start_ms):
        self.inner.put(key, value, window_start_ms)
        seq = 0
        if getattr(self.inner, "retain_duplicates", False):
            if value is None:
                return   # ignored by a duplicates store
            # the seqnum the store below just used (it also advances past restored ones, so both agree)
            seq = self.inner.last_seqnum()
        self._log(wks.to_store_key_binary(bytes(key), window_start_ms, seq), value)

    def fetch(self, key, window_start_ms):
        return self.inner.fetch(key, window_start_ms)

    def fetch_range(self, key, time_from, time_to):
        return self.inner.fetch_range(key, time_from, time_to)

    def backward_fetch(self, key, time_from, time_to):
        return self.inner.backward_fetch(key, time_from, time_to)

    def fetch_keys(self, key_from, key_to, time_from, time_to):
        return self.inner.fetch_keys(key_from, key_to, time_from, time_to)

    def backward_fetch_keys(self, key_from, key_to, time_from, time_to):
        return self.inner.backward_fetch_keys(key_from, key_to, time_from, time_to)

    def fetch_all(self, time_from, time_to):
        return self.inner.fetch_all(time_from, time_to)

    def backward_fetch_all(self, time_from, time_to):
        return self.inner.backward_fetch_all(time_from, time_to)

    def all(self):
        return self.inner.all()

    def backward_all(self):
        return self.inner.backward_all()


class ChangeLoggingSessionStore(_LoggingBase, SessionStore):
    def retention_period(self):
        return self.inner.retention_period()

    def put(self, windowed_key, value):
        self.inner.put(windowed_key, value)
        self._log(sks.to_binary(bytes(windowed_key.key), windowed_key.window.start, windowed_key.window.end), value)

    def remove(self, windowed_key):
        self.inner.remove(windowed_key)
        self._log(sks.to_binary(bytes(windowed_key.key), windowed_key.window.start, windowed_key.window.end), None)

    def find_sessions(self, key, earliest_session_end, latest_session_start):
        return self.inner.find_sessions(key, earliest_session_end, latest_session_start)

    def backward_find_sessions(self, key, earliest_session_end, latest_session_start):
        return self.inner.backward_find_sessions(key, earliest_session_end, latest_session_start)

    def find_sessions_range(self, key_from, key_to, earliest_session_end, latest_session_start):
        return self.inner.find_sessions_range(key_from, key_to, earliest_session_end, latest_session_start)

    def fetch_session(self, key, session_start, session_end):
        return self.inner.fetch_session(key, session_start, session_end)

    def fetch(self, key):
        return self.inner.fetch(key)

    def backward_fetch(self, key):
        return self.inner.backward_fetch(key)

    def fetch_range(self, key_from, key_to):
        return self.inner.fetch_range(key_from, key_to)
