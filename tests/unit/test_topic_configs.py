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
    tc = TopicConfigs(cfg, store, lambda: logs, lambda: hosted)
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


def test_logs_run_with_the_topic_config_and_only_the_log_manager_writes_it(store, cfg, tmp_path):
    """Item 5 of issue 9: a log found on disk starts with its topic's overrides (before any LeaderAndIsr), a change
    reaches every open log of the topic through LogManager.set_topic_config, and a Partition never writes the
    Log's config."""
    from kbroker.log import LogConfig, LogManager
    from kbroker.replica.partition import Partition
    store.create_topic("t", {0: [1]}, {"retention.ms": "100", "segment.bytes": "4096"})
    d = str(tmp_path / "logs")
    first = LogManager([d], default_log_config(cfg))
    first.get_or_create_log(("t", 0))                                              # a log left on disk
    first.shutdown()
    holder = {}
    tc = TopicConfigs(cfg, store, lambda: holder["lm"], lambda: {})
    lm = holder["lm"] = LogManager([d], default_log_config(cfg), topic_config=tc.log_config)
    lg = lm.get_log(("t", 0))
    assert (lg.config.retention_ms, lg.config.segment_bytes) == (100, 4096)
    assert lm.get_or_create_log(("t", 1)).config.retention_ms == 100               # created: the same config
    part = Partition("t", 0, lg, LogConfig(retention_ms=1, min_insync_replicas=2), 1)
    part.set_config(LogConfig(retention_ms=2))
    assert lg.config.retention_ms == 100 and part.log_config.retention_ms == 2      # the partition's own copy only
    tc.apply("t", {"retention.ms": "300"})
    assert [lm.get_log(("t", p)).config.retention_ms for p in (0, 1)] == [300, 300]
    lm.shutdown()
