"""Kafka Connect's REST API on a real ``kbroker-connect standalone`` worker (one broker, one worker process for the
module): every endpoint of issue 17 with Kafka's status codes and JSON, and the semantics behind them seen in the
data -- a paused source produces nothing until resumed, a restarted task resumes from its committed offset (each
line once in the topic), a stopped connector has no tasks, a deleted one is gone (404), a failed task carries its
trace and ``?includeTasks=true&onlyFailed=true`` restarts only it.
"""
import time
import uuid

import pytest

from tests.integration.connect_proc import ConnectProcess, rest
from tests.integration.harness import BrokerProcess, HarnessError, free_port, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")

BROKER_OVERRIDES = {"offsets.topic.num.partitions": 1, "offsets.topic.replication.factor": 1,
                    "group.initial.rebalance.delay.ms": 0}
SOURCE_CLASS = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK_CLASS = "org.apache.kafka.connect.file.FileStreamSinkConnector"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("connect-rest-broker"), overrides=BROKER_OVERRIDES)
    b.start()
    yield b
    b.close()


@pytest.fixture(scope="module")
def worker(broker, tmp_path_factory):
    """(url, ConnectProcess, workdir) of a standalone worker with no connector files."""
    workdir = tmp_path_factory.mktemp("connect-rest-worker")
    port = free_port()
    (workdir / "worker.properties").write_text("\n".join([
        "bootstrap.servers=%s" % broker.bootstrap,
        "key.converter=org.apache.kafka.connect.storage.StringConverter",
        "value.converter=org.apache.kafka.connect.storage.StringConverter",
        "offset.storage.file.filename=%s" % (workdir / "connect.offsets"),
        "offset.flush.interval.ms=500",
        "listeners=http://127.0.0.1:%d" % port,
        "consumer.session.timeout.ms=6000",
        "consumer.heartbeat.interval.ms=1000",
    ]) + "\n")
    proc = ConnectProcess(workdir, ["standalone", "worker.properties"]).start()
    url = "http://127.0.0.1:%d/" % port
    proc.wait_rest(url)
    yield url, proc, workdir
    code = proc.stop()
    assert code == 0, proc.log_tail()


def uid():
    return uuid.uuid4().hex[:8]


def wait(proc, predicate, timeout, what):
    try:
        return wait_until(predicate, timeout, 0.1, what)
    except HarnessError as e:
        raise HarnessError("%s\nkbroker-connect's log:\n%s" % (e, proc.log_tail())) from None


class TopicReader:
    """Every value of ``topic`` from the beginning, read incrementally (one consumer, no group commits)."""

    def __init__(self, broker, topic):
        self.consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "chk-" + uid(),
                                                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                                  # the topic may not exist yet: look again every 0.5 s, not 5 min
                                                  "topic.metadata.refresh.interval.ms": 500})
        self.consumer.subscribe([topic])
        self.values = []

    def read(self, seconds=0.3):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            msg = self.consumer.poll(0.1)
            if msg is not None and not msg.error():
                self.values.append(msg.value().decode())
        return self.values

    def close(self):
        self.consumer.close()


def append(path, *lines):
    with open(path, "a") as f:
        f.write("".join(line + "\n" for line in lines))


def state(url, name):
    status = rest(url, "GET", "/connectors/%s/status" % name)[1]
    return status["connector"]["state"], [t["state"] for t in status["tasks"]]


