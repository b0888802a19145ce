"""TLS contexts for one listener, from Kafka's ``ssl.*`` settings (section 7.2 of Kafka's documentation, KIP-651).

``server_context(settings)`` is what an SSL / SASL_SSL listener wraps accepted sockets with;
``client_context(settings)`` is what a broker (replica fetchers, the controller's channel, controlled shutdown) and
the command-line tools connect with. ``settings`` is a plain dict of Kafka's key names, already resolved for one
listener by the caller (``listener.name.<listener>.ssl.X`` over ``ssl.X``: ``BrokerConfig.listener_ssl_settings``);
values are strings, lists of strings (``ssl.enabled.protocols``, ``ssl.cipher.suites``) or None, passwords plain
strings. Keys it reads: ``KEYS``. Every problem raises ``TlsSettingError`` naming the key, so that a broker stops at
startup with a message an operator can act on, never serves a listener half-configured.

Stores (``ssl.keystore.type`` / ``ssl.truststore.type``, case-insensitive like Java's ``KeyStore.getInstance``):

* PEM (KIP-651): ``ssl.keystore.location`` is one file holding the private key (PKCS#8, encrypted with
  ``ssl.key.password``, which Kafka requires for a PEM file) and the certificate chain, leaf first; or inline
  values ``ssl.keystore.key`` (encrypted or not) + ``ssl.keystore.certificate.chain``. Truststore:
  ``ssl.truststore.location`` (a PEM file of CA certificates) or ``ssl.truststore.certificates`` inline. A PEM store
  takes no store password (Kafka's rule: naming ``ssl.keystore.password`` / ``ssl.truststore.password``).
* PKCS12: loaded with ``cryptography`` using ``ssl.keystore.password`` (the key is in the same bag: PKCS#12 has one
  password in practice, and Java's keytool refuses different ones too). A truststore's every certificate is trusted.
* JKS: a file declared JKS (also by default) that is really PKCS12 is read as PKCS12, as Java's JKS key store does
  (keystore.type.compat). A real JKS: no maintained Python library reads it (pyjks has been unmaintained since
  2020), so it is refused, naming the
  key and the one-line conversion ``keytool -importkeystore -srckeystore X.jks -destkeystore X.p12
  -deststoretype PKCS12``. Also when a file declared PKCS12 turns out to be JKS (magic 0xFEEDFEED).
* No truststore: the system's default CA certificates, as Java falls back to its cacerts.

Python's ``ssl`` loads a certificate chain and key only from a file. The key and chain are therefore written to a
file in a fresh private directory (0700, file 0600) for the duration of ``load_cert_chain`` and removed right after
-- and the key in that file is encrypted under a one-time random password, so not even a temporary file ever holds
it in clear.

Protocol versions: ``ssl.enabled.protocols`` (TLSv1.2, TLSv1.3; anything older is refused: OpenSSL 3 at its default
security level cannot negotiate it anyway) capped by ``ssl.protocol`` (TLSv1.2 caps at 1.2, as Kafka documents;
TLSv1.3 or TLS: no cap). ``ssl.cipher.suites`` takes Java's (IANA) names, mapped to OpenSSL's
(``TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384`` -> ``ECDHE-RSA-AES256-GCM-SHA384``); an unknown or unavailable name is
refused. Python cannot restrict TLS 1.3 suites, and OpenSSL enables exactly the three standard ones: a list naming
none of them disables TLS 1.3 (what Java does: no 1.3 suite left), all three keep it, some of them is refused.
``ssl.client.auth`` none/requested/required -> CERT_NONE/CERT_OPTIONAL/CERT_REQUIRED (server side).
``ssl.endpoint.identification.algorithm`` https -> the client checks the server's host name; empty -> it does not
(the chain is always verified against the truststore, as Java does).

Server contexts refuse renegotiation (OP_NO_RENEGOTIATION): a connection reads in one greenlet and writes in
another, and a TLS 1.2 renegotiation would make a write wait for reads.
"""
import os
import secrets
import shutil
import ssl
import tempfile

