"""In-memory bytes stores (Kafka's InMemoryKeyValueStore, InMemoryWindowStore, InMemorySessionStore).

All three keep a dict for point lookups plus a sorted list (``bisect``) for ordered scans; a scan iterates over a
snapshot of the matching entries taken when it starts (Kafka's in-memory stores iterate over a copy of the key set
too), so writes during an iteration never disturb it. Keys and values are ``bytes``; a put of None deletes.
Nothing survives a restart (``persistent()`` is False): the state manager restores them from the changelog start.

Orders (Kafka's): key-value by key bytes; window stores by (window start, key, seqnum); session stores by
(session end, key, session start). Window and session stores also index each key's entries (sorted by time), so
the per-record lookups of windowed aggregations and joins (one key, a time range) cost O(log n + matches), not a
scan over every key's windows.
"""

import bisect
import logging

from kbroker.streams.keyvalue import KeyValue, Window, Windowed
from kbroker.streams.state import session_store as sks
from kbroker.streams.state import window_store as wks
from kbroker.streams.state.base import KeyValueIterator
from kbroker.streams.state.keyvalue_store import KeyValueStore
from kbroker.streams.state.session_store import SessionQueriesByScan, SessionStore
from kbroker.streams.state.window_store import WindowStore

log = logging.getLogger(__name__)

SEQNUM_MASK = 0x7FFFFFFF   # Kafka wraps the duplicate seqnum within a non-negative int


def _bytes_or_none(v):
    return None if v is None else bytes(v)


class _BytesStoreBase:
    """Open/close bookkeeping shared by the bytes stores."""

    def __init__(self, name):
        self._name = name
        self._open = False
        self.context = None
        self.expired_dropped = 0   # puts refused because their window/session had expired (Kafka's
                                   # "dropped-records" sensor of the store)

    def name(self):
        return self._name

    def persistent(self):
        return False

    def is_open(self):
        return self._open

    def flush(self):
        pass

    def close(self):
        self._open = False

    def _init(self, context, root):
        self.context = context
        if context is not None:
            context.register(root, self.restore_batch)
        self._open = True


class InMemoryKeyValueStore(_BytesStoreBase, KeyValueStore):
    def __init__(self, name):
        super().__init__(name)
        self._map = {}
        self._keys = []   # sorted

    def init(self, context, root):
        self._init(context, root)

    def restore_batch(self, records):
        for r in records:
            self.put(r.key, r.value)

    def get(self, key):
        return self._map.get(key)

    def put(self, key, value):
        key = bytes(key)
        if value is None:
            self.delete(key)
            return
        if key not in self._map:
            bisect.insort(self._keys, key)
        self._map[key] = bytes(value)

    def put_if_absent(self, key, value):
        old = self._map.get(key)
        if old is None:
            self.put(key, value)
        return old

    def put_all(self, entries):
        for k, v in entries:
            self.put(k, v)

    def delete(self, key):
        old = self._map.pop(key, None)
        if old is not None:
            i = bisect.bisect_left(self._keys, key)
            del self._keys[i]
        return old

    def _slice(self, from_key, to_key):
        lo = 0 if from_key is None else bisect.bisect_left(self._keys, from_key)
        hi = len(self._keys) if to_key is None else bisect.bisect_right(self._keys, to_key)
        if from_key is not None and to_key is not None and from_key > to_key:
            log.warning("range from key %r > to key %r in store %s: empty result (as Kafka)", from_key, to_key,
                        self._name)
            return []
        m = self._map
        # .get: an interactive query on another thread may race a delete (reads never raise for it)
        return [KeyValue(k, v) for k in self._keys[lo:hi] if (v := m.get(k)) is not None]

    def range(self, from_key, to_key):
        return KeyValueIterator(self._slice(from_key, to_key))

    def reverse_range(self, from_key, to_key):
        return KeyValueIterator(reversed(self._slice(from_key, to_key)))

    def all(self):
        return KeyValueIterator(self._slice(None, None))

    def reverse_all(self):
        return KeyValueIterator(reversed(self._slice(None, None)))

    def prefix_scan(self, prefix, prefix_serializer=None):
        prefix = bytes(prefix)
        lo = bisect.bisect_left(self._keys, prefix)
        out = []
        for k in self._keys[lo:]:
            if not k.startswith(prefix):
                break
            v = self._map.get(k)
            if v is not None:
                out.append(KeyValue(k, v))
        return KeyValueIterator(out)

    def approximate_num_entries(self):
        return len(self._map)

    def close(self):
        self._open = False
        self._map.clear()
        self._keys.clear()


