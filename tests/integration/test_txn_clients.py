"""Transactions (KIP-98) with real clients against one real kbroker-server process.

Producers: confluent-kafka (librdkafka), kafka-python and aiokafka, each as a transactional producer
(``transactional.id``) writing the same plan to its own 2-partition topic: transaction 1 commits 3 records on
partition 0 and 2 on partition 1, transaction 2 aborts 2 + 1 (flushed first, so they are in the log), transaction 3
commits 1 + 1. Every record takes an offset and so does every marker (one per partition of a transaction), so the
layout is exact: partition 0 holds data 0-2, COMMIT 3, aborted data 4-5, ABORT 6, data 7, COMMIT 8 (log end 9);
partition 1 data 0-1, COMMIT 2, aborted 3, ABORT 4, data 5, COMMIT 6 (log end 7). Shown:

- each producer's delivery reports carry exactly those data offsets, aborted records included;
- the segment files hold control batches exactly at the marker offsets, with the producer's id, COMMIT or ABORT
  as planned (``kbroker.record.control.marker_of``), and the data batches are transactional; the ``.txnindex``
  holds exactly the aborted transaction (producer id, first offset, ABORT marker offset, LSO after it);
- Kafka's Java producer (tests/java's driver, when built) writes the same plan with the same exact result;
- ``read_committed`` consumers of confluent-kafka, kafka-python, aiokafka (and Kafka's Java client when the
  driver is built) read exactly the committed records of all three topics at their offsets (0, 1, 2, 7 / 0, 1, 5),
  never an aborted or control record, and their positions reach the log end (they step over the markers); so do
  kafkajs's group consumer (read_committed by default) and kcat to the end of each partition;
  ``read_uncommitted`` consumers read every data record, the aborted ones too (0, 1, 2, 4, 5, 7 / 0, 1, 3, 5);
- an open transaction bounds ``read_committed``: with data 0-1 committed (COMMIT 2), an open transaction's records
  at 3-4 and a non-transactional record at 5 after them, ListOffsets answers 3 (LSO) for read_committed and 6 (high
  watermark) for read_uncommitted; the three read_committed consumers stop at 3 with records 0 and 1 only and
  read nothing more in 1 s of polls, a read_uncommitted one reads 3, 4 and 5; after the commit (marker at 6) the
  read_committed consumers read exactly 3, 4, 5 and reach 7; Kafka's Java consumer likewise (3 s of polls give
  it 0 and 1 only, its endOffsets are the LSO 3, then 7 after the commit).

One broker for the module; every consumer assigns partitions itself (no group), but kafkajs's (a group).
"""
import asyncio
import struct
import time
from collections import namedtuple

import pytest

from kbroker.client.admin import AdminClient
from kbroker.record import iter_batches
from kbroker.record.control import marker_of
from tests.integration.harness import BrokerProcess, b64, unb64, wait_until
from tests.integration.java_driver import java_driver, ok  # noqa: F401 - fixture
from tests.integration.test_clients_common import TIMEOUT, create_topic, kcat_consume, segment_path

pytestmark = pytest.mark.timeout(300)

LIBS = ("confluent", "kafka-python", "aiokafka")
PARTITIONS = (0, 1)
# (action, {partition: record count}) per transaction, in order.
PLAN = (("commit", {0: 3, 1: 2}), ("abort", {0: 2, 1: 1}), ("commit", {0: 1, 1: 1}))
# How long a read_committed consumer must keep reading nothing while the transaction is open.
QUIET_S = 1.0

Rec = namedtuple("Rec", "topic partition offset key value")
TXN_ENTRY = struct.Struct(">hqqqq")   # a .txnindex entry


@pytest.fixture(scope="module")
def tbroker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("txn_clients"), overrides={
        "transaction.state.log.num.partitions": 3, "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1, "offsets.topic.num.partitions": 3,
        "group.initial.rebalance.delay.ms": 0})
    try:
        b.start()
        yield b
    finally:
        b.close()


