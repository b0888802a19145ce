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
* ZooKeeper TLS (``zookeeper.client.secure=true``, ``zookeeper.clientCnxnSocket``, ``zookeeper.ssl.*``) is not
  implemented: setting any of them stops startup naming it (never a plaintext connection the operator did not ask
  for). ``zookeeper.authProvider.*`` are ZooKeeper *server* properties and mean nothing to a client (ignored, as
  by Java's client).

The section must hold one ``org.apache.zookeeper.server.auth.DigestLoginModule`` entry with ``username`` and
``password``: the login is SASL DIGEST-MD5, the one mechanism kbroker's ZooKeeper client (kazoo) speaks. Any other
module (``com.sun.security.auth.module.Krb5LoginModule``: Kerberos to ZooKeeper) is refused naming it.

Errors are ``ZkClientSecurityError`` (a ValueError) whose message names the property, file or module.
"""
import os
import re
import shlex

from kbroker.coord.zk_security import ZkSaslCredentials

LOGIN_CONFIG = "java.security.auth.login.config"
SASL_CLIENT = "zookeeper.sasl.client"
SASL_CLIENT_CONFIG = "zookeeper.sasl.clientconfig"
SASL_CLIENT_USERNAME = "zookeeper.sasl.client.username"
DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"

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
                "system property %s=%s: ZooKeeper TLS is not supported by kbroker (its ZooKeeper connection is "
                "plaintext); authenticate with SASL (a JAAS Client section) instead" % (name, props[name]))


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
    try:
        entries = load_jaas(path, context)
    except OSError as e:
        raise ZkClientSecurityError("JAAS file %s (%s): %s" % (path, LOGIN_CONFIG, e.strerror or e)) from None
    if not entries:
        return None
    if not _java_bool(props.get(SASL_CLIENT, "true")):
        raise ZkClientSecurityError(
            "JAAS configuration is present, but system property %s is set to false, which disables SASL in the "
            "ZooKeeper client (JAAS file %s, section %s)" % (SASL_CLIENT, path, context))
    source = "JAAS file %s, section %s" % (path, context)
    module, options = entries[0]
    if module != DIGEST_LOGIN_MODULE or len(entries) != 1:
        raise ZkClientSecurityError(
            "%s: login module %s: kbroker logs in to ZooKeeper with SASL DIGEST-MD5 only, which needs exactly one "
            "%s entry with username and password" % (source, module if module != DIGEST_LOGIN_MODULE
                                                     else "%d entries" % len(entries), DIGEST_LOGIN_MODULE))
    missing = [k for k in ("username", "password") if options.get(k) is None]
    if missing:
        raise ZkClientSecurityError("%s: %s needs the option(s) %s" % (source, DIGEST_LOGIN_MODULE,
                                                                     ", ".join(missing)))
    return ZkSaslCredentials(username=options["username"], password=options["password"], mechanism="DIGEST-MD5",
                             service=props.get(SASL_CLIENT_USERNAME) or "zookeeper", source=source)


def _load_jaas(path, context):
    """``[(login module class, {option: value})]`` of section ``context`` of the JAAS file at ``path`` ([] when the
    file has no such section). A malformed file is ZkClientSecurityError naming it."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        sections = parse_jaas(text)
    except ValueError as e:
        raise ZkClientSecurityError("JAAS file %s (%s) is malformed: %s" % (path, LOGIN_CONFIG, e)) from None
    return sections.get(context, [])


_JAAS_TOKEN = re.compile(r'''\s+|//[^\n]*|/\*.*?\*/|"((?:[^"\\]|\\.)*)"|([{};=])|([^\s{};="]+)''', re.S)


def parse_jaas(text):
    """``{section name: [(login module class, {option: value})]}`` of a JAAS file's text (Java's ConfigFile
    syntax: ``Name { module flag key=value key="quoted value"; ... };``, ``//`` and ``/* */`` comments). Raises
    ValueError naming the first thing it cannot read."""
    tokens = []
    pos = 0
    while pos < len(text):
        m = _JAAS_TOKEN.match(text, pos)
        if m is None:
            raise ValueError("unexpected character %r at offset %d" % (text[pos], pos))
        pos = m.end()
        if m.group(1) is not None:
            tokens.append(("word", re.sub(r"\\(.)", r"\1", m.group(1))))
        elif m.group(2) is not None:
            tokens.append(("sym", m.group(2)))
        elif m.group(3) is not None:
            tokens.append(("word", m.group(3)))
    sections = {}
    i = 0

    def take(kind, value=None):
        nonlocal i
        if i >= len(tokens) or tokens[i][0] != kind or (value is not None and tokens[i][1] != value):
            got = tokens[i][1] if i < len(tokens) else "end of file"
            raise ValueError("expected %s, got %r" % (value or kind, got))
        i += 1
        return tokens[i - 1][1]

    while i < len(tokens):
        name = take("word")
        take("sym", "{")
        entries = []
        while i < len(tokens) and tokens[i] != ("sym", "}"):
            module = take("word")
            flag = take("word")
            if flag.lower() not in ("required", "requisite", "sufficient", "optional"):
                raise ValueError("section %s: login module %s: bad control flag %r" % (name, module, flag))
            options = {}
            while i < len(tokens) and tokens[i] != ("sym", ";"):
                key = take("word")
                take("sym", "=")
                options[key] = take("word")
            take("sym", ";")
            entries.append((module, options))
        take("sym", "}")
        take("sym", ";")
        sections[name] = entries
    return sections
