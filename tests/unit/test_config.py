import logging
import os
import re

import pytest

from kbroker.config import (
    CONFIG_KEYS, CONFIG_SOURCE_CODES, DEFAULT_CONFIG, LONG_MAX, STATIC_BROKER_CONFIG, TOPIC_CONFIG, TOPIC_CONFIGS,
    BrokerConfig, ConfigError, Listener, Password, effective_topic_config, format_value, log_config_for,
    parse_properties, parse_value, validate_topic_config,
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
    c = cfg(**{"broker.rack": "a=b"})
    assert c["broker.rack"] == "a=b"


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
        "log.message.timestamp.type": "CreateTime", "zookeeper.connect": "",
        "leader.imbalance.per.broker.percentage": 10,
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
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,EXT:PLAINTEXT,SSL:SSL",
    })
    assert c.listeners == [Listener("PLAINTEXT", "127.0.0.1", 9092), Listener("INTERNAL", "::1", 9093),
                           Listener("EXT", "", 0)]
    assert c.security_protocol_of == {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "PLAINTEXT", "EXT": "PLAINTEXT"}
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
    value = parse_value("ssl.keystore.password", "password", " s3cret ")
    assert isinstance(value, Password) and value.value == "s3cret"
    assert "s3cret" not in repr(value) and "s3cret" not in str(value)
    # A wrong keystore password on a TLS listener stops startup naming the key, never printing the secret.
    with pytest.raises(ConfigError) as ei:
        BrokerConfig.from_dict({"listeners": "SSL://127.0.0.1:9093", "ssl.keystore.type": "PKCS12",
                                "ssl.keystore.location": os.devnull, "ssl.keystore.password": "s3cret"})
    assert ei.value.key == "ssl.keystore.password"
    assert "ssl.keystore.password" in str(ei.value) and "s3cret" not in str(ei.value)
    assert "[hidden]" in str(ei.value)


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
    assert CONFIG_SOURCE_CODES == {TOPIC_CONFIG: 1, "DYNAMIC_BROKER_CONFIG": 2, "DYNAMIC_DEFAULT_BROKER_CONFIG": 3,
                                   STATIC_BROKER_CONFIG: 4, DEFAULT_CONFIG: 5}


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


# -- effects: every accepted key takes effect, warns, or is refused (keys.py `effect`) ---------------------------

from kbroker.config.keys import (  # noqa: E402 - grouped with the tests that need them
    APPLIED, NO_EFFECT, REFUSED_UNLESS_DEFAULT, _KEYS, effect_of,
)
from kbroker.config.topic import _DERIVED_SOURCES  # noqa: E402

KBROKER = os.path.join(REPO, "kbroker")
# Files that name keys without reading them: the tables themselves. log/config.py's name maps only translate
# names (LogConfig.from_props), nothing reads a broker key through them.
TABLES = {"kbroker/config/keys.py", "kbroker/config/topic.py", "kbroker/log/config.py"}
# LogConfig fields read through one of its properties rather than by name.
READ_THROUGH = {"cleanup_policy": ("policies", "deletes", "compacts")}


def _sources():
    out = {}
    for root, _, files in os.walk(KBROKER):
        for f in files:
            if f.endswith((".py", ".pyx")):
                path = os.path.join(root, f)
                with open(path, encoding="utf-8") as fh:
                    out[os.path.relpath(path, REPO).replace(os.sep, "/")] = fh.read()
    return out


def _quoted_in(sources, name, skip):
    """Files that read ``name``: the quoted name right after "[", "(" or "=" -- cfg["k"], cfg.get("k"), a call or
    tuple argument, a constant holding the name; a dict literal such as a topic's initial configs
    {"compression.type": ...} is not a read."""
    pat = re.compile(r"[\[(=]\s*[\"']%s[\"']" % re.escape(name))
    return sorted(p for p, text in sources.items() if p not in skip and pat.search(text))


def _topic_key_applied(sources, tkey):
    """A topic key takes effect when a LogConfig field of it is read outside the config modules, or its name is
    read directly (the controller reads unclean.leader.election.enable from the topic's stored config)."""
    outside = {p: t for p, t in sources.items() if not p.startswith("kbroker/config/") and p not in TABLES}
    for attr in (tkey.field,) + READ_THROUGH.get(tkey.field, ()):
        if any(re.search(r"\.%s\b" % attr, t) for t in outside.values()):
            return True
    return bool(_quoted_in(outside, tkey.name, ()))


