"""Dynamic broker configs (KIP-226, kbroker/config/dynamic.py) over the embedded coordination backend: precedence
and its undoing, validation with Kafka's messages, DescribeConfigs entries and synonyms, the watch, and a topic's
LogConfig following a dynamic default (TopicConfigs.reapply_all)."""
import gevent
import pytest

from kbroker import errors
from kbroker.config import BrokerConfig
from kbroker.config.dynamic import DEFAULT_ENTITY, DynamicBrokerConfig, validate, write_entity
from kbroker.coord.embedded import EmbeddedBackend


@pytest.fixture
def backend(tmp_path):
    b = EmbeddedBackend(str(tmp_path / "coord")).start()
    yield b
    b.stop()


def _cfg(tmp_path, **props):
    return BrokerConfig.from_dict({"log.dirs": str(tmp_path / "d"), "broker.id": "1",
                                   **{k.replace("_", "."): v for k, v in props.items()}})


def test_precedence_broker_over_default_over_static_and_back(tmp_path, backend):
    cfg = _cfg(tmp_path, log_retention_ms="1000")
    seen = []
    dyn = DynamicBrokerConfig(cfg, 1, backend, gevent.spawn, listeners=[lambda c, b, d: seen.append(set(c))])
    dyn.start()
    assert cfg.retention_ms == 1000 and cfg.sources["log.retention.ms"] == "override"
    assert dyn.alter("", {"log.retention.ms": "2000", "message.max.bytes": "5000"}) is None
    assert (cfg.retention_ms, cfg["message.max.bytes"]) == (2000, 5000)
    assert cfg.sources["log.retention.ms"] == "dynamic-default"
    dyn.alter("1", {"log.retention.ms": "3000"})
    assert (cfg.retention_ms, cfg.sources["log.retention.ms"]) == (3000, "dynamic-broker")
    dyn.alter("1", {})
    assert cfg.retention_ms == 2000
    dyn.alter("", {})
    assert (cfg.retention_ms, cfg["message.max.bytes"]) == (1000, 1048588)
    assert cfg.sources["log.retention.ms"] == "override" and cfg.sources["message.max.bytes"] == "default"
    assert seen[1:] == [{"log.retention.ms", "message.max.bytes"}, {"log.retention.ms"}, {"log.retention.ms"},
                        {"log.retention.ms", "message.max.bytes"}]
    assert dyn.read(DEFAULT_ENTITY) == {} and dyn.read("1") == {}


def test_validation_messages():
    prefix = "Invalid config value for resource ConfigResource(type=BROKER, name='1'): "
    cases = [
        ({"broker.id": "2", "log.dirs": "/x"}, "Cannot update these configs dynamically: Set(broker.id, log.dirs)"),
        ({"log.retention.hours": "1"}, "Cannot update these configs dynamically: Set(log.retention.hours)"),
        ({"no.such.key": "1"}, "Unknown broker configs: Set(no.such.key)"),
        ({"num.io.threads": "4"}, "Cannot update these configs dynamically in kbroker: Set(num.io.threads)"),
        ({"log.segment.bytes": "10"}, "Invalid value '10' for configuration log.segment.bytes"),
        ({"compression.type": "gzip"}, "Invalid value gzip for configuration compression.type: only the default"),
    ]
    for config, message in cases:
        with pytest.raises(errors.InvalidRequest) as e:
            validate("1", config)
        assert str(e.value).startswith(prefix + message), str(e.value)
    assert validate("", {"compression.type": "producer", "min.insync.replicas": "2"}) == {
        "compression.type": "producer", "min.insync.replicas": 2}


def test_entity_names(tmp_path, backend):
    dyn = DynamicBrokerConfig(_cfg(tmp_path), 1, backend, gevent.spawn)
    with pytest.raises(errors.InvalidRequest, match="Unexpected broker id, expected 1, but received 2"):
        dyn.alter("2", {"log.retention.ms": "1"})
    with pytest.raises(errors.InvalidRequest, match="Node id must be an integer, but it is: x"):
        dyn.describe("x")
    with pytest.raises(errors.InvalidRequest, match="Unexpected broker id, expected 1 or empty string, but received 0"):
        dyn.describe("0")
    dyn.alter("1", {"log.retention.ms": "5"}, validate_only=True)
    assert dyn.read("1") == {}


