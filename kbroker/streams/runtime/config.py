"""StreamsConfig: Kafka Streams' configuration keys and defaults, and the librdkafka configurations of the clients a
KafkaStreams instance runs (main consumer, restore consumer, producer, admin).

Keys are Kafka's names with Kafka's defaults (``STREAMS_KEYS``); values may be given as strings (a properties file)
or Python values, and are parsed to int / str / bool. ``StreamsConfig(props)`` raises ``StreamsConfigError`` (a
``StreamsException`` and a ``ValueError``) naming the key:

* ``application.id`` or ``bootstrap.servers`` missing -- Kafka's message ``Missing required configuration
  "application.id" which has no default value.``;
* a value Kafka refuses (``processing.guarantee=exactly_once`` / ``exactly_once_beta``, removed in Kafka 4.0, get
  ConfigDef's ``Invalid value exactly_once for configuration processing.guarantee: String must be one of:
  at_least_once, exactly_once_v2``);
* a key that is neither a Streams key, nor a Java client key, nor a known prefix (``UNKNOWN``): ``Unknown
  configuration key(s): a, b`` -- Kafka only warns, but a silently ignored key is a bug waiting to happen;
* a Streams key this runtime cannot honour (``DEFAULT_ONLY``: warm-up replicas, rack awareness, custom client
  suppliers...) set to anything but its default;
* a client key librdkafka refuses after translation (checked by building each client configuration once with
  ``validate_clients()``: librdkafka's own "No such configuration property" names it).

Clients (what Kafka's StreamsConfig.getMainConsumerConfigs & co. do, then Java -> librdkafka through
kbroker.client.rdkafka_props.translate):

  main consumer     top-level client keys, then ``consumer.*``, then ``main.consumer.*``; forced: group.id =
                    application.id, enable.auto.commit=false, partition.assignment.strategy=range (module
                    assignment.py says why), isolation.level=read_committed under exactly_once_v2. Streams'
                    defaults unless set: auto.offset.reset=earliest, max.poll.records=1000 (the consume() batch).
  restore consumer  top-level, ``consumer.*``, ``restore.consumer.*``; no group (assign() only); read_committed
                    under exactly_once_v2.
  producer          top-level, ``producer.*``; Streams' default linger.ms=100; enable.idempotence=true,
                    acks=all, partitioner=murmur2_random (Java's default partitioner for keyed records); under
                    exactly_once_v2 transaction.timeout.ms=10000 (Kafka Streams' default) and the
                    transactional.id set by the runtime (a user's transactional.id is refused).
  admin             top-level, ``admin.*``.
  internal topics   ``topic.*`` (e.g. ``topic.min.insync.replicas``) -> the configs of the repartition and
                    changelog topics the runtime creates.

Java-only client keys (serializers, interceptors, max.block.ms, ...) are dropped with a warning, as
kbroker-connect does; ``fetch.max.wait.ms`` is librdkafka's ``fetch.wait.max.ms``.
"""
from __future__ import annotations

import logging
import os
import tempfile

from kbroker.client import rdkafka_props
from kbroker.streams.errors import StreamsException

log = logging.getLogger("kbroker.streams.config")

AT_LEAST_ONCE = "at_least_once"
EXACTLY_ONCE_V2 = "exactly_once_v2"

_INT, _STR, _BOOL, _LIST = "int", "str", "bool", "list"

