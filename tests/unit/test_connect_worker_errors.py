"""kbroker.connect.errorhandling (KIP-298) and the worker's delivery rules, with fake confluent-kafka clients.

The fake Producer acknowledges only when the test says so: it proves that source offsets are written only after
every record polled up to them was acknowledged, and that a failed delivery fails the task.
"""
import logging
import threading
import time

import pytest

from kbroker.connect import errorhandling as eh
from kbroker.connect.api import SinkConnector, SinkTask, SourceConnector, SourceTask
from kbroker.connect.exceptions import ConnectError, DataError, RetriableError
from kbroker.connect.offsets import MemoryOffsetBackingStore, offset_key
from kbroker.connect.plugins import Plugins
from kbroker.connect.records import ConnectorTaskId, SourceRecord
from kbroker.connect.status import MemoryStatusBackingStore
from kbroker.connect.worker import Worker
from kbroker.connect.worker_config import WorkerConfig

TID = ConnectorTaskId("conn", 3)


def wait_for(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.01)
    raise AssertionError("condition not met within %.1f s" % timeout)


# ------------------------------------------------------------------------------------------------ operator
def test_retriable_errors_are_retried_with_backoff_until_success(monkeypatch):
    delays = []
    op = eh.RetryWithToleranceOperator(retry_timeout_ms=-1, retry_delay_max_ms=1000, task_id=TID)
    monkeypatch.setattr(op.stop_event, "wait", lambda d: delays.append(d) or False)
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 5:
            raise RetriableError("not yet")
        return "ok"
    assert op.execute(eh.VALUE_CONVERTER, flaky, flaky) == "ok"
    assert delays == [0.3, 0.6, 1.0, 1.0]      # 300 ms doubling, capped by errors.retry.delay.max.ms


def test_no_retry_by_default_and_tolerance_none_raises_with_cause():
    op = eh.RetryWithToleranceOperator(task_id=TID)
    calls = []

    def bad():
        calls.append(1)
        raise RetriableError("boom")
    with pytest.raises(eh.ToleranceExceeded, match="Tolerance exceeded in error handler") as e:
        op.execute(eh.KEY_CONVERTER, bad, bad)
    assert len(calls) == 1 and isinstance(e.value.__cause__, RetriableError)


def test_retry_timeout_bounds_the_retries():
    op = eh.RetryWithToleranceOperator(retry_timeout_ms=200, retry_delay_max_ms=50, tolerance="all", task_id=TID)
    calls = []

    def bad():
        calls.append(1)
        raise RetriableError("boom")
    start = time.monotonic()
    assert op.execute(eh.TRANSFORMATION, bad, bad) is eh.SKIP
    assert 0.19 <= time.monotonic() - start < 1.0
    assert 3 <= len(calls) <= 6 and op.total_failures == 1 and op.total_skipped == 1


class _Recorder:
    def __init__(self):
        self.seen = []

    def report(self, ctx):
        self.seen.append((ctx.stage, ctx.executing_class, type(ctx.error).__name__, ctx.consumed.offset))

    def flush(self, timeout):
        return True

    def close(self):
        pass


def test_tolerance_all_reports_and_skips():
    rec = _Recorder()
    op = eh.RetryWithToleranceOperator(tolerance="all", reporters=[rec], task_id=TID)
    op.context.reset(consumed=eh.ConsumedRecord("t", 1, 7, key=b"k", value=b"v"))

    def bad(x):
        raise DataError("bad " + x)
    assert op.execute(eh.VALUE_CONVERTER, DataError, bad, "x") is eh.SKIP
    assert rec.seen == [("VALUE_CONVERTER", "kbroker.connect.exceptions.DataError", "DataError", 7)]
    assert op.execute(eh.VALUE_CONVERTER, DataError, lambda: 5) == 5


