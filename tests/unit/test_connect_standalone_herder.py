"""kbroker/connect/standalone.py's lifecycle against a recording fake Worker (the real Plugins and connector-config
validation): create/replace/delete, task generation, pause/resume/stop, restarts, reconfiguration requests,
Kafka's errors and messages."""
import threading

import pytest

from kbroker.connect.exceptions import (AlreadyExistsError, BadRequestError, ConnectError, NotFoundError,
                                        ServiceUnavailableError)
from kbroker.connect.plugins import Plugins
from kbroker.connect.records import ConnectorTaskId
from kbroker.connect.standalone import StandaloneHerder
from kbroker.connect.status import ConnectorStatus, MemoryStatusBackingStore, TaskStatus


class FakeWorker:
    """Records calls; writes statuses as the real worker does (RUNNING/PAUSED, FAILED on a failing start)."""

    def __init__(self, status_store):
        self.status_store = status_store
        self.calls = []
        self.connectors = {}
        self.tasks = {}
        self.fail_start = set()
        self.fail_task_start = False
        self.reconfigure = {}
        self.task_count_override = None

    def start(self):
        self.calls.append(("start",))

    def stop(self):
        self.calls.append(("stop",))

    def start_connector(self, name, props, on_reconfigure, target_state="STARTED"):
        self.calls.append(("start_connector", name, target_state))
        if name in self.fail_start:
            self.status_store.put(ConnectorStatus(name, "FAILED", "Traceback: boom", "w:8083"))
            return False
        self.connectors[name] = dict(props)
        self.reconfigure[name] = on_reconfigure
        self.status_store.put(ConnectorStatus(name, "RUNNING" if target_state == "STARTED" else target_state,
                                              None, "w:8083"))
        return True

    def connector_task_configs(self, name, props):
        n = self.task_count_override or int(props.get("tasks.max", "1"))
        return [{"task.n": str(i), "file": props.get("file", "")} for i in range(n)]

    def stop_connector(self, name):
        self.calls.append(("stop_connector", name))
        self.connectors.pop(name, None)

    def start_task(self, task_id, connector_props, task_props, target_state="STARTED"):
        self.calls.append(("start_task", str(task_id), target_state))
        if self.fail_task_start:
            return False
        self.tasks[task_id] = dict(task_props)
        self.status_store.put(TaskStatus(task_id, "RUNNING", None, "w:8083"))
        return True

    def stop_tasks(self, task_ids):
        self.calls.append(("stop_tasks", sorted(str(t) for t in task_ids)))
        for t in task_ids:
            self.tasks.pop(t, None)

    def set_target_state(self, name, state):
        self.calls.append(("set_target_state", name, state))
        self.status_store.put(ConnectorStatus(name, "RUNNING" if state == "STARTED" else state, None, "w:8083"))

    def connector_names(self):
        return set(self.connectors)

    def task_ids(self):
        return set(self.tasks)


VERSION = Plugins().connector_plugins()[0]["version"]   # Kafka 4 states carry the connector's version
SOURCE = {"connector.class": "FileStreamSource", "tasks.max": "1", "file": "/tmp/in.txt", "topic": "t"}


@pytest.fixture
def herder():
    statuses = MemoryStatusBackingStore()
    worker = FakeWorker(statuses)
    h = StandaloneHerder(worker, Plugins(), "cid", "w:8083")
    h.start()
    yield h, worker
    h.stop()


def put(h, name, config, replace=False, **kw):
    return h.put_connector_config(name, dict(config, name=name), replace, **kw)


