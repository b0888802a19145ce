"""Broker configuration: Kafka's key names, Kafka's defaults, typed and validated up front.

Sources, applied in order (later wins): built-in defaults < config file < ``--override key=value``.

* ``server.properties`` uses ``java.util.Properties`` syntax: ``#``/``!`` comment lines, ``key=value``,
  ``key: value`` or ``key value``; a line ending in an odd number of backslashes continues on the next line
  (leading whitespace of the continuation is dropped); escapes ``\\t \\n \\r \\f \\uXXXX`` and ``\\<any>`` = that char.
  Kafka reads the file as ISO-8859-1; kbroker decodes UTF-8 when the bytes are valid UTF-8 (identical for ASCII
  files) and falls back to ISO-8859-1 otherwise. Later duplicates win. Values are trimmed like Kafka's ConfigDef.
* ``.yaml``/``.yml`` holds a flat mapping of Kafka keys, or nested mappings that flatten to dotted keys
  (``log: {retention: {hours: 1}}`` == ``log.retention.hours: 1``). Native YAML ints/bools/lists are accepted.
* Unknown keys are kept in ``BrokerConfig.unknown`` and logged once as a warning (Kafka does the same).
* An invalid value raises ``ConfigError`` naming the key, the value and what is allowed.

Defaults are Kafka 0.10.1's (``kafka_config.html``) except where this table deliberately follows modern Kafka,
each noted in the key's doc: ``delete.topic.enable`` (true, Kafka >= 1.0; 0.10.1 had false),
``message.max.bytes`` (1048588, Kafka >= 0.11 where batches carry a 61-byte header; 0.10.1 had 1000012),
``zookeeper.session.timeout.ms`` (18000, Kafka >= 2.5; 0.10.1 had 6000), ``unclean.leader.election.enable``
(false, Kafka >= 0.11; 0.10.1 had true -- silent data loss by default is not kept), and
``listener.security.protocol.map``. Keys newer than 0.10.1 use the modern default. An empty
``zookeeper.connect`` (the default here; 0.10.1 required it) selects the embedded coordination backend.

Topic-level configs (``TOPIC_CONFIGS``) map to broker keys whose *effective* values are the topic defaults; see
``validate_topic_config``, ``effective_topic_config`` and ``log_config_for``.
"""

import logging
import os
import re
import socket
from collections import namedtuple

log = logging.getLogger("kbroker.config")

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)
SHORT_MAX = 2**15 - 1
SHORT_MIN = -(2**15)
DOUBLE_MAX = 1.7976931348623157e308


class ConfigError(ValueError):
    """An invalid configuration value (message names the key, the value and what is allowed)."""

    def __init__(self, message, key=None):
        super().__init__(message)
        self.key = key


