"""kbroker/security/tls.py: contexts from Kafka's ssl.* settings -- real handshakes between the server and client
contexts (PEM file, inline PEM, PKCS12; client auth none/requested/required; host-name verification; protocol and
cipher restrictions), and every refusal naming its key (wrong passwords, missing files, mismatched keys, JKS with the
keytool conversion, Kafka's rules for which keys go together)."""
import glob
import os
import socket
import ssl
import tempfile
import threading

import pytest

from kbroker.security import tls
from kbroker.security.principal import SslPrincipalMapper
from tests.integration.certs import make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def handshake(server_ctx, client_ctx, server_hostname="localhost", timeout=10):
    """Run one TLS handshake over a socket pair; returns (server result, client result), each the SSLSocket's
    (version, cipher name, peer certificate DER) or the exception it raised."""
    a, b = socket.socketpair()
    a.settimeout(timeout)
    b.settimeout(timeout)
    out = {}

    def side(name, fn):
        try:
            s = fn()
            s.do_handshake()
            # TLS 1.3: a refused client certificate reaches the client as an alert on its first read.
            if name == "client":
                s.sendall(b"ping")
                got = s.recv(4)
                if got != b"pong":
                    raise ConnectionError("no pong: %r" % got)
            else:
                if s.recv(4) == b"ping":
                    s.sendall(b"pong")
            out[name] = (s.version(), s.cipher()[0], s.getpeercert(binary_form=True))
        except Exception as e:  # noqa: BLE001
            out[name] = e
        finally:
            (a if name == "server" else b).close()

    t = threading.Thread(target=side, args=("server", lambda: server_ctx.wrap_socket(a, server_side=True,
                                                                                    do_handshake_on_connect=False)))
    t.start()
    side("client", lambda: client_ctx.wrap_socket(b, server_hostname=server_hostname, do_handshake_on_connect=False))
    t.join(timeout)
    return out["server"], out["client"]


