"""One connection's server side of SASL (Kafka's ``SaslServerAuthenticator``), before any other request is served.

States and what each accepts (anything else closes the connection, as Kafka's IllegalSaslStateException does)::

    HANDSHAKE   ApiVersions (any version, served by the router as usual; at most MAX_API_VERSIONS of them),
                SaslHandshake v0/v1 naming an enabled mechanism -> RAW (v0) or AUTHENTICATE (v1).
                A mechanism not enabled on the listener: UNSUPPORTED_SASL_MECHANISM (33) with the enabled list,
                then close. A *first* frame that is no Kafka request (Kafka 0.9's bare GSSAPI token, 0x60...) is
                GSSAPI's first token when the listener enables GSSAPI -> RAW, as in Kafka; else it closes.
    AUTHENTICATE  SaslAuthenticate v0-v2 requests, one token each; each answer carries the mechanism's challenge.
    RAW         (after a v0 handshake) frames are bare SASL tokens -- size prefix, no request header -- answered
                the same way (PLAIN's success is a zero-length frame, as in Kafka).
    COMPLETE    the connection serves requests as ``User:<authorization id>``.

Failure: a SaslAuthenticate response with SASL_AUTHENTICATION_FAILED (58) and the mechanism's message, then close;
in RAW there is no way to say why, so the connection just closes (Kafka does the same). Refused credentials are
answered ``connection.failed.authentication.delay.ms`` (default 100) late, as Kafka does (KIP-306), and the
connection then lets the peer close first (up to 1 s; kbroker/server/connection.py ``_linger``), so that the answer
is not lost to our FIN or RST. The session lifetime is always 0 (no re-authentication: ``connections.max.reauth.ms``
is refused unless 0, KIP-368 is not implemented).

Bounds (hostile clients): every frame before COMPLETE is at most ``sasl.server.max.receive.size`` bytes (the
connection's FrameReader is set to it; Kafka's default 524288); a mechanism takes at most its ``MAX_STEPS`` tokens;
at most ``MAX_API_VERSIONS`` ApiVersions requests precede the handshake. Time: each frame must arrive within
``socket.request.receive.timeout.ms`` of its first byte and a connection silent for ``connections.max.idle.ms`` is
closed (kbroker/server/connection.py), so a client that connects and never authenticates holds its socket at most
that long -- which is also Kafka's only bound.

Mechanisms come from a table (``SERVER_MECHANISMS``: name -> ``module:function``), so the GSSAPI module plugs in
like the others: ``server_factory(mechanism, entry, context) -> callable() -> ServerMechanism``, with ``entry`` the
JAAS LoginModule for that listener and mechanism (``kbroker/security/jaas.py``) and ``context`` a
``MechanismContext`` (the listener, the SCRAM credential cache, mechanism-specific plain settings). A mechanism's
module is imported only when a listener enables it.
"""
import importlib
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from kbroker.protocol.apis import APIS
from kbroker.protocol.headers import decode_request_header, encode_response_header, peek_request_header
from kbroker.protocol.schema import SchemaError, Writer
from kbroker.security.sasl import AuthenticationFailed

log = logging.getLogger(__name__)

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED = 33, 34, 58
DEFAULT_MAX_RECEIVE_SIZE = 524288
# connection.failed.authentication.delay.ms's default (KIP-306): a refused client hears so 100 ms later, which
# slows password guessing and lets clients read the answer before the close.
DEFAULT_FAILURE_DELAY_MS = 100
# ApiVersions a client may send before its handshake (librdkafka: 1, or 2 after an UNSUPPORTED_VERSION answer).
MAX_API_VERSIONS = 4

SERVER_MECHANISMS = {
    "PLAIN": "kbroker.security.sasl.plain:server_factory",
    "SCRAM-SHA-256": "kbroker.security.sasl.scram:server_factory",
    "SCRAM-SHA-512": "kbroker.security.sasl.scram:server_factory",
    "GSSAPI": "kbroker.security.sasl.gssapi:server_factory",
}

HANDSHAKE, AUTHENTICATE, RAW, COMPLETE, FAILED = "handshake", "authenticate", "raw", "complete", "failed"


class SaslConfigError(ValueError):
    """A listener's SASL settings cannot be served (unknown mechanism, module missing, no JAAS entry)."""


@dataclass
class MechanismContext:
    """What a mechanism's ``server_factory`` may use besides its JAAS entry."""
    listener: str
    scram_credentials: Optional[Callable[[str, str], Any]] = None   # (user, mechanism) -> ScramCredential | None
    settings: dict = field(default_factory=dict)                   # mechanism-specific (sasl.kerberos.*, host)