class LRUKeyValueStore(InMemoryKeyValueStore):
    """Kafka's MemoryNavigableLRUCache (Stores.lru_map): at most ``max_entries`` keys; a put beyond that removes
    the least recently used key (gets and puts refresh recency) and reports it to ``eviction_listener(key)``, which
    the change-logging layer sets to log a tombstone -- so a restore rebuilds the same bounded map."""

    def __init__(self, name, max_entries):
        super().__init__(name)
        if max_entries < 0:
            raise ValueError("maxCacheSize cannot be negative")
        self.max_entries = max_entries
        self._lru = {}                 # key -> None in recency order (first = least recently used)
        self.eviction_listener = None

    def _touch(self, key):
        self._lru.pop(key, None)
        self._lru[key] = None

    def get(self, key):
        value = super().get(key)
        if value is not None:
            self._touch(bytes(key))
        return value

    def put(self, key, value):
        key = bytes(key)
        if value is None:
            self.delete(key)
            return
        super().put(key, value)
        self._touch(key)
        while len(self._lru) > self.max_entries:
            eldest = next(iter(self._lru))
            self.delete(eldest)
            if self.eviction_listener is not None:
                self.eviction_listener(eldest)

    def delete(self, key):
        self._lru.pop(bytes(key), None)
        return super().delete(key)

    def close(self):
        super().close()
        self._lru.clear()


class InMemoryWindowStore(_BytesStoreBase, WindowStore):
    """Entries keyed (window start, key, seqnum); retention as the module docstring of window_store.py says."""

    def __init__(self, name, retention_ms, window_size_ms, retain_duplicates=False):
        super().__init__(name)
        self._retention = retention_ms
        self._size = window_size_ms
        self.retain_duplicates = retain_duplicates
        self._seqnum = 0
        self._map = {}
        self._index = []     # sorted (start, key, seqnum): time-ordered scans and expiry
        self._by_key = {}    # key -> sorted [(start, seqnum)]: one key's windows without a scan of all keys
        self.observed_stream_time = -1 << 63

    def init(self, context, root):
        self._init(context, root)

    def window_size(self):
        return self._size

    def last_seqnum(self):
        """The seqnum of the last put of a duplicates store (the changelog key's)."""
        return self._seqnum

    def retention_period(self):
        return self._retention

    def _min_live(self):
        return self.observed_stream_time - self._retention + 1

    def restore_batch(self, records):
        for r in records:
            key, start, seq = wks.from_store_key_binary(r.key)
            if self.retain_duplicates and seq > self._seqnum:
                self._seqnum = seq   # new puts must not reuse a restored duplicate's seqnum
            self._put_raw(key, start, seq, r.value)

    def put(self, key, value, window_start_ms):
        if self.retain_duplicates:
            if value is None:
                return   # Kafka: a null put into a duplicates store is ignored
            self._seqnum = (self._seqnum + 1) & SEQNUM_MASK
            seq = self._seqnum
        else:
            seq = 0
        self._put_raw(bytes(key), window_start_ms, seq, value)

    def _put_raw(self, key, start, seq, value):
        if start > self.observed_stream_time:
            self.observed_stream_time = start
            self._expire()
        if start < self._min_live():
            self.expired_dropped += 1
            log.debug("store %s: skipping record for expired window start %d", self._name, start)
            return
        ident = (start, key, seq)
        if value is None:
            if self._map.pop(ident, None) is not None:
                del self._index[bisect.bisect_left(self._index, ident)]
                self._unindex_key(key, (start, seq))
            return
        if ident not in self._map:
            bisect.insort(self._index, ident)
            bisect.insort(self._by_key.setdefault(key, []), (start, seq))
        self._map[ident] = bytes(value)

    def _unindex_key(self, key, item):
        lst = self._by_key[key]
        del lst[bisect.bisect_left(lst, item)]
        if not lst:
            del self._by_key[key]

    def _expire(self):
        cut = bisect.bisect_left(self._index, (self._min_live(),))
        if cut:
            for ident in self._index[:cut]:
                del self._map[ident]
                self._unindex_key(ident[1], (ident[0], ident[2]))
            del self._index[:cut]

    def _scan(self, key_from, key_to, time_from, time_to, single=None):
        time_from = max(time_from, self._min_live())
        if time_from > time_to:
            return []
        if single is None and key_from is not None and key_from == key_to:
            single = key_from
        if single is not None:
            lst = self._by_key.get(single, ())
            lo = bisect.bisect_left(lst, (time_from,))
            hi = bisect.bisect_left(lst, (time_to + 1,))
            m = self._map
            return [((start, single, seq), v) for start, seq in lst[lo:hi]
                    if (v := m.get((start, single, seq))) is not None]
        lo = bisect.bisect_left(self._index, (time_from,))
        hi = bisect.bisect_left(self._index, (time_to + 1,))
        out = []
        for ident in self._index[lo:hi]:
            key = ident[1]
            if (key_from is not None and key < key_from) or (key_to is not None and key > key_to):
                continue
            v = self._map.get(ident)
            if v is not None:
                out.append((ident, v))
        return out

    def fetch(self, key, window_start_ms):
        if window_start_ms < self._min_live():
            return None
        if not self.retain_duplicates:
            return self._map.get((window_start_ms, bytes(key), 0))
        for _, v in self._scan(None, None, window_start_ms, window_start_ms, single=bytes(key)):
            return v
        return None

    def fetch_range(self, key, time_from, time_to):
        return KeyValueIterator([KeyValue(i[0], v) for i, v in self._scan(None, None, time_from, time_to,
                                                                            single=bytes(key))])

    def backward_fetch(self, key, time_from, time_to):
        return KeyValueIterator(reversed([KeyValue(i[0], v) for i, v in
                                          self._scan(None, None, time_from, time_to, single=bytes(key))]))

    def _windowed(self, items):
        size = self._size
        return [KeyValue(Windowed(i[1], Window(i[0], i[0] + size)), v) for i, v in items]

    def fetch_keys(self, key_from, key_to, time_from, time_to):
        if key_from is not None and key_to is not None and key_from > key_to:
            return KeyValueIterator([])
        return KeyValueIterator(self._windowed(self._scan(key_from, key_to, time_from, time_to)))

    def backward_fetch_keys(self, key_from, key_to, time_from, time_to):
        return KeyValueIterator(reversed(list(self.fetch_keys(key_from, key_to, time_from, time_to))))

    def fetch_all(self, time_from, time_to):
        return KeyValueIterator(self._windowed(self._scan(None, None, time_from, time_to)))

    def backward_fetch_all(self, time_from, time_to):
        return KeyValueIterator(reversed(self._windowed(self._scan(None, None, time_from, time_to))))

    def all(self):
        return self.fetch_all(-1 << 63, (1 << 63) - 1)

    def backward_all(self):
        return self.backward_fetch_all(-1 << 63, (1 << 63) - 1)

    def close(self):
        self._open = False
        self._map.clear()
        self._index.clear()
        self._by_key.clear()