# ------------------------------------------------------------------------------------------------ the layout

def value_of(lib, txn, partition, i):
    return b"%s-t%d-p%d-%d" % (lib.encode(), txn, partition, i)


def layout(lib, topic, plan=PLAN):
    """(data, markers, ends): data = [(Rec, committed)] in offset order per partition, markers = {(p, offset):
    commit}, ends = {(topic, p): log end offset}, for ``plan`` written to a fresh topic."""
    nxt = {p: 0 for p in PARTITIONS}
    data, markers = [], {}
    for txn, (action, counts) in enumerate(plan):
        for p, n in counts.items():
            for i in range(n):
                data.append((Rec(topic, p, nxt[p], b"k%d" % i, value_of(lib, txn, p, i)), action == "commit"))
                nxt[p] += 1
        for p in counts:
            markers[(p, nxt[p])] = action == "commit"
            nxt[p] += 1
    return sorted(data, key=lambda d: (d[0].partition, d[0].offset)), markers, {(topic, p): nxt[p] for p in nxt}


def sends(lib, counts, txn):
    """The (partition, key, value) a producer sends in transaction ``txn``: partition 0's records, then 1's."""
    return [(p, b"k%d" % i, value_of(lib, txn, p, i)) for p, n in sorted(counts.items()) for i in range(n)]


# ------------------------------------------------------------------------------------------------ producers
# Each returns the delivery reports [(partition, offset, value)] of every record sent, in send order.

def produce_confluent(bootstrap, topic, tid, plan=PLAN):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5,
                         "message.timeout.ms": int(TIMEOUT * 1000), "transaction.timeout.ms": 60000})
    reports, failures = [], []

    def on_delivery(err, msg):
        (failures if err is not None else reports).append(
            err if err is not None else (msg.partition(), msg.offset(), msg.value()))

    producer.init_transactions(TIMEOUT)
    for txn, (action, counts) in enumerate(plan):
        producer.begin_transaction()
        for p, key, value in sends("confluent", counts, txn):
            producer.produce(topic, key=key, value=value, partition=p, on_delivery=on_delivery)
        assert producer.flush(TIMEOUT) == 0
        if action == "commit":
            producer.commit_transaction(TIMEOUT)
        else:
            producer.abort_transaction(TIMEOUT)
    assert failures == [], failures
    return reports


def produce_kafka_python(bootstrap, topic, tid, plan=PLAN):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid, linger_ms=5,
                             max_block_ms=int(TIMEOUT * 1000), request_timeout_ms=int(TIMEOUT * 1000))
    reports = []
    try:
        producer.init_transactions()
        for txn, (action, counts) in enumerate(plan):
            producer.begin_transaction()
            futures = [(producer.send(topic, key=key, value=value, partition=p), value)
                       for p, key, value in sends("kafka-python", counts, txn)]
            producer.flush(TIMEOUT)
            for f, value in futures:
                md = f.get(TIMEOUT)
                reports.append((md.partition, md.offset, value))
            if action == "commit":
                producer.commit_transaction()
            else:
                producer.abort_transaction()
    finally:
        producer.close(timeout=5)
    return reports


def produce_aiokafka(bootstrap, topic, tid, plan=PLAN):
    from aiokafka import AIOKafkaProducer

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid, linger_ms=5,
                                    request_timeout_ms=int(TIMEOUT * 1000))
        await asyncio.wait_for(producer.start(), TIMEOUT)
        reports = []
        try:
            for txn, (action, counts) in enumerate(plan):
                await producer.begin_transaction()
                futures = [(await producer.send(topic, key=key, value=value, partition=p), value)
                           for p, key, value in sends("aiokafka", counts, txn)]
                for f, value in futures:
                    md = await asyncio.wait_for(f, TIMEOUT)
                    reports.append((md.partition, md.offset, value))
                if action == "commit":
                    await asyncio.wait_for(producer.commit_transaction(), TIMEOUT)
                else:
                    await asyncio.wait_for(producer.abort_transaction(), TIMEOUT)
        finally:
            await producer.stop()
        return reports

    return asyncio.run(run())


