"""TopicConfigs (kbroker/topic_admin.py): the LogConfig each topic runs with on this broker, over a real
TopicStore on the embedded backend; ConfigWatcher turning /config/changes into a reload."""
import gevent
import pytest

from kbroker.config import BrokerConfig
from kbroker.coord import EmbeddedBackend, TopicStore
from kbroker.topic_admin import ConfigWatcher, TopicConfigs, default_log_config


class Part:
    def __init__(self):
        self.configs = []

    def set_config(self, lc):
        self.configs.append(lc)


class Logs:
    def __init__(self):
        self.set = []

    def set_topic_config(self, topic, lc):
        self.set.append((topic, lc.retention_ms))


@pytest.fixture
def store(tmp_path):
    backend = EmbeddedBackend(str(tmp_path)).start()
    yield TopicStore(backend)
    backend.stop()


@pytest.fixture
def cfg():
    return BrokerConfig.from_dict({"log.retention.ms": "5000"})


def test_overrides_are_read_once_applied_to_live_partitions_and_forgotten(store, cfg):
    store.create_topic("t", {0: [1], 1: [1]}, {"retention.ms": "100"})
    store.create_topic("u", {0: [1]})
    hosted = {("t", 0): Part(), ("t", 1): Part(), ("u", 0): Part()}
    logs = Logs()
    tc = TopicConfigs(cfg, store, logs, lambda: hosted)
    assert default_log_config(cfg).retention_ms == 5000
    assert tc.log_config("t").retention_ms == 100 and tc.log_config("u").retention_ms == 5000
    # Read once: a znode change alone does not show until a reload (or an apply) says so.
    store.set_topic_config("t", {"retention.ms": "200"})
    assert tc.log_config("t").retention_ms == 100
    tc.reload()
    assert tc.log_config("t").retention_ms == 200
    assert [lc.retention_ms for lc in hosted[("t", 0)].configs] == [200] == \
        [lc.retention_ms for lc in hosted[("t", 1)].configs]
    assert hosted[("u", 0)].configs == [] and logs.set == [("t", 200)]      # u did not change: untouched
    tc.apply("u", {"retention.ms": "7"})
    assert [lc.retention_ms for lc in hosted[("u", 0)].configs] == [7] and logs.set[-1] == ("u", 7)
    # A deleted topic's overrides are read afresh when it comes back.
    store.set_topic_config("u", {})
    tc.forget([("u", 0)])
    assert tc.log_config("u").retention_ms == 5000


def test_config_watcher_reloads_on_each_new_notification(store, cfg):
    store.create_topic("t", {0: [1]})
    reloads = []
    ConfigWatcher(store.backend, lambda: reloads.append(1)).start()
    gevent.sleep(0.01)
    first = len(reloads)
    store.set_topic_config("t", {"retention.ms": "9"})     # writes a /config/changes notification
    with gevent.Timeout(2):
        while len(reloads) == first:
            gevent.sleep(0.005)
    assert len(reloads) == first + 1