class FakeProducer:
    """confluent_kafka.Producer stand-in: records produce() calls; acknowledges on ack_all() or, when ``auto``,
    on flush()."""
    instances = []
    start_auto = True       # what a new producer starts with (set before the task starts: it polls at once)
    start_fail = None

    def __init__(self, conf):
        self.conf = conf
        self.sent = []
        self.pending = []
        self.auto = FakeProducer.start_auto
        self.fail_next = FakeProducer.start_fail
        self.lock = threading.Lock()
        FakeProducer.instances.append(self)

    def produce(self, topic, value=None, key=None, partition=None, on_delivery=None, headers=None,
                timestamp=None):
        with self.lock:
            self.sent.append({"topic": topic, "value": value, "key": key, "headers": headers,
                              "timestamp": timestamp, "partition": partition})
            self.pending.append((topic, len(self.sent) - 1, on_delivery))

    def _deliver(self):
        with self.lock:
            pending, self.pending = self.pending, []
        for topic, offset, cb in pending:
            if cb is None:
                continue
            msg = _Msg(topic, 0, offset)
            if self.fail_next is not None:
                err, self.fail_next = self.fail_next, None
                cb(err, msg)
            else:
                cb(None, msg)

    def poll(self, timeout=0):
        if self.auto:
            self._deliver()
        return 0

    def flush(self, timeout=None):
        if self.auto:
            self._deliver()
        return len(self.pending)

    def purge(self):
        with self.lock:
            self.pending = []

    def close(self):
        self.closed = True


class _Msg:
    def __init__(self, topic, partition, offset):
        self._t, self._p, self._o = topic, partition, offset

    def topic(self):
        return self._t

    def partition(self):
        return self._p

    def offset(self):
        return self._o


def test_dead_letter_queue_reporter_headers():
    producer = FakeProducer({})
    dlq = eh.DeadLetterQueueReporter(TID, " dlq ", True, producer)
    ctx = eh.ProcessingContext(TID)
    ctx.reset(consumed=eh.ConsumedRecord("in", 2, 41, 1700000000000, "CreateTime", b"k", b"v", [("a", b"1")]))
    ctx.stage = eh.VALUE_CONVERTER
    ctx.executing_class = "org.example.Conv"
    try:
        raise DataError("Converting byte[] to Kafka Connect data failed")
    except DataError as e:
        ctx.error = e
    dlq.report(ctx)
    [sent] = producer.sent
    assert (sent["topic"], sent["key"], sent["value"], sent["timestamp"]) == ("dlq", b"k", b"v", 1700000000000)
    names = [h[0] for h in sent["headers"]]
    assert names == ["a", "__connect.errors.topic", "__connect.errors.partition", "__connect.errors.offset",
                     "__connect.errors.connector.name", "__connect.errors.task.id", "__connect.errors.stage",
                     "__connect.errors.class.name", "__connect.errors.exception.class.name",
                     "__connect.errors.exception.message", "__connect.errors.exception.stacktrace"]
    values = dict(sent["headers"])
    assert values["__connect.errors.partition"] == b"2" and values["__connect.errors.offset"] == b"41"
    assert values["__connect.errors.connector.name"] == b"conn" and values["__connect.errors.task.id"] == b"3"
    assert values["__connect.errors.exception.class.name"] == b"kbroker.connect.exceptions.DataError"
    assert values["__connect.errors.exception.message"] == b"Converting byte[] to Kafka Connect data failed"
    assert values["__connect.errors.exception.stacktrace"].startswith(b"Traceback")
    # Without context headers: the original headers only.
    producer2 = FakeProducer({})
    eh.DeadLetterQueueReporter(TID, "dlq", False, producer2).report(ctx)
    assert producer2.sent[0]["headers"] == [("a", b"1")]


def test_log_reporter_message(caplog):
    ctx = eh.ProcessingContext(TID)
    ctx.reset(consumed=eh.ConsumedRecord("in", 0, 5))
    ctx.stage, ctx.executing_class, ctx.error = eh.TRANSFORMATION, "x.Y", DataError("nope")
    with caplog.at_level(logging.ERROR, logger="kbroker.connect.errors"):
        eh.LogReporter(TID, False).report(ctx)
    assert caplog.messages == ["Error encountered in task conn-3. Executing stage 'TRANSFORMATION' with class "
                               "'x.Y', where consumed record is {topic='in', partition=0, offset=5}."]


# ------------------------------------------------------------------------------------------------ worker delivery
class ListSourceTask(SourceTask):
    """Emits the records its connector's class attribute holds, once."""
    batches = []

    def start(self, props):
        self.batches = list(ListSourceTask.batches)
        self.committed = []

    def poll(self):
        if self.batches:
            return self.batches.pop(0)
        time.sleep(0.01)
        return None

    def commit_record(self, record, metadata):
        COMMITTED.append((record.source_offset, metadata))

    def stop(self):
        pass


COMMITTED = []


