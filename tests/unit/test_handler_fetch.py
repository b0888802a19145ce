"""Fetch size rules (KIP-74 for v3+, Kafka's hardMaxBytesLimit for v0-v2, fetch.max.bytes), repeated partitions,
budgeted down-conversion off the event loop, and ListOffsets' record-level timestamp lookup -- in process, on real
Logs and Partitions (see kbroker/handlers/fetch.py and list_offsets.py for the rules)."""
import os
import struct
import time

import gevent
import pytest

from kbroker import errors
from kbroker.handlers.down_conversion import convert_within
from kbroker.handlers.fetch import fetch as fetch_handler
from kbroker.handlers.list_offsets import first_record_at_or_after
from kbroker.handlers.list_offsets import list_offsets as list_offsets_handler
from kbroker.log.config import LogConfig
from kbroker.log.log import Log
from kbroker.record import Record, build_batch, iter_batches
from kbroker.record import legacy
from kbroker.replica.partition import Partition
from tests.unit.ctx import make_ctx

TS = 1_700_000_000_000


def Ctx(replicas, version):
    """The handler's context: ``replicas`` as the replica collaborator, its ``config`` as the broker config."""
    return make_ctx(version, replicas=replicas, config=replicas.config)


class Replicas:
    """The replica collaborator (ReplicaAccess) leading every partition it holds, on real Logs and Partitions;
    ``config`` carries the broker keys the handlers read."""

    def __init__(self, tmp_path, names, config=None, isr=(1,)):
        self.config = dict(config or {})
        self.parts = {}
        for topic, p in names:
            lc = LogConfig(max_message_bytes=4 << 20)  # room for the 1 MiB records of the issue
            lg = Log(str(tmp_path / ("%s-%d" % (topic, p))), lc)
            part = Partition(topic, p, lg, lc, 1)
            part.make_leader(1, list(isr), sorted(set(isr) | {1}), 0)
            self.parts[(topic, p)] = part

    def get_partition(self, topic, p):
        return self.parts.get((topic, p))

    def leader_partition(self, topic, p):
        part = self.parts.get((topic, p))
        if part is None:
            raise errors.UnknownTopicOrPartition("%s-%d" % (topic, p))
        return part

    def append(self, topic, p, records, codec=0, lat=False):
        part = self.parts[(topic, p)]
        part.append(build_batch(records, codec=codec), None, 1)
        return part


def recs(n, size, ts=TS, key=None):
    return [Record(i, ts + i, key, bytes([65 + i % 26]) * size) for i in range(n)]


def req(parts, max_bytes=1 << 30, min_bytes=0, max_wait=0, replica_id=-1):
    """``parts``: [(topic, partition, fetch_offset, partition_max_bytes)] in wire order (repeats allowed)."""
    topics = []
    for topic, p, offset, pmb in parts:
        if not topics or topics[-1]["topic"] != topic:
            topics.append({"topic": topic, "partitions": []})
        topics[-1]["partitions"].append({"partition": p, "current_leader_epoch": -1, "fetch_offset": offset,
                                         "log_start_offset": -1, "partition_max_bytes": pmb})
    return {"replica_id": replica_id, "max_wait_ms": max_wait, "min_bytes": min_bytes, "max_bytes": max_bytes,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [],
            "rack_id": "", "topics": topics}


def answers(resp):
    """{(topic, p): (error_code, high_watermark, record bytes)} and the wire order of the partitions."""
    out, order = {}, []
    for t in resp["responses"]:
        for p in t["partitions"]:
            recs_ = p["records"]
            data = recs_ if isinstance(recs_, (bytes, bytearray)) else recs_.read_bytes()
            out[(t["topic"], p["partition_index"])] = (p["error_code"], p["high_watermark"], bytes(data))
            order.append((t["topic"], p["partition_index"]))
    return out, order


def batch_sizes(data):
    return [h.size for _pos, h in iter_batches(data)]


def legacy_offsets(data):
    return [m.offset for m in legacy.iter_messages(data, allow_partial_tail=True)]


# ------------------------------------------------------------------------------------------- v3+ (KIP-74)

