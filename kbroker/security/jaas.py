"""JAAS configuration as Kafka reads it: JAAS files and ``sasl.jaas.config`` values.

A JAAS file holds named sections of login-module entries (Java's ``ConfigFile`` syntax)::

    KafkaServer {
        org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret"
        user_admin="admin-secret" user_alice="alice-secret";
        org.apache.kafka.common.security.scram.ScramLoginModule required;
    };
    Client { org.apache.kafka.common.security.plain.PlainLoginModule required username="kafka" password="x"; };

An entry is ``<class> <flag> [name=value ...];`` with flag ``required | requisite | sufficient | optional``;
values are double-quoted strings (backslash escapes) or bare words; ``//`` and ``/* */`` comments. A
``sasl.jaas.config`` value is one entry alone (Kafka refuses a value with zero or several entries).

Where the file comes from (``resolve_path``): the JVM system property ``java.security.auth.login.config``, which
Kafka users pass as ``-Djava.security.auth.login.config=/path`` in the ``KAFKA_OPTS`` environment variable; kbroker
reads it there and only there (no broker key of its own: the ZooKeeper client's ``Client`` section comes from the
same place, so one setting serves both, exactly as for Kafka).

Which entry a listener's mechanism uses (``server_entry``), Kafka's precedence (``JaasContext.loadServerContext``):
``listener.name.<listener>.<mechanism>.sasl.jaas.config`` (names lowercased), else the file's
``<listener>.KafkaServer`` section, else its ``KafkaServer`` section; none -> ``JaasError`` naming both. A broker-wide
``sasl.jaas.config`` is ignored by Kafka's brokers (with a warning): kbroker does the same (the key table says so).

Login modules kbroker knows (``LOGIN_MODULES``): PlainLoginModule (PLAIN's users are its ``user_<name>`` options;
``username``/``password`` are what the broker itself sends), ScramLoginModule (credentials live in
``/config/users``; ``username``/``password`` for the broker's own connections), and Krb5LoginModule (GSSAPI; its
options are the GSSAPI mechanism's). Any other class stops startup naming the file or key it came from.
"""
import os
import re
import shlex

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
KRB5_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
# ZooKeeper's own module, for the Client section (DIGEST-MD5 to ZooKeeper: kbroker/security/zk_client.py); it serves
# no Kafka mechanism.
DIGEST_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
LOGIN_MODULES = {PLAIN_MODULE: ("PLAIN",), SCRAM_MODULE: ("SCRAM-SHA-256", "SCRAM-SHA-512"), KRB5_MODULE: ("GSSAPI",),
                 DIGEST_MODULE: ()}
FLAGS = ("required", "requisite", "sufficient", "optional")
PROPERTY = "java.security.auth.login.config"
SERVER_SECTION = "KafkaServer"
CLIENT_SECTION = "Client"
# A JAAS file is a few KiB; anything this big is not one (and would hold the event loop while parsed).
MAX_FILE_BYTES = 1024 * 1024

_TOKEN = re.compile(r'\s+|//[^\n]*|/\*.*?\*/|"(?:[^"\\]|\\.)*"|[{};=]|(?!//|/\*)[^\s{};="]+', re.S)
_ESCAPE = re.compile(r"\\(.)", re.S)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}


class JaasError(ValueError):
    """A JAAS file or sasl.jaas.config value kbroker cannot use; the message names where it came from."""


class LoginModule:
    """One entry: ``class_name``, ``flag``, ``options`` ({name: str}); ``source`` names its file or key."""
    __slots__ = ("class_name", "flag", "options", "source")

    def __init__(self, class_name, flag, options, source):
        self.class_name = class_name
        self.flag = flag
        self.options = options
        self.source = source

    def __repr__(self):  # never the options: they hold passwords
        return "LoginModule(%s %s, %s)" % (self.class_name, self.flag, self.source)

    @property
    def mechanisms(self):
        return LOGIN_MODULES.get(self.class_name, ())


class JaasConfig:
    """A parsed JAAS file: ``section(name) -> [LoginModule] | None``."""

    def __init__(self, sections, source):
        self.sections = sections
        self.source = source

    def section(self, name):
        return self.sections.get(name)

    def __contains__(self, name):
        return name in self.sections


def _tokens(text, source):
    pos = 0
    for m in _TOKEN.finditer(text):
        if m.start() != pos:
            break
        pos = m.end()
        tok = m.group()
        if tok[0].isspace() or tok.startswith("//") or tok.startswith("/*"):
            continue
        if tok[0] == '"':
            yield ("str", _ESCAPE.sub(lambda e: _ESCAPES.get(e.group(1), e.group(1)), tok[1:-1]))
        elif tok in "{};=":
            yield ("punct", tok)
        else:
            yield ("word", tok)
    if pos != len(text):
        raise JaasError("%s: cannot parse JAAS configuration at character %d (an unterminated quote or comment?)"
                        % (source, pos))


