"""Kafka (Java) client properties -> a librdkafka configuration, for the tools built on confluent-kafka
(``kbroker-mirror-maker``, ``producer-perf-test``, ``consumer-perf-test``, ``verifiable-producer``,
``verifiable-consumer``) and kbroker-connect's worker (kbroker/connect/worker_config.py): the files an operator
passes to Kafka's tools (``--consumer.config``, ``--producer.config``, ``--producer-props k=v``) work unchanged.

Rules, in order, for each key of the file:

* A key whose name and meaning are the same in both clients (``bootstrap.servers``, ``group.id``, ``acks``,
  ``linger.ms``, ``batch.size``, ``compression.type``, ``session.timeout.ms``, ``auto.offset.reset``,
  ``enable.idempotence``, ...) is passed as it is; librdkafka then checks its value.
* Renamed keys (``RENAMES``): ``receive.buffer.bytes`` -> ``socket.receive.buffer.bytes`` (Java's -1, "the OS
  default", is librdkafka's 0), ``send.buffer.bytes`` -> ``socket.send.buffer.bytes``, ``max.request.size`` ->
  ``message.max.bytes``, ``delivery.timeout.ms`` -> ``message.timeout.ms``, ``sasl.mechanism`` ->
  ``sasl.mechanisms``; ``buffer.memory`` (bytes) -> ``queue.buffering.max.kbytes`` (KiB, at least 1).
* Values Java spells differently: ``auto.offset.reset=none`` -> ``error``; ``partition.assignment.strategy`` class
  names -> ``range`` / ``roundrobin`` / ``cooperative-sticky`` (the eager StickyAssignor has no librdkafka twin:
  refused); ``ssl.endpoint.identification.algorithm=`` (empty: no host check) -> ``none``.
* TLS stores: a PEM truststore becomes ``ssl.ca.location``; a PKCS12 keystore ``ssl.keystore.location`` +
  ``ssl.keystore.password``, a PEM one (certificate and key in one file) ``ssl.certificate.location`` +
  ``ssl.key.location``. librdkafka reads no PKCS12 truststore and no JKS: refused, naming the key.
* ``sasl.jaas.config``: PlainLoginModule / ScramLoginModule -> ``sasl.username`` + ``sasl.password``;
  Krb5LoginModule -> ``sasl.kerberos.keytab`` + ``sasl.kerberos.principal``.
* Java-only keys (``JAVA_ONLY``: serializers, interceptors, ``max.block.ms``, ``max.poll.records``, ...) are
  dropped with a warning on stderr naming each one: they have no meaning for librdkafka.

Anything else goes through as it is: a key librdkafka does not know then fails the tool's start with
librdkafka's own message, which names it (``RdkafkaConfigError`` from ``check``). Errors never pass silently.
"""
import sys

RENAMES = {
    "receive.buffer.bytes": "socket.receive.buffer.bytes",
    "send.buffer.bytes": "socket.send.buffer.bytes",
    "max.request.size": "message.max.bytes",
    "delivery.timeout.ms": "message.timeout.ms",
    "sasl.mechanism": "sasl.mechanisms",
}
JAVA_ONLY = frozenset([
    "key.serializer", "value.serializer", "key.deserializer", "value.deserializer", "interceptor.classes",
    "partitioner.class", "partitioner.ignore.keys", "partitioner.adaptive.partitioning.enable",
    "partitioner.availability.timeout.ms", "max.block.ms", "max.poll.records", "default.api.timeout.ms",
    "metric.reporters", "metrics.num.samples", "metrics.sample.window.ms", "metrics.recording.level",
    "client.dns.lookup", "exclude.internal.topics", "security.providers", "sasl.login.class",
    "sasl.client.callback.handler.class", "sasl.login.callback.handler.class", "ssl.truststore.password",
    "ssl.truststore.type", "ssl.keystore.type", "ssl.protocol", "ssl.enabled.protocols", "ssl.provider",
    "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm", "ssl.secure.random.implementation",
    "auto.include.jmx.reporter", "retry.backoff.max.ms",
])
ASSIGNORS = {"RangeAssignor": "range", "RoundRobinAssignor": "roundrobin",
             "CooperativeStickyAssignor": "cooperative-sticky", "range": "range", "roundrobin": "roundrobin",
             "cooperative-sticky": "cooperative-sticky"}
# Keys a librdkafka AdminClient needs to reach the same cluster as a producer/consumer configuration.
_CONNECTION_PREFIXES = ("bootstrap.servers", "security.protocol", "ssl.", "sasl.", "socket.", "broker.address.",
                        "client.id", "metadata.broker.list")


class RdkafkaConfigError(ValueError):
    """A property the librdkafka tools cannot honour; the message names the key (and the file)."""


def load(path):
    """A properties (or YAML) file -> {key: str}; RdkafkaConfigError when it cannot be read."""
    from kbroker.config.files import load_file
    from kbroker.config.values import ConfigError
    try:
        return {k: str(v) for k, v in load_file(path).items()}
    except OSError as e:
        raise RdkafkaConfigError("cannot read %s: %s" % (path, e.strerror or e)) from None
    except ConfigError as e:
        raise RdkafkaConfigError(str(e)) from None