@pytest.fixture
def two_big(tmp_path):
    """a-0 and a-1 each hold one 1 MiB-record batch; the KIP-74 cases of the issue."""
    b = Replicas(tmp_path, [("a", 0), ("a", 1)])
    for p in (0, 1):
        b.append("a", p, recs(1, 1 << 20))
    return b


@pytest.mark.parametrize("version", [4, 11])
def test_second_partition_with_a_batch_larger_than_what_is_left_gets_nothing(two_big, version):
    size = batch_sizes(two_big.parts[("a", 0)].read(0, 1 << 30).region.read_bytes())[0]
    assert size > 1 << 20
    # partition_max_bytes 1 MiB (the consumers' default), response max 50 MiB: the first partition with data
    # gets its whole batch although it is larger than 1 MiB; the second's batch does not fit 1 MiB -> empty.
    got, order = answers(fetch_handler(Ctx(two_big, version), req([("a", 0, 0, 1 << 20), ("a", 1, 0, 1 << 20)],
                                                                   max_bytes=50 << 20)))
    assert order == [("a", 0), ("a", 1)]
    assert got[("a", 0)][:2] == (0, 1) and batch_sizes(got[("a", 0)][2]) == [size]
    assert got[("a", 1)] == (0, 1, b"")  # error NONE, high watermark set, no bytes -- never a cut batch
    # The next fetch (from offset 1 on a-0) serves a-1 first in line: whole.
    got, _ = answers(fetch_handler(Ctx(two_big, version), req([("a", 0, 1, 1 << 20), ("a", 1, 0, 1 << 20)])))
    assert got[("a", 0)] == (0, 1, b"") and batch_sizes(got[("a", 1)][2]) == [size]


@pytest.mark.parametrize("version", [2, 4, 11])
def test_a_consumer_at_the_high_watermark_is_answered_without_a_read(tmp_path, version):
    """An idle partition (fetch offset == HW): no records, no error, its offsets -- and its log is not read (the
    handler's fast path). Below the HW it is read; between the HW and the LEO empty, no error; past the LEO
    OFFSET_OUT_OF_RANGE, as before."""
    b = Replicas(tmp_path, [("a", 0), ("b", 0)], isr=(1, 2))   # b-0's follower never fetches: its HW stays 0
    b.append("a", 0, recs(3, 10))
    b.parts[("a", 0)].make_leader(2, [1], [1, 2], 0)            # a-0 shrinks to ISR {1}: its HW is its LEO, 3
    b.append("b", 0, recs(3, 10))
    a = b.parts[("a", 0)]
    assert (a.high_watermark, a.log_end_offset) == (3, 3)
    assert (b.parts[("b", 0)].high_watermark, b.parts[("b", 0)].log_end_offset) == (0, 3)
    reads = []
    for part in b.parts.values():
        part.read = (lambda real: lambda *x, **k: reads.append(x[0]) or real(*x, **k))(part.read)

    resp = fetch_handler(Ctx(b, version), req([("a", 0, 3, 1 << 20), ("b", 0, 0, 1 << 20)]))
    got = {(t["topic"], p["partition_index"]): p for t in resp["responses"] for p in t["partitions"]}
    for key, hw in ((("a", 0), 3), (("b", 0), 0)):
        p = got[key]
        assert (p["error_code"], p["high_watermark"], p["log_start_offset"], p["records"]) == (0, hw, 0, b"")
        if version >= 4:
            assert p["last_stable_offset"] == hw
    assert reads == []

    got, _ = answers(fetch_handler(Ctx(b, version), req([("a", 0, 2, 1 << 20), ("b", 0, 2, 1 << 20)])))
    assert reads == [2, 2]
    assert got[("a", 0)][:2] == (0, 3) and len(got[("a", 0)][2]) > 0   # below the HW: the last record
    assert got[("b", 0)] == (0, 0, b"")                                  # between the HW and the LEO: empty
    got, _ = answers(fetch_handler(Ctx(b, version), req([("a", 0, 4, 1 << 20)])))
    assert reads == [2, 2, 4] and got[("a", 0)][0] == errors.OFFSET_OUT_OF_RANGE   # past the LEO


