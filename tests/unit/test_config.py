import logging
import os

import pytest

from kbroker.config import (
    CONFIG_KEYS, CONFIG_SOURCE_CODES, DEFAULT_CONFIG, LONG_MAX, STATIC_BROKER_CONFIG, TOPIC_CONFIG, TOPIC_CONFIGS,
    BrokerConfig, ConfigError, Listener, Password, effective_topic_config, format_value, log_config_for,
    parse_properties, validate_topic_config,
)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cfg(**kv):
    return BrokerConfig.from_sources(None, ["%s=%s" % (k.replace("_", "."), v) for k, v in kv.items()])


def write(tmp_path, name, text, binary=False):
    p = tmp_path / name
    if binary:
        p.write_bytes(text)
    else:
        p.write_text(text)
    return str(p)


# -- properties syntax -------------------------------------------------------------------------------------------

def test_properties_separators_and_comments():
    props = parse_properties(
        "# comment\n"
        "! also a comment\n"
        "\n"
        "a=1\n"
        "b: 2\n"
        "c 3\n"
        "d\t=\t4\n"
        "  e = five  \n"
        "f\n"
        "g=\n"
        "h==x\n"
        "i=a:b=c\n"
    )
    assert props == {"a": "1", "b": "2", "c": "3", "d": "4", "e": "five  ", "f": "", "g": "", "h": "=x",
                     "i": "a:b=c"}


def test_properties_continuation_and_escapes():
    props = parse_properties(
        "sasl.jaas.config=org.Foo required \\\n"
        "      user=\"alice\" \\\n"
        "      pass=\"x\";\n"
        "key\\ with\\ spaces=v\n"
        "esc=tab\\there\\nnl\\\\back\\u00e9\n"
        "k\\:colon=1\n"
        "even=ends\\\\\n"
        "next=2\n"
        "# comment ending in backslash \\\n"
        "after=3\n"
    )
    assert props["sasl.jaas.config"] == 'org.Foo required user="alice" pass="x";'
    assert props["key with spaces"] == "v"
    assert props["esc"] == "tab\there\nnl\\back\u00e9"
    assert props["k:colon"] == "1"
    assert props["even"] == "ends\\"
    assert props["next"] == "2"
    assert props["after"] == "3"


def test_properties_duplicates_later_wins_and_trim(tmp_path):
    path = write(tmp_path, "s.properties", "num.partitions=2\nnum.partitions = 3   \n")
    c = BrokerConfig.from_sources(path)
    assert c["num.partitions"] == 3
    assert c.sources["num.partitions"] == "file"


def test_properties_latin1_fallback(tmp_path):
    path = write(tmp_path, "s.properties", b"broker.rack=r\xe9\n", binary=True)
    assert BrokerConfig.from_sources(path)["broker.rack"] == "r\u00e9"


def test_shipped_example_file_is_valid():
    c = BrokerConfig.from_sources(os.path.join(REPO, "config", "server.properties"))
    assert c.unknown == {}
    assert c.log_dirs == ["/tmp/kbroker-logs"]
    assert c.listeners == [Listener("PLAINTEXT", "127.0.0.1", 9092)]
    assert c.embedded is True
    assert c["broker.id"] == 0


# -- YAML ----------------------------------------------------------------------------------------------------------

def test_yaml_flat_and_nested(tmp_path):
    path = write(tmp_path, "b.yaml",
                 "broker.id: 7\n"
                 "log:\n"
                 "  retention:\n"
                 "    hours: 1\n"
                 "  dirs: /a,/b\n"
                 "auto.create.topics.enable: false\n"
                 "log.cleanup.policy: [compact, delete]\n")
    c = BrokerConfig.from_sources(path)
    assert c["broker.id"] == 7
    assert c["log.retention.hours"] == 1
    assert c.retention_ms == 3600000
    assert c.log_dirs == ["/a", "/b"]
    assert c["auto.create.topics.enable"] is False
    assert c["log.cleanup.policy"] == ["compact", "delete"]