# key -> (type, default). Kafka 4.x StreamsConfig names and defaults.
STREAMS_KEYS = {
    "application.id": (_STR, None),
    "bootstrap.servers": (_STR, None),
    "num.stream.threads": (_INT, 1),
    "commit.interval.ms": (_INT, 30000),          # 100 under exactly_once_v2 unless set
    "cache.max.bytes.buffering": (_INT, 10485760),  # deprecated name of statestore.cache.max.bytes
    "statestore.cache.max.bytes": (_INT, 10485760),
    "processing.guarantee": (_STR, AT_LEAST_ONCE),
    "num.standby.replicas": (_INT, 0),
    "replication.factor": (_INT, -1),             # -1: the broker's default.replication.factor
    "state.dir": (_STR, os.path.join(tempfile.gettempdir(), "kafka-streams")),
    "default.key.serde": (_STR, None),
    "default.value.serde": (_STR, None),
    "default.deserialization.exception.handler": (
        _STR, "org.apache.kafka.streams.errors.LogAndFailExceptionHandler"),
    "deserialization.exception.handler": (_STR, None),   # the 4.0 name; wins over the default.* one
    "default.production.exception.handler": (
        _STR, "org.apache.kafka.streams.errors.DefaultProductionExceptionHandler"),
    "default.timestamp.extractor": (_STR, "org.apache.kafka.streams.processor.FailOnInvalidTimestamp"),
    "application.server": (_STR, ""),
    "max.task.idle.ms": (_INT, 0),
    "poll.ms": (_INT, 100),
    "acceptable.recovery.lag": (_INT, 10000),
    "client.id": (_STR, ""),
    "buffered.records.per.partition": (_INT, 1000),
    "state.cleanup.delay.ms": (_INT, 600000),
    "windowstore.changelog.additional.retention.ms": (_INT, 86400000),
    "repartition.purge.interval.ms": (_INT, 30000),
    "log.summary.interval.ms": (_INT, 120000),
    "window.size.ms": (_INT, None),
    "windowed.inner.class.serde": (_STR, None),
    "default.dsl.store": (_STR, "rocksDB"),
    "topology.optimization": (_STR, "none"),
    "max.warmup.replicas": (_INT, 2),
    "probing.rebalance.interval.ms": (_INT, 600000),
    "task.timeout.ms": (_INT, 300000),
    "upgrade.from": (_STR, None),
    "rocksdb.config.setter": (_STR, None),
    "default.client.supplier": (_STR, None),
    "dsl.store.suppliers.class": (_STR, None),
    "rack.aware.assignment.tags": (_LIST, ""),
    "rack.aware.assignment.strategy": (_STR, "none"),
    "rack.aware.assignment.traffic_cost": (_INT, None),
    "rack.aware.assignment.non_overlap_cost": (_INT, None),
    "task.assignor.class": (_STR, None),
    "built.in.metrics.version": (_STR, "latest"),
    "metrics.num.samples": (_INT, 2),
    "metrics.recording.level": (_STR, "INFO"),
    "metrics.sample.window.ms": (_INT, 30000),
    "metric.reporters": (_LIST, ""),
    "enable.metrics.push": (_BOOL, True),
    "processing.exception.handler": (_STR, None),
    "group.protocol": (_STR, "classic"),
    "ensure.explicit.internal.resource.naming": (_BOOL, False),
}
# Keys whose feature this runtime does not have (Kafka's StreamsPartitionAssignor features, pluggable suppliers,
# the KIP-1071 protocol...): accepted only at their default, so a setting never silently does nothing.
DEFAULT_ONLY = frozenset([
    "max.warmup.replicas", "probing.rebalance.interval.ms", "upgrade.from", "rocksdb.config.setter",
    "default.client.supplier", "dsl.store.suppliers.class", "rack.aware.assignment.tags",
    "rack.aware.assignment.strategy", "rack.aware.assignment.traffic_cost", "rack.aware.assignment.non_overlap_cost",
    "task.assignor.class", "built.in.metrics.version", "metrics.num.samples", "metrics.recording.level",
    "metrics.sample.window.ms", "metric.reporters", "processing.exception.handler", "group.protocol",
    "topology.optimization", "acceptable.recovery.lag", "task.timeout.ms",
    "default.production.exception.handler", "ensure.explicit.internal.resource.naming", "default.dsl.store",
    "window.size.ms", "windowed.inner.class.serde",
])
_GUARANTEES = (AT_LEAST_ONCE, EXACTLY_ONCE_V2)

