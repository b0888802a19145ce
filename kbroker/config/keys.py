"""The broker config key table: name, type, default (Kafka's), validator, importance, doc, effect.

``effect`` says what kbroker does with the key -- one explicit classification, checked at startup
(``BrokerConfig._check_effects``) and by tests/unit/test_config.py (every "applied" key is read somewhere in
kbroker/, so no key can be silently inert):

* ``"applied"`` -- the value takes effect.
* ``"no-effect: <reason>"`` -- the key names a mechanism kbroker does not have (a Kafka thread pool, the
  purgatory, the transaction coordinator, ...); any value is accepted, and a key set explicitly gets one WARNING
  line at startup naming it and the reason. Kafka's own shipped server.properties sets some of these
  (``num.network.threads``, ``transaction.state.log.replication.factor``...), so refusing them would refuse it.
* ``"refused-unless-default: <reason>"`` -- the key's meaning applies to kbroker but is not implemented (TLS,
  SASL, ACLs, ...): the default value is accepted silently, any other value stops startup with a
  ConfigError naming the key. Nothing fails open: an operator never believes a setting holds when it does not.
"""
from collections import namedtuple

from kbroker.log.config import LogConfig

from .values import (DOUBLE_MAX, INT_MAX, LONG_MAX, OneOf, Range, _CLASS, _CLEANUP, _COMPRESSION, _PROTOCOLS,
                     _TIMESTAMP_TYPE, _VERSION)


# --------------------------------------------------------------------------------------------------------------
# effects

APPLIED = "applied"
NO_EFFECT = "no-effect"
REFUSED_UNLESS_DEFAULT = "refused-unless-default"


def no_effect(reason):
    return "%s: %s" % (NO_EFFECT, reason)


def refused_unless_default(reason):
    return "%s: %s" % (REFUSED_UNLESS_DEFAULT, reason)


# Values Kafka itself ships as the default of a key kbroker accepts only at its default, where kbroker behaves as
# that default does: naming one asks for the default behaviour, so it is accepted like the default (a configuration
# written out from a running Kafka names them; --check-config on Kafka 0.10.1's documented defaults showed it).
DEFAULT_EQUIVALENTS = {
    "principal.builder.class": (
        "org.apache.kafka.common.security.auth.DefaultPrincipalBuilder",                # Kafka 0.9 - 1.x
        "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",  # Kafka >= 3.0's default
    ),
}


def is_default(key, value):
    """True when ``value`` (typed) is the key's default or one of Kafka's equivalent defaults for it."""
    return value == key.default or value in DEFAULT_EQUIVALENTS.get(key.name, ())


def effect_of(key):
    """(kind, reason) of a ConfigKey or TopicKey: kind is APPLIED, NO_EFFECT or REFUSED_UNLESS_DEFAULT."""
    kind, _, reason = key.effect.partition(": ")
    return kind, reason


# Reasons shared by several keys (one line each in the startup warning / the ConfigError).
_PRINCIPAL_BUILDER = ("kbroker builds principals as Kafka's DefaultKafkaPrincipalBuilder does (ssl.principal.mapping.rules, "
                      "sasl.kerberos.principal.to.local.rules): a Java principal builder class cannot be loaded")
_KRB_LOGIN = ("kbroker has no Java Kerberos login thread to tune: a GSSAPI listener accepts tickets with its keytab "
              "and needs no ticket of its own, and MIT Kerberos fetches fresh client tickets from the keytab itself")
_TLS_JAVA = "kbroker's TLS is OpenSSL (Python's ssl), not Java's: %s cannot be selected"
_TLS_STATIC = "keystores are loaded once at startup (no dynamic keystore update), so there is no change to allow"
_ZK_TLS = ("kbroker's TLS to ZooKeeper does not check certificate revocation (Python's ssl has no OCSP; CRLs are not "
           "loaded)")
_LOOP = "kbroker serves every connection in a greenlet of one event loop; it has no %s thread pool to size"
_PURGATORY = ("kbroker has no purgatory to purge: a parked Fetch or acks=all Produce waits on its partition and is "
              "woken by the append or high-watermark advance that completes it")


# --------------------------------------------------------------------------------------------------------------
# the table

# Per-log defaults have one source, LogConfig's field defaults (kbroker/log/config.py); the keys feeding a topic
# config take theirs from it. Every other default is written here once.
_LOG = LogConfig()
_HOUR_MS = 3600000

ConfigKey = namedtuple("ConfigKey", "name type default validator importance doc effect")


def _k(name, type_, default, validator=None, importance="medium", doc="", effect=APPLIED):
    return ConfigKey(name, type_, default, validator, importance, doc, effect)


H, M, L = "high", "medium", "low"

