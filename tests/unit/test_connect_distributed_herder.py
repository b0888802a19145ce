"""DistributedHerder's REST semantics with fake stores, member and worker (Kafka's DistributedHerder): followers
send writes to the leader (NotLeaderError with its URL), 409 while a rebalance is pending, restarts go to the
worker that runs the work, config writes go to the config store."""
import threading

import pytest

from kbroker.connect.distributed.herder import DistributedHerder
from kbroker.connect.distributed.kafka_stores import ConfigSnapshot
from kbroker.connect.distributed.protocol import Assignment
from kbroker.connect.exceptions import (AlreadyExistsError, BadRequestError, NotFoundError, NotLeaderError,
                                        RebalanceNeededError)
from kbroker.connect.plugins import Plugins
from kbroker.connect.records import ConnectorTaskId
from kbroker.connect.status import MemoryStatusBackingStore
from kbroker.connect.worker_config import WorkerConfig

LEADER = "http://leader:8083/"
SRC = {"connector.class": "FileStreamSource", "file": "/tmp/x", "topic": "t", "name": "src"}


class FakeConfigStore:
    def __init__(self):
        self.listener = None
        self.connectors = {"src": dict(SRC)}
        self.tasks = {("src", 0): {"file": "/tmp/x"}}
        self.targets = {}
        self.writes = []

    def snapshot(self):
        counts = {n: sum(1 for k in self.tasks if k[0] == n) for n in self.connectors}
        return ConfigSnapshot(7, dict(self.connectors), counts, dict(self.tasks), dict(self.targets), set())

    def put_connector_config(self, name, props, target_state=None):
        self.writes.append(("connector", name, props, target_state))
        self.connectors[name] = dict(props)

    def remove_connector_config(self, name):
        self.writes.append(("delete", name))
        del self.connectors[name]

    def put_task_configs(self, name, configs):
        self.writes.append(("tasks", name, configs))

    def put_target_state(self, name, state):
        self.writes.append(("target", name, state))


class FakeMember:
    def __init__(self):
        self.wakeup = threading.Event()
        self.rejoin_needed = False


def herder(leader=False, owns=()):
    config = WorkerConfig({"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "config.storage.topic": "c",
                           "offset.storage.topic": "o", "status.storage.topic": "s",
                           "key.converter": "org.apache.kafka.connect.json.JsonConverter",
                           "value.converter": "org.apache.kafka.connect.json.JsonConverter"},
                          distributed=True, warn=lambda m: None)
    store = FakeConfigStore()
    h = DistributedHerder(config, worker=None, plugins=Plugins(), config_store=store,
                          status_store=MemoryStatusBackingStore(), member=FakeMember(), cluster_id="cid",
                          worker_id="me:8083", advertised_url="http://me:8083/")
    h._running = True
    h._joined = True
    h._is_leader = leader
    h._leader_url = "http://me:8083/" if leader else LEADER
    h._assignment = Assignment(0, "l", h._leader_url, 7, [c for c in owns if isinstance(c, str)],
                               [t for t in owns if isinstance(t, tuple)])
    h._owners = {"src": "http://other:8083/", ConnectorTaskId("src", 0): "http://other:8083/"}
    return h, store


def test_create_answers_no_tasks_even_when_they_are_generated_before_the_answer():
    """Kafka's DistributedHerder answers a create with the tasks of the snapshot from before the write: [] for a
    new connector, always. The leader's own task generation may already have committed task 0 by the time the
    answer is built (it did in CI): the answer must not depend on that race."""
    h, store = herder(leader=True)
    real = store.put_connector_config

    def write_then_generate(name, props, target_state=None):
        real(name, props, target_state)
        store.tasks[(name, 0)] = {"file": "/tmp/generated"}
    store.put_connector_config = write_then_generate
    created, info = h.put_connector_config("new", dict(SRC, name="new"), False)
    assert created and info["tasks"] == []
    assert h.connector_info("new")["tasks"] == [{"connector": "new", "task": 0}]   # a GET afterwards sees it