def test_yaml_must_be_mapping(tmp_path):
    path = write(tmp_path, "b.yml", "- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping"):
        BrokerConfig.from_sources(path)


def test_yaml_bool_for_int_refused(tmp_path):
    path = write(tmp_path, "b.yml", "num.partitions: true\n")
    with pytest.raises(ConfigError, match="num.partitions"):
        BrokerConfig.from_sources(path)


# -- precedence, unknown keys, errors --------------------------------------------------------------------------

def test_overrides_win_over_file(tmp_path):
    path = write(tmp_path, "s.properties", "num.partitions=4\nlog.dirs=/x\n")
    c = BrokerConfig.from_sources(path, ["num.partitions=6", "zookeeper.connect=zk1:2181,zk2:2181/kb"])
    assert c["num.partitions"] == 6
    assert c.sources["num.partitions"] == "override"
    assert c.sources["log.dirs"] == "file"
    assert c.sources["log.segment.bytes"] == "default"
    assert c.embedded is False


def test_override_splits_on_first_equals():
    c = cfg(**{"sasl.kerberos.service.name": "a=b"})
    assert c["sasl.kerberos.service.name"] == "a=b"


def test_override_without_equals_refused():
    with pytest.raises(ConfigError, match="key=value"):
        BrokerConfig.from_sources(None, ["num.partitions"])


def test_unknown_key_warned_and_kept(caplog, tmp_path):
    path = write(tmp_path, "s.properties", "confluent.support.metrics.enable=false\n")
    with caplog.at_level(logging.WARNING, logger="kbroker.config"):
        c = BrokerConfig.from_sources(path)
    assert c.unknown == {"confluent.support.metrics.enable": "false"}
    recs = [r for r in caplog.records if r.name == "kbroker.config"]
    assert len(recs) == 1
    assert "confluent.support.metrics.enable" in recs[0].getMessage()
    assert recs[0].levelno == logging.WARNING


@pytest.mark.parametrize("override, key, allowed", [
    ("num.partitions=0", "num.partitions", "[1,...]"),
    ("log.segment.bytes=abc", "log.segment.bytes", "not a number of type int"),
    ("log.segment.bytes=13", "log.segment.bytes", "[14,...]"),
    ("log.segment.bytes=2147483648", "log.segment.bytes", "out of range for type int"),
    ("listeners=foo", "listeners", "NAME://host:port"),
    ("listeners=PLAINTEXT://:99999", "listeners", "[0,...,65535]"),
    ("listeners=PLAINTEXT://:9092,PLAINTEXT://:9093", "listeners", "more than once"),
    ("listeners=INTERNAL://:9092", "listeners", "listener.security.protocol.map"),
    ("auto.create.topics.enable=yes", "auto.create.topics.enable", "true or false"),
    ("log.cleanup.policy=compact,shred", "log.cleanup.policy", "compact, delete"),
    ("log.message.timestamp.type=Now", "log.message.timestamp.type", "CreateTime, LogAppendTime"),
    ("compression.type=brotli", "compression.type", "one of"),
    ("log.cleaner.min.cleanable.ratio=1.5", "log.cleaner.min.cleanable.ratio", "[0.0,...,1.0]"),
    ("zookeeper.connect=localhost", "zookeeper.connect", "host:port"),
    ("broker.id=-2", "broker.id", "[-1,...]"),
    ("broker.id=1001", "broker.id", "reserved.broker.max.id"),
])
def test_invalid_values_name_key_value_and_allowed(override, key, allowed):
    with pytest.raises(ConfigError) as ei:
        BrokerConfig.from_sources(None, [override])
    msg = str(ei.value)
    assert key in msg
    assert allowed in msg
    assert ei.value.key == key
    value = override.partition("=")[2]
    assert value in msg


