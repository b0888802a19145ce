"""kbroker.streams.state: stores (in memory and RocksDB), caching, change-logging, checkpoints, restore, queries.

Every test goes through ProcessorStateManager (the path the test driver and the runtime use) with a capturing
RecordCollector, so the layer stack, the changelog records and the flush listener are exactly what a task sees.
"""

import os
import struct

import pytest

from kbroker.streams.errors import InvalidStateStoreException, ProcessorStateException
from kbroker.streams.keyvalue import KeyValue, Window, Windowed
from kbroker.streams.processor import TaskId
from kbroker.streams.serdes import Serdes
from kbroker.streams.state import (MemoryRestoreConsumer, ProcessorStateManager,
                                   QueryableStoreTypes, StateRestoreListener, StoreQueryParameters, Stores,
                                   ValueAndTimestamp)
from kbroker.streams.state.checkpoint import OffsetCheckpoint
from kbroker.streams.state.queryable import build_composite

APP = "app"
TASK = TaskId(0, 3)
LONG = struct.Struct(">q")


def L(n):
    return LONG.pack(n)


class Collector:
    def __init__(self):
        self.sent = []

    def send(self, topic, key, value, timestamp, headers, partition):
        self.sent.append((topic, key, value, timestamp, partition))

    def flush(self):
        pass


class Env:
    """A task's state: builders -> ProcessorStateManager with a capturing collector and a settable timestamp."""

    def __init__(self, root, builders, eos=False, config=None, init=True):
        self.collector = Collector()
        self.ts = 0
        changelogs = {b.name(): f"{APP}-{b.name()}-changelog" for b in builders if b.logging_enabled()}
        self.sm = ProcessorStateManager(TASK, APP, str(root), builders, changelogs, eos, config or {})
        if init:
            self.sm.init_stores(self.collector, lambda: self.ts)

    def store(self, name):
        return self.sm.get_store(name)


def kv_supplier(kind, name="kv"):
    return Stores.persistent_key_value_store(name) if kind == "rocksdb" else Stores.in_memory_key_value_store(name)


def window_supplier(kind, retention, size, dups=False, name="w"):
    if kind == "rocksdb":
        return Stores.persistent_window_store(name, retention, size, dups)
    return Stores.in_memory_window_store(name, retention, size, dups)


def session_supplier(kind, retention, name="s"):
    if kind == "rocksdb":
        return Stores.persistent_session_store(name, retention)
    return Stores.in_memory_session_store(name, retention)


KINDS = ["memory", "rocksdb"]


# -- key-value stores -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_key_value_contents_and_range_order(tmp_path, kind):
    env = Env(tmp_path, [Stores.key_value_store_builder(kv_supplier(kind), Serdes.Integer(), Serdes.String())
                         .with_logging_disabled()])
    kv = env.store("kv")
    for k in (3, -1, 1, 256, 2):
        kv.put(k, f"v{k}")
    # Order is the serialized keys' byte order: 4-byte big-endian, so -1 (0xffffffff) sorts last.
    assert list(kv.all()) == [(1, "v1"), (2, "v2"), (3, "v3"), (256, "v256"), (-1, "v-1")]
    assert list(kv.reverse_all()) == [(-1, "v-1"), (256, "v256"), (3, "v3"), (2, "v2"), (1, "v1")]
    assert list(kv.range(2, 256)) == [(2, "v2"), (3, "v3"), (256, "v256")]          # both bounds inclusive
    assert list(kv.reverse_range(2, 256)) == [(256, "v256"), (3, "v3"), (2, "v2")]
    assert list(kv.range(None, 2)) == [(1, "v1"), (2, "v2")]
    assert list(kv.range(256, None)) == [(256, "v256"), (-1, "v-1")]
    assert list(kv.range(3, 2)) == []                                                 # from > to: empty
    assert kv.get(3) == "v3" and kv.get(4) is None
    assert kv.put_if_absent(3, "x") == "v3" and kv.get(3) == "v3"
    assert kv.put_if_absent(4, "v4") is None and kv.get(4) == "v4"
    assert kv.delete(4) == "v4" and kv.delete(4) is None and kv.get(4) is None
    kv.put(2, None)                                                                   # put None deletes
    assert kv.get(2) is None
    kv.put_all([KeyValue(7, "v7"), (8, "v8")])
    assert [k for k, _ in kv.all()] == [1, 3, 7, 8, 256, -1]
    assert kv.approximate_num_entries() == (6 if kind == "memory" else kv.approximate_num_entries())
    with pytest.raises(ValueError, match="key cannot be null"):
        kv.put(None, "x")
    env.sm.close(True)


@pytest.mark.parametrize("kind", KINDS)
def test_key_value_prefix_scan_and_iterator(tmp_path, kind):
    env = Env(tmp_path, [Stores.key_value_store_builder(kv_supplier(kind), Serdes.String(), Serdes.Long())])
    kv = env.store("kv")
    for k in ("ab", "a", "abc", "b", "aa"):
        kv.put(k, len(k))
    assert list(kv.prefix_scan("ab", Serdes.String())) == [("ab", 2), ("abc", 3)]
    assert list(kv.prefix_scan("a", Serdes.String())) == [("a", 1), ("aa", 2), ("ab", 2), ("abc", 3)]
    assert list(kv.prefix_scan("c", Serdes.String())) == []
    with kv.range("a", "b") as it:
        assert it.peek_next_key() == "a"
        assert it.has_next() and next(it) == ("a", 1)
        assert next(it) == ("aa", 2)
    env.sm.close(True)


