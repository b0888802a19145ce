"""kbroker.connect.worker against a real kbroker broker (issue 17 items 4-6; Kafka's WorkerSourceTask,
WorkerSinkTask, FileStream connectors and KIP-298 error handling).

One broker (embedded coordination) for the module; each test runs Workers in this process (threads) with its own
topics and files:

- source: a file -> topic with JsonConverter (schemas on): the exact bytes of Kafka's envelope, read back with
  confluent-kafka; the offsets file holds Kafka's key/value bytes; a second Worker on the same offsets file after a
  clean stop reads only the lines appended since (no duplicates, no loss);
- sink: topic -> file, the file's exact contents, the group ``connect-<name>`` committed the end offsets, and a
  second Worker appends only the records produced after the first one stopped;
- errors: a value that is not JSON under errors.tolerance=all goes to the dead letter queue with its original bytes
  and Kafka's __connect.errors.* headers while the good records reach the file; under tolerance none the task is
  FAILED with "Tolerance exceeded in error handler" and the converter's error in its trace.
"""
import json
import time
import uuid

import pytest

from tests.integration.harness import BrokerProcess, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
import confluent_kafka.admin  # noqa: E402

from kbroker.connect.offsets import FileOffsetBackingStore, MemoryOffsetBackingStore  # noqa: E402
from kbroker.connect.plugins import Plugins  # noqa: E402
from kbroker.connect.records import ConnectorTaskId  # noqa: E402
from kbroker.connect.status import MemoryStatusBackingStore  # noqa: E402
from kbroker.connect.worker import Worker  # noqa: E402
from kbroker.connect.worker_config import WorkerConfig  # noqa: E402

BROKER_OVERRIDES = {"offsets.topic.num.partitions": 1, "offsets.topic.replication.factor": 1,
                    "group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 1000}
JSON = "org.apache.kafka.connect.json.JsonConverter"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("connect-worker"), overrides=BROKER_OVERRIDES)
    b.start()
    yield b
    b.close()


def _uid():
    return uuid.uuid4().hex[:8]


def make_worker(broker, offsets=None, **extra):
    props = {"bootstrap.servers": broker.bootstrap, "offset.storage.file.filename": "/nonexistent",
             "key.converter": JSON, "value.converter": JSON, "offset.flush.interval.ms": "500",
             "task.shutdown.graceful.timeout.ms": "10000", "consumer.session.timeout.ms": "6000",
             "consumer.heartbeat.interval.ms": "1000"}
    props.update({k: str(v) for k, v in extra.items()})
    status = MemoryStatusBackingStore()
    worker = Worker(WorkerConfig(props), Plugins(), offsets or MemoryOffsetBackingStore(), status, "127.0.0.1:8083")
    worker.start()
    return worker


def run_connector(worker, name, props):
    props = dict(props, name=name)
    assert worker.start_connector(name, props, on_reconfigure=lambda n: None)
    configs = worker.connector_task_configs(name, props)
    ids = []
    for i, task_props in enumerate(configs):
        tid = ConnectorTaskId(name, i)
        assert worker.start_task(tid, props, task_props)
        ids.append(tid)
    return ids


def consume_all(broker, topic, expected, timeout=20.0):
    """Exactly ``expected`` messages of ``topic`` (from the beginning), as confluent-kafka Message objects."""
    c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "check-" + _uid(),
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    out = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < expected and time.monotonic() < deadline:
            for m in c.consume(num_messages=100, timeout=0.5):
                if m.error() is None:
                    out.append(m)
        # Nothing more: the same number a second later (no duplicate trailing behind).
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            out.extend(m for m in c.consume(num_messages=100, timeout=0.2) if m.error() is None)
    finally:
        c.close()
    return out


def produce(broker, topic, values, headers=None):
    p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    for v in values:
        p.produce(topic, value=v, headers=headers)
    assert p.flush(15) == 0


