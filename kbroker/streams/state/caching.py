"""The record cache (Kafka's ThreadCache / NamedCache) and the caching store layers.

One ThreadCache per stream thread, ``max_bytes`` = cache.max.bytes.buffering (statestore.cache.max.bytes, Kafka's
3.4+ name, wins when both are set; default 10485760) divided by the thread count (the runtime does the division).
It holds one NamedCache per (task, store) -- namespace "<task id>-<store>" -- each an LRU map of binary key ->
CacheEntry. An entry's size is Kafka's estimate: key + value bytes + 21 bytes of record context (1 dirty flag, 8
offset, 8 timestamp, 4 partition) + the topic name's length (none here: 0).

Writes go to the cache as *dirty* entries (a second write of a key replaces the first: the dedup that turns many
updates of a key into one). Dirty entries leave the cache in two ways, both Kafka's:
- ``flush(namespace)`` (every commit, and the test driver after every record): all dirty entries, in the order
  of each key's last write (Kafka's NamedCache re-adds a rewritten key at the end of its dirty set);
- eviction: after a put, while the whole cache exceeds ``max_bytes``, the namespace being written evicts its least
  recently used entry (reads and writes both refresh recency); evicting a dirty entry flushes the namespace -- the
  evicted entry first, then every other dirty entry in dirty order. ``max_bytes`` 0 therefore flushes on every put
  (what cache.max.bytes.buffering=0 means: every update goes downstream).
A flushed entry is written to the store below (change-logging, then the bytes store) and handed to the store's
flush listener as (key, new, old, timestamp): the DSL's KTable forwarding. Old values are read from the store below
before the write (only when the listener wants them, or the new value is a delete -- Kafka skips a delete of a key
that exists nowhere). Reads see the cache first, then the store below (merged scans, the cache's entries win; a
cached delete hides the stored value).
"""

import bisect
import itertools
import logging
import threading
from collections import OrderedDict

from kbroker.streams.keyvalue import KeyValue, Window, Windowed
from kbroker.streams.state import session_store as sks
from kbroker.streams.state import window_store as wks
from kbroker.streams.state.base import KeyValueIterator, StateStore
from kbroker.streams.state.keyvalue_store import KeyValueStore
from kbroker.streams.state.session_store import SessionStore
from kbroker.streams.state.window_store import WindowStore

log = logging.getLogger(__name__)

DEFAULT_CACHE_MAX_BYTES = 10485760
LONG_MAX = (1 << 63) - 1
ENTRY_OVERHEAD = 21


def cache_size_from_config(config: dict | None) -> int:
    """Kafka's rule: statestore.cache.max.bytes if set, else cache.max.bytes.buffering if set, else 10485760."""
    config = config or {}
    for key in ("statestore.cache.max.bytes", "cache.max.bytes.buffering"):
        if config.get(key) is not None:
            value = int(config[key])
            if value < 0:
                raise ValueError(f"Invalid value {value} for configuration {key}: Value must be at least 0")
            return value
    return DEFAULT_CACHE_MAX_BYTES


class CacheEntry:
    __slots__ = ("value", "dirty", "timestamp", "size")

    def __init__(self, key, value, dirty, timestamp):
        self.value = value
        self.dirty = dirty
        self.timestamp = timestamp
        self.size = len(key) + (0 if value is None else len(value)) + ENTRY_OVERHEAD


