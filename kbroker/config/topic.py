"""Topic-level configs: keys, validation, effective values with their source, LogConfig kwargs."""
import dataclasses
import logging
from collections import namedtuple

from kbroker.log.config import LogConfig
from kbroker.quota.replication import valid_throttled_replicas

from .keys import APPLIED, CONFIG_KEYS, NO_EFFECT, REFUSED_UNLESS_DEFAULT, effect_of, no_effect
from .values import (ConfigError, LONG_MAX, Range, _CLEANUP, _COMPRESSION, _TIMESTAMP_TYPE, _VERSION, _invalid,
                     format_default, parse_value)

log = logging.getLogger("kbroker.config")


# --------------------------------------------------------------------------------------------------------------
# topic-level configs

TopicKey = namedtuple("TopicKey", "name type validator broker_key field doc effect")
"""``effect`` as in the broker key table (keys.py): a refused key's non-default value is INVALID_CONFIG (40) naming
it; a no-effect key is accepted with a warning in the broker log."""

DEFAULT_CONFIG = "DEFAULT_CONFIG"
STATIC_BROKER_CONFIG = "STATIC_BROKER_CONFIG"
TOPIC_CONFIG = "TOPIC_CONFIG"
DYNAMIC_BROKER_CONFIG = "DYNAMIC_BROKER_CONFIG"
DYNAMIC_DEFAULT_BROKER_CONFIG = "DYNAMIC_DEFAULT_BROKER_CONFIG"
# DescribeConfigs v1+ config_source codes
CONFIG_SOURCE_CODES = {TOPIC_CONFIG: 1, DYNAMIC_BROKER_CONFIG: 2, DYNAMIC_DEFAULT_BROKER_CONFIG: 3,
                       STATIC_BROKER_CONFIG: 4, DEFAULT_CONFIG: 5}
# BrokerConfig.sources of the dynamic layers (kbroker/config/dynamic.py) -> the topic entry's source.
_DYNAMIC_SOURCES = (("dynamic-broker", DYNAMIC_BROKER_CONFIG), ("dynamic-default", DYNAMIC_DEFAULT_BROKER_CONFIG))


def _t(name, type_, validator, broker_key, doc, field=None, effect=APPLIED):
    return TopicKey(name, type_, validator, broker_key, field or name.replace(".", "_"), doc, effect)


class _ThrottledReplicas:
    """Kafka's ThrottledReplicaListValidator: the literal ``*`` first, or every item ``partitionId:brokerId``."""

    def check(self, value):
        return value is None or valid_throttled_replicas(value)

    def describe(self):
        return ("the literal '*' or a list of replicas in the following format: "
                "[partitionId]:[brokerId],[partitionId]:[brokerId],...")


_THROTTLED_REPLICAS = _ThrottledReplicas()

_TOPIC_KEYS = [
    _t("cleanup.policy", "list", _CLEANUP, "log.cleanup.policy", "delete and/or compact"),
    _t("compression.type", "string", _COMPRESSION, "compression.type", "Stored compression; producer = keep",
       effect=CONFIG_KEYS["compression.type"].effect),
    _t("delete.retention.ms", "long", Range(0), "log.cleaner.delete.retention.ms", "Delete marker lifetime"),
    _t("file.delete.delay.ms", "long", Range(0), "log.segment.delete.delay.ms", "Delay before segment files go"),
    _t("flush.messages", "long", Range(1), "log.flush.interval.messages", "fsync every N messages",
       field="flush_interval_messages"),
    _t("flush.ms", "long", Range(0), "log.flush.interval.ms", "fsync after this many ms", field="flush_interval_ms"),
    _t("index.interval.bytes", "int", Range(0), "log.index.interval.bytes", "Bytes between index entries"),
    _t("max.message.bytes", "int", Range(0), "message.max.bytes", "Largest record batch"),
    _t("message.format.version", "string", _VERSION, "log.message.format.version",
       "Message format of stored batches; kbroker always stores v2",
       effect=no_effect("kbroker stores record batches v2 and down-converts per Fetch version, as Kafka >= 3.0 does "
                        "(which ignores this key too)")),
    _t("message.timestamp.type", "string", _TIMESTAMP_TYPE, "log.message.timestamp.type",
       "CreateTime or LogAppendTime"),
    _t("message.timestamp.difference.max.ms", "long", Range(0), "log.message.timestamp.difference.max.ms",
       "Max timestamp skew for CreateTime"),
    _t("min.cleanable.dirty.ratio", "double", Range(0.0, 1.0), "log.cleaner.min.cleanable.ratio",
       "Dirty ratio that triggers cleaning"),
    _t("min.compaction.lag.ms", "long", Range(0), "log.cleaner.min.compaction.lag.ms", "Minimum uncompacted age"),
    _t("max.compaction.lag.ms", "long", Range(1), "log.cleaner.max.compaction.lag.ms", "Maximum uncompacted age",
       effect=CONFIG_KEYS["log.cleaner.max.compaction.lag.ms"].effect),
    _t("min.insync.replicas", "int", Range(1), "min.insync.replicas", "ISR size needed for acks=all"),
    _t("preallocate", "bool", None, "log.preallocate", "Preallocate segment files",
       effect=CONFIG_KEYS["log.preallocate"].effect),
    _t("retention.bytes", "long", None, "log.retention.bytes", "Partition size limit; -1 = unlimited"),
    _t("retention.ms", "long", Range(-1), "log.retention.ms", "Retention time; -1 = unlimited"),
    _t("segment.bytes", "int", Range(14), "log.segment.bytes", "Segment file size"),
    _t("segment.index.bytes", "int", Range(4), "log.index.size.max.bytes", "Index file size"),
    _t("segment.jitter.ms", "long", Range(0), "log.roll.jitter.ms", "Roll jitter"),
    _t("segment.ms", "long", Range(1), "log.roll.ms", "Roll segments after this age"),
    _t("unclean.leader.election.enable", "bool", None, "unclean.leader.election.enable", "Allow unclean election"),
    _t("leader.replication.throttled.replicas", "list", _THROTTLED_REPLICAS, None,
       "partition:broker list (or *) throttled as leader (leader.replication.throttled.rate)"),
    _t("follower.replication.throttled.replicas", "list", _THROTTLED_REPLICAS, None,
       "partition:broker list (or *) throttled as follower (follower.replication.throttled.rate)"),
]