# -- window stores ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_window_fetch_semantics(tmp_path, kind):
    env = Env(tmp_path, [Stores.window_store_builder(window_supplier(kind, 1000, 10), Serdes.String(),
                                                     Serdes.Long())])
    w = env.store("w")
    w.put("b", 1, 0)
    w.put("a", 2, 10)
    w.put("a", 3, 0)
    w.put("a", 4, 20)
    w.put("c", 5, 10)
    assert w.fetch("a", 10) == 2 and w.fetch("a", 5) is None and w.fetch("z", 0) is None
    assert list(w.fetch_range("a", 0, 20)) == [(0, 3), (10, 2), (20, 4)]             # ascending start, inclusive
    assert list(w.fetch_range("a", 1, 19)) == [(10, 2)]
    assert list(w.backward_fetch("a", 0, 20)) == [(20, 4), (10, 2), (0, 3)]
    W = lambda k, s: Windowed(k, Window(s, s + 10))                                    # noqa: E731
    got = list(w.fetch_keys("a", "b", 0, 10))
    if kind == "memory":   # Kafka's in-memory store: (start, key) order
        assert got == [(W("a", 0), 3), (W("b", 0), 1), (W("a", 10), 2)]
    else:                  # RocksDB: (segment, key, start)
        assert got == [(W("a", 0), 3), (W("a", 10), 2), (W("b", 0), 1)]
    assert list(w.fetch_keys("a", "a", 0, 20)) == [(W("a", 0), 3), (W("a", 10), 2), (W("a", 20), 4)]
    assert sorted(map(tuple, w.fetch_all(10, 10))) == [(W("a", 10), 2), (W("c", 10), 5)]
    assert len(list(w.all())) == 5
    w.put("a", None, 10)                                                               # delete one window
    assert list(w.fetch_range("a", 0, 20)) == [(0, 3), (20, 4)]
    # the changelog key is Kafka's window key: key + 8-byte start + 4-byte seqnum (0: no duplicates)
    assert env.collector.sent[1] == ("app-w-changelog", b"a" + L(10) + b"\0\0\0\0", L(2), 0, 3)
    assert env.collector.sent[-1] == ("app-w-changelog", b"a" + L(10) + b"\0\0\0\0", None, 0, 3)
    env.sm.close(True)


@pytest.mark.parametrize("kind", KINDS)
def test_window_retention_drops_expired(tmp_path, kind):
    env = Env(tmp_path, [Stores.window_store_builder(window_supplier(kind, 100, 10), Serdes.String(),
                                                     Serdes.Long()).with_logging_disabled()])
    w = env.store("w")
    inner = w.wrapped()
    w.put("a", 1, 0)
    w.put("b", 2, 99)            # stream time 99: windows with start > 99 - 100 live -> 0 still kept
    assert w.fetch("a", 0) == 1
    w.put("b", 3, 100)           # stream time 100: start 0 <= 100 - 100 expires
    assert w.fetch("a", 0) is None
    assert list(w.fetch_range("a", 0, 1000)) == []
    w.put("c", 4, 0)             # a put into an expired window is dropped and counted
    assert w.fetch("c", 0) is None and inner.expired_dropped == 1
    w.put("c", 5, 1)             # start 1 > 0: still live
    assert [(kv.key.key, kv.key.window.start, kv.value) for kv in w.all()] == \
        ([("c", 1, 5), ("b", 99, 2), ("b", 100, 3)] if kind == "memory" else [("b", 99, 2), ("b", 100, 3), ("c", 1, 5)])
    env.sm.close(True)


def test_rocksdb_window_segments_dropped_whole(tmp_path):
    env = Env(tmp_path, [Stores.window_store_builder(Stores.persistent_window_store("w", 120_000, 1000),
                                                     Serdes.String(), Serdes.Long()).with_logging_disabled()])
    w = env.store("w")
    seg_dir = os.path.join(tmp_path, APP, "0_3", "w")
    for start in (0, 60_000, 130_000):          # segment interval = max(120000 / 2, 60000) = 60000
        w.put("k", start, start)
    assert sorted(os.listdir(seg_dir)) == ["w.0", "w.120000", "w.60000"]
    w.put("k", 200_000, 200_000)                # stream time 200000: segments below id(80000) = 1 dropped
    assert sorted(os.listdir(seg_dir)) == ["w.120000", "w.180000", "w.60000"]
    assert [kv.key for kv in w.fetch_range("k", 0, 300_000)] == [130_000, 200_000]   # 60000 <= 200000-120000
    env.sm.close(True)


@pytest.mark.parametrize("kind", KINDS)
def test_window_retain_duplicates(tmp_path, kind):
    env = Env(tmp_path, [Stores.window_store_builder(window_supplier(kind, 1000, 100, dups=True), Serdes.String(),
                                                     Serdes.Long()).with_caching_enabled()])
    w = env.store("w")
    assert w.wrapped().__class__.__name__ == "ChangeLoggingWindowStore"   # caching refused for duplicates
    w.put("k", 1, 5)
    w.put("k", 2, 5)
    w.put("k", None, 5)      # ignored by a duplicates store
    assert list(w.fetch_range("k", 0, 10)) == [(5, 1), (5, 2)]
    assert [s[1] for s in env.collector.sent] == [b"k" + L(5) + b"\0\0\0\1", b"k" + L(5) + b"\0\0\0\2"]
    env.sm.close(True)