# Java client key names (CommonClientConfigs, ConsumerConfig, ProducerConfig, AdminClientConfig) a top-level key
# may carry; such a key goes to every client whose Java config knows it (Kafka's getClientPropsWithPrefix).
COMMON_CLIENT_KEYS = frozenset([
    "client.rack", "security.protocol", "request.timeout.ms", "metadata.max.age.ms", "retry.backoff.ms",
    "retry.backoff.max.ms", "reconnect.backoff.ms", "reconnect.backoff.max.ms", "receive.buffer.bytes",
    "send.buffer.bytes", "connections.max.idle.ms", "socket.connection.setup.timeout.ms",
    "socket.connection.setup.timeout.max.ms", "client.dns.lookup", "default.api.timeout.ms", "security.providers",
    "auto.include.jmx.reporter",
])
CONSUMER_KEYS = frozenset([
    "group.instance.id", "max.poll.records", "max.poll.interval.ms", "session.timeout.ms", "heartbeat.interval.ms",
    "fetch.min.bytes", "fetch.max.bytes", "fetch.max.wait.ms", "max.partition.fetch.bytes", "auto.offset.reset",
    "check.crcs", "key.deserializer", "value.deserializer", "interceptor.classes", "exclude.internal.topics",
    "allow.auto.create.topics", "isolation.level", "enable.auto.commit", "auto.commit.interval.ms", "group.id",
    "partition.assignment.strategy", "group.remote.assignor",
])
PRODUCER_KEYS = frozenset([
    "acks", "linger.ms", "batch.size", "buffer.memory", "compression.type", "compression.gzip.level",
    "compression.lz4.level", "compression.zstd.level", "max.request.size", "max.block.ms", "delivery.timeout.ms",
    "retries", "enable.idempotence", "transactional.id", "transaction.timeout.ms",
    "max.in.flight.requests.per.connection", "partitioner.class", "partitioner.ignore.keys",
    "partitioner.adaptive.partitioning.enable", "partitioner.availability.timeout.ms", "key.serializer",
    "value.serializer", "interceptor.classes",
])
_CLIENT_PREFIXES = ("ssl.", "sasl.")
PREFIXES = ("main.consumer.", "restore.consumer.", "global.consumer.", "consumer.", "producer.", "admin.", "topic.")
# Java names librdkafka spells differently and rdkafka_props does not rename (it covers the producer's).
_RENAMES = {"fetch.max.wait.ms": "fetch.wait.max.ms"}
# What the runtime sets itself: a user value would break it (group.id is the application id, offsets are
# committed by the runtime, the range assignor places tasks).
_CONSUMER_FORCED = ("group.id", "enable.auto.commit", "partition.assignment.strategy")


class StreamsConfigError(StreamsException, ValueError):
    """A configuration Kafka Streams (or this runtime) refuses; the message names the key."""


def _parse(key, kind, value):
    if value is None:
        return None
    try:
        if kind == _INT:
            return int(str(value).strip()) if not isinstance(value, int) or isinstance(value, bool) else value
        if kind == _BOOL:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text not in ("true", "false"):
                raise ValueError(text)
            return text == "true"
        if kind == _LIST:
            return str(value)
        return value if not isinstance(value, (bytes, bytearray)) else value.decode()
    except ValueError:
        raise StreamsConfigError("Invalid value %s for configuration %s: Not a number of type %s"
                                 % (value, key, kind.upper())) from None


def _is_client_key(key):
    return (key in COMMON_CLIENT_KEYS or key in CONSUMER_KEYS or key in PRODUCER_KEYS
            or key.startswith(_CLIENT_PREFIXES))


def _serde_name(value):
    """A serde setting as the task sees it: a Serde class/instance passes through; a string stays a string."""
    return value