# ``cryptography`` (~60 ms to import) is imported where a store is read, so that importing this module -- the
# broker config does, and the command-line tools through it -- costs nothing when no listener uses TLS.

KEYS = frozenset([
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.truststore.certificates", "ssl.client.auth", "ssl.enabled.protocols", "ssl.protocol", "ssl.cipher.suites",
    "ssl.endpoint.identification.algorithm",
])

JKS_CONVERSION = "keytool -importkeystore -srckeystore %s -destkeystore %s -deststoretype PKCS12"
_JKS_MAGIC = b"\xfe\xed\xfe\xed"
_JCEKS_MAGIC = b"\xce\xce\xce\xce"

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_OLD_PROTOCOLS = ("TLSv1.1", "TLSv1", "SSLv3", "SSLv2", "SSLv2Hello", "SSL", "TLSv1.0")
# ssl.protocol -> the highest version it allows.
_PROTOCOL_CAP = {"TLSv1.3": ssl.TLSVersion.TLSv1_3, "TLS": ssl.TLSVersion.TLSv1_3, "TLSv1.2": ssl.TLSVersion.TLSv1_2}

# TLS 1.3 suites: the same names in Java and OpenSSL; OpenSSL's default set is exactly these three.
TLS13_SUITES = frozenset(["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"])
# TLS 1.2 suites, Java/IANA name -> OpenSSL name: key exchange part and cipher part map independently.
_KX = {"ECDHE_ECDSA": "ECDHE-ECDSA-", "ECDHE_RSA": "ECDHE-RSA-", "DHE_RSA": "DHE-RSA-", "RSA": ""}
_CIPHER = {"AES_128_GCM_SHA256": "AES128-GCM-SHA256", "AES_256_GCM_SHA384": "AES256-GCM-SHA384",
           "CHACHA20_POLY1305_SHA256": "CHACHA20-POLY1305", "AES_128_CBC_SHA256": "AES128-SHA256",
           "AES_256_CBC_SHA384": "AES256-SHA384", "AES_256_CBC_SHA256": "AES256-SHA256",
           "AES_128_CBC_SHA": "AES128-SHA", "AES_256_CBC_SHA": "AES256-SHA"}


class TlsSettingError(ValueError):
    """A TLS setting that cannot work; ``key`` is the Kafka config key to fix, ``str(e)`` says what is wrong."""

    def __init__(self, key, message):
        super().__init__("%s: %s" % (key, message))
        self.key = key
        self.reason = message


# ------------------------------------------------------------------------------------------------ public API

def server_context(settings, context_class=ssl.SSLContext):
    """The SSLContext of a listener (``context_class``: gevent's ``gevent.ssl.SSLContext`` in the broker, so wrapped
    sockets are cooperative). Raises TlsSettingError."""
    ctx = context_class(ssl.PROTOCOL_TLS_SERVER)
    ctx.options |= ssl.OP_NO_RENEGOTIATION | ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    _apply_versions_and_ciphers(ctx, settings)
    auth = (settings.get("ssl.client.auth") or "none").strip().lower()
    if auth not in CLIENT_AUTH:
        raise TlsSettingError("ssl.client.auth", "%r is not one of none, requested, required" % auth)
    keystore = load_keystore(settings)
    if keystore is None:
        raise TlsSettingError("ssl.keystore.location", "an SSL listener needs a keystore (its certificate and key): "
                              "set ssl.keystore.location, or ssl.keystore.key and ssl.keystore.certificate.chain")
    _load_cert_chain(ctx, *keystore)
    # The truststore is loaded (and its errors reported) even when no client certificate is asked for, as Kafka does.
    _load_trust(ctx, settings)
    ctx.verify_mode = CLIENT_AUTH[auth]
    return ctx