def test_window_store_size_must_fit_retention():
    with pytest.raises(ValueError, match=r"must be no smaller than its window size. Got size=\[20\], "
                                         r"retention=\[10\]"):
        Stores.in_memory_window_store("w", 10, 20)


# -- session stores ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_session_find_sessions(tmp_path, kind):
    env = Env(tmp_path, [Stores.session_store_builder(session_supplier(kind, 10_000), Serdes.String(),
                                                      Serdes.Long())])
    s = env.store("s")
    S = lambda k, a, b: Windowed(k, Window(a, b))                                      # noqa: E731
    s.put(S("k", 20, 30), 2)
    s.put(S("k", 0, 10), 1)
    s.put(S("k", 50, 50), 3)
    s.put(S("j", 0, 100), 9)
    assert list(s.find_sessions("k", 15, 25)) == [(S("k", 20, 30), 2)]      # end >= 15 and start <= 25
    assert list(s.find_sessions("k", 10, 50)) == [(S("k", 0, 10), 1), (S("k", 20, 30), 2), (S("k", 50, 50), 3)]
    assert list(s.find_sessions("k", 31, 49)) == []
    assert list(s.backward_find_sessions("k", 0, 100)) == [(S("k", 50, 50), 3), (S("k", 20, 30), 2),
                                                           (S("k", 0, 10), 1)]
    assert list(s.fetch("j")) == [(S("j", 0, 100), 9)]
    assert list(s.find_sessions_range("k", "k", 30, 100)) == [(S("k", 20, 30), 2), (S("k", 50, 50), 3)]
    assert list(s.find_sessions_range("j", "k", 30, 100)) == (
        [(S("k", 20, 30), 2), (S("k", 50, 50), 3), (S("j", 0, 100), 9)] if kind == "memory"   # (end, key, start)
        else [(S("j", 0, 100), 9), (S("k", 20, 30), 2), (S("k", 50, 50), 3)])                # (key, end, start)
    assert s.fetch_session("k", 20, 30) == 2 and s.fetch_session("k", 20, 31) is None
    s.remove(S("k", 20, 30))
    assert [kv.key.window for kv in s.fetch("k")] == [Window(0, 10), Window(50, 50)]
    # Kafka's session changelog key: key + 8-byte end + 8-byte start
    assert env.collector.sent[0][:3] == ("app-s-changelog", b"k" + L(30) + L(20), L(2))
    assert env.collector.sent[-1][:3] == ("app-s-changelog", b"k" + L(30) + L(20), None)
    env.sm.close(True)


@pytest.mark.parametrize("kind", KINDS)
def test_session_retention(tmp_path, kind):
    env = Env(tmp_path, [Stores.session_store_builder(session_supplier(kind, 100), Serdes.String(),
                                                      Serdes.Long()).with_logging_disabled()])
    s = env.store("s")
    s.put(Windowed("a", Window(0, 5)), 1)
    s.put(Windowed("b", Window(100, 104)), 2)   # stream time 104: end 5 > 4 still live
    assert s.fetch_session("a", 0, 5) == 1
    s.put(Windowed("b", Window(105, 105)), 3)   # stream time 105: end 5 <= 105 - 100 expires
    assert s.fetch_session("a", 0, 5) is None and list(s.fetch("a")) == []
    s.put(Windowed("c", Window(1, 5)), 4)       # dropped
    assert list(s.fetch("c")) == [] and s.wrapped().expired_dropped == 1
    env.sm.close(True)


# -- caching ----------------------------------------------------------------------------------------------------------

def cached_kv(tmp_path, kind="memory", cache_bytes=10_000_000, send_old=True):
    env = Env(tmp_path, [Stores.key_value_store_builder(kv_supplier(kind), Serdes.String(), Serdes.Long())
                         .with_caching_enabled()], config={"cache.max.bytes.buffering": cache_bytes})
    kv = env.store("kv")
    out = []
    assert kv.set_flush_listener(lambda k, new, old, ts: out.append((k, new, old, ts)), send_old) is True
    return env, kv, out


@pytest.mark.parametrize("kind", KINDS)
def test_caching_dedups_until_flush(tmp_path, kind):
    env, kv, out = cached_kv(tmp_path, kind)
    env.ts = 7
    kv.put("a", 1)
    kv.put("a", 2)
    kv.put("b", 3)
    env.ts = 9
    kv.put("a", 4)
    assert kv.get("a") == 4 and out == [] and env.collector.sent == []   # nothing downstream before the flush
    env.sm.flush()
    # one update per key, in the order of each key's last write (Kafka's), with that write's timestamp
    assert out == [("b", 3, None, 7), ("a", 4, None, 9)]
    assert env.collector.sent == [("app-kv-changelog", b"b", L(3), 7, 3), ("app-kv-changelog", b"a", L(4), 9, 3)]
    kv.put("a", 5)
    kv.delete("b")
    kv.delete("zz")               # a delete of a key present nowhere: neither forwarded nor logged
    assert kv.get("b") is None and list(kv.all()) == [("a", 5)]
    env.sm.flush()
    assert out[2:] == [("a", 5, 4, 9), ("b", None, 3, 9)]
    assert env.collector.sent[2:] == [("app-kv-changelog", b"a", L(5), 9, 3), ("app-kv-changelog", b"b", None, 9, 3)]
    kv.put("a", 6)
    kv.put("b", 7)
    kv.put("a", 8)
    env.sm.flush()
    assert [o[:2] for o in out[4:]] == [("b", 7), ("a", 8)]
    env.sm.flush()
    assert len(out) == 6          # nothing dirty: nothing forwarded
    env.sm.close(True)