class StreamsConfig:
    """Parsed, validated Streams configuration (module docstring). ``config[key]`` / ``get(key)`` give the
    effective value (default applied); ``task_config()`` is the dict handed to every StreamTask."""

    def __init__(self, props: dict):
        props = dict(props or {})
        self.originals = props
        self.values = {}
        unknown = []
        for key in props:
            if key in STREAMS_KEYS or _is_client_key(key) or key.startswith(PREFIXES):
                continue
            unknown.append(key)
        if unknown:
            raise StreamsConfigError("Unknown configuration key(s): %s (neither a Kafka Streams key, a client key, "
                                     "nor prefixed with one of %s)" % (", ".join(sorted(unknown)),
                                                                       ", ".join(PREFIXES)))
        for key, (kind, default) in STREAMS_KEYS.items():
            if key in props and key not in ("default.key.serde", "default.value.serde", "windowed.inner.class.serde"):
                self.values[key] = _parse(key, kind, props[key])
            elif key in props:
                self.values[key] = _serde_name(props[key])
            else:
                self.values[key] = default
        for key in ("application.id", "bootstrap.servers"):
            if not self.values.get(key):
                raise StreamsConfigError('Missing required configuration "%s" which has no default value.' % key)
        guarantee = self.values["processing.guarantee"]
        if guarantee not in _GUARANTEES:
            raise StreamsConfigError("Invalid value %s for configuration processing.guarantee: String must be one "
                                     "of: %s" % (guarantee, ", ".join(_GUARANTEES)))
        if "commit.interval.ms" not in props and guarantee == EXACTLY_ONCE_V2:
            self.values["commit.interval.ms"] = 100          # Kafka's EOS default
        if "statestore.cache.max.bytes" not in props and "cache.max.bytes.buffering" in props:
            self.values["statestore.cache.max.bytes"] = self.values["cache.max.bytes.buffering"]
        self.values["cache.max.bytes.buffering"] = self.values["statestore.cache.max.bytes"]
        if self.values["deserialization.exception.handler"] is None:
            self.values["deserialization.exception.handler"] = self.values["default.deserialization.exception.handler"]
        else:
            self.values["default.deserialization.exception.handler"] = self.values["deserialization.exception.handler"]
        for key in sorted(DEFAULT_ONLY):
            if key in props and self.values[key] != STREAMS_KEYS[key][1]:
                raise StreamsConfigError("Invalid value %s for configuration %s: kbroker.streams supports only the "
                                         "default (%s)" % (props[key], key, STREAMS_KEYS[key][1]))
        self._check_ranges()
        for key in ("producer.transactional.id", "transactional.id"):
            if key in props:
                raise StreamsConfigError("Unexpected user-specified producer config: %s; the runtime sets it "
                                         "(<application.id>-<process id>-<thread index>) under exactly_once_v2" % key)
        server = self.values["application.server"]
        if server:
            host, sep, port = server.rpartition(":")
            if not sep or not host or not port.isdigit():
                raise StreamsConfigError("Invalid value %s for configuration application.server: expected "
                                         "host:port" % server)

    def _check_ranges(self):
        v = self.values
        for key, low in (("num.stream.threads", 0), ("commit.interval.ms", 0), ("statestore.cache.max.bytes", 0),
                         ("num.standby.replicas", 0), ("poll.ms", 0), ("buffered.records.per.partition", 1),
                         ("max.task.idle.ms", -1), ("windowstore.changelog.additional.retention.ms", 0),
                         ("repartition.purge.interval.ms", 0), ("log.summary.interval.ms", 0),
                         ("state.cleanup.delay.ms", 0)):
            if v[key] < low:
                raise StreamsConfigError("Invalid value %s for configuration %s: Value must be at least %d"
                                         % (v[key], key, low))
        if v["replication.factor"] == 0 or v["replication.factor"] < -1:
            raise StreamsConfigError("Invalid value %s for configuration replication.factor: Value must be -1 or "
                                     "at least 1" % v["replication.factor"])

    # -- access
    def __getitem__(self, key):
        return self.values[key]

    def get(self, key, default=None):
        return self.values.get(key, default)

    @property
    def application_id(self) -> str:
        return self.values["application.id"]

    @property
    def eos(self) -> bool:
        return self.values["processing.guarantee"] == EXACTLY_ONCE_V2

    def task_config(self) -> dict:
        """Every Streams key with its effective value (and the originals' other keys): ProcessorContext.app_config()."""
        out = dict(self.originals)
        out.update(self.values)
        return out

    def topic_configs(self) -> dict:
        """``topic.*`` keys without the prefix: configs of the internal topics the runtime creates."""
        return {k[len("topic."):]: str(v) for k, v in self.originals.items() if k.startswith("topic.")}

    # -- client configurations (Java names, then translated)
    def _layered(self, accepts, *prefixes) -> dict:
        out = {"bootstrap.servers": self.values["bootstrap.servers"]}
        for key, value in self.originals.items():
            if key not in STREAMS_KEYS and not key.startswith(PREFIXES) and accepts(key):
                out[key] = value
        for prefix in prefixes:
            for key, value in self.originals.items():
                if key.startswith(prefix):      # "main.consumer.x" does not start with "consumer."
                    out[key[len(prefix):]] = value
        return out

    def _translate(self, conf: dict, what: str) -> dict:
        conf = {_RENAMES.get(k, k): v for k, v in conf.items()}
        try:
            out = rdkafka_props.translate({k: str(v) if not isinstance(v, bool) else str(v).lower()
                                           for k, v in conf.items()},
                                          source="%s (%s)" % (what, self.application_id),
                                          warn=log.warning)
        except (rdkafka_props.RdkafkaConfigError, ValueError) as exc:
            raise StreamsConfigError(str(exc)) from None
        return out

    def max_poll_records(self) -> int:
        conf = self._layered(lambda k: k in CONSUMER_KEYS, "consumer.", "main.consumer.")
        try:
            return max(1, int(conf.get("max.poll.records", 1000)))
        except ValueError:
            raise StreamsConfigError("Invalid value %s for configuration max.poll.records"
                                     % conf["max.poll.records"]) from None

    def main_consumer_config(self, client_id: str) -> dict:
        """librdkafka configuration of a StreamThread's group consumer."""
        conf = self._layered(lambda k: k in CONSUMER_KEYS or k in COMMON_CLIENT_KEYS or k.startswith(_CLIENT_PREFIXES),
                             "consumer.", "main.consumer.")
        for key in _CONSUMER_FORCED:
            if key in conf:
                log.warning("Unexpected user-specified consumer config: %s; kbroker.streams sets it itself", key)
        conf.setdefault("auto.offset.reset", "earliest")
        conf.pop("max.poll.records", None)
        conf.update({"group.id": self.application_id, "enable.auto.commit": "false",
                     "partition.assignment.strategy": "range", "client.id": client_id})
        if self.eos:
            conf["isolation.level"] = "read_committed"
        return self._translate(conf, "main consumer")

    def restore_consumer_config(self, client_id: str) -> dict:
        """librdkafka configuration of a restore / standby consumer (assign() only; group.id is a placeholder
        librdkafka wants and that is never joined)."""
        conf = self._layered(lambda k: k in CONSUMER_KEYS or k in COMMON_CLIENT_KEYS or k.startswith(_CLIENT_PREFIXES),
                             "consumer.", "restore.consumer.")
        conf.pop("max.poll.records", None)
        for key in _CONSUMER_FORCED:
            conf.pop(key, None)
        conf.update({"group.id": self.application_id + "-restore", "enable.auto.commit": "false",
                     "auto.offset.reset": "earliest", "client.id": client_id, "enable.partition.eof": "false"})
        conf["isolation.level"] = "read_committed" if self.eos else conf.get("isolation.level", "read_uncommitted")
        return self._translate(conf, "restore consumer")

    def producer_config(self, client_id: str, transactional_id: str | None = None) -> dict:
        """librdkafka configuration of a StreamThread's producer."""
        conf = self._layered(lambda k: k in PRODUCER_KEYS or k in COMMON_CLIENT_KEYS or k.startswith(_CLIENT_PREFIXES),
                             "producer.")
        conf.setdefault("linger.ms", 100)
        conf.update({"client.id": client_id, "enable.idempotence": "true", "acks": "all",
                     "partitioner": "murmur2_random"})
        if transactional_id is not None:
            conf.setdefault("transaction.timeout.ms", 10000)
            conf["transactional.id"] = transactional_id
        out = self._translate(conf, "producer")
        if transactional_id is not None:
            # librdkafka refuses a message timeout longer than the transaction timeout
            out["message.timeout.ms"] = str(min(int(out.get("message.timeout.ms", 300000)),
                                                int(out["transaction.timeout.ms"])))
        return out

    def admin_config(self, client_id: str) -> dict:
        conf = self._layered(lambda k: k in COMMON_CLIENT_KEYS or k.startswith(_CLIENT_PREFIXES), "admin.")
        conf["client.id"] = client_id
        return self._translate(conf, "admin")

    def validate_clients(self) -> None:
        """Build every client configuration once against librdkafka (without bootstrap servers: no connection), so
        a key it does not know fails here with its message naming the key."""
        from confluent_kafka import Consumer, Producer
        from confluent_kafka.admin import AdminClient

        quiet = logging.getLogger("kbroker.streams.config.validate")
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False
        for what, conf, factory in (
                ("main consumer", self.main_consumer_config("validate"), Consumer),
                ("restore consumer", self.restore_consumer_config("validate"), Consumer),
                ("producer", self.producer_config("validate", "validate" if self.eos else None), Producer),
                ("admin", self.admin_config("validate"), AdminClient)):
            conf = dict(conf)
            conf.pop("bootstrap.servers", None)
            conf["logger"] = quiet
            try:
                client = factory(conf)
            except Exception as exc:  # noqa: BLE001 - librdkafka's refusal, reported with the client's name
                raise StreamsConfigError("%s configuration refused by librdkafka: %s" % (what, exc)) from None
            if factory is Consumer:
                client.close()