class Password:
    """A secret config value; never printed."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return "[hidden]"

    __str__ = __repr__

    def __eq__(self, other):
        return isinstance(other, Password) and other.value == self.value

    def __hash__(self):
        return hash(self.value)


# --------------------------------------------------------------------------------------------------------------
# validators


class Range:
    def __init__(self, lo=None, hi=None):
        self.lo, self.hi = lo, hi

    def check(self, value):
        if value is None:
            return True
        return (self.lo is None or value >= self.lo) and (self.hi is None or value <= self.hi)

    def describe(self):
        if self.hi is None:
            return "[%s,...]" % self.lo
        if self.lo is None:
            return "[...,%s]" % self.hi
        return "[%s,...,%s]" % (self.lo, self.hi)


class OneOf:
    def __init__(self, *choices, case_sensitive=True):
        self.choices = choices
        self.case_sensitive = case_sensitive

    def _match(self, v):
        if self.case_sensitive:
            return v in self.choices
        return v.lower() in (c.lower() for c in self.choices)

    def check(self, value):
        if value is None:
            return True
        if isinstance(value, list):
            return all(self._match(v) for v in value)
        return self._match(value)

    def describe(self):
        return "one of [%s]" % ", ".join(self.choices)


class NonEmptyListOf(OneOf):
    def check(self, value):
        return value is not None and len(value) > 0 and super().check(value)

    def describe(self):
        return "a non-empty comma-separated list of [%s]" % ", ".join(self.choices)


class Pattern:
    def __init__(self, regex, what):
        self.regex = re.compile(regex)
        self.what = what

    def check(self, value):
        if value is None:
            return True
        items = value if isinstance(value, list) else [value]
        return all(self.regex.fullmatch(v) for v in items)

    def describe(self):
        return self.what


# Kafka's version strings: "0.10.1", "0.10.1-IV2", "2.8", "3.0-IV1".
_VERSION = Pattern(r"\d+\.\d+(\.\d+)?(-IV\d+)?", "a version like 0.10.1-IV2 or 3.0")
_CLASS = Pattern(r"[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*", "a fully qualified class name")
_COMPRESSION = OneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_TIMESTAMP_TYPE = OneOf("CreateTime", "LogAppendTime")
_CLEANUP = NonEmptyListOf("compact", "delete")
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


# --------------------------------------------------------------------------------------------------------------
# the table

ConfigKey = namedtuple("ConfigKey", "name type default validator importance doc")

_TYPE_BOUNDS = {"int": (INT_MIN, INT_MAX), "long": (LONG_MIN, LONG_MAX), "short": (SHORT_MIN, SHORT_MAX)}


def _k(name, type_, default, validator=None, importance="medium", doc=""):
    return ConfigKey(name, type_, default, validator, importance, doc)


H, M, L = "high", "medium", "low"

_KEYS = [
    # -- identity and listeners
    _k("broker.id", "int", -1, Range(-1), H, "Broker id; -1 = generate one from /brokers/seqid (> reserved.broker.max.id)"),
    _k("broker.id.generation.enable", "bool", True, None, M, "Allow broker.id=-1 (auto-generated ids)"),
    _k("reserved.broker.max.id", "int", 1000, Range(0), M, "Largest id a user may set; generated ids start above it"),
    _k("broker.rack", "string", None, None, M, "Rack of this broker (rack-aware replica assignment)"),
    _k("listeners", "string", None, None, H,
       "Comma list NAME://host:port; empty host = all interfaces. Default PLAINTEXT://<host.name>:<port>"),
    _k("advertised.listeners", "string", None, None, H,
       "Listeners published in /brokers/ids and Metadata; default = listeners (empty host = this machine's name)"),
    _k("listener.security.protocol.map", "string",
       "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", None, M,
       "Listener name -> security protocol (Kafka >= 0.11 key; modern default)"),
    _k("inter.broker.listener.name", "string", None, None, M, "Listener used between brokers (Kafka >= 0.11)"),
    _k("security.inter.broker.protocol", "string", "PLAINTEXT", OneOf(*_PROTOCOLS), M,
       "Security protocol between brokers"),
    _k("host.name", "string", "", None, H, "Legacy: host of the default listener when listeners is unset"),
    _k("port", "int", 9092, Range(0, 65535), H, "Legacy: port of the default listener when listeners is unset"),
    _k("advertised.host.name", "string", None, None, H, "Legacy: advertised host when advertised.listeners is unset"),
    _k("advertised.port", "int", None, Range(0, 65535), H, "Legacy: advertised port when advertised.listeners is unset"),
    # -- log storage
    _k("log.dir", "string", "/tmp/kafka-logs", None, H, "Log directory, used when log.dirs is unset"),
    _k("log.dirs", "string", None, None, H, "Comma list of log directories (overrides log.dir)"),
    _k("num.partitions", "int", 1, Range(1), M, "Partitions of auto-created topics"),
    _k("default.replication.factor", "int", 1, Range(1), M,
       "Replication factor of auto-created topics (kbroker refuses < 1; Kafka has no check)"),
    _k("auto.create.topics.enable", "bool", True, None, H, "Create unknown topics on Metadata/Produce"),
    _k("delete.topic.enable", "bool", True, None, H,
       "Allow topic deletion. Default true as Kafka >= 1.0; Kafka 0.10.1 had false (deletes were only marked)"),
    _k("log.segment.bytes", "int", 1073741824, Range(14), H, "Maximum segment file size"),
    _k("log.roll.ms", "long", None, Range(1), H, "Roll a segment after this age; overrides log.roll.hours"),
    _k("log.roll.hours", "int", 168, Range(1), H, "Roll a segment after this many hours"),
    _k("log.roll.jitter.ms", "long", None, Range(0), H, "Random jitter subtracted from the roll time (ms)"),
    _k("log.roll.jitter.hours", "int", 0, Range(0), H, "Roll jitter in hours, when log.roll.jitter.ms is unset"),
    _k("log.retention.ms", "long", None, Range(-1), H,
       "Retention time; precedence ms > minutes > hours; -1 = unlimited"),
    _k("log.retention.minutes", "int", None, Range(-1), H, "Retention time in minutes (see log.retention.ms)"),
    _k("log.retention.hours", "int", 168, Range(-1), H, "Retention time in hours (see log.retention.ms)"),
    _k("log.retention.bytes", "long", -1, None, H, "Maximum partition size before old segments go; -1 = unlimited"),
    _k("log.retention.check.interval.ms", "long", 300000, Range(1), M, "How often retention runs"),
    _k("log.flush.interval.messages", "long", LONG_MAX, Range(1), H, "fsync after this many appended messages"),
    _k("log.flush.interval.ms", "long", None, Range(0), H,
       "fsync when the oldest unflushed data is this old; default = log.flush.scheduler.interval.ms"),
    _k("log.flush.scheduler.interval.ms", "long", LONG_MAX, Range(0), H, "How often the flusher checks logs"),
    _k("log.flush.offset.checkpoint.interval.ms", "int", 60000, Range(0), H,
       "How often recovery-point-offset-checkpoint is written"),
    _k("log.flush.start.offset.checkpoint.interval.ms", "int", 60000, Range(0), H,
       "How often log-start-offset-checkpoint is written (Kafka >= 0.11)"),
    _k("log.index.size.max.bytes", "int", 10485760, Range(4), M, "Preallocated size of each offset/time index"),
    _k("log.index.interval.bytes", "int", 4096, Range(0), M, "Bytes between offset index entries"),
    _k("log.segment.delete.delay.ms", "long", 60000, Range(0), H, "Delay before a deleted segment's files go"),
    _k("log.preallocate", "bool", False, None, M, "Preallocate new segment files"),
    _k("log.cleanup.policy", "list", ["delete"], _CLEANUP, M, "delete and/or compact"),
    _k("log.cleaner.enable", "bool", True, None, M, "Run the log cleaner (needed for compacted topics)"),
    _k("log.cleaner.threads", "int", 1, Range(0), M, "Cleaner threads"),
    _k("log.cleaner.dedupe.buffer.size", "long", 134217728, Range(0), M, "Memory for the cleaner's key map"),
    _k("log.cleaner.io.buffer.size", "int", 524288, Range(0), M, "Cleaner I/O buffer size"),
    _k("log.cleaner.io.buffer.load.factor", "double", 0.9, Range(0.0, 1.0), M, "Key map load factor"),
    _k("log.cleaner.io.max.bytes.per.second", "double", DOUBLE_MAX, Range(0.0), M, "Cleaner I/O throttle"),
    _k("log.cleaner.min.cleanable.ratio", "double", 0.5, Range(0.0, 1.0), M,
       "Clean a log once dirty/total bytes reaches this"),
    _k("log.cleaner.delete.retention.ms", "long", 86400000, Range(0), M, "How long delete markers are kept"),
    _k("log.cleaner.min.compaction.lag.ms", "long", 0, Range(0), M, "Messages younger than this are not compacted"),
    _k("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, Range(1), M,
       "Messages older than this become eligible regardless of ratio (Kafka >= 2.3)"),
    _k("log.cleaner.backoff.ms", "long", 15000, Range(0), M, "Sleep when there is nothing to clean"),
    _k("log.message.timestamp.type", "string", "CreateTime", _TIMESTAMP_TYPE, M, "CreateTime or LogAppendTime"),
    _k("log.message.timestamp.difference.max.ms", "long", LONG_MAX, Range(0), M,
       "Max |broker time - message timestamp| for CreateTime"),
    _k("log.message.format.version", "string", "3.0-IV1", _VERSION, M,
       "Accepted for compatibility; kbroker always stores record batches v2"),
    _k("inter.broker.protocol.version", "string", "3.0-IV1", _VERSION, M, "Accepted for compatibility"),
    _k("num.recovery.threads.per.data.dir", "int", 1, Range(1), H, "Log recovery workers per directory"),
    _k("message.max.bytes", "int", 1048588, Range(0), H,
       "Largest record batch accepted. Modern default 1048588 (1 MiB + 12-byte log overhead); 0.10.1 had 1000012"),
    _k("compression.type", "string", "producer", _COMPRESSION, H, "Compression of stored batches; producer = keep"),
    # -- network
    _k("socket.request.max.bytes", "int", 104857600, Range(1), H, "Largest request accepted"),
    _k("socket.send.buffer.bytes", "int", 102400, Range(-1), H, "SO_SNDBUF; -1 = OS default"),
    _k("socket.receive.buffer.bytes", "int", 102400, Range(-1), H, "SO_RCVBUF; -1 = OS default"),
    _k("num.network.threads", "int", 3, Range(1), H, "Network workers (greenlet pool sizing)"),
    _k("num.io.threads", "int", 8, Range(1), H, "Request handler workers"),
    _k("background.threads", "int", 10, Range(1), H, "Background task workers"),
    _k("queued.max.requests", "int", 500, Range(1), H, "Requests queued before the network layer blocks"),
    _k("connections.max.idle.ms", "long", 600000, None, M, "Close connections idle this long"),
    _k("max.connections.per.ip", "int", INT_MAX, Range(0), M, "Connection cap per client address"),
    _k("max.connections.per.ip.overrides", "string", "", None, M, "host:count comma list"),
    _k("request.timeout.ms", "int", 30000, Range(0), H, "Inter-broker request timeout"),
    _k("fetch.max.bytes", "int", 57671680, Range(1024), M, "Largest Fetch response (Kafka >= 2.5 broker key)"),
    # -- coordination
    _k("zookeeper.connect", "string", "", None, H,
       "host:port[,host:port][/chroot]; empty = embedded single-node coordination (kbroker)"),
    _k("zookeeper.session.timeout.ms", "int", 18000, Range(1), H,
       "ZooKeeper session timeout (modern default 18000; 0.10.1 had 6000)"),
    _k("zookeeper.connection.timeout.ms", "int", None, Range(1), H,
       "Max wait for a connection; default = zookeeper.session.timeout.ms"),
    _k("zookeeper.set.acl", "bool", False, None, H, "Create znodes with broker-only write ACLs"),
    _k("zookeeper.sync.time.ms", "int", 2000, None, L, "Accepted for compatibility"),
    # -- group and transaction coordinators
    _k("offsets.topic.num.partitions", "int", 50, Range(1), H, "Partitions of __consumer_offsets"),
    _k("offsets.topic.replication.factor", "short", 3, Range(1), H,
       "Replication of __consumer_offsets (capped to live brokers on creation)"),
    _k("offsets.topic.segment.bytes", "int", 104857600, Range(1), H, "Segment size of __consumer_offsets"),
    _k("offsets.topic.compression.codec", "int", 0, Range(0, 4), H, "Compression of offset commits"),
    _k("offsets.retention.minutes", "int", 1440, Range(1), H,
       "Committed offsets of empty groups expire after this (0.10.1 default; Kafka >= 2.0 uses 10080)"),
    _k("offsets.retention.check.interval.ms", "long", 600000, Range(1), H, "Offset expiration check period"),
    _k("offsets.commit.timeout.ms", "int", 5000, Range(1), H, "Wait for offset commit replication"),
    _k("offsets.commit.required.acks", "short", -1, None, H, "acks for offset commits"),
    _k("offsets.load.buffer.size", "int", 5242880, Range(1), H, "Read size when loading offsets"),
    _k("offset.metadata.max.bytes", "int", 4096, None, H, "Max offset commit metadata length"),
    _k("group.min.session.timeout.ms", "int", 6000, None, M, "Smallest session timeout a member may ask for"),
    _k("group.max.session.timeout.ms", "int", 300000, None, M,
       "Largest session timeout a member may ask for (0.10.1 default; Kafka >= 2.0 uses 1800000)"),
    _k("group.initial.rebalance.delay.ms", "int", 3000, Range(0), M,
       "Wait for more members before the first rebalance of an empty group (Kafka >= 0.11)"),
    _k("transactional.id.expiration.ms", "int", 604800000, Range(1), H, "Idle transactional ids expire"),
    _k("transaction.max.timeout.ms", "int", 900000, Range(1), H, "Largest transaction timeout allowed"),
    _k("transaction.state.log.num.partitions", "int", 50, Range(1), H, "Partitions of __transaction_state"),
    _k("transaction.state.log.replication.factor", "short", 3, Range(1), H, "Replication of __transaction_state"),
    _k("transaction.state.log.min.isr", "int", 2, Range(1), H, "min.insync.replicas of __transaction_state"),
    _k("transaction.state.log.segment.bytes", "int", 104857600, Range(1), H, "Segment size of __transaction_state"),
    _k("producer.id.expiration.ms", "int", 86400000, Range(1), L, "Idle producer ids expire (Kafka >= 2.8)"),
    # -- replication
    _k("min.insync.replicas", "int", 1, Range(1), H, "ISR size needed for acks=all"),
    _k("unclean.leader.election.enable", "bool", False, None, H,
       "Elect an out-of-sync replica when no ISR member lives. Default false (Kafka >= 0.11); 0.10.1 had true"),
    _k("replica.lag.time.max.ms", "long", 10000, None, H, "Followers not caught up for this long leave the ISR"),
    _k("replica.fetch.min.bytes", "int", 1, None, H, "Follower fetch min_bytes"),
    _k("replica.fetch.wait.max.ms", "int", 500, None, H, "Follower fetch max_wait"),
    _k("replica.fetch.max.bytes", "int", 1048576, Range(0), M, "Follower fetch bytes per partition"),
    _k("replica.fetch.response.max.bytes", "int", 10485760, Range(0), M, "Follower fetch response size"),
    _k("replica.fetch.backoff.ms", "int", 1000, Range(0), M, "Sleep after a follower fetch error"),
    _k("replica.socket.timeout.ms", "int", 30000, None, H, "Follower socket timeout"),
    _k("replica.socket.receive.buffer.bytes", "int", 65536, None, H, "Follower SO_RCVBUF"),
    _k("replica.high.watermark.checkpoint.interval.ms", "long", 5000, None, H,
       "How often replication-offset-checkpoint is written"),
    _k("num.replica.fetchers", "int", 1, Range(1), H, "Fetcher workers per source broker"),
    _k("controlled.shutdown.enable", "bool", True, None, M, "Move leadership away before stopping"),
    _k("controlled.shutdown.max.retries", "int", 3, None, M, "Controlled shutdown attempts"),
    _k("controlled.shutdown.retry.backoff.ms", "long", 5000, None, M, "Wait between attempts"),
    _k("controller.socket.timeout.ms", "int", 30000, None, M, "Controller-to-broker socket timeout"),
    _k("auto.leader.rebalance.enable", "bool", True, None, H, "Move leadership back to preferred replicas"),
    _k("leader.imbalance.check.interval.seconds", "long", 300, None, H, "Rebalance check period"),
    _k("leader.imbalance.per.broker.percentage", "int", 10, None, H, "Imbalance ratio that triggers a rebalance"),
    _k("fetch.purgatory.purge.interval.requests", "int", 1000, None, M, "Accepted for compatibility"),
    _k("producer.purgatory.purge.interval.requests", "int", 1000, None, M, "Accepted for compatibility"),
    # -- quotas
    _k("quota.producer.default", "long", LONG_MAX, Range(1), H, "Default produce byte rate per client-id"),
    _k("quota.consumer.default", "long", LONG_MAX, Range(1), H, "Default fetch byte rate per client-id"),
    _k("quota.window.num", "int", 11, Range(1), L, "Quota sample windows"),
    _k("quota.window.size.seconds", "int", 1, Range(1), L, "Quota sample window length"),
    _k("replication.quota.window.num", "int", 11, Range(1), L, "Replication quota windows"),
    _k("replication.quota.window.size.seconds", "int", 1, Range(1), L, "Replication quota window length"),
    # -- security
    _k("authorizer.class.name", "string", "", None, L, "Authorizer class; empty = no authorization"),
    _k("super.users", "string", None, None, L, "Semicolon list of principals allowed everything"),
    _k("allow.everyone.if.no.acl.found", "bool", False, None, L, "Allow access to resources without ACLs"),
    _k("principal.builder.class", "class", None, _CLASS, M, "Principal builder class"),
    _k("sasl.enabled.mechanisms", "list", ["GSSAPI"], None, M, "SASL mechanisms offered"),
    _k("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI", None, M, "SASL mechanism between brokers"),
    _k("sasl.kerberos.service.name", "string", None, None, M, "Kerberos service name"),
    _k("ssl.keystore.type", "string", "JKS", None, M, "Keystore format"),
    _k("ssl.keystore.location", "string", None, None, H, "Keystore path"),
    _k("ssl.keystore.password", "password", None, None, H, "Keystore password"),
    _k("ssl.key.password", "password", None, None, H, "Private key password"),
    _k("ssl.truststore.type", "string", "JKS", None, M, "Truststore format"),
    _k("ssl.truststore.location", "string", None, None, H, "Truststore path"),
    _k("ssl.truststore.password", "password", None, None, H, "Truststore password"),
    _k("ssl.client.auth", "string", "none", OneOf("required", "requested", "none"), M, "Client certificates"),
    _k("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"], None, M, "TLS versions (modern default)"),
    _k("ssl.protocol", "string", "TLSv1.3", None, M, "TLS protocol (modern default)"),
    _k("ssl.cipher.suites", "list", [], None, L, "Cipher suites; empty = library default"),
    _k("ssl.endpoint.identification.algorithm", "string", "https", None, L, "Hostname verification (modern)"),
    # -- metrics
    _k("metric.reporters", "list", [], None, L, "Metric reporter classes"),
    _k("metrics.num.samples", "int", 2, Range(1), L, "Metric samples"),
    _k("metrics.sample.window.ms", "long", 30000, Range(1), L, "Metric sample window"),
]

CONFIG_KEYS = {k.name: k for k in _KEYS}


# --------------------------------------------------------------------------------------------------------------
# value parsing


def _fmt_value(v):
    if isinstance(v, Password):
        return "[hidden]"
    return repr(v)


def _invalid(key, value, why):
    return ConfigError("Invalid value %s for configuration %s: %s" % (_fmt_value(value), key, why), key)


def parse_value(key, type_, raw, validator=None):
    """Convert ``raw`` (a string, or a native YAML value) to ``type_`` and validate it. None stays None."""
    if raw is None:
        return None
    value = _convert(key, type_, raw)
    if validator is not None and not validator.check(value):
        raise _invalid(key, raw, "must be %s" % validator.describe())
    return value


def _convert(key, type_, raw):
    if type_ in ("int", "long", "short"):
        lo, hi = _TYPE_BOUNDS[type_]
        if isinstance(raw, bool):
            raise _invalid(key, raw, "not a number of type %s" % type_)
        if isinstance(raw, int):
            v = raw
        else:
            s = str(raw).strip()
            if not re.fullmatch(r"[+-]?\d+", s):
                raise _invalid(key, raw, "not a number of type %s" % type_)
            v = int(s)
        if not lo <= v <= hi:
            raise _invalid(key, raw, "out of range for type %s [%d,...,%d]" % (type_, lo, hi))
        return v
    if type_ == "double":
        if isinstance(raw, bool):
            raise _invalid(key, raw, "not a number of type double")
        if isinstance(raw, (int, float)):
            return float(raw)
        try:
            v = float(str(raw).strip())
        except ValueError:
            raise _invalid(key, raw, "not a number of type double") from None
        if v != v:
            raise _invalid(key, raw, "not a number of type double")
        return v
    if type_ == "bool":
        if isinstance(raw, bool):
            return raw
        s = str(raw).strip().lower()
        if s == "true":
            return True
        if s == "false":
            return False
        raise _invalid(key, raw, "expected true or false")
    if type_ == "list":
        if isinstance(raw, (list, tuple)):
            return [str(x).strip() for x in raw if str(x).strip()]
        s = str(raw).strip()
        return [p.strip() for p in s.split(",") if p.strip()] if s else []
    if type_ == "password":
        return raw if isinstance(raw, Password) else Password(str(raw).strip())
    if type_ in ("string", "class"):
        if isinstance(raw, bool):
            return "true" if raw else "false"
        return str(raw).strip()
    raise ConfigError("unknown config type %r for %s" % (type_, key), key)


def format_value(value):
    """Kafka's string form of a typed value (DescribeConfigs, --check-config, /config znodes)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    if isinstance(value, Password):
        return value.value
    if isinstance(value, float):
        return repr(value)
    return str(value)