def load_factory(mechanism, entry, context):
    """The ``callable() -> ServerMechanism`` for ``mechanism`` from the table; SaslConfigError when kbroker has no
    such mechanism or its module cannot be loaded."""
    target = SERVER_MECHANISMS.get(mechanism)
    if target is None:
        raise SaslConfigError("SASL mechanism %s is not supported by kbroker (it has %s)"
                              % (mechanism, ", ".join(sorted(SERVER_MECHANISMS))))
    module, _, fn = target.partition(":")
    try:
        factory = getattr(importlib.import_module(module), fn)
    except (ImportError, AttributeError) as e:
        raise SaslConfigError("SASL mechanism %s is not available: %s" % (mechanism, e)) from None
    return factory(mechanism, entry, context)


class ListenerSasl:
    """One SASL listener's settings: ``mechanisms`` ({name: factory} in sasl.enabled.mechanisms order) and
    ``max_receive_size``. ``new_authenticator()`` for each accepted connection."""

    def __init__(self, listener, mechanisms, max_receive_size=DEFAULT_MAX_RECEIVE_SIZE,
                 failure_delay_ms=DEFAULT_FAILURE_DELAY_MS):
        if not mechanisms:
            raise SaslConfigError("listener %s has no SASL mechanism enabled" % listener)
        self.listener = listener
        self.mechanisms = dict(mechanisms)
        self.max_receive_size = max_receive_size
        self.failure_delay_s = failure_delay_ms / 1000.0

    def new_authenticator(self):
        return Authenticator(self)


class Verdict:
    """What the connection does with one frame: ``reply`` (a Writer to send, or None), ``close`` (a reason, or
    None: close after sending ``reply``), ``dispatch`` (serve the frame as a normal request: ApiVersions)."""
    __slots__ = ("reply", "close", "dispatch")

    def __init__(self, reply=None, close=None, dispatch=False):
        self.reply = reply
        self.close = close
        self.dispatch = dispatch


def _raw_frame(token):
    w = Writer()
    w.buf += token
    return w


def _response(api, version, corr, body):
    w = Writer()
    w.buf += encode_response_header(api.response_header_version(version), corr)
    api.encode_response(version, body, w)
    return w