def test_follower_sends_config_writes_to_the_leader():
    h, store = herder(leader=False)
    for call in (lambda: h.put_connector_config("new", dict(SRC, name="new"), False),
                 lambda: h.delete_connector("src"), lambda: h.stop_connector("src"),
                 lambda: h.put_task_configs("src", [{}])):
        with pytest.raises(NotLeaderError) as e:
            call()
        assert e.value.leader_url == LEADER
    assert store.writes == []


def test_leader_writes_and_answers_kafkas_shapes():
    h, store = herder(leader=True)
    created, info = h.put_connector_config("new", dict(SRC, name="new"), False)
    assert created and info == {"name": "new", "config": dict(SRC, name="new"), "tasks": [], "type": "source"}
    with pytest.raises(AlreadyExistsError):
        h.put_connector_config("src", SRC, False)
    created, info = h.put_connector_config("src", SRC, True)
    assert not created and info["tasks"] == [{"connector": "src", "task": 0}]
    assert h.task_configs("src") == [{"id": {"connector": "src", "task": 0}, "config": {"file": "/tmp/x"}}]
    h.put_task_configs("src", [{"a": 1}])
    assert store.writes[-1] == ("tasks", "src", [{"a": "1"}])
    with pytest.raises(BadRequestError):
        h.put_task_configs("src", {"not": "a list"})
    with pytest.raises(NotFoundError):
        h.delete_connector("nope")
    h.delete_connector("src")
    assert store.writes[-1] == ("delete", "src")


def test_invalid_config_is_400_with_kafkas_message():
    h, _ = herder(leader=True)
    with pytest.raises(BadRequestError) as e:
        h.put_connector_config("bad", {"name": "bad", "connector.class": "FileStreamSource", "tasks.max": "0",
                                       "topic": "t"}, False)
    assert str(e.value).startswith("Connector configuration is invalid and contains the following 1 error(s):")
    with pytest.raises(BadRequestError) as e:
        h.put_connector_config("bad", {"name": "bad", "connector.class": "NoSuchConnector"}, False)
    assert "Failed to find any class that implements Connector and which name matches NoSuchConnector" in str(e.value)


def test_409_while_a_rebalance_is_pending():
    h, store = herder(leader=True)
    h._member.rejoin_needed = True
    for call in (h.connectors, lambda: h.connector_info("src"), lambda: h.task_configs("src"),
                 lambda: h.put_connector_config("new", dict(SRC, name="new"), False),
                 lambda: h.restart_connector("src")):
        with pytest.raises(RebalanceNeededError):
            call()
    assert store.writes == []


def test_pause_and_resume_from_any_worker():
    h, store = herder(leader=False)
    h.pause_connector("src")
    h.resume_connector("src")
    assert store.writes == [("target", "src", "PAUSED"), ("target", "src", "STARTED")]
    with pytest.raises(NotFoundError):
        h.pause_connector("nope")


def test_restart_goes_to_the_owner_through_the_leader():
    follower, _ = herder(leader=False)
    with pytest.raises(NotLeaderError) as e:
        follower.restart_connector("src")
    assert e.value.leader_url == LEADER
    leader, _ = herder(leader=True)
    with pytest.raises(NotLeaderError) as e:
        leader.restart_task("src", 0)
    assert e.value.leader_url == "http://other:8083/"
    with pytest.raises(NotFoundError):
        leader.restart_task("src", 5)


def test_membership_security_from_the_worker_keys():
    from kbroker.connect.distributed.main import membership_security
    from kbroker.connect.exceptions import ConfigError
    base = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "config.storage.topic": "c",
            "offset.storage.topic": "o", "status.storage.topic": "s",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter"}

    def cfg(**extra):
        return WorkerConfig(dict(base, **extra), distributed=True, warn=lambda m: None)
    assert membership_security(cfg()) is None
    sec = membership_security(cfg(**{
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" '
                            'password="p";'}))
    assert sec.protocol == "SASL_PLAINTEXT" and sec.sasl is not None and sec.ssl_context is None
    with pytest.raises(ConfigError) as e:
        membership_security(cfg(**{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}))
    assert "sasl.jaas.config" in str(e.value)
