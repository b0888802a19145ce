"""The client side of a listener's security: connect to a broker endpoint as its listener requires.

Used by brokers towards each other (replica fetchers, the controller's channel, controlled shutdown: always on the
peer's endpoint of the inter-broker -- or control-plane -- listener, with this broker's own settings for that
listener) and by the command-line tools (``--command-config client.properties``).

``ChannelSecurity(protocol, ssl_context=None, sasl=None)`` says how:

* ``protocol``: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
* ``ssl_context``: for SSL / SASL_SSL, a client context from ``kbroker/security/tls.py`` ``client_context`` (the
  truststore that verifies the broker, the keystore for mutual TLS, host-name checking). Its class decides the
  socket flavour: gevent's ``SSLContext`` for brokers (cooperative), the stdlib's for the tools.
* ``sasl``: for SASL_PLAINTEXT / SASL_SSL, a callable ``sasl(host) -> ClientMechanism`` making a fresh client
  mechanism per connection (``kbroker/security/sasl/client.py``; ``host`` is the broker's, for GSSAPI's service
  principal); the exchange is SaslHandshake v1 then SaslAuthenticate, run by ``sasl.client.authenticate``.

``secure(sock, host, security, timeout, client_id)`` turns a connected TCP socket into a ready channel: TLS
handshake (``server_hostname=host``, verified when the context checks host names), then SASL; it returns the socket
to use (a ``kbroker/security/tls_stream.py`` TlsStream for TLS) or raises ``ChannelError`` -- and closes the socket -- on any failure, within
``timeout`` seconds for the TLS handshake (the socket's own timeout bounds each SASL round trip).
"""
import struct

from kbroker.protocol.apis import APIS
from kbroker.protocol.headers import decode_response_header, encode_request_header

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_SIZE = struct.Struct(">i")
# SASL responses are a few hundred bytes (a SCRAM server-first message, an error text).
MAX_SASL_RESPONSE = 1 << 20


class ChannelError(Exception):
    """The channel could not be secured (TLS handshake, certificate check, SASL); ``str(e)`` says which step."""


class ChannelSecurity:
    """How to reach one listener (module docstring)."""
    __slots__ = ("protocol", "ssl_context", "sasl")

    def __init__(self, protocol="PLAINTEXT", ssl_context=None, sasl=None):
        if protocol not in PROTOCOLS:
            raise ValueError("unknown security protocol %r (one of %s)" % (protocol, ", ".join(PROTOCOLS)))
        if protocol.endswith("SSL") and ssl_context is None:
            raise ValueError("%s needs an SSL context" % protocol)
        if protocol.startswith("SASL_") and sasl is None:
            raise ValueError("%s needs SASL settings (a client mechanism factory)" % protocol)
        self.protocol = protocol
        self.ssl_context = ssl_context
        self.sasl = sasl

    @property
    def tls(self):
        return self.protocol.endswith("SSL")

    def __repr__(self):
        return "ChannelSecurity(%s)" % self.protocol


PLAINTEXT = ChannelSecurity()


def secure(sock, host, security, timeout=None, client_id="kbroker"):
    """The connected ``sock`` made ready for Kafka requests per ``security`` (module docstring)."""
    if security is None or security.protocol == "PLAINTEXT":
        return sock
    try:
        if security.tls:
            sock = _tls(sock, host, security.ssl_context, timeout)
        if security.sasl is not None and security.protocol.startswith("SASL_"):
            _sasl(sock, host, security.sasl, client_id)
        return sock
    except BaseException:
        try:
            sock.close()
        except OSError:
            pass
        raise


def _tls(sock, host, context, timeout):
    import ssl

    from kbroker.security.tls_stream import TlsStream   # memory-BIO TLS: big reads, one send per piece

    previous = sock.gettimeout()
    if timeout is not None:
        sock.settimeout(timeout)
    try:
        ssl_sock = TlsStream(sock, context, server_side=False, server_hostname=host)
        ssl_sock.do_handshake()
    except ssl.SSLCertVerificationError as e:
        raise ChannelError("TLS to %s: the broker's certificate was refused: %s" % (host, e.verify_message or e)) \
            from None
    except ssl.SSLError as e:
        raise ChannelError("TLS handshake with %s failed: %s" % (host, e.reason or e)) from None
    except OSError as e:
        raise ChannelError("TLS handshake with %s failed: %s" % (host, e)) from None
    sock.settimeout(previous)
    return ssl_sock


def _sasl(sock, host, factory, client_id):
    from kbroker.security.sasl.client import SaslError, authenticate
    from kbroker.security.sasl import AuthenticationFailed

    corr = [0]

    def roundtrip(api_key, version, body):
        api = APIS[api_key]
        corr[0] += 1
        header = encode_request_header(api.request_header_version(version), api_key, version, corr[0], client_id)
        payload = bytes(header) + api.encode_request(version, body).getvalue()
        sock.sendall(_SIZE.pack(len(payload)) + payload)
        (size,) = _SIZE.unpack(_recv_exact(sock, 4))
        if size < 4 or size > MAX_SASL_RESPONSE:
            raise ChannelError("bad SASL response size %d from %s" % (size, host))
        frame = memoryview(_recv_exact(sock, size))
        got, pos = decode_response_header(frame, api.response_header_version(version))
        if got != corr[0]:
            raise ChannelError("SASL response correlation id %d, expected %d" % (got, corr[0]))
        return api.decode_response(version, frame, pos)

    mechanism = factory(host)
    try:
        authenticate(roundtrip, mechanism)
    except SaslError as e:
        raise ChannelError("SASL %s with %s failed (error %d): %s" % (mechanism.name, host, e.code, e)) from None
    except AuthenticationFailed as e:
        raise ChannelError("SASL %s with %s failed: %s" % (mechanism.name, host, e)) from None
    except OSError as e:
        raise ChannelError("SASL %s with %s failed: %s" % (mechanism.name, host, e)) from None


def _recv_exact(sock, n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ChannelError("connection closed by the broker during authentication")
        got += k
    return buf
