"""SASL GSSAPI (Kerberos V5, RFC 4752), server and client side, over MIT Kerberos through python-gssapi.

The exchange (tokens as the SaslAuthenticate ``auth_bytes``, or raw after SaslHandshake v0)::

    client                                   server (GssapiServer)
    AP-REQ (gss_init_sec_context)      ->    gss_accept_sec_context with the broker's keytab
                                       <-    AP-REP (mutual authentication; empty when the client asked none)
    b"" (nothing more to say)          ->    (skipped when the server had no AP-REP to send)
                                       <-    wrap(0x01 | 3-byte max size)   security layers offered: "none" only
    wrap(0x01 | 3-byte size | authzid) ->    unwrap; layer must be 0x01; authzid checked; complete
                                       <-    (nothing: the exchange ends; SaslAuthenticate answers b"")

The 4-byte messages are wrapped for integrity only (``conf_req=False``), as RFC 4752 section 3.1 asks. kbroker
offers no SASL security layer (0x01 = "no security layer"; integrity or confidentiality after authentication is
not what Kafka does either -- Kafka's clients refuse them -- use SASL_SSL for that). The offered maximum size is
65536, Java's GssKrb5Server default (``javax.security.sasl.maxbuffer``); clients that pick "no layer" ignore it.

Identity (Kafka's SaslServerCallbackHandler): the principal is ``User:<short name>`` of the Kerberos principal the
ticket names (``sasl.kerberos.principal.to.local.rules``, ``kbroker/security/kerberos.py``); a principal no rule
maps is refused. The authorization id a client appends to its last message must be UTF-8 but never changes who
the client is: Kafka ignores it (its callback handler authorises any and uses the ticket's principal), and real
clients fill it inconsistently -- Java sends its own principal, kafka-python and aiokafka send the *service's*
name (``kafka@localhost``) -- so refusing a mismatch would lock those clients out while adding no safety.

Broker configuration (``server_settings``): the JAAS ``KafkaServer`` (or per-listener) entry
``com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="/path"
principal="kafka/host@REALM";`` and ``sasl.kerberos.service.name`` (or the JAAS option ``serviceName``; Kafka
refuses a GSSAPI listener with neither). The acceptor credential is acquired once, at startup, for exactly
``principal`` from exactly ``keyTab`` (``gss_acquire_cred_from``: nothing else in the process's environment,
/etc/krb5.keytab included, is used), so a wrong path or a keytab without the principal stops startup. Every
connection's context uses that credential: ``gss_accept_sec_context`` is a local computation (decrypting the
ticket with the keytab's key, plus MIT's replay cache), no KDC round trip, so it runs on the event loop.

python-gssapi is imported only when GSSAPI is configured (``GssapiUnavailable`` otherwise: its install hint).
"""
from kbroker.security.kerberos import KerberosName, NoMatchingRule, ShortNamer
from kbroker.security.sasl import AuthenticationFailed, ClientMechanism, ServerMechanism

NAME = "GSSAPI"
LOGIN_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
# RFC 4752 security-layer bit mask: 1 = no security layer, 2 = integrity, 4 = confidentiality.
LAYER_NONE = 0x01
MAX_BUFFER = 65536
# Kafka's answer to any failed GSSAPI exchange (SaslServerAuthenticator, a SaslException from the mechanism).
FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism GSSAPI"
INSTALL_HINT = ("SASL mechanism GSSAPI needs the Python package 'gssapi' (pip install 'kbroker[gssapi]'); it "
                "compiles against MIT Kerberos (Debian: apt-get install libkrb5-dev gcc)")


class GssapiUnavailable(ValueError):
    """GSSAPI is configured but cannot be used (python-gssapi missing, the keytab or principal unusable); the
    message names the key or JAAS option to fix. The composition root turns it into a startup error."""


def _gssapi():
    try:
        import gssapi  # noqa: PLC0415 - optional dependency, only for brokers that enable GSSAPI
    except ImportError as exc:
        raise GssapiUnavailable("%s (%s)" % (INSTALL_HINT, exc)) from None
    return gssapi


