"""kbroker.connect: offsets, statuses, FileStream connectors, plugins, worker and connector configs (no broker)."""
import json
import os
import threading

import pytest

from kbroker.connect import connector_config as cc
from kbroker.connect.api import SinkConnector, SourceConnector, SourceTaskContext
from kbroker.connect.exceptions import BadRequestError, ConfigError, ConnectError
from kbroker.connect.file import (FileStreamSinkConnector, FileStreamSinkTask, FileStreamSourceConnector,
                                  FileStreamSourceTask)
from kbroker.connect.offsets import (FileOffsetBackingStore, MemoryOffsetBackingStore, OffsetStorageReader,
                                     offset_key, offset_value, parse_key)
from kbroker.connect.plugins import Plugins
from kbroker.connect.records import ConnectorTaskId, SinkRecord
from kbroker.connect.status import ConnectorStatus, MemoryStatusBackingStore, TaskStatus
from kbroker.connect.worker_config import WorkerConfig


# ------------------------------------------------------------------------------------------------ offsets
def test_offset_bytes_are_kafkas():
    assert offset_key("file-source", {"filename": "/tmp/test.txt"}) == b'["file-source",{"filename":"/tmp/test.txt"}]'
    assert offset_value({"position": 42}) == b'{"position":42}'
    assert offset_value(None) is None
    # Key order is the connector's (Jackson keeps a map's insertion order), non-ASCII as UTF-8.
    assert offset_key("c", {"b": 1, "a": "\u00e9"}) == '["c",{"b":1,"a":"\u00e9"}]'.encode()
    assert parse_key(b'["c",{"x":1}]') == ("c", {"x": 1})
    with pytest.raises(ConnectError):
        parse_key(b'{"c":1}')


def test_file_offset_store_survives_restart_and_deletes(tmp_path):
    path = tmp_path / "connect.offsets"
    store = FileOffsetBackingStore(path)
    store.start()
    assert store.get([b"k"]) == {b"k": None}
    store.set({b"k1": b"v1", b"k2": b"\x00\xff"})
    store.set({b"k1": None, b"k3": b"v3"})
    again = FileOffsetBackingStore(path)
    again.start()
    assert again.get([b"k1", b"k2", b"k3"]) == {b"k1": None, b"k2": b"\x00\xff", b"k3": b"v3"}
    doc = json.loads(path.read_bytes())
    assert doc["version"] == 1 and len(doc["offsets"]) == 2
    assert not os.path.exists(str(path) + ".tmp")


def test_file_offset_store_refuses_a_foreign_file(tmp_path):
    path = tmp_path / "connect.offsets"
    path.write_bytes(b"\xac\xed\x00\x05sr\x00\x11java.util.HashMap")   # Kafka's Java-serialised file
    with pytest.raises(ConnectError, match="not a kbroker-connect offsets file"):
        FileOffsetBackingStore(path).start()


def test_offset_storage_reader():
    store = MemoryOffsetBackingStore()
    store.set({offset_key("c", {"filename": "a"}): b'{"position":7}'})
    reader = OffsetStorageReader("c", store)
    assert reader.offset({"filename": "a"}) == {"position": 7}
    assert reader.offset({"filename": "b"}) is None
    assert OffsetStorageReader("other", store).offset({"filename": "a"}) is None


# ------------------------------------------------------------------------------------------------ statuses
def test_memory_status_store():
    s = MemoryStatusBackingStore()
    s.put(ConnectorStatus("c", "RUNNING", None, "w:8083", 0))
    s.put(TaskStatus(ConnectorTaskId("c", 1), "FAILED", "trace", "w:8083", 0))
    s.put(TaskStatus(ConnectorTaskId("c", 0), "RUNNING", None, "w:8083", 0))
    assert [t.id.task for t in s.tasks_of("c")] == [0, 1]
    assert s.get_task(ConnectorTaskId("c", 1)).to_json() == {"id": 1, "state": "FAILED", "worker_id": "w:8083",
                                                             "trace": "trace"}
    assert s.get_connector("c").to_json() == {"state": "RUNNING", "worker_id": "w:8083"}
    s.put_topic("c", "t1", ConnectorTaskId("c", 0))
    s.put_topic("c", "t2", ConnectorTaskId("c", 1))
    assert s.topics_of("c") == {"t1", "t2"} and s.connectors() == {"c"}
    s.reset_topics("c")
    assert s.topics_of("c") == set()
    s.delete_connector("c")
    assert s.get_connector("c") is None and s.tasks_of("c") == [] and s.connectors() == set()