def test_advertised_listener_names_must_exist():
    with pytest.raises(ConfigError, match="advertised.listeners"):
        BrokerConfig.from_sources(None, ["listeners=PLAINTEXT://:9092", "advertised.listeners=SSL://h:9093"])


def test_wildcard_listener_needs_advertised():
    with pytest.raises(ConfigError, match="advertised.listeners"):
        BrokerConfig.from_sources(None, ["listeners=PLAINTEXT://0.0.0.0:9092"])
    c = BrokerConfig.from_sources(None, ["listeners=PLAINTEXT://0.0.0.0:9092",
                                         "advertised.listeners=PLAINTEXT://127.0.0.1:9092"])
    assert c.advertised_listeners == [Listener("PLAINTEXT", "127.0.0.1", 9092)]


def test_generation_disabled_requires_id():
    with pytest.raises(ConfigError, match="broker.id"):
        cfg(**{"broker.id.generation.enable": "false"})


# -- defaults and derived values -------------------------------------------------------------------------------

def test_defaults_match_kafka():
    c = BrokerConfig.from_sources()
    expect = {
        "broker.id": -1, "num.partitions": 1, "default.replication.factor": 1, "log.segment.bytes": 1073741824,
        "log.retention.hours": 168, "log.retention.bytes": -1, "log.retention.check.interval.ms": 300000,
        "log.index.size.max.bytes": 10485760, "log.index.interval.bytes": 4096, "message.max.bytes": 1048588,
        "socket.request.max.bytes": 104857600, "socket.send.buffer.bytes": 102400, "num.network.threads": 3,
        "num.io.threads": 8, "queued.max.requests": 500, "zookeeper.session.timeout.ms": 18000,
        "offsets.topic.num.partitions": 50, "offsets.topic.replication.factor": 3,
        "offsets.retention.minutes": 1440, "offsets.commit.timeout.ms": 5000,
        "group.min.session.timeout.ms": 6000, "group.max.session.timeout.ms": 300000,
        "group.initial.rebalance.delay.ms": 3000, "min.insync.replicas": 1,
        "unclean.leader.election.enable": False, "delete.topic.enable": True, "replica.lag.time.max.ms": 10000,
        "replica.fetch.max.bytes": 1048576, "replica.fetch.wait.max.ms": 500, "num.replica.fetchers": 1,
        "controlled.shutdown.max.retries": 3, "controlled.shutdown.retry.backoff.ms": 5000,
        "reserved.broker.max.id": 1000, "request.timeout.ms": 30000, "transactional.id.expiration.ms": 604800000,
        "producer.id.expiration.ms": 86400000, "compression.type": "producer", "connections.max.idle.ms": 600000,
        "fetch.max.bytes": 57671680, "replica.high.watermark.checkpoint.interval.ms": 5000,
        "log.cleanup.policy": ["delete"], "log.cleaner.dedupe.buffer.size": 134217728,
        "log.cleaner.min.cleanable.ratio": 0.5, "log.cleaner.delete.retention.ms": 86400000,
        "log.cleaner.backoff.ms": 15000, "log.flush.interval.messages": LONG_MAX,
        "log.flush.offset.checkpoint.interval.ms": 60000, "log.segment.delete.delay.ms": 60000,
        "log.message.timestamp.type": "CreateTime", "zookeeper.connect": "", "leader.imbalance.per.broker.percentage": 10,
    }
    for k, v in expect.items():
        assert c[k] == v, k
    assert c.log_dirs == ["/tmp/kafka-logs"]
    assert c.listeners == [Listener("PLAINTEXT", "", 9092)]
    assert c.embedded is True
    assert c.roll_ms == 604800000
    assert c.retention_ms == 604800000
    assert c.flush_interval_ms == LONG_MAX
    assert c.zk_connection_timeout_ms == 18000


def test_every_key_has_doc_and_valid_default():
    for k in CONFIG_KEYS.values():
        assert k.doc and k.importance in ("high", "medium", "low"), k.name
        if k.validator is not None and k.default is not None:
            assert k.validator.check(k.default), k.name