def client_context(settings, context_class=ssl.SSLContext):
    """The SSLContext to connect to an SSL / SASL_SSL listener with: the truststore verifies the server's chain
    (always), the keystore, when set, is the client certificate (mutual TLS), and
    ``ssl.endpoint.identification.algorithm`` decides the host-name check. Raises TlsSettingError."""
    ctx = context_class(ssl.PROTOCOL_TLS_CLIENT)
    ctx.options |= ssl.OP_NO_RENEGOTIATION | ssl.OP_NO_COMPRESSION
    _apply_versions_and_ciphers(ctx, settings)
    ctx.check_hostname = check_hostname(settings)
    ctx.verify_mode = ssl.CERT_REQUIRED
    keystore = load_keystore(settings)
    if keystore is not None:
        _load_cert_chain(ctx, *keystore)
    _load_trust(ctx, settings)
    return ctx


def check_hostname(settings):
    """``ssl.endpoint.identification.algorithm``: https (Kafka's default since 2.0, also when the key is absent)
    -> True; an empty value -> False."""
    algo = settings.get("ssl.endpoint.identification.algorithm", "https")
    algo = "" if algo is None else algo.strip()
    if algo.lower() == "https":
        return True
    if algo == "":
        return False
    raise TlsSettingError("ssl.endpoint.identification.algorithm",
                          "%r is not supported: use https (verify the server's host name) or an empty value (do "
                          "not)" % algo)


def load_keystore(settings):
    """(private key, [certificate chain, leaf first], key name for errors) of the keystore, or None when none is
    configured (allowed on the client side). Kafka's rules and messages for which keys go together."""
    ktype = _store_type(settings, "ssl.keystore.type")
    location = settings.get("ssl.keystore.location") or None
    password = settings.get("ssl.keystore.password")
    key_password = settings.get("ssl.key.password")
    inline_key = settings.get("ssl.keystore.key") or None
    inline_chain = settings.get("ssl.keystore.certificate.chain") or None
    if inline_key is not None:
        if ktype != "PEM":
            raise TlsSettingError("ssl.keystore.key", "a private key can be given inline only with "
                                  "ssl.keystore.type=PEM, but the key store type is %s" % ktype)
        if inline_chain is None:
            raise TlsSettingError("ssl.keystore.certificate.chain",
                                  "ssl.keystore.key is set, but the certificate chain is not")
        if location is not None:
            raise TlsSettingError("ssl.keystore.location",
                                  "both ssl.keystore.location and an inline ssl.keystore.key are set")
        if password is not None:
            raise TlsSettingError("ssl.keystore.password", "a PEM key store takes no store password, only "
                                  "ssl.key.password")
        key = _pem_private_key(inline_key, key_password, "ssl.keystore.key")
        chain = _pem_certificates(inline_chain, "ssl.keystore.certificate.chain")
        return _matched(key, chain, "ssl.keystore.certificate.chain")
    if inline_chain is not None:
        raise TlsSettingError("ssl.keystore.key", "ssl.keystore.certificate.chain is set, but the private key is not")
    if location is None:
        if password is not None:
            raise TlsSettingError("ssl.keystore.location",
                                  "ssl.keystore.password is set, but no key store location")
        return None
    if ktype == "PEM":
        if password is not None:
            raise TlsSettingError("ssl.keystore.password", "a PEM key store takes no store password, only "
                                  "ssl.key.password")
        if key_password is None:
            raise TlsSettingError("ssl.key.password", "a PEM key store file (%s) needs the password of its "
                                  "encrypted private key (Kafka's rule)" % location)
        text = _read_text(location, "ssl.keystore.location")
        key = _pem_private_key(text, key_password, "ssl.keystore.location")
        chain = _pem_certificates(text, "ssl.keystore.location")
        return _matched(key, chain, "ssl.keystore.location")
    if ktype == "JKS" or ktype == "JCEKS":
        ktype = _jks_compat(ktype, "ssl.keystore.type", location, "ssl.keystore.location")
    if ktype != "PKCS12":
        raise TlsSettingError("ssl.keystore.type", "%r is not supported: use PEM or PKCS12" % ktype)
    if password is None:
        raise TlsSettingError("ssl.keystore.password", "the key store %s is set, but its password is not" % location)
    data = _read_bytes(location, "ssl.keystore.location")
    _refuse_jks_bytes(data, "ssl.keystore.type", location)
    from cryptography.hazmat.primitives.serialization import pkcs12
    try:
        key, cert, extra = pkcs12.load_key_and_certificates(data, password.encode())
    except ValueError:
        raise TlsSettingError("ssl.keystore.password", "cannot open the PKCS12 key store %s: wrong password, or not "
                              "a PKCS12 file" % location) from None
    if key is None or cert is None:
        raise TlsSettingError("ssl.keystore.location", "the PKCS12 key store %s holds no private key with its "
                              "certificate" % location)
    return _matched(key, [cert] + list(extra or ()), "ssl.keystore.location")