def test_response_max_bytes_is_enforced_across_partitions(tmp_path):
    b = Replicas(tmp_path, [("m", p) for p in range(4)])
    for p in range(4):
        for _ in range(3):
            b.append("m", p, recs(1, 500))
    one = batch_sizes(b.parts[("m", 0)].read(0, 1 << 30).region.read_bytes())[0]
    budget = 4 * one + 10
    resp = fetch_handler(Ctx(b, 11), req([("m", p, 0, 1 << 20) for p in range(4)], max_bytes=budget))
    got, _ = answers(resp)
    sizes = [len(got[("m", p)][2]) for p in range(4)]
    # m-0 takes its 3 batches (3 * one); m-1 has one + 10 left: one whole batch and a 10-byte tail; then nothing.
    assert sizes == [3 * one, one + 10, 0, 0]
    assert batch_sizes(got[("m", 1)][2]) == [one]
    assert sum(sizes) == budget


def test_broker_fetch_max_bytes_caps_the_request(tmp_path):
    b = Replicas(tmp_path, [("c", 0)], config={"fetch.max.bytes": 1024})
    for _ in range(10):
        b.append("c", 0, recs(1, 300))
    got, _ = answers(fetch_handler(Ctx(b, 11), req([("c", 0, 0, 1 << 20)], max_bytes=1 << 30)))
    assert len(got[("c", 0)][2]) == 1024
    # v0-v2 carry no response limit: the broker key is their only bound (down-converted bytes count).
    got, _ = answers(fetch_handler(Ctx(b, 1), req([("c", 0, 0, 1 << 20)])))
    data = got[("c", 0)][2]
    # 1024 stored bytes hold 2 whole 370-byte batches; converted, they are 2 magic 0 messages of 326 bytes
    # (12 log overhead + crc, magic, attributes, key and value lengths 14 + 300).
    one = len(convert_within(b.parts[("c", 0)].read(0, 1).first_batch_region().read_bytes(), 0, 1 << 30, False,
                             True))
    assert one == 326 and legacy_offsets(data) == [0, 1] and len(data) == 2 * one
    # With room for 1 stored batch + 100 bytes the converted cut follows the stored read: 1 message, whole.
    got, _ = answers(fetch_handler(Ctx(b, 1), req([("c", 0, 0, 370 + 100)])))
    assert legacy_offsets(got[("c", 0)][2]) == [0] and len(got[("c", 0)][2]) == one


def test_v0_v2_partition_cut_by_the_response_budget_gets_nothing(tmp_path):
    b = Replicas(tmp_path, [("v", 0), ("v", 1)], config={"fetch.max.bytes": 1500})
    b.append("v", 0, recs(1, 1000))
    b.append("v", 1, recs(1, 1000))
    got, _ = answers(fetch_handler(Ctx(b, 2), req([("v", 0, 0, 4000), ("v", 1, 0, 4000)])))
    assert legacy_offsets(got[("v", 0)][2]) == [0]
    # 1500 - 1034 bytes are left for v-1, whose 1034-byte message fits its own 4000: no cut (the client would
    # raise RecordTooLarge and grow a fetch size that is not the problem) -- nothing, until the next fetch.
    assert len(got[("v", 0)][2]) == 1034 and got[("v", 1)] == (0, 1, b"")
    got, _ = answers(fetch_handler(Ctx(b, 2), req([("v", 0, 1, 4000), ("v", 1, 0, 4000)])))
    assert legacy_offsets(got[("v", 1)][2]) == [0]


def test_min_bytes_is_capped_by_the_response_budget(tmp_path):
    b = Replicas(tmp_path, [("w", 0)], config={"fetch.max.bytes": 1024})
    for _ in range(10):
        b.append("w", 0, recs(1, 300))
    started = time.monotonic()
    resp = fetch_handler(Ctx(b, 11), req([("w", 0, 0, 1 << 20)], min_bytes=1 << 20, max_wait=3000))
    assert time.monotonic() - started < 1.0  # 1024 bytes can never reach min_bytes 1 MiB: no pointless wait
    assert len(answers(resp)[0][("w", 0)][2]) == 1024


# ---------------------------------------------------------------------------------- repeated partitions