def test_create_generates_tasks_and_statuses(herder):
    h, worker = herder
    created, info = put(h, "src", dict(SOURCE, **{"tasks.max": "2"}))
    assert created is True
    assert info == {"name": "src", "config": dict(SOURCE, **{"tasks.max": "2", "name": "src"}),
                    "tasks": [{"connector": "src", "task": 0}, {"connector": "src", "task": 1}], "type": "source"}
    assert h.connectors() == ["src"]
    assert h.task_configs("src") == [{"id": {"connector": "src", "task": i},
                                      "config": {"task.n": str(i), "file": "/tmp/in.txt"}} for i in range(2)]
    assert h.connector_status("src") == {
        "name": "src", "connector": {"state": "RUNNING", "worker_id": "w:8083", "version": VERSION},
        "tasks": [{"id": 0, "state": "RUNNING", "worker_id": "w:8083", "version": VERSION},
                  {"id": 1, "state": "RUNNING", "worker_id": "w:8083", "version": VERSION}], "type": "source"}
    assert h.task_status("src", 1) == {"id": 1, "state": "RUNNING", "worker_id": "w:8083", "version": VERSION}
    with pytest.raises(AlreadyExistsError, match="^Connector src already exists$"):
        put(h, "src", SOURCE)


def test_invalid_config_is_400_with_kafkas_message(herder):
    h, worker = herder
    with pytest.raises(BadRequestError) as e:
        put(h, "sink", {"connector.class": "FileStreamSink", "file": "/tmp/o"})
    assert str(e.value).startswith("Connector configuration is invalid and contains the following 2 error(s):\n"
                                   "Must configure one of topics or topics.regex")
    assert str(e.value).endswith("`/connector-plugins/{connectorType}/config/validate`")
    assert h.connectors() == [] and not [c for c in worker.calls if c[0] == "start_connector"]
    with pytest.raises(BadRequestError, match="contains no connector type"):
        h.put_connector_config("x", {"name": "x"}, False)


def test_unknown_names_are_404_with_kafkas_messages(herder):
    h, _ = herder
    cases = [(h.connector_info, "Connector nope not found"), (h.connector_config, "Connector nope not found"),
             (h.task_configs, "Connector nope not found"), (h.delete_connector, "Connector nope not found"),
             (h.connector_status, "No status found for connector nope"),
             (h.pause_connector, "Unknown connector nope"), (h.resume_connector, "Unknown connector nope"),
             (h.restart_connector, "Connector nope not found")]
    for call, message in cases:
        with pytest.raises(NotFoundError) as e:
            call("nope")
        assert str(e.value) == message
    put(h, "src", SOURCE)
    with pytest.raises(NotFoundError, match="^No status found for task src-3$"):
        h.task_status("src", 3)
    with pytest.raises(NotFoundError, match="^Task src-3 not found$"):
        h.restart_task("src", 3)
    assert h.connector_active_topics("nope") == []


def test_replace_restarts_connector_and_tasks_and_keeps_pause(herder):
    h, worker = herder
    put(h, "src", SOURCE)
    h.pause_connector("src")
    worker.calls.clear()
    created, info = put(h, "src", dict(SOURCE, file="/tmp/other"), replace=True)
    assert created is False and info["config"]["file"] == "/tmp/other"
    # the paused connector restarts paused; a paused connector gets no tasks until resumed (Kafka's standalone)
    assert worker.calls == [("stop_tasks", ["src-0"]), ("stop_connector", "src"),
                            ("start_connector", "src", "PAUSED")]
    worker.calls.clear()
    h.resume_connector("src")
    assert worker.calls == [("set_target_state", "src", "STARTED"), ("start_task", "src-0", "STARTED")]
    assert worker.tasks[ConnectorTaskId("src", 0)]["file"] == "/tmp/other"


def test_pause_resume_keep_tasks(herder):
    h, worker = herder
    put(h, "src", SOURCE)
    worker.calls.clear()
    h.pause_connector("src")
    assert h.connector_status("src")["connector"]["state"] == "PAUSED"
    h.resume_connector("src")
    # same task configs after resume: the tasks are not restarted
    assert worker.calls == [("set_target_state", "src", "PAUSED"), ("set_target_state", "src", "STARTED")]