class InMemorySessionStore(_BytesStoreBase, SessionQueriesByScan, SessionStore):
    """Entries keyed (session end, key, session start); a session expires when end <= stream time - retention."""

    def __init__(self, name, retention_ms):
        super().__init__(name)
        self._retention = retention_ms
        self._map = {}
        self._index = []     # sorted (end, key, start): time-ordered scans and expiry
        self._by_key = {}    # key -> sorted [(end, start)]
        self.observed_stream_time = -1 << 63

    def init(self, context, root):
        self._init(context, root)

    def retention_period(self):
        return self._retention

    def _min_live(self):
        return self.observed_stream_time - self._retention + 1

    def restore_batch(self, records):
        for r in records:
            key, start, end = sks.from_binary(r.key)
            self._put_raw(key, start, end, r.value)

    def put(self, windowed_key, value):
        self._put_raw(bytes(windowed_key.key), windowed_key.window.start, windowed_key.window.end, value)

    def remove(self, windowed_key):
        self.put(windowed_key, None)

    def _put_raw(self, key, start, end, value):
        if end > self.observed_stream_time:
            self.observed_stream_time = end
            cut = bisect.bisect_left(self._index, (self._min_live(),))
            if cut:
                for ident in self._index[:cut]:
                    del self._map[ident]
                    self._unindex_key(ident[1], (ident[0], ident[2]))
                del self._index[:cut]
        if end < self._min_live():
            self.expired_dropped += 1
            return
        ident = (end, key, start)
        if value is None:
            if self._map.pop(ident, None) is not None:
                del self._index[bisect.bisect_left(self._index, ident)]
                self._unindex_key(key, (end, start))
            return
        if ident not in self._map:
            bisect.insort(self._index, ident)
            bisect.insort(self._by_key.setdefault(key, []), (end, start))
        self._map[ident] = bytes(value)

    def _unindex_key(self, key, item):
        lst = self._by_key[key]
        del lst[bisect.bisect_left(lst, item)]
        if not lst:
            del self._by_key[key]

    def _find(self, key_from, key_to, earliest_end, latest_start, single=None):
        earliest_end = max(earliest_end, self._min_live())
        if single is None and key_from is not None and key_from == key_to:
            single = key_from
        if single is not None:
            lst = self._by_key.get(single, ())
            m = self._map
            return [KeyValue(Windowed(single, Window(start, end)), v)
                    for end, start in lst[bisect.bisect_left(lst, (earliest_end,)):]
                    if start <= latest_start and (v := m.get((end, single, start))) is not None]
        lo = bisect.bisect_left(self._index, (earliest_end,))
        out = []
        for ident in self._index[lo:]:
            end, key, start = ident
            if start > latest_start:
                continue
            if (key_from is not None and key < key_from) or (key_to is not None and key > key_to):
                continue
            v = self._map.get(ident)
            if v is not None:
                out.append(KeyValue(Windowed(key, Window(start, end)), v))
        return out

    def fetch_session(self, key, session_start, session_end):
        if session_end < self._min_live():
            return None
        return self._map.get((session_end, bytes(key), session_start))

    def close(self):
        self._open = False
        self._map.clear()
        self._index.clear()
        self._by_key.clear()
