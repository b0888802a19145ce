"""Throwaway test PKI for the security tests: a CA, a broker certificate and client certificates, made with
``cryptography`` in a temporary directory (nothing is checked in, nothing outlives the test session).

``make_pki(directory, clients=("alice", "bob"))`` -> ``Pki``; the session fixture ``pki`` (import it into a test
module, ``from tests.integration.certs import pki``) makes one under pytest's tmp dir.

What a ``Pki`` holds (every file mode 0600, every path a ``str``):

* ``ca`` -- the CA certificate (PEM): what truststores hold. ``ca_key`` its key (unencrypted PKCS#8).
* ``broker`` -- an ``Identity`` for the brokers: ``CN=localhost,OU=kbroker,O=test``, SAN ``DNS:localhost`` and
  ``IP:127.0.0.1`` (so hostname verification -- ``ssl.endpoint.identification.algorithm=https`` -- passes for both
  ``localhost`` and ``127.0.0.1``), extended key usage serverAuth *and* clientAuth (brokers are clients of each
  other under mutual TLS).
* ``clients[name]`` -- an ``Identity`` per client name: ``CN=<name>,OU=eng,O=acme,C=US``, clientAuth.
* ``rogue_ca`` / ``rogue_client`` -- a second, untrusted CA and a client certificate it signed
  (``CN=mallory,OU=eng,O=acme,C=US``): a certificate the brokers must refuse.

An ``Identity`` has: ``dn`` (Java's RFC 2253 form, what kbroker's principal is: ``CN=alice,OU=eng,O=acme,C=US``),
``cert`` (its certificate alone, PEM), ``chain`` (certificate then CA, PEM), ``key`` (unencrypted PKCS#8 PEM),
``key_encrypted`` (PKCS#8 encrypted with ``password``), ``keystore_pem`` (KIP-651's ``ssl.keystore.type=PEM``
file: the encrypted key followed by the chain; Kafka requires ``ssl.key.password`` with it), ``p12`` (PKCS#12
with key and chain, store and key password ``password``), ``password``; ``key_pem_text()`` / ``chain_text()`` for
the inline ``ssl.keystore.key`` / ``ssl.keystore.certificate.chain`` keys.

Java-side stores (made with ``keytool``, lazily, ~1 s each; a missing ``keytool`` skips the test):
``pki.jks(identity)`` converts an identity's PKCS#12 to a JKS keystore (what kbroker must refuse, naming the key and
the conversion); ``pki.java_truststore()`` is a PKCS#12 truststore with the CA as a *trusted certificate entry*
(Java ignores certificate-only PKCS#12 bags without Oracle's trust attribute, which ``cryptography`` does not
write, so the Java client gets this one -- or ``ssl.truststore.type=PEM`` with ``ca``).

Helpers for broker configs: ``pki.broker_ssl(kind="PEM"|"PKCS12"|"PEM_INLINE", prefix="")`` -> the broker's
``ssl.*`` keys (``prefix`` e.g. ``"listener.name.ssl."``); ``pki.client_ssl(name=None)`` -> librdkafka's
(``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location``) keys for confluent-kafka/kcat.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

BROKER_DN = "CN=localhost,OU=kbroker,O=test"
# RSA 2048: every client here (librdkafka, Python's ssl, Node, Java) takes it; generation is ~50-150 ms a key.
KEY_BITS = 2048
VALID_DAYS = 30
KEYTOOL_TIMEOUT = 60

_OIDS = {"CN": NameOID.COMMON_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME, "O": NameOID.ORGANIZATION_NAME,
         "C": NameOID.COUNTRY_NAME, "L": NameOID.LOCALITY_NAME, "ST": NameOID.STATE_OR_PROVINCE_NAME}


def client_dn(name: str) -> str:
    return f"CN={name},OU=eng,O=acme,C=US"


def _name(dn: str) -> x509.Name:
    """RFC 2253 order is most-specific first; an x509 Name lists the RDNs from the root, so reverse."""
    parts = [p.split("=", 1) for p in dn.split(",")]
    return x509.Name([x509.NameAttribute(_OIDS[k], v) for k, v in reversed(parts)])


def _write(path: Path, data: bytes) -> str:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return str(path)


def _pem(cert) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key, password: str | None = None) -> bytes:
    enc = (serialization.BestAvailableEncryption(password.encode()) if password
           else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)


@dataclass
class Identity:
    name: str
    dn: str
    cert: str
    chain: str
    key: str
    key_encrypted: str
    keystore_pem: str
    p12: str
    password: str

    def key_pem_text(self, encrypted: bool = False) -> str:
        return Path(self.key_encrypted if encrypted else self.key).read_text()

    def chain_text(self) -> str:
        return Path(self.chain).read_text()


@dataclass
class _Issuer:
    dn: str
    key: object
    cert: object


@dataclass
class Pki:
    dir: str
    ca: str
    ca_key: str
    broker: Identity
    clients: dict = field(default_factory=dict)
    rogue_ca: str = ""
    rogue_client: Identity | None = None

    # -- keytool-made stores (lazy) -------------------------------------------------------------------------
    def jks(self, identity: Identity | None = None) -> str:
        """A JKS keystore of ``identity`` (default: the broker), converted from its PKCS#12 by ``keytool``; same
        store and key password."""
        identity = identity or self.broker
        out = Path(self.dir) / f"{identity.name}.jks"
        if not out.exists():
            _keytool(["-importkeystore", "-srckeystore", identity.p12, "-srcstoretype", "PKCS12",
                      "-srcstorepass", identity.password, "-destkeystore", str(out), "-deststoretype", "JKS",
                      "-deststorepass", identity.password, "-destkeypass", identity.password, "-noprompt"])
            os.chmod(out, 0o600)
        return str(out)

    def java_truststore(self, password: str = "trust-pass") -> str:
        """PKCS#12 truststore holding the CA as a trusted-certificate entry (``keytool -importcert``)."""
        out = Path(self.dir) / "truststore-java.p12"
        if not out.exists():
            _keytool(["-importcert", "-alias", "ca", "-file", self.ca, "-keystore", str(out), "-storetype",
                      "PKCS12", "-storepass", password, "-noprompt"])
            os.chmod(out, 0o600)
        return str(out)

    # -- config helpers ----------------------------------------------------------------------------------------
    def broker_ssl(self, kind: str = "PEM", prefix: str = "", identity: Identity | None = None) -> dict:
        """The broker's keystore/truststore keys (``prefix`` before each, e.g. "listener.name.ssl.").

        PEM: ``ssl.keystore.location`` = the encrypted-key+chain file, ``ssl.key.password``, truststore = the CA
        PEM file. PKCS12: the .p12 keystore with its password and a PEM truststore. PEM_INLINE: KIP-651's inline
        values (``ssl.keystore.key`` unencrypted, ``ssl.keystore.certificate.chain``, ``ssl.truststore.certificates``)."""
        ident = identity or self.broker
        if kind == "PEM":
            keys = {"ssl.keystore.type": "PEM", "ssl.keystore.location": ident.keystore_pem,
                    "ssl.key.password": ident.password, "ssl.truststore.type": "PEM",
                    "ssl.truststore.location": self.ca}
        elif kind == "PKCS12":
            keys = {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": ident.p12,
                    "ssl.keystore.password": ident.password, "ssl.key.password": ident.password,
                    "ssl.truststore.type": "PEM", "ssl.truststore.location": self.ca}
        elif kind == "PEM_INLINE":
            keys = {"ssl.keystore.type": "PEM", "ssl.keystore.key": ident.key_pem_text(),
                    "ssl.keystore.certificate.chain": ident.chain_text(), "ssl.truststore.type": "PEM",
                    "ssl.truststore.certificates": Path(self.ca).read_text()}
        else:
            raise ValueError(kind)
        return {prefix + k: v for k, v in keys.items()}

    def client_ssl(self, name: str | None = None) -> dict:
        """librdkafka's keys (confluent-kafka, kcat ``-X``): the CA, and with ``name`` that client's certificate
        and unencrypted key."""
        out = {"security.protocol": "SSL", "ssl.ca.location": self.ca}
        if name is not None:
            ident = self.clients[name]
            out.update({"ssl.certificate.location": ident.cert, "ssl.key.location": ident.key})
        return out