def test_stop_and_resume_from_stopped(herder):
    h, worker = herder
    put(h, "src", dict(SOURCE, **{"tasks.max": "2"}))
    h.stop_connector("src")
    status = h.connector_status("src")
    assert status["connector"]["state"] == "STOPPED" and status["tasks"] == []
    assert h.task_configs("src") == [] and "src" not in worker.connectors
    h.resume_connector("src")
    assert h.connector_status("src")["connector"]["state"] == "RUNNING"
    assert len(h.task_configs("src")) == 2 and len(worker.tasks) == 2


def test_created_stopped_or_paused(herder):
    h, worker = herder
    put(h, "a", SOURCE, target_state="STOPPED")
    assert h.connector_status("a")["connector"]["state"] == "STOPPED" and "a" not in worker.connectors
    put(h, "b", SOURCE, target_state="PAUSED")
    assert h.connector_status("b")["connector"]["state"] == "PAUSED" and h.task_configs("b") == []


def test_delete_stops_everything_and_forgets_status(herder):
    h, worker = herder
    put(h, "src", SOURCE)
    worker.calls.clear()
    h.delete_connector("src")
    assert worker.calls == [("stop_tasks", ["src-0"]), ("stop_connector", "src")]
    assert h.connectors() == []
    with pytest.raises(NotFoundError):
        h.connector_status("src")
    with pytest.raises(NotFoundError):
        h.task_status("src", 0)


def test_failed_connector_stays_configured(herder):
    h, worker = herder
    worker.fail_start.add("bad")
    created, info = put(h, "bad", SOURCE)
    assert created is True and info["tasks"] == []
    status = h.connector_status("bad")
    assert status["connector"] == {"state": "FAILED", "worker_id": "w:8083", "trace": "Traceback: boom",
                                   "version": None}
    # restart after the cause is gone: RUNNING with its tasks
    worker.fail_start.clear()
    h.restart_connector("bad")
    assert h.connector_status("bad")["connector"]["state"] == "RUNNING" and len(h.task_configs("bad")) == 1


def test_restart_task_and_failure(herder):
    h, worker = herder
    put(h, "src", SOURCE)
    worker.calls.clear()
    h.restart_task("src", 0)
    assert worker.calls == [("stop_tasks", ["src-0"]), ("start_task", "src-0", "STARTED")]
    worker.fail_task_start = True
    with pytest.raises(ConnectError, match="^Failed to start task: src-0$"):
        h.restart_task("src", 0)


def test_reconfiguration_request_regenerates_tasks(herder):
    h, worker = herder
    put(h, "src", SOURCE)
    worker.task_count_override = 3
    done = threading.Event()
    original = worker.start_task

    def start_task(*a, **kw):
        ok = original(*a, **kw)
        if len(worker.tasks) == 3:
            done.set()
        return ok

    worker.start_task = start_task
    # a connector thread asks; the herder's own thread regenerates
    threading.Thread(target=worker.reconfigure["src"], args=("src",)).start()
    assert done.wait(5)
    assert [t["id"]["task"] for t in h.task_configs("src")] == [0, 1, 2]


def test_stopped_herder_refuses_writes(herder):
    h, worker = herder
    put(h, "src", SOURCE)
    h.stop()
    assert ("stop_tasks", ["src-0"]) in worker.calls and worker.calls[-1] == ("stop",)
    with pytest.raises(ServiceUnavailableError):
        put(h, "other", SOURCE)
    h.stop()   # idempotent


def test_plugins_validate_and_plugin_config(herder):
    h, _ = herder
    assert [p["class"] for p in h.connector_plugins()] == [
        "org.apache.kafka.connect.file.FileStreamSinkConnector",
        "org.apache.kafka.connect.file.FileStreamSourceConnector"]
    result = h.validate_connector_config("FileStreamSink", {"connector.class": "FileStreamSink", "name": "s",
                                                            "file": "/tmp/o"})
    assert result["name"] == "org.apache.kafka.connect.file.FileStreamSinkConnector"
    assert result["error_count"] == 2
    keys = [k["name"] for k in h.connector_plugin_config("FileStreamSource")]
    assert "file" in keys and "topic" in keys
    with pytest.raises(NotFoundError, match=r"^Unknown plugin NoSuchThing\.$"):
        h.connector_plugin_config("NoSuchThing")


