"""The worker's configuration (Kafka's WorkerConfig, StandaloneConfig, DistributedConfig).

``WorkerConfig(props, distributed)`` parses ``props`` (str -> str, a worker .properties file) with Kafka's key
names, types and defaults; ``config[key]`` is the typed value. Three kinds of keys:

- honoured: the runtime does what Kafka does with them (most keys below);
- accepted only at their default (``_DEFAULT_ONLY``): known to Kafka, without an equivalent here (metric
  reporters, REST extensions, config providers, exactly-once source support, ...): any other value is a
  ConfigError at startup naming the key, never silently ignored;
- unknown keys: a warning naming each one, as Kafka's "The configuration 'x' was supplied but isn't a known
  config." (client keys under ``producer.``/``consumer.``/``admin.`` and converter keys are known).

Clients (confluent-kafka, i.e. librdkafka): ``producer_config()``, ``consumer_config()``, ``admin_config()`` build
their configuration from ``bootstrap.servers``, the top-level ``security.protocol``/``ssl.*``/``sasl.*`` keys and
the ``producer.``/``consumer.``/``admin.`` prefixed keys (those win), Java property names translated by
kbroker/client/rdkafka_props.py (a key librdkafka cannot honour is refused there, naming it).

The 0.10.1 quickstart's ``internal.key.converter`` / ``internal.value.converter`` (JsonConverter) with
``.schemas.enable=false`` are accepted: that is how the internal topics' records are written here. Any other
internal converter is refused.
"""
import logging
import sys
import time

from kbroker.connect import configdef as cd
from kbroker.connect.configdef import NO_DEFAULT, ConfigDef, Range, ValidString
from kbroker.connect.exceptions import ConfigError, ConnectError

log = logging.getLogger("kbroker.connect.worker_config")

JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
SIMPLE_HEADER_CONVERTER = "org.apache.kafka.connect.storage.SimpleHeaderConverter"
CLIENT_PREFIXES = ("producer.", "consumer.", "admin.")
CONVERTER_PREFIXES = ("key.converter.", "value.converter.", "header.converter.", "internal.key.converter.",
                      "internal.value.converter.")
_CLIENT_TOP_LEVEL = ("security.protocol", "ssl.", "sasl.", "socket.connection.setup.timeout")
_LISTENER_SCHEMES = ("http", "https")


def _common_def():
    d = ConfigDef()
    d.define("bootstrap.servers", cd.LIST, "localhost:9092", importance=cd.HIGH,
             documentation="host:port pairs of the Kafka cluster")
    # librdkafka (>= 2.2) has the same key and values (rdkafka_props drops it as Java-only: put back below).
    d.define("client.dns.lookup", cd.STRING, "use_all_dns_ips",
             ValidString.in_("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only"), importance=cd.MEDIUM)
    # Required, as Kafka's ("Missing required configuration \"key.converter\" which has no default value.").
    d.define("key.converter", cd.CLASS, NO_DEFAULT, importance=cd.HIGH,
             documentation="Converter of record keys (connectors may override it)")
    d.define("value.converter", cd.CLASS, NO_DEFAULT, importance=cd.HIGH,
             documentation="Converter of record values (connectors may override it)")
    d.define("header.converter", cd.CLASS, SIMPLE_HEADER_CONVERTER, importance=cd.LOW)
    d.define("internal.key.converter", cd.CLASS, JSON_CONVERTER, importance=cd.LOW)
    d.define("internal.value.converter", cd.CLASS, JSON_CONVERTER, importance=cd.LOW)
    d.define("task.shutdown.graceful.timeout.ms", cd.LONG, 5000, Range.at_least(0), importance=cd.LOW,
             documentation="How long stopping waits for a task, per task")
    d.define("offset.flush.interval.ms", cd.LONG, 60000, Range.at_least(0), importance=cd.LOW,
             documentation="Interval of the offset commits of tasks")
    d.define("offset.flush.timeout.ms", cd.LONG, 5000, Range.at_least(0), importance=cd.LOW,
             documentation="How long a commit waits for outstanding records before it is cancelled")
    d.define("listeners", cd.LIST, None, importance=cd.LOW)
    d.define("rest.host.name", cd.STRING, None, importance=cd.LOW)
    d.define("rest.port", cd.INT, 8083, Range.between(0, 65535), importance=cd.LOW)
    d.define("rest.advertised.host.name", cd.STRING, None, importance=cd.LOW)
    d.define("rest.advertised.port", cd.INT, None, importance=cd.LOW)
    d.define("rest.advertised.listener", cd.STRING, None, importance=cd.LOW)
    d.define("access.control.allow.origin", cd.STRING, "", importance=cd.LOW)
    d.define("access.control.allow.methods", cd.STRING, "", importance=cd.LOW)
    d.define("admin.listeners", cd.LIST, None, importance=cd.LOW)
    d.define("response.http.headers.config", cd.STRING, "", importance=cd.LOW)
    d.define("rest.extension.classes", cd.LIST, "", importance=cd.LOW)
    d.define("ssl.client.auth", cd.STRING, "none", importance=cd.LOW)
    d.define("plugin.path", cd.LIST, None, importance=cd.LOW,
             documentation="Directories added to sys.path before plugins are looked up")
    d.define("plugin.discovery", cd.STRING, "hybrid_warn", importance=cd.LOW)
    d.define("config.providers", cd.LIST, "", importance=cd.LOW)
    d.define("connector.client.config.override.policy", cd.STRING, "All",
             ValidString.in_("All", "None", "Principal"), importance=cd.MEDIUM,
             documentation="Which producer.override./consumer.override./admin.override. keys connectors may set")
    d.define("topic.creation.enable", cd.BOOLEAN, True, importance=cd.LOW)
    d.define("topic.tracking.enable", cd.BOOLEAN, True, importance=cd.LOW,
             documentation="KIP-558: record the topics connectors use")
    d.define("topic.tracking.allow.reset", cd.BOOLEAN, True, importance=cd.LOW)
    d.define("metrics.sample.window.ms", cd.LONG, 30000, Range.at_least(0), importance=cd.LOW)
    d.define("metrics.num.samples", cd.INT, 2, Range.at_least(1), importance=cd.LOW)
    d.define("metrics.recording.level", cd.STRING, "INFO", ValidString.in_("INFO", "DEBUG"), importance=cd.LOW)
    d.define("metric.reporters", cd.LIST, "", importance=cd.LOW)
    d.define("auto.include.jmx.reporter", cd.BOOLEAN, True, importance=cd.LOW)
    d.define("client.id", cd.STRING, "", importance=cd.LOW)
    d.define("security.protocol", cd.STRING, "PLAINTEXT",
             ValidString.in_("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"), importance=cd.MEDIUM)
    return d