def test_caching_without_old_values(tmp_path):
    env, kv, out = cached_kv(tmp_path, send_old=False)
    kv.put("a", 1)
    env.sm.flush()
    kv.put("a", 2)
    env.sm.flush()
    assert out == [("a", 1, None, 0), ("a", 2, None, 0)]
    env.sm.close(True)


def test_caching_eviction_order(tmp_path):
    # entry size = key 1 + value 8 + 21 = 30 bytes: 90 bytes hold exactly three entries
    env, kv, out = cached_kv(tmp_path, cache_bytes=90)
    kv.put("a", 1)
    kv.put("b", 2)
    kv.put("c", 3)
    assert out == []
    assert kv.get("a") == 1       # refreshes a: LRU order b, c, a
    kv.put("d", 4)                # 120 > 90: evict LRU b (dirty) -> flush b first, then a, c, d in dirty order
    assert [o[0] for o in out] == ["b", "a", "c", "d"]
    kv.put("e", 5)                # evicts c (now clean): no flush
    assert len(out) == 4
    assert kv.get("c") == 3       # read from the store below
    env.sm.flush()
    assert [o[:2] for o in out[4:]] == [("e", 5)]
    env.sm.close(True)


def test_cache_size_zero_forwards_every_update(tmp_path):
    env, kv, out = cached_kv(tmp_path, cache_bytes=0)
    kv.put("a", 1)
    kv.put("a", 2)
    assert out == [("a", 1, None, 0), ("a", 2, 1, 0)]
    assert [s[2] for s in env.collector.sent] == [L(1), L(2)]
    env.sm.close(True)


def test_statestore_cache_max_bytes_wins():
    from kbroker.streams.state.caching import cache_size_from_config
    assert cache_size_from_config({}) == 10485760
    assert cache_size_from_config({"cache.max.bytes.buffering": 5}) == 5
    assert cache_size_from_config({"cache.max.bytes.buffering": 5, "statestore.cache.max.bytes": 7}) == 7


def test_cached_window_and_session_flush_listener(tmp_path):
    env = Env(tmp_path, [
        Stores.window_store_builder(Stores.in_memory_window_store("w", 1000, 10), Serdes.String(), Serdes.Long())
        .with_caching_enabled(),
        Stores.session_store_builder(Stores.in_memory_session_store("s", 1000), Serdes.String(), Serdes.Long())
        .with_caching_enabled()])
    w, s = env.store("w"), env.store("s")
    wout, sout = [], []
    w.set_flush_listener(lambda *a: wout.append(a), True)
    s.set_flush_listener(lambda *a: sout.append(a), True)
    w.put("k", 1, 0)
    w.put("k", 2, 0)
    w.put("k", 3, 10)
    assert list(w.fetch_range("k", 0, 10)) == [(0, 2), (10, 3)]     # reads merge the cache
    s.put(Windowed("k", Window(0, 5)), 1)
    env.sm.flush()
    w.put("j", 4, 10)                                                # cached only
    w.put("k", None, 10)                                             # a cached delete hides the stored window
    s.put(Windowed("j", Window(1, 2)), 7)
    assert list(w.fetch_keys("a", "z", 0, 10)) == [(Windowed("j", Window(10, 20)), 4),
                                                   (Windowed("k", Window(0, 10)), 2)]
    assert list(s.find_sessions_range("a", "z", 0, 10)) == [(Windowed("j", Window(1, 2)), 7),
                                                            (Windowed("k", Window(0, 5)), 1)]
    w.put("j", None, 10)
    w.put("k", 3, 10)
    s.remove(Windowed("j", Window(1, 2)))
    del wout[:2], sout[:1]
    env.sm.flush()
    # j@10 was put and deleted between flushes and never stored: skipped; k@10 deleted then re-put: one update
    assert wout == [(Windowed("k", Window(10, 20)), 3, 3, 0)]
    assert sout == []
    del wout[:], sout[:]
    w.put("k", 5, 0)
    s.remove(Windowed("k", Window(0, 5)))
    s.put(Windowed("k", Window(0, 8)), 2)
    env.sm.flush()
    assert wout == [(Windowed("k", Window(0, 10)), 5, 2, 0)]
    assert sout == [(Windowed("k", Window(0, 5)), None, 1, 0), (Windowed("k", Window(0, 8)), 2, None, 0)]
    assert list(s.fetch("k")) == [(Windowed("k", Window(0, 8)), 2)]
    env.sm.close(True)


# -- timestamped stores -----------------------------------------------------------------------------------------------