def test_empty_name_is_refused(herder):
    h, _ = herder
    with pytest.raises(BadRequestError, match="^Connector configuration is invalid"):
        h.put_connector_config("", dict(SOURCE, name=""), False)
    assert h.connectors() == []


def test_status_read_does_not_wait_for_a_slow_stop(herder):
    h, worker = herder
    put(h, "src", SOURCE)
    entered, release = threading.Event(), threading.Event()
    original = worker.stop_tasks

    def slow_stop(ids):
        entered.set()
        release.wait(10)
        return original(ids)

    worker.stop_tasks = slow_stop
    t = threading.Thread(target=h.delete_connector, args=("src",))
    t.start()
    try:
        assert entered.wait(5)
        # the delete holds the herder's lock inside stop_tasks; the status answers anyway
        assert h.connector_status("src")["connector"]["state"] == "RUNNING"
    finally:
        release.set()
        t.join(10)
    assert h.connectors() == []


def test_all_plugins_lists_every_kind(herder):
    h, _ = herder
    plugins = h.all_plugins()
    kinds = [p["type"] for p in plugins]
    assert kinds[:2] == ["sink", "source"]
    # grouped in Kafka's order, each entry a class name of that kind
    order = ["sink", "source", "transformation", "predicate", "converter", "header_converter"]
    assert kinds == sorted(kinds, key=order.index)
    classes = {(p["type"], p["class"]) for p in plugins}
    assert ("converter", "org.apache.kafka.connect.json.JsonConverter") in classes
    assert ("transformation", "org.apache.kafka.connect.transforms.InsertField$Value") in classes


def test_source_offsets_get_alter_reset(herder):
    from kbroker.connect.offsets import MemoryOffsetBackingStore, offset_key, offset_value
    h, worker = herder
    worker.offset_store = MemoryOffsetBackingStore()
    worker.offset_store.set({offset_key("src", {"filename": "a"}): offset_value({"position": 5}),
                             offset_key("other", {"filename": "a"}): offset_value({"position": 7})})
    put(h, "src", SOURCE)
    assert h.connector_offsets("src") == {"offsets": [{"partition": {"filename": "a"}, "offset": {"position": 5}}]}
    with pytest.raises(BadRequestError, match="must be in the STOPPED state"):
        h.alter_connector_offsets("src", [{"partition": {"filename": "a"}, "offset": {"position": 1}}])
    h.stop_connector("src")
    answer = h.alter_connector_offsets("src", [{"partition": {"filename": "a"}, "offset": {"position": 1}},
                                               {"partition": {"filename": "b"}, "offset": {"position": 2}}])
    assert "altered successfully" in answer["message"]
    assert h.connector_offsets("src")["offsets"] == [
        {"partition": {"filename": "a"}, "offset": {"position": 1}},
        {"partition": {"filename": "b"}, "offset": {"position": 2}}]
    h.alter_connector_offsets("src", [{"partition": {"filename": "b"}, "offset": None}])
    assert len(h.connector_offsets("src")["offsets"]) == 1
    assert "reset successfully" in h.reset_connector_offsets("src")["message"]
    assert h.connector_offsets("src") == {"offsets": []}
    # the other connector's offset is untouched
    assert worker.offset_store.get([offset_key("other", {"filename": "a"})]) == \
        {offset_key("other", {"filename": "a"}): offset_value({"position": 7})}
    with pytest.raises(BadRequestError, match="^Source partitions may not be null$"):
        h.alter_connector_offsets("src", [{"offset": {"position": 1}}])