def test_root_plugins_and_validate(worker, broker):
    url, proc, _ = worker
    status, body, headers = rest(url, "GET", "/")
    assert status == 200 and set(body) == {"version", "commit", "kafka_cluster_id"}
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert body["kafka_cluster_id"] == admin.list_topics(timeout=10).cluster_id
    assert headers["Content-Type"] == "application/json"

    assert rest(url, "GET", "/connector-plugins")[:2] == (200, [
        {"class": SINK_CLASS, "type": "sink", "version": body["version"]},
        {"class": SOURCE_CLASS, "type": "source", "version": body["version"]}])
    status, body, _ = rest(url, "PUT", "/connector-plugins/FileStreamSinkConnector/config/validate",
                           {"connector.class": "FileStreamSink", "name": "v", "file": "/tmp/x"})
    assert status == 200 and body["name"] == SINK_CLASS and body["error_count"] == 2
    errors = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"] if c["value"]["errors"]}
    assert errors == {"topics": ["Must configure one of topics or topics.regex"],
                      "topics.regex": ["Must configure one of topics or topics.regex"]}
    status, body, _ = rest(url, "PUT", "/connector-plugins/FileStreamSink/config/validate",
                           {"connector.class": "FileStreamSink", "name": "v", "file": "/tmp/x", "topics": "t"})
    assert (status, body["error_count"]) == (200, 0)
    assert rest(url, "PUT", "/connector-plugins/FileStreamSink/config/validate",
                {"connector.class": "FileStreamSource"})[:2] == \
        (400, {"error_code": 400, "message": "Included connector type FileStreamSource does not match request type "
                                             "FileStreamSink"})
    keys = [k["name"] for k in rest(url, "GET", "/connector-plugins/FileStreamSource/config")[1]]
    assert {"file", "topic", "batch.size"} <= set(keys)
    assert rest(url, "GET", "/nope")[:2] == (404, {"error_code": 404, "message": "HTTP 404 Not Found"})
    assert rest(url, "DELETE", "/connectors")[0] == 405