def test_timestamped_store_changelog_format(tmp_path):
    env = Env(tmp_path, [Stores.timestamped_key_value_store_builder(Stores.in_memory_key_value_store("t"),
                                                                    Serdes.String(), Serdes.Long())])
    t = env.store("t")
    env.ts = 99
    t.put("a", ValueAndTimestamp(5, 42))
    assert t.get("a") == ValueAndTimestamp(5, 42)
    assert t.wrapped().get(b"a") == L(42) + L(5)                       # stored: 8-byte timestamp + value
    # changelog: the plain value, the embedded timestamp as the record's (Kafka's format)
    assert env.collector.sent == [("app-t-changelog", b"a", L(5), 42, 3)]
    env.sm.close(True)
    # restore rebuilds the timestamped bytes from (value, record timestamp)
    env2 = Env(tmp_path, [Stores.timestamped_key_value_store_builder(Stores.in_memory_key_value_store("t"),
                                                                     Serdes.String(), Serdes.Long())])
    env2.sm.restore(MemoryRestoreConsumer({("app-t-changelog", 3): [(b"a", L(5), 42)]}))
    assert env2.store("t").get("a") == ValueAndTimestamp(5, 42)
    assert list(QueryableStoreTypes.key_value_store().create([env2.store("t")], "t").all()) == [("a", 5)]
    env2.sm.close(True)


# -- checkpoint -------------------------------------------------------------------------------------------------------

def test_checkpoint_bytes_and_atomic_write(tmp_path):
    offsets = {("app-s-changelog", 3): 41, ("app-a-changelog", 3): 7}
    assert OffsetCheckpoint.encode(offsets) == b"0\n2\napp-a-changelog 3 7\napp-s-changelog 3 41\n"
    cp = OffsetCheckpoint(str(tmp_path / "task" / ".checkpoint"))
    assert cp.read() == {}
    cp.write(offsets)
    assert cp.read() == offsets
    assert os.listdir(tmp_path / "task") == [".checkpoint"]             # no .tmp left behind
    assert OffsetCheckpoint.decode(b"0\n0\n") == {}
    for bad in (b"1\n0\n", b"0\n2\nt 0 1\n", b"0\n1\nt 0\n"):
        with pytest.raises(ValueError):
            OffsetCheckpoint.decode(bad)
    cp.delete()
    assert not os.path.exists(cp.path)


# -- restore ----------------------------------------------------------------------------------------------------------

class Listener(StateRestoreListener):
    def __init__(self):
        self.calls = []

    def on_restore_start(self, tp, store_name, start_offset, end_offset):
        self.calls.append(("start", tp, store_name, start_offset, end_offset))

    def on_batch_restored(self, tp, store_name, batch_end_offset, num_restored):
        self.calls.append(("batch", tp, store_name, batch_end_offset, num_restored))

    def on_restore_end(self, tp, store_name, total_restored):
        self.calls.append(("end", tp, store_name, total_restored))


def kv_builder(kind="rocksdb"):
    return Stores.key_value_store_builder(kv_supplier(kind), Serdes.String(), Serdes.Long())


def test_restore_from_fed_changelog(tmp_path):
    tp = ("app-kv-changelog", 3)
    records = [(b"a", L(1), 10), (b"b", L(2), 11), (b"a", L(3), 12), (b"c", L(4), 13), (b"b", None, 14)]
    consumer = MemoryRestoreConsumer({tp: records})
    env = Env(tmp_path, [kv_builder("memory")])
    listener = Listener()
    result = env.sm.restore(consumer, listener, max_batch=2)
    assert list(env.store("kv").all()) == [("a", 3), ("c", 4)]
    assert result["kv"][:3] == (0, 5, 5)
    assert listener.calls == [("start", tp, "kv", 0, 5), ("batch", tp, "kv", 1, 2), ("batch", tp, "kv", 3, 2),
                              ("batch", tp, "kv", 4, 1), ("end", tp, "kv", 5)]
    assert env.collector.sent == []              # restore never writes to the changelog
    assert env.sm.changelog_offsets() == {tp: 4}
    env.sm.close(True)


def test_restore_resumes_after_checkpoint(tmp_path):
    tp = ("app-kv-changelog", 3)
    consumer = MemoryRestoreConsumer({tp: [(b"a", L(1), 0), (b"b", L(2), 0), (b"c", L(3), 0)]})
    env = Env(tmp_path, [kv_builder()])
    env.sm.restore(consumer)
    env.store("kv").put("d", 4)
    env.sm.flush()
    env.sm.update_changelog_offsets({tp: 3})       # the collector acked "d" at offset 3
    env.sm.close(True)
    with open(os.path.join(tmp_path, APP, "0_3", ".checkpoint"), "rb") as f:
        assert f.read() == b"0\n1\napp-kv-changelog 3 3\n"
    consumer.append(*tp, (b"d", L(4), 0))
    consumer.append(*tp, (b"e", L(5), 0))
    env2 = Env(tmp_path, [kv_builder()])
    result = env2.sm.restore(consumer)
    assert result["kv"][:3] == (4, 5, 1)          # only the record after the checkpoint is replayed
    assert list(env2.store("kv").all()) == [("a", 1), ("b", 2), ("c", 3), ("d", 4), ("e", 5)]
    env2.sm.close(True)