# ------------------------------------------------------------------------------------------------ file source
def _source_task(path, batch_size=None, store=None, connector="fs"):
    task = FileStreamSourceTask()
    props = {"file": str(path), "topic": "t"}
    if batch_size:
        props["batch.size"] = str(batch_size)
    task.initialize(SourceTaskContext(props, OffsetStorageReader(connector, store or MemoryOffsetBackingStore())))
    task.start(props)
    return task


def test_file_source_lines_and_positions(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"a\nbb\r\nccc\rdd\xc3\xa9\npartial")
    task = _source_task(path)
    records = task.poll()
    assert [r.value for r in records] == ["a", "bb", "ccc", "dd\u00e9"]
    assert [r.source_offset for r in records] == [{"position": 2}, {"position": 6}, {"position": 10},
                                                  {"position": 15}]
    assert all(r.source_partition == {"filename": str(path)} and r.topic == "t" and r.key is None
               for r in records)
    with open(path, "ab") as f:
        f.write(b" line\r")        # a trailing "\r" may be the start of "\r\n": not a line end yet
    assert task.poll() is None
    with open(path, "ab") as f:
        f.write(b"\n")
    [r] = task.poll()
    assert (r.value, r.source_offset) == ("partial line", {"position": 29})
    task.stop()


def test_file_source_batch_size_and_resume(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"".join(b"%d\n" % i for i in range(5)))
    task = _source_task(path, batch_size=2)
    assert [r.value for r in task.poll()] == ["0", "1"]
    assert [r.value for r in task.poll()] == ["2", "3"]
    assert [r.value for r in task.poll()] == ["4"]
    task.stop()
    store = MemoryOffsetBackingStore()
    store.set({offset_key("fs", {"filename": str(path)}): offset_value({"position": 4})})
    task = _source_task(path, store=store)
    assert [r.value for r in task.poll()] == ["2", "3", "4"]
    task.stop()


def test_file_source_waits_for_a_missing_file_and_stop_wakes_it(tmp_path):
    task = _source_task(tmp_path / "missing.txt")
    threading.Timer(0.1, task.stop).start()
    assert task.poll() is None      # returns when stop() is called, not after the full second


def test_file_source_connector_config():
    c = FileStreamSourceConnector()
    c.start({"file": "/x", "topic": "t", "name": "n"})
    assert c.task_configs(3) == [{"file": "/x", "topic": "t", "name": "n"}]   # the connector's keys, as Kafka 4's
    with pytest.raises(ConfigError, match="single topic"):
        FileStreamSourceConnector().start({"topic": "a,b"})
    with pytest.raises(ConfigError, match="topic"):
        FileStreamSourceConnector().start({"file": "/x"})
    errors = {v.name: v.errors for v in c.validate({"topic": "t", "batch.size": "0"})}
    assert errors["batch.size"] == ["Invalid value 0 for configuration batch.size: Value must be at least 1"]


def test_file_sink_appends_values_and_flush_makes_them_durable(tmp_path):
    path = tmp_path / "out.txt"
    path.write_bytes(b"old\n")
    task = FileStreamSinkTask()
    task.start({"file": str(path)})
    recs = [SinkRecord("t", 0, value=v, kafka_offset=i) for i, v in enumerate(["foo", None, 42, b"\xc3\xa9", True])]
    task.put(recs)
    task.flush({("t", 0): 5})
    assert path.read_bytes() == b"old\nfoo\nnull\n42\n\xc3\xa9\ntrue\n"
    task.stop()
    c = FileStreamSinkConnector()
    c.start({"file": str(path)})
    assert c.task_configs(2) == [{"file": str(path)}, {"file": str(path)}]