class NamedCache:
    def __init__(self, name, owner=None):
        self.name = name
        self.owner = owner             # the ThreadCache: keeps the running total of every namespace's bytes
        self.entries = OrderedDict()   # LRU order: first = least recently used
        self.dirty = {}                # key -> None, insertion order = order of the keys' last writes
        self.sorted_keys = []          # the keys in byte order, for range reads (bisect)
        self.size_bytes = 0
        self.listener = None           # fn(list of (key, CacheEntry)) writing dirty entries downstream
        self.num_flushes = 0
        self.num_evicts = 0

    def get(self, key):
        e = self.entries.get(key)
        if e is not None:
            self.entries.move_to_end(key)
        return e

    def put(self, key, entry):
        old = self.entries.pop(key, None)
        if old is not None:
            self._grow(-old.size)
        else:
            bisect.insort(self.sorted_keys, key)
        self.entries[key] = entry
        self._grow(entry.size)
        if entry.dirty:
            # Kafka's NamedCache removes and re-adds the key: dirty order is the order of each key's LAST write
            self.dirty.pop(key, None)
            self.dirty[key] = None

    def delete(self, key):
        e = self.entries.pop(key, None)
        if e is not None:
            self._grow(-e.size)
            self.dirty.pop(key, None)
            self._unindex(key)
        return e

    def _grow(self, n):
        self.size_bytes += n
        if self.owner is not None:
            self.owner.total_bytes += n

    def _unindex(self, key):
        del self.sorted_keys[bisect.bisect_left(self.sorted_keys, key)]

    def flush(self, evicted=None):
        """Hand every dirty entry (``evicted`` first) to the listener and mark them clean; deletes leave the cache."""
        self.num_flushes += 1
        batch = []
        if evicted is not None:
            batch.append(evicted)
            self.dirty.pop(evicted[0], None)
        for key in self.dirty:
            e = self.entries[key]
            e.dirty = False
            batch.append((key, e))
        self.dirty = {}
        if batch and self.listener is None:
            raise RuntimeError(f"cache {self.name} has dirty entries but no listener")
        if batch:
            self.listener(batch)
        for key, e in batch:
            if e.value is None and key in self.entries and not self.entries[key].dirty:
                self.delete(key)

    def evict(self):
        if not self.entries:
            return
        key, e = self.entries.popitem(last=False)
        self._unindex(key)
        self._grow(-e.size)
        self.num_evicts += 1
        if e.dirty:
            self.flush((key, e))

    def keys_in_range(self, from_key, to_key):
        """Keys with from_key <= k <= to_key (None: unbounded), ascending."""
        keys = self.sorted_keys
        lo = 0 if from_key is None else bisect.bisect_left(keys, from_key)
        hi = len(keys) if to_key is None else bisect.bisect_right(keys, to_key)
        return keys[lo:hi]

    def keys_from(self, from_key, upper_prefix):
        """Keys >= from_key until the first whose first len(upper_prefix) bytes sort above upper_prefix (the scan
        rule of rocksdb.py for binary window/session keys)."""
        keys = self.sorted_keys
        lo = 0 if from_key is None else bisect.bisect_left(keys, from_key)
        out = []
        n = None if upper_prefix is None else len(upper_prefix)
        for k in keys[lo:]:
            if n is not None and k[:n] > upper_prefix:
                break
            out.append(k)
        return out


class ThreadCache:
    """The cache shared by a stream thread's tasks (see the module docstring)."""

    def __init__(self, max_bytes=DEFAULT_CACHE_MAX_BYTES):
        self.max_bytes = int(max_bytes)
        self.caches = {}
        self.total_bytes = 0

    def size_bytes(self):
        return self.total_bytes

    def named(self, namespace) -> NamedCache:
        c = self.caches.get(namespace)
        if c is None:
            c = self.caches[namespace] = NamedCache(namespace, self)
        return c

    def add_dirty_entry_flush_listener(self, namespace, listener):
        self.named(namespace).listener = listener

    def get(self, namespace, key):
        c = self.caches.get(namespace)
        return None if c is None else c.get(key)

    def put(self, namespace, key, entry):
        c = self.named(namespace)
        c.put(key, entry)
        self._maybe_evict(c)

    def _maybe_evict(self, c):
        # Kafka evicts only from the namespace being written, while the whole cache is over its bound.
        while self.total_bytes > self.max_bytes and c.entries:
            c.evict()

    def delete(self, namespace, key):
        c = self.caches.get(namespace)
        return None if c is None else c.delete(key)

    def flush(self, namespace):
        c = self.caches.get(namespace)
        if c is not None:
            c.flush()

    def close(self, namespace):
        """Drop a namespace without flushing (a closed or dirty-closed task)."""
        c = self.caches.pop(namespace, None)
        if c is not None:
            self.total_bytes -= c.size_bytes

    def resize(self, max_bytes):
        self.max_bytes = int(max_bytes)
        for c in list(self.caches.values()):
            self._maybe_evict(c)


