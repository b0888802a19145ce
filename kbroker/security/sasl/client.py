"""The client side of SASL for brokers' own connections and the command-line tools.

``client_mechanism(mechanism, username, password)`` builds a PLAIN or SCRAM ``ClientMechanism``;
``authenticate(roundtrip, mechanism)`` runs the whole exchange the modern way (SaslHandshake v1, then one
SaslAuthenticate v1 per token) over any request/response transport: ``roundtrip(api_key, version, body) ->
response dict`` (the caller's socket, TLS or not, encodes with the schemas in ``kbroker/protocol/apis``). It raises
``SaslError`` with Kafka's error code and message (UNSUPPORTED_SASL_MECHANISM 33, SASL_AUTHENTICATION_FAILED 58,
ILLEGAL_SASL_STATE 34) or ``AuthenticationFailed`` when the server's own answer does not check out (a SCRAM server
signature), so a broker never proceeds on a half-authenticated connection.
"""
from kbroker.security.sasl import AuthenticationFailed
from kbroker.security.sasl.plain import PlainClient
from kbroker.security.sasl.scram import MECHANISMS as SCRAM_MECHANISMS, ScramClient

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
HANDSHAKE_VERSION = 1
AUTHENTICATE_VERSION = 1
CLIENT_MECHANISMS = ("PLAIN",) + tuple(sorted(SCRAM_MECHANISMS))


class SaslError(Exception):
    """The broker refused the exchange: ``code`` is its Kafka error code, ``str(e)`` its message."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def client_mechanism(mechanism, username, password):
    """A new client mechanism for one connection; ValueError for a mechanism kbroker has no client for."""
    if mechanism == "PLAIN":
        return PlainClient(username, password)
    if mechanism in SCRAM_MECHANISMS:
        return ScramClient(mechanism, username, password)
    raise ValueError("no SASL client for mechanism %s (kbroker has %s)" % (mechanism, ", ".join(CLIENT_MECHANISMS)))


def authenticate(roundtrip, mechanism):
    """Handshake and authenticate with ``mechanism`` (a fresh ClientMechanism) over ``roundtrip``; returns when
    the broker accepted the credentials and (SCRAM) proved it knows them too."""
    resp = roundtrip(SASL_HANDSHAKE, HANDSHAKE_VERSION, {"mechanism": mechanism.name})
    if resp["error_code"]:
        raise SaslError(resp["error_code"], "SASL handshake for %s failed (error %d); the broker enables: %s"
                        % (mechanism.name, resp["error_code"], ", ".join(resp.get("mechanisms") or ())))
    token = mechanism.first()
    # PLAIN is one token, SCRAM two; a server that keeps asking past this is broken or hostile.
    for _ in range(8):
        resp = roundtrip(SASL_AUTHENTICATE, AUTHENTICATE_VERSION, {"auth_bytes": token})
        if resp["error_code"]:
            raise SaslError(resp["error_code"], resp.get("error_message") or "SASL authentication failed")
        token = mechanism.step(bytes(resp["auth_bytes"] or b""))
        if mechanism.complete:
            return
        if token is None:
            raise AuthenticationFailed("the %s exchange ended without completing" % mechanism.name)
    raise AuthenticationFailed("the broker kept the %s exchange going past 8 tokens" % mechanism.name)


def inter_broker_factory(mechanism, entry, service_name=None):
    """``make(host) -> ClientMechanism`` for a broker's own connections to other brokers' SASL listener, as Kafka
    logs brokers in: with the listener's KafkaServer JAAS entry for ``mechanism``
    (``sasl.mechanism.inter.broker.protocol``) -- PLAIN/SCRAM its ``username``/``password`` options, GSSAPI its
    Krb5LoginModule keytab (``kbroker/security/sasl/gssapi.py``). ValueError naming the entry when it lacks them."""
    if mechanism == "GSSAPI":
        from kbroker.security.sasl import gssapi
        return gssapi.client_factory(entry, service_name)
    username, password = entry.options.get("username"), entry.options.get("password")
    if not username or password is None:
        raise ValueError("%s: the %s login module needs username and password options for the broker's own "
                         "connections (sasl.mechanism.inter.broker.protocol=%s)"
                         % (entry.source, entry.class_name, mechanism))
    client_mechanism(mechanism, username, password)   # an unknown mechanism fails here, at startup
    return lambda host: client_mechanism(mechanism, username, password)