def parse_pairs(items, what="property"):
    """['k=v', ...] (``--producer-props``, ``--property``) -> {k: v}; RdkafkaConfigError on an item without '='."""
    out = {}
    for item in items or ():
        k, sep, v = item.partition("=")
        if not sep or not k.strip():
            raise RdkafkaConfigError("Invalid %s %r: expected key=value" % (what, item))
        out[k.strip()] = v.strip()
    return out


def _store(key, path, kind, source):
    lower = path.lower()
    if kind == "JKS" or lower.endswith(".jks"):
        raise RdkafkaConfigError("%s: %s=%s is a JKS store, which librdkafka cannot read: convert it with "
                                 "keytool -importkeystore -deststoretype PKCS12 (keystore) or export the CA as "
                                 "PEM (truststore)" % (source, key, path))
    return "PKCS12" if kind == "PKCS12" or lower.endswith((".p12", ".pfx")) else "PEM"


def _jaas(value, source):
    from kbroker.security import jaas
    try:
        entry = jaas.parse_entry(value, "sasl.jaas.config")
    except jaas.JaasError as e:
        raise RdkafkaConfigError("%s: %s" % (source, e)) from None
    name = entry.class_name.rsplit(".", 1)[-1]
    opts = entry.options
    if name in ("PlainLoginModule", "ScramLoginModule"):
        if "username" not in opts or "password" not in opts:
            raise RdkafkaConfigError("%s: sasl.jaas.config needs username and password" % source)
        return {"sasl.username": opts["username"], "sasl.password": opts["password"]}
    if name == "Krb5LoginModule":
        out = {}
        if opts.get("keyTab"):
            out["sasl.kerberos.keytab"] = opts["keyTab"]
        if opts.get("principal"):
            out["sasl.kerberos.principal"] = opts["principal"]
        return out
    raise RdkafkaConfigError("%s: sasl.jaas.config login module %s is not supported" % (source, entry.class_name))


def translate(props, source="client config", warn=None):
    """Java client properties ({key: str}) -> librdkafka configuration ({key: str}) (module docstring).
    ``warn(message)`` receives one line per dropped Java-only key (default: stderr)."""
    warn = warn or (lambda m: print(m, file=sys.stderr))
    out = {}
    for key, raw in props.items():
        value = str(raw).strip()
        if key in JAVA_ONLY:
            if key not in ("ssl.truststore.type", "ssl.keystore.type", "ssl.truststore.password"):
                warn("WARN The configuration '%s' in %s is not used by librdkafka (Java client only)."
                     % (key, source))
            continue
        if key in RENAMES:
            if key in ("receive.buffer.bytes", "send.buffer.bytes") and value == "-1":
                value = "0"
            out[RENAMES[key]] = value
        elif key == "buffer.memory":
            out["queue.buffering.max.kbytes"] = str(max(1, int(value) // 1024))
        elif key == "auto.offset.reset" and value == "none":
            out[key] = "error"
        elif key == "partition.assignment.strategy":
            names = []
            for cls in (c.strip() for c in value.split(",") if c.strip()):
                short = cls.rsplit(".", 1)[-1]
                if short not in ASSIGNORS:
                    raise RdkafkaConfigError("%s: partition.assignment.strategy %s has no librdkafka equivalent "
                                             "(range, roundrobin, cooperative-sticky)" % (source, cls))
                names.append(ASSIGNORS[short])
            out[key] = ",".join(names)
        elif key == "ssl.endpoint.identification.algorithm":
            out[key] = value.lower() or "none"
        elif key == "ssl.truststore.location":
            if _store(key, value, props.get("ssl.truststore.type", "").upper(), source) != "PEM":
                raise RdkafkaConfigError("%s: ssl.truststore.location=%s: librdkafka reads a PEM truststore "
                                         "only (ssl.truststore.type=PEM)" % (source, value))
            out["ssl.ca.location"] = value
        elif key == "ssl.keystore.location":
            if _store(key, value, props.get("ssl.keystore.type", "").upper(), source) == "PKCS12":
                out["ssl.keystore.location"] = value
                if props.get("ssl.keystore.password"):
                    out["ssl.keystore.password"] = props["ssl.keystore.password"]
            else:
                out["ssl.certificate.location"] = out["ssl.key.location"] = value
        elif key == "ssl.keystore.password":
            continue   # with ssl.keystore.location (PKCS12); a PEM key's password is ssl.key.password
        elif key == "sasl.jaas.config":
            out.update(_jaas(value, source))
        else:
            out[key] = value
    return out


def load_translated(path, warn=None):
    """``translate(load(path))``."""
    return translate(load(path), path, warn)


def connection_only(conf):
    """The part of a librdkafka configuration that reaches the cluster (bootstrap, security): for an AdminClient
    next to a producer or consumer built from ``conf``."""
    return {k: v for k, v in conf.items() if k.startswith(_CONNECTION_PREFIXES)}


def check(factory, conf, source):
    """``factory(conf)`` (a confluent-kafka Producer/Consumer/AdminClient), with librdkafka's refusal of a key or
    value turned into RdkafkaConfigError naming ``source``."""
    from confluent_kafka import KafkaException
    try:
        return factory(conf)
    except (KafkaException, ValueError, TypeError) as e:
        raise RdkafkaConfigError("%s: %s" % (source, e)) from None
