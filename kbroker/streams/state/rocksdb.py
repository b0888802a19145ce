"""RocksDB bytes stores through rocksdict (Kafka's RocksDBStore, RocksDBWindowStore, RocksDBSessionStore).

Layout under the task directory (Kafka's)::

    <task dir>/rocksdb/<store>/                      key-value store: one RocksDB
    <task dir>/<store>/<store>.<segment start ms>/   window/session store: one RocksDB per segment

rocksdict runs in raw mode (keys and values are stored as the bytes given, no type prefix), so RocksDB's default
bytewise comparator orders keys exactly as Kafka's stores do. Writes skip the WAL, as Kafka's do: ``flush()`` (at
every commit, and ``close()``) writes the memtables to SST files; what a crash loses since then the changelog
replays (the checkpoint is written only after a flush).

Segments (Kafka's AbstractRocksDBSegmentedBytesStore): segment id = time // segment interval (time = window start,
or session end), interval = max(retention / 2, 60 s). When observed stream time advances, segments whose id is
below id(stream time - retention) are closed and deleted whole -- expiry costs a directory removal, not a delete
per key. Reads and puts are exact about retention all the same (the bound of window_store.py / session_store.py).
At open, observed stream time is recovered from the newest segment's keys.

Key-range scans start at the lower key's bytes and stop at the first entry whose first len(upper key) bytes sort
after the upper key; entries are decoded and filtered, so results are exact except for one edge case Kafka shares:
a key that is a proper prefix of the upper bound whose timestamp bytes sort above the bound's next byte.
"""

import functools
import os
import re
import shutil
import threading

from rocksdict import Options, Rdict, WriteOptions

from kbroker.streams.errors import ProcessorStateException
from kbroker.streams.keyvalue import KeyValue, Window, Windowed
from kbroker.streams.state import session_store as sks
from kbroker.streams.state import window_store as wks
from kbroker.streams.state.base import KeyValueIterator
from kbroker.streams.state.keyvalue_store import KeyValueStore
from kbroker.streams.state.memory import SEQNUM_MASK, _BytesStoreBase
from kbroker.streams.state.session_store import SessionQueriesByScan, SessionStore
from kbroker.streams.state.window_store import WindowStore

LONG_MIN = -1 << 63
LONG_MAX = (1 << 63) - 1


WRITE_BUFFER_SIZE = 16 * 1024 * 1024   # Kafka's RocksDBStore: 16 MB memtables, at most 3 per database
MAX_WRITE_BUFFERS = 3


def _open_db(path):
    os.makedirs(path, exist_ok=True)
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.set_write_buffer_size(WRITE_BUFFER_SIZE)
    opts.set_max_write_buffer_number(MAX_WRITE_BUFFERS)
    try:
        db = Rdict(path, opts)
    except Exception as e:   # rocksdict raises plain Exception (e.g. the LOCK held by another open of the store)
        raise ProcessorStateException(f"Error opening store {os.path.basename(path)} at location {path}: {e}") \
            from e
    wo = WriteOptions()
    wo.disable_wal = True
    db.set_write_options(wo)
    return db


def _scan(db, lower, upper_prefix, reverse=False):
    """(key, value) pairs of ``db`` with key >= lower (None: from the start) until the first key whose first
    len(upper_prefix) bytes sort above ``upper_prefix`` (None: to the end); ascending."""
    items = db.items(from_key=lower) if lower is not None else db.items()
    n = None if upper_prefix is None else len(upper_prefix)
    for k, v in items:
        if n is not None and k[:n] > upper_prefix:
            break
        yield k, v