def default_realm():
    """The default realm of the Kerberos configuration this process sees (KRB5_CONFIG, else /etc/krb5.conf), or
    "" when there is none: canonicalising an unqualified principal appends it."""
    gssapi = _gssapi()
    try:
        name = gssapi.Name("kbroker", gssapi.NameType.kerberos_principal).canonicalize(gssapi.MechType.kerberos)
    except gssapi.exceptions.GSSError:
        return ""
    text = str(name)
    return text.split("@", 1)[1] if "@" in text else ""


def _true(value):
    return str(value).strip().lower() == "true"


class GssapiServerSettings:
    """What every GSSAPI connection of one listener shares: the acceptor credential and the short namer.

    ``principal``: the broker's own (``kafka/host@REALM``); ``keytab``: its path; ``service_name``:
    ``sasl.kerberos.service.name``; ``namer``: a ShortNamer."""

    def __init__(self, principal, keytab, service_name, namer, creds):
        self.principal = principal
        self.keytab = keytab
        self.service_name = service_name
        self.namer = namer
        self.creds = creds

    def mechanism(self):
        """A fresh server mechanism for one connection."""
        return GssapiServer(self)


def server_settings(options, service_name=None, rules=None, realm=None, source="JAAS KafkaServer"):
    """Build a listener's GSSAPI settings from its Krb5LoginModule ``options`` (JAAS, {name: str}),
    ``sasl.kerberos.service.name``, ``sasl.kerberos.principal.to.local.rules`` (list or comma-separated string)
    and the default realm (None: the Kerberos configuration's). GssapiUnavailable names what is wrong."""
    gssapi = _gssapi()
    service = service_name or options.get("serviceName")
    if not service:
        raise GssapiUnavailable("SASL mechanism GSSAPI: no serviceName defined in either JAAS (%s) or Kafka config "
                                "(sasl.kerberos.service.name)" % source)
    if options.get("serviceName") and service_name and options["serviceName"] != service_name:
        raise GssapiUnavailable("SASL mechanism GSSAPI: conflicting serviceName %r (%s) and "
                                "sasl.kerberos.service.name %r" % (options["serviceName"], source, service_name))
    if not _true(options.get("useKeyTab", "false")) or not options.get("keyTab"):
        raise GssapiUnavailable("SASL mechanism GSSAPI: the broker's Krb5LoginModule (%s) needs useKeyTab=true and "
                                "keyTab=\"<path>\" (a broker cannot accept Kerberos tickets from a ticket cache)"
                                % source)
    principal = options.get("principal")
    if not principal:
        raise GssapiUnavailable("SASL mechanism GSSAPI: the broker's Krb5LoginModule (%s) needs "
                                "principal=\"<service>/<host>@<REALM>\"" % source)
    keytab = options["keyTab"]
    try:
        with open(keytab, "rb"):
            pass
    except OSError as exc:
        raise GssapiUnavailable("SASL mechanism GSSAPI: keyTab %s (%s): %s" % (keytab, source, exc.strerror or exc)) \
            from None
    if realm is None:
        realm = default_realm()
    try:
        namer = ShortNamer(realm, rules)
    except ValueError as exc:
        raise GssapiUnavailable("sasl.kerberos.principal.to.local.rules: %s" % exc) from None
    try:
        name = gssapi.Name(principal, gssapi.NameType.kerberos_principal)
        creds = gssapi.Credentials(name=name, usage="accept", store={"keytab": keytab})
    except gssapi.exceptions.GSSError as exc:
        raise GssapiUnavailable("SASL mechanism GSSAPI: cannot use principal %s from keyTab %s (%s): %s"
                                % (principal, keytab, source, _gss_message(exc))) from None
    return GssapiServerSettings(principal, keytab, service, namer, creds)


def _gss_message(exc):
    try:
        return exc.gen_message()
    except Exception:  # noqa: BLE001 - a message for a log line, never worth a second failure
        return str(exc)


def _layer_message(layers, max_size, authzid=b""):
    """RFC 4752's 4-octet security-layer message (+ the client's authorization id)."""
    return bytes([layers]) + max_size.to_bytes(3, "big") + authzid