def test_a_partition_named_300_times_is_served_once_at_its_first_position(tmp_path):
    b = Replicas(tmp_path, [("d", 0), ("d", 1)])
    for p in (0, 1):
        for _ in range(4):
            b.append("d", p, recs(1, 1000))
    parts = [("d", 0, 0, 1 << 20)] + [("d", 1, 0, 1 << 20)] * 298 + [("d", 1, 2, 1 << 20), ("d", 0, 3, 1 << 20)]
    for version in (2, 11):
        resp = fetch_handler(Ctx(b, version), req(parts, max_bytes=1 << 30))
        got, order = answers(resp)
        assert order == [("d", 0), ("d", 1)]  # one answer each, in order of first mention
        # ... with the fields of the last mention: d-0 from offset 3, d-1 from offset 2.
        if version == 11:
            assert [h.base_offset for _p, h in iter_batches(got[("d", 0)][2])] == [3]
            assert [h.base_offset for _p, h in iter_batches(got[("d", 1)][2])] == [2, 3]
        else:
            assert legacy_offsets(got[("d", 0)][2]) == [3]
            assert legacy_offsets(got[("d", 1)][2]) == [2, 3]


# ------------------------------------------------------------------------------------- v0-v3 conversion

def test_v0_v2_get_a_cut_first_message_like_kafka_0_10(tmp_path):
    b = Replicas(tmp_path, [("o", 0), ("o", 1)])
    b.append("o", 0, recs(1, 5000))
    b.append("o", 1, recs(1, 100))
    for version, magic in ((0, 0), (2, 1)):
        got, _ = answers(fetch_handler(Ctx(b, version), req([("o", 0, 0, 1000), ("o", 1, 0, 1000)])))
        data = got[("o", 0)][2]
        assert len(data) == 1000  # the first message, cut at partition_max_bytes: clients see "too large"
        offset, size = struct.unpack_from(">qi", data)
        assert (offset, data[16]) == (0, magic) and size + 12 > 1000
        assert legacy_offsets(data) == []
        assert legacy_offsets(got[("o", 1)][2]) == [0]  # the next partition is served normally


def test_v3_counts_converted_bytes_and_keeps_whole_converted_batches(tmp_path):
    b = Replicas(tmp_path, [("e", 0), ("e", 1)])
    for p in (0, 1):
        for _ in range(6):
            b.append("e", p, recs(20, 10))  # stored ~400 bytes, converted to magic 1: 20 * 44 = 880 bytes
    stored = batch_sizes(b.parts[("e", 0)].read(0, 1 << 30).region.read_bytes())[0]
    converted = len(convert_within(b.parts[("e", 0)].read(0, stored).region.read_bytes(), 1, 1 << 30, False,
                                   False))
    assert converted > 2 * stored
    limit = 2 * converted + 100
    got, _ = answers(fetch_handler(Ctx(b, 3), req([("e", 0, 0, limit), ("e", 1, 0, limit)],
                                                  max_bytes=3 * converted - 1)))
    first, second = got[("e", 0)][2], got[("e", 1)][2]
    # e-0 reads 2 * converted + 100 stored bytes (4+ stored batches) but only 2 converted batches fit its limit.
    assert len(first) == 2 * converted and legacy_offsets(first) == list(range(40))
    assert second == b""  # one converted batch would exceed what is left (converted - 1): nothing
    got, _ = answers(fetch_handler(Ctx(b, 3), req([("e", 0, 0, limit), ("e", 1, 0, limit)],
                                                  max_bytes=3 * converted)))
    assert len(got[("e", 1)][2]) == converted  # ... and with one more byte of budget, exactly one
    # First partition with data: the whole first converted batch even when it exceeds every limit.
    got, _ = answers(fetch_handler(Ctx(b, 3), req([("e", 1, 0, 10)], max_bytes=10)))
    assert len(got[("e", 1)][2]) == converted