class RocksDBKeyValueStore(_BytesStoreBase, KeyValueStore):
    def __init__(self, name):
        super().__init__(name)
        self.db = None
        self.path = None

    def persistent(self):
        return True

    def init(self, context, root):
        self.path = os.path.join(context.state_dir(), "rocksdb", self._name)
        self.db = _open_db(self.path)
        self._init(context, root)

    def restore_batch(self, records):
        for r in records:
            self.put(r.key, r.value)

    def get(self, key):
        return self.db.get(bytes(key))

    def put(self, key, value):
        if value is None:
            self.db.delete(bytes(key))
        else:
            self.db.put(bytes(key), bytes(value))

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
        if old is not None:
            self.db.delete(bytes(key))
        return old

    def _range(self, from_key, to_key):
        if from_key is not None and to_key is not None and from_key > to_key:
            return
        items = self.db.items(from_key=from_key) if from_key is not None else self.db.items()
        for k, v in items:
            if to_key is not None and k > to_key:
                break
            yield KeyValue(k, v)

    def _reverse_range(self, from_key, to_key):
        if from_key is not None and to_key is not None and from_key > to_key:
            return
        items = self.db.items(from_key=to_key, backwards=True) if to_key is not None else \
            self.db.items(backwards=True)
        for k, v in items:
            if from_key is not None and k < from_key:
                break
            yield KeyValue(k, v)

    def range(self, from_key, to_key):
        return KeyValueIterator(self._range(from_key, to_key))

    def reverse_range(self, from_key, to_key):
        return KeyValueIterator(self._reverse_range(from_key, to_key))

    def all(self):
        return KeyValueIterator(self._range(None, None))

    def reverse_all(self):
        return KeyValueIterator(self._reverse_range(None, None))

    def prefix_scan(self, prefix, prefix_serializer=None):
        prefix = bytes(prefix)

        def gen():
            for k, v in self.db.items(from_key=prefix):
                if not k.startswith(prefix):
                    break
                yield KeyValue(k, v)
        return KeyValueIterator(gen())

    def approximate_num_entries(self):
        return self.db.property_int_value("rocksdb.estimate-num-keys") or 0

    def flush(self):
        if self.db is not None and self._open:
            self.db.flush()

    def close(self):
        if self.db is not None and self._open:
            self.db.flush()
            self.db.close()
        self._open = False
        self.db = None


def _locked(fn):
    """Run under the store's lock: interactive queries read from other threads while the stream thread writes and
    drops whole segments (closing a segment's database under a reader would break it)."""
    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        with self._lock:
            return fn(self, *args, **kwargs)
    return wrapper


class _Segments:
    """The segment databases of one store (see the module docstring)."""

    def __init__(self, name, interval):
        self.name = name
        self.interval = interval
        self.dir = None
        self.dbs = {}   # segment id -> Rdict

    def segment_id(self, ts):
        return ts // self.interval

    def open_existing(self, directory):
        self.dir = directory
        os.makedirs(directory, exist_ok=True)
        pattern = re.compile(re.escape(self.name) + r"\.(\d+)$")
        for entry in os.listdir(directory):
            m = pattern.match(entry)
            if m:
                sid = int(m.group(1)) // self.interval
                self.dbs[sid] = _open_db(os.path.join(directory, entry))

    def get_or_create(self, sid):
        db = self.dbs.get(sid)
        if db is None:
            db = self.dbs[sid] = _open_db(os.path.join(self.dir, f"{self.name}.{sid * self.interval}"))
        return db

    def write(self, sid, binary, value):
        """Put ``binary`` -> ``value`` in segment ``sid`` (created on demand); None deletes it (no segment made)."""
        if value is None:
            db = self.dbs.get(sid)
            if db is not None:
                db.delete(binary)
        else:
            self.get_or_create(sid).put(binary, bytes(value))

    def drop_before(self, min_id):
        for sid in [s for s in self.dbs if s < min_id]:
            db = self.dbs.pop(sid)
            db.close()
            shutil.rmtree(os.path.join(self.dir, f"{self.name}.{sid * self.interval}"), ignore_errors=True)

    def ids(self, lo=None, hi=None, reverse=False):
        return sorted((s for s in self.dbs if (lo is None or s >= lo) and (hi is None or s <= hi)), reverse=reverse)

    def flush(self):
        for db in self.dbs.values():
            db.flush()

    def close(self):
        for db in self.dbs.values():
            db.flush()
            db.close()
        self.dbs.clear()