def load_trusted(settings):
    """PEM text of the trusted CA certificates, or None for the system's default ones."""
    ttype = _store_type(settings, "ssl.truststore.type")
    location = settings.get("ssl.truststore.location") or None
    password = settings.get("ssl.truststore.password")
    inline = settings.get("ssl.truststore.certificates") or None
    if inline is not None:
        if ttype != "PEM":
            raise TlsSettingError("ssl.truststore.certificates", "trusted certificates can be given inline only with "
                                  "ssl.truststore.type=PEM, but the trust store type is %s" % ttype)
        if location is not None:
            raise TlsSettingError("ssl.truststore.location", "both ssl.truststore.location and inline "
                                  "ssl.truststore.certificates are set")
        if password is not None:
            raise TlsSettingError("ssl.truststore.password", "a PEM trust store takes no password")
        return _pem_text(_pem_certificates(inline, "ssl.truststore.certificates"))
    if location is None:
        if password is not None:
            raise TlsSettingError("ssl.truststore.location",
                                  "ssl.truststore.password is set, but no trust store location")
        return None
    if ttype == "PEM":
        if password is not None:
            raise TlsSettingError("ssl.truststore.password", "a PEM trust store takes no password")
        return _pem_text(_pem_certificates(_read_text(location, "ssl.truststore.location"), "ssl.truststore.location"))
    if ttype == "JKS" or ttype == "JCEKS":
        ttype = _jks_compat(ttype, "ssl.truststore.type", location, "ssl.truststore.location")
    if ttype != "PKCS12":
        raise TlsSettingError("ssl.truststore.type", "%r is not supported: use PEM or PKCS12" % ttype)
    data = _read_bytes(location, "ssl.truststore.location")
    _refuse_jks_bytes(data, "ssl.truststore.type", location)
    from cryptography.hazmat.primitives.serialization import pkcs12
    try:
        store = pkcs12.load_pkcs12(data, password.encode() if password is not None else None)
    except ValueError:
        key = "ssl.truststore.password" if password is not None else "ssl.truststore.location"
        raise TlsSettingError(key, "cannot open the PKCS12 trust store %s: %s" % (
            location, "wrong password, or not a PKCS12 file" if password is not None
            else "not a PKCS12 file, or its certificates need ssl.truststore.password")) from None
    certs = ([store.cert.certificate] if store.cert is not None else []) + [c.certificate for c in store.additional_certs]
    if not certs:
        raise TlsSettingError("ssl.truststore.location", "the trust store %s holds no certificate" % location)
    return _pem_text(certs)


def openssl_ciphers(names, key="ssl.cipher.suites"):
    """Java/IANA cipher suite names -> (OpenSSL names of the TLS <= 1.2 suites, TLS 1.3 names listed). Unknown
    names raise TlsSettingError naming ``key``."""
    legacy, tls13 = [], []
    for raw in names:
        name = raw.strip()
        if not name:
            continue
        if name in TLS13_SUITES:
            tls13.append(name)
            continue
        openssl = _iana_to_openssl(name)
        if openssl is None:
            raise TlsSettingError(key, "unknown cipher suite %r: give Java's (IANA) names, e.g. "
                                  "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 or TLS_AES_128_GCM_SHA256" % name)
        legacy.append(openssl)
    return legacy, tls13