def test_restore_with_checkpoint_beyond_changelog_starts_over(tmp_path):
    tp = ("app-kv-changelog", 3)
    OffsetCheckpoint(os.path.join(tmp_path, APP, "0_3", ".checkpoint")).write({tp: 99})
    env = Env(tmp_path, [kv_builder()])
    result = env.sm.restore(MemoryRestoreConsumer({tp: [(b"a", L(1), 0)]}))
    assert result["kv"][:3] == (0, 1, 1) and env.store("kv").get("a") == 1
    env.sm.close(True)


def test_restore_stalled_changelog_raises(tmp_path):
    class Stalled(MemoryRestoreConsumer):
        def offsets(self, topic, partition):
            return 0, 10
    env = Env(tmp_path, [kv_builder("memory")])
    with pytest.raises(ProcessorStateException, match="app-kv-changelog-3"):
        env.sm.restore(Stalled({("app-kv-changelog", 3): [(b"a", L(1), 0)]}), max_empty_polls=3)
    env.sm.close(False)


def test_rocksdb_persists_across_reopen(tmp_path):
    builders = lambda: [kv_builder(), Stores.window_store_builder(  # noqa: E731
        Stores.persistent_window_store("w", 100_000, 10), Serdes.String(), Serdes.Long()).with_logging_disabled()]
    env = Env(tmp_path, builders())
    env.store("kv").put("x", 1)
    env.store("w").put("k", 7, 90_000)
    env.store("w").put("k", 8, 120_000)
    env.sm.close(True)
    env2 = Env(tmp_path, builders())
    assert env2.store("kv").get("x") == 1                    # no restore needed: RocksDB kept it
    w = env2.store("w")
    assert list(w.fetch_range("k", 0, 200_000)) == [(90_000, 7), (120_000, 8)]
    w.put("k", 1, 10_000)                                    # observed stream time (120000) survived the reopen:
    assert w.fetch("k", 10_000) is None                      # 10000 <= 120000 - 100000 is expired
    env2.sm.close(True)


def test_eos_checkpoint_rule(tmp_path):
    tp = ("app-kv-changelog", 3)
    cp_path = os.path.join(tmp_path, APP, "0_3", ".checkpoint")
    env = Env(tmp_path, [kv_builder()], eos=True)
    env.store("kv").put("a", 1)
    env.sm.flush()
    env.sm.update_changelog_offsets({tp: 0})
    env.sm.checkpoint()                                      # EOS: no checkpoint at commit
    assert not os.path.exists(cp_path)
    env.sm.close(True)                                       # clean close writes it
    assert open(cp_path, "rb").read() == b"0\n1\napp-kv-changelog 3 0\n"
    env2 = Env(tmp_path, [kv_builder()], eos=True)
    assert not os.path.exists(cp_path)                       # deleted at init
    assert env2.store("kv").get("a") == 1                    # kept: the checkpoint vouched for it
    env2.store("kv").put("b", 2)                             # uncommitted write, then a crash
    env2.sm.close(False)
    assert not os.path.exists(cp_path)
    env3 = Env(tmp_path, [kv_builder()], eos=True)
    assert list(env3.store("kv").all()) == []                # wiped: restore from the changelog's start
    result = env3.sm.restore(MemoryRestoreConsumer({tp: [(b"a", L(1), 0)]}))
    assert result["kv"][:3] == (0, 1, 1) and list(env3.store("kv").all()) == [("a", 1)]
    env3.sm.close(True)


def test_eos_without_checkpoint_wipes_existing_state(tmp_path):
    env = Env(tmp_path, [kv_builder()])                      # ALOS run leaves data but no checkpoint
    env.store("kv").put("a", 1)
    env.sm.close(True)
    env2 = Env(tmp_path, [kv_builder()], eos=True)
    assert env2.store("kv").get("a") is None
    env2.sm.close(True)


def test_dirty_close_drops_cached_writes(tmp_path):
    env, kv, out = cached_kv(tmp_path)
    kv.put("a", 1)
    env.sm.close(False)
    assert out == [] and env.collector.sent == []


def test_default_serdes_from_config(tmp_path):
    env = Env(tmp_path, [Stores.key_value_store_builder(Stores.in_memory_key_value_store("kv"))],
              config={"default.key.serde": "org.apache.kafka.common.serialization.Serdes$StringSerde",
                      "default.value.serde": "Long"})
    env.store("kv").put("a", 5)
    assert env.collector.sent == [("app-kv-changelog", b"a", L(5), 0, 3)]
    env.sm.close(True)


# -- interactive queries ----------------------------------------------------------------------------------------------