def test_file_source_to_topic_and_resume(broker, tmp_path):
    topic = "src-" + _uid()
    src = tmp_path / "in.txt"
    src.write_bytes(b"foo\nbar\r\nb\xc3\xa4z\n")
    offsets_path = tmp_path / "connect.offsets"
    props = {"connector.class": "FileStreamSource", "file": str(src), "topic": topic, "tasks.max": "1"}

    worker = make_worker(broker, FileOffsetBackingStore(offsets_path))
    try:
        ids = run_connector(worker, "file-src", props)
        assert ids == [ConnectorTaskId("file-src", 0)]
        msgs = consume_all(broker, topic, 3)
        assert [m.value() for m in msgs] == [
            b'{"schema":{"type":"string","optional":false},"payload":"foo"}',
            b'{"schema":{"type":"string","optional":false},"payload":"bar"}',
            '{"schema":{"type":"string","optional":false},"payload":"b\u00e4z"}'.encode()]
        # A null key without a schema is a null key (Kafka's JsonConverter returns null for both null).
        assert [m.key() for m in msgs] == [None] * 3
        assert worker.status_store.get_task(ids[0]).state == "RUNNING"
        assert worker.status_store.get_connector("file-src").state == "RUNNING"
        assert worker.active_topics("file-src") == {topic}
    finally:
        worker.stop()
    assert worker.status_store.get_task(ids[0]).state == "UNASSIGNED"
    stored = FileOffsetBackingStore(offsets_path)
    stored.start()
    key = ('["file-src",{"filename":"%s"}]' % src).encode()
    assert stored.snapshot() == {key: b'{"position":14}'}

    with open(src, "ab") as f:
        f.write(b"qux\nquux")         # the last line has no terminator yet: not read
    worker = make_worker(broker, FileOffsetBackingStore(offsets_path))
    try:
        run_connector(worker, "file-src", props)
        msgs = consume_all(broker, topic, 4)
        assert [json.loads(m.value())["payload"] for m in msgs] == ["foo", "bar", "b\u00e4z", "qux"]
    finally:
        worker.stop()
    stored = FileOffsetBackingStore(offsets_path)
    stored.start()
    assert stored.snapshot() == {key: b'{"position":18}'}


def test_topic_to_file_sink(broker, tmp_path):
    topic = "sink-" + _uid()
    produce(broker, topic, [b'{"schema":{"type":"string","optional":false},"payload":"line %d"}' % i
                            for i in range(5)])
    out = tmp_path / "out.txt"
    worker = make_worker(broker)
    name = "file-sink-" + _uid()
    try:
        ids = run_connector(worker, name, {"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                                           "file": str(out), "topics": topic, "tasks.max": "1"})
        wait_until(lambda: out.exists() and out.read_bytes().count(b"\n") >= 5, timeout=30,
                   message="sink file never got 5 lines")
        assert worker.active_topics(name) == {topic}
    finally:
        worker.stop()
    assert out.read_bytes() == b"".join(b"line %d\n" % i for i in range(5))
    assert worker.status_store.get_task(ids[0]).state == "UNASSIGNED"
    c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "connect-" + name})
    try:
        committed = c.committed([confluent_kafka.TopicPartition(topic, 0)], timeout=10)
    finally:
        c.close()
    assert committed[0].offset == 5

    # A new worker resumes from the committed offsets: only the records produced since reach the file.
    produce(broker, topic, [b'{"schema":{"type":"string","optional":false},"payload":"line %d"}' % i
                            for i in range(5, 7)])
    worker = make_worker(broker)
    try:
        run_connector(worker, name, {"connector.class": "FileStreamSink", "file": str(out), "topics": topic})
        wait_until(lambda: out.read_bytes().count(b"\n") >= 7, timeout=30, message="sink file never got 7 lines")
    finally:
        worker.stop()
    assert out.read_bytes() == b"".join(b"line %d\n" % i for i in range(7))