_CONTEXT, _AWAIT_EMPTY, _AWAIT_LAYER, _DONE = range(4)


class GssapiServer(ServerMechanism):
    """The server side for one connection (module docstring has the exchange). ``kerberos_name`` is the client's
    full principal once complete; ``authorization_id`` its short name."""
    name = NAME
    # AP-REQ, the empty token after the AP-REP, the security-layer answer: 3; a few more for multi-leg GSS
    # mechanisms' continuation tokens (krb5 itself never needs them).
    MAX_STEPS = 6

    def __init__(self, settings):
        super().__init__()
        self._gssapi = _gssapi()
        self._settings = settings
        self._ctx = self._gssapi.SecurityContext(creds=settings.creds, usage="accept")
        self._state = _CONTEXT
        self.kerberos_name = None
        self.requested_authorization_id = None

    def step(self, token):
        try:
            return self._step(bytes(token))
        except self._gssapi.exceptions.GSSError:
            self._state = _DONE
            raise AuthenticationFailed(FAILED) from None

    def _step(self, token):
        if self._state == _CONTEXT:
            if not token:
                raise AuthenticationFailed(FAILED)
            out = self._ctx.step(token)
            if not self._ctx.complete:
                return out or b""
            self.kerberos_name = str(self._ctx.initiator_name)
            if out:
                self._state = _AWAIT_EMPTY
                return out
            return self._offer()
        if self._state == _AWAIT_EMPTY:
            # RFC 4752: the client's answer to the final context token carries nothing; its content is ignored.
            return self._offer()
        if self._state == _AWAIT_LAYER:
            return self._accept_layer(token)
        raise AuthenticationFailed("Unexpected SASL GSSAPI message after the exchange ended")

    def _offer(self):
        self._state = _AWAIT_LAYER
        return self._ctx.wrap(_layer_message(LAYER_NONE, MAX_BUFFER), False).message

    def _accept_layer(self, token):
        self._state = _DONE
        plain = self._ctx.unwrap(token).message
        if len(plain) < 4:
            raise AuthenticationFailed(FAILED)
        if plain[0] != LAYER_NONE:
            # We offered only "no security layer"; a client choosing another one (or several) is broken.
            raise AuthenticationFailed(FAILED)
        try:
            authzid = plain[4:].decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed(FAILED) from None
        try:
            short = self._settings.namer.short_name(KerberosName.parse(self.kerberos_name))
        except (NoMatchingRule, ValueError):
            raise AuthenticationFailed(FAILED) from None
        self.requested_authorization_id = authzid  # for logs only (module docstring: never the identity)
        self.authorization_id = short
        self.complete = True
        return None


