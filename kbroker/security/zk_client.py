"""How a broker or a tool logs in to ZooKeeper: the Java system properties Kafka users set, and the JAAS ``Client``
section (Kafka's documentation section 7.6; ``JaasUtils.isZkSaslEnabled`` and ZooKeeper's client).

Kafka's brokers and tools take these as JVM system properties, which operators put in ``KAFKA_OPTS``
(``export KAFKA_OPTS="-Djava.security.auth.login.config=/etc/kafka/kafka_server_jaas.conf"``); kbroker reads the
``-Dkey=value`` words of the ``KAFKA_OPTS`` environment variable the same way (``system_properties``):

* ``java.security.auth.login.config`` -- the JAAS file. Absent: no SASL towards ZooKeeper.
* ``zookeeper.sasl.clientconfig`` (default ``Client``) -- the JAAS section the ZooKeeper client logs in with. A file
  without that section means no SASL (ZooKeeper's client then connects unauthenticated, as Java's does).
* ``zookeeper.sasl.client`` (default ``true``) -- ``false`` with the section present is an error, as in Kafka
  ("JAAS configuration is present, but system property zookeeper.sasl.client is set to false").
* ``zookeeper.sasl.client.username`` (default ``zookeeper``) -- the SASL service name of the ensemble.
* ZooKeeper TLS as system properties (``zookeeper.client.secure=true``, ``zookeeper.clientCnxnSocket``,
  ``zookeeper.ssl.*``) stops startup naming the property: kbroker takes TLS from the broker keys of the same names
  (Kafka >= 2.5's; ``zk_tls_context`` below), so the tools, which have no broker config, never connect in plaintext
  where TLS was asked for. ``zookeeper.authProvider.*`` are ZooKeeper *server* properties and mean nothing to a
  client (ignored, as by Java's client).

The section must hold one ``org.apache.zookeeper.server.auth.DigestLoginModule`` entry with ``username`` and
``password`` (Kafka's PlainLoginModule or ScramLoginModule with the same two options work too, as with Java's
ZooKeeper client, which logs in with any subject holding a username and password): the login is SASL DIGEST-MD5, the
one mechanism kbroker's ZooKeeper client (kazoo) speaks. ``com.sun.security.auth.module.Krb5LoginModule`` (Kerberos
to ZooKeeper) is refused naming it. The file is parsed by kbroker.security.jaas, the parser of the KafkaServer
sections too.

Errors are ``ZkClientSecurityError`` (a ValueError) whose message names the property, file or module.
"""
import os
import shlex

from kbroker.coord.zk_security import ZkSaslCredentials

from . import jaas

LOGIN_CONFIG = jaas.PROPERTY
SASL_CLIENT = "zookeeper.sasl.client"
SASL_CLIENT_CONFIG = "zookeeper.sasl.clientconfig"
SASL_CLIENT_USERNAME = "zookeeper.sasl.client.username"
DIGEST_LOGIN_MODULE = jaas.DIGEST_MODULE
# Modules that put a username and password in the JAAS subject: ZooKeeper's client logs in with them over DIGEST-MD5
# whichever of these the section uses (ZooKeeperSaslClient: a subject without principals means DIGEST-MD5).
_CREDENTIAL_MODULES = (jaas.DIGEST_MODULE, jaas.PLAIN_MODULE, jaas.SCRAM_MODULE)

# ZooKeeper client TLS system properties (ZooKeeper 3.5+; Kafka >= 2.5 also as zookeeper.ssl.* broker keys, refused
# in config/keys.py): any of them set would ask for a TLS connection kbroker does not make.
_TLS_PROPERTIES = ("zookeeper.client.secure", "zookeeper.clientCnxnSocket")
_TLS_PREFIX = "zookeeper.ssl."


class ZkClientSecurityError(ValueError):
    """The ZooKeeper client's security settings cannot be honoured; the message names what and why."""


def system_properties(kafka_opts=None):
    """``{name: value}`` of the ``-Dname=value`` words of ``kafka_opts`` (default: ``$KAFKA_OPTS``), split as a
    POSIX shell would (quotes); ``-Dname`` alone gives ``""``. Other JVM options are ignored."""
    if kafka_opts is None:
        kafka_opts = os.environ.get("KAFKA_OPTS", "")
    try:
        words = shlex.split(kafka_opts or "")
    except ValueError as e:
        raise ZkClientSecurityError("KAFKA_OPTS cannot be split into words: %s" % e) from None
    props = {}
    for w in words:
        if w.startswith("-D") and len(w) > 2:
            name, _, value = w[2:].partition("=")
            props[name] = value
    return props