def test_source_lifecycle(worker, broker):
    url, proc, workdir = worker
    name, topic = "src-" + uid(), "rest-" + uid()
    source_file = workdir / (name + ".txt")
    append(source_file, "a1", "a2")
    config = {"connector.class": "FileStreamSource", "tasks.max": "1", "file": str(source_file), "topic": topic}
    status, body, headers = rest(url, "POST", "/connectors", {"name": name, "config": config})
    assert status == 201, body
    assert body == {"name": name, "config": dict(config, name=name), "tasks": [{"connector": name, "task": 0}],
                    "type": "source"}
    assert headers["Location"].endswith("/connectors/" + name)
    assert rest(url, "POST", "/connectors", {"name": name, "config": config})[:2] == \
        (409, {"error_code": 409, "message": "Connector %s already exists" % name})
    assert name in rest(url, "GET", "/connectors")[1]
    assert rest(url, "GET", "/connectors/" + name)[1] == body
    assert rest(url, "GET", "/connectors/%s/config" % name)[:2] == (200, dict(config, name=name))
    tasks = rest(url, "GET", "/connectors/%s/tasks" % name)[1]
    assert [t["id"] for t in tasks] == [{"connector": name, "task": 0}]
    # the connector's own keys + task.class, as Kafka 4's FileStreamSourceConnector.taskConfigs
    assert {k: v for k, v in tasks[0]["config"].items() if k != "task.class"} == dict(config, name=name)
    reader = TopicReader(broker, topic)
    try:
        wait(proc, lambda: reader.read() == ["a1", "a2"], 20, "a1, a2 in the topic")
        worker_id = url.split("//")[1].rstrip("/")
        version = rest(url, "GET", "/")[1]["version"]       # the connectors are kbroker's: its version
        assert rest(url, "GET", "/connectors/%s/status" % name)[:2] == (200, {
            "name": name, "connector": {"state": "RUNNING", "worker_id": worker_id, "version": version},
            "tasks": [{"id": 0, "state": "RUNNING", "worker_id": worker_id, "version": version}], "type": "source"})
        assert rest(url, "GET", "/connectors/%s/tasks/0/status" % name)[:2] == \
            (200, {"id": 0, "state": "RUNNING", "worker_id": worker_id, "version": version})
        assert rest(url, "GET", "/connectors/%s/tasks/1/status" % name)[:2] == \
            (404, {"error_code": 404, "message": "No status found for task %s-1" % name})
        assert rest(url, "GET", "/connectors/%s/topics" % name)[:2] == (200, {name: {"topics": [topic]}})
        expanded = rest(url, "GET", "/connectors?expand=status&expand=info")[1]
        assert expanded[name]["info"] == body and expanded[name]["status"]["connector"]["state"] == "RUNNING"

        # pause: the source produces nothing until resumed
        assert rest(url, "PUT", "/connectors/%s/pause" % name)[:2] == (202, None)
        wait(proc, lambda: state(url, name) == ("PAUSED", ["PAUSED"]), 10, "PAUSED")
        append(source_file, "b1")
        assert reader.read(2.0) == ["a1", "a2"]            # 2 s of a paused source: nothing
        assert rest(url, "PUT", "/connectors/%s/resume" % name)[:2] == (202, None)
        wait(proc, lambda: reader.read() == ["a1", "a2", "b1"], 20, "b1 after resume")
        assert state(url, name) == ("RUNNING", ["RUNNING"])

        # restarts: the task resumes from its committed offset (each line once)
        assert rest(url, "POST", "/connectors/%s/tasks/0/restart" % name)[:2] == (204, None)
        assert rest(url, "POST", "/connectors/%s/restart" % name)[:2] == (204, None)
        assert rest(url, "POST", "/connectors/%s/tasks/3/restart" % name)[:2] == \
            (404, {"error_code": 404, "message": "Task %s-3 not found" % name})
        status, body2, _ = rest(url, "POST", "/connectors/%s/restart?includeTasks=true&onlyFailed=true" % name)
        assert (status, state(url, name)) == (202, ("RUNNING", ["RUNNING"]))
        assert body2["connector"]["state"] == "RUNNING" and body2["tasks"][0]["state"] == "RUNNING"  # none failed
        append(source_file, "c1")
        wait(proc, lambda: reader.read() == ["a1", "a2", "b1", "c1"], 20, "c1 after the restarts")

        # topics reset (KIP-558)
        assert rest(url, "PUT", "/connectors/%s/topics/reset" % name)[:2] == (202, None)
        assert rest(url, "GET", "/connectors/%s/topics" % name)[1] == {name: {"topics": []}}

        # update: 200 and the new task config; stop (KIP-875) and resume
        status, body3, _ = rest(url, "PUT", "/connectors/%s/config" % name, dict(config, **{"batch.size": "5"}))
        assert status == 200 and body3["config"]["batch.size"] == "5"
        assert rest(url, "GET", "/connectors/%s/tasks" % name)[1][0]["config"]["batch.size"] == "5"
        assert rest(url, "PUT", "/connectors/%s/stop" % name)[:2] == (204, None)
        assert rest(url, "GET", "/connectors/%s/status" % name)[1]["connector"]["state"] == "STOPPED"
        assert rest(url, "GET", "/connectors/%s/status" % name)[1]["tasks"] == []
        assert rest(url, "GET", "/connectors/%s/tasks" % name)[1] == []
        # offsets (KIP-875): Kafka's shapes; altering needs STOPPED; the source resumes from the altered one
        assert rest(url, "GET", "/connectors/%s/offsets" % name)[:2] == (200, {"offsets": [
            {"partition": {"filename": str(source_file)}, "offset": {"position": 12}}]})   # a1 a2 b1 c1
        rewind = {"offsets": [{"partition": {"filename": str(source_file)}, "offset": {"position": 9}}]}
        status, body4, _ = rest(url, "PATCH", "/connectors/%s/offsets" % name, rewind)
        assert status == 200 and body4["message"].startswith("The Connect framework-managed offsets for this "
                                                             "connector have been altered successfully.")
        assert rest(url, "GET", "/connectors/%s/offsets" % name)[1] == rewind
        assert rest(url, "PUT", "/connectors/%s/resume" % name)[0] == 202
        wait(proc, lambda: state(url, name) == ("RUNNING", ["RUNNING"]), 10, "RUNNING after resume from STOPPED")
        status, body4, _ = rest(url, "PATCH", "/connectors/%s/offsets" % name, rewind)
        assert (status, body4["message"]) == (400, "Connectors must be in the STOPPED state before their offsets can "
                                                   "be modified. This can be done for the specified connector by "
                                                   "issuing a 'PUT' request to the '/connectors/%s/stop' endpoint"
                                                   % name)
        append(source_file, "d1")
        wait(proc, lambda: reader.read() == ["a1", "a2", "b1", "c1", "c1", "d1"], 20, "c1 again (rewound), d1")

        # delete: 204, then 404 everywhere
        assert rest(url, "DELETE", "/connectors/" + name)[:2] == (204, None)
        assert rest(url, "GET", "/connectors/" + name)[:2] == \
            (404, {"error_code": 404, "message": "Connector %s not found" % name})
        assert rest(url, "GET", "/connectors/%s/status" % name)[0] == 404
        assert rest(url, "DELETE", "/connectors/" + name)[0] == 404
        assert name not in rest(url, "GET", "/connectors")[1]
        append(source_file, "e1")
        assert reader.read(1.0) == ["a1", "a2", "b1", "c1", "c1", "d1"]
    finally:
        reader.close()