# ------------------------------------------------------------------------------------------------ plugins
class PySource(SourceConnector):
    def version(self):
        return "9.9"


class PySink(SinkConnector):
    pass


class NotAConnector:
    pass


def test_plugins_kafka_names_aliases_and_class_paths():
    p = Plugins()
    for name in ("org.apache.kafka.connect.file.FileStreamSourceConnector", "FileStreamSourceConnector",
                 "FileStreamSource"):
        assert p.connector_class(name) is FileStreamSourceConnector
    assert p.connector_class("FileStreamSink") is FileStreamSinkConnector
    assert p.connector_class("tests.unit.test_connect_worker:PySource") is PySource
    assert p.connector_class("tests.unit.test_connect_worker.PySink") is PySink
    assert p.connector_type("FileStreamSink") == "sink"
    assert p.connector_type("tests.unit.test_connect_worker:NotAConnector") == "unknown"
    assert p.connector_type("Nope") == "unknown"
    with pytest.raises(ConfigError) as e:
        p.connector_class("NoSuchConnector")
    assert str(e.value) == ("Failed to find any class that implements Connector and which name matches "
                            "NoSuchConnector")
    assert "org.apache.kafka.connect.json.JsonConverter" in p.plugin_names("converter")
    assert "org.apache.kafka.connect.storage.SimpleHeaderConverter" in p.plugin_names("header_converter")
    assert "org.apache.kafka.connect.storage.SimpleHeaderConverter" not in p.plugin_names("converter")
    assert "org.apache.kafka.connect.transforms.InsertField$Value" in p.plugin_names("transformation")
    assert p.plugin_names("connector")[:2] == ["org.apache.kafka.connect.file.FileStreamSinkConnector",
                                               "org.apache.kafka.connect.file.FileStreamSourceConnector"]
    plugins = p.connector_plugins()
    assert [x["class"] for x in plugins][:2] == ["org.apache.kafka.connect.file.FileStreamSinkConnector",
                                                 "org.apache.kafka.connect.file.FileStreamSourceConnector"]
    assert plugins[0]["type"] == "sink" and plugins[1]["type"] == "source"


def test_plugins_entry_points_and_plugin_path(tmp_path, monkeypatch):
    # A distribution on plugin.path declaring a connector entry point (what `pip install --target` leaves).
    pkg = tmp_path / "myconn"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "from kbroker.connect.api import SourceConnector\n"
        "class MySourceConnector(SourceConnector):\n"
        "    def version(self):\n        return '1.2.3'\n")
    dist = tmp_path / "myconn-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: myconn\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[kbroker.connect.connectors]\ncom.example.MySourceConnector = myconn:MySourceConnector\n")
    monkeypatch.setattr("sys.path", list(__import__("sys").path))
    p = Plugins([str(tmp_path)])
    cls = p.connector_class("com.example.MySourceConnector")
    assert cls.__name__ == "MySourceConnector"
    assert p.connector_class("MySource") is cls
    assert {"class": "com.example.MySourceConnector", "type": "source", "version": "1.2.3"} in p.connector_plugins()


def test_plugins_ambiguous_alias():
    p = Plugins()
    p._load_tables()["connector"]["com.a.FileStreamSourceConnector"] = FileStreamSourceConnector
    with pytest.raises(ConfigError, match="ambiguous"):
        p.connector_class("FileStreamSource")


# ------------------------------------------------------------------------------------------------ worker config
CONV = {"key.converter": "JsonConverter", "value.converter": "JsonConverter"}


