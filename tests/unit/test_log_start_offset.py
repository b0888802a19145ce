"""The log start offset (KIP-107, DeleteRecords): reads below it, retention, truncation, the checkpoint file."""
import os

import pytest

from kbroker import errors
from kbroker.log import Log, LogConfig
from kbroker.log.manager import LOG_START_OFFSET_CHECKPOINT, LogManager
from kbroker.replica.partition import Partition

from .test_log_helpers import append_batch

VALUES = [b"v" * 21] * 3  # 3 records, one 145-byte batch: 6 batches (18 offsets) per 1000-byte segment


def _config(**kw):
    base = dict(segment_bytes=1000, segment_index_bytes=240, index_interval_bytes=200, file_delete_delay_ms=0)
    base.update(kw)
    return LogConfig(**base)


def _fill(log, n):
    for i in range(n):
        append_batch(log, VALUES, ts=1000 + i)


def test_increment_reads_and_retention(tmp_path):
    log = Log(str(tmp_path / "t-0"), _config(retention_ms=-1))
    _fill(log, 20)                                   # offsets 0..59, segments at 0, 18, 36, 54
    assert log.maybe_increment_log_start_offset(40) is True
    assert log.log_start_offset == 40
    assert log.maybe_increment_log_start_offset(30) is False     # never backwards
    with pytest.raises(errors.OffsetOutOfRange):
        log.read(39, 10 ** 6)
    # 40 sits inside the batch 39..41: the read starts at that batch (the consumer skips 39), as Kafka
    assert log.read(40, 10 ** 6).first_offset == 39
    with pytest.raises(errors.OffsetOutOfRange):
        log.maybe_increment_log_start_offset(61)
    # retention (no time/size limit) removes exactly the segments wholly below 40: bases 0 and 18
    assert log.delete_old_segments(None, None, now=10 ** 13) == 2
    assert [s.base_offset for s in log.segments] == [36, 54]
    assert log.log_start_offset == 40
    # the search by time never answers below the start
    assert log.offset_for_timestamp(0)[0] == 40
    log.close()


def test_truncation_lowers_the_start(tmp_path):
    log = Log(str(tmp_path / "t-0"), _config())
    _fill(log, 10)
    log.maybe_increment_log_start_offset(20)
    log.truncate_to(25)
    assert log.log_start_offset == 20
    log.truncate_to(19)                        # below the start: the start follows (Kafka's truncateTo)
    assert (log.log_start_offset, log.log_end_offset) == (19, 19)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    log.close()


def test_checkpoint_file_and_reload(tmp_path):
    d = str(tmp_path / "logs")
    lm = LogManager([d], _config(), broker_id=1)
    a = lm.get_or_create_log(("a", 0))
    b = lm.get_or_create_log(("b", 1))
    _fill(a, 4)
    _fill(b, 4)
    a.maybe_increment_log_start_offset(7)
    lm.checkpoint_recovery_points()
    # Kafka's format; only logs whose start is above their first segment's base are listed
    with open(os.path.join(d, LOG_START_OFFSET_CHECKPOINT)) as f:
        assert f.read() == "0\n1\na 0 7\n"
    lm.shutdown()
    lm = LogManager([d], _config(), broker_id=1)
    assert lm.get_log(("a", 0)).log_start_offset == 7
    assert lm.get_log(("b", 1)).log_start_offset == 0
    with pytest.raises(errors.OffsetOutOfRange):
        lm.get_log(("a", 0)).read(6, 1000)
    lm.shutdown()


def test_checkpoint_above_the_end_is_clamped(tmp_path):
    d = str(tmp_path / "logs")
    lm = LogManager([d], _config(), broker_id=1)
    _fill(lm.get_or_create_log(("a", 0)), 2)
    lm.shutdown()
    with open(os.path.join(d, LOG_START_OFFSET_CHECKPOINT), "w") as f:
        f.write("0\n1\na 0 500\n")                # e.g. the log's tail lost in a crash
    lm = LogManager([d], _config(), broker_id=1)
    assert lm.get_log(("a", 0)).log_start_offset == 6
    lm.shutdown()


def test_partition_delete_records(tmp_path):
    log = Log(str(tmp_path / "t-0"), _config())
    _fill(log, 4)
    part = Partition("t", 0, log, _config(), broker_id=1)
    part.high_watermark = 9
    assert part.delete_records(5) == 5
    assert part.low_watermark() == 5
    with pytest.raises(errors.OffsetOutOfRange):
        part.delete_records(10)                 # above the HW
    assert part.delete_records(-1) == 9         # -1 = the high watermark
    compacted = Partition("c", 0, Log(str(tmp_path / "c-0"), _config()), _config(cleanup_policy="compact"), 1)
    with pytest.raises(errors.PolicyViolation):
        compacted.delete_records(0)
    # a follower in the ISR that reported an older start holds the low watermark
    part.make_leader(1, [1, 2], [1, 2], 0)
    part.read_for_follower(2, 12, 1000, log_start_offset=3)
    assert part.low_watermark() == 3
    part.read_for_follower(2, 12, 1000, log_start_offset=9)
    assert part.low_watermark() == 9
    # a follower applies its leader's start, capped by its own high watermark
    part.make_follower(2, 2, [1, 2], [1, 2], 0)
    part.high_watermark = 11
    part.apply_leader_log_start_offset(12)
    assert part.log_start_offset == 11