def _keytool(args: list[str]) -> None:
    from tests.integration.harness import require_binary
    keytool = require_binary("keytool")  # skips the test (fails under CI=true) without it
    done = subprocess.run([keytool, *args], capture_output=True, timeout=KEYTOOL_TIMEOUT)
    if done.returncode != 0:
        raise RuntimeError("keytool %s failed (exit %d): %s" % (args[0], done.returncode,
                                                               (done.stdout + done.stderr).decode(errors="replace")))


def _new_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)


def _make_ca(dn: str) -> _Issuer:
    key = _new_key()
    now = datetime.datetime.now(datetime.timezone.utc)
    name = _name(dn)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return _Issuer(dn, key, cert)


def _issue(issuer: _Issuer, dn: str, server: bool):
    key = _new_key()
    now = datetime.datetime.now(datetime.timezone.utc)
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH] + ([ExtendedKeyUsageOID.SERVER_AUTH] if server else [])
    b = (x509.CertificateBuilder().subject_name(_name(dn)).issuer_name(issuer.cert.subject)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(minutes=5))
         .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
         .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
         .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=True,
                                      data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                      crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
         .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
         .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer.key.public_key()),
                        critical=False))
    if server:
        b = b.add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                         x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                            critical=False)
    return key, b.sign(issuer.key, hashes.SHA256())