PRODUCERS = {"confluent": produce_confluent, "kafka-python": produce_kafka_python, "aiokafka": produce_aiokafka}


# ------------------------------------------------------------------------------------------------ consumers
# A reader assigns (topic, partition)s from offset 0 and is polled in steps: ``read_until(ends)`` returns the
# records read until each partition's position reaches ``ends[tp]`` (raising with what it saw on timeout),
# ``read_for(seconds)`` what it reads in that time; ``position(tp)`` is the next offset it would fetch.

class ConfluentReader:
    def __init__(self, bootstrap, tps, isolation):
        from confluent_kafka import Consumer, TopicPartition

        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-unused",
                                  "enable.auto.commit": False, "isolation.level": isolation,
                                  "enable.partition.eof": True, "fetch.wait.max.ms": 100,
                                  "auto.offset.reset": "error"})
        self.consumer.assign([TopicPartition(t, p, 0) for t, p in tps])
        self.pos = {tp: 0 for tp in tps}
        self.errors = []

    def _poll(self, out):
        from confluent_kafka import KafkaError

        msg = self.consumer.poll(0.1)
        if msg is None:
            return
        tp = (msg.topic(), msg.partition())
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                # librdkafka's end of the readable log: the LSO for read_committed, past any marker.
                self.pos[tp] = max(self.pos[tp], msg.offset())
            else:
                self.errors.append(msg.error())
            return
        out.append(Rec(tp[0], tp[1], msg.offset(), msg.key(), msg.value()))
        self.pos[tp] = max(self.pos[tp], msg.offset() + 1)

    def position(self, tp):
        return self.pos[tp]

    def read_for(self, seconds):
        out = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self._poll(out)
        return out

    def read_until(self, ends, timeout=TIMEOUT):
        out = []
        deadline = time.monotonic() + timeout
        while any(self.position(tp) < end for tp, end in ends.items()):
            assert time.monotonic() < deadline, (
                f"confluent reached {self.pos}, not {ends}, in {timeout}s; errors {self.errors}; read {out}")
            self._poll(out)
        return out

    def close(self):
        self.consumer.close()


class KafkaPythonReader:
    def __init__(self, bootstrap, tps, isolation):
        from kafka import KafkaConsumer, TopicPartition

        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                      isolation_level=isolation, fetch_max_wait_ms=100,
                                      request_timeout_ms=int(TIMEOUT * 1000) + 5000)
        self.tps = {tp: TopicPartition(*tp) for tp in tps}
        self.consumer.assign(list(self.tps.values()))
        for ktp in self.tps.values():
            self.consumer.seek(ktp, 0)

    def _poll(self, out, timeout_ms=100):
        for ktp, msgs in self.consumer.poll(timeout_ms=timeout_ms).items():
            out += [Rec(ktp.topic, ktp.partition, m.offset, m.key, m.value) for m in msgs]

    def position(self, tp):
        return self.consumer.position(self.tps[tp])

    def read_for(self, seconds):
        out = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self._poll(out)
        return out

    def read_until(self, ends, timeout=TIMEOUT):
        out = []
        deadline = time.monotonic() + timeout
        while any(self.position(tp) < end for tp, end in ends.items()):
            assert time.monotonic() < deadline, (
                f"kafka-python reached {[self.position(tp) for tp in ends]}, not {ends}, in {timeout}s; read {out}")
            self._poll(out)
        return out

    def close(self):
        self.consumer.close()