def _standalone_def():
    return _common_def().define("offset.storage.file.filename", cd.STRING, NO_DEFAULT, importance=cd.HIGH,
                                documentation="File to store source offsets in")


def _distributed_def():
    d = _common_def()
    d.define("group.id", cd.STRING, NO_DEFAULT, importance=cd.HIGH)
    d.define("session.timeout.ms", cd.INT, 10000, importance=cd.HIGH)
    d.define("heartbeat.interval.ms", cd.INT, 3000, importance=cd.HIGH)
    d.define("rebalance.timeout.ms", cd.INT, 60000, importance=cd.HIGH)
    d.define("worker.sync.timeout.ms", cd.INT, 3000, importance=cd.MEDIUM)
    d.define("worker.unsync.backoff.ms", cd.INT, 300000, importance=cd.MEDIUM)
    d.define("offset.storage.topic", cd.STRING, NO_DEFAULT, importance=cd.HIGH)
    d.define("offset.storage.partitions", cd.INT, 25, importance=cd.LOW)
    d.define("offset.storage.replication.factor", cd.SHORT, 3, importance=cd.LOW)
    d.define("config.storage.topic", cd.STRING, NO_DEFAULT, importance=cd.HIGH)
    d.define("config.storage.replication.factor", cd.SHORT, 3, importance=cd.LOW)
    d.define("status.storage.topic", cd.STRING, NO_DEFAULT, importance=cd.HIGH)
    d.define("status.storage.partitions", cd.INT, 5, importance=cd.LOW)
    d.define("status.storage.replication.factor", cd.SHORT, 3, importance=cd.LOW)
    d.define("connect.protocol", cd.STRING, "sessioned", ValidString.in_("eager", "compatible", "sessioned"),
             importance=cd.LOW)
    d.define("scheduled.rebalance.max.delay.ms", cd.INT, 300000, Range.at_least(0), importance=cd.LOW)
    d.define("exactly.once.source.support", cd.STRING, "disabled",
             ValidString.in_("disabled", "preparing", "enabled"), importance=cd.HIGH)
    d.define("inter.worker.key.generation.algorithm", cd.STRING, "HmacSHA256", importance=cd.LOW)
    d.define("inter.worker.key.size", cd.INT, None, importance=cd.LOW)
    d.define("inter.worker.key.ttl.ms", cd.INT, 3600000, importance=cd.LOW)
    d.define("inter.worker.signature.algorithm", cd.STRING, "HmacSHA256", importance=cd.LOW)
    d.define("inter.worker.verification.algorithms", cd.LIST, "HmacSHA256", importance=cd.LOW)
    d.define("metadata.max.age.ms", cd.LONG, 300000, importance=cd.LOW)
    d.define("request.timeout.ms", cd.INT, 40000, importance=cd.MEDIUM)
    d.define("retry.backoff.ms", cd.LONG, 100, importance=cd.LOW)
    d.define("reconnect.backoff.ms", cd.LONG, 50, importance=cd.LOW)
    d.define("reconnect.backoff.max.ms", cd.LONG, 1000, importance=cd.LOW)
    d.define("connections.max.idle.ms", cd.LONG, 540000, importance=cd.MEDIUM)
    d.define("receive.buffer.bytes", cd.INT, 32768, importance=cd.MEDIUM)
    d.define("send.buffer.bytes", cd.INT, 131072, importance=cd.MEDIUM)
    return d