def test_every_topic_key_is_applied_or_classified():
    sources = _sources()
    inert = [t.name for t in TOPIC_CONFIGS.values()
             if effect_of(t)[0] == APPLIED and not _topic_key_applied(sources, t)]
    assert inert == [], "topic keys marked applied that nothing reads: classify them (effect) or apply them"
    for t in TOPIC_CONFIGS.values():
        kind, reason = effect_of(t)
        assert kind in (APPLIED, NO_EFFECT, REFUSED_UNLESS_DEFAULT), t.name
        assert (kind == APPLIED) == (reason == ""), t.name


def test_every_broker_key_is_applied_or_classified():
    """Fails when a key in _KEYS is accepted but neither read in kbroker/ nor classified, so a future key cannot
    be silently inert; and when a key classified no-effect has started being read (update its effect)."""
    sources = _sources()
    via_topics = set()
    for t in TOPIC_CONFIGS.values():
        if effect_of(t)[0] == APPLIED and _topic_key_applied(sources, t):
            via_topics.update(_DERIVED_SOURCES.get(t.name, (t.broker_key,) if t.broker_key else ()))
    unread, stale = [], []
    for key in _KEYS:
        kind, reason = effect_of(key)
        assert kind in (APPLIED, NO_EFFECT, REFUSED_UNLESS_DEFAULT), key.name
        assert (kind == APPLIED) == (reason == ""), key.name
        readers = _quoted_in(sources, key.name, TABLES)
        if kind == APPLIED and not readers and key.name not in via_topics:
            unread.append(key.name)
        if kind == NO_EFFECT and readers:
            stale.append((key.name, readers))
    assert unread == [], "accepted keys nothing reads: apply them or classify them in keys.py"
    assert stale == [], "keys classified no-effect but read: their effect column is stale"


def _non_default(key):
    """A valid raw value other than the key's default."""
    d, v = key.default, key.validator
    if key.type == "bool":
        return "false" if d else "true"
    if key.type in ("int", "long", "short"):
        for cand in ([d + 1, d - 1] if d is not None else [1, 2]):
            try:
                parse_value(key.name, key.type, str(cand), v)
            except ConfigError:
                continue
            return str(cand)
    if key.type == "double":
        return "0.25" if d != 0.25 else "0.5"
    if hasattr(v, "choices"):
        return next(c for c in v.choices if c != d)
    if key.type == "class":
        return "com.example.Builder"
    if key.type == "list":
        return "X1,X2"
    return "x-value"


REFUSED = [k for k in _KEYS if effect_of(k)[0] == REFUSED_UNLESS_DEFAULT]
NO_EFFECT_KEYS = [k for k in _KEYS if effect_of(k)[0] == NO_EFFECT]


@pytest.mark.parametrize("key", REFUSED, ids=[k.name for k in REFUSED])
def test_refused_key_with_non_default_value_stops_startup_naming_it(key):
    raw = _non_default(key)
    with pytest.raises(ConfigError) as ei:
        BrokerConfig.from_sources(None, ["%s=%s" % (key.name, raw)])
    msg = str(ei.value)
    assert ei.value.key == key.name
    assert key.name in msg and "only the default" in msg and effect_of(key)[1] in msg
    if key.type != "password":
        assert repr(raw) in msg


@pytest.mark.parametrize("key", REFUSED, ids=[k.name for k in REFUSED])
def test_refused_key_at_its_default_is_accepted_silently(key, caplog):
    raw = "" if key.default is None else format_value(key.default)
    with caplog.at_level(logging.WARNING, logger="kbroker.config"):
        c = BrokerConfig.from_sources(None, ["%s=%s" % (key.name, raw)])
    assert c.is_set(key.name) and c.no_effect == []
    assert [r for r in caplog.records if r.name == "kbroker.config"] == []


SECURITY_KEYS = ["principal.builder.class"]   # the authorizer keys: tests/unit/test_authorizer.py; TLS:
# tests/unit/test_tls_config.py; SASL: tests/unit/test_sasl_config.py
# The quota keys apply since issue 12 (tests/unit/test_quota_store.py, tests/integration/test_quotas.py).


