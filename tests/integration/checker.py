"""Loss / duplicate / order checker for replication tests (issue 5): what the producer was told versus what a
consumer reads back.

Inputs
    acked     iterable of ``(partition, offset, value)``: one entry per *successful* delivery report (offset may
              be -1 when the client did not learn it, e.g. acks=0).
    consumed  ``{partition: [(offset, value), ...]}``: every record a consumer read from offset 0 up to the high
              watermark, in log order.
    Values are opaque hashables (the tests use the decimal sequence number of the record, as bytes). Every value
    is produced once, and within one partition the producer sent values in increasing order, so the *order* check
    compares values with ``int(value)``.

Counts (``Report``)
    acknowledged   number of distinct acked (partition, value) pairs
    lost           acked (partition, value) that does not appear in that partition's consumed stream
    misplaced      acked with a known offset >= 0 whose value is in the stream but not at that offset (a replica
                   served a different history than the one the ack described)
    duplicated     consumed occurrences beyond the first of a value within a partition (a retry written twice)
    out_of_order   consumed records whose value is lower than a value read before it in the same partition
    unacked_present consumed values that were never acked (legal: the ack was lost, e.g. a timed-out request)
    offset_gaps    consumed offsets that are not increasing (should never happen; listed as a sanity check)
``Report.ok`` is True when lost, misplaced, duplicated, out_of_order and offset_gaps are all 0.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Report:
    acknowledged: int = 0
    consumed: int = 0
    lost: int = 0
    misplaced: int = 0
    duplicated: int = 0
    out_of_order: int = 0
    unacked_present: int = 0
    offset_gaps: int = 0
    # a few examples of each problem (partition, offset or value) for the failure message
    examples: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.misplaced or self.duplicated or self.out_of_order or self.offset_gaps)

    def summary(self) -> str:
        return (f"acknowledged={self.acknowledged} consumed={self.consumed} lost={self.lost} "
                f"misplaced={self.misplaced} duplicated={self.duplicated} out_of_order={self.out_of_order} "
                f"unacked_present={self.unacked_present} offset_gaps={self.offset_gaps}"
                + (f" examples={self.examples}" if self.examples else ""))


def _example(report: Report, kind: str, item, limit: int = 5) -> None:
    bucket = report.examples.setdefault(kind, [])
    if len(bucket) < limit:
        bucket.append(item)


def check(acked, consumed: dict) -> Report:
    report = Report()
    acked_by_p: dict = {}
    for p, off, value in acked:
        acked_by_p.setdefault(p, {})[value] = off
    report.acknowledged = sum(len(v) for v in acked_by_p.values())

    for p in sorted(set(acked_by_p) | set(consumed)):
        stream = consumed.get(p, [])
        report.consumed += len(stream)
        at_offset = {}
        counts = Counter()
        highest = None
        prev_off = None
        for off, value in stream:
            if prev_off is not None and off <= prev_off:
                report.offset_gaps += 1
                _example(report, "offset_gaps", (p, prev_off, off))
            prev_off = off
            counts[value] += 1
            if counts[value] > 1:
                report.duplicated += 1
                _example(report, "duplicated", (p, off, value))
            at_offset.setdefault(value, off)
            n = int(value)
            if highest is not None and n < highest:
                report.out_of_order += 1
                _example(report, "out_of_order", (p, off, value))
            highest = n if highest is None else max(highest, n)
        want = acked_by_p.get(p, {})
        for value, off in want.items():
            if value not in counts:
                report.lost += 1
                _example(report, "lost", (p, off, value))
            elif off is not None and off >= 0 and at_offset[value] != off:
                report.misplaced += 1
                _example(report, "misplaced", (p, off, at_offset[value], value))
        report.unacked_present += sum(1 for v in counts if v not in want)
    return report