TOPIC_CONFIGS = {k.name: k for k in _TOPIC_KEYS}
_LOG_FIELDS = frozenset(f.name for f in dataclasses.fields(LogConfig))

# Broker keys that feed a topic default through a derived value (all of them count as "set" for the source).
_DERIVED_SOURCES = {
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
    "segment.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "flush.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
}


def _broker_default(broker_cfg, tkey):
    if tkey.name == "retention.ms":
        return broker_cfg.retention_ms
    if tkey.name == "segment.ms":
        return broker_cfg.roll_ms
    if tkey.name == "segment.jitter.ms":
        return broker_cfg.roll_jitter_ms
    if tkey.name == "flush.ms":
        return broker_cfg.flush_interval_ms
    if tkey.broker_key is None:
        return []
    v = broker_cfg[tkey.broker_key]
    return list(v) if isinstance(v, list) else v


def _parse_topic_config(configs):
    """Typed copy of a topic config dict (types and ranges only); ConfigError names the offending key."""
    out = {}
    for name, raw in (configs or {}).items():
        tkey = TOPIC_CONFIGS.get(name)
        if tkey is None:
            raise ConfigError("Unknown topic config name: %s" % name, name)
        if raw is None:
            raise ConfigError("Invalid value None for configuration %s: a value is required" % name, name)
        out[name] = parse_value(name, tkey.type, raw, tkey.validator)
    return out


def _kafka_default(tkey):
    """The value a topic key has when nothing sets it (its broker key's default; [] for the throttle lists)."""
    return CONFIG_KEYS[tkey.broker_key].default if tkey.broker_key else []


def validate_topic_config(configs):
    """Typed copy of a topic config dict being created or altered; ConfigError (-> INVALID_CONFIG 40) names the
    offending key: an unknown name, a bad value, or a value other than the default of a key kbroker cannot honour
    (``effect`` "refused-unless-default"). A set no-effect key is accepted and logged as a warning."""
    out = _parse_topic_config(configs)
    for name, value in out.items():
        tkey = TOPIC_CONFIGS[name]
        kind, reason = effect_of(tkey)
        if kind == REFUSED_UNLESS_DEFAULT and value != _kafka_default(tkey):
            raise _invalid(name, configs[name], "only the default (%s) is accepted: %s"
                           % (format_default(_kafka_default(tkey)), reason))
        if kind == NO_EFFECT:
            log.warning("The topic configuration '%s' has no effect in kbroker: %s", name, reason)
    return out


ConfigEntry = namedtuple("ConfigEntry", "name value source")


def effective_topic_config(broker_cfg, overrides):
    """{topic key: ConfigEntry(name, typed value, source)} for every topic key (DescribeConfigs)."""
    # Stored overrides are only parsed, not refused: a topic written before a key was refused keeps loading.
    typed = _parse_topic_config(overrides)
    out = {}
    for tkey in _TOPIC_KEYS:
        if tkey.name in typed:
            out[tkey.name] = ConfigEntry(tkey.name, typed[tkey.name], TOPIC_CONFIG)
            continue
        feeders = _DERIVED_SOURCES.get(tkey.name, (tkey.broker_key,) if tkey.broker_key else ())
        source = STATIC_BROKER_CONFIG if any(broker_cfg.is_set(k) for k in feeders) else DEFAULT_CONFIG
        given = {broker_cfg.sources.get(k) for k in feeders}
        for dynamic, name in _DYNAMIC_SOURCES:
            if dynamic in given:
                source = name
                break
        out[tkey.name] = ConfigEntry(tkey.name, _broker_default(broker_cfg, tkey), source)
    return out


def log_config_for(broker_cfg, overrides):
    """Keyword arguments for ``kbroker.log.config.LogConfig`` (snake_case topic keys, typed values).

    LogConfig's conventions apply: ``cleanup_policy`` is the comma string ("compact,delete") and
    ``flush_interval_ms`` of Long.MAX (never flush by time) is None. Only LogConfig's fields are returned: the
    topic keys without one (``message.format.version``, ``max.compaction.lag.ms``, the throttle lists) are not
    per-log state (their ``effect`` says what kbroker does with them).
    """
    kwargs = {}
    for name, entry in effective_topic_config(broker_cfg, overrides).items():
        field = TOPIC_CONFIGS[name].field
        if field in _LOG_FIELDS:
            kwargs[field] = entry.value
    kwargs["cleanup_policy"] = ",".join(kwargs["cleanup_policy"])
    if kwargs["flush_interval_ms"] == LONG_MAX:
        kwargs["flush_interval_ms"] = None
    return kwargs