class ListSource(SourceConnector):
    def start(self, props):
        pass

    def task_class(self):
        return ListSourceTask

    def task_configs(self, max_tasks):
        return [{}]

    def stop(self):
        pass


def _records(n, start=0):
    return [SourceRecord("out", None, value="v%d" % i, source_partition={"p": 0}, source_offset={"o": i})
            for i in range(start, start + n)]


@pytest.fixture
def fake_clients(monkeypatch):
    import confluent_kafka
    FakeProducer.instances = []
    FakeProducer.start_auto, FakeProducer.start_fail = True, None
    COMMITTED.clear()
    monkeypatch.setattr(confluent_kafka, "Producer", FakeProducer)
    return FakeProducer


def _worker(**extra):
    props = {"offset.storage.file.filename": "/x", "offset.flush.interval.ms": "50",
             "key.converter": "org.apache.kafka.connect.storage.StringConverter",
             "value.converter": "org.apache.kafka.connect.storage.StringConverter"}
    props.update(extra)
    w = Worker(WorkerConfig(props), Plugins(), MemoryOffsetBackingStore(), MemoryStatusBackingStore(), "w:1")
    w.start()
    return w


CONN = {"name": "conn", "connector.class": "tests.unit.test_connect_worker_errors:ListSource"}


def test_source_offsets_written_only_after_every_record_is_acknowledged(fake_clients):
    ListSourceTask.batches = [_records(3), _records(2, 3)]
    fake_clients.start_auto = False     # acknowledgements held back
    w = _worker()
    try:
        assert w.start_connector("conn", CONN, None)
        assert w.start_task(TID, CONN, w.connector_task_configs("conn", CONN)[0])
        wait_for(lambda: fake_clients.instances)
        producer = fake_clients.instances[0]
        wait_for(lambda: len(producer.sent) == 5)
        time.sleep(0.3)                 # several offset.flush.interval.ms (50 ms) commits pass without acks
        key = offset_key("conn", {"p": 0})
        assert w.offset_store.get([key]) == {key: None}
        assert producer.conf["acks"] == "all" and producer.conf["enable.idempotence"] == "true"
        assert producer.conf["partitioner"] == "murmur2_random"
        assert producer.conf["client.id"] == "connector-producer-conn-3"
        producer.auto = True
        wait_for(lambda: w.offset_store.get([key])[key] == b'{"o":4}')
        assert [s["value"] for s in producer.sent] == [b"v0", b"v1", b"v2", b"v3", b"v4"]
        assert COMMITTED == [({"o": i}, ("out", 0, i)) for i in range(5)]
        assert w.status_store.get_task(TID).state == "RUNNING"
        assert w.active_topics("conn") == {"out"}
    finally:
        w.stop()
    assert w.status_store.get_task(TID).state == "UNASSIGNED"


def test_failed_delivery_fails_the_task_and_commits_nothing(fake_clients):
    ListSourceTask.batches = [_records(2)]
    fake_clients.start_fail = "MSG_SIZE_TOO_LARGE"
    w = _worker()
    try:
        w.start_connector("conn", CONN, None)
        w.start_task(TID, CONN, w.connector_task_configs("conn", CONN)[0])
        wait_for(lambda: w.status_store.get_task(TID).state == "FAILED")
        assert "Unrecoverable exception from producer send callback" in w.status_store.get_task(TID).trace
        key = offset_key("conn", {"p": 0})
        assert w.offset_store.get([key]) == {key: None}
    finally:
        w.stop()
    assert w.status_store.get_task(TID).state == "FAILED"


def test_pause_stops_polling_and_resume_continues(fake_clients):
    ListSourceTask.batches = [_records(1), _records(1, 1)]
    w = _worker()
    try:
        w.start_connector("conn", CONN, None, target_state="PAUSED")
        assert w.status_store.get_connector("conn").state == "PAUSED"
        w.start_task(TID, CONN, {"task.class": "tests.unit.test_connect_worker_errors.ListSourceTask"},
                     target_state="PAUSED")
        wait_for(lambda: w.status_store.get_task(TID).state == "PAUSED")
        time.sleep(0.2)
        assert fake_clients.instances[0].sent == []
        w.set_target_state("conn", "STARTED")
        wait_for(lambda: len(fake_clients.instances[0].sent) == 2)
        assert w.status_store.get_task(TID).state == "RUNNING"
        assert w.status_store.get_connector("conn").state == "RUNNING"
    finally:
        w.stop()