def test_worker_config_quickstart_keys_and_defaults():
    warnings = []
    c = WorkerConfig({"bootstrap.servers": "localhost:9092",
                      "key.converter": "org.apache.kafka.connect.json.JsonConverter",
                      "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                      "key.converter.schemas.enable": "true", "value.converter.schemas.enable": "true",
                      "internal.key.converter": "org.apache.kafka.connect.json.JsonConverter",
                      "internal.key.converter.schemas.enable": "false",
                      "offset.storage.file.filename": "/tmp/connect.offsets", "offset.flush.interval.ms": "10000",
                      "bogus.key": "1"}, warn=warnings.append)
    assert c["offset.flush.interval.ms"] == 10000 and c["offset.flush.timeout.ms"] == 5000
    assert c["task.shutdown.graceful.timeout.ms"] == 5000 and c["rest.port"] == 8083
    assert c.converter_configs("key.converter") == {"schemas.enable": "true"}
    assert warnings == ["The configuration 'bogus.key' was supplied but isn't a known config."]
    assert c.rest_listener() == ("", 8083)


def test_worker_config_refuses_what_it_cannot_honour():
    base = {"offset.storage.file.filename": "/tmp/x", "key.converter": "JsonConverter",
            "value.converter": "JsonConverter"}
    with pytest.raises(ConfigError, match="metric.reporters"):
        WorkerConfig(dict(base, **{"metric.reporters": "com.example.Reporter"}))
    with pytest.raises(ConfigError, match="metrics.num.samples"):
        WorkerConfig(dict(base, **{"metrics.num.samples": "5"}))
    with pytest.raises(ConfigError, match="config.providers"):
        WorkerConfig(dict(base, **{"config.providers": "file"}))
    with pytest.raises(ConfigError, match="internal.key.converter.schemas.enable"):
        WorkerConfig(dict(base, **{"internal.key.converter.schemas.enable": "true"}))
    with pytest.raises(ConfigError, match="internal.value.converter"):
        WorkerConfig(dict(base, **{"internal.value.converter": "org.apache.kafka.connect.storage.StringConverter"}))
    with pytest.raises(ConfigError, match='"key.converter"'):
        WorkerConfig({"offset.storage.file.filename": "/tmp/x"})
    with pytest.raises(ConfigError, match='"offset.storage.file.filename"'):
        WorkerConfig({"key.converter": "JsonConverter", "value.converter": "JsonConverter"})
    with pytest.raises(ConfigError, match="group.id"):
        WorkerConfig({"config.storage.topic": "c", "offset.storage.topic": "o", "status.storage.topic": "s",
                      "key.converter": "JsonConverter", "value.converter": "JsonConverter"}, distributed=True)
    with pytest.raises(ConfigError, match="listeners"):
        WorkerConfig(dict(base, listeners="localhost:8083"))


