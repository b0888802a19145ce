"""The client side of TLS for the tools (kbroker/client/client_config.py: Kafka's client properties ->
ChannelSecurity) and kbroker/security/client_channel.py (TLS handshake then the SASL hook, against a real TLS
server in a thread)."""
import socket
import ssl
import threading

import pytest

from kbroker.client import client_config
from kbroker.security import tls
from kbroker.security.client_channel import ChannelError, ChannelSecurity, secure
from tests.integration.certs import make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def test_take_removes_the_option():
    assert client_config.take(["topics", "--list", "--command-config", "c.properties", "--x"]) == \
        (["topics", "--list", "--x"], "c.properties")
    assert client_config.take(["--producer.config=p.properties", "--topic", "t"]) == (["--topic", "t"],
                                                                                    "p.properties")
    assert client_config.take(["--topic", "t"]) == (["--topic", "t"], None)
    with pytest.raises(ValueError, match="needs a file"):
        client_config.take(["--command-config"])
    with pytest.raises(ValueError, match="more than once"):
        client_config.take(["--command-config", "a", "--consumer.config", "b"])


def test_security_from_client_properties(pki):
    alice = pki.clients["alice"]
    sec = client_config.security_from({"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                                       "ssl.truststore.location": pki.ca, "ssl.keystore.type": "PKCS12",
                                       "ssl.keystore.location": alice.p12, "ssl.keystore.password": alice.password,
                                       "ssl.enabled.protocols": "TLSv1.3"})
    assert sec.protocol == "SSL" and sec.tls and sec.ssl_context.check_hostname
    assert sec.ssl_context.minimum_version == ssl.TLSVersion.TLSv1_3
    off = client_config.security_from({"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                                       "ssl.truststore.location": pki.ca,
                                       "ssl.endpoint.identification.algorithm": ""})
    assert off.ssl_context.check_hostname is False
    assert client_config.security_from({}).protocol == "PLAINTEXT"


@pytest.mark.parametrize("props, words", [
    ({"security.protocol": "TLS"}, ["security.protocol"]),
    ({"security.protocol": "SSL", "ssl.provider": "SunJSSE"}, ["ssl.provider"]),
    ({"security.protocol": "SSL", "ssl.truststore.location": "/nonexistent"}, ["ssl.truststore.type", "keytool"]),
    ({"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": "/nonexistent"},
     ["ssl.truststore.location", "/nonexistent"]),
    ({"security.protocol": "SASL_SSL", "ssl.truststore.type": "PEM"}, ["sasl.jaas.config"]),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u";'},
     ["username and password"]),
])
def test_refusals_name_the_key(props, words):
    with pytest.raises(client_config.ClientConfigError) as e:
        client_config.security_from(props, "client.properties")
    for w in words:
        assert w in str(e.value), str(e.value)


def test_channel_security_needs_its_parts():
    with pytest.raises(ValueError):
        ChannelSecurity("SSL")
    with pytest.raises(ValueError):
        ChannelSecurity("SASL_PLAINTEXT")
    with pytest.raises(ValueError):
        ChannelSecurity("TLS")


def serve_once(pki, client_auth="none"):
    """A TLS server on a free port that answers one read with b"pong"; returns (port, thread, errors)."""
    ctx = tls.server_context({**pki.broker_ssl("PEM"), "ssl.client.auth": client_auth})
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1)
    errors = []

    def run():
        conn, _ = lsock.accept()
        try:
            with ctx.wrap_socket(conn, server_side=True) as s:
                s.recv(4)
                s.sendall(b"pong")
        except (ssl.SSLError, OSError) as e:
            errors.append(e)
        finally:
            lsock.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return lsock.getsockname()[1], t, errors


def test_secure_handshakes_and_verifies(pki):
    port, t, errors = serve_once(pki)
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    s = secure(sock, "127.0.0.1", ChannelSecurity("SSL", tls.client_context(
        {"ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca})), timeout=5)
    s.sendall(b"ping")
    assert s.recv(4) == b"pong"
    s.close()
    t.join(5)
    assert errors == []


def test_secure_refuses_an_untrusted_broker_and_closes(pki):
    port, t, _ = serve_once(pki)
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    with pytest.raises(ChannelError, match="certificate was refused"):
        secure(sock, "127.0.0.1", ChannelSecurity("SSL", tls.client_context(
            {"ssl.truststore.type": "PEM", "ssl.truststore.location": pki.rogue_ca})), timeout=5)
    assert sock.fileno() == -1   # closed
    t.join(5)


def test_secure_runs_the_sasl_hook_after_tls(pki):
    """SASL_SSL: the factory's mechanism drives SaslHandshake v1 over the TLS socket (the server here answers
    the handshake with UNSUPPORTED_SASL_MECHANISM, so the channel fails naming the mechanism)."""
    from kbroker.protocol.apis import APIS
    from kbroker.protocol.headers import encode_response_header
    from kbroker.protocol.schema import Writer
    import struct

    ctx = tls.server_context(pki.broker_ssl("PEM"))
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1)

    def run():
        conn, _ = lsock.accept()
        with ctx.wrap_socket(conn, server_side=True) as s:
            size = struct.unpack(">i", s.recv(4))[0]
            data = b""
            while len(data) < size:
                data += s.recv(size - len(data))
            corr = struct.unpack(">i", data[4:8])[0]
            w = Writer()
            w.buf += encode_response_header(0, corr)
            APIS[17].encode_response(1, {"error_code": 33, "mechanisms": ["SCRAM-SHA-512"]}, w)
            body = w.getvalue()
            s.sendall(struct.pack(">i", len(body)) + body)
        lsock.close()

    threading.Thread(target=run, daemon=True).start()

    class Mech:
        name = "PLAIN"
        complete = False

        def first(self):
            return b"\0u\0p"

    sock = socket.create_connection(("127.0.0.1", lsock.getsockname()[1]), timeout=5)
    sec = ChannelSecurity("SASL_SSL", tls.client_context({"ssl.truststore.type": "PEM",
                                                          "ssl.truststore.location": pki.ca}),
                          sasl=lambda host: Mech())
    with pytest.raises(ChannelError, match="SASL PLAIN with 127.0.0.1 failed \\(error 33\\)"):
        secure(sock, "127.0.0.1", sec, timeout=5)