class _CachingBase(StateStore):
    def __init__(self, inner):
        self.inner = inner
        self.context = None
        self.cache = None
        self.namespace = None
        self.listener = None
        self.send_old_values = False
        self._writer = None   # the thread that writes (the stream thread): only it may reorder or fill the cache

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
        self.inner.init(context, root)
        self.cache = context.thread_cache() if context is not None else None
        self.namespace = f"{context.task_id() if context is not None else '-'}-{self.name()}"
        if self.cache is not None:
            self.cache.add_dirty_entry_flush_listener(self.namespace, self._flush_entries)

    def set_flush_listener(self, listener, send_old_values):
        self.listener = listener
        self.send_old_values = bool(send_old_values)
        return True

    def _ts(self):
        return self.context.timestamp() if self.context is not None else 0

    def _on_writer_thread(self):
        return self._writer is None or threading.get_ident() == self._writer

    def _cache_put(self, binary_key, value):
        self._writer = threading.get_ident()
        if self.cache is None:
            self._flush_entries([(binary_key, CacheEntry(binary_key, value, True, self._ts()))])
            return
        self.cache.put(self.namespace, binary_key, CacheEntry(binary_key, value, True, self._ts()))

    def _cache_get(self, binary_key):
        if self.cache is None:
            return None
        if not self._on_writer_thread():
            # an interactive query: peek without touching the LRU order (the stream thread owns the cache)
            c = self.cache.caches.get(self.namespace)
            return None if c is None else c.entries.get(binary_key)
        return self.cache.get(self.namespace, binary_key)

    def _flush_entries(self, batch):
        scope = getattr(self.context, "timestamp_scope", None)
        for key, entry in batch:
            if scope is not None:
                with scope(entry.timestamp):
                    self._write_through(key, entry)
            else:
                self._write_through(key, entry)

    def _write_through(self, binary_key, entry):
        raise NotImplementedError

    def _merged(self, cached_keys, stored, reverse):
        """Merge the cache's keys (binary, sorted) over ``stored`` [(binary key, item)], cache winning; returns items
        in binary-key order (reversed if asked). ``self._item(binary, value)`` builds an item from a cache entry."""
        merged = dict(stored)
        entries = self.cache.named(self.namespace).entries
        for k in cached_keys:
            e = entries.get(k)   # a scan does not refresh LRU (Kafka's neither); None: evicted meanwhile
            if e is None:
                continue
            if e.value is None:
                merged.pop(k, None)
            else:
                merged[k] = self._item(k, e.value)
        return [merged[k] for k in sorted(merged, reverse=reverse)]

    def flush(self):
        if self.cache is not None:
            self.cache.flush(self.namespace)
        self.inner.flush()

    def close(self):
        try:
            if self.cache is not None and self.inner.is_open():
                self.cache.flush(self.namespace)
        finally:
            if self.cache is not None:
                self.cache.close(self.namespace)
            self.inner.close()

    def drop_cache(self):
        """Forget the cached writes (dirty task close): nothing reaches the store or downstream."""
        if self.cache is not None:
            self.cache.close(self.namespace)


class CachingKeyValueStore(_CachingBase, KeyValueStore):
    def _write_through(self, key, entry):
        if self.listener is None:
            self.inner.put(key, entry.value)
            return
        new = entry.value
        old = self.inner.get(key) if (new is None or self.send_old_values) else None
        if new is None and old is None:
            return   # Kafka: a delete of a key present nowhere is neither written nor forwarded
        self.inner.put(key, new)
        self.listener(key, new, old if self.send_old_values else None, entry.timestamp)

    def get(self, key):
        key = bytes(key)
        e = self._cache_get(key)
        if e is not None:
            return e.value
        value = self.inner.get(key)
        if value is not None and self.cache is not None and self.cache.max_bytes > 0 and self._on_writer_thread():
            # Kafka caches a read miss as a clean entry (it refreshes LRU and saves the next lookup)
            self.cache.put(self.namespace, key, CacheEntry(key, value, False, self._ts()))
        return value

    def put(self, key, value):
        self._cache_put(bytes(key), None if value is None else bytes(value))

    def put_if_absent(self, key, value):
        old = self.get(key)
        if old is None:
            self.put(key, value)
        return old

    def put_all(self, entries):
        for k, v in entries:
            self.put(k, v)

    def delete(self, key):
        old = self.get(key)
        self.put(key, None)
        return old

    def _item(self, k, v):
        return KeyValue(k, v)

    def _range(self, from_key, to_key, reverse):
        if from_key is not None and to_key is not None and from_key > to_key:
            return KeyValueIterator([])
        stored = self.inner.reverse_range(from_key, to_key) if reverse else self.inner.range(from_key, to_key)
        if self.cache is None:
            return stored
        cached = self.cache.named(self.namespace).keys_in_range(from_key, to_key)
        if reverse:
            cached = cached[::-1]
        return KeyValueIterator(self._lazy_merge(stored, cached, reverse))

    def _lazy_merge(self, stored, cached_keys, reverse):
        """Merge the store's iterator with the cache's keys (a snapshot, same direction) without reading the whole
        range into memory (Kafka's MergedSortedCacheKeyValueBytesStoreIterator): the cache wins on equal keys and
        its deletes hide stored entries."""
        entries = self.cache.named(self.namespace).entries
        before = (lambda a, b: a > b) if reverse else (lambda a, b: a < b)
        i, n = 0, len(cached_keys)
        for kv in stored:
            while i < n and before(cached_keys[i], kv.key):
                e = entries.get(cached_keys[i])
                i += 1
                if e is not None and e.value is not None:
                    yield KeyValue(cached_keys[i - 1], e.value)
            if i < n and cached_keys[i] == kv.key:
                e = entries.get(cached_keys[i])
                i += 1
                if e is None:
                    yield kv           # evicted since the snapshot: flushed, so the store holds it
                elif e.value is not None:
                    yield KeyValue(kv.key, e.value)
                continue
            yield kv
        for k in cached_keys[i:]:
            e = entries.get(k)
            if e is not None and e.value is not None:
                yield KeyValue(k, e.value)

    def range(self, from_key, to_key):
        return self._range(from_key, to_key, False)

    def reverse_range(self, from_key, to_key):
        return self._range(from_key, to_key, True)

    def all(self):
        return self._range(None, None, False)

    def reverse_all(self):
        return self._range(None, None, True)

    def prefix_scan(self, prefix, prefix_serializer=None):
        prefix = bytes(prefix)
        # keys are sorted: the prefix's keys are one run starting at the prefix itself
        return KeyValueIterator(itertools.takewhile(lambda kv: kv.key.startswith(prefix),
                                                    self._range(prefix, None, False)))

    def approximate_num_entries(self):
        return self.inner.approximate_num_entries()