@pytest.mark.parametrize("given, expect", [
    ({}, 604800000),
    ({"log.retention.hours": "1"}, 3600000),
    ({"log.retention.hours": "1", "log.retention.minutes": "2"}, 120000),
    ({"log.retention.hours": "1", "log.retention.minutes": "2", "log.retention.ms": "5"}, 5),
    ({"log.retention.ms": "-1", "log.retention.hours": "1"}, -1),
    ({"log.retention.hours": "-1"}, -1),
    ({"log.retention.ms": "", "log.retention.minutes": "3"}, 180000),
])
def test_retention_precedence(given, expect):
    assert BrokerConfig.from_dict(given).retention_ms == expect


def test_roll_and_flush_fallbacks():
    c = BrokerConfig.from_dict({"log.roll.hours": "2", "log.roll.jitter.hours": "1",
                                "log.flush.scheduler.interval.ms": "3000"})
    assert (c.roll_ms, c.roll_jitter_ms, c.flush_interval_ms) == (7200000, 3600000, 3000)
    c = BrokerConfig.from_dict({"log.roll.hours": "2", "log.roll.ms": "10", "log.flush.interval.ms": "7"})
    assert (c.roll_ms, c.flush_interval_ms) == (10, 7)


def test_log_dirs_fallback():
    assert BrokerConfig.from_dict({"log.dir": "/only"}).log_dirs == ["/only"]
    assert BrokerConfig.from_dict({"log.dir": "/only", "log.dirs": " /a , /b "}).log_dirs == ["/a", "/b"]


def test_listeners_parsing_and_advertised_defaults():
    c = BrokerConfig.from_dict({
        "listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://[::1]:9093,EXT://:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL,EXT:SASL_PLAINTEXT",
    })
    assert c.listeners == [Listener("PLAINTEXT", "127.0.0.1", 9092), Listener("INTERNAL", "::1", 9093),
                           Listener("EXT", "", 0)]
    assert c.security_protocol_of == {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "SSL", "EXT": "SASL_PLAINTEXT"}
    adv = c.advertised_listeners
    assert adv[:2] == c.listeners[:2]
    assert adv[2].host != ""  # empty host -> this machine's name
    c = BrokerConfig.from_dict({"listeners": "PLAINTEXT://127.0.0.1:9092",
                                "advertised.listeners": "PLAINTEXT://kafka.example:19092"})
    assert c.advertised_listeners == [Listener("PLAINTEXT", "kafka.example", 19092)]


def test_legacy_host_port():
    c = BrokerConfig.from_dict({"host.name": "127.0.0.1", "port": "9999"})
    assert c.listeners == [Listener("PLAINTEXT", "127.0.0.1", 9999)]
    c = BrokerConfig.from_dict({"host.name": "127.0.0.1", "port": "9999", "advertised.host.name": "pub",
                                "advertised.port": "19999"})
    assert c.advertised_listeners == [Listener("PLAINTEXT", "pub", 19999)]


def test_password_hidden():
    c = BrokerConfig.from_dict({"ssl.keystore.password": "s3cret"})
    assert isinstance(c["ssl.keystore.password"], Password)
    assert c["ssl.keystore.password"].value == "s3cret"
    assert "s3cret" not in repr(c["ssl.keystore.password"])
    assert ("ssl.keystore.password", "[hidden]", "override") in c.describe()


def test_get_and_contains():
    c = BrokerConfig.from_sources()
    assert c.get("log.segment.bytes") == 1073741824
    assert c.get("nope", 5) == 5
    assert "num.io.threads" in c
    with pytest.raises(KeyError):
        c["nope"]


# -- topic configs --------------------------------------------------------------------------------------------