class AiokafkaReader:
    """aiokafka's consumer lives on its own event loop, driven one step at a time."""

    def __init__(self, bootstrap, tps, isolation):
        from aiokafka import AIOKafkaConsumer, TopicPartition

        self.loop = asyncio.new_event_loop()
        self.tps = {tp: TopicPartition(*tp) for tp in tps}

        async def start():
            c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                 isolation_level=isolation, fetch_max_wait_ms=100)
            await c.start()
            c.assign(list(self.tps.values()))
            for atp in self.tps.values():
                c.seek(atp, 0)
            return c
        self.consumer = self.loop.run_until_complete(start())

    async def _poll(self, out):
        batch = await self.consumer.getmany(timeout_ms=100)
        for atp, msgs in batch.items():
            out += [Rec(atp.topic, atp.partition, m.offset, m.key, m.value) for m in msgs]

    def position(self, tp):
        return self.loop.run_until_complete(self.consumer.position(self.tps[tp]))

    def read_for(self, seconds):
        out = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.loop.run_until_complete(self._poll(out))
        return out

    def read_until(self, ends, timeout=TIMEOUT):
        out = []
        deadline = time.monotonic() + timeout
        while any(self.position(tp) < end for tp, end in ends.items()):
            assert time.monotonic() < deadline, (
                f"aiokafka reached {[self.position(tp) for tp in ends]}, not {ends}, in {timeout}s; read {out}")
            self.loop.run_until_complete(self._poll(out))
        return out

    def close(self):
        try:
            self.loop.run_until_complete(self.consumer.stop())
        finally:
            self.loop.close()


READERS = {"confluent": ConfluentReader, "kafka-python": KafkaPythonReader, "aiokafka": AiokafkaReader}


def read_all(lib, bootstrap, ends, isolation):
    reader = READERS[lib](bootstrap, sorted(ends), isolation)
    try:
        got = reader.read_until(ends)
        positions = {tp: reader.position(tp) for tp in ends}
    finally:
        reader.close()
    return sorted(got, key=lambda r: (r.topic, r.partition, r.offset)), positions


# ------------------------------------------------------------------------------------------------ tests

@pytest.fixture(scope="module")
def written(tbroker):
    """{lib: (topic, reports or the exception its producer raised)}: every producer runs its plan once."""
    out = {}
    for lib in LIBS:
        topic = "txn-%s" % lib
        create_topic(tbroker.bootstrap, topic, partitions=len(PARTITIONS))
        try:
            out[lib] = (topic, PRODUCERS[lib](tbroker.bootstrap, topic, "tid-%s" % lib))
        except Exception as e:  # noqa: BLE001 - reported by that producer's own test
            out[lib] = (topic, e)
    return out


def produced_topics(written):
    """The topics whose producer completed its plan (the consumer tests read those; at least one)."""
    ok = {lib: topic for lib, (topic, res) in written.items() if not isinstance(res, Exception)}
    assert ok, "no transactional producer completed: %s" % {lib: res for lib, (_, res) in written.items()}
    return ok


@pytest.mark.parametrize("lib", LIBS)
def test_transactional_producer_commits_and_aborts(tbroker, written, lib):
    topic, reports = written[lib]
    if isinstance(reports, Exception):
        raise reports
    data, _, _ = layout(lib, topic)
    # Delivery reports: every record sent, the aborted ones too, at its planned offset.
    assert sorted(reports) == sorted((r.partition, r.offset, r.value) for r, _ in data)
    assert_on_disk(tbroker, lib, topic)


