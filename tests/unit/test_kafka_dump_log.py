"""Kafka's own decoder (kafka-dump-log.sh, Kafka 4.x DumpLogSegments) reads the files kbroker writes for
transactions: producer-state snapshots, cleaned segments holding markers (with and without a delete horizon) and empty
batches, and ``.txnindex`` files. Skipped outside CI when Kafka's jars are not in ~/.m2 (tests/kafka_tools)."""
import re

from kbroker.log import Log
from kbroker.log import producer_snapshot as ps
from tests.kafka_tools import dump_log
from tests.unit import test_cleaner_txn as t


def batches(out):
    """(baseOffset, lastOffset, count, producerId, isTransactional, isControl, deleteHorizonMs, isvalid) per batch."""
    pattern = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .*producerId: (-?\d+) .*"
                         r"isTransactional: (\w+) isControl: (\w+) deleteHorizonMs: (\S+) .*isvalid: (\w+)$")
    return [m.groups() for m in map(pattern.match, out.splitlines()) if m]


def test_kafka_decodes_a_producer_snapshot(tmp_path):
    entries = [ps.SnapshotEntry(1000, 3, 41, 1234, 4, 1_700_000_000_123, 7, 1200),
               ps.SnapshotEntry(7, 0, -1, -1, 0, 1_700_000_000_000, -1, -1)]
    path = ps.write(str(tmp_path), 1235, entries)
    out = dump_log(path)
    assert out.splitlines() == [
        "Dumping %s" % path,
        "producerId: 1000 producerEpoch: 3 coordinatorEpoch: 7 currentTxnFirstOffset: OptionalLong[1200] "
        "lastTimestamp: 1700000000123 firstSequence: 37 lastSequence: 41 lastOffset: 1234 offsetDelta: 4 "
        "timestamp: 1700000000123",
        "producerId: 7 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
        "lastTimestamp: 1700000000000",
    ]


def test_kafka_decodes_a_cleaned_transactional_segment_and_its_txnindex(tmp_path):
    log = Log(str(tmp_path / "t-0"), t.CFG)
    t.data(log, [(b"k1", b"v0")])
    t.data(log, [(b"k1", b"c1"), (b"k2", b"c2")], pid=100, transactional=True)
    t.marker(log, 100, True)
    t.data(log, [(b"k1", b"a1"), (b"k3", b"a3")], pid=200, transactional=True)
    t.abort(log, 200, 4)
    t.data(log, [(b"k1", b"n1"), (b"k2", b"n2")], pid=300, seq=0)
    t.data(log, [(b"k9", b"z")], pid=100, seq=2)     # producer 100's last batch is not its transaction's
    log.roll()
    t.clean_log(log, 0, t.NOW)            # aborted data out, committed data superseded, both markers kept
    t.clean_log(log, 0, t.NOW + 5)        # no data left of the committed one: its marker gets a horizon
    seg = log.dir + "/00000000000000000000"
    horizon = "OptionalLong[%d]" % (t.NOW + 5 + t.RETENTION)
    out = dump_log(seg + ".log", seg + ".txnindex", "--deep-iteration", "--print-data-log")
    assert batches(out) == [
        ("3", "3", "1", "100", "true", "true", horizon, "true"),
        ("4", "5", "0", "200", "true", "false", "OptionalLong.empty", "true"),   # producer 200's last batch
        ("6", "6", "1", "200", "true", "true", "OptionalLong.empty", "true"),    # it still holds that batch
        ("7", "8", "2", "300", "false", "false", "OptionalLong.empty", "true"),
        ("9", "9", "1", "100", "false", "false", "OptionalLong.empty", "true"),
    ]
    markers = [line.split("endTxnMarker: ")[1] for line in out.splitlines() if "endTxnMarker" in line]
    assert markers == ["COMMIT coordinatorEpoch: 5", "ABORT coordinatorEpoch: 5"]
    assert "version: 0 producerId: 200 firstOffset: 4 lastOffset: 6 lastStableOffset: 7" in out.splitlines()
    log.close()
