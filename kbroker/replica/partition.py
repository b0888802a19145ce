"""A partition this broker hosts: its Log, leadership state, high watermark, producer state and fetch waiters.

Invariants:
- Offsets are assigned from ``log.log_end_offset`` and the batch is appended in the same greenlet step (no gevent
  yield between them: validation and ``os.write`` never yield), so two produce requests can never get the same
  offsets.
- ``high_watermark`` <= ``log_end_offset``; with one in-sync replica (this broker) they are equal. Consumers never
  see records at or above the high watermark.
- Every append wakes the waiting fetches registered on this partition (long poll returns as soon as data arrives).
"""
import os
import time

from kbroker.errors import NotEnoughReplicas, NotLeaderOrFollower
from kbroker.record import RecordConfig, validate_for_append
from kbroker.replica.producer_state import ProducerStateManager


def _batch_headers(log):
    """The 61-byte v2 header of every batch in the log, oldest first (producer-state rebuild on load)."""
    for seg in log.segments:
        fd = seg.fileno()
        for entry in seg.batches():
            yield os.pread(fd, 61, entry[0])


def now_ms():
    return int(time.time() * 1000)


class AppendResult:
    __slots__ = ("base_offset", "last_offset", "log_append_time", "log_start_offset", "duplicate")

    def __init__(self, base_offset, last_offset, log_append_time, log_start_offset, duplicate=False):
        self.base_offset = base_offset
        self.last_offset = last_offset
        self.log_append_time = log_append_time
        self.log_start_offset = log_start_offset
        self.duplicate = duplicate


class Partition:
    def __init__(self, topic, index, log, log_config, broker_id, flusher=None):
        """``flusher(log)`` fsyncs a log off the event loop; used when ``flush.messages`` is reached."""
        self.topic = topic
        self.flusher = flusher
        self.index = index
        self.log = log
        self.broker_id = broker_id
        self.leader = broker_id
        self.leader_epoch = 0
        self.replicas = [broker_id]
        self.isr = [broker_id]
        self.producers = ProducerStateManager()
        self.waiters = set()
        self.set_config(log_config)
        self.producers.rebuild(_batch_headers(log))

    def set_config(self, log_config):
        self.log_config = log_config
        self.record_config = RecordConfig(
            max_message_bytes=log_config.max_message_bytes,
            timestamp_type=log_config.message_timestamp_type,
            timestamp_difference_max_ms=log_config.message_timestamp_difference_max_ms,
            compacted=log_config.compacts,
            leader_epoch=self.leader_epoch,
        )
        if hasattr(self.log, "config"):
            self.log.config = log_config

    # ---------------------------------------------------------------------------------------------- state
    @property
    def is_leader(self):
        return self.leader == self.broker_id

    @property
    def log_end_offset(self):
        return self.log.log_end_offset

    @property
    def log_start_offset(self):
        return self.log.log_start_offset

    @property
    def high_watermark(self):
        return self.log.log_end_offset

    # ---------------------------------------------------------------------------------------------- write
    def append(self, records, produce_version, acks):
        if not self.is_leader:
            raise NotLeaderOrFollower("broker %d is not the leader of %s-%d" % (self.broker_id, self.topic,
                                                                                 self.index))
        if acks == -1 and len(self.isr) < self.log_config.min_insync_replicas:
            raise NotEnoughReplicas("ISR %s is smaller than min.insync.replicas=%d"
                                    % (self.isr, self.log_config.min_insync_replicas))
        log = self.log
        now = now_ms()
        info = validate_for_append(records, log.log_end_offset, now, self.record_config, produce_version)
        if info.producer_id >= 0:
            dup = self.producers.check(info.producer_id, info.producer_epoch, info.base_sequence,
                                       info.last_sequence)
            if dup is not None:
                return AppendResult(dup[0], dup[1], -1, log.log_start_offset, duplicate=True)
        log.append(info)
        if self.flusher is not None and log.unflushed_messages >= self.log_config.flush_interval_messages:
            # flush.messages reached: fsync before acknowledging, as Kafka does after the append.
            self.flusher(log)
        if info.producer_id >= 0:
            self.producers.update(info.producer_id, info.producer_epoch, info.base_sequence, info.last_sequence,
                                  info.first_offset, info.last_offset)
        self._wake()
        return AppendResult(info.first_offset, info.last_offset, info.log_append_time,
                            log.log_start_offset)

    # ----------------------------------------------------------------------------------------------- read
    def read(self, offset, max_bytes, min_one=True, up_to_hw=True):
        """FetchSlice | None for [offset, HW); raises OffsetOutOfRange."""
        return self.log.read(offset, max_bytes, self.high_watermark if up_to_hw else None, min_one)

    # -------------------------------------------------------------------------------------------- waiters
    def add_waiter(self, ev):
        self.waiters.add(ev)

    def remove_waiter(self, ev):
        self.waiters.discard(ev)

    def _wake(self):
        if self.waiters:
            for ev in list(self.waiters):
                ev.set()