def assert_on_disk(tbroker, lib, topic):
    """The log of ``layout(lib, topic)``: control batches exactly at the marker offsets, COMMIT/ABORT as planned,
    one producer id, transactional data batches, and the aborted transaction in each segment's .txnindex."""
    data, markers, _ = layout(lib, topic)
    pids = set()
    for p in PARTITIONS:
        buf = segment_path(tbroker, topic, p).read_bytes()
        got_markers, data_offsets = {}, []
        for pos, h in iter_batches(buf, include_control=True):
            pids.add((h.producer_id, h.producer_epoch))
            if h.is_control:
                m = marker_of(buf, pos)
                assert m is not None and h.records_count == 1 and h.base_offset == h.last_offset
                got_markers[(p, h.base_offset)] = m.commit
                assert (m.producer_id, m.producer_epoch) == (h.producer_id, h.producer_epoch)
            else:
                assert h.is_transactional, h
                data_offsets += range(h.base_offset, h.last_offset + 1)
        assert got_markers == {k: v for k, v in markers.items() if k[0] == p}
        assert data_offsets == [r.offset for r, _ in data if r.partition == p]
        # The aborted transaction in the segment's .txnindex (Kafka's 34-byte entries: version 0, producer id,
        # first offset, last offset = the ABORT marker's, LSO after it = marker + 1, nothing else open).
        (pid, _), = pids
        idx = segment_path(tbroker, topic, p).with_suffix(".txnindex").read_bytes()
        first = min(r.offset for r, committed in data if r.partition == p and not committed)
        last = next(o for (mp, o), commit in markers.items() if mp == p and not commit)
        assert [TXN_ENTRY.unpack_from(idx, i) for i in range(0, len(idx), TXN_ENTRY.size)] == [
            (0, pid, first, last, last + 1)]
    assert len(pids) == 1 and min(pids)[0] >= 0, pids


@pytest.mark.parametrize("lib", LIBS)
def test_read_committed_sees_exactly_the_committed_records(tbroker, written, lib):
    expected, ends = [], {}
    for plib, topic in sorted(produced_topics(written).items()):
        data, _, e = layout(plib, topic)
        expected += [r for r, committed in data if committed]
        ends.update(e)
    got, positions = read_all(lib, tbroker.bootstrap, ends, "read_committed")
    assert got == sorted(expected, key=lambda r: (r.topic, r.partition, r.offset))
    assert positions == ends          # past the last marker: the log end
    for topic in produced_topics(written).values():
        assert [r.offset for r in got if (r.topic, r.partition) == (topic, 0)] == [0, 1, 2, 7]
        assert [r.offset for r in got if (r.topic, r.partition) == (topic, 1)] == [0, 1, 5]


@pytest.mark.parametrize("lib", LIBS)
def test_read_uncommitted_sees_every_record(tbroker, written, lib):
    expected, ends = [], {}
    for plib, topic in sorted(produced_topics(written).items()):
        data, _, e = layout(plib, topic)
        expected += [r for r, _ in data]
        ends.update(e)
    got, positions = read_all(lib, tbroker.bootstrap, ends, "read_uncommitted")
    assert got == sorted(expected, key=lambda r: (r.topic, r.partition, r.offset))
    assert positions == ends
    for topic in produced_topics(written).values():
        assert [r.offset for r in got if (r.topic, r.partition) == (topic, 0)] == [0, 1, 2, 4, 5, 7]
        assert [r.offset for r in got if (r.topic, r.partition) == (topic, 1)] == [0, 1, 3, 5]


def open_transaction(bootstrap, topic, tid):
    """Partition 0 of a fresh ``topic``: committed data 0-1 (COMMIT at 2), an open transaction's data 3-4 and a
    non-transactional record at 5. Returns the confluent producer whose transaction is open."""
    from confluent_kafka import Producer

    create_topic(bootstrap, topic, partitions=1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5,
                         "transaction.timeout.ms": 60000})
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    for i in range(2):
        producer.produce(topic, key=b"c%d" % i, value=b"committed-%d" % i, partition=0)
    producer.commit_transaction(TIMEOUT)                            # data 0-1, COMMIT at 2
    producer.begin_transaction()
    for i in range(2):
        producer.produce(topic, key=b"o%d" % i, value=b"open-%d" % i, partition=0)
    assert producer.flush(TIMEOUT) == 0                             # 3-4, transaction still open
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    plain.produce(topic, key=b"p", value=b"plain", partition=0)
    assert plain.flush(TIMEOUT) == 0                                # 5, after the open transaction's first offset
    return producer