# Keys Kafka knows that have no equivalent in this runtime: accepted at their default only (module docstring).
_DEFAULT_ONLY = {
    "config.providers": "config providers (${provider:path:key}) are not supported",
    "rest.extension.classes": "REST extensions are Java classes",
    "metric.reporters": "metric reporters are Java classes",
    "ssl.client.auth": "the REST listener has no TLS client authentication",
    "admin.listeners": "there is no separate admin REST listener",
    "response.http.headers.config": "custom REST response headers are not supported",
    "exactly.once.source.support": "exactly-once source support (KIP-618) is not implemented",
    "metrics.sample.window.ms": "the worker exposes no metrics",
    "metrics.num.samples": "the worker exposes no metrics",
    "metrics.recording.level": "the worker exposes no metrics",
    # Distributed mode (kbroker/connect/distributed): KIP-507's signing of worker-to-worker requests is not
    # implemented (the sessioned protocol is negotiated, requests go unsigned), and the worker's own group and
    # store connections take no top-level network client keys (tasks' clients take producer./consumer./admin.).
    "inter.worker.key.generation.algorithm": "inter-worker request signing (KIP-507) is not implemented",
    "inter.worker.key.size": "inter-worker request signing (KIP-507) is not implemented",
    "inter.worker.key.ttl.ms": "inter-worker request signing (KIP-507) is not implemented",
    "inter.worker.signature.algorithm": "inter-worker request signing (KIP-507) is not implemented",
    "inter.worker.verification.algorithms": "inter-worker request signing (KIP-507) is not implemented",
    "metadata.max.age.ms": "the worker's own connections take no top-level client keys (use producer./consumer./admin.)",
    "request.timeout.ms": "the worker's own connections take no top-level client keys (use producer./consumer./admin.)",
    "reconnect.backoff.ms": "the worker's own connections take no top-level client keys (use producer./consumer./admin.)",
    "reconnect.backoff.max.ms": "the worker's own connections take no top-level client keys (use producer./consumer./"
                                "admin.)",
    "connections.max.idle.ms": "the worker's own connections take no top-level client keys (use producer./consumer./"
                               "admin.)",
    "receive.buffer.bytes": "the worker's own connections take no top-level client keys (use producer./consumer./"
                            "admin.)",
    "send.buffer.bytes": "the worker's own connections take no top-level client keys (use producer./consumer./admin.)",
    "internal.key.converter": "internal topics are written with JsonConverter (schemas disabled) only",
    "internal.value.converter": "internal topics are written with JsonConverter (schemas disabled) only",
}
_INTERNAL_CONVERTER_NAMES = (JSON_CONVERTER, "JsonConverter", "Json")