_KEYS = [
    # -- identity and listeners
    _k("broker.id", "int", -1, Range(-1), H,
       "Broker id; -1 = generate one from /brokers/seqid (> reserved.broker.max.id)"),
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
    _k("control.plane.listener.name", "string", None, None, M,
       "Listener for controller requests (KIP-291): the controller sends LeaderAndIsr/UpdateMetadata/StopReplica "
       "there and brokers accept them and ControlledShutdown only there; bind it to a private address. "
       "Default none: any listener"),
    _k("security.inter.broker.protocol", "string", "PLAINTEXT", OneOf(*_PROTOCOLS), M,
       "Security protocol between brokers: picks the first listener mapped to it when inter.broker.listener.name is "
       "unset (set one of the two, as in Kafka)"),
    _k("host.name", "string", "", None, H, "Legacy: host of the default listener when listeners is unset"),
    _k("port", "int", 9092, Range(0, 65535), H, "Legacy: port of the default listener when listeners is unset"),
    _k("advertised.host.name", "string", None, None, H, "Legacy: advertised host when advertised.listeners is unset"),
    _k("advertised.port", "int", None, Range(0, 65535), H,
       "Legacy: advertised port when advertised.listeners is unset"),
    # -- log storage
    _k("log.dir", "string", "/tmp/kafka-logs", None, H, "Log directory, used when log.dirs is unset"),
    _k("log.dirs", "string", None, None, H, "Comma list of log directories (overrides log.dir)"),
    _k("num.partitions", "int", 1, Range(1), M, "Partitions of auto-created topics"),
    _k("max.request.partitions", "int", 10000, Range(1), M,
       "kbroker: most partitions one CreateTopics (all its topics together) or CreatePartitions request may add; "
       "more is INVALID_PARTITIONS (37) for the topics beyond it"),
    _k("max.topic.partitions", "int", 10000, Range(1), M,
       "kbroker: most partitions a topic may have (CreateTopics, CreatePartitions, auto-creation); more is "
       "INVALID_PARTITIONS (37)"),
    _k("max.broker.partitions", "int", 50000, Range(1), M,
       "Most partition replicas one broker may host (KIP-578's name; Kafka has no such limit); a topic creation or "
       "partition addition that would place more on any broker is POLICY_VIOLATION (44)"),
    _k("default.replication.factor", "int", 1, Range(1), M,
       "Replication factor of auto-created topics (kbroker refuses < 1; Kafka has no check)"),
    _k("auto.create.topics.enable", "bool", True, None, H, "Create unknown topics on Metadata/Produce"),
    _k("delete.topic.enable", "bool", True, None, H,
       "Allow topic deletion. Default true as Kafka >= 1.0; Kafka 0.10.1 had false (deletes were only marked)"),
    _k("log.segment.bytes", "int", _LOG.segment_bytes, Range(14), H, "Maximum segment file size"),
    _k("log.roll.ms", "long", None, Range(1), H, "Roll a segment after this age; overrides log.roll.hours"),
    _k("log.roll.hours", "int", _LOG.segment_ms // _HOUR_MS, Range(1), H, "Roll a segment after this many hours"),
    _k("log.roll.jitter.ms", "long", None, Range(0), H, "Random jitter subtracted from the roll time (ms)"),
    _k("log.roll.jitter.hours", "int", _LOG.segment_jitter_ms // _HOUR_MS, Range(0), H,
       "Roll jitter in hours, when log.roll.jitter.ms is unset"),
    _k("log.retention.ms", "long", None, Range(-1), H,
       "Retention time; precedence ms > minutes > hours; -1 = unlimited"),
    _k("log.retention.minutes", "int", None, Range(-1), H, "Retention time in minutes (see log.retention.ms)"),
    _k("log.retention.hours", "int", _LOG.retention_ms // _HOUR_MS, Range(-1), H,
       "Retention time in hours (see log.retention.ms)"),
    _k("log.retention.bytes", "long", _LOG.retention_bytes, None, H,
       "Maximum partition size before old segments go; -1 = unlimited"),
    _k("log.retention.check.interval.ms", "long", 300000, Range(1), M, "How often retention runs"),
    _k("log.flush.interval.messages", "long", _LOG.flush_interval_messages, Range(1), H,
       "fsync after this many appended messages"),
    _k("log.flush.interval.ms", "long", None, Range(0), H,
       "fsync when the oldest unflushed data is this old; default = log.flush.scheduler.interval.ms"),
    _k("log.flush.scheduler.interval.ms", "long", LONG_MAX, Range(0), H, "How often the flusher checks logs"),
    _k("log.flush.offset.checkpoint.interval.ms", "int", 60000, Range(0), H,
       "How often recovery-point-offset-checkpoint is written"),
    _k("log.flush.start.offset.checkpoint.interval.ms", "int", 60000, Range(0), H,
       "How often log-start-offset-checkpoint is written (Kafka >= 0.11; also with the recovery points)"),
    _k("log.index.size.max.bytes", "int", _LOG.segment_index_bytes, Range(4), M,
       "Preallocated size of each offset/time index"),
    _k("log.index.interval.bytes", "int", _LOG.index_interval_bytes, Range(0), M, "Bytes between offset index entries"),
    _k("log.segment.delete.delay.ms", "long", _LOG.file_delete_delay_ms, Range(0), H,
       "Delay before a deleted segment's files go"),
    _k("log.preallocate", "bool", _LOG.preallocate, None, M, "Preallocate new segment files",
       effect=refused_unless_default("kbroker does not preallocate segment files")),
    _k("log.cleanup.policy", "list", _LOG.cleanup_policy.split(","), _CLEANUP, M, "delete and/or compact"),
    _k("log.cleaner.enable", "bool", True, None, M, "Run the log cleaner (needed for compacted topics)"),
    _k("log.cleaner.threads", "int", 1, Range(0), M, "Cleaner threads",
       effect=refused_unless_default("kbroker runs exactly one cleaner (to stop cleaning set "
                                     "log.cleaner.enable=false)")),
    _k("log.cleaner.dedupe.buffer.size", "long", 134217728, Range(0), M, "Memory for the cleaner's key map"),
    _k("log.cleaner.io.buffer.size", "int", 524288, Range(0), M, "Cleaner I/O buffer size",
       effect=no_effect("the cleaner reads and writes one batch at a time (bounded by max.message.bytes); it has no "
                        "I/O buffer to size")),
    _k("log.cleaner.io.buffer.load.factor", "double", 0.9, Range(0.0, 1.0), M, "Key map load factor",
       effect=refused_unless_default("the cleaner's key map holds log.cleaner.dedupe.buffer.size / 128 keys; its "
                                     "fill is not configurable")),
    _k("log.cleaner.io.max.bytes.per.second", "double", DOUBLE_MAX, Range(0.0), M, "Cleaner I/O throttle",
       effect=refused_unless_default("the cleaner is not throttled")),
    _k("log.cleaner.min.cleanable.ratio", "double", _LOG.min_cleanable_dirty_ratio, Range(0.0, 1.0), M,
       "Clean a log once dirty/total bytes reaches this"),
    _k("log.cleaner.delete.retention.ms", "long", _LOG.delete_retention_ms, Range(0), M,
       "How long delete markers are kept"),
    _k("log.cleaner.min.compaction.lag.ms", "long", _LOG.min_compaction_lag_ms, Range(0), M,
       "Messages younger than this are not compacted"),
    _k("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, Range(1), M,
       "Messages older than this become eligible regardless of ratio (Kafka >= 2.3)",
       effect=refused_unless_default("the cleaner picks logs by dirty ratio and tombstone horizon only; a maximum "
                                     "compaction lag is not implemented")),
    _k("log.cleaner.backoff.ms", "long", 15000, Range(0), M, "Sleep when there is nothing to clean"),
    _k("log.message.timestamp.type", "string", _LOG.message_timestamp_type, _TIMESTAMP_TYPE, M,
       "CreateTime or LogAppendTime"),
    _k("log.message.timestamp.difference.max.ms", "long", _LOG.message_timestamp_difference_max_ms, Range(0), M,
       "Max |broker time - message timestamp| for CreateTime"),
    _k("log.message.format.version", "string", "3.0-IV1", _VERSION, M,
       "Kafka: message format version of stored batches; kbroker always stores record batches v2",
       effect=no_effect("kbroker stores record batches v2 and down-converts per Fetch version, as Kafka >= 3.0 does "
                        "(which ignores this key too)")),
    _k("inter.broker.protocol.version", "string", "3.0-IV1", _VERSION, M,
       "Kafka: protocol version brokers speak to each other (rolling upgrades)",
       effect=no_effect("a kbroker cluster runs one broker version; there is no rolling-upgrade protocol switch")),
    _k("num.recovery.threads.per.data.dir", "int", 1, Range(1), H,
       "Threads opening (after a crash: recovering) the logs of each log dir at startup; dirs load one after another. "
       "kbroker reads a few pages of every partition's files even after a clean shutdown, so with thousands of "
       "partitions on a cold page cache more threads overlap the disk's latency (2,000 cold partitions: 20.1 s "
       "with 1, 2.4 s with 8 on kbroker's test machine, docs/performance.md)"),
    _k("log.open.segment.files.max", "int", 0, Range(0), M,
       "kbroker: most segment .log files the broker keeps open at once; the least recently used is closed and "
       "reopened on its next use (Kafka keeps one descriptor per segment for its whole life). 0 = half the process's "
       "soft RLIMIT_NOFILE, leaving the other half to connections (kbroker/log/descriptors.py)"),
    _k("message.max.bytes", "int", _LOG.max_message_bytes, Range(0), H,
       "Largest record batch accepted. Modern default 1048588 (1 MiB + 12-byte log overhead); 0.10.1 had 1000012"),
    _k("compression.type", "string", _LOG.compression_type, _COMPRESSION, H,
       "Compression of stored batches; producer = keep",
       effect=refused_unless_default("kbroker stores batches as the producer compressed them; recompression on "
                                     "append is not implemented")),
    _k("max.request.decompressed.bytes", "int", 32 << 20, Range(0), M,
       "kbroker: bytes all record batches of one Produce request may inflate to together (max.message.bytes is a "
       "topic config any client may raise); beyond it MESSAGE_TOO_LARGE (10), or CORRUPT_MESSAGE (2) for a batch "
       "that alone inflates beyond it"),
    # -- network
    _k("socket.request.max.bytes", "int", 104857600, Range(1), H, "Largest request accepted"),
    _k("socket.send.buffer.bytes", "int", 102400, Range(-1), H,
       "SO_SNDBUF of accepted connections, applied only when the key is set explicitly: Kafka's default 102400 is not "
       "applied, so Linux keeps autotuning the buffer (a fixed 100 KiB caps throughput); -1 = OS default; 0 refused"),
    _k("socket.receive.buffer.bytes", "int", 102400, Range(-1), H,
       "SO_RCVBUF of accepted connections, applied only when the key is set explicitly: Kafka's default 102400 is "
       "not applied, so Linux keeps autotuning the buffer; -1 = OS default; 0 refused"),
    _k("num.network.threads", "int", 3, Range(1), H, "Kafka: network (selector) threads",
       effect=no_effect(_LOOP % "network")),
    _k("num.io.threads", "int", 8, Range(1), H, "Kafka: request handler threads",
       effect=no_effect(_LOOP % "request handler")),
    _k("background.threads", "int", 10, Range(1), H, "Kafka: background task threads",
       effect=no_effect(_LOOP % "background")),
    _k("queued.max.requests", "int", 500, Range(1), H, "Kafka: requests queued before the network threads stop reading",
       effect=no_effect("there is no shared request queue: a connection reads its next request after answering the "
                        "last (TCP backpressure), and queued.max.request.bytes bounds request memory")),
    _k("connections.max.idle.ms", "long", 600000, None, M, "Close connections idle this long"),
    _k("max.connections.per.ip", "int", INT_MAX, Range(0), M, "Connection cap per client address"),
    _k("max.connections.per.ip.overrides", "string", "", None, M, "host:count comma list"),
    _k("max.connections", "int", INT_MAX, Range(0), M,
       "Broker-wide connection cap (Kafka >= 2.3): at the cap new connections wait in the accept backlog; the "
       "inter-broker listener is exempt when there are several listeners"),
    _k("queued.max.request.bytes", "long", -1, None, M,
       "Bytes of large requests being received or handled, all connections together; reading pauses beyond it "
       "(Kafka >= 1.0). <= 0: Kafka's unbounded, kbroker bounds it at max(256 MiB, socket.request.max.bytes)"),
    _k("socket.request.receive.timeout.ms", "long", 30000, Range(1), M,
       "kbroker: a request must arrive completely within this long of its first byte, or the connection is closed "
       "(slow-loris clients)"),
    _k("request.max.elements", "int", 100000, Range(1), M,
       "kbroker: most values one request decodes into (array entries, their fields, tagged fields); a request "
       "with more closes the connection"),
    _k("metadata.request.max.topics", "int", 10000, Range(1), M,
       "kbroker: most distinct topics one Metadata request may name (a null list = all topics is not limited); "
       "more closes the connection"),
    _k("request.timeout.ms", "int", 30000, Range(0), H, "Inter-broker request timeout"),
    _k("fetch.max.bytes", "int", 57671680, Range(1024), M, "Largest Fetch response (Kafka >= 2.5 broker key)"),
    _k("max.incremental.fetch.session.cache.slots", "int", 1000, Range(0), M,
       "Most incremental fetch sessions (KIP-227) the broker keeps; 0 = every Fetch is answered sessionless"),
    # -- coordination
    _k("zookeeper.connect", "string", "", None, H,
       "host:port[,host:port][/chroot]; empty = embedded single-node coordination (kbroker)"),
    _k("zookeeper.session.timeout.ms", "int", 18000, Range(1), H,
       "ZooKeeper session timeout (modern default 18000; 0.10.1 had 6000)"),
    _k("zookeeper.connection.timeout.ms", "int", None, Range(1), H,
       "Max wait for a connection; default = zookeeper.session.timeout.ms"),
    _k("zookeeper.set.acl", "bool", False, None, H,
       "Create znodes with Kafka's secure ACLs (creator-only writes, world read except credentials); needs SASL "
       "to ZooKeeper (JAAS Client section via -Djava.security.auth.login.config in KAFKA_OPTS) and zookeeper.connect"),
    # ZooKeeper TLS (Kafka >= 2.5, KIP-515): kbroker/security/zk_client.py zk_tls_context.
    _k("zookeeper.clientCnxnSocket", "string", None, None, M,
       "ZooKeeper client socket class; org.apache.zookeeper.ClientCnxnSocketNetty (required with "
       "zookeeper.ssl.client.enable=true)"),
    _k("zookeeper.ssl.client.enable", "bool", False, None, M, "Connect to ZooKeeper with TLS"),
    _k("zookeeper.ssl.keystore.location", "string", None, None, L,
       "ZooKeeper TLS client certificate and key (PEM or PKCS12; JKS refused); authenticates the brokers (x509)"),
    _k("zookeeper.ssl.keystore.password", "password", None, None, L,
       "Password of the ZooKeeper TLS keystore (a PEM keystore's: its key's)"),
    _k("zookeeper.ssl.keystore.type", "string", None, None, L,
       "PEM or PKCS12; unset: from the file's extension (.pem, .p12, .pfx)"),
    _k("zookeeper.ssl.truststore.location", "string", None, None, L,
       "CA certificates the ZooKeeper servers' certificates are checked against; unset: the system's"),
    _k("zookeeper.ssl.truststore.password", "password", None, None, L, "Password of a PKCS12 truststore"),
    _k("zookeeper.ssl.truststore.type", "string", None, None, L,
       "PEM or PKCS12; unset: from the file's extension"),
    _k("zookeeper.ssl.protocol", "string", "TLSv1.2", None, L,
       "Highest TLS version to ZooKeeper (TLSv1.2 caps at 1.2)"),
    _k("zookeeper.ssl.enabled.protocols", "list", None, None, L, "TLS versions to ZooKeeper"),
    _k("zookeeper.ssl.cipher.suites", "list", None, None, L, "Cipher suites to ZooKeeper (Java names)"),
    _k("zookeeper.ssl.endpoint.identification.algorithm", "string", "HTTPS", None, L,
       "HTTPS: check the ZooKeeper servers' host names; empty: do not"),
    _k("zookeeper.ssl.crl.enable", "bool", False, None, L, "ZooKeeper TLS certificate revocation lists",
       effect=refused_unless_default(_ZK_TLS)),
    _k("zookeeper.ssl.ocsp.enable", "bool", False, None, L, "ZooKeeper TLS OCSP",
       effect=refused_unless_default(_ZK_TLS)),
    _k("zookeeper.sync.time.ms", "int", 2000, None, L, "Kafka: how far a ZooKeeper follower may lag its leader",
       effect=no_effect("it tunes ZooKeeper followers, not a ZooKeeper client")),
    # -- group and transaction coordinators
    _k("offsets.topic.num.partitions", "int", 50, Range(1), H, "Partitions of __consumer_offsets"),
    _k("offsets.topic.replication.factor", "short", 3, Range(1), H,
       "Replication of __consumer_offsets (capped to live brokers on creation)"),
    _k("offsets.topic.segment.bytes", "int", 104857600, Range(1), H, "Segment size of __consumer_offsets"),
    _k("offsets.topic.compression.codec", "int", 0, Range(0, 4), H, "Compression of offset commits",
       effect=refused_unless_default("offset commits are written uncompressed")),
    _k("offsets.retention.minutes", "int", 1440, Range(1), H,
       "Committed offsets of empty groups expire after this (0.10.1 default; Kafka >= 2.0 uses 10080)"),
    _k("offsets.retention.check.interval.ms", "long", 600000, Range(1), H, "Offset expiration check period"),
    _k("offsets.commit.timeout.ms", "int", 5000, Range(1), H, "Wait for offset commit replication"),
    _k("offsets.commit.required.acks", "short", -1, None, H, "acks for offset commits",
       effect=refused_unless_default("an offset commit always waits for the full ISR, as Kafka recommends")),
    _k("offsets.load.buffer.size", "int", 5242880, Range(1), H, "Read size when loading offsets"),
    _k("offset.metadata.max.bytes", "int", 4096, None, H, "Max offset commit metadata length"),
    _k("group.min.session.timeout.ms", "int", 6000, None, M, "Smallest session timeout a member may ask for"),
    _k("group.max.session.timeout.ms", "int", 300000, None, M,
       "Largest session timeout a member may ask for (0.10.1 default; Kafka >= 2.0 uses 1800000)"),
    _k("group.initial.rebalance.delay.ms", "int", 3000, Range(0), M,
       "Wait for more members before the first rebalance of an empty group (Kafka >= 0.11)"),
    _k("transactional.id.expiration.ms", "int", 604800000, Range(1), H,
       "A transactional id idle this long (no transaction running) is removed from __transaction_state"),
    _k("transaction.max.timeout.ms", "int", 900000, Range(1), H,
       "Largest transaction timeout a producer may ask for (above: INVALID_TRANSACTION_TIMEOUT)"),
    _k("transaction.state.log.num.partitions", "int", 50, Range(1), H, "Partitions of __transaction_state"),
    _k("transaction.state.log.replication.factor", "short", 3, Range(1), H,
       "Replication of __transaction_state (capped to live brokers on creation)"),
    _k("transaction.state.log.min.isr", "int", 2, Range(1), H,
       "min.insync.replicas of __transaction_state (capped to its replication factor on creation)"),
    _k("transaction.state.log.segment.bytes", "int", 104857600, Range(1), H, "Segment size of __transaction_state"),
    _k("transaction.state.log.load.buffer.size", "int", 5242880, Range(1), L,
       "Read size when loading __transaction_state"),
    _k("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000, Range(1), L,
       "How often the coordinator aborts transactions running longer than their timeout"),
    _k("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000, Range(1), L,
       "How often the coordinator removes expired transactional ids"),
    _k("producer.id.expiration.ms", "int", 86400000, Range(1), L, "Idle producer ids expire (Kafka >= 2.8)",
       effect=refused_unless_default("a producer's idempotence state lives as long as the log holds its batches (it "
                                     "is rebuilt from them); producer ids do not expire by time")),
    # -- replication
    _k("min.insync.replicas", "int", _LOG.min_insync_replicas, Range(1), H, "ISR size needed for acks=all"),
    _k("unclean.leader.election.enable", "bool", _LOG.unclean_leader_election_enable, None, H,
       "Elect an out-of-sync replica when no ISR member lives. Default false (Kafka >= 0.11); 0.10.1 had true"),
    _k("replica.lag.time.max.ms", "long", 10000, None, H, "Followers not caught up for this long leave the ISR"),
    _k("replica.fetch.min.bytes", "int", 1, None, H, "Follower fetch min_bytes"),
    _k("replica.fetch.wait.max.ms", "int", 500, None, H, "Follower fetch max_wait"),
    _k("replica.fetch.max.bytes", "int", 1048576, Range(0), M, "Follower fetch bytes per partition"),
    _k("replica.fetch.response.max.bytes", "int", 10485760, Range(0), M, "Follower fetch response size"),
    _k("replica.fetch.backoff.ms", "int", 1000, Range(0), M, "Sleep after a follower fetch error"),
    _k("replica.socket.timeout.ms", "int", 30000, None, H, "Follower socket timeout"),
    _k("replica.socket.receive.buffer.bytes", "int", 65536, Range(-1), H,
       "SO_RCVBUF of a follower's connections to its leaders, applied only when the key is set explicitly: Kafka's "
       "default 65536 is not applied, so Linux keeps autotuning the buffer (RF 3 acks=all produced ~40 % more with "
       "autotuning in docs/performance.md's bench_replication run); -1 = OS default; 0 refused"),
    _k("replica.high.watermark.checkpoint.interval.ms", "long", 5000, None, H,
       "How often replication-offset-checkpoint is written"),
    _k("num.replica.fetchers", "int", 1, Range(1), H, "Fetcher workers per source broker",
       effect=no_effect("a follower fetches from each leader broker in one greenlet; the value is a parallelism "
                        "knob only")),
    _k("controlled.shutdown.enable", "bool", True, None, M, "Move leadership away before stopping"),
    _k("controlled.shutdown.max.retries", "int", 3, None, M, "Controlled shutdown attempts"),
    _k("controlled.shutdown.retry.backoff.ms", "long", 5000, None, M, "Wait between attempts"),
    _k("controller.socket.timeout.ms", "int", 30000, None, M, "Controller-to-broker socket timeout"),
    _k("auto.leader.rebalance.enable", "bool", True, None, H, "Move leadership back to preferred replicas"),
    _k("leader.imbalance.check.interval.seconds", "long", 300, None, H, "Rebalance check period"),
    _k("leader.imbalance.per.broker.percentage", "int", 10, None, H, "Imbalance ratio that triggers a rebalance"),
    _k("fetch.purgatory.purge.interval.requests", "int", 1000, None, M, "Kafka: fetch purgatory purge period",
       effect=no_effect(_PURGATORY)),
    _k("producer.purgatory.purge.interval.requests", "int", 1000, None, M, "Kafka: produce purgatory purge period",
       effect=no_effect(_PURGATORY)),
    # -- quotas
    # The lowest-precedence client-id quotas (Kafka 0.10.1; kbroker/quota/store.py), under any /config/clients etc.
    _k("quota.producer.default", "long", LONG_MAX, Range(1), H, "Default produce byte rate per client-id"),
    _k("quota.consumer.default", "long", LONG_MAX, Range(1), H, "Default fetch byte rate per client-id"),
    _k("quota.window.num", "int", 11, Range(1), L, "Quota sample windows (client quotas: kbroker/quota/sensor.py)"),
    _k("quota.window.size.seconds", "int", 1, Range(1), L,
       "Quota sample window length (client quotas; also the request quota's longest throttle)"),
    _k("replication.quota.window.num", "int", 11, Range(1), L, "Replication quota windows"),
    _k("replication.quota.window.size.seconds", "int", 1, Range(1), L, "Replication quota window length"),
    # KIP-73: dynamic in Kafka (/config/brokers/<id>, which overrides these static values here)
    _k("leader.replication.throttled.rate", "long", LONG_MAX, Range(0), M,
       "Bytes/s a leader sends to throttled follower replicas (leader.replication.throttled.replicas)"),
    _k("follower.replication.throttled.rate", "long", LONG_MAX, Range(0), M,
       "Bytes/s a follower fetches for throttled replicas (follower.replication.throttled.replicas)"),
    # -- security
    _k("authorizer.class.name", "string", "", None, L,
       "Authorizer class: kafka.security.authorizer.AclAuthorizer or kafka.security.auth.SimpleAclAuthorizer "
       "selects the ACL authorizer (ACLs under /kafka-acl); empty = no authorization; any other class stops startup"),
    _k("super.users", "string", None, None, L, "Semicolon list of principals (User:name) allowed everything"),
    _k("allow.everyone.if.no.acl.found", "bool", False, None, L,
       "With an authorizer: allow every principal on a resource no ACL applies to"),
    _k("principal.builder.class", "class", None, _CLASS, M, "Principal builder class",
       effect=refused_unless_default(_PRINCIPAL_BUILDER)),
    # SASL (kbroker/security/authenticator.py; listener.name.<listener lower-case>.sasl.enabled.mechanisms and
    # listener.name.<listener>.<mechanism lower-case>.sasl.jaas.config per listener, as in Kafka)
    _k("sasl.enabled.mechanisms", "list", ["GSSAPI"], None, M,
       "SASL mechanisms offered on SASL_PLAINTEXT/SASL_SSL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, GSSAPI"),
    _k("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI", None, M,
       "SASL mechanism brokers use towards each other on a SASL inter-broker listener (credentials: the username/"
       "password options of the listener's JAAS entry for it)"),
    _k("sasl.server.max.receive.size", "int", 524288, Range(1), L,
       "Largest frame a SASL listener reads before a client has authenticated; a larger one closes the connection"),
    _k("sasl.server.callback.handler.class", "class", None, _CLASS, M, "SASL server callback handler class",
       effect=refused_unless_default("kbroker's SASL mechanisms have their built-in callbacks only (PLAIN: the JAAS "
                                     "user_<name> options; SCRAM: /config/users)")),
    _k("sasl.login.class", "class", None, _CLASS, L, "SASL login class",
       effect=refused_unless_default("kbroker logs in with its built-in mechanisms only (JAAS options, keytabs)")),
    _k("sasl.login.callback.handler.class", "class", None, _CLASS, L, "SASL login callback handler class",
       effect=refused_unless_default("kbroker logs in with its built-in mechanisms only (JAAS options, keytabs)")),
    _k("sasl.client.callback.handler.class", "class", None, _CLASS, L, "SASL client callback handler class",
       effect=refused_unless_default("kbroker logs in with its built-in mechanisms only (JAAS options, keytabs)")),
    _k("connection.failed.authentication.delay.ms", "int", 100, Range(0), L,
       "How long a client whose SASL credentials were refused waits for the answer before the connection closes "
       "(KIP-306); must be below connections.max.idle.ms"),
    _k("connections.max.reauth.ms", "long", 0, Range(0), M, "SASL re-authentication period (KIP-368); 0 = none",
       effect=refused_unless_default("SASL re-authentication (KIP-368) is not implemented: sessions never expire")),
    # GSSAPI (kbroker/security/sasl/gssapi.py, docs/security-gssapi.md)
    _k("sasl.kerberos.service.name", "string", None, None, M,
       "Kerberos service name of the brokers (kafka): required by a GSSAPI listener, here or as the JAAS option "
       "serviceName"),
    _k("sasl.kerberos.principal.to.local.rules", "list", ["DEFAULT"], None, M,
       "Kerberos principal -> short name of User:<name>: DEFAULT and RULE:[n:format](match)s/from/to/g[/L|/U] rules, "
       "first that applies wins; an invalid rule stops a GSSAPI listener at startup"),
    _k("sasl.kerberos.kinit.cmd", "string", "/usr/bin/kinit", None, L, "Kerberos kinit command path",
       effect=no_effect(_KRB_LOGIN)),
    _k("sasl.kerberos.min.time.before.relogin", "long", 60000, None, L, "Login thread sleep between refreshes",
       effect=no_effect(_KRB_LOGIN)),
    _k("sasl.kerberos.ticket.renew.jitter", "double", 0.05, None, L, "Random jitter added to the renewal time",
       effect=no_effect(_KRB_LOGIN)),
    _k("sasl.kerberos.ticket.renew.window.factor", "double", 0.8, None, L, "Renew the ticket at this part of its life",
       effect=no_effect(_KRB_LOGIN)),
    # TLS (kbroker/security/tls.py; each may be listener-prefixed: listener.name.<listener lower-case>.ssl.X)
    _k("ssl.keystore.type", "string", "JKS", None, M,
       "Keystore format: PEM (KIP-651) or PKCS12; JKS is refused with the keytool conversion to PKCS12"),
    _k("ssl.keystore.location", "string", None, None, H,
       "Keystore file: PKCS12, or PEM holding the encrypted private key and the certificate chain"),
    _k("ssl.keystore.password", "password", None, None, H, "PKCS12 keystore password (PEM stores take none)"),
    _k("ssl.key.password", "password", None, None, H, "Private key password (required for a PEM keystore file)"),
    _k("ssl.keystore.key", "password", None, None, H, "PEM private key inline (ssl.keystore.type=PEM, KIP-651)"),
    _k("ssl.keystore.certificate.chain", "password", None, None, H,
       "PEM certificate chain inline, leaf first (ssl.keystore.type=PEM, KIP-651)"),
    _k("ssl.truststore.type", "string", "JKS", None, M, "Truststore format: PEM or PKCS12 (JKS refused)"),
    _k("ssl.truststore.location", "string", None, None, H,
       "Truststore file (trusted CA certificates); unset = the system's CAs"),
    _k("ssl.truststore.password", "password", None, None, H, "PKCS12 truststore password (PEM stores take none)"),
    _k("ssl.truststore.certificates", "password", None, None, H,
       "PEM trusted certificates inline (ssl.truststore.type=PEM, KIP-651)"),
    _k("ssl.client.auth", "string", "none", OneOf("required", "requested", "none"), M,
       "Client certificates on SSL listeners (SASL_SSL listeners: only listener-prefixed, KIP-684)"),
    _k("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"], None, M,
       "TLS versions (modern default); TLSv1.2 and TLSv1.3 only"),
    _k("ssl.protocol", "string", "TLSv1.3", None, M,
       "TLS protocol (modern default): TLSv1.2 caps the versions at 1.2; TLSv1.3 or TLS do not"),
    _k("ssl.cipher.suites", "list", [], None, L,
       "Cipher suites by Java (IANA) name; empty = OpenSSL's defaults; TLS 1.3 suites all three or none"),
    _k("ssl.endpoint.identification.algorithm", "string", "https", None, L,
       "https = brokers check the peer's host name against its certificate; empty = no check"),
    _k("ssl.principal.mapping.rules", "string", "DEFAULT", None, L,
       "Client certificate DN -> principal name: RULE:pattern/replacement/[LU] rules and DEFAULT (KIP-371)"),
    _k("ssl.provider", "string", None, None, L, "Java security provider for SSL",
       effect=refused_unless_default(_TLS_JAVA % "a Java security provider")),
    _k("ssl.secure.random.implementation", "string", None, None, L, "Java SecureRandom for SSL",
       effect=refused_unless_default(_TLS_JAVA % "a Java SecureRandom implementation")),
    _k("ssl.engine.factory.class", "class", None, _CLASS, L, "Custom SSL engine factory class",
       effect=refused_unless_default(_TLS_JAVA % "a Java SslEngineFactory class")),
    _k("ssl.keymanager.algorithm", "string", "SunX509", None, L, "Java key manager algorithm",
       effect=refused_unless_default(_TLS_JAVA % "another Java key manager (OpenSSL's key selection is SunX509's)")),
    _k("ssl.trustmanager.algorithm", "string", "PKIX", None, L, "Java trust manager algorithm",
       effect=refused_unless_default(_TLS_JAVA % "another Java trust manager (OpenSSL's chain validation is PKIX)")),
    _k("ssl.allow.dn.changes", "bool", False, None, L, "Allow a dynamically updated keystore to change its DN",
       effect=no_effect(_TLS_STATIC)),
    _k("ssl.allow.san.changes", "bool", False, None, L, "Allow a dynamically updated keystore to change its SANs",
       effect=no_effect(_TLS_STATIC)),
    # -- metrics
    _k("metrics.http.port", "int", -1, Range(-1, 65535), M,
       "Port of the Prometheus endpoint (/metrics, /healthz, /readyz; kbroker/metrics); -1 = none"),
    _k("metrics.http.host", "string", "", None, L,
       "Address the Prometheus endpoint binds (empty = every interface, as Kafka's JMX port)"),
    _k("metric.reporters", "list", [], None, L, "Metric reporter classes",
       effect=refused_unless_default("kbroker loads no Java metric reporter classes")),
    _k("metrics.num.samples", "int", 2, Range(1), L,
       "Windows kept for the request-time quantiles and the event loop's idle ratio (kbroker/server/stats.py)"),
    _k("metrics.sample.window.ms", "long", 30000, Range(1), L,
       "Length of one of those windows"),
]

