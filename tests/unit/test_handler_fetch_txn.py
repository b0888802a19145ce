"""Fetch and ListOffsets with isolation levels (KIP-98): read_committed stops at the LSO and gets the aborted
transactions, read_uncommitted sees everything with aborted_transactions null, last_stable_offset for all,
a parked read_committed fetch wakes when a marker moves the LSO; ListOffsets latest = LSO for read_committed."""
import time

import gevent
import pytest

from kbroker.handlers.fetch import fetch as fetch_handler
from kbroker.handlers.list_offsets import list_offsets as list_offsets_handler
from kbroker.record import Record, build_batch, iter_records, legacy
from kbroker.server.connection import CloseConnection
from tests.unit.test_handler_fetch import Ctx, Replicas, req


def now():
    return int(time.time() * 1000)


def data(n, pid=-1, seq=-1, txn=False):
    return build_batch([Record(i, now(), None, b"v%d" % i, ()) for i in range(n)], producer_id=pid,
                       producer_epoch=0 if pid >= 0 else -1, base_sequence=seq, is_transactional=txn)


def fetch(replicas, offset, isolation, version=11, max_wait=0, min_bytes=0):
    r = req([("t", 0, offset, 1 << 20)], max_wait=max_wait, min_bytes=min_bytes)
    r["isolation_level"] = isolation
    p = fetch_handler(Ctx(replicas, version), r)["responses"][0]["partitions"][0]
    rec = p["records"]
    raw = rec.read_bytes() if hasattr(rec, "read_bytes") else bytes(rec)
    return p, [o for o, *_ in iter_records(raw)]


@pytest.fixture
def rs(tmp_path):
    rs = Replicas(tmp_path, [("t", 0)])
    part = rs.parts[("t", 0)]
    part.append(data(2), 9, 1)                                  # 0-1
    part.append(data(2, pid=5, seq=0, txn=True), 9, 1)          # 2-3 pid 5
    part.append(data(1, pid=6, seq=0, txn=True), 9, 1)          # 4   pid 6
    part.write_marker(5, 0, 0, commit=False)                    # 5   ABORT pid 5
    part.append(data(1), 9, 1)                                  # 6
    return rs


def test_read_committed_stops_at_the_lso(rs):
    p, offsets = fetch(rs, 0, 1)
    assert (p["high_watermark"], p["last_stable_offset"]) == (7, 4)
    assert offsets == [0, 1, 2, 3]                               # aborted records are sent; the client drops them
    assert p["aborted_transactions"] == [{"producer_id": 5, "first_offset": 2}]
    p, offsets = fetch(rs, 4, 1)
    assert offsets == [] and p["aborted_transactions"] == [] and p["error_code"] == 0
    p, offsets = fetch(rs, 0, 0)
    assert offsets == [0, 1, 2, 3, 4, 6] and p["aborted_transactions"] is None
    assert p["last_stable_offset"] == 4
    rs.parts[("t", 0)].write_marker(6, 0, 0, commit=True)      # 7
    p, offsets = fetch(rs, 0, 1)
    assert p["last_stable_offset"] == 8 and offsets == [0, 1, 2, 3, 4, 6]
    assert p["aborted_transactions"] == [{"producer_id": 5, "first_offset": 2}]
    p, offsets = fetch(rs, 6, 1)
    assert offsets == [6] and p["aborted_transactions"] == []


def test_old_versions_ignore_isolation(rs):
    r = req([("t", 0, 0, 1 << 20)])
    r["isolation_level"] = 1
    p = fetch_handler(Ctx(rs, 3), r)["responses"][0]["partitions"][0]
    assert [m.offset for m in legacy.iter_messages(bytes(p["records"]))] == [0, 1, 2, 3, 4, 6]


def test_unknown_isolation_level_closes(rs):
    with pytest.raises(CloseConnection):
        fetch(rs, 0, 2)


def test_parked_read_committed_fetch_wakes_on_the_marker(rs):
    got = gevent.spawn(fetch, rs, 4, 1, 11, 5000, 1)
    gevent.sleep(0.05)
    assert not got.ready()
    t0 = time.monotonic()
    rs.parts[("t", 0)].write_marker(6, 0, 0, commit=True)
    p, offsets = got.get(timeout=5)
    assert time.monotonic() - t0 < 2
    assert offsets == [4, 6] and p["last_stable_offset"] == 8


def test_list_offsets_latest_is_the_lso_for_read_committed(rs):
    def latest(isolation, ts=-1):
        r = {"replica_id": -1, "isolation_level": isolation,
             "topics": [{"name": "t", "partitions": [{"partition_index": 0, "timestamp": ts,
                                                      "current_leader_epoch": -1, "max_num_offsets": 1}]}]}
        return list_offsets_handler(Ctx(rs, 5), r)["topics"][0]["partitions"][0]["offset"]
    assert latest(0) == 7 and latest(1) == 4
    assert latest(1, ts=now() - 60_000) == 0
    rs.parts[("t", 0)].write_marker(6, 0, 0, commit=True)
    assert latest(1) == 8