class CachingWindowStore(_CachingBase, WindowStore):
    """Cache keys are the binary window keys (key + start + seqnum 0): a cached window store never retains
    duplicates (StoreBuilder disables caching for those)."""

    def window_size(self):
        return self.inner.window_size()

    def retention_period(self):
        return self.inner.retention_period()

    def _write_through(self, binary, entry):
        key, start, _ = wks.from_store_key_binary(binary)
        if self.listener is None:
            self.inner.put(key, entry.value, start)
            return
        new = entry.value
        old = self.inner.fetch(key, start) if (new is None or self.send_old_values) else None
        if new is None and old is None:
            return
        self.inner.put(key, new, start)
        size = self.inner.window_size()
        self.listener(Windowed(key, Window(start, start + size)), new, old if self.send_old_values else None,
                      entry.timestamp)

    def _live(self, start):
        observed = getattr(self.inner, "observed_stream_time", None)
        return observed is None or start > observed - self.inner.retention_period()

    def put(self, key, value, window_start_ms):
        key = bytes(key)
        # Track stream time for expiry the way the store below would (a cached put is not yet in it).
        self._cache_put(wks.to_store_key_binary(key, window_start_ms), None if value is None else bytes(value))

    def fetch(self, key, window_start_ms):
        e = self._cache_get(wks.to_store_key_binary(bytes(key), window_start_ms))
        if e is not None:
            return e.value if self._live(window_start_ms) else None
        return self.inner.fetch(key, window_start_ms)

    def _item(self, binary, value):
        key, start, _ = wks.from_store_key_binary(binary)
        return KeyValue(Windowed(key, Window(start, start + self.inner.window_size())), value)

    def _cached_windows(self, key_from, key_to, time_from, time_to, single=None):
        if self.cache is None:
            return []
        named = self.cache.named(self.namespace)
        if single is None and key_from is not None and key_from == key_to:
            single = key_from
        if single is not None:
            candidates = named.keys_in_range(wks.to_store_key_binary(single, max(time_from, 0), 0),
                                             wks.to_store_key_binary(single, time_to, 0))
        else:
            candidates = named.keys_from(key_from, key_to)
        out = []
        for binary in candidates:
            key, start, _ = wks.from_store_key_binary(binary)
            if start < time_from or start > time_to or not self._live(start):
                continue
            if single is not None:
                if key != single:
                    continue
            elif (key_from is not None and key < key_from) or (key_to is not None and key > key_to):
                continue
            out.append(binary)
        return out

    def _merge_windowed(self, stored_items, cached, reverse):
        # stored_items: KeyValue(Windowed, v); merged order: (key, start) -- the cache's binary order.
        stored = [(wks.to_store_key_binary(kv.key.key, kv.key.window.start), kv) for kv in stored_items]
        return self._merged(cached, stored, reverse)

    def fetch_range(self, key, time_from, time_to):
        key = bytes(key)
        items = self._merge_windowed([KeyValue(Windowed(key, Window(s, s)), v)
                                      for s, v in self.inner.fetch_range(key, time_from, time_to)],
                                     self._cached_windows(None, None, time_from, time_to, single=key), False)
        return KeyValueIterator([KeyValue(kv.key.window.start, kv.value) for kv in items])

    def backward_fetch(self, key, time_from, time_to):
        return KeyValueIterator(reversed(list(self.fetch_range(key, time_from, time_to))))

    def fetch_keys(self, key_from, key_to, time_from, time_to):
        return KeyValueIterator(self._merge_windowed(self.inner.fetch_keys(key_from, key_to, time_from, time_to),
                                                     self._cached_windows(key_from, key_to, time_from, time_to),
                                                     False))

    def backward_fetch_keys(self, key_from, key_to, time_from, time_to):
        return KeyValueIterator(reversed(list(self.fetch_keys(key_from, key_to, time_from, time_to))))

    def fetch_all(self, time_from, time_to):
        return self.fetch_keys(None, None, time_from, time_to)

    def backward_fetch_all(self, time_from, time_to):
        return self.backward_fetch_keys(None, None, time_from, time_to)

    def all(self):
        return self.fetch_all(-1 << 63, (1 << 63) - 1)

    def backward_all(self):
        return self.backward_fetch_all(-1 << 63, (1 << 63) - 1)