# --------------------------------------------------------------------------------------------------- internals

def _store_type(settings, key):
    value = settings.get(key)
    return "JKS" if value is None else value.strip().upper()


def _jks_compat(stype, type_key, location, location_key):
    """A store declared JKS (Kafka's default type) whose file is PKCS12 is read as PKCS12, as Java's JKS key store
    does (keystore.type.compat, JDK 8u60+), so ``ssl.keystore.location=x.p12`` without a type works as with Kafka.
    A real JKS (or JCEKS) file, or anything else, is refused with the conversion."""
    try:
        data = _read_bytes(location, location_key)
    except TlsSettingError:   # unreadable: say what the declared type needs, as before the compat rule
        data = b""
    if stype == "JKS" and data[:1] == b"\x30":   # DER SEQUENCE: a PKCS12 PFX; JKS starts with 0xFEEDFEED
        return "PKCS12"
    raise _jks_refused(type_key, location, stype)


def _jks_refused(key, location, ktype):
    base, _ = os.path.splitext(location)
    dest = base + ".p12" if base + ".p12" != location else base + "-pkcs12.p12"
    return TlsSettingError(key, "%s stores cannot be read by kbroker (no maintained Python library reads them); "
                           "convert %s to PKCS12 once with: %s and set %s=PKCS12 (or use PEM files)"
                           % (ktype, location, JKS_CONVERSION % (location, dest), key))


def _refuse_jks_bytes(data, key, location):
    if data[:4] in (_JKS_MAGIC, _JCEKS_MAGIC):
        raise _jks_refused(key, location, "JKS")


def _read_bytes(path, key):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise TlsSettingError(key, "cannot read %s: %s" % (path, e.strerror or e)) from None


def _read_text(path, key):
    data = _read_bytes(path, key)
    try:
        return data.decode("ascii")
    except UnicodeDecodeError:
        raise TlsSettingError(key, "%s is not a PEM file (it is binary; is it a PKCS12 or JKS store? then set the "
                              "store type)" % path) from None


_KEY_LABELS = ("PRIVATE KEY", "ENCRYPTED PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY")


def _pem_blocks(text, labels):
    """The PEM blocks of ``text`` whose label is in ``labels``, in order, each with its armour."""
    out = []
    for label in labels:
        begin, end = "-----BEGIN %s-----" % label, "-----END %s-----" % label
        pos = 0
        while True:
            i = text.find(begin, pos)
            if i < 0:
                break
            j = text.find(end, i)
            if j < 0:
                break
            out.append((i, text[i:j + len(end)]))
            pos = j + len(end)
    return [block for _, block in sorted(out)]


def _pem_private_key(text, password, key):
    blocks = _pem_blocks(text, _KEY_LABELS)
    if not blocks:
        raise TlsSettingError(key, "no PEM private key found")
    if len(blocks) > 1:
        raise TlsSettingError(key, "%d private keys found; a key store holds one" % len(blocks))
    from cryptography.hazmat.primitives import serialization
    block = blocks[0]
    encrypted = "ENCRYPTED" in block.split("\n", 1)[0] or "Proc-Type: 4,ENCRYPTED" in block
    if encrypted and password is None:
        raise TlsSettingError("ssl.key.password", "the private key in %s is encrypted, but ssl.key.password is not "
                              "set" % key)
    if not encrypted and password is not None:
        raise TlsSettingError("ssl.key.password", "ssl.key.password is set, but the private key in %s is not "
                              "encrypted" % key)
    try:
        return serialization.load_pem_private_key(block.encode(), password.encode() if encrypted else None)
    except (ValueError, TypeError) as e:
        if encrypted:
            raise TlsSettingError("ssl.key.password", "cannot decrypt the private key in %s: wrong password" % key) \
                from None
        raise TlsSettingError(key, "unreadable private key: %s" % e) from None
    except Exception as e:  # noqa: BLE001 - cryptography raises UnsupportedAlgorithm & co for odd keys
        raise TlsSettingError(key, "unreadable private key: %s" % e) from None