def _identity(directory: Path, issuer: _Issuer, name: str, dn: str, server: bool) -> Identity:
    key, cert = _issue(issuer, dn, server)
    password = f"{name}-pass"
    chain = _pem(cert) + _pem(issuer.cert)
    p12 = pkcs12.serialize_key_and_certificates(name.encode(), key, cert, [issuer.cert],
                                                serialization.BestAvailableEncryption(password.encode()))
    return Identity(
        name=name, dn=dn, password=password,
        cert=_write(directory / f"{name}.crt", _pem(cert)),
        chain=_write(directory / f"{name}-chain.pem", chain),
        key=_write(directory / f"{name}.key", _key_pem(key)),
        key_encrypted=_write(directory / f"{name}-encrypted.key", _key_pem(key, password)),
        keystore_pem=_write(directory / f"{name}-keystore.pem", _key_pem(key, password) + chain),
        p12=_write(directory / f"{name}.p12", p12))


def make_pki(directory, clients=("alice", "bob")) -> Pki:
    """Make a CA, the broker's identity, ``clients`` and a rogue CA with one client under ``directory``."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    ca = _make_ca("CN=kbroker-test-ca,O=test")
    pki = Pki(dir=str(d), ca=_write(d / "ca.pem", _pem(ca.cert)), ca_key=_write(d / "ca.key", _key_pem(ca.key)),
              broker=_identity(d, ca, "broker", BROKER_DN, server=True))
    for name in clients:
        pki.clients[name] = _identity(d, ca, name, client_dn(name), server=False)
    rogue = _make_ca("CN=rogue-ca,O=elsewhere")
    pki.rogue_ca = _write(d / "rogue-ca.pem", _pem(rogue.cert))
    pki.rogue_client = _identity(d, rogue, "mallory", client_dn("mallory"), server=False)
    return pki


try:
    import pytest

    @pytest.fixture(scope="session")
    def pki(tmp_path_factory) -> Pki:
        """One test PKI for the session (see the module docstring)."""
        return make_pki(tmp_path_factory.mktemp("pki"))
except ImportError:  # pragma: no cover - pytest is always there in the test venv
    pass