def _java_bool(value):
    """Java's Boolean.parseBoolean: true only for "true", any case."""
    return str(value).strip().lower() == "true"


def _check_no_tls(props):
    for name in sorted(props):
        if name in _TLS_PROPERTIES or name.startswith(_TLS_PREFIX):
            if name == "zookeeper.client.secure" and not _java_bool(props[name]):
                continue
            raise ZkClientSecurityError(
                "system property %s=%s: kbroker takes ZooKeeper TLS from the broker keys zookeeper.ssl.* and "
                "zookeeper.clientCnxnSocket (Kafka >= 2.5), not from system properties" % (name, props[name]))


def zk_sasl_credentials(props=None, load_jaas=None):
    """The ZkSaslCredentials the ZooKeeper client logs in with, or None for no SASL (module docstring has the
    rules). ``props``: system properties (default: from ``$KAFKA_OPTS``); ``load_jaas(path)``: the JAAS parser
    (default kbroker.security.jaas.load)."""
    props = system_properties() if props is None else props
    _check_no_tls(props)
    path = props.get(LOGIN_CONFIG)
    if not path:
        return None
    context = props.get(SASL_CLIENT_CONFIG) or "Client"
    if load_jaas is None:
        load_jaas = _load_jaas
    entries = load_jaas(path, context)
    if not entries:
        return None
    if not _java_bool(props.get(SASL_CLIENT, "true")):
        raise ZkClientSecurityError(
            "JAAS configuration is present, but system property %s is set to false, which disables SASL in the "
            "ZooKeeper client (JAAS file %s, section %s)" % (SASL_CLIENT, path, context))
    source = "JAAS file %s, section %s" % (path, context)
    module, options = entries[0]
    if len(entries) != 1:
        raise ZkClientSecurityError("%s: %d login modules; the ZooKeeper client logs in with exactly one (%s)"
                                    % (source, len(entries), DIGEST_LOGIN_MODULE))
    if module not in _CREDENTIAL_MODULES:
        # Krb5LoginModule means GSSAPI to ZooKeeper: kazoo's GSSAPI needs pykerberos, which kbroker does not ship.
        raise ZkClientSecurityError(
            "%s: login module %s: kbroker logs in to ZooKeeper with SASL DIGEST-MD5 only (%s with username and "
            "password); Kerberos to ZooKeeper is not supported" % (source, module, DIGEST_LOGIN_MODULE))
    missing = [k for k in ("username", "password") if options.get(k) is None]
    if missing:
        raise ZkClientSecurityError("%s: %s needs the option(s) %s" % (source, DIGEST_LOGIN_MODULE,
                                                                     ", ".join(missing)))
    return ZkSaslCredentials(username=options["username"], password=options["password"], mechanism="DIGEST-MD5",
                             service=props.get(SASL_CLIENT_USERNAME) or "zookeeper", source=source)


def _load_jaas(path, context):
    """``[(login module class, {option: value})]`` of section ``context`` of the JAAS file at ``path`` ([] when the
    file has no such section), read by kbroker.security.jaas (the one JAAS parser: KafkaServer sections too)."""
    try:
        section = jaas.load(path).section(context)
    except jaas.JaasError as e:
        raise ZkClientSecurityError(str(e)) from None
    return [(entry.class_name, dict(entry.options)) for entry in section or ()]


# --------------------------------------------------------------------------------------------- TLS (Kafka >= 2.5)

NETTY_SOCKET = "org.apache.zookeeper.ClientCnxnSocketNetty"
# zookeeper.ssl.X -> the ssl.X setting of kbroker.security.tls (the same meaning, Kafka's KIP-515 naming).
ZK_TLS_KEYS = ("zookeeper.ssl.client.enable", "zookeeper.clientCnxnSocket", "zookeeper.ssl.keystore.location",
               "zookeeper.ssl.keystore.password", "zookeeper.ssl.keystore.type", "zookeeper.ssl.truststore.location",
               "zookeeper.ssl.truststore.password", "zookeeper.ssl.truststore.type", "zookeeper.ssl.protocol",
               "zookeeper.ssl.enabled.protocols", "zookeeper.ssl.cipher.suites",
               "zookeeper.ssl.endpoint.identification.algorithm")
_EXTENSION_TYPES = {".pem": "PEM", ".p12": "PKCS12", ".pfx": "PKCS12", ".jks": "JKS"}


def _store_type(values, key, location_key):
    """The store type ``values[key]``, or, unset, ZooKeeper's guess from the extension of ``values[location_key]``."""
    declared = values.get(key)
    if declared:
        return declared.strip().upper()
    location = values.get(location_key) or ""
    guessed = _EXTENSION_TYPES.get(os.path.splitext(location)[1].lower())
    if guessed is None:
        raise ZkClientSecurityError("%s: unset, and the file name %r does not tell it (.pem, .p12, .pfx, .jks): set "
                                    "it to PEM or PKCS12" % (key, location))
    return guessed