# --------------------------------------------------------------------------------------------------------------
# file formats


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s):
    out = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= n:
            break  # a lone trailing backslash vanishes, as in java.util.Properties
        c = s[i]
        if c == "u":
            hexdigits = s[i + 1:i + 5]
            if len(hexdigits) != 4 or not re.fullmatch(r"[0-9a-fA-F]{4}", hexdigits):
                raise ConfigError("Malformed \\uxxxx escape in %r" % s)
            out.append(chr(int(hexdigits, 16)))
            i += 5
            continue
        out.append(_ESCAPES.get(c, c))
        i += 1
    return "".join(out)


def _logical_lines(text):
    """Join continuation lines; skip blank and comment lines (a comment line never continues)."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(" \t\f")
            i += 1
        if _continues(line):
            line = line[:-1]
        yield line


def _continues(line):
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def parse_properties(text):
    """Parse java.util.Properties text into an ordered dict (later duplicates win)."""
    props = {}
    for line in _logical_lines(text):
        # the key ends at the first unescaped '=', ':' or whitespace
        i, n = 0, len(line)
        while i < n:
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c in "=: \t\f":
                break
            i += 1
        key = line[:i]
        # separator: optional whitespace, then at most one of '=' / ':', then optional whitespace
        j = i
        while j < n and line[j] in " \t\f":
            j += 1
        if j < n and line[j] in "=:":
            j += 1
            while j < n and line[j] in " \t\f":
                j += 1
        props[_unescape(key)] = _unescape(line[j:])
    return props


def flatten_mapping(mapping, prefix=""):
    """``{"log": {"retention": {"hours": 1}}}`` -> ``{"log.retention.hours": 1}``."""
    flat = {}
    for k, v in mapping.items():
        name = "%s.%s" % (prefix, k) if prefix else str(k)
        if isinstance(v, dict):
            flat.update(flatten_mapping(v, name))
        else:
            flat[name] = v
    return flat


def load_file(path):
    """Read a properties or YAML file into a flat {key: raw value} dict."""
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith((".yaml", ".yml")):
        import yaml

        try:
            doc = yaml.safe_load(data)
        except yaml.YAMLError as e:
            raise ConfigError("Cannot parse YAML config %s: %s" % (path, e)) from None
        if doc is None:
            return {}
        if not isinstance(doc, dict):
            raise ConfigError("YAML config %s must be a mapping of Kafka config keys" % path)
        return flatten_mapping(doc)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    return parse_properties(text)


def parse_override(s):
    """``key=value`` (split on the first '='; Kafka splits on every '=' and refuses values containing one)."""
    key, sep, value = s.partition("=")
    if not sep or not key.strip():
        raise ConfigError("Invalid override %r: expected key=value" % s)
    return key.strip(), value


# --------------------------------------------------------------------------------------------------------------
# listeners

Listener = namedtuple("Listener", "name host port")

_LISTENER_RE = re.compile(r"([A-Za-z0-9_]+)://(\[[0-9A-Fa-f:.]+\]|[^:/\[\]]*):(-?\d+)")


def parse_listeners(key, value):
    """``PLAINTEXT://:9092,SSL://[::1]:9093`` -> [Listener("PLAINTEXT", "", 9092), Listener("SSL", "::1", 9093)]."""
    out = []
    if value is None:
        return out
    for item in (p.strip() for p in value.split(",")):
        if not item:
            continue
        m = _LISTENER_RE.fullmatch(item)
        if not m:
            raise _invalid(key, value, "%r is not NAME://host:port (e.g. PLAINTEXT://:9092)" % item)
        name, host, port = m.group(1).upper(), m.group(2), int(m.group(3))
        if host.startswith("["):
            host = host[1:-1]
        if not 0 <= port <= 65535:
            raise _invalid(key, value, "port %d of %r is not in [0,...,65535]" % (port, item))
        if any(l.name == name for l in out):
            raise _invalid(key, value, "listener name %s appears more than once" % name)
        out.append(Listener(name, host, port))
    return out