def test_convert_within_rules():
    b0 = build_batch(recs(3, 10), base_offset=0)
    b1 = build_batch(recs(3, 10), base_offset=3)
    bz = build_batch(recs(3, 10), base_offset=6, codec=4)  # zstd: not expressible in magic 0/1
    one = len(convert_within(b0, 1, 1 << 30, False, False))
    assert convert_within(b0 + b1, 1, 2 * one, False, False) == convert_within(b0 + b1, 1, 1 << 30, False, False)
    assert len(convert_within(b0 + b1, 1, 2 * one - 1, False, False)) == one
    assert len(convert_within(b0 + b1, 1, 2 * one - 1, False, True)) == one  # only a first message is ever cut
    assert convert_within(b0 + b1, 1, one - 1, False, True) == convert_within(b0, 1, one, False, False)[:one - 1]
    assert convert_within(b0, 1, 1, False, False) == b""
    assert len(convert_within(b0, 1, 0, True, False)) == one                          # min_one
    assert convert_within(b0 + b1[:40], 1, 1 << 30, False, False) == convert_within(b0, 1, 1 << 30, False, False)
    assert legacy_offsets(convert_within(b0 + bz, 1, 1 << 30, False, False)) == [0, 1, 2]  # stops before zstd
    with pytest.raises(errors.UnsupportedCompressionType):
        convert_within(bz + b0, 1, 1 << 30, True, False)


def test_zstd_first_in_line_for_an_old_client_is_error_76(tmp_path):
    b = Replicas(tmp_path, [("z", 0)])
    b.append("z", 0, recs(2, 10), codec=4)
    got, _ = answers(fetch_handler(Ctx(b, 3), req([("z", 0, 0, 1 << 20)])))
    assert got[("z", 0)] == (76, 2, b"")


def _huge_gzip_batch(n):
    """One gzip v2 batch of ``n`` records with null key and value (~2.7 bytes per record stored)."""
    return build_batch([Record(i, TS, None, None) for i in range(n)], codec=1)


def test_down_conversion_does_not_hold_the_event_loop(tmp_path):
    b = Replicas(tmp_path, [("h", 0)])
    n = 99_000  # just below workers.DECODE_MAX_RECORDS: ~0.3-0.6 s of conversion
    b.parts[("h", 0)].append(_huge_gzip_batch(n), None, 1)
    gaps = []

    def ticker():
        last = time.monotonic()
        while True:
            gevent.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    t = gevent.spawn(ticker)
    gevent.sleep(0.05)
    started = time.monotonic()
    got, _ = answers(fetch_handler(Ctx(b, 2), req([("h", 0, 0, 1 << 30)], max_bytes=1 << 30)))
    took = time.monotonic() - started
    gevent.sleep(0.03)  # the ticker's first tick after the fetch records a stall the fetch may have caused
    t.kill()
    data = got[("h", 0)][2]
    wrapper = next(legacy.iter_messages(data))
    assert wrapper.offset == n - 1 and wrapper.codec == 1  # one gzip wrapper holding the whole batch
    assert took > 0.15, "the conversion is too cheap to show anything; make the batch bigger"
    # Run on the loop, the conversion would be one gap as long as itself. The worker leaves only scheduling noise
    # (~50 ms on a loaded 2-core machine: other processes, and the GIL kept while a batch's records are freed).
    assert max(gaps) < min(0.2, took * 0.6), "the event loop stalled %.3f s during a %.2f s conversion" % (
        max(gaps), took)


def test_a_batch_too_big_to_decode_is_unsupported_version_for_old_clients(tmp_path, monkeypatch):
    import kbroker.handlers.down_conversion as dc_mod
    import kbroker.handlers.list_offsets as lo_mod
    monkeypatch.setattr(dc_mod, "DECODE_MAX_RECORDS", 1000)
    monkeypatch.setattr(lo_mod, "DECODE_MAX_RECORDS", 1000)
    b = Replicas(tmp_path, [("u", 0)])
    b.append("u", 0, recs(5, 10))
    part = b.parts[("u", 0)]
    part.append(build_batch([Record(i, TS + 100 + i, None, None) for i in range(1001)], codec=1), None, 1)
    got, _ = answers(fetch_handler(Ctx(b, 3), req([("u", 0, 0, 1 << 20)])))
    assert got[("u", 0)][0] == 0 and legacy_offsets(got[("u", 0)][2]) == [0, 1, 2, 3, 4]  # stops before it
    got, _ = answers(fetch_handler(Ctx(b, 3), req([("u", 0, 5, 1 << 20)])))
    assert got[("u", 0)] == (35, 1006, b"")                 # first in line: UNSUPPORTED_VERSION, nothing decoded
    got, _ = answers(fetch_handler(Ctx(b, 11), req([("u", 0, 5, 1 << 20)])))
    assert got[("u", 0)][0] == 0 and batch_sizes(got[("u", 0)][2])  # v4+ get it as stored
    # ListOffsets does not decode it either: the batch's base offset and max timestamp (at or before the record).
    assert _lo(list_offsets_handler(Ctx(b, 1), lo_req(TS + 600, topic="u")))[:3] == (0, 5, TS + 1100)
    monkeypatch.setattr(lo_mod, "DECODE_MAX_RECORDS", 2000)
    assert _lo(list_offsets_handler(Ctx(b, 1), lo_req(TS + 600, topic="u")))[:3] == (0, 505, TS + 600)