class BrokenConnector(SourceConnector):
    def start(self, props):
        raise ConnectError("cannot reach the database")

    def stop(self):
        pass


def test_connector_start_failure_is_failed_with_trace():
    w = _worker()
    conf = {"name": "b", "connector.class": "tests.unit.test_connect_worker_errors:BrokenConnector"}
    assert w.start_connector("b", conf, None) is False
    s = w.status_store.get_connector("b")
    assert s.state == "FAILED" and "cannot reach the database" in s.trace
    assert w.start_connector("c", {"name": "c", "connector.class": "Nope"}, None) is False
    assert "Failed to find any class" in w.status_store.get_connector("c").trace
    w.stop()


def test_task_config_additions_and_tasks_max():
    w = _worker()
    conf = {"name": "s", "connector.class": "FileStreamSink", "topics": "a,b", "tasks.max": "2", "file": "/tmp/x"}
    assert w.start_connector("s", conf, None)
    assert w.connector_task_configs("s", conf) == [   # the connector's own keys (Kafka 4's FileStreamSink) + task.class
        dict(conf, **{"task.class": "kbroker.connect.file.FileStreamSinkTask"})] * 2
    w.stop()


# ------------------------------------------------------------------------------------------------ sink delivery
class _ConsumedMsg:
    def __init__(self, topic, partition, offset, value, key=None, headers=None):
        self._t, self._p, self._o, self._v, self._k, self._h = topic, partition, offset, value, key, headers

    def error(self):
        return None

    def topic(self):
        return self._t

    def partition(self):
        return self._p

    def offset(self):
        return self._o

    def key(self):
        return self._k

    def value(self):
        return self._v

    def headers(self):
        return self._h

    def timestamp(self):
        return (1, 1700000000000)     # TIMESTAMP_CREATE_TIME


class FakeConsumer:
    """confluent_kafka.Consumer stand-in: one partition of each subscribed topic is assigned on the first consume();
    ``feed`` queues records; ``commits`` records every synchronous commit."""
    instances = []

    def __init__(self, conf):
        self.conf = conf
        self.queue = []
        self.commits = []
        self.assigned = None
        self.calls = []
        self.log = []
        self.consumes = 0
        self.lock = threading.Lock()
        FakeConsumer.instances.append(self)

    def subscribe(self, topics, on_assign=None, on_revoke=None):
        self.topics, self.on_assign, self.on_revoke = topics, on_assign, on_revoke

    def assign(self, parts):
        self.assigned = parts

    def pause(self, parts):
        self.calls.append(("pause", sorted((p.topic, p.partition) for p in parts)))

    def resume(self, parts):
        self.calls.append(("resume", sorted((p.topic, p.partition) for p in parts)))

    def seek(self, part):
        """The partition's records from ``part.offset`` on are delivered again (as librdkafka's seek)."""
        self.calls.append(("seek", (part.topic, part.partition, part.offset)))
        tp = (part.topic, part.partition)
        with self.lock:
            self.queue = ([m for m in self.queue if (m.topic(), m.partition()) != tp]
                          + [m for m in self.log if (m.topic(), m.partition()) == tp and m.offset() >= part.offset])

    def feed(self, topic, values, start=0):
        with self.lock:
            msgs = [_ConsumedMsg(topic, 0, start + i, v) for i, v in enumerate(values)]
            self.queue += msgs
            self.log += msgs

    def consume(self, num_messages=1, timeout=-1):
        import confluent_kafka
        if self.assigned is None:
            self.on_assign(self, [confluent_kafka.TopicPartition(t, 0) for t in self.topics])
        with self.lock:
            self.consumes += 1
            out, self.queue = self.queue[:num_messages], self.queue[num_messages:]
        if not out:
            time.sleep(min(timeout, 0.02))
        return out

    def commit(self, offsets=None, asynchronous=True):
        assert asynchronous is False
        self.commits.append({(p.topic, p.partition): p.offset for p in offsets})

    def close(self):
        pass