def parse_protocol_map(key, value):
    out = {}
    for item in (p.strip() for p in (value or "").split(",")):
        if not item:
            continue
        name, sep, proto = item.partition(":")
        name, proto = name.strip().upper(), proto.strip().upper()
        if not sep or not name or proto not in _PROTOCOLS:
            raise _invalid(key, value, "%r must be NAME:PROTOCOL with PROTOCOL one of [%s]"
                           % (item, ", ".join(_PROTOCOLS)))
        out[name] = proto
    return out


_ZK_CONNECT = re.compile(r"[^,/\s]+:\d+(,[^,/\s]+:\d+)*(/[^\s]*)?")


# --------------------------------------------------------------------------------------------------------------
# the config object


class BrokerConfig:
    """Typed broker config. ``cfg["log.segment.bytes"]``, ``cfg.get(key, default)``, derived helpers below.

    ``sources[key]`` is "default", "file" or "override" (for --check-config); ``unknown`` holds unknown keys with
    their raw values; ``originals`` the explicitly supplied raw values of known keys.
    """

    def __init__(self, props=None, sources=None):
        self._values = {}
        self.sources = {}
        self.originals = {}
        self.unknown = {}
        props = dict(props or {})
        sources = sources or {}
        for name, raw in props.items():
            if name not in CONFIG_KEYS:
                self.unknown[name] = raw
        for name in sorted(self.unknown):
            log.warning("The configuration '%s' was supplied but isn't a known config.", name)
        for key in _KEYS:
            if key.name in props:
                raw = props[key.name]
                self.originals[key.name] = raw
                self.sources[key.name] = sources.get(key.name, "file")
                if isinstance(raw, str) and raw.strip() == "" and key.default is None:
                    raw = None  # "log.retention.ms=" means unset, like Kafka's null default
                self._values[key.name] = parse_value(key.name, key.type, raw, key.validator)
            else:
                self.sources[key.name] = "default"
                d = key.default
                self._values[key.name] = list(d) if isinstance(d, list) else d
        self._validate()

    # -- construction ---------------------------------------------------------------------------------------------

    @classmethod
    def from_sources(cls, path=None, overrides=()):
        props, sources = {}, {}
        if path is not None:
            if not os.path.exists(path):
                raise ConfigError("Config file %s does not exist" % path)
            for k, v in load_file(path).items():
                props[k] = v
                sources[k] = "file"
        for s in overrides or ():
            k, v = parse_override(s)
            props[k] = v
            sources[k] = "override"
        return cls(props, sources)

    @classmethod
    def from_dict(cls, props):
        return cls(props, {k: "override" for k in props})

    # -- access ---------------------------------------------------------------------------------------------------

    def __getitem__(self, key):
        try:
            return self._values[key]
        except KeyError:
            raise KeyError("unknown config key %r" % key) from None

    def __contains__(self, key):
        return key in self._values

    def get(self, key, default=None):
        return self._values.get(key, default)

    def items(self):
        return self._values.items()

    def is_set(self, key):
        """True when the key was given explicitly (file or override)."""
        return self.sources.get(key, "default") != "default"

    def describe(self):
        """[(key, string value, source)] sorted by key; passwords hidden (for --check-config)."""
        rows = []
        for name in sorted(self._values):
            v = self._values[name]
            shown = "[hidden]" if isinstance(v, Password) else format_value(v)
            rows.append((name, shown, self.sources[name]))
        return rows

    # -- derived values -------------------------------------------------------------------------------------------

    @property
    def log_dirs(self):
        raw = self["log.dirs"] if self["log.dirs"] is not None else self["log.dir"]
        return [p.strip() for p in raw.split(",") if p.strip()]

    @property
    def retention_ms(self):
        """log.retention.ms > minutes > hours; any negative value = -1 (unlimited)."""
        if self["log.retention.ms"] is not None:
            ms = self["log.retention.ms"]
        elif self["log.retention.minutes"] is not None:
            ms = self["log.retention.minutes"] * 60000
        else:
            ms = self["log.retention.hours"] * 3600000
        return -1 if ms < 0 else ms

    @property
    def roll_ms(self):
        if self["log.roll.ms"] is not None:
            return self["log.roll.ms"]
        return self["log.roll.hours"] * 3600000

    @property
    def roll_jitter_ms(self):
        if self["log.roll.jitter.ms"] is not None:
            return self["log.roll.jitter.ms"]
        return self["log.roll.jitter.hours"] * 3600000

    @property
    def flush_interval_ms(self):
        v = self["log.flush.interval.ms"]
        return v if v is not None else self["log.flush.scheduler.interval.ms"]

    @property
    def zk_connection_timeout_ms(self):
        v = self["zookeeper.connection.timeout.ms"]
        return v if v is not None else self["zookeeper.session.timeout.ms"]

    @property
    def listener_security_protocol_map(self):
        return parse_protocol_map("listener.security.protocol.map", self["listener.security.protocol.map"])

    @property
    def listeners(self):
        if self["listeners"] is not None and self["listeners"].strip():
            return parse_listeners("listeners", self["listeners"])
        return [Listener("PLAINTEXT", self["host.name"] or "", self["port"])]

    @property
    def advertised_listeners(self):
        """Published endpoints; an empty or wildcard-less empty host becomes this machine's name."""
        if self["advertised.listeners"] is not None and self["advertised.listeners"].strip():
            eps = parse_listeners("advertised.listeners", self["advertised.listeners"])
        elif not self.is_set("listeners") and (self["advertised.host.name"] is not None
                                               or self["advertised.port"] is not None):
            host = self["advertised.host.name"] if self["advertised.host.name"] is not None else self["host.name"]
            port = self["advertised.port"] if self["advertised.port"] is not None else self["port"]
            eps = [Listener("PLAINTEXT", host, port)]
        else:
            eps = self.listeners
        return [Listener(l.name, l.host or socket.getfqdn(), l.port) for l in eps]

    @property
    def inter_broker_listener(self):
        """Listener name brokers use to reach each other: inter.broker.listener.name, else the first listener
        whose security protocol is security.inter.broker.protocol (Kafka's rule)."""
        if self["inter.broker.listener.name"]:
            return self["inter.broker.listener.name"]
        pmap = self.listener_security_protocol_map
        want = self["security.inter.broker.protocol"]
        for l in self.listeners:
            if pmap.get(l.name, l.name) == want:
                return l.name
        return self.listeners[0].name

    @property
    def embedded(self):
        return not (self["zookeeper.connect"] or "").strip()

    @property
    def security_protocol_of(self):
        """Listener name -> security protocol, for the configured listeners."""
        m = self.listener_security_protocol_map
        return {l.name: m[l.name] for l in self.listeners}

    # -- cross-key validation --------------------------------------------------------------------------------------

    def _validate(self):
        pmap = self.listener_security_protocol_map
        listeners = self.listeners
        for l in listeners:
            if l.name not in pmap:
                raise _invalid("listeners", self["listeners"],
                               "listener name %s is not in listener.security.protocol.map (%s)"
                               % (l.name, ", ".join(sorted(pmap))))
        names = {l.name for l in listeners}
        if self["advertised.listeners"] is not None and self["advertised.listeners"].strip():
            adv = parse_listeners("advertised.listeners", self["advertised.listeners"])
            for l in adv:
                if l.name not in names:
                    raise _invalid("advertised.listeners", self["advertised.listeners"],
                                   "listener name %s is not one of listeners (%s)" % (l.name, ", ".join(sorted(names))))
                if l.host == "0.0.0.0":
                    raise _invalid("advertised.listeners", self["advertised.listeners"],
                                   "0.0.0.0 is not a routable address; name a host clients can reach")
        elif any(l.host in ("0.0.0.0", "::") for l in listeners):
            raise _invalid("advertised.listeners", None,
                           "must be set when listeners binds the wildcard address (%s); clients cannot connect to "
                           "0.0.0.0" % self["listeners"])
        ibl = self["inter.broker.listener.name"]
        if ibl is not None and ibl.upper() not in names:
            raise _invalid("inter.broker.listener.name", ibl,
                           "must be one of the listeners (%s)" % ", ".join(sorted(names)))
        bid = self["broker.id"]
        if bid < 0 and not self["broker.id.generation.enable"]:
            raise _invalid("broker.id", bid, "must be >= 0 when broker.id.generation.enable is false")
        if bid >= 0 and self["broker.id.generation.enable"] and bid > self["reserved.broker.max.id"]:
            raise _invalid("broker.id", bid, "must be <= reserved.broker.max.id (%d) while broker.id.generation."
                           "enable is true" % self["reserved.broker.max.id"])
        if not self.log_dirs:
            raise _invalid("log.dirs", self["log.dirs"], "at least one directory is required")
        zk = (self["zookeeper.connect"] or "").strip()
        if zk and not _ZK_CONNECT.fullmatch(zk):
            raise _invalid("zookeeper.connect", zk, "expected host:port[,host:port...][/chroot], or empty for embedded")
        if self["group.min.session.timeout.ms"] > self["group.max.session.timeout.ms"]:
            raise _invalid("group.min.session.timeout.ms", self["group.min.session.timeout.ms"],
                           "must be <= group.max.session.timeout.ms (%d)" % self["group.max.session.timeout.ms"])