# ------------------------------------------------------------------------------------------ followers

def test_follower_position_is_recorded_for_every_partition_even_past_the_budget(tmp_path):
    b = Replicas(tmp_path, [("f", 0), ("f", 1)], isr=(1, 2))
    for p in (0, 1):
        b.append("f", p, recs(2, 2000))
    # Replica 2 has both partitions in full (offset 2); the budget is spent on f-0's read from 0.
    resp = fetch_handler(Ctx(b, 11), req([("f", 0, 0, 1 << 20), ("f", 1, 2, 1 << 20)], max_bytes=10,
                                         replica_id=2))
    got, _ = answers(resp)
    assert len(got[("f", 0)][2]) > 0 and got[("f", 1)][2] == b""
    assert b.parts[("f", 1)].followers[2].leo == 2
    assert b.parts[("f", 1)].high_watermark == 2  # the follower's position advanced the HW past the budget


# ------------------------------------------------------------------------------------------ ListOffsets

@pytest.mark.parametrize("codec", [0, 1, 2, 3])
def test_first_record_at_or_after_looks_inside_the_batch(codec):
    batch = bytearray(build_batch([Record(i, TS + 10 * i, None, b"v%d" % i) for i in range(5)], base_offset=40,
                                  codec=codec, partition_leader_epoch=7))
    assert first_record_at_or_after(batch, TS) == (40, TS, 7)
    assert first_record_at_or_after(batch, TS + 11) == (42, TS + 20, 7)
    assert first_record_at_or_after(batch, TS + 40) == (44, TS + 40, 7)
    assert first_record_at_or_after(batch, TS + 41) is None