class CachingSessionStore(_CachingBase, SessionStore):
    """Cache keys are the binary session keys (key + end + start)."""

    def retention_period(self):
        return self.inner.retention_period()

    def _write_through(self, binary, entry):
        key, start, end = sks.from_binary(binary)
        windowed = Windowed(key, Window(start, end))
        if self.listener is None:
            self.inner.put(windowed, entry.value)
            return
        new = entry.value
        old = self.inner.fetch_session(key, start, end) if (new is None or self.send_old_values) else None
        if new is None and old is None:
            return
        self.inner.put(windowed, new)
        self.listener(windowed, new, old if self.send_old_values else None, entry.timestamp)

    def put(self, windowed_key, value):
        self._cache_put(sks.to_binary(bytes(windowed_key.key), windowed_key.window.start, windowed_key.window.end),
                        None if value is None else bytes(value))

    def remove(self, windowed_key):
        self.put(windowed_key, None)

    def fetch_session(self, key, session_start, session_end):
        e = self._cache_get(sks.to_binary(bytes(key), session_start, session_end))
        if e is not None:
            return e.value
        return self.inner.fetch_session(key, session_start, session_end)

    def _item(self, binary, value):
        key, start, end = sks.from_binary(binary)
        return KeyValue(Windowed(key, Window(start, end)), value)

    def _find(self, key_from, key_to, earliest_end, latest_start, reverse, single=None):
        if single is not None:
            stored_items = self.inner.find_sessions(single, earliest_end, latest_start)
        else:
            stored_items = self.inner.find_sessions_range(key_from, key_to, earliest_end, latest_start)
        stored = [(sks.to_binary(kv.key.key, kv.key.window.start, kv.key.window.end), kv) for kv in stored_items]
        cached = []
        if self.cache is not None:
            observed = getattr(self.inner, "observed_stream_time", None)
            named = self.cache.named(self.namespace)
            if single is None and key_from is not None and key_from == key_to:
                single = key_from
            if single is not None:
                candidates = named.keys_in_range(sks.to_binary(single, 0, max(earliest_end, 0)),
                                                 sks.to_binary(single, LONG_MAX, LONG_MAX))
            else:
                candidates = named.keys_from(key_from, key_to)
            for binary in candidates:
                key, start, end = sks.from_binary(binary)
                if end < earliest_end or start > latest_start:
                    continue
                if observed is not None and end <= observed - self.inner.retention_period():
                    continue
                if single is not None:
                    if key != single:
                        continue
                elif (key_from is not None and key < key_from) or (key_to is not None and key > key_to):
                    continue
                cached.append(binary)
        return KeyValueIterator(self._merged(cached, stored, reverse))

    def find_sessions(self, key, earliest_session_end, latest_session_start):
        return self._find(None, None, earliest_session_end, latest_session_start, False, single=bytes(key))

    def backward_find_sessions(self, key, earliest_session_end, latest_session_start):
        return self._find(None, None, earliest_session_end, latest_session_start, True, single=bytes(key))

    def find_sessions_range(self, key_from, key_to, earliest_session_end, latest_session_start):
        return self._find(key_from, key_to, earliest_session_end, latest_session_start, False)

    def fetch(self, key):
        return self.find_sessions(key, -1 << 63, (1 << 63) - 1)

    def backward_fetch(self, key):
        return self.backward_find_sessions(key, -1 << 63, (1 << 63) - 1)

    def fetch_range(self, key_from, key_to):
        return self.find_sessions_range(key_from, key_to, -1 << 63, (1 << 63) - 1)