# --------------------------------------------------------------------------------------------------------------
# topic-level configs

TopicKey = namedtuple("TopicKey", "name type validator broker_key field doc")

DEFAULT_CONFIG = "DEFAULT_CONFIG"
STATIC_BROKER_CONFIG = "STATIC_BROKER_CONFIG"
TOPIC_CONFIG = "TOPIC_CONFIG"
# DescribeConfigs v1+ config_source codes
CONFIG_SOURCE_CODES = {TOPIC_CONFIG: 1, STATIC_BROKER_CONFIG: 4, DEFAULT_CONFIG: 5}


def _t(name, type_, validator, broker_key, doc, field=None):
    return TopicKey(name, type_, validator, broker_key, field or name.replace(".", "_"), doc)


_TOPIC_KEYS = [
    _t("cleanup.policy", "list", _CLEANUP, "log.cleanup.policy", "delete and/or compact"),
    _t("compression.type", "string", _COMPRESSION, "compression.type", "Stored compression; producer = keep"),
    _t("delete.retention.ms", "long", Range(0), "log.cleaner.delete.retention.ms", "Delete marker lifetime"),
    _t("file.delete.delay.ms", "long", Range(0), "log.segment.delete.delay.ms", "Delay before segment files go"),
    _t("flush.messages", "long", Range(1), "log.flush.interval.messages", "fsync every N messages",
       field="flush_interval_messages"),
    _t("flush.ms", "long", Range(0), "log.flush.interval.ms", "fsync after this many ms", field="flush_interval_ms"),
    _t("index.interval.bytes", "int", Range(0), "log.index.interval.bytes", "Bytes between index entries"),
    _t("max.message.bytes", "int", Range(0), "message.max.bytes", "Largest record batch"),
    _t("message.format.version", "string", _VERSION, "log.message.format.version",
       "Accepted; batches are always stored as v2"),
    _t("message.timestamp.type", "string", _TIMESTAMP_TYPE, "log.message.timestamp.type",
       "CreateTime or LogAppendTime"),
    _t("message.timestamp.difference.max.ms", "long", Range(0), "log.message.timestamp.difference.max.ms",
       "Max timestamp skew for CreateTime"),
    _t("min.cleanable.dirty.ratio", "double", Range(0.0, 1.0), "log.cleaner.min.cleanable.ratio",
       "Dirty ratio that triggers cleaning"),
    _t("min.compaction.lag.ms", "long", Range(0), "log.cleaner.min.compaction.lag.ms", "Minimum uncompacted age"),
    _t("max.compaction.lag.ms", "long", Range(1), "log.cleaner.max.compaction.lag.ms", "Maximum uncompacted age"),
    _t("min.insync.replicas", "int", Range(1), "min.insync.replicas", "ISR size needed for acks=all"),
    _t("preallocate", "bool", None, "log.preallocate", "Preallocate segment files"),
    _t("retention.bytes", "long", None, "log.retention.bytes", "Partition size limit; -1 = unlimited"),
    _t("retention.ms", "long", Range(-1), "log.retention.ms", "Retention time; -1 = unlimited"),
    _t("segment.bytes", "int", Range(14), "log.segment.bytes", "Segment file size"),
    _t("segment.index.bytes", "int", Range(4), "log.index.size.max.bytes", "Index file size"),
    _t("segment.jitter.ms", "long", Range(0), "log.roll.jitter.ms", "Roll jitter"),
    _t("segment.ms", "long", Range(1), "log.roll.ms", "Roll segments after this age"),
    _t("unclean.leader.election.enable", "bool", None, "unclean.leader.election.enable", "Allow unclean election"),
    _t("leader.replication.throttled.replicas", "list", None, None, "partition:broker list throttled as leader"),
    _t("follower.replication.throttled.replicas", "list", None, None, "partition:broker list throttled as follower"),
]