class _SegmentedBase(_BytesStoreBase):
    def __init__(self, name, retention_ms, segment_interval_ms):
        super().__init__(name)
        self._retention = retention_ms
        self.segments = _Segments(name, segment_interval_ms)
        self.observed_stream_time = LONG_MIN
        self._lock = threading.RLock()

    def persistent(self):
        return True

    def retention_period(self):
        return self._retention

    def _recover(self, binary):
        """Called for each key of the newest segment at open: recovers observed stream time (and seqnums)."""
        raise NotImplementedError

    def init(self, context, root):
        self.segments.open_existing(os.path.join(context.state_dir(), self._name))
        for sid in self.segments.ids(reverse=True)[:1]:
            for k in self.segments.dbs[sid].keys():
                self._recover(k)
        self._init(context, root)

    def _min_live(self):
        return self.observed_stream_time - self._retention + 1

    def _advance(self, ts):
        """Observe ``ts``; False when a write at ``ts`` is expired (then dropped and counted)."""
        if ts > self.observed_stream_time:
            self.observed_stream_time = ts
            self.segments.drop_before(self.segments.segment_id(self.observed_stream_time - self._retention))
        if ts < self._min_live():
            self.expired_dropped += 1
            return False
        return True

    @_locked
    def flush(self):
        if self._open:
            self.segments.flush()

    @_locked
    def close(self):
        if self._open:
            self.segments.close()
        self._open = False


class RocksDBWindowStore(_SegmentedBase, WindowStore):
    def __init__(self, name, retention_ms, window_size_ms, retain_duplicates, segment_interval_ms):
        super().__init__(name, retention_ms, segment_interval_ms)
        self._size = window_size_ms
        self.retain_duplicates = retain_duplicates
        self._seqnum = 0

    def window_size(self):
        return self._size

    def last_seqnum(self):
        """The seqnum of the last put of a duplicates store (the changelog key's)."""
        return self._seqnum

    def _recover(self, binary):
        _, start, seq = wks.from_store_key_binary(binary)
        self.observed_stream_time = max(self.observed_stream_time, start)
        if self.retain_duplicates:
            self._seqnum = max(self._seqnum, seq)

    def restore_batch(self, records):
        for r in records:
            key, start, seq = wks.from_store_key_binary(r.key)
            if self.retain_duplicates and seq > self._seqnum:
                self._seqnum = seq   # new puts must not reuse a restored duplicate's seqnum
            self._put_raw(key, start, seq, r.value)

    def put(self, key, value, window_start_ms):
        if self.retain_duplicates:
            if value is None:
                return
            self._seqnum = (self._seqnum + 1) & SEQNUM_MASK
            seq = self._seqnum
        else:
            seq = 0
        self._put_raw(bytes(key), window_start_ms, seq, value)

    @_locked
    def _put_raw(self, key, start, seq, value):
        if not self._advance(start):
            return
        self.segments.write(self.segments.segment_id(start), wks.to_store_key_binary(key, start, seq), value)

    @_locked
    def _single(self, key, time_from, time_to):
        key = bytes(key)
        time_from = max(time_from, self._min_live())
        out = []
        if time_from > time_to:
            return out
        lower = wks.to_store_key_binary(key, time_from, 0)
        upper = wks.to_store_key_binary(key, time_to, SEQNUM_MASK)
        for sid in self.segments.ids(self.segments.segment_id(time_from), self.segments.segment_id(time_to)):
            for k, v in self.segments.dbs[sid].items(from_key=lower):
                if k > upper:
                    break
                kk, start, _ = wks.from_store_key_binary(k)
                if kk == key and time_from <= start <= time_to:
                    out.append(KeyValue(start, v))
        return out

    def fetch(self, key, window_start_ms):
        if not self.retain_duplicates:
            # the hot path of tumbling/hopping aggregations: one point lookup, no iterator
            with self._lock:
                if window_start_ms < self._min_live():
                    return None
                db = self.segments.dbs.get(self.segments.segment_id(window_start_ms))
                return None if db is None else db.get(wks.to_store_key_binary(bytes(key), window_start_ms, 0))
        for kv in self._single(key, window_start_ms, window_start_ms):
            return kv.value
        return None

    def fetch_range(self, key, time_from, time_to):
        return KeyValueIterator(self._single(key, time_from, time_to))

    def backward_fetch(self, key, time_from, time_to):
        return KeyValueIterator(reversed(self._single(key, time_from, time_to)))

    @_locked
    def _keys(self, key_from, key_to, time_from, time_to):
        time_from = max(time_from, self._min_live())
        out = []
        if time_from > time_to or (key_from is not None and key_to is not None and key_from > key_to):
            return out
        size = self._size
        for sid in self.segments.ids(self.segments.segment_id(time_from), self.segments.segment_id(time_to)):
            for k, v in _scan(self.segments.dbs[sid], key_from, key_to):
                key, start, _ = wks.from_store_key_binary(k)
                if (key_from is not None and key < key_from) or (key_to is not None and key > key_to):
                    continue
                if time_from <= start <= time_to:
                    out.append(KeyValue(Windowed(key, Window(start, start + size)), v))
        return out

    def fetch_keys(self, key_from, key_to, time_from, time_to):
        return KeyValueIterator(self._keys(key_from, key_to, time_from, time_to))

    def backward_fetch_keys(self, key_from, key_to, time_from, time_to):
        return KeyValueIterator(reversed(self._keys(key_from, key_to, time_from, time_to)))

    def fetch_all(self, time_from, time_to):
        return KeyValueIterator(self._keys(None, None, time_from, time_to))

    def backward_fetch_all(self, time_from, time_to):
        return KeyValueIterator(reversed(self._keys(None, None, time_from, time_to)))

    def all(self):
        return self.fetch_all(LONG_MIN, LONG_MAX)

    def backward_all(self):
        return self.backward_fetch_all(LONG_MIN, LONG_MAX)