class _Parser:
    def __init__(self, text, source):
        self.toks = list(_tokens(text, source))
        self.i = 0
        self.source = source

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else (None, None)

    def take(self, kind=None, value=None, what="a token"):
        tok = self.peek()
        if tok[0] is None or (kind is not None and tok[0] != kind) or (value is not None and tok[1] != value):
            raise JaasError("%s: expected %s, found %s" % (self.source, what, "the end" if tok[0] is None
                                                             else repr(tok[1])))
        self.i += 1
        return tok[1]

    def entry(self):
        """``<class> <flag> [k=v ...] ;`` -> LoginModule."""
        cls = self.take("word", what="a login module class name")
        flag = self.take("word", what="a control flag (%s) after %s" % ("/".join(FLAGS), cls))
        if flag.lower() not in FLAGS:
            raise JaasError("%s: login module %s has control flag %r; expected one of %s"
                            % (self.source, cls, flag, ", ".join(FLAGS)))
        options = {}
        while self.peek() != ("punct", ";"):
            name = self.take("word", what="an option name or ';' in the %s entry" % cls)
            self.take("punct", "=", what="'=' after option %s" % name)
            kind, value = self.peek()
            if kind not in ("str", "word"):
                raise JaasError("%s: option %s of %s has no value" % (self.source, name, cls))
            self.i += 1
            options[name] = value
        self.take("punct", ";")
        if cls not in LOGIN_MODULES:
            raise JaasError("%s: login module %s is not supported by kbroker (it has %s)"
                            % (self.source, cls, ", ".join(sorted(LOGIN_MODULES))))
        return LoginModule(cls, flag.lower(), options, self.source)

    def file(self):
        sections = {}
        while self.peek()[0] is not None:
            name = self.take("word", what="a section name")
            self.take("punct", "{", what="'{' after section %s" % name)
            entries = []
            while self.peek() != ("punct", "}"):
                entries.append(self.entry())
            self.take("punct", "}")
            self.take("punct", ";", what="';' after section %s's '}'" % name)
            if name in sections:
                raise JaasError("%s: section %s appears twice" % (self.source, name))
            sections[name] = entries
        return sections


def parse(text, source="<JAAS>"):
    """Parse a JAAS file's text -> JaasConfig; JaasError naming ``source`` when malformed or naming an unknown
    login module."""
    return JaasConfig(_Parser(text, source).file(), source)


def load(path):
    """Read and parse the JAAS file at ``path`` (JaasError naming it when unreadable or malformed)."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise JaasError("JAAS file %s (%s): %s" % (path, PROPERTY, e.strerror or e)) from None
    if len(raw) > MAX_FILE_BYTES:
        raise JaasError("JAAS file %s is larger than %d bytes" % (path, MAX_FILE_BYTES))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise JaasError("JAAS file %s is not UTF-8" % path) from None
    return parse(text, "JAAS file %s" % path)


def parse_entry(value, key):
    """A ``sasl.jaas.config`` value -> its one LoginModule; JaasError naming ``key`` otherwise."""
    p = _Parser(value or "", key)
    entries = []
    while p.peek()[0] is not None:
        entries.append(p.entry())
    if len(entries) != 1:
        raise JaasError("%s: a JAAS config value must hold exactly one login module, found %d"
                        % (key, len(entries)))
    return entries[0]


def path_from_env(environ=None):
    """The ``-Djava.security.auth.login.config=<path>`` of ``KAFKA_OPTS`` (the last one wins, as in the JVM), or
    None."""
    env = os.environ if environ is None else environ
    found = None
    try:
        words = shlex.split(env.get("KAFKA_OPTS", "") or "")
    except ValueError:
        words = (env.get("KAFKA_OPTS", "") or "").split()
    for w in words:
        if w.startswith("-D%s=" % PROPERTY):
            found = w.split("=", 1)[1]
    return found or None


def resolve_path(configured=None, environ=None):
    """The JAAS file to use: ``configured`` when given (tests, tools), else KAFKA_OPTS's."""
    return configured or path_from_env(environ)


def server_entry(listener, mechanism, listener_values, jaas_file):
    """The login module serving ``mechanism`` on ``listener`` (Kafka's precedence, module docstring).

    ``listener_values``: {``listener.name.<l>.<m>.sasl.jaas.config`` key: raw value} of the broker's config;
    ``jaas_file``: a JaasConfig or None. The file's section may hold several modules: the one whose class serves
    ``mechanism`` is taken. JaasError when none applies."""
    key = "listener.name.%s.%s.sasl.jaas.config" % (listener.lower(), mechanism.lower())
    if listener_values.get(key):
        entry = parse_entry(listener_values[key], key)
        if mechanism not in entry.mechanisms:
            raise JaasError("%s: login module %s does not serve %s" % (key, entry.class_name, mechanism))
        return entry
    if jaas_file is not None:
        for name in ("%s.%s" % (listener.lower(), SERVER_SECTION), SERVER_SECTION):
            section = jaas_file.section(name)
            if section is None:
                continue
            for entry in section:
                if mechanism in entry.mechanisms:
                    return entry
            raise JaasError("%s: section %s has no login module for %s (%s)"
                            % (jaas_file.source, name, mechanism,
                               " or ".join(m for m, mechs in LOGIN_MODULES.items() if mechanism in mechs)))
    raise JaasError("no JAAS configuration for %s on listener %s: set %s, or give a JAAS file with a '%s.%s' or "
                    "'%s' section (-D%s=<file> in KAFKA_OPTS)"
                    % (mechanism, listener, key, listener.lower(), SERVER_SECTION, SERVER_SECTION, PROPERTY))