class GateSinkTask(SinkTask):
    """A sink task whose flush fails until ``GateSinkTask.open_gate`` is set."""
    open_gate = threading.Event()
    put_values = []
    flushed = []
    batch_sizes = []

    def start(self, props):
        pass

    def put(self, records):
        GateSinkTask.put_values.extend(r.value for r in records)
        GateSinkTask.batch_sizes.append(len(records))

    def flush(self, offsets):
        if not GateSinkTask.open_gate.is_set():
            raise ConnectError("storage not reachable")
        GateSinkTask.flushed.append(dict(offsets))

    def stop(self):
        pass


class GatedSink(SinkConnector):
    def start(self, props):
        pass

    def task_class(self):
        return GateSinkTask

    def task_configs(self, max_tasks):
        return [{}]

    def stop(self):
        pass


SINK = {"name": "gs", "connector.class": "tests.unit.test_connect_worker_errors:GatedSink", "topics": "in"}


@pytest.fixture
def fake_consumer(monkeypatch):
    import confluent_kafka
    FakeConsumer.instances = []
    GateSinkTask.open_gate.clear()
    GateSinkTask.put_values.clear()
    GateSinkTask.flushed.clear()
    GateSinkTask.batch_sizes.clear()
    monkeypatch.setattr(confluent_kafka, "Consumer", FakeConsumer)
    return FakeConsumer


def test_sink_offsets_committed_only_after_flush_returned(fake_consumer):
    w = _worker()
    tid = ConnectorTaskId("gs", 0)
    try:
        assert w.start_connector("gs", SINK, None)
        assert w.start_task(tid, SINK, w.connector_task_configs("gs", SINK)[0])
        wait_for(lambda: fake_consumer.instances)
        consumer = fake_consumer.instances[0]
        assert consumer.conf["group.id"] == "connect-gs" and consumer.conf["enable.auto.commit"] == "false"
        assert consumer.conf["auto.offset.reset"] == "earliest"
        consumer.feed("in", [b"a", b"b", b"c"])
        wait_for(lambda: GateSinkTask.put_values == ["a", "b", "c"])
        time.sleep(0.3)                  # several offset.flush.interval.ms (50 ms): flush fails, nothing committed
        assert consumer.commits == []
        GateSinkTask.open_gate.set()
        wait_for(lambda: consumer.commits)
        assert consumer.commits[0] == {("in", 0): 3}
        assert GateSinkTask.flushed[0] == {("in", 0): 3}
        assert w.active_topics("gs") == {"in"}
    finally:
        w.stop()
    assert w.status_store.get_task(tid).state == "UNASSIGNED"


class ReportingTask(SinkTask):
    """KIP-610: reports the records whose value is "bad" through the errant record reporter."""

    def start(self, props):
        pass

    def put(self, records):
        for r in records:
            if r.value == "bad":
                self.context.errant_record_reporter()(r, DataError("cannot store " + r.value))
            else:
                GateSinkTask.put_values.append(r.value)

    def stop(self):
        pass


def test_errant_record_reporter_sends_to_the_error_handler(fake_consumer):
    w = _worker()
    tid = ConnectorTaskId("gs", 0)
    conf = dict(SINK, **{"errors.tolerance": "all"})
    try:
        w.start_connector("gs", conf, None)
        w.start_task(tid, conf, {"task.class": "tests.unit.test_connect_worker_errors:ReportingTask"})
        wait_for(lambda: fake_consumer.instances)
        consumer = fake_consumer.instances[0]
        consumer.feed("in", [b"ok1", b"bad", b"ok2"])
        wait_for(lambda: consumer.commits and consumer.commits[-1] == {("in", 0): 3})
        assert GateSinkTask.put_values == ["ok1", "ok2"]
        assert w.status_store.get_task(tid).state == "RUNNING"
    finally:
        w.stop()
    # Under tolerance none the same report fails the task.
    fake_consumer.instances.clear()
    GateSinkTask.put_values.clear()
    w = _worker()
    try:
        w.start_connector("gs", SINK, None)
        w.start_task(tid, SINK, {"task.class": "tests.unit.test_connect_worker_errors:ReportingTask"})
        wait_for(lambda: fake_consumer.instances)
        fake_consumer.instances[0].feed("in", [b"bad"])
        wait_for(lambda: w.status_store.get_task(tid).state == "FAILED")
        assert "Tolerance exceeded in error handler" in w.status_store.get_task(tid).trace
        assert "cannot store bad" in w.status_store.get_task(tid).trace
        assert fake_consumer.instances[0].commits == []
    finally:
        w.stop()