def _pem_certificates(text, key):
    blocks = _pem_blocks(text, ("CERTIFICATE",))
    if not blocks:
        raise TlsSettingError(key, "no PEM certificate found")
    from cryptography import x509
    certs = []
    for block in blocks:
        try:
            certs.append(x509.load_pem_x509_certificate(block.encode()))
        except ValueError as e:
            raise TlsSettingError(key, "unreadable certificate: %s" % e) from None
    return certs


def _pem_text(certs):
    from cryptography.hazmat.primitives import serialization
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode("ascii") for c in certs)


def _public_der(public_key):
    from cryptography.hazmat.primitives import serialization
    return public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def _matched(key, chain, what):
    """(key, chain with the key's certificate first, what): the key store's certificate must be the key's."""
    mine = _public_der(key.public_key())
    for i, cert in enumerate(chain):
        if _public_der(cert.public_key()) == mine:
            return key, [cert] + chain[:i] + chain[i + 1:], what
    raise TlsSettingError(what, "no certificate in the key store matches its private key")


def _load_cert_chain(ctx, key, chain, what):
    """Load key + chain into ``ctx`` through a private temporary file holding the key encrypted under a one-time
    password (module docstring), removed as soon as OpenSSL has read it."""
    from cryptography.hazmat.primitives import serialization
    one_time = secrets.token_hex(32).encode()
    data = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.BestAvailableEncryption(one_time))
    data += b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain)
    directory = tempfile.mkdtemp(prefix="kbroker-tls-")  # mode 0700
    path = os.path.join(directory, "keystore.pem")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        ctx.load_cert_chain(path, password=one_time)
    except ssl.SSLError as e:
        raise TlsSettingError(what, "OpenSSL refused the key store's key or certificate: %s" % e) from None
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _load_trust(ctx, settings):
    pem = load_trusted(settings)
    if pem is None:
        ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH if ctx.protocol == ssl.PROTOCOL_TLS_SERVER
                               else ssl.Purpose.SERVER_AUTH)
        return
    try:
        ctx.load_verify_locations(cadata=pem)
    except ssl.SSLError as e:
        key = "ssl.truststore.certificates" if settings.get("ssl.truststore.certificates") else \
            "ssl.truststore.location"
        raise TlsSettingError(key, "OpenSSL refused the trusted certificates: %s" % e) from None


def _iana_to_openssl(name):
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return None
    kx, _, cipher = name[4:].partition("_WITH_")
    if kx not in _KX or cipher not in _CIPHER:
        return None
    if kx == "RSA" and cipher == "CHACHA20_POLY1305_SHA256":
        return None  # no such suite
    return _KX[kx] + _CIPHER[cipher]


def _allowed_versions(settings):
    enabled = settings.get("ssl.enabled.protocols")
    if isinstance(enabled, str):
        enabled = [p for p in enabled.split(",")]
    names = [p.strip() for p in (enabled or ()) if p.strip()]
    versions = set()
    for name in names or ("TLSv1.2", "TLSv1.3"):
        if name in _VERSIONS:
            versions.add(_VERSIONS[name])
        elif name in _OLD_PROTOCOLS:
            raise TlsSettingError("ssl.enabled.protocols", "%s is not supported: kbroker speaks TLSv1.2 and TLSv1.3 "
                                  "only" % name)
        else:
            raise TlsSettingError("ssl.enabled.protocols", "unknown protocol %r (use TLSv1.2, TLSv1.3)" % name)
    protocol = (settings.get("ssl.protocol") or "TLSv1.3").strip()
    if protocol not in _PROTOCOL_CAP:
        raise TlsSettingError("ssl.protocol", "%r is not supported: use TLSv1.3, TLSv1.2 or TLS" % protocol)
    cap = _PROTOCOL_CAP[protocol]
    allowed = {v for v in versions if v <= cap}
    if not allowed:
        raise TlsSettingError("ssl.enabled.protocols", "no enabled protocol (%s) is allowed by ssl.protocol=%s"
                              % (", ".join(names), protocol))
    return allowed