def open_records(topic):
    """(the committed records 0-1, the records 3-5 read_committed gets after the commit)."""
    return ([Rec(topic, 0, i, b"c%d" % i, b"committed-%d" % i) for i in range(2)],
            [Rec(topic, 0, 3, b"o0", b"open-0"), Rec(topic, 0, 4, b"o1", b"open-1"), Rec(topic, 0, 5, b"p", b"plain")])


def test_open_transaction_bounds_read_committed(tbroker):
    topic, tp = "txn-open", ("txn-open", 0)
    producer = open_transaction(tbroker.bootstrap, topic, "tid-open")

    admin = AdminClient(tbroker.bootstrap)
    readers = {}
    try:
        def offsets(isolation):
            return admin.list_offsets(topic, {0: -1}, isolation_level=isolation)[0][0]
        wait_until(lambda: offsets(0) == 6, timeout=TIMEOUT, message="high watermark 6")
        assert offsets(1) == 3                                      # the LSO: the open transaction's first offset
        readers = {lib: READERS[lib](tbroker.bootstrap, [tp], "read_committed") for lib in LIBS}
        uncommitted = KafkaPythonReader(tbroker.bootstrap, [tp], "read_uncommitted")
        readers["uncommitted"] = uncommitted
        committed_part, later = open_records(topic)
        for lib in LIBS:
            assert readers[lib].read_until({tp: 3}) == committed_part, lib
            assert readers[lib].position(tp) == 3, lib
        assert uncommitted.read_until({tp: 6}) == committed_part + later
        for lib in LIBS:    # the open records are in the log (read above), yet read_committed stays at the LSO
            assert readers[lib].read_for(QUIET_S) == [], lib
            assert readers[lib].position(tp) == 3, lib
        assert offsets(1) == 3

        producer.commit_transaction(TIMEOUT)                        # COMMIT at 6
        wait_until(lambda: offsets(1) == 7, timeout=TIMEOUT, message="LSO 7 after the commit")
        assert offsets(0) == 7
        for lib in LIBS:
            assert readers[lib].read_until({tp: 7}) == later, lib
            assert readers[lib].position(tp) == 7, lib
    finally:
        for r in readers.values():
            r.close()
        admin.close()


def test_java_transactional_producer(tbroker, java_driver):  # noqa: F811 - the fixture
    """Kafka's own producer (kafka-clients 4.x: initTransactions, begin, send, flush, commit/abort) writes the plan:
    the same exact offsets, markers and .txnindex; confluent-kafka's read_committed consumer reads the committed
    records only."""
    lib, topic = "java", "txn-java"
    create_topic(tbroker.bootstrap, topic, partitions=len(PARTITIONS))
    data, _, ends = layout(lib, topic)
    txns = [{"action": action, "records": [{"partition": p, "key": b64(k), "value": b64(v)}
                                           for p, k, v in sends(lib, counts, txn)]}
            for txn, (action, counts) in enumerate(PLAN)]
    (step,) = java_driver(tbroker.bootstrap, [{"op": "txn_produce", "topic": topic, "transactionalId": "tid-java",
                                               "transactions": txns}], timeout=120)
    ok(step)
    assert sorted((m["partition"], m["offset"]) for txn in step["metadata"] for m in txn) == \
        sorted((r.partition, r.offset) for r, _ in data)
    assert_on_disk(tbroker, lib, topic)
    got, positions = read_all("confluent", tbroker.bootstrap, ends, "read_committed")
    assert got == [r for r, committed in data if committed]
    assert positions == ends