def test_security_keys_are_all_refused_with_the_reason():
    for name in SECURITY_KEYS:
        assert effect_of(CONFIG_KEYS[name])[0] == REFUSED_UNLESS_DEFAULT, name
    for name in SECURITY_KEYS:
        with pytest.raises(ConfigError, match="a Java principal builder class cannot be loaded") as ei:
            BrokerConfig.from_sources(None, ["%s=%s" % (name, _non_default(CONFIG_KEYS[name]))])
        assert ei.value.key == name


@pytest.mark.parametrize("overrides, key", [
    (["listeners=SASL_PLAINTEXT://:9094"], "listener.name.sasl_plaintext.gssapi.sasl.jaas.config"),
    (["listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9095"], "ssl.keystore.location"),
    (["listeners=PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9093",
      "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL"], "ssl.keystore.location"),
    # listeners unset: the default PLAINTEXT listener made secure by the map alone
    (["listener.security.protocol.map=PLAINTEXT:SASL_SSL"], "ssl.keystore.location"),
])
def test_secure_listener_fails_closed(overrides, key, monkeypatch):
    """A SASL or TLS listener without its keystore or JAAS entry stops startup naming the missing key (the SASL
    cases in detail: tests/unit/test_sasl_config.py; TLS: tests/unit/test_tls_config.py)."""
    monkeypatch.delenv("KAFKA_OPTS", raising=False)
    with pytest.raises(ConfigError) as ei:
        BrokerConfig.from_sources(None, overrides)
    assert ei.value.key == key, str(ei.value)


@pytest.mark.parametrize("proto", ["SSL", "SASL_PLAINTEXT", "SASL_SSL"])
def test_secure_inter_broker_protocol_without_such_a_listener_fails_closed(proto):
    with pytest.raises(ConfigError) as ei:
        BrokerConfig.from_sources(None, ["security.inter.broker.protocol=%s" % proto])
    assert ei.value.key == "security.inter.broker.protocol"
    assert repr(proto) in str(ei.value) and "no listener has security protocol %s" % proto in str(ei.value)


def test_plaintext_listeners_under_any_name_start():
    c = BrokerConfig.from_sources(None, [
        "listeners=CLIENT://127.0.0.1:9092,REPLICATION://127.0.0.1:9093",
        "listener.security.protocol.map=CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT,SSL:SSL",
        "inter.broker.listener.name=REPLICATION", "security.inter.broker.protocol=PLAINTEXT"])
    assert c.security_protocol_of == {"CLIENT": "PLAINTEXT", "REPLICATION": "PLAINTEXT"}
    assert c.inter_broker_listener == "REPLICATION"


def test_no_effect_keys_warn_once_each_naming_the_key(caplog):
    overrides = ["%s=%s" % (k.name, format_value(k.default)) for k in NO_EFFECT_KEYS]
    with caplog.at_level(logging.WARNING, logger="kbroker.config"):
        c = BrokerConfig.from_sources(None, overrides)
    assert [name for name, _ in c.no_effect] == [k.name for k in NO_EFFECT_KEYS]
    recs = [r.getMessage() for r in caplog.records if r.name == "kbroker.config"]
    assert len(recs) == len(NO_EFFECT_KEYS) == 17  # 4 of them: the Java Kerberos login-thread keys (GSSAPI)
    for k, msg in zip(NO_EFFECT_KEYS, recs):
        assert msg == "The configuration '%s' has no effect in kbroker: %s" % (k.name, effect_of(k)[1])
        assert "\n" not in msg


def test_no_effect_keys_left_unset_do_not_warn(caplog):
    with caplog.at_level(logging.WARNING, logger="kbroker.config"):
        c = BrokerConfig.from_sources(None, ["num.partitions=3"])
    assert c.no_effect == [] and caplog.records == []


def test_no_effect_key_still_validates_its_value():
    with pytest.raises(ConfigError, match="num.io.threads"):
        BrokerConfig.from_sources(None, ["num.io.threads=0"])