class FailLater(SourceConnector):
    def start(self, props):
        self.context.raise_error(ConnectError("lost the database"))

    def stop(self):
        pass


def test_connector_raise_error_fails_it_and_it_stays_failed():
    w = _worker()
    conf = {"name": "f", "connector.class": "tests.unit.test_connect_worker_errors:FailLater"}
    w.start_connector("f", conf, None)
    s = w.status_store.get_connector("f")
    assert s.state == "FAILED" and "lost the database" in s.trace
    w.set_target_state("f", "PAUSED")
    w.set_target_state("f", "STARTED")
    assert w.status_store.get_connector("f").state == "FAILED"
    w.stop_connector("f")
    assert w.status_store.get_connector("f").state == "FAILED"
    w.stop()


def test_sink_batches_bounded_by_max_poll_records(fake_consumer):
    w = _worker(**{"consumer.max.poll.records": "2"})
    tid = ConnectorTaskId("gs", 0)
    try:
        w.start_connector("gs", SINK, None)
        w.start_task(tid, SINK, w.connector_task_configs("gs", SINK)[0])
        wait_for(lambda: fake_consumer.instances)
        fake_consumer.instances[0].feed("in", [b"1", b"2", b"3", b"4", b"5"])
        wait_for(lambda: len(GateSinkTask.put_values) == 5)
        assert GateSinkTask.batch_sizes == [2, 2, 1]
        assert "max.poll.records" not in fake_consumer.instances[0].conf
    finally:
        w.stop()
    w = _worker(**{"consumer.max.poll.records": "0"})
    try:
        w.start_connector("gs", SINK, None)
        w.start_task(tid, SINK, w.connector_task_configs("gs", SINK)[0])
        wait_for(lambda: w.status_store.get_task(tid).state == "FAILED")
        assert "max.poll.records" in w.status_store.get_task(tid).trace
    finally:
        w.stop()


class FlakySinkTask(SinkTask):
    """put() raises RetriableError twice (asking for a 300 ms wait), then stores the batch."""
    attempts = []

    def start(self, props):
        pass

    def put(self, records):
        FlakySinkTask.attempts.append([r.value for r in records])
        if len(FlakySinkTask.attempts) <= 2:
            self.context.timeout(300)
            raise RetriableError("busy")
        GateSinkTask.put_values.extend(r.value for r in records)

    def stop(self):
        pass


def test_retriable_put_redelivers_the_batch_while_the_consumer_keeps_polling(fake_consumer):
    FlakySinkTask.attempts = []
    GateSinkTask.open_gate.set()
    w = _worker()
    tid = ConnectorTaskId("gs", 0)
    try:
        w.start_connector("gs", SINK, None)
        w.start_task(tid, SINK, {"task.class": "tests.unit.test_connect_worker_errors:FlakySinkTask"})
        wait_for(lambda: fake_consumer.instances)
        consumer = fake_consumer.instances[0]
        consumer.feed("in", [b"a", b"b"])
        wait_for(lambda: FlakySinkTask.attempts)
        consumer.feed("in", [b"c"], start=2)        # arrives while paused: must not be lost
        wait_for(lambda: GateSinkTask.put_values == ["a", "b", "c"])
        assert FlakySinkTask.attempts[:3] == [["a", "b"], ["a", "b"], ["a", "b"]]
        assert ("pause", [("in", 0)]) in consumer.calls and ("resume", [("in", 0)]) in consumer.calls
        assert ("seek", ("in", 0, 2)) in consumer.calls
        assert consumer.consumes >= 4               # polled during the two 300 ms waits (0.5 s slices at most)
        wait_for(lambda: consumer.commits and consumer.commits[-1] == {("in", 0): 3})
    finally:
        w.stop()


def test_sink_topics_regex_must_match_whole_names(fake_consumer):
    GateSinkTask.open_gate.set()
    conf = {"name": "gs", "connector.class": "tests.unit.test_connect_worker_errors:GatedSink",
            "topics.regex": "in-[0-9]+"}
    w = _worker()
    try:
        w.start_connector("gs", conf, None)
        w.start_task(ConnectorTaskId("gs", 0), conf, w.connector_task_configs("gs", conf)[0])
        wait_for(lambda: fake_consumer.instances and getattr(fake_consumer.instances[0], "topics", None))
        assert fake_consumer.instances[0].topics == ["^(in-[0-9]+)$"]
    finally:
        w.stop()