def test_java_consumer_stops_at_the_lso(tbroker, java_driver):  # noqa: F811 - the fixture
    """Kafka's Java consumer with an open transaction: read_committed polls 3 s for 3 records and gets only 0 and 1
    (its endOffsets, ListOffsets read_committed: the LSO 3) while read_uncommitted reads 0, 1, 3, 4, 5 (end 6);
    after the commit read_committed reads all five and ends at 7."""
    topic = "txn-open-java"
    producer = open_transaction(tbroker.bootstrap, topic, "tid-open-java")
    committed_part, later = open_records(topic)

    def recs(step):
        ok(step)
        return [Rec(x["topic"], x["partition"], x["offset"], unb64(x["key"]), unb64(x["value"]))
                for x in step["records"]]
    rc, ru = java_driver(tbroker.bootstrap, [
        {"op": "consume", "topic": topic, "count": 3, "timeoutMs": 3000,
         "config": {"isolation.level": "read_committed"}},
        {"op": "consume", "topic": topic, "count": 5, "config": {"isolation.level": "read_uncommitted"}}])
    assert (recs(rc), rc["timedOut"], rc["endOffsets"]) == (committed_part, True, {"0": 3})
    assert (recs(ru), ru["timedOut"], ru["endOffsets"]) == (committed_part + later, False, {"0": 6})
    producer.commit_transaction(TIMEOUT)
    (rc,) = java_driver(tbroker.bootstrap, [
        {"op": "consume", "topic": topic, "count": 5, "config": {"isolation.level": "read_committed"}}])
    assert (recs(rc), rc["timedOut"], rc["endOffsets"]) == (committed_part + later, False, {"0": 7})


def test_java_consumer_isolation_levels(tbroker, written, java_driver):  # noqa: F811 - the fixture
    """Kafka's own consumer (kafka-clients 4.x) reads what the transactional producers wrote: read_committed the
    committed records only, read_uncommitted all of them; its endOffsets are the log ends (no open
    transaction)."""
    topics = produced_topics(written)
    steps, expect = [], []
    for plib, topic in sorted(topics.items()):
        data, _, ends = layout(plib, topic)
        for isolation, keep in (("read_committed", lambda c: c), ("read_uncommitted", lambda c: True)):
            recs = [r for r, committed in data if keep(committed)]
            steps.append({"op": "consume", "topic": topic, "count": len(recs),
                          "config": {"isolation.level": isolation}})
            expect.append((recs, {str(p): ends[(topic, p)] for p in PARTITIONS}))
    results = java_driver(tbroker.bootstrap, steps, timeout=120)
    for step, (recs, ends) in zip(results, expect):
        ok(step)
        assert not step["timedOut"], step
        got = [Rec(x["topic"], x["partition"], x["offset"], unb64(x["key"]), unb64(x["value"]))
               for x in step["records"]]
        assert sorted(got) == sorted(recs)
        assert step["endOffsets"] == ends


def test_kafkajs_group_consumer_reads_committed(tbroker, written, kafkajs):
    """kafkajs 2.2.4's group consumer (its default readUncommitted: false is read_committed) reads exactly the
    committed records of each produced topic."""
    for plib, topic in sorted(produced_topics(written).items()):
        data, _, _ = layout(plib, topic)
        want = [r for r, committed in data if committed]
        result = kafkajs({"brokers": [tbroker.bootstrap], "topic": topic, "mode": "consume", "count": len(want),
                          "timeoutMs": int(TIMEOUT * 1000)}, timeout=TIMEOUT + 30)
        assert not result["timedOut"], result
        got = [Rec(topic, x["partition"], int(x["offset"]), unb64(x["key"]), unb64(x["value"]))
               for x in result["records"]]
        assert sorted(got) == want


def test_kcat_reads_committed_to_the_end(tbroker, written, kcat):
    """kcat (librdkafka; isolation.level read_committed set explicitly) from the beginning to the end of each
    partition (-e): exactly the committed records, the end found past the markers."""
    for plib, topic in sorted(produced_topics(written).items()):
        data, _, _ = layout(plib, topic)
        for p in PARTITIONS:
            want = [r for r, committed in data if committed and r.partition == p]
            got = kcat_consume(tbroker.bootstrap, topic, p, len(want), extra=("-X", "isolation.level=read_committed"))
            assert [Rec(topic, g.partition, g.offset, g.key, g.value) for g in got] == want