def lo_req(ts, partition=0, topic="l"):
    return {"replica_id": -1, "isolation_level": 0,
            "topics": [{"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                                       "timestamp": ts, "max_num_offsets": 1}]}]}


def _lo(resp):
    p = resp["topics"][0]["partitions"][0]
    return p["error_code"], p["offset"], p["timestamp"], p["leader_epoch"]


def test_list_offsets_by_time_answers_the_record_not_the_batch(tmp_path):
    b = Replicas(tmp_path, [("l", 0)])
    part = b.parts[("l", 0)]
    part.make_leader(3, [1], [1], 0)
    # Two batches of 5 records, timestamps TS, TS+10, ..., TS+90 (offsets 0..9).
    part.append(build_batch([Record(i, TS + 10 * i, None, b"x") for i in range(5)], codec=1), None, 1)
    part.append(build_batch([Record(i, TS + 50 + 10 * i, None, b"y") for i in range(5)]), None, 1)
    for version in (1, 4):
        assert _lo(list_offsets_handler(Ctx(b, version), lo_req(TS + 25)))[:3] == (0, 3, TS + 30)
        assert _lo(list_offsets_handler(Ctx(b, version), lo_req(TS + 70)))[:3] == (0, 7, TS + 70)
        assert _lo(list_offsets_handler(Ctx(b, version), lo_req(TS + 91)))[:3] == (0, -1, -1)
    assert _lo(list_offsets_handler(Ctx(b, 4), lo_req(TS + 25)))[3] == 3    # the batch's leader epoch
    assert _lo(list_offsets_handler(Ctx(b, 4), lo_req(-2))) == (0, 0, -1, 3)
    assert _lo(list_offsets_handler(Ctx(b, 4), lo_req(-1))) == (0, 10, -1, 3)
    resp = list_offsets_handler(Ctx(b, 0), lo_req(TS + 25))
    assert resp["topics"][0]["partitions"][0]["old_style_offsets"] == [3]


# ----------------------------------------------------------------------------------- spilled conversions

def test_large_converted_results_spill_to_a_budgeted_temporary_file(tmp_path, monkeypatch):
    import gc

    import kbroker.handlers.down_conversion as dc
    from kbroker.log.file_region import FileRegion

    spill = dc.SpillBudget(3 << 20)
    monkeypatch.setattr(dc, "SPILL", spill)
    b = Replicas(tmp_path, [("s", 0), ("s", 1)])
    for p in (0, 1):
        for i in range(4):
            b.append("s", p, [Record(0, TS + i, None, bytes([i]) * 600_000)])
    before = set(os.listdir(tmp_path / "s-0"))
    resp = fetch_handler(Ctx(b, 2), req([("s", 0, 0, 8 << 20), ("s", 1, 0, 8 << 20)]))
    parts = resp["responses"][0]["partitions"]
    recs0, recs1 = parts[0]["records"], parts[1]["records"]
    # Response budget: 1 MiB of memory + 3 MiB granted = 4 MiB. s-0: 4 x 600 KB converted = 2.4 MB > 1 MiB of
    # memory: spilled; s-1: the 1.6 MB left hold 2 whole messages, spilled as well.
    assert isinstance(recs0, FileRegion) and isinstance(recs1, FileRegion)
    assert [m.offset for m in legacy.iter_messages(recs0.read_bytes())] == [0, 1, 2, 3]
    assert [m.offset for m in legacy.iter_messages(recs1.read_bytes())] == [0, 1]
    assert recs0.size + recs1.size <= 4 << 20
    assert spill.used == recs0.size + recs1.size  # held by the regions until they are sent
    assert recs0.fileno() == recs1.fileno() and recs1.position == recs0.size  # one file per response
    assert set(os.listdir(tmp_path / "s-0")) == before  # an unlinked file: nothing for the loader to find
    fd = recs0.fileno()
    spill_file = (os.fstat(fd).st_dev, os.fstat(fd).st_ino)
    del resp, parts, recs0, recs1
    gc.collect()
    assert spill.used == 0
    try:                         # closed with the region: the fd is gone, or reused by a file some other thread
        now = os.fstat(fd)       # (a client an earlier test left alive) opened since -- never the spill file
    except OSError:
        now = None
    assert now is None or (now.st_dev, now.st_ino) != spill_file
    # With the budget spent by someone else, a response gets the 1 MiB of memory only -- and no cut message.
    spill.force(3 << 20)
    got, _ = answers(fetch_handler(Ctx(b, 2), req([("s", 0, 0, 8 << 20), ("s", 1, 0, 8 << 20)])))
    assert legacy_offsets(got[("s", 0)][2]) == [0] and got[("s", 1)][2] == b""
    assert len(got[("s", 0)][2]) < 1 << 20
    spill.give_back(3 << 20)
    assert spill.used == 0


def test_stored_batches_are_read_a_window_at_a_time(tmp_path, monkeypatch):
    import kbroker.handlers.down_conversion as dc

    monkeypatch.setattr(dc, "READ_WINDOW", 1000)
    b = Replicas(tmp_path, [("r", 0)])
    sizes = [100, 3000, 10, 900, 5000]  # batches smaller and larger than the window
    for i, n in enumerate(sizes):
        b.append("r", 0, [Record(0, TS + i, None, b"x" * n)])
    sl = b.parts[("r", 0)].read(0, 1 << 20)
    data = sl.region.read_bytes()
    got = [bytes(x) for x in dc._stored_batches(sl.region)]
    assert b"".join(got) == data and len(got) == 5
    cut = type(sl.region)(sl.region.file, sl.region.position, len(data) - 1)  # a partial last batch
    assert [bytes(x) for x in dc._stored_batches(cut)] == got[:4]


def test_records_per_conversion_job_are_bounded(monkeypatch):
    import kbroker.handlers.down_conversion as dc

    monkeypatch.setattr(dc, "MAX_RECORDS_PER_JOB", 25)
    batches = b"".join(build_batch(recs(10, 5), base_offset=10 * i) for i in range(5))
    assert legacy_offsets(convert_within(batches, 1, 1 << 30, False, False)) == list(range(20))
    big = build_batch(recs(40, 5), base_offset=0)
    assert len(legacy_offsets(convert_within(big + batches, 1, 1 << 30, False, False))) == 40  # first: whole