# Every broker key in the table's order (the public name of _KEYS, for the CLI: --check-config reports in it).
KEYS = tuple(_KEYS)
CONFIG_KEYS = {k.name: k for k in _KEYS}



def effects_markdown(topic_keys=()):
    """docs/config-effects.md: the broker keys (and ``topic_keys``: TopicKeys) kbroker does not simply apply, by
    effect, as Markdown. Regenerate with ``python scripts/config_effects.py``; tests/unit/test_config.py fails when
    the file is stale."""
    from .values import format_default

    lines = [
        "# Config keys kbroker accepts without applying them",
        "",
        "Generated by `python scripts/config_effects.py` from the `effect` column of `kbroker/config/keys.py` and",
        "`kbroker/config/topic.py`; `tests/unit/test_config.py` fails when this file is stale. Every other key is",
        "applied (that test also fails when a key marked applied is read nowhere in `kbroker/`).",
        "",
        "- **refused unless default**: the default is accepted silently; any other value stops startup (exit 1) with",
        "  a message naming the key, the value and the reason. A listener whose security protocol (through",
        "  `listener.security.protocol.map`) is not PLAINTEXT is refused the same way, naming `listeners`. For a",
        "  topic config the refusal is INVALID_CONFIG (40) naming the key.",
        "- **no effect**: any value is accepted; a broker key set explicitly gets one WARNING line at startup (and in",
        "  `kbroker-server --check-config`) naming it and the reason. Kafka's own shipped server.properties sets",
        "  some of these, and keeps starting.",
        "- `socket.send.buffer.bytes` / `socket.receive.buffer.bytes` and `replica.socket.receive.buffer.bytes` are",
        "  applied only when set explicitly: Kafka's defaults (102400, 65536) would switch off Linux's buffer",
        "  autotuning.",
        "",
    ]
    for what, keys in (("Broker keys", _KEYS), ("Topic configs", topic_keys)):
        for kind, title in ((REFUSED_UNLESS_DEFAULT, "refused unless default"), (NO_EFFECT, "no effect (warned)")):
            rows = [(k.name, k, effect_of(k)[1]) for k in keys if effect_of(k)[0] == kind]
            if not rows:
                continue
            lines += ["## %s: %s" % (what, title), ""]
            if keys is _KEYS:
                lines += ["| key | default | reason |", "|---|---|---|"]
                lines += ["| `%s` | %s | %s |" % (n, format_default(k.default), r) for n, k, r in rows]
            else:
                lines += ["| key | reason |", "|---|---|"]
                lines += ["| `%s` | %s |" % (n, r) for n, _, r in rows]
            lines.append("")
    return "\n".join(lines)