# Kafka 0.10.1's shipped config/server.properties (the keys listed in /work/shared/reference/notes/
# ecosystem-notes.md §1.1, Kafka's values), comments and all.
KAFKA_0101_SERVER_PROPERTIES = """\
# Licensed to the Apache Software Foundation (ASF) under one or more contributor license agreements.
############################# Server Basics #############################
broker.id=0
#delete.topic.enable=true
############################# Socket Server Settings #############################
#listeners=PLAINTEXT://:9092
#advertised.listeners=PLAINTEXT://your.host.name:9092
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
############################# Log Basics #############################
log.dirs=/tmp/kafka-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
############################# Log Flush Policy #############################
#log.flush.interval.messages=10000
#log.flush.interval.ms=1000
############################# Log Retention Policy #############################
log.retention.hours=168
#log.retention.bytes=1073741824
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
############################# Zookeeper #############################
zookeeper.connect=localhost:2181
zookeeper.connection.timeout.ms=6000
"""

# Later Kafka releases' shipped file adds the internal topic settings and the rebalance delay (Kafka >= 0.11).
KAFKA_MODERN_SERVER_PROPERTIES = KAFKA_0101_SERVER_PROPERTIES.replace(
    "zookeeper.connection.timeout.ms=6000\n", "zookeeper.connection.timeout.ms=18000\n") + """\
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
"""

# "A Production Server Config" (LinkedIn's), Kafka 0.10.1 docs, ops.html section 6.3.
KAFKA_0101_PRODUCTION_CONFIG = """\
num.replica.fetchers=4
replica.fetch.max.bytes=1048576
replica.fetch.wait.max.ms=500
replica.high.watermark.checkpoint.interval.ms=5000
replica.socket.timeout.ms=30000
replica.socket.receive.buffer.bytes=65536
replica.lag.time.max.ms=10000
controller.socket.timeout.ms=30000
controller.message.queue.size=10
num.partitions=8
message.max.bytes=1000000
auto.create.topics.enable=true
log.index.interval.bytes=4096
log.index.size.max.bytes=10485760
log.retention.hours=168
log.flush.interval.ms=10000
log.flush.interval.messages=20000
log.flush.scheduler.interval.ms=2000
log.roll.hours=168
log.retention.check.interval.ms=300000
log.segment.bytes=1073741824
zookeeper.connection.timeout.ms=6000
zookeeper.sync.time.ms=2000
num.io.threads=8
num.network.threads=8
socket.request.max.bytes=104857600
socket.receive.buffer.bytes=1048576
socket.send.buffer.bytes=1048576
queued.max.requests=16
fetch.purgatory.purge.interval.requests=100
producer.purgatory.purge.interval.requests=100
"""


@pytest.mark.parametrize("text, unknown, warned, buffers", [
    (KAFKA_0101_SERVER_PROPERTIES, [], ["num.network.threads", "num.io.threads"],
     {"SO_SNDBUF": 102400, "SO_RCVBUF": 102400}),
    (KAFKA_MODERN_SERVER_PROPERTIES, [],
     ["num.network.threads", "num.io.threads"],
     {"SO_SNDBUF": 102400, "SO_RCVBUF": 102400}),
    (KAFKA_0101_PRODUCTION_CONFIG, ["controller.message.queue.size"],
     ["num.network.threads", "num.io.threads", "queued.max.requests", "zookeeper.sync.time.ms",
      "num.replica.fetchers", "fetch.purgatory.purge.interval.requests", "producer.purgatory.purge.interval.requests"],
     {"SO_SNDBUF": 1048576, "SO_RCVBUF": 1048576}),
], ids=["0.10.1-shipped", "modern-shipped", "0.10.1-production"])
def test_kafka_stock_configs_start_with_warnings_for_inert_keys(tmp_path, text, unknown, warned, buffers):
    c = BrokerConfig.from_sources(write(tmp_path, "server.properties", text))
    assert sorted(c.unknown) == unknown
    assert sorted(name for name, _ in c.no_effect) == sorted(warned)
    assert c.socket_buffer_sizes == buffers


# -- socket buffers ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("overrides, expect", [
    ([], {}),  # Kafka's default 102400 is not applied: Linux autotunes
    (["socket.send.buffer.bytes=102400"], {"SO_SNDBUF": 102400}),
    (["socket.receive.buffer.bytes=65536", "socket.send.buffer.bytes=-1"], {"SO_RCVBUF": 65536}),
    (["socket.receive.buffer.bytes=-1", "socket.send.buffer.bytes=-1"], {}),
])
def test_socket_buffer_sizes_only_when_set(overrides, expect):
    assert BrokerConfig.from_sources(None, overrides).socket_buffer_sizes == expect


