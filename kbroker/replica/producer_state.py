"""Idempotent-producer state of one partition (Kafka's ProducerStateManager, reduced to what idempotence needs).

Per producer id we keep its current epoch and the metadata of its last ``BATCHES_TO_RETAIN`` (= 5, Kafka's
``NUM_BATCHES_TO_RETAIN``, matching ``max.in.flight.requests.per.connection`` <= 5) appended batches:
``(first_seq, last_seq, first_offset, last_offset)``. Rules applied to every batch with producer_id >= 0:

- epoch older than the current one            -> INVALID_PRODUCER_EPOCH (47)
- a batch equal (first/last seq) to a retained -> duplicate: answered with the original offsets, not appended
- epoch newer than the current one (or a producer we have no state for): its first sequence must be 0
- otherwise first_seq must be last_seq + 1 (int32 wrap to 0) -> else OUT_OF_ORDER_SEQUENCE_NUMBER (45)

The state is rebuilt on load from the v2 batch headers in the log (``rebuild``, fed ``Log.batch_headers()``), so it
survives restarts and ``kill -9`` without a separate snapshot file: the log *is* the snapshot.
"""
from kbroker.errors import InvalidProducerEpoch, OutOfOrderSequenceNumber

BATCHES_TO_RETAIN = 5
INT32_MAX = 2 ** 31 - 1


class ProducerEntry:
    __slots__ = ("epoch", "batches")

    def __init__(self, epoch):
        self.epoch = epoch
        self.batches = []  # [(first_seq, last_seq, first_offset, last_offset)], oldest first


def _next_seq(seq):
    return 0 if seq == INT32_MAX else seq + 1


class ProducerStateManager:
    def __init__(self):
        self.producers = {}

    def check(self, pid, epoch, first_seq, last_seq):
        """Validate a batch before append. Returns (first_offset, last_offset) of the original if it is a
        duplicate, None if it must be appended; raises on a fenced epoch or a sequence gap."""
        if pid < 0:
            return None
        e = self.producers.get(pid)
        if e is None or epoch != e.epoch:
            if e is not None and epoch < e.epoch:
                raise InvalidProducerEpoch("producer %d epoch %d is older than %d" % (pid, epoch, e.epoch))
            if first_seq != 0:
                raise OutOfOrderSequenceNumber("producer %d epoch %d must start at sequence 0, got %d"
                                               % (pid, epoch, first_seq))
            return None
        for fs, ls, fo, lo in e.batches:
            if fs == first_seq and ls == last_seq:
                return fo, lo
        if e.batches and first_seq != _next_seq(e.batches[-1][1]):
            raise OutOfOrderSequenceNumber("producer %d: expected sequence %d, got %d"
                                           % (pid, _next_seq(e.batches[-1][1]), first_seq))
        return None

    def update(self, pid, epoch, first_seq, last_seq, first_offset, last_offset):
        if pid < 0:
            return
        e = self.producers.get(pid)
        if e is None or e.epoch != epoch:
            e = self.producers[pid] = ProducerEntry(epoch)
        e.batches.append((first_seq, last_seq, first_offset, last_offset))
        if len(e.batches) > BATCHES_TO_RETAIN:
            del e.batches[0]

    def last_sequence(self, pid):
        e = self.producers.get(pid)
        return e.batches[-1][1] if e and e.batches else -1

    def rebuild(self, batch_headers):
        """batch_headers: iterable of ``kbroker.record.BatchHeader`` in offset order (``Log.batch_headers()``)."""
        self.producers.clear()
        for h in batch_headers:
            if h.producer_id < 0:
                continue
            seq, lod = h.base_sequence, h.last_offset_delta
            self.update(h.producer_id, h.producer_epoch, seq, seq + lod, h.base_offset, h.base_offset + lod)