def test_worker_config_listeners_and_clients():
    c = WorkerConfig({"offset.storage.file.filename": "/tmp/x", "listeners": "http://127.0.0.1:18083",
                      "key.converter": "JsonConverter", "value.converter": "JsonConverter",
                      "rest.advertised.host.name": "connect1", "bootstrap.servers": "b1:9092,b2:9092",
                      "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                      "producer.max.request.size": "2000000", "consumer.max.poll.records": "10"},
                     warn=lambda m: None)
    assert c.rest_listener() == ("127.0.0.1", 18083)
    assert c.advertised_url() == "http://connect1:18083/"
    assert c.client_config("producer") == {"bootstrap.servers": "b1:9092,b2:9092",
                                           "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                                           "message.max.bytes": "2000000", "client.dns.lookup": "use_all_dns_ips"}
    c2 = WorkerConfig(dict(CONV, **{"offset.storage.file.filename": "/x",
                                    "client.dns.lookup": "resolve_canonical_bootstrap_servers_only"}))
    assert c2.client_config("consumer")["client.dns.lookup"] == "resolve_canonical_bootstrap_servers_only"
    # max.poll.records is Java-only: dropped (with a warning) from the librdkafka consumer.
    assert "max.poll.records" not in c.client_config("consumer")
    assert c.client_config("admin", {"client.id": "x"})["client.id"] == "x"


# ------------------------------------------------------------------------------------------------ connector config
def _errors(result):
    return {c["value"]["name"]: c["value"]["errors"] for c in result["configs"] if c["value"]["errors"]}


def test_validate_sink_topics_rules_and_error_count():
    p = Plugins()
    base = {"name": "s", "connector.class": "FileStreamSink"}
    r = cc.validate(p, base)
    assert r["name"] == "org.apache.kafka.connect.file.FileStreamSinkConnector"
    assert r["error_count"] == 2
    assert _errors(r) == {"topics": ["Must configure one of topics or topics.regex"],
                          "topics.regex": ["Must configure one of topics or topics.regex"]}
    r = cc.validate(p, dict(base, topics="a", **{"topics.regex": "b.*"}))
    assert _errors(r)["topics"] == ["topics and topics.regex are mutually exclusive options, but both are set."]
    r = cc.validate(p, dict(base, topics="a,dlq", **{"errors.deadletterqueue.topic.name": "dlq"}))
    assert _errors(r) == {"errors.deadletterqueue.topic.name": [
        "The DLQ topic 'dlq' may not be included in the list of topics ('topics=a,dlq') to be consumed."]}
    r = cc.validate(p, dict(base, topics="a", **{"tasks.max": "0", "errors.tolerance": "some"}))
    assert _errors(r) == {"tasks.max": ["Invalid value 0 for configuration tasks.max: Value must be at least 1"],
                          "errors.tolerance": ["Invalid value some for configuration errors.tolerance: String must "
                                               "be one of: none, all"]}
    assert r["error_count"] == 2
    names = [c["definition"]["name"] for c in r["configs"]]
    assert names[:3] == ["name", "connector.class", "tasks.max"] and names[-1] == "file"
    assert r["groups"] == ["Common", "Transforms", "Predicates", "Error Handling"]
    assert cc.validate(p, dict(base, topics="a"))["error_count"] == 0


def test_validate_transforms_and_missing_class():
    p = Plugins()
    r = cc.validate(p, {"name": "s", "connector.class": "FileStreamSource", "topic": "t", "transforms": "a,b",
                        "transforms.b.type": "com.example.Nope"})
    errs = _errors(r)
    assert errs["transforms.a.type"] == ['Missing required configuration "transforms.a.type" which has no default '
                                         'value.']
    assert len(errs["transforms.b.type"]) == 1 and "com.example.Nope" in errs["transforms.b.type"][0]
    with pytest.raises(BadRequestError, match="contains no connector type"):
        cc.validate(p, {"name": "x"})
    with pytest.raises(BadRequestError, match="Failed to find any class"):
        cc.validate(p, {"name": "x", "connector.class": "Nope"})
    msgs = cc.connector_config_errors(p, {"name": "s", "connector.class": "FileStreamSink"})
    assert cc.invalid_config_message(msgs).startswith(
        "Connector configuration is invalid and contains the following 2 error(s):\n"
        "Must configure one of topics or topics.regex\nMust configure one of topics or topics.regex\n")


def test_client_override_policy():
    p = Plugins()
    conf = {"name": "s", "connector.class": "FileStreamSource", "topic": "t", "producer.override.linger.ms": "5"}
    worker = WorkerConfig(dict(CONV, **{"offset.storage.file.filename": "/x",
                                        "connector.client.config.override.policy": "None"}))
    assert _errors(cc.validate(p, conf, worker)) == {"producer.override.linger.ms": [
        "The 'None' policy does not allow 'linger.ms' to be overridden in the connector configuration."]}
    assert cc.validate(p, conf, WorkerConfig(dict(CONV, **{"offset.storage.file.filename": "/x"})))["error_count"] == 0
    with pytest.raises(ConfigError, match="'None' policy"):
        cc.ConnectorConfig(p, conf, worker_config=worker).client_overrides("producer")


class _Upper:
    def config_def(self):
        from kbroker.connect.configdef import ConfigDef
        return ConfigDef().define("suffix", "STRING", "")

    def configure(self, configs):
        self.suffix = configs.get("suffix", "")

    def apply(self, record):
        return record.new_record(value=record.value.upper() + self.suffix)

    def close(self):
        pass


class _IsTopicA:
    def configure(self, configs):
        self.topic = configs["pattern"]

    def test(self, record):
        return record.topic == self.topic

    def close(self):
        pass


def test_transformation_chain_with_predicate():
    p = Plugins()
    conf = {"name": "s", "connector.class": "FileStreamSink", "topics": "a,b", "transforms": "up",
            "transforms.up.type": "tests.unit.test_connect_worker:_Upper", "transforms.up.suffix": "!",
            "transforms.up.predicate": "isA", "predicates": "isA",
            "predicates.isA.type": "tests.unit.test_connect_worker:_IsTopicA", "predicates.isA.pattern": "a"}
    stages = cc.ConnectorConfig(p, conf).transformations()
    rec_a = SinkRecord("a", 0, value="x")
    rec_b = SinkRecord("b", 0, value="x")
    assert stages[0].apply(rec_a).value == "X!" and stages[0].apply(rec_b).value == "x"
    stages = cc.ConnectorConfig(p, dict(conf, **{"transforms.up.negate": "true"})).transformations()
    assert stages[0].apply(rec_a).value == "x" and stages[0].apply(rec_b).value == "X!"
    with pytest.raises(ConfigError, match="Must configure one of topics"):
        cc.ConnectorConfig(p, {"name": "s", "connector.class": "FileStreamSink"})


def test_topic_creation_keys_kip158():
    p = Plugins()
    base = {"name": "s", "connector.class": "FileStreamSource", "topic": "t"}
    assert cc.validate(p, base)["error_count"] == 0          # no topic.creation.* key: nothing required
    r = cc.validate(p, dict(base, **{"topic.creation.groups": "g", "topic.creation.g.include": "a.*",
                                     "topic.creation.default.partitions": "0"}))
    assert _errors(r) == {
        "topic.creation.default.replication.factor": ['Missing required configuration '
                                                      '"topic.creation.default.replication.factor" which has no '
                                                      'default value.'],
        "topic.creation.default.partitions": ["Invalid value 0 for configuration topic.creation.default.partitions: "
                                              "Value must be -1 or at least 1"]}
    assert r["groups"][-3:] == ["Topic Creation", "default", "g"]
    # The worker's topic.creation.enable=false turns the keys off (they are then ordinary unknown keys).
    off = WorkerConfig(dict(CONV, **{"offset.storage.file.filename": "/x", "topic.creation.enable": "false"}))
    assert cc.validate(p, dict(base, **{"topic.creation.groups": "g"}), off)["error_count"] == 0
    conf = cc.ConnectorConfig(p, dict(base, **{
        "topic.creation.default.replication.factor": "-1", "topic.creation.default.partitions": "2",
        "topic.creation.groups": "g", "topic.creation.g.include": "a.*,b", "topic.creation.g.exclude": "ax",
        "topic.creation.g.cleanup.policy": "compact"}))
    g, default = conf.topic_creation_groups()
    assert (g.name, g.partitions, g.replication_factor, g.configs) == ("g", 2, -1, {"cleanup.policy": "compact"})
    assert [g.matches(t) for t in ("a1", "b", "ax", "bb")] == [True, True, False, False]
    assert (default.name, default.partitions, default.configs, default.matches("zz")) == ("default", 2, {}, True)
    assert cc.ConnectorConfig(p, base).topic_creation_groups() == []


def test_file_source_reads_standard_input_without_offsets(monkeypatch):
    r, w = os.pipe()
    monkeypatch.setattr("sys.stdin", os.fdopen(r, "rb"))
    task = FileStreamSourceTask()
    task.initialize(SourceTaskContext({"topic": "t"}, OffsetStorageReader("c", MemoryOffsetBackingStore())))
    task.start({"topic": "t"})
    os.write(w, b"one\ntw")
    [rec] = task.poll()
    assert (rec.value, rec.source_partition, rec.source_offset) == ("one", None, None)
    os.write(w, b"o\n")
    assert [x.value for x in task.poll()] == ["two"]
    os.close(w)
    task.stop()