class GssapiClient(ClientMechanism):
    """The client side (inter-broker and tools): ``principal`` and ``keytab`` from the JAAS entry, the service
    ``service_name/host`` it talks to. Tickets go to a private in-memory credential cache (nothing in the
    process's KRB5CCNAME is read or written).

    ``first()`` contacts the KDC (an AS and a TGS request: blocking sockets inside MIT's library, which gevent
    cannot see). In a process whose ``socket`` module gevent has patched (the broker), that work runs in gevent's
    native thread pool so the event loop keeps serving while the KDC answers -- or times out (MIT waits ~1 s per
    KDC address and retries up to ``max_retries`` times). Elsewhere (the command-line tools) it runs inline."""
    name = NAME

    def __init__(self, principal, keytab, service_name, host):
        super().__init__()
        self._gssapi = _gssapi()
        self.principal = principal
        self._keytab = keytab
        self._target_text = "%s@%s" % (service_name, host)
        self._ctx = None
        self._layer_sent = False

    def _start(self):
        gssapi = self._gssapi
        target = gssapi.Name(self._target_text, gssapi.NameType.hostbased_service)
        # One in-process ticket cache per (principal, keytab): a cache holds one principal's tickets, and naming it
        # after id(self) let a later client for another principal reuse a freed id and find the wrong principal's
        # cache ("Principal in credential cache does not match desired name"); per principal it is also bounded.
        cache = ("%s\0%s" % (self.principal, self._keytab)).encode().hex()
        store = {"client_keytab": self._keytab, "ccache": "MEMORY:kbroker-%s" % cache}
        creds = gssapi.Credentials(name=gssapi.Name(self.principal, gssapi.NameType.kerberos_principal),
                                   usage="initiate", store=store)
        flags = [gssapi.RequirementFlag.mutual_authentication, gssapi.RequirementFlag.integrity]
        self._ctx = gssapi.SecurityContext(name=target, creds=creds, usage="initiate", flags=flags)
        return self._ctx.step() or b""

    def first(self):
        try:
            return _off_loop(self._start)
        except self._gssapi.exceptions.GSSError as exc:
            raise AuthenticationFailed("GSSAPI: cannot get a ticket for %s as %s: %s"
                                       % (self._target_text, self.principal, _gss_message(exc))) from None

    def step(self, challenge):
        gssapi = self._gssapi
        try:
            if not self._ctx.complete:
                out = self._ctx.step(bytes(challenge))
                return out or b""
            if self._layer_sent:
                self.complete = True
                return None
            plain = self._ctx.unwrap(bytes(challenge)).message
            if len(plain) != 4 or not plain[0] & LAYER_NONE:
                raise AuthenticationFailed("GSSAPI: the server offers no usable security layer (%r)" % plain[:1])
            self._layer_sent = True
            # The server completes on this message and answers with an empty token; the step on that answer
            # (above) completes this side.
            return self._ctx.wrap(_layer_message(LAYER_NONE, 0, self.principal.encode("utf-8")), False).message
        except gssapi.exceptions.GSSError as exc:
            raise AuthenticationFailed("GSSAPI: %s" % _gss_message(exc)) from None


def _off_loop(fn):
    """``fn()`` in gevent's thread pool when this process runs gevent with a patched socket module, else inline."""
    import sys  # noqa: PLC0415
    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None and monkey.is_module_patched("socket"):
        import gevent  # noqa: PLC0415
        return gevent.get_hub().threadpool.apply(fn)
    return fn()


def client_factory(entry, service_name=None):
    """The broker's own GSSAPI client for its inter-broker connections: ``entry`` is the listener's JAAS
    Krb5LoginModule (Kafka logs brokers in with their KafkaServer entry for both directions), ``service_name``
    ``sasl.kerberos.service.name``. Returns ``make(host) -> GssapiClient`` (one per connection: the ticket is
    for ``<service>/<host>`` of the broker connected to). GssapiUnavailable when the entry cannot serve."""
    options = entry.options
    service = service_name or options.get("serviceName")
    if not service:
        raise GssapiUnavailable("SASL mechanism GSSAPI: no serviceName defined in either JAAS (%s) or Kafka config "
                                "(sasl.kerberos.service.name)" % entry.source)
    if not _true(options.get("useKeyTab", "false")) or not options.get("keyTab") or not options.get("principal"):
        raise GssapiUnavailable("SASL mechanism GSSAPI between brokers: the Krb5LoginModule (%s) needs "
                                "useKeyTab=true, keyTab and principal" % entry.source)
    _gssapi()
    return lambda host: GssapiClient(options["principal"], options["keyTab"], service, host)


SERVICE_NAME_KEY = "sasl.kerberos.service.name"
RULES_KEY = "sasl.kerberos.principal.to.local.rules"
REALM_SETTING = "default.realm"


def server_factory(mechanism, entry, context):
    """The authenticator's table entry (kbroker/security/authenticator.py). ``entry``: the listener's JAAS
    Krb5LoginModule; ``context.settings`` may hold ``sasl.kerberos.service.name`` (str),
    ``sasl.kerberos.principal.to.local.rules`` (list or comma-separated str; default DEFAULT) and
    ``default.realm`` (tests; default: the Kerberos configuration's). Acquires the acceptor credential now, at
    startup: GssapiUnavailable (a ValueError naming the key or JAAS option) when it cannot."""
    settings = getattr(context, "settings", None) or {}
    source = getattr(entry, "source", None) or "JAAS KafkaServer"
    return server_settings(entry.options, settings.get(SERVICE_NAME_KEY), settings.get(RULES_KEY),
                           settings.get(REALM_SETTING), source=source).mechanism