def zk_tls_context(values, context_class=None):
    """``(SSLContext, client_auth)`` for TLS to ZooKeeper from the ``zookeeper.ssl.*`` / ``zookeeper.clientCnxnSocket``
    values (``{key: value}``, ZK_TLS_KEYS), or ``(None, False)`` when ``zookeeper.ssl.client.enable`` is false.
    ``client_auth``: a keystore is set, so the session is authenticated by its certificate (ZooKeeper's ``x509``
    scheme) and may create secure ACLs without SASL, as in Kafka. Rules:

    * TLS needs ``zookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty`` (ZooKeeper's NIO client
      socket has no TLS); any other value is refused, and so is any zookeeper.ssl.* store or protocol key set while
      ``zookeeper.ssl.client.enable`` is false (it would do nothing).
    * Stores as kbroker.security.tls reads the ``ssl.*`` ones (PEM, PKCS12; JKS refused with the conversion), type
      guessed from the extension when unset, as ZooKeeper does. A PEM keystore's password is its key's.
    * ``zookeeper.ssl.endpoint.identification.algorithm`` (default HTTPS) checks the server's host name.
    ZkClientSecurityError names the zookeeper.* key at fault."""
    from . import tls

    enabled = values.get("zookeeper.ssl.client.enable")
    socket_class = values.get("zookeeper.clientCnxnSocket")
    if not enabled:
        stray = [k for k in ZK_TLS_KEYS[1:] if k.startswith("zookeeper.ssl.") and k.endswith((".location", ".type"))
                 and values.get(k)]
        if socket_class and socket_class != NETTY_SOCKET:
            stray.insert(0, "zookeeper.clientCnxnSocket")
        if stray:
            raise ZkClientSecurityError("%s: set while zookeeper.ssl.client.enable is false, where it does nothing"
                                        % stray[0])
        return None, False
    if socket_class != NETTY_SOCKET:
        raise ZkClientSecurityError("zookeeper.clientCnxnSocket: must be %s with zookeeper.ssl.client.enable=true "
                                    "(ZooKeeper's TLS client socket), not %r" % (NETTY_SOCKET, socket_class))
    settings = {"ssl.protocol": values.get("zookeeper.ssl.protocol"),
                "ssl.enabled.protocols": values.get("zookeeper.ssl.enabled.protocols"),
                "ssl.cipher.suites": values.get("zookeeper.ssl.cipher.suites"),
                "ssl.endpoint.identification.algorithm": values.get("zookeeper.ssl.endpoint.identification.algorithm",
                                                                     "HTTPS")}
    if values.get("zookeeper.ssl.keystore.location"):
        kind = _store_type(values, key="zookeeper.ssl.keystore.type", location_key="zookeeper.ssl.keystore.location")
        settings.update({"ssl.keystore.location": values["zookeeper.ssl.keystore.location"], "ssl.keystore.type": kind})
        password = _secret(values.get("zookeeper.ssl.keystore.password"))
        settings["ssl.key.password" if kind == "PEM" else "ssl.keystore.password"] = password
    if values.get("zookeeper.ssl.truststore.location"):
        kind = _store_type(values, key="zookeeper.ssl.truststore.type",
                           location_key="zookeeper.ssl.truststore.location")
        settings.update({"ssl.truststore.location": values["zookeeper.ssl.truststore.location"],
                         "ssl.truststore.type": kind})
        if kind != "PEM":
            settings["ssl.truststore.password"] = _secret(values.get("zookeeper.ssl.truststore.password"))
    settings = {k: v for k, v in settings.items() if v is not None}
    if context_class is None:
        import gevent.ssl
        context_class = gevent.ssl.SSLContext   # cooperative sockets, whether or not the process is monkey-patched
    try:
        ctx = tls.client_context(settings, context_class=context_class)
    except tls.TlsSettingError as e:
        raise ZkClientSecurityError("zookeeper.%s: %s" % (_zk_key(e.key), e.reason)) from None
    return ctx, "ssl.keystore.location" in settings


def _secret(value):
    """A password as a str: the broker config hands its hidden wrapper (``.value``), tests a plain str."""
    return getattr(value, "value", value)


def _zk_key(ssl_key):
    """``ssl.key.password`` (a PEM keystore's) -> ``ssl.keystore.password``: the zookeeper.* key that fed it."""
    return "ssl.keystore.password" if ssl_key == "ssl.key.password" else ssl_key