def client_settings(pki, name=None, **extra):
    s = {"ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca}
    if name is not None:
        ident = pki.clients[name]
        s.update({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": ident.p12,
                  "ssl.keystore.password": ident.password})
    s.update(extra)
    return s


@pytest.mark.parametrize("kind", ["PEM", "PKCS12", "PEM_INLINE"])
def test_keystore_kinds_handshake(pki, kind):
    server = tls.server_context(pki.broker_ssl(kind))
    s, c = handshake(server, tls.client_context(client_settings(pki)))
    assert not isinstance(s, Exception), s
    assert not isinstance(c, Exception), c
    assert c[0] == "TLSv1.3"
    assert s[2] is None  # client.auth none: no client certificate asked for


@pytest.mark.parametrize("auth", ["required", "requested"])
def test_mutual_tls_gives_the_client_dn(pki, auth):
    server = tls.server_context({**pki.broker_ssl("PEM"), "ssl.client.auth": auth})
    s, c = handshake(server, tls.client_context(client_settings(pki, "alice")))
    assert not isinstance(s, Exception), s
    assert SslPrincipalMapper().principal(s[2]) == "User:CN=alice,OU=eng,O=acme,C=US"


def test_client_auth_required_refuses_a_client_without_certificate(pki):
    server = tls.server_context({**pki.broker_ssl("PEM"), "ssl.client.auth": "required"})
    s, c = handshake(server, tls.client_context(client_settings(pki)))
    assert isinstance(s, ssl.SSLError), s
    assert isinstance(c, (ssl.SSLError, ConnectionError, OSError)), c


def test_client_auth_requested_accepts_a_client_without_certificate(pki):
    server = tls.server_context({**pki.broker_ssl("PEM"), "ssl.client.auth": "requested"})
    s, c = handshake(server, tls.client_context(client_settings(pki)))
    assert not isinstance(s, Exception), s
    assert s[2] is None


def test_certificate_of_an_untrusted_ca_is_refused(pki):
    server = tls.server_context({**pki.broker_ssl("PEM"), "ssl.client.auth": "required"})
    rogue = pki.rogue_client
    s, c = handshake(server, tls.client_context({**client_settings(pki), "ssl.keystore.type": "PKCS12",
                                                 "ssl.keystore.location": rogue.p12,
                                                 "ssl.keystore.password": rogue.password}))
    assert isinstance(s, ssl.SSLError) and "certificate" in str(s).lower(), s


def test_client_refuses_a_server_it_does_not_trust(pki):
    server = tls.server_context(pki.broker_ssl("PEM"))
    s, c = handshake(server, tls.client_context({"ssl.truststore.type": "PEM",
                                                 "ssl.truststore.location": pki.rogue_ca}))
    assert isinstance(c, ssl.SSLCertVerificationError), c


def test_hostname_verification(pki):
    server = tls.server_context(pki.broker_ssl("PEM"))
    s, c = handshake(server, tls.client_context(client_settings(pki)), server_hostname="not-the-broker")
    assert isinstance(c, ssl.SSLCertVerificationError) and "not-the-broker" in str(c), c
    s, c = handshake(server, tls.client_context(client_settings(pki)), server_hostname="127.0.0.1")
    assert not isinstance(c, Exception), c
    off = tls.client_context(client_settings(pki, **{"ssl.endpoint.identification.algorithm": ""}))
    assert off.check_hostname is False
    s, c = handshake(server, off, server_hostname="not-the-broker")
    assert not isinstance(c, Exception), c


def test_truststore_pkcs12_and_inline(pki):
    server = tls.server_context(pki.broker_ssl("PEM"))
    p12 = tls.client_context({"ssl.truststore.type": "PKCS12", "ssl.truststore.location": pki.java_truststore(),
                              "ssl.truststore.password": "trust-pass"})
    assert not isinstance(handshake(server, p12)[1], Exception)
    inline = tls.client_context({"ssl.truststore.type": "PEM",
                                 "ssl.truststore.certificates": open(pki.ca).read()})
    assert not isinstance(handshake(server, inline)[1], Exception)


def test_protocol_caps(pki):
    capped = tls.server_context({**pki.broker_ssl("PEM"), "ssl.protocol": "TLSv1.2"})
    assert capped.maximum_version == ssl.TLSVersion.TLSv1_2
    s, c = handshake(capped, tls.client_context(client_settings(pki)))
    assert c[0] == "TLSv1.2"
    only13 = tls.server_context({**pki.broker_ssl("PEM"), "ssl.enabled.protocols": ["TLSv1.3"]})
    s, c = handshake(only13, tls.client_context(client_settings(pki, **{"ssl.enabled.protocols": ["TLSv1.2"]})))
    assert isinstance(c, ssl.SSLError), c


def test_java_cipher_names(pki):
    suites = ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]
    server = tls.server_context({**pki.broker_ssl("PEM"), "ssl.cipher.suites": suites})
    assert server.maximum_version == ssl.TLSVersion.TLSv1_2  # no TLS 1.3 suite listed: no TLS 1.3, as in Java
    s, c = handshake(server, tls.client_context(client_settings(pki)))
    assert c[:2] == ("TLSv1.2", "ECDHE-RSA-AES128-GCM-SHA256"), c
    both = tls.server_context({**pki.broker_ssl("PEM"),
                               "ssl.cipher.suites": suites + sorted(tls.TLS13_SUITES)})
    assert both.maximum_version == ssl.TLSVersion.TLSv1_3
    assert tls.openssl_ciphers(["TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "TLS_RSA_WITH_AES_256_CBC_SHA",
                                "TLS_AES_128_GCM_SHA256"]) == (["ECDHE-ECDSA-CHACHA20-POLY1305", "AES256-SHA"],
                                                               ["TLS_AES_128_GCM_SHA256"])


def test_no_temporary_key_file_is_left(pki, tmp_path, monkeypatch):
    # A temp directory of this test's own: other test workers of a parallel run make and remove their kbroker-tls-*
    # directories in the shared one meanwhile (it once failed that way).
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    tls.server_context(pki.broker_ssl("PKCS12"))
    tls.client_context(client_settings(pki, "alice"))
    assert glob.glob(os.path.join(str(tmp_path), "kbroker-tls-*")) == []
    assert os.listdir(tmp_path) == []


# ----------------------------------------------------------------------------------------------- refusals

def refused(settings, key, *words, client=False):
    with pytest.raises(tls.TlsSettingError) as e:
        (tls.client_context if client else tls.server_context)(settings)
    assert e.value.key == key, str(e.value)
    for w in words:
        assert w in str(e.value), str(e.value)
    return str(e.value)


