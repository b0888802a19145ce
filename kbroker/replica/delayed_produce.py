"""The acks=all wait (Kafka's DelayedProduce): append to leader partitions, then wait until every in-sync replica
has the records or the timeout passes.

The replica layer's write path for acks=-1, used by the Produce handler (one ``DelayedProduce`` per request, every
partition entry of the request in it) and by the group coordinator's offset commits (``append_and_wait``: one
batch, ``offsets.commit.timeout.ms``). Partitions come from ``ReplicaManager.leader_partition`` (or
``get_partition`` + ``is_leader``); this module only drives them through ``Partition.append`` (acks=-1: an ISR
smaller than min.insync.replicas raises NotEnoughReplicas, 19, before anything is appended) and
``Partition.ack_status``.

Completion of one appended batch (``Partition.ack_status``): the high watermark passed its last offset -> 0, or
NOT_ENOUGH_REPLICAS_AFTER_APPEND (20) when the ISR is below min.insync.replicas by then; the broker stopped leading
the partition after the append (its ``leadership`` term moved; the records may have been truncated since) ->
NOT_LEADER_OR_FOLLOWER (6); still short when the timeout passes -> REQUEST_TIMED_OUT (7), the records stay in the
log, as in Kafka. The term is read before the append, so a role change during it (``append`` may flush, which
yields) counts.

Waiting: one gevent Event registered in the ``waiters`` of each Partition still pending, set by its HW advances and
ISR/role changes (and by ``ReplicaManager.shutdown``); every wake re-checks the pending batches. With ISR = [leader]
the HW moves in the append itself, so the batch is complete at once and acks=-1 costs no Event, timer or greenlet
switch. ``wait`` also gives up early when ``give_up()`` turns true at a wake (the client's connection is closing:
nobody reads the answer).
"""
import time

from gevent.event import Event

from kbroker import errors


class ProduceWaiter(Event):
    """The Event a waiting acks=all request parks in its Partitions' ``waiters`` (consumer fetches park plain
    Events there): the metrics tell the two purgatories apart by this class (kbroker/metrics/cluster.py)."""


class Ack:
    """One appended batch's acks=all outcome: ``error_code`` is None while waiting, then 0 or a Kafka error code."""
    __slots__ = ("partition", "last_offset", "leadership", "error_code")

    def __init__(self, partition, last_offset, leadership, error_code):
        self.partition = partition
        self.last_offset = last_offset
        self.leadership = leadership
        self.error_code = error_code

    def __repr__(self):
        return "Ack(%r, last_offset=%d, error_code=%r)" % (self.partition, self.last_offset, self.error_code)


class DelayedProduce:
    """The acks=all appends of one request and their wait: ``append`` each partition's records, then ``wait``
    once. Single-use, owned by one greenlet."""

    def __init__(self):
        self._pending = []          # [Ack] whose error_code is still None

    def append(self, part, records, produce_version):
        """Append ``records`` to the leader ``part`` with acks=-1 -> ``(AppendResult, Ack)``; the Ack is already
        complete when the HW passed the batch in the append itself. Raises what ``Partition.append`` raises
        (nothing was appended then). A duplicate idempotent batch (already in the log) waits like a new one."""
        term = part.leadership
        res = part.append(records, produce_version, -1)
        ack = Ack(part, res.last_offset, term, part.ack_status(res.last_offset, term))
        if ack.error_code is None:
            self._pending.append(ack)
        return res, ack

    def write_marker(self, part, producer_id, producer_epoch, coordinator_epoch, commit):
        """``Partition.write_marker`` (WriteTxnMarkers: always acks=-1) joined to this wait like ``append``."""
        term = part.leadership
        res = part.write_marker(producer_id, producer_epoch, coordinator_epoch, commit)
        ack = Ack(part, res.last_offset, term, part.ack_status(res.last_offset, term))
        if ack.error_code is None:
            self._pending.append(ack)
        return res, ack

    def wait(self, timeout_ms, give_up=None):
        """Block until every Ack of this request is complete, at most ``timeout_ms`` (negative = 0); Acks still
        short then get REQUEST_TIMED_OUT, and so do they when ``give_up()`` is true at a wake."""
        pending = self._pending
        self._pending = []
        if not pending:
            return
        deadline = time.monotonic() + max(0, timeout_ms) / 1000.0
        ev = ProduceWaiter()
        parts = {id(a.partition): a.partition for a in pending}
        for p in parts.values():
            p.add_waiter(ev)
        try:
            while True:
                ev.clear()
                still = []
                for ack in pending:
                    ack.error_code = ack.partition.ack_status(ack.last_offset, ack.leadership)
                    if ack.error_code is None:
                        still.append(ack)
                pending = still
                if not pending:
                    return
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (give_up is not None and give_up()):
                    break
                ev.wait(remaining)
        finally:
            for p in parts.values():
                p.remove_waiter(ev)
        for ack in pending:
            ack.error_code = errors.REQUEST_TIMED_OUT


def append_and_wait(part, records, produce_version, timeout_ms):
    """One batch with acks=all: append to the leader ``part``, wait -> ``(AppendResult, error code)`` (0 once every
    in-sync replica has it). Raises what ``Partition.append`` raises."""
    delayed = DelayedProduce()
    res, ack = delayed.append(part, records, produce_version)
    delayed.wait(timeout_ms)
    return res, ack.error_code