def test_sink_create_by_put_and_invalid_configs(worker, broker):
    url, proc, workdir = worker
    name, topic = "sink-" + uid(), "rest-" + uid()
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    for v in ("x1", "x2", "x3"):
        producer.produce(topic, v.encode())
    assert producer.flush(20) == 0
    out = workdir / (name + ".out")
    config = {"connector.class": SINK_CLASS, "file": str(out), "topics": topic}
    status, body, headers = rest(url, "PUT", "/connectors/%s/config" % name, config)
    assert status == 201 and body["type"] == "sink" and headers["Location"].endswith("/connectors/" + name)
    wait(proc, lambda: out.exists() and out.read_text() == "x1\nx2\nx3\n", 30, "the sink file")
    assert rest(url, "GET", "/connectors/%s/topics" % name)[1] == {name: {"topics": [topic]}}
    wait(proc, lambda: rest(url, "GET", "/connectors/%s/offsets" % name)[1] == {"offsets": [
        {"partition": {"kafka_topic": topic, "kafka_partition": 0}, "offset": {"kafka_offset": 3}}]}, 15,
        "the sink's committed offset")
    assert rest(url, "PUT", "/connectors/%s/stop" % name)[0] == 204
    status, body, _ = rest(url, "DELETE", "/connectors/%s/offsets" % name)
    assert status == 200 and "have been reset successfully" in body["message"]
    assert rest(url, "GET", "/connectors/%s/offsets" % name)[1] == {"offsets": []}

    status, body, _ = rest(url, "PUT", "/connectors/%s/config" % name, dict(config, name="other"))
    assert (status, body["message"]) == (400, "Connector name configuration (other) doesn't match connector name "
                                              "in the URL (%s)" % name)
    bad = {"connector.class": SINK_CLASS, "file": str(out)}
    status, body, _ = rest(url, "POST", "/connectors", {"name": "bad-" + uid(), "config": bad})
    assert status == 400
    assert body["message"] == (
        "Connector configuration is invalid and contains the following 2 error(s):\n"
        "Must configure one of topics or topics.regex\nMust configure one of topics or topics.regex\n"
        "You can also find the above list of errors at the endpoint `/connector-plugins/{connectorType}/config/"
        "validate`")
    status, body, _ = rest(url, "POST", "/connectors", {"name": "bad2", "config": {"connector.class": "NoSuch"}})
    assert status == 400 and "NoSuch" in body["message"]
    assert rest(url, "DELETE", "/connectors/" + name)[0] == 204


def test_failed_task_trace_and_only_failed_restart(worker):
    url, proc, workdir = worker
    name = "dir-" + uid()
    directory = workdir / name
    directory.mkdir()
    config = {"connector.class": "FileStreamSource", "file": str(directory), "topic": "rest-" + uid()}
    assert rest(url, "POST", "/connectors", {"name": name, "config": config})[0] == 201
    wait(proc, lambda: state(url, name) == ("RUNNING", ["FAILED"]), 15, "the task FAILED")
    task = rest(url, "GET", "/connectors/%s/status" % name)[1]["tasks"][0]
    assert "Is a directory" in task["trace"] and task["trace"].startswith("Traceback")
    status, body, _ = rest(url, "POST", "/connectors/%s/restart?includeTasks=true&onlyFailed=true" % name)
    assert status == 202
    assert body["connector"]["state"] == "RUNNING"                # not failed: not restarted
    assert [t["state"] for t in body["tasks"]] == ["RESTARTING"]
    # the cause is still there: FAILED again
    wait(proc, lambda: state(url, name) == ("RUNNING", ["FAILED"]), 15, "the task FAILED again")
    assert rest(url, "DELETE", "/connectors/" + name)[0] == 204