def test_validate_topic_config_types():
    out = validate_topic_config({"retention.ms": "1000", "cleanup.policy": "compact,delete",
                                 "min.cleanable.dirty.ratio": "0.1", "unclean.leader.election.enable": "TRUE",
                                 "message.timestamp.type": "LogAppendTime", "segment.bytes": 1048576})
    assert out == {"retention.ms": 1000, "cleanup.policy": ["compact", "delete"], "min.cleanable.dirty.ratio": 0.1,
                   "unclean.leader.election.enable": True, "message.timestamp.type": "LogAppendTime",
                   "segment.bytes": 1048576}


@pytest.mark.parametrize("key, value, fragment", [
    ("retention.ms", "forever", "not a number"),
    ("retention.ms", "-2", "[-1,...]"),
    ("segment.bytes", "10", "[14,...]"),
    ("cleanup.policy", "", "non-empty"),
    ("cleanup.policy", "archive", "compact, delete"),
    ("compression.type", "brotli", "one of"),
    ("min.insync.replicas", "0", "[1,...]"),
    ("min.cleanable.dirty.ratio", "2", "[0.0,...,1.0]"),
    ("no.such.config", "1", "Unknown topic config"),
    ("retention.ms", None, "required"),
])
def test_validate_topic_config_errors(key, value, fragment):
    with pytest.raises(ConfigError) as ei:
        validate_topic_config({key: value})
    assert key in str(ei.value)
    assert fragment in str(ei.value)
    assert ei.value.key == key


def test_topic_key_table_maps_to_broker_keys():
    for t in TOPIC_CONFIGS.values():
        assert t.broker_key is None or t.broker_key in CONFIG_KEYS, t.name
    assert TOPIC_CONFIGS["flush.messages"].field == "flush_interval_messages"
    assert TOPIC_CONFIGS["flush.ms"].field == "flush_interval_ms"
    assert TOPIC_CONFIGS["segment.index.bytes"].broker_key == "log.index.size.max.bytes"


def test_effective_topic_config_sources():
    c = BrokerConfig.from_dict({"log.retention.hours": "1", "message.max.bytes": "2000000"})
    eff = effective_topic_config(c, {"segment.bytes": "1048576"})
    assert set(eff) == set(TOPIC_CONFIGS)
    assert eff["segment.bytes"].value == 1048576 and eff["segment.bytes"].source == TOPIC_CONFIG
    assert eff["retention.ms"].value == 3600000 and eff["retention.ms"].source == STATIC_BROKER_CONFIG
    assert eff["max.message.bytes"].value == 2000000 and eff["max.message.bytes"].source == STATIC_BROKER_CONFIG
    assert eff["cleanup.policy"].value == ["delete"] and eff["cleanup.policy"].source == DEFAULT_CONFIG
    assert format_value(eff["cleanup.policy"].value) == "delete"
    assert format_value(eff["min.cleanable.dirty.ratio"].value) == "0.5"
    assert format_value(eff["unclean.leader.election.enable"].value) == "false"
    assert CONFIG_SOURCE_CODES == {TOPIC_CONFIG: 1, STATIC_BROKER_CONFIG: 4, DEFAULT_CONFIG: 5}


def test_log_config_for():
    c = BrokerConfig.from_dict({"log.roll.ms": "5000", "log.cleanup.policy": "compact"})
    kw = log_config_for(c, {"retention.bytes": "100", "cleanup.policy": "compact,delete", "flush.ms": "20"})
    assert kw["segment_ms"] == 5000
    assert kw["retention_bytes"] == 100
    assert kw["cleanup_policy"] == "compact,delete"
    assert kw["flush_interval_ms"] == 20
    assert kw["max_message_bytes"] == 1048588
    assert log_config_for(c, {})["cleanup_policy"] == "compact"
    assert log_config_for(c, {})["flush_interval_ms"] is None  # Long.MAX = never by time
    try:
        from kbroker.log.config import LogConfig
    except ImportError:
        return
    lc = LogConfig(**kw)
    assert lc.segment_ms == 5000 and lc.retention_bytes == 100
