"""``--command-config client.properties``: how the command-line tools reach a secured listener, with Kafka's client
keys (what ``kafka-topics.sh --command-config`` / ``kafka-console-producer.sh --producer.config`` read).

Keys read (a properties or YAML file):

* ``security.protocol`` -- PLAINTEXT (default), SSL, SASL_PLAINTEXT, SASL_SSL.
* TLS (SSL, SASL_SSL): ``ssl.truststore.location`` / ``.type`` / ``.password`` / ``ssl.truststore.certificates``
  (the CA the broker's certificate must chain to; unset: the system's CAs), ``ssl.keystore.*`` and
  ``ssl.key.password`` (the client certificate, for ``ssl.client.auth=required``),
  ``ssl.endpoint.identification.algorithm`` (https, Kafka's default: the broker's host name is checked; empty: not),
  ``ssl.enabled.protocols``, ``ssl.protocol``, ``ssl.cipher.suites`` -- all with the broker's meaning
  (``kbroker/security/tls.py``: PEM and PKCS12 stores, JKS refused with the keytool conversion).
* SASL (SASL_PLAINTEXT, SASL_SSL): ``sasl.mechanism`` (GSSAPI by default, as in Kafka; PLAIN, SCRAM-SHA-256,
  SCRAM-SHA-512) and ``sasl.jaas.config`` (``PlainLoginModule`` / ``ScramLoginModule`` with ``username`` and
  ``password``; ``Krb5LoginModule`` with ``useKeyTab=true keyTab=... principal=...`` for GSSAPI, plus
  ``sasl.kerberos.service.name``).

Every problem is a ``ClientConfigError`` naming the key; a Java-only key set to something else than its default
(``ssl.provider``, ``ssl.engine.factory.class``, ...) is refused, never ignored. Other client keys (timeouts, batch
sizes: the tools have their own options) are reported on stderr as not used.

The option is taken out of the arguments before a tool parses them (``take``), and ``install`` makes the loaded
security the default of every ``BrokerConnection`` the process opens (one tool run talks to one cluster).
"""
import ssl
import sys

from kbroker.client import connection
from kbroker.security import tls
from kbroker.security.client_channel import PROTOCOLS, ChannelSecurity

OPTIONS = ("--command-config", "--producer.config", "--consumer.config")
_TLS_KEYS = tls.KEYS - {"ssl.client.auth"}
_LIST_KEYS = ("ssl.enabled.protocols", "ssl.cipher.suites")
# Java-only keys: accepted at their Java default (or unset), refused otherwise.
_JAVA_DEFAULTS = {"ssl.provider": None, "ssl.secure.random.implementation": None, "ssl.engine.factory.class": None,
                  "ssl.keymanager.algorithm": "SunX509", "ssl.trustmanager.algorithm": "PKIX"}
_SASL_KEYS = ("sasl.mechanism", "sasl.jaas.config", "sasl.kerberos.service.name")


class ClientConfigError(ValueError):
    """A client property kbroker's tools cannot honour; the message names the key."""


def take(argv, options=OPTIONS):
    """(argv without ``--command-config PATH`` / ``--command-config=PATH``, PATH or None); ValueError when the
    option is given twice or without a path."""
    rest, path = [], None
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if name in options:
            if path is not None:
                raise ClientConfigError("%s given more than once" % name)
            if eq:
                path = value
            elif i + 1 < len(argv):
                path = argv[i + 1]
                i += 1
            else:
                raise ClientConfigError("%s needs a file" % name)
            i += 1
            continue
        rest.append(arg)
        i += 1
    return rest, path


def security_from(props, source="client config"):
    """A ChannelSecurity from Kafka client properties ({key: raw string}); ClientConfigError naming the key."""
    protocol = (props.get("security.protocol") or "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise ClientConfigError("%s: security.protocol=%s is not one of %s" % (source, protocol, ", ".join(PROTOCOLS)))
    for key, default in _JAVA_DEFAULTS.items():
        value = (props.get(key) or "").strip() or None
        if value is not None and value != default:
            raise ClientConfigError("%s: %s=%s is not supported: kbroker's tools use OpenSSL (Python's ssl), not "
                                    "Java's" % (source, key, value))
    context = None
    if protocol.endswith("SSL"):
        settings = {}
        for key in _TLS_KEYS:
            if key in props:
                value = props[key]
                if key in _LIST_KEYS and isinstance(value, str):
                    value = [v.strip() for v in value.split(",") if v.strip()]
                elif isinstance(value, str) and value.strip() == "" and key != "ssl.endpoint.identification.algorithm":
                    value = None
                settings[key] = value
        try:
            context = tls.client_context(settings, ssl.SSLContext)
        except tls.TlsSettingError as e:
            raise ClientConfigError("%s: %s" % (source, e)) from None
    sasl = _sasl_factory(props, source) if protocol.startswith("SASL_") else None
    return ChannelSecurity(protocol, context, sasl)


def _sasl_factory(props, source):
    from kbroker.security import jaas
    from kbroker.security.sasl.client import CLIENT_MECHANISMS, client_mechanism

    mechanism = (props.get("sasl.mechanism") or "GSSAPI").strip().upper()
    value = props.get("sasl.jaas.config")
    if not value:
        raise ClientConfigError("%s: sasl.jaas.config is required for %s (e.g. org.apache.kafka.common.security."
                                "scram.ScramLoginModule required username=\"alice\" password=\"...\";)"
                                % (source, mechanism))
    try:
        entry = jaas.parse_entry(value, "sasl.jaas.config")
    except jaas.JaasError as e:
        raise ClientConfigError("%s: %s" % (source, e)) from None
    if mechanism == "GSSAPI":
        from kbroker.security.sasl import gssapi
        try:
            return gssapi.client_factory(entry, props.get("sasl.kerberos.service.name"))
        except gssapi.GssapiUnavailable as e:
            raise ClientConfigError("%s: %s" % (source, e)) from None
    if mechanism not in CLIENT_MECHANISMS:
        raise ClientConfigError("%s: sasl.mechanism=%s is not supported (%s, GSSAPI)"
                                % (source, mechanism, ", ".join(CLIENT_MECHANISMS)))
    if mechanism not in entry.mechanisms:
        raise ClientConfigError("%s: sasl.jaas.config's %s does not serve sasl.mechanism=%s"
                                % (source, entry.class_name, mechanism))
    user, password = entry.options.get("username"), entry.options.get("password")
    if user is None or password is None:
        raise ClientConfigError("%s: sasl.jaas.config needs username and password options for %s"
                                % (source, mechanism))
    return lambda host: client_mechanism(mechanism, user, password)


def load(path):
    """The ChannelSecurity of a client properties file (module docstring)."""
    from kbroker.config.files import load_file   # the config package: only when a file is given
    try:
        props = load_file(path)
    except OSError as e:
        raise ClientConfigError("cannot read %s: %s" % (path, e.strerror or e)) from None
    unused = sorted(k for k in props if k not in _TLS_KEYS and k not in _JAVA_DEFAULTS and k not in _SASL_KEYS
                    and k not in ("security.protocol", "ssl.client.auth"))
    for key in unused:
        print("WARN The configuration '%s' in %s is not used by kbroker's tools." % (key, path), file=sys.stderr)
    return security_from(props, path)


def install(path):
    """Load ``path`` and make it every BrokerConnection's default security in this process."""
    connection.DEFAULT_SECURITY = load(path)
    return connection.DEFAULT_SECURITY


def apply(argv):
    """``take`` + ``install``: the arguments left for the tool's own parser. Raises ClientConfigError."""
    rest, path = take(argv)
    if path is not None:
        install(path)
    return rest