def test_queryable_composite_views(tmp_path):
    envs = []
    for p in (0, 1):
        collector = Collector()
        sm = ProcessorStateManager(TaskId(0, p), APP, str(tmp_path), [kv_builder("memory"), Stores.window_store_builder(
            Stores.in_memory_window_store("w", 1000, 10), Serdes.String(), Serdes.Long())], {}, False)
        sm.init_stores(collector, lambda: 0)
        envs.append(sm)
    envs[0].get_store("kv").put("a", 1)
    envs[1].get_store("kv").put("b", 2)
    envs[1].get_store("w").put("b", 5, 10)
    kvs = [sm.get_store("kv") for sm in envs]
    view = build_composite(StoreQueryParameters.from_name_and_type("kv", QueryableStoreTypes.key_value_store()), kvs)
    assert view.get("a") == 1 and view.get("b") == 2 and view.get("c") is None
    assert list(view.all()) == [("a", 1), ("b", 2)]
    assert view.approximate_num_entries() == 2
    with pytest.raises(InvalidStateStoreException):
        view.put("c", 3)
    wview = build_composite(StoreQueryParameters.from_name_and_type("w", QueryableStoreTypes.window_store()),
                            [sm.get_store("w") for sm in envs])
    assert list(wview.fetch_range("b", 0, 100)) == [(10, 5)]
    with pytest.raises(InvalidStateStoreException, match="does not accept"):
        build_composite(StoreQueryParameters.from_name_and_type("kv", QueryableStoreTypes.window_store()), kvs)
    with pytest.raises(InvalidStateStoreException, match="does not accept"):   # plain store, timestamped query
        build_composite(StoreQueryParameters.from_name_and_type(
            "kv", QueryableStoreTypes.timestamped_key_value_store()), kvs)
    envs[1].close(True)
    with pytest.raises(InvalidStateStoreException, match="may have migrated"):
        view.get("a")
    envs[0].close(True)


def test_thread_cache_is_shared_and_evicts_from_the_writing_store(tmp_path):
    # two stores, one 90-byte cache (30 bytes per entry): the store whose put overflows it evicts its own LRU entry
    env = Env(tmp_path, [Stores.key_value_store_builder(kv_supplier("memory", n), Serdes.String(), Serdes.Long())
                         .with_caching_enabled() for n in ("one", "two")], config={"statestore.cache.max.bytes": 90})
    outs = {"one": [], "two": []}
    for n in outs:
        env.store(n).set_flush_listener(lambda k, new, old, ts, n=n: outs[n].append((k, new)), False)
    env.store("one").put("a", 1)
    env.store("one").put("b", 2)
    env.store("two").put("x", 3)
    assert outs == {"one": [], "two": []} and env.sm.thread_cache.size_bytes() == 90
    env.store("two").put("y", 4)       # 120 > 90: "two" evicts x (dirty) -> flushes x then y; "one" untouched
    assert outs == {"one": [], "two": [("x", 3), ("y", 4)]}
    assert env.sm.thread_cache.size_bytes() == 90
    env.sm.close(False)
    assert env.sm.thread_cache.size_bytes() == 0


@pytest.mark.parametrize("kind", KINDS)
def test_duplicates_store_seqnums_continue_after_restore(tmp_path, kind):
    builder = lambda: Stores.window_store_builder(window_supplier(kind, 1000, 100, dups=True),  # noqa: E731
                                                  Serdes.String(), Serdes.Long())
    env = Env(tmp_path, [builder()])
    env.sm.restore(MemoryRestoreConsumer({("app-w-changelog", 3): [
        (b"k" + L(5) + b"\0\0\0\1", L(1), 0), (b"k" + L(5) + b"\0\0\0\2", L(2), 0)]}))
    env.store("w").put("k", 3, 5)
    assert list(env.store("w").fetch_range("k", 0, 10)) == [(5, 1), (5, 2), (5, 3)]
    assert env.collector.sent == [("app-w-changelog", b"k" + L(5) + b"\0\0\0\3", L(3), 0, 3)]
    env.sm.close(True)


def test_rocksdb_store_opened_twice_names_the_store(tmp_path):
    env = Env(tmp_path, [kv_builder()])
    with pytest.raises(ProcessorStateException, match=r"Error opening store kv at location .*0_3/rocksdb/kv"):
        Env(tmp_path, [kv_builder()])
    env.sm.close(True)


def test_standby_under_eos_keeps_and_writes_its_checkpoint(tmp_path):
    tp = ("app-kv-changelog", 3)
    cp_path = os.path.join(tmp_path, APP, "0_3", ".checkpoint")
    consumer = MemoryRestoreConsumer({tp: [(b"a", L(1), 0), (b"b", L(2), 0)]})
    changelogs = {"kv": "app-kv-changelog"}
    sm = ProcessorStateManager(TASK, APP, str(tmp_path), [kv_builder()], changelogs, True, {}, None, True)
    sm.init_stores(None, lambda: 0)
    assert sm.restore(consumer)["kv"][:3] == (0, 2, 2)
    sm.checkpoint()                                          # a standby checkpoints under EOS too
    assert open(cp_path, "rb").read() == b"0\n1\napp-kv-changelog 3 1\n"
    sm.close(True)
    sm2 = ProcessorStateManager(TASK, APP, str(tmp_path), [kv_builder()], changelogs, True, {}, None, True)
    sm2.init_stores(None, lambda: 0)
    assert os.path.exists(cp_path)                           # not deleted at a standby's init
    consumer.append(*tp, (b"c", L(3), 0))
    assert sm2.restore(consumer)["kv"][:3] == (2, 3, 1)      # only the gap
    assert [kv.key for kv in sm2.get_store("kv").all()] == ["a", "b", "c"]
    sm2.close(True)
    # promotion: the active task (EOS) reads the standby's checkpoint, deletes it, restores nothing
    env = Env(tmp_path, [kv_builder()], eos=True)
    assert not os.path.exists(cp_path)
    assert env.sm.restore(consumer)["kv"][:3] == (3, 3, 0)
    assert env.store("kv").get("c") == 3
    env.sm.close(True)


