"""kbroker.connect.distributed.kafka_stores without a broker: how the config and status stores read Kafka
Connect's records (fed to the consuming callback as the topic would deliver them) and the bytes they write."""
import json

from kbroker.connect.distributed import kafka_stores as ks
from kbroker.connect.records import ConnectorTaskId
from kbroker.connect.status import ConnectorStatus, TaskStatus
from kbroker.connect.worker_config import WorkerConfig

PROPS = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "config.storage.topic": "cfg",
         "offset.storage.topic": "off", "status.storage.topic": "st",
         "key.converter": "org.apache.kafka.connect.json.JsonConverter",
         "value.converter": "org.apache.kafka.connect.json.JsonConverter"}


def config():
    return WorkerConfig(PROPS, distributed=True, warn=lambda m: None)


class Events:
    def __init__(self):
        self.seen = []

    def on_connector_config(self, name):
        self.seen.append(("connector", name))

    def on_task_configs(self, name):
        self.seen.append(("tasks", name))

    def on_target_state(self, name):
        self.seen.append(("target", name))


def feed(store, records):
    for offset, (key, value) in enumerate(records):
        store._consumed(key.encode(), None if value is None else json.dumps(value).encode(), 0, offset)


def test_task_configs_apply_only_at_their_commit():
    events = Events()
    store = ks.KafkaConfigBackingStore(config(), events)
    feed(store, [("connector-a", {"properties": {"connector.class": "X", "tasks.max": "2"}}),
                 ("task-a-0", {"properties": {"t": "0"}}),
                 ("task-a-1", {"properties": {"t": "1"}})])
    snap = store.snapshot()
    assert snap.offset == 3 and snap.connectors == {"a": {"connector.class": "X", "tasks.max": "2"}}
    assert snap.tasks("a") == [] and snap.task_config_list("a") == []
    feed(store, [("commit-a", {"tasks": 2})])
    snap = store.snapshot()
    assert snap.tasks("a") == [ConnectorTaskId("a", 0), ConnectorTaskId("a", 1)]
    assert snap.task_config_list("a") == [{"t": "0"}, {"t": "1"}]
    assert events.seen == [("connector", "a"), ("tasks", "a")]


def test_commit_missing_a_task_config_is_inconsistent_until_a_complete_one():
    store = ks.KafkaConfigBackingStore(config())
    feed(store, [("connector-a", {"properties": {}}), ("task-a-0", {"properties": {"t": "0"}}),
                 ("commit-a", {"tasks": 2})])
    assert store.snapshot().inconsistent == {"a"} and store.snapshot().tasks("a") == []
    feed(store, [("task-a-0", {"properties": {"t": "0"}}), ("task-a-1", {"properties": {"t": "1"}}),
                 ("commit-a", {"tasks": 2})])
    assert store.snapshot().inconsistent == set() and len(store.snapshot().tasks("a")) == 2


def test_target_states_v1_v2_and_tombstones():
    events = Events()
    store = ks.KafkaConfigBackingStore(config(), events)
    feed(store, [("connector-a", {"properties": {}}), ("target-state-a", {"state": "PAUSED"})])
    assert store.snapshot().target_state("a") == "PAUSED"
    feed(store, [("target-state-a", {"state": "PAUSED", "state.v2": "STOPPED"})])
    assert store.snapshot().target_state("a") == "STOPPED"
    feed(store, [("target-state-a", {"state": "RUNNING?"})])          # unknown: ignored, logged
    assert store.snapshot().target_state("a") == "STOPPED"
    feed(store, [("target-state-a", None)])
    assert store.snapshot().target_state("a") == "STARTED"
    feed(store, [("task-a-0", {"properties": {}}), ("commit-a", {"tasks": 1}), ("connector-a", None)])
    snap = store.snapshot()
    assert snap.connectors == {} and snap.tasks("a") == [] and snap.task_configs == {}
    assert events.seen[-1] == ("connector", "a")


def test_foreign_and_bad_records_are_skipped():
    store = ks.KafkaConfigBackingStore(config())
    store._consumed(b"connector-a", b"not json", 0, 0)
    store._consumed(b"task-a-x", b'{"properties":{}}', 0, 1)
    store._consumed(b"session-key", b'{"key":"abc","algorithm":"HmacSHA256","creation-timestamp":1}', 0, 2)
    store._consumed(None, b"{}", 0, 3)
    snap = store.snapshot()
    assert snap.offset == 4 and snap.connectors == {} and snap.task_counts == {}


def test_target_state_record_bytes():
    key, value = ks.KafkaConfigBackingStore._target_state_record("a", "STOPPED")
    assert key == b"target-state-a" and value == b'{"state":"PAUSED","state.v2":"STOPPED"}'
    assert ks.KafkaConfigBackingStore._target_state_record("a", "STARTED")[1] == \
        b'{"state":"STARTED","state.v2":"STARTED"}'


def test_status_bytes_and_reads():
    assert ks._status_value(ConnectorStatus("a", "FAILED", "boom", "h:8083", 4)) == \
        b'{"state":"FAILED","trace":"boom","worker_id":"h:8083","generation":4}'
    store = ks.KafkaStatusBackingStore(config(), "h:8083")
    store._consumed(b"status-connector-a", b'{"state":"RUNNING","trace":null,"worker_id":"w:1","generation":2}', 0, 0)
    store._consumed(b"status-task-a-b-3", b'{"state":"PAUSED","trace":null,"worker_id":"w:1","generation":2}', 0, 1)
    store._consumed(b"status-topic-t.1:connector-a-b",
                    b'{"topic":{"name":"t.1","connector":"a-b","task":3,"discoverTimestamp":5}}', 0, 2)
    assert store.get_connector("a") == ConnectorStatus("a", "RUNNING", None, "w:1", 2)
    assert store.tasks_of("a-b") == [TaskStatus(ConnectorTaskId("a-b", 3), "PAUSED", None, "w:1", 2)]
    assert store.topics_of("a-b") == {"t.1"}
    store._consumed(b"status-connector-a", None, 0, 3)
    assert store.get_connector("a") is None


def test_status_put_does_not_overwrite_a_newer_generation_of_another_worker():
    store = ks.KafkaStatusBackingStore(config(), "old:1")
    sent = []
    store._log.send = lambda key, value, callback=None: sent.append((key, value))
    store._consumed(b"status-task-a-0", b'{"state":"RUNNING","trace":null,"worker_id":"new:2","generation":7}',
                    0, 0)
    store.put(TaskStatus(ConnectorTaskId("a", 0), "UNASSIGNED", None, "old:1", 6))
    assert sent == [] and store.get_task(ConnectorTaskId("a", 0)).worker_id == "new:2"
    store.generation = 8
    store.put(TaskStatus(ConnectorTaskId("a", 0), "RUNNING", None, "old:1", 0))   # stamped with generation 8
    assert sent == [(b"status-task-a-0", b'{"state":"RUNNING","trace":null,"worker_id":"old:1","generation":8}')]