def test_dead_letter_queue_with_context_headers(broker, tmp_path):
    topic = "dlq-in-" + _uid()
    dlq = "dlq-" + _uid()
    good = b'{"schema":{"type":"string","optional":false},"payload":"ok"}'
    produce(broker, topic, [good, b"not json", good], headers=[("h1", b"v1")])
    out = tmp_path / "out.txt"
    worker = make_worker(broker)
    name = "dlq-sink-" + _uid()
    try:
        ids = run_connector(worker, name, {
            "connector.class": "FileStreamSink", "file": str(out), "topics": topic,
            "errors.tolerance": "all", "errors.log.enable": "true",
            "errors.deadletterqueue.topic.name": dlq, "errors.deadletterqueue.topic.replication.factor": "1",
            "errors.deadletterqueue.context.headers.enable": "true"})
        wait_until(lambda: out.exists() and out.read_bytes().count(b"\n") >= 2, timeout=30,
                   message="sink file never got the 2 good lines")
        msgs = consume_all(broker, dlq, 1)
        assert worker.status_store.get_task(ids[0]).state == "RUNNING"
    finally:
        worker.stop()
    assert out.read_bytes() == b"ok\nok\n"
    assert len(msgs) == 1
    m = msgs[0]
    assert m.value() == b"not json" and m.key() is None
    headers = m.headers()
    assert headers[0] == ("h1", b"v1")
    ctx = dict(headers[1:])
    assert [h[0] for h in headers[1:8]] == [
        "__connect.errors.topic", "__connect.errors.partition", "__connect.errors.offset",
        "__connect.errors.connector.name", "__connect.errors.task.id", "__connect.errors.stage",
        "__connect.errors.class.name"]
    assert ctx["__connect.errors.topic"] == topic.encode()
    assert ctx["__connect.errors.partition"] == b"0"
    assert ctx["__connect.errors.offset"] == b"1"
    assert ctx["__connect.errors.connector.name"] == name.encode()
    assert ctx["__connect.errors.task.id"] == b"0"
    assert ctx["__connect.errors.stage"] == b"VALUE_CONVERTER"
    assert ctx["__connect.errors.class.name"].endswith(b"JsonConverter")
    assert ctx["__connect.errors.exception.class.name"].endswith(b"DataError")
    assert b"DataError" in ctx["__connect.errors.exception.stacktrace"]
    # All three offsets were committed (the bad record is skipped, not retried).
    c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "connect-" + name})
    try:
        assert c.committed([confluent_kafka.TopicPartition(topic, 0)], timeout=10)[0].offset == 3
    finally:
        c.close()


def test_tolerance_none_fails_the_task_with_its_trace(broker, tmp_path):
    topic = "fail-in-" + _uid()
    produce(broker, topic, [b"not json"])
    out = tmp_path / "out.txt"
    worker = make_worker(broker)
    name = "fail-sink-" + _uid()
    try:
        ids = run_connector(worker, name, {"connector.class": "FileStreamSink", "file": str(out), "topics": topic})
        wait_until(lambda: worker.status_store.get_task(ids[0]).state == "FAILED", timeout=30,
                   message="task never FAILED")
        trace = worker.status_store.get_task(ids[0]).trace
        assert "Tolerance exceeded in error handler" in trace
        assert "DataError" in trace
        assert worker.status_store.get_connector(name).state == "RUNNING"
    finally:
        worker.stop()
    assert worker.status_store.get_task(ids[0]).state == "FAILED"
    assert not out.exists() or out.read_bytes() == b""


def test_source_creates_its_topics_kip158(broker, tmp_path):
    uid = _uid()
    src = tmp_path / "in.txt"
    src.write_bytes(b"x\n")
    kept_topic = "kept-" + uid
    worker = make_worker(broker)
    name = "creator-" + uid
    try:
        ids = run_connector(worker, name, {
            "connector.class": "FileStreamSource", "file": str(src), "topic": kept_topic,
            "topic.creation.default.replication.factor": "1", "topic.creation.default.partitions": "2",
            "topic.creation.groups": "kept", "topic.creation.kept.include": "kept-.*",
            "topic.creation.kept.partitions": "3", "topic.creation.kept.retention.ms": "123456789"})
        assert len(consume_all(broker, kept_topic, 1)) == 1
        assert worker.status_store.get_task(ids[0]).state == "RUNNING"
    finally:
        worker.stop()
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": broker.bootstrap})
    md = admin.list_topics(timeout=10)
    assert len(md.topics[kept_topic].partitions) == 3
    res = confluent_kafka.admin.ConfigResource(confluent_kafka.admin.ConfigResource.Type.TOPIC, kept_topic)
    configs = admin.describe_configs([res])[res].result(timeout=10)
    assert configs["retention.ms"].value == "123456789"