TOPIC_CONFIGS = {k.name: k for k in _TOPIC_KEYS}

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


def validate_topic_config(configs):
    """Typed copy of a topic config dict; ConfigError (-> INVALID_CONFIG 40) names the offending key."""
    out = {}
    for name, raw in (configs or {}).items():
        tkey = TOPIC_CONFIGS.get(name)
        if tkey is None:
            raise ConfigError("Unknown topic config name: %s" % name, name)
        if raw is None:
            raise ConfigError("Invalid value None for configuration %s: a value is required" % name, name)
        out[name] = parse_value(name, tkey.type, raw, tkey.validator)
    return out


ConfigEntry = namedtuple("ConfigEntry", "name value source")


def effective_topic_config(broker_cfg, overrides):
    """{topic key: ConfigEntry(name, typed value, source)} for every topic key (DescribeConfigs)."""
    typed = validate_topic_config(overrides)
    out = {}
    for tkey in _TOPIC_KEYS:
        if tkey.name in typed:
            out[tkey.name] = ConfigEntry(tkey.name, typed[tkey.name], TOPIC_CONFIG)
            continue
        feeders = _DERIVED_SOURCES.get(tkey.name, (tkey.broker_key,) if tkey.broker_key else ())
        source = STATIC_BROKER_CONFIG if any(broker_cfg.is_set(k) for k in feeders) else DEFAULT_CONFIG
        out[tkey.name] = ConfigEntry(tkey.name, _broker_default(broker_cfg, tkey), source)
    return out


def log_config_for(broker_cfg, overrides):
    """Keyword arguments for ``kbroker.log.config.LogConfig`` (snake_case topic keys, typed values).

    LogConfig's conventions apply: ``cleanup_policy`` is the comma string ("compact,delete") and
    ``flush_interval_ms`` of Long.MAX (never flush by time) is None. When LogConfig is importable, only its
    declared fields are returned, so it may grow or omit fields freely.
    """
    kwargs = {}
    for name, entry in effective_topic_config(broker_cfg, overrides).items():
        kwargs[TOPIC_CONFIGS[name].field] = entry.value
    kwargs["cleanup_policy"] = ",".join(kwargs["cleanup_policy"])
    if kwargs["flush_interval_ms"] == LONG_MAX:
        kwargs["flush_interval_ms"] = None
    try:
        import dataclasses
        from kbroker.log.config import LogConfig
        names = {f.name for f in dataclasses.fields(LogConfig)}
    except (ImportError, TypeError):
        return kwargs
    return {k: v for k, v in kwargs.items() if k in names}