class WorkerConfig:
    """See the module docstring. ``config[key]`` -> typed value; ``originals`` -> the props as given."""

    def __init__(self, props, distributed=False, warn=None):
        self.distributed = bool(distributed)
        self.originals = {str(k): str(v) if not isinstance(v, str) else v for k, v in props.items()}
        self.definition = _distributed_def() if distributed else _standalone_def()
        self._warn = warn or (lambda m: log.warning(m))
        self.values = self.definition.parse(self.originals)
        self._check_default_only()
        self._check_listeners()
        for key in sorted(self.originals):
            if key not in self.definition and not key.startswith(CLIENT_PREFIXES + CONVERTER_PREFIXES) \
                    and not key.startswith(_CLIENT_TOP_LEVEL):
                self._warn("The configuration '%s' was supplied but isn't a known config." % key)

    def __getitem__(self, key):
        return self.values[key]

    def get(self, key, default=None):
        return self.values.get(key, default)

    def _check_default_only(self):
        for key, why in _DEFAULT_ONLY.items():
            if key not in self.originals or key not in self.definition:
                continue
            value = self.values[key]
            default = self.definition.keys()[key].default
            if key.startswith("internal."):
                if str(value) not in _INTERNAL_CONVERTER_NAMES:
                    raise ConfigError(key, value, why)
                continue
            if value != default and not (isinstance(value, list) and not value and not default):
                raise ConfigError(key, self.originals[key], why)
        for key in ("internal.key.converter.schemas.enable", "internal.value.converter.schemas.enable"):
            raw = self.originals.get(key)
            if raw is not None and raw.strip().lower() != "false":
                raise ConfigError(key, raw, "internal topics are written with JsonConverter, schemas disabled")

    def _check_listeners(self):
        for listener in self.values.get("listeners") or ():
            scheme, sep, rest = listener.partition("://")
            if not sep or scheme.lower() not in _LISTENER_SCHEMES or ":" not in rest:
                raise ConfigError("listeners", listener, "listeners must be of the form protocol://host:port")
            if scheme.lower() == "https":
                raise ConfigError("listeners", listener, "https listeners are not supported")

    # ------------------------------------------------------------------------------------------------ REST
    def rest_listener(self):
        """(host, port) the REST server binds: the first of ``listeners``, else ``rest.host.name``/``rest.port``
        (Kafka's fallback); host "" binds every interface (Kafka's ``http://:8083``)."""
        listeners = self.values.get("listeners")
        if listeners:
            rest = listeners[0].partition("://")[2]
            host, _, port = rest.rpartition(":")
            return host.strip("[]"), int(port)
        return self.values.get("rest.host.name") or "", int(self.values["rest.port"])

    def advertised_url(self):
        """``http://host:port/`` other workers and clients use (rest.advertised.*, else the listener; an empty
        host is the machine's name, as Kafka's)."""
        host, port = self.rest_listener()
        adv_host = self.values.get("rest.advertised.host.name") or host
        adv_port = self.values.get("rest.advertised.port") or port
        if not adv_host or adv_host in ("0.0.0.0", "::"):
            import socket
            adv_host = socket.gethostname()
        scheme = (self.values.get("rest.advertised.listener") or "http").lower()
        if ":" in adv_host and not adv_host.startswith("["):
            adv_host = "[%s]" % adv_host
        return "%s://%s:%d/" % (scheme, adv_host, adv_port)

    # ------------------------------------------------------------------------------------------------ clients
    def _client_props(self, prefix):
        props = {"bootstrap.servers": ",".join(self.values["bootstrap.servers"])}
        for key, value in self.originals.items():
            if key.startswith(_CLIENT_TOP_LEVEL):
                props[key] = value
        for key, value in self.originals.items():
            if key.startswith(prefix):
                props[key[len(prefix):]] = value
        return props

    def client_config(self, kind, overrides=None, source=None):
        """librdkafka configuration of a ``kind`` ("producer" | "consumer" | "admin") client: worker keys, then
        ``overrides`` (a connector's ``<kind>.override.*`` keys, prefix stripped), translated."""
        from kbroker.client.rdkafka_props import RdkafkaConfigError, translate
        props = self._client_props(kind + ".")
        props.update(overrides or {})
        dns = props.pop("client.dns.lookup", None) or self.values["client.dns.lookup"]
        try:
            out = translate(props, source or "worker %s config" % kind, warn=self._warn)
        except RdkafkaConfigError as e:
            raise ConfigError(str(e)) from None
        out["client.dns.lookup"] = dns
        return out

    def converter_configs(self, prefix):
        """The ``<prefix>.`` keys (e.g. "key.converter"), prefix stripped (what Converter.configure receives)."""
        p = prefix + "."
        return {k[len(p):]: v for k, v in self.originals.items() if k.startswith(p)}


def warn_to_stderr(message):
    print("WARN " + message, file=sys.stderr)


CLUSTER_ID_TIMEOUT_S = 60.0     # Kafka's default.api.timeout.ms


def lookup_cluster_id(config, timeout_s=CLUSTER_ID_TIMEOUT_S):
    """The Kafka cluster id from an AdminClient's Metadata (what ``GET /`` reports as ``kafka_cluster_id``), tried
    until ``timeout_s``; ConnectError with Kafka's message when no broker answers with one."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    conf = dict(config.client_config("admin"))
    conf.setdefault("client.id", "kbroker-connect-cluster-id")
    admin = AdminClient(conf)
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            metadata = admin.list_topics(timeout=min(5.0, max(0.1, deadline - time.monotonic())))
            if metadata.cluster_id:
                return metadata.cluster_id
        except KafkaException as e:
            last = e
    raise ConnectError("Failed to connect to and describe Kafka cluster. Check worker's broker connection and "
                       "security properties. (%s)" % (last or "no cluster id in %.0f s" % timeout_s))