class Authenticator:
    """One connection's SASL state machine (module docstring). ``receive(payload) -> Verdict``; ``complete``,
    ``principal`` once authenticated; ``raw`` while frames are bare tokens (the connection accepts frames of any
    size from 0 up to ``max_receive_size`` then)."""

    def __init__(self, settings):
        self.settings = settings
        self.max_receive_size = settings.max_receive_size
        self.failure_delay_s = settings.failure_delay_s
        self.state = HANDSHAKE
        self.mechanism = None
        self.principal = None
        self._api_versions = 0
        self._steps = 0
        self._credentials_refused = False

    @property
    def complete(self):
        return self.state == COMPLETE

    @property
    def failed(self):
        """The credentials were refused (not a protocol violation): the connection delays its answer by
        ``failure_delay_s`` (Kafka's connection.failed.authentication.delay.ms) before closing."""
        return self.state == FAILED and self._credentials_refused

    @property
    def raw(self):
        return self.state == RAW

    def receive(self, payload):
        if self.state == RAW:
            return self._token(payload, None)
        try:
            api_key, version, corr = peek_request_header(payload)
        except SchemaError as e:
            if self._legacy_gssapi_frame():
                return self._start_legacy_gssapi(payload)
            return self._refuse("unparsable request before SASL authentication: %s" % e)
        if api_key not in APIS and self._legacy_gssapi_frame():
            return self._start_legacy_gssapi(payload)
        if self.state == HANDSHAKE:
            if api_key == API_VERSIONS:
                self._api_versions += 1
                if self._api_versions > MAX_API_VERSIONS:
                    return self._refuse("more than %d ApiVersions requests before the SASL handshake"
                                        % MAX_API_VERSIONS)
                return Verdict(dispatch=True)
            if api_key == SASL_HANDSHAKE:
                return self._handshake(payload, version, corr)
        elif self.state == AUTHENTICATE and api_key == SASL_AUTHENTICATE:
            return self._authenticate(payload, version, corr)
        return self._refuse("unexpected request (api key %d) during SASL %s" % (api_key, self.state))

    # ------------------------------------------------------------------------------------------------- steps

    def _legacy_gssapi_frame(self):
        """Kafka 0.9 clients send a bare GSSAPI token (ASN.1, first byte 0x60: no request header parses, or its
        "api key" 0x60xx is none) as their very first frame, without SaslHandshake. Kafka takes such a first frame
        as GSSAPI when the listener enables it (SaslServerAuthenticator's INITIAL_REQUEST state); so does kbroker."""
        return self.state == HANDSHAKE and self._api_versions == 0 and "GSSAPI" in self.settings.mechanisms

    def _start_legacy_gssapi(self, payload):
        try:
            self.mechanism = self.settings.mechanisms["GSSAPI"]()
        except Exception as e:  # noqa: BLE001 - as in _handshake: this client fails, never the broker
            log.warning("SASL GSSAPI on listener %s could not start: %r", self.settings.listener, e)
            self.state = FAILED
            return Verdict(close="SASL mechanism GSSAPI failed to start")
        self.state = RAW
        return self._token(payload, None)

    def _refuse(self, reason):
        self.state = FAILED
        return Verdict(close="%s (ILLEGAL_SASL_STATE)" % reason)

    def _decode(self, api_key, payload, version):
        api = APIS[api_key]
        lo, hi = api.valid
        if not lo <= version <= hi:
            raise SchemaError("unsupported %s version %d" % (api.name, version))
        header, pos = decode_request_header(payload, api.request_header_version(version))
        return api, api.decode_request(version, payload, pos, max_elements=64)

    def _handshake(self, payload, version, corr):
        try:
            api, req = self._decode(SASL_HANDSHAKE, payload, version)
        except SchemaError as e:
            return self._refuse("malformed SaslHandshake: %s" % e)
        enabled = list(self.settings.mechanisms)
        name = req["mechanism"]
        if name not in self.settings.mechanisms:
            self.state = FAILED
            reply = _response(api, version, corr, {"error_code": UNSUPPORTED_SASL_MECHANISM, "mechanisms": enabled})
            return Verdict(reply, close="SASL mechanism %r is not enabled on listener %s (enabled: %s)"
                           % (name, self.settings.listener, ", ".join(enabled)))
        try:
            self.mechanism = self.settings.mechanisms[name]()
        except Exception as e:  # noqa: BLE001 - a mechanism that cannot start (GSSAPI keytab...) fails this client only
            log.warning("SASL %s on listener %s could not start: %r", name, self.settings.listener, e)
            self.state = FAILED
            return Verdict(_response(api, version, corr, {"error_code": UNSUPPORTED_SASL_MECHANISM,
                                                          "mechanisms": enabled}),
                           close="SASL mechanism %s failed to start" % name)
        self.state = RAW if version == 0 else AUTHENTICATE
        return Verdict(_response(api, version, corr, {"error_code": 0, "mechanisms": enabled}))

    def _authenticate(self, payload, version, corr):
        try:
            api, req = self._decode(SASL_AUTHENTICATE, payload, version)
        except SchemaError as e:
            return self._refuse("malformed SaslAuthenticate: %s" % e)
        return self._token(bytes(req["auth_bytes"] or b""), (api, version, corr))

    def _token(self, token, request):
        """Run one mechanism step; ``request`` is (api, version, corr) of the SaslAuthenticate carrying it, or
        None for a raw token."""
        mech = self.mechanism
        self._steps += 1
        try:
            if self._steps > mech.MAX_STEPS:
                raise AuthenticationFailed("Authentication failed: more than %d SASL %s tokens"
                                           % (mech.MAX_STEPS, mech.name))
            challenge = mech.step(token)
        except AuthenticationFailed as e:
            return self._failed(str(e), request)
        except Exception as e:  # noqa: BLE001 - a mechanism bug fails this client, never the broker
            log.exception("SASL %s step failed on listener %s", mech.name, self.settings.listener)
            return self._failed("Authentication failed during authentication due to invalid credentials with SASL "
                                "mechanism %s" % mech.name, request, detail=repr(e))
        if mech.complete:
            self.state = COMPLETE
            self.principal = "User:%s" % mech.authorization_id
        if request is None:
            return Verdict(_raw_frame(challenge) if challenge is not None else None)
        api, version, corr = request
        return Verdict(_response(api, version, corr, {"error_code": 0, "error_message": None,
                                                      "auth_bytes": challenge or b"", "session_lifetime_ms": 0}))

    def _failed(self, message, request, detail=None):
        self.state = FAILED
        self._credentials_refused = True
        reason = "SASL %s authentication failed: %s" % (self.mechanism.name, detail or message)
        if request is None:
            return Verdict(close=reason)
        api, version, corr = request
        return Verdict(_response(api, version, corr, {"error_code": SASL_AUTHENTICATION_FAILED,
                                                      "error_message": message, "auth_bytes": b"",
                                                      "session_lifetime_ms": 0}), close=reason)
