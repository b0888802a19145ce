"""Exactly-once checker for consume-transform-produce runs (issue 11): input ids versus the output read
``read_committed``, and the group's committed offsets versus the input's end offsets.

Records
    input   N records, id i = 0..N-1, key = value = ``str(i)`` (ASCII decimal), partition ``i % partitions``
            (explicit), written by ``produce_input`` with an idempotent acks=all producer; every delivery must
            succeed. It returns the input's end offsets ``{partition: high watermark}``.
    output  what the app (tests/integration/eos_app.py) wrote: key = the input id, value = ``eos_app.transform(
            input value)``. Read by ``read_committed`` from offset 0 up to each partition's last stable offset,
            after waiting (bounded) until LSO == high watermark everywhere, i.e. no transaction is still open on
            the output, so the read covers everything that will ever be committed.

Counts (``EosReport``)
    expected    input ids
    consumed    output records read (committed only)
    lost        input ids with no output record
    duplicated  output records beyond the first for an id (a record processed twice and both outputs committed)
    unexpected  output records whose key is not an input id
    corrupted   output records whose value is not transform(the input value)
``EosReport.exactly_once`` is True when lost, duplicated, unexpected and corrupted are all 0.

Offsets: ``committed_offsets`` asks the group coordinator (OffsetFetch through a consumer that never joins the
group) for the group's committed offsets of the input partitions; exactly-once processing means they equal the
input end offsets once the app is done (every record processed, and its position committed with it).
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from tests.integration.eos_app import transform
from tests.integration.harness import wait_until


def input_value(i: int) -> bytes:
    return str(i).encode()


def produce_input(bootstrap: str, topic: str, n: int, partitions: int, timeout: float = 60.0) -> dict[int, int]:
    """Write ids 0..n-1 (partition i % partitions); returns the end offsets {partition: high watermark}."""
    from confluent_kafka import Producer

    failed = []
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                  "message.timeout.ms": int(timeout * 1000)})
    for i in range(n):
        v = input_value(i)
        p.produce(topic, key=v, value=v, partition=i % partitions,
                  on_delivery=lambda err, msg: err is not None and failed.append(err))
        p.poll(0)
    left = p.flush(timeout + 5)
    assert left == 0 and not failed, f"input: {left} undelivered, errors {failed[:3]}"
    ends = end_offsets(bootstrap, topic, partitions)
    assert sum(ends.values()) == n, f"input end offsets {ends} do not add up to {n}"
    return ends


def _consumer(bootstrap: str, isolation: str, **extra):
    from confluent_kafka import Consumer

    return Consumer({**extra, "bootstrap.servers": bootstrap, "group.id": f"eos-check-{time.monotonic_ns()}",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest", "isolation.level": isolation,
                     "fetch.wait.max.ms": 100})


def end_offsets(bootstrap: str, topic: str, partitions: int, isolation: str = "read_uncommitted") -> dict[int, int]:
    """{partition: high watermark} (read_uncommitted) or {partition: last stable offset} (read_committed)."""
    from confluent_kafka import TopicPartition

    c = _consumer(bootstrap, isolation)
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    finally:
        c.close()


def wait_stable(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> dict[int, int]:
    """Wait until every partition's LSO equals its high watermark (no open transaction); returns the offsets."""
    def stable():
        hw = end_offsets(bootstrap, topic, partitions)
        lso = end_offsets(bootstrap, topic, partitions, "read_committed")
        return hw if hw == lso else None

    return wait_until(stable, timeout, 0.5, f"{topic}: last stable offset == high watermark",
                      ignore=(Exception,))


def read_committed(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> dict[int, list]:
    """{partition: [(offset, key, value)]}: every committed record below each partition's LSO, read
    read_committed from offset 0 (assign + poll); waits for LSO == HW first (see the module docstring)."""
    stable = wait_stable(bootstrap, topic, partitions, timeout)
    return read_records(bootstrap, topic, partitions, "read_committed", stable, timeout)


def read_records(bootstrap: str, topic: str, partitions: int, isolation: str, expect_ends: dict | None = None,
                 timeout: float = 60.0) -> dict[int, list]:
    """{partition: [(offset, key, value)]}: every data record below each partition's end offset (LSO for
    read_committed, HW for read_uncommitted, which includes aborted data), read from offset 0."""
    from confluent_kafka import KafkaError, TopicPartition

    c = _consumer(bootstrap, isolation, **{"enable.partition.eof": True})
    out = {p: [] for p in range(partitions)}
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
        assert expect_ends is None or ends == expect_ends, f"end offsets moved: {expect_ends} -> {ends}"
        # a consumer's position skips control records (and, read_committed, aborted data); a partition is done
        # when the position reaches the end offset (it may stay on a trailing marker: the partition's EOF ends it)
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions) if ends[p] > 0])
        deadline = time.monotonic() + timeout
        pending = {p for p in range(partitions) if ends[p] > 0}
        while pending:
            assert time.monotonic() < deadline, f"{isolation}: partitions {sorted(pending)} not read to {ends}"
            m = c.poll(0.2)
            if m is not None and m.error() is None and m.offset() < ends[m.partition()]:
                out[m.partition()].append((m.offset(), m.key(), m.value()))
            elif m is not None and m.error() is not None and m.error().code() == KafkaError._PARTITION_EOF:
                pending.discard(m.partition())
            for tp in c.position([TopicPartition(topic, p) for p in pending]):
                if tp.offset >= ends[tp.partition]:
                    pending.discard(tp.partition)
    finally:
        c.close()
    return out


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets of `topic` {partition: offset} (-1001 when none)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=15)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


@dataclass
class EosReport:
    expected: int = 0
    consumed: int = 0
    lost: int = 0
    duplicated: int = 0
    unexpected: int = 0
    corrupted: int = 0
    examples: dict = field(default_factory=dict)

    @property
    def exactly_once(self) -> bool:
        return not (self.lost or self.duplicated or self.unexpected or self.corrupted)

    def summary(self) -> str:
        return (f"expected={self.expected} consumed={self.consumed} lost={self.lost} duplicated={self.duplicated} "
                f"unexpected={self.unexpected} corrupted={self.corrupted}"
                + (f" examples={self.examples}" if self.examples else ""))


def _example(report: EosReport, kind: str, item, limit: int = 5) -> None:
    bucket = report.examples.setdefault(kind, [])
    if len(bucket) < limit:
        bucket.append(item)


def check(n_inputs: int, output: dict[int, list]) -> EosReport:
    """Compare input ids 0..n_inputs-1 with `output` ({partition: [(offset, key, value)]}, see read_committed)."""
    report = EosReport(expected=n_inputs)
    seen = Counter()
    for p in sorted(output):
        for off, key, value in output[p]:
            report.consumed += 1
            try:
                i = int(key)
            except (TypeError, ValueError):
                i = None
            if i is None or not 0 <= i < n_inputs:
                report.unexpected += 1
                _example(report, "unexpected", (p, off, key))
                continue
            seen[i] += 1
            if seen[i] > 1:
                report.duplicated += 1
                _example(report, "duplicated", (p, off, i))
            if value != transform(input_value(i)):
                report.corrupted += 1
                _example(report, "corrupted", (p, off, key, value))
    for i in range(n_inputs):
        if i not in seen:
            report.lost += 1
            _example(report, "lost", i)
    return report