def test_refusals_name_the_key(pki):
    pem, p12 = pki.broker_ssl("PEM"), pki.broker_ssl("PKCS12")
    refused({**p12, "ssl.keystore.password": "wrong"}, "ssl.keystore.password", "wrong password")
    refused({**pem, "ssl.key.password": "wrong"}, "ssl.key.password", "wrong password")
    refused({**pem, "ssl.keystore.location": "/nonexistent/k.pem"}, "ssl.keystore.location", "/nonexistent/k.pem")
    refused({**pem, "ssl.truststore.location": "/nonexistent/t.pem"}, "ssl.truststore.location")
    refused({**p12, "ssl.keystore.password": None}, "ssl.keystore.password")
    refused({**pem, "ssl.key.password": None}, "ssl.key.password")
    refused({**pem, "ssl.keystore.password": "x"}, "ssl.keystore.password", "PEM")
    refused({**pem, "ssl.truststore.password": "x"}, "ssl.truststore.password")
    refused({"ssl.truststore.location": pki.ca, "ssl.truststore.type": "PEM"}, "ssl.keystore.location",
            "needs a keystore")
    refused({**pki.broker_ssl("PEM_INLINE"), "ssl.keystore.type": "PKCS12"}, "ssl.keystore.key", "PEM")
    inline = pki.broker_ssl("PEM_INLINE")
    refused({**inline, "ssl.keystore.certificate.chain": None}, "ssl.keystore.certificate.chain")
    refused({**inline, "ssl.keystore.key": None}, "ssl.keystore.key")
    # alice's key with the broker's chain: no certificate matches the key
    refused({**inline, "ssl.keystore.key": pki.clients["alice"].key_pem_text()}, "ssl.keystore.certificate.chain",
            "matches")
    refused({**pem, "ssl.keystore.type": "BKS"}, "ssl.keystore.type", "PEM or PKCS12")
    refused({**pem, "ssl.client.auth": "maybe"}, "ssl.client.auth")
    refused({**pem, "ssl.enabled.protocols": ["TLSv1.1"]}, "ssl.enabled.protocols", "TLSv1.1")
    refused({**pem, "ssl.protocol": "SSLv3"}, "ssl.protocol")
    refused({**pem, "ssl.enabled.protocols": ["TLSv1.3"], "ssl.protocol": "TLSv1.2"}, "ssl.enabled.protocols")
    refused({**pem, "ssl.cipher.suites": ["TLS_BOGUS_WITH_NOTHING"]}, "ssl.cipher.suites", "TLS_BOGUS_WITH_NOTHING")
    refused({**pem, "ssl.cipher.suites": ["ECDHE-RSA-AES128-GCM-SHA256"]}, "ssl.cipher.suites")
    refused({**pem, "ssl.cipher.suites": ["TLS_AES_128_GCM_SHA256"]}, "ssl.cipher.suites", "all three or none")
    refused({**client_settings(pki), "ssl.endpoint.identification.algorithm": "ldaps"},
            "ssl.endpoint.identification.algorithm", client=True)


def test_jks_is_refused_with_the_conversion(pki):
    jks = pki.jks()
    msg = refused({"ssl.keystore.type": "JKS", "ssl.keystore.location": jks, "ssl.keystore.password": "x",
                   **{k: v for k, v in pki.broker_ssl("PEM").items() if k.startswith("ssl.truststore")}},
                  "ssl.keystore.type", "keytool -importkeystore -srckeystore %s -destkeystore" % jks,
                  "-deststoretype PKCS12")
    assert "broker.p12" in msg
    # declared PKCS12, but the file is JKS
    refused({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": jks, "ssl.keystore.password": "x"},
            "ssl.keystore.type", "keytool -importkeystore")
    # the default truststore type is JKS (Kafka's): a truststore location with no type is refused the same way
    refused({**pki.broker_ssl("PEM"), "ssl.truststore.type": None}, "ssl.truststore.type", "keytool")


def test_pkcs12_files_under_the_default_jks_type_are_read_as_java_does(pki):
    """Java's JKS key store reads PKCS12 files (keystore.type.compat): Kafka's default ssl.*.type=JKS with .p12
    files works, so it must here too; a real JKS file under the same settings is still refused."""
    p12 = pki.broker_ssl("PKCS12")
    assert p12["ssl.keystore.type"] == "PKCS12"
    untyped = {k: v for k, v in p12.items() if k not in ("ssl.keystore.type", "ssl.truststore.type")}
    if untyped.get("ssl.truststore.location", "").endswith(".p12"):
        tls.server_context(untyped)
    else:   # a PEM trust store must keep its type; only the key store's is left to the default
        tls.server_context({**untyped, "ssl.truststore.type": p12.get("ssl.truststore.type")})
    msg = refused({**untyped, "ssl.keystore.location": pki.jks(), "ssl.truststore.type": p12.get("ssl.truststore.type")},
                  "ssl.keystore.type", "keytool -importkeystore")
    assert "-destkeystore %s " % pki.jks() not in msg   # never converts a file onto itself
