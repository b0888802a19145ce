"""ListOffsets v7's MAX_TIMESTAMP (-3, KIP-734): the first record carrying the partition's largest timestamp.

On real Logs and Partitions (the fixtures of tests/unit/test_handler_fetch.py). Kafka's Java admin sends it for
``OffsetSpec.maxTimestamp()`` and refuses to when the broker does not advertise ListOffsets v7.
"""
from kbroker.handlers import registry
from kbroker.handlers.list_offsets import list_offsets as list_offsets_handler
from kbroker.record import Record, build_batch
from kbroker.server.router import Router
from tests.unit.test_handler_fetch import TS, Ctx, Replicas, _lo, lo_req

MAX_TIMESTAMP = -3


def test_v7_is_advertised():
    assert (2, 0, 7) in Router(registry()).api_versions()


def test_max_timestamp_answers_the_first_record_holding_it(tmp_path):
    b = Replicas(tmp_path, [("l", 0)])
    part = b.parts[("l", 0)]
    part.make_leader(3, [1], [1], 0)
    # Offsets 0-4 at TS+0..40 (gzip); 5-9 out of order: TS+900 first reached at offset 7, again at 8.
    part.append(build_batch([Record(i, TS + 10 * i, None, b"x") for i in range(5)], codec=1), None, 1)
    stamps = [TS + 50, TS + 60, TS + 900, TS + 900, TS + 70]
    part.append(build_batch([Record(i, ts, None, b"y") for i, ts in enumerate(stamps)]), None, 1)
    assert _lo(list_offsets_handler(Ctx(b, 7), lo_req(MAX_TIMESTAMP))) == (0, 7, TS + 900, 3)
    # A later segment with smaller timestamps does not move it.
    part.log.roll()
    part.append(build_batch([Record(0, TS + 100, None, b"z")], codec=4), None, 1)
    assert _lo(list_offsets_handler(Ctx(b, 7), lo_req(MAX_TIMESTAMP))) == (0, 7, TS + 900, 3)
    # Not below the high watermark: nothing to answer yet (as for any timestamp).
    part.append(build_batch([Record(0, TS + 5000, None, b"w")]), None, 1)
    part.high_watermark = 11
    assert _lo(list_offsets_handler(Ctx(b, 7), lo_req(MAX_TIMESTAMP))) == (0, -1, -1, -1)


def test_max_timestamp_of_an_empty_partition_is_minus_one(tmp_path):
    b = Replicas(tmp_path, [("e", 0)])
    assert _lo(list_offsets_handler(Ctx(b, 7), lo_req(MAX_TIMESTAMP, topic="e")))[:3] == (0, -1, -1)