class RocksDBSessionStore(_SegmentedBase, SessionQueriesByScan, SessionStore):
    def __init__(self, name, retention_ms, segment_interval_ms):
        super().__init__(name, retention_ms, segment_interval_ms)

    def _recover(self, binary):
        self.observed_stream_time = max(self.observed_stream_time, sks.from_binary(binary)[2])

    def restore_batch(self, records):
        for r in records:
            key, start, end = sks.from_binary(r.key)
            self._put_raw(key, start, end, r.value)

    def put(self, windowed_key, value):
        self._put_raw(bytes(windowed_key.key), windowed_key.window.start, windowed_key.window.end, value)

    def remove(self, windowed_key):
        self.put(windowed_key, None)

    @_locked
    def _put_raw(self, key, start, end, value):
        if not self._advance(end):
            return
        self.segments.write(self.segments.segment_id(end), sks.to_binary(key, start, end), value)

    @_locked
    def _find(self, key_from, key_to, earliest_end, latest_start, single=None):
        earliest_end = max(earliest_end, self._min_live())
        out = []
        for sid in self.segments.ids(self.segments.segment_id(earliest_end)):
            db = self.segments.dbs[sid]
            if single is not None:
                lower = sks.to_binary(single, 0, max(earliest_end, 0))
                upper = sks.to_binary(single, LONG_MAX, LONG_MAX)
                it = []
                for k, v in db.items(from_key=lower):
                    if k > upper:
                        break
                    it.append((k, v))
            else:
                it = _scan(db, key_from, key_to)
            for k, v in it:
                key, start, end = sks.from_binary(k)
                if single is not None:
                    if key != single:
                        continue
                elif (key_from is not None and key < key_from) or (key_to is not None and key > key_to):
                    continue
                if end >= earliest_end and start <= latest_start:
                    out.append(KeyValue(Windowed(key, Window(start, end)), v))
        return out

    @_locked
    def fetch_session(self, key, session_start, session_end):
        if session_end < self._min_live():
            return None
        db = self.segments.dbs.get(self.segments.segment_id(session_end))
        return None if db is None else db.get(sks.to_binary(bytes(key), session_start, session_end))