@pytest.mark.parametrize("key", ["socket.send.buffer.bytes", "socket.receive.buffer.bytes"])
def test_socket_buffer_zero_refused(key):
    with pytest.raises(ConfigError) as ei:
        BrokerConfig.from_sources(None, ["%s=0" % key])
    assert ei.value.key == key and "'0'" in str(ei.value) and "-1" in str(ei.value)


# -- topic keys: refused unless default, or accepted without effect ----------------------------------------------

@pytest.mark.parametrize("key, value, reason", [
    ("compression.type", "gzip", "recompression on append is not implemented"),
    ("compression.type", "uncompressed", "recompression on append is not implemented"),
    ("preallocate", "true", "does not preallocate"),
    ("max.compaction.lag.ms", "60000", "maximum compaction lag is not implemented"),
    ("leader.replication.throttled.replicas", "0-1", "[partitionId]:[brokerId],"),
    ("follower.replication.throttled.replicas", "0:1,*", "the literal '*'"),
])
def test_topic_config_without_effect_is_invalid_config(key, value, reason):
    with pytest.raises(ConfigError) as ei:
        validate_topic_config({"retention.ms": "1000", key: value})
    assert ei.value.key == key
    assert key in str(ei.value) and repr(value) in str(ei.value) and reason in str(ei.value)


def test_topic_config_defaults_of_refused_keys_accepted():
    assert validate_topic_config({"compression.type": "producer", "preallocate": "false",
                                  "max.compaction.lag.ms": str(LONG_MAX),
                                  "leader.replication.throttled.replicas": ""}) == {
        "compression.type": "producer", "preallocate": False, "max.compaction.lag.ms": LONG_MAX,
        "leader.replication.throttled.replicas": []}


def test_topic_message_format_version_accepted_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="kbroker.config"):
        assert validate_topic_config({"message.format.version": "0.10.1"}) == {"message.format.version": "0.10.1"}
    msgs = [r.getMessage() for r in caplog.records if r.name == "kbroker.config"]
    assert len(msgs) == 1 and "message.format.version" in msgs[0] and "no effect" in msgs[0]


def test_stored_topic_config_of_a_refused_key_still_describes():
    # A topic stored before a key was refused keeps loading (DescribeConfigs, the broker's LogConfig).
    eff = effective_topic_config(BrokerConfig.from_sources(), {"compression.type": "gzip"})
    assert eff["compression.type"].value == "gzip" and eff["compression.type"].source == TOPIC_CONFIG


# -- one source of defaults ----------------------------------------------------------------------------------------

def test_log_config_defaults_are_the_broker_defaults():
    """Per-log defaults live once, in LogConfig's fields; the broker keys take theirs from there, so the LogConfig a
    broker with Kafka's defaults builds is exactly LogConfig()."""
    from kbroker.log.config import LogConfig
    assert LogConfig(**log_config_for(BrokerConfig.from_sources(), {})) == LogConfig()
    c = BrokerConfig.from_sources()
    assert (c["log.roll.hours"], c["log.retention.hours"], c["log.roll.jitter.hours"]) == (168, 168, 0)
    assert c["log.cleanup.policy"] == ["delete"] and c["unclean.leader.election.enable"] is False


def test_config_error_is_invalid_config():
    from kbroker import errors
    with pytest.raises(errors.InvalidConfig) as ei:
        validate_topic_config({"segment.bytes": "1"})
    assert ei.value.code == 40 and ei.value.key == "segment.bytes"
    assert str(ei.value) == ei.value.message == "Invalid value '1' for configuration segment.bytes: must be [14,...]"
    assert isinstance(ei.value, ValueError)


def test_config_effects_doc_is_current():
    from kbroker.config.keys import effects_markdown
    with open(os.path.join(REPO, "docs", "config-effects.md"), encoding="utf-8") as f:
        assert f.read() == effects_markdown(TOPIC_CONFIGS.values()), \
            "docs/config-effects.md is stale: run python scripts/config_effects.py"