def test_describe_entries_sources_and_synonyms(tmp_path, backend):
    cfg = _cfg(tmp_path, log_retention_hours="100", log_flush_interval_messages="3")
    dyn = DynamicBrokerConfig(cfg, 1, backend, gevent.spawn).start()
    dyn.alter("", {"log.retention.ms": "7000", "log.flush.interval.messages": "4"})
    dyn.alter("1", {"log.flush.interval.messages": "5"})
    entries = {e.name: e for e in dyn.describe("1")}
    e = entries["log.flush.interval.messages"]
    assert (e.value, e.source_id, e.read_only) == ("5", 2, False)
    assert e.synonyms == [("log.flush.interval.messages", "5", 2), ("log.flush.interval.messages", "4", 3),
                          ("log.flush.interval.messages", "3", 4),
                          ("log.flush.interval.messages", "9223372036854775807", 5)]
    e = entries["log.retention.ms"]
    assert (e.value, e.source_id) == ("7000", 3)
    assert e.synonyms == [("log.retention.ms", "7000", 3), ("log.retention.hours", "100", 4),
                          ("log.retention.hours", "168", 5)]
    e = entries["log.retention.hours"]      # Kafka drops the leading synonyms of other names
    assert (e.value, e.source_id, e.read_only) == ("100", 4, True)
    assert e.synonyms == [("log.retention.hours", "100", 4), ("log.retention.hours", "168", 5)]
    assert (entries["broker.id"].value, entries["broker.id"].source_id) == ("1", 4)
    default = dyn.describe("")
    assert [(x.name, x.value, x.source_id) for x in default] == [
        ("log.flush.interval.messages", "4", 3), ("log.retention.ms", "7000", 3)]
    assert default[0].synonyms == [("log.flush.interval.messages", "4", 3), ("log.flush.interval.messages", "3", 4),
                                   ("log.flush.interval.messages", "9223372036854775807", 5)]


def test_watch_applies_other_writers_and_skips_bad_values(tmp_path, backend):
    cfg = _cfg(tmp_path)
    dyn = DynamicBrokerConfig(cfg, 1, backend, gevent.spawn).start()
    write_entity(backend, DEFAULT_ENTITY, {"message.max.bytes": "4000", "broker.id": "9", "log.segment.bytes": "x"})
    with gevent.Timeout(5):
        while cfg["message.max.bytes"] != 4000:
            gevent.sleep(0.01)
    assert cfg["broker.id"] == 1 and cfg["log.segment.bytes"] == 1073741824    # refused ones are not applied
    write_entity(backend, "2", {"message.max.bytes": "10"})                      # another broker's: ignored
    write_entity(backend, "1", {"message.max.bytes": "3000"})
    with gevent.Timeout(5):
        while cfg["message.max.bytes"] != 3000:
            gevent.sleep(0.01)
    assert dyn.per_broker == {"message.max.bytes": "3000"}


def test_topic_log_configs_follow_a_dynamic_default(tmp_path, backend):
    from kbroker.coord.metadata_store import TopicStore
    from kbroker.topic_admin import TopicConfigs

    class Part:
        config = None

        def set_config(self, lc):
            self.config = lc

    class Logs:
        configs = None

        def set_topic_configs(self, configs):
            self.configs = configs

    cfg = _cfg(tmp_path)
    store = TopicStore(backend)
    parts = {("a", 0): Part(), ("a", 1): Part(), ("b", 0): Part()}
    logs = Logs()
    tc = TopicConfigs(cfg, store, lambda: logs, lambda: parts)
    tc._overrides = {"a": {}, "b": {"max.message.bytes": "100"}, "c": {}}
    dyn = DynamicBrokerConfig(cfg, 1, backend, gevent.spawn,
                              listeners=[lambda changed, *_: changed and tc.reapply_all({"c"})]).start()
    dyn.alter("", {"message.max.bytes": "2000"})
    assert [p.config.max_message_bytes for p in parts.values()] == [2000, 2000, 100]   # b's override stays
    assert {t: c.max_message_bytes for t, c in logs.configs.items()} == {"a": 2000, "b": 100, "c": 2000}


def test_the_doc_lists_exactly_the_dynamic_keys():
    """docs/dynamic-broker-configs.md names every key kbroker changes live and every one it refuses as needing a
    restart (so the doc cannot go stale when a key moves)."""
    import re
    from pathlib import Path

    from kbroker.config.dynamic import APPLIED_KEYS, RESTART_KEYS
    text = (Path(__file__).resolve().parents[2] / "docs" / "dynamic-broker-configs.md").read_text()
    applied, refused = text.split("## Keys")[1].split("As in Kafka, only the milliseconds forms")
    refused = refused.split("Dynamic in Kafka but refused by kbroker")[1].split("Every other key is read-only")[0]
    named = set(re.findall(r"`([a-z.]+)`", applied))
    assert named == set(APPLIED_KEYS), named ^ set(APPLIED_KEYS)
    listed = set(re.findall(r"`([a-z.]+)`", refused))
    ssl = {k for k in RESTART_KEYS if k.startswith("ssl.")}
    assert listed == set(RESTART_KEYS) - ssl, listed ^ (set(RESTART_KEYS) - ssl)