def test_reads_from_another_thread_leave_the_cache_alone(tmp_path):
    import threading
    env, kv, out = cached_kv(tmp_path, cache_bytes=90)
    kv.put("a", 1)
    env.sm.flush()
    kv.put("b", 2)
    kv.put("c", 3)
    kv.put("d", 4)                                          # evicts a (clean): "a" now only in the store below
    seen = []
    t = threading.Thread(target=lambda: seen.extend([kv.get("a"), kv.get("b")]))
    t.start()
    t.join()
    assert seen == [1, 2]
    assert env.sm.thread_cache.size_bytes() == 90           # no clean entry for "a" from the query thread
    kv.put("e", 5)                                          # evicts b: the query did not refresh it
    assert [o[0] for o in out] == ["a", "b", "c", "d", "e"]
    env.sm.close(True)


@pytest.mark.parametrize("kind", KINDS)
def test_changelog_round_trip_restores_every_store_type(tmp_path, kind):
    def builders():
        return [
            Stores.key_value_store_builder(kv_supplier(kind), Serdes.String(), Serdes.Long()),
            Stores.timestamped_window_store_builder(window_supplier(kind, 10_000, 100), Serdes.String(),
                                                    Serdes.Long()).with_caching_enabled(),
            Stores.session_store_builder(session_supplier(kind, 10_000), Serdes.String(), Serdes.Long()),
        ]
    env = Env(tmp_path / "one", builders())
    kv, w, s = env.store("kv"), env.store("w"), env.store("s")
    for i in range(20):
        env.ts = 1000 + i
        kv.put(f"k{i % 7}", i)
        w.put(f"k{i % 3}", ValueAndTimestamp(i, 1000 + i), (i % 4) * 100)
        s.put(Windowed(f"k{i % 5}", Window(i * 10, i * 10 + 5)), i)
        if i % 6 == 5:
            kv.delete(f"k{i % 7}")
            s.remove(Windowed(f"k{i % 5}", Window(i * 10, i * 10 + 5)))
    env.sm.flush()
    def contents(e):
        return list(e.store("kv").all()), list(e.store("w").all()), list(e.store("s").fetch_range(None, None))
    expected = contents(env)
    logs = {}
    for topic, key, value, ts, partition in env.collector.sent:
        logs.setdefault((topic, partition), []).append((key, value, ts))
    assert set(logs) == {("app-kv-changelog", 3), ("app-w-changelog", 3), ("app-s-changelog", 3)}
    env.sm.close(True)
    env2 = Env(tmp_path / "two", builders())
    results = env2.sm.restore(MemoryRestoreConsumer(logs))
    assert {name: r.records for name, r in results.items()} == {name: len(logs[(f"app-{name}-changelog", 3)])
                                                                for name in ("kv", "w", "s")}
    assert contents(env2) == expected
    assert len(expected[0]) == 6 and len(expected[1]) == 12 and len(expected[2]) == 17
    env2.sm.close(True)


def test_lru_map_evicts_least_recently_used_and_logs_tombstones(tmp_path):
    env = Env(tmp_path, [Stores.key_value_store_builder(Stores.lru_map("lru", 2), Serdes.String(), Serdes.Long())])
    lru = env.store("lru")
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.get("a") == 1          # a is now the most recently used
    lru.put("c", 3)                   # evicts b
    assert list(lru.all()) == [("a", 1), ("c", 3)] and lru.approximate_num_entries() == 2
    # the eviction happens inside the put below the logging layer: b's tombstone precedes c (Kafka's order too)
    assert env.collector.sent == [("app-lru-changelog", b"a", L(1), 0, 3), ("app-lru-changelog", b"b", L(2), 0, 3),
                                  ("app-lru-changelog", b"b", None, 0, 3), ("app-lru-changelog", b"c", L(3), 0, 3)]
    with pytest.raises(ValueError, match="maxCacheSize cannot be negative"):
        Stores.lru_map("x", -1)
    env.sm.close(True)


@pytest.mark.parametrize("kind", KINDS)
def test_cached_range_merges_cache_over_store(tmp_path, kind):
    env, kv, out = cached_kv(tmp_path, kind)
    for k, v in (("b", 1), ("d", 2), ("f", 3), ("h", 4)):
        kv.put(k, v)
    env.sm.flush()                                # b, d, f, h in the store below
    kv.put("a", 10)                               # cached only, before every stored key
    kv.put("d", 20)                               # cached over a stored key
    kv.delete("f")                                # cached delete hides the stored f
    kv.put("g", 30)                               # cached only, between stored keys
    kv.put("z", 40)                               # cached only, after every stored key
    assert list(kv.all()) == [("a", 10), ("b", 1), ("d", 20), ("g", 30), ("h", 4), ("z", 40)]
    assert list(kv.reverse_all()) == [("z", 40), ("h", 4), ("g", 30), ("d", 20), ("b", 1), ("a", 10)]
    assert list(kv.range("c", "g")) == [("d", 20), ("g", 30)]
    assert list(kv.reverse_range("b", "h")) == [("h", 4), ("g", 30), ("d", 20), ("b", 1)]
    assert list(kv.prefix_scan("g", Serdes.String())) == [("g", 30)]
    env.sm.close(True)