def _apply_versions_and_ciphers(ctx, settings):
    allowed = _allowed_versions(settings)
    suites = settings.get("ssl.cipher.suites")
    if isinstance(suites, str):
        suites = suites.split(",")
    legacy, tls13 = openssl_ciphers(suites or ())
    if legacy or tls13:
        if tls13 and set(tls13) != TLS13_SUITES:
            raise TlsSettingError("ssl.cipher.suites", "TLS 1.3 suites can be listed all three or none (%s): OpenSSL "
                                  "enables exactly those and Python cannot restrict them"
                                  % ", ".join(sorted(TLS13_SUITES)))
        if not tls13:
            allowed.discard(ssl.TLSVersion.TLSv1_3)
        if legacy:
            try:
                ctx.set_ciphers(":".join(legacy))
            except ssl.SSLError:
                raise TlsSettingError("ssl.cipher.suites", "none of %s is available in this OpenSSL (%s)"
                                      % (", ".join(s.strip() for s in suites if s.strip()), ssl.OPENSSL_VERSION)) \
                    from None
            available = {c["name"] for c in ctx.get_ciphers()}
            missing = [s for s in legacy if s not in available]
            if missing:
                raise TlsSettingError("ssl.cipher.suites", "not available in this OpenSSL (%s): %s"
                                      % (ssl.OPENSSL_VERSION, ", ".join(missing)))
        else:
            allowed.discard(ssl.TLSVersion.TLSv1_2)
        if not allowed:
            raise TlsSettingError("ssl.cipher.suites", "no cipher suite listed is usable with the enabled protocols")
    ctx.minimum_version = min(allowed)
    ctx.maximum_version = max(allowed)


# ------------------------------------------------------------------------------------------ server handshakes

class HandshakeFailed(Exception):
    """A connection that did not complete the TLS handshake (or whose certificate no mapping rule names); the
    server closes it without a word (a Kafka response would be plaintext)."""


class ListenerTls:
    """One TLS listener's server side: ``context`` (from ``server_context``, of gevent's SSLContext class in the
    broker so that wrapped sockets are cooperative) and ``mapper`` (``principal.SslPrincipalMapper`` of the
    listener's ssl.principal.mapping.rules)."""
    __slots__ = ("context", "mapper")

    def __init__(self, context, mapper):
        self.context = context
        self.mapper = mapper

    def accept(self, sock, timeout):
        """Handshake an accepted socket in the calling greenlet, bounded by ``timeout`` seconds (a peer that never
        finishes holds nothing longer); returns (``tls_stream.TlsStream``, principal). On failure the socket is closed and
        HandshakeFailed says why. A plaintext Kafka request is not a ClientHello: it fails here, unanswered."""
        import gevent  # the server's event loop; kept out of the module's import for the CLI tools
        from kbroker.security.tls_stream import TlsStream

        ssl_sock = TlsStream(sock, self.context, server_side=True)
        timer = gevent.Timeout(timeout)
        timer.start()
        try:
            ssl_sock.do_handshake()
            peer = ssl_sock.getpeercert(binary_form=True)
            return ssl_sock, self.mapper.principal(peer)
        except gevent.Timeout as t:
            if t is not timer:
                raise
            why = "no TLS handshake within %g s" % timeout
        except ssl.SSLError as e:
            why = "TLS handshake failed: %s" % (e.reason or e)
        except OSError as e:   # ConnectionError included: the peer closed during the handshake
            why = "TLS handshake failed: %s" % e
        except Exception as e:  # noqa: BLE001 - principal mapping (NoMatchingRule), an unreadable certificate
            why = "no principal for the client certificate: %s" % e
        finally:
            timer.close()
        try:
            ssl_sock.close()
        except OSError:
            pass
        raise HandshakeFailed(why)
