"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), server and client side, as Kafka speaks them.

Messages (RFC 5802 section 7; ``,`` separates attributes, user names escape ``,`` as ``=2C`` and ``=`` as ``=3D``)::

    client-first   n,[a=<authzid>],n=<user>,r=<client nonce>[,<ext>=<value>]...
    server-first   r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final   c=<base64 of the gs2 header "n,,">,r=<nonce>,p=<base64 proof>
    server-final   v=<base64 server signature>

The keys (``ScramCredential`` is what a server stores, in Kafka's format ``salt=<b64>,stored_key=<b64>,
server_key=<b64>,iterations=<n>``; the password itself is never stored)::

    SaltedPassword  = PBKDF2-HMAC-H(password, salt, iterations)
    ClientKey       = HMAC(SaltedPassword, "Client Key");  StoredKey = H(ClientKey)
    ServerKey       = HMAC(SaltedPassword, "Server Key")
    AuthMessage     = client-first-bare + "," + server-first + "," + client-final-without-proof
    ClientProof     = ClientKey XOR HMAC(StoredKey, AuthMessage)   (the server checks H(proof XOR sig) == StoredKey)
    ServerSignature = HMAC(ServerKey, AuthMessage)

Kafka's rules kept here (``ScramSaslServer`` / ``ScramMechanism``): channel binding is never used (only the gs2
header ``n,,`` -- ``y`` or ``p`` is refused); the final message's nonce must end with the server-first nonce (not
equal it: librdkafka 1.9 repeats its own nonce in front); an authorization id, when given, must equal the user name;
the only extension Kafka knows is ``tokenauth`` (delegation tokens), which kbroker does not have, so any extension
fails the exchange; iterations are 4096..16384 for both mechanisms (a credential outside is refused when stored, and
a client refuses a server asking for fewer than 4096). Unlike Kafka, an unknown user is not refused at the first
message: the exchange goes on with a fake credential derived from a per-process secret (RFC 5802 section 5.1), so a
client learns only "invalid credentials" at the end, never whether the user exists.
"""
import base64
import hashlib
import hmac
import os
import re

from kbroker.security.sasl import AuthenticationFailed, ClientMechanism, ServerMechanism

MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096

# name -> (hashlib name, wire id of KIP-554's ScramMechanism: 0 = UNKNOWN)
MECHANISMS = {"SCRAM-SHA-256": ("sha256", 1), "SCRAM-SHA-512": ("sha512", 2)}
MECHANISM_BY_ID = {wire: name for name, (_, wire) in MECHANISMS.items()}

# Kafka's message for everything but a malformed first message (SaslServerAuthenticator's generic one).
_FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism %s"
# A client-first message: gs2 header (cbind flag, optional authzid), then n=, r= and extensions (Kafka's pattern).
_CLIENT_FIRST = re.compile(r"(?P<cbind>[nyp](?:=[^,]*)?),(?:a=(?P<authzid>[^,]*))?,"
                           r"n=(?P<user>[^,]*),r=(?P<nonce>[^,]*)(?P<ext>(?:,[^,]*)*)", re.S)
_CLIENT_FINAL = re.compile(r"c=(?P<cbind>[^,]*),r=(?P<nonce>[^,]*)(?P<ext>(?:,[^,]*)*?),p=(?P<proof>[^,]*)", re.S)
_SERVER_FIRST = re.compile(r"(?:m=[^,]*,)?r=(?P<nonce>[^,]*),s=(?P<salt>[^,]*),i=(?P<iterations>[0-9]{1,9})"
                           r"(?:,[^,]*)*", re.S)
_PRINTABLE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")   # RFC 5802 "printable": %x21-2B / %x2D-7E (no comma)
# A per-process secret for the fake credential of an unknown user (the same user always gets the same salt).
_FAKE_SECRET = os.urandom(32)
# Our part of the nonce: 24 random bytes in hex (192 bits; Kafka uses 130 bits in base 36): alphanumeric like
# Kafka's, so no client's attribute parser meets a '=' or '/' in it.
_NONCE_BYTES = 24


class ScramCredential:
    """What a server stores for one user and mechanism (never the password)."""
    __slots__ = ("salt", "stored_key", "server_key", "iterations")

    def __init__(self, salt, stored_key, server_key, iterations):
        self.salt = bytes(salt)
        self.stored_key = bytes(stored_key)
        self.server_key = bytes(server_key)
        self.iterations = int(iterations)

    def __eq__(self, other):
        return isinstance(other, ScramCredential) and all(
            getattr(self, a) == getattr(other, a) for a in self.__slots__)

    def __repr__(self):
        return "ScramCredential(iterations=%d)" % self.iterations

    def to_kafka(self):
        """Kafka's ScramCredentialUtils format: ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``."""
        b64 = lambda b: base64.b64encode(b).decode("ascii")  # noqa: E731
        return "salt=%s,stored_key=%s,server_key=%s,iterations=%d" % (
            b64(self.salt), b64(self.stored_key), b64(self.server_key), self.iterations)

    @classmethod
    def from_kafka(cls, text):
        """Parse ``to_kafka``'s format; ValueError when a field is missing or not base64/decimal."""
        fields = {}
        for part in str(text).split(","):
            k, sep, v = part.partition("=")
            if not sep:
                raise ValueError("malformed SCRAM credential field %r" % part)
            fields[k.strip()] = v.strip()
        try:
            return cls(base64.b64decode(fields["salt"], validate=True),
                       base64.b64decode(fields["stored_key"], validate=True),
                       base64.b64decode(fields["server_key"], validate=True), int(fields["iterations"]))
        except KeyError as e:
            raise ValueError("SCRAM credential lacks %s" % e) from None
        except (ValueError, base64.binascii.Error) as e:
            raise ValueError("malformed SCRAM credential: %s" % e) from None


def _hash(mechanism):
    try:
        return MECHANISMS[mechanism][0]
    except KeyError:
        raise ValueError("unknown SCRAM mechanism %r" % mechanism) from None


def _hmac(algo, key, msg):
    return hmac.new(key, msg, algo).digest()


def salted_password(mechanism, password, salt, iterations):
    """Hi(password, salt, i) of RFC 5802 (PBKDF2 with HMAC-H). ``password`` is str (UTF-8, not SASLprep'd, as
    Kafka) or bytes. Takes ~5 ms at 4096 iterations: callers on the event loop run it at most once per exchange."""
    if isinstance(password, str):
        password = password.encode("utf-8")
    return hashlib.pbkdf2_hmac(_hash(mechanism), password, bytes(salt), int(iterations))


def credential_from_salted(mechanism, salt, salted, iterations):
    """The stored credential for a salted password (what AlterUserScramCredentials carries, KIP-554)."""
    algo = _hash(mechanism)
    client_key = _hmac(algo, salted, b"Client Key")
    return ScramCredential(salt, hashlib.new(algo, client_key).digest(), _hmac(algo, salted, b"Server Key"),
                           iterations)


def make_credential(mechanism, password, iterations=DEFAULT_ITERATIONS, salt=None):
    """A new credential for ``password`` with a random 32-byte salt unless ``salt`` is given."""
    salt = os.urandom(32) if salt is None else salt
    return credential_from_salted(mechanism, salt, salted_password(mechanism, password, salt, iterations),
                                  iterations)


def escape_username(name):
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_username(name):
    """RFC 5802 saslname -> user name: ``=2C`` -> ``,`` and ``=3D`` -> ``=``; any other ``=`` is malformed."""
    if re.search(r"=(?!2C|3D)", name):
        raise AuthenticationFailed("Invalid username: %s" % name)
    return name.replace("=2C", ",").replace("=3D", "=")


def new_nonce():
    return os.urandom(_NONCE_BYTES).hex()


def _xor(a, b):
    return bytes(x ^ y for x, y in zip(a, b))


def _decode_token(token, what):
    try:
        return bytes(token).decode("utf-8")
    except UnicodeDecodeError:
        raise AuthenticationFailed("Invalid SCRAM %s: not UTF-8" % what) from None


def _b64(value, what):
    try:
        return base64.b64decode(value, validate=True)
    except (ValueError, base64.binascii.Error):
        raise AuthenticationFailed("Invalid SCRAM %s: bad base64" % what) from None


class ScramServer(ServerMechanism):
    """The server side of one SCRAM exchange: two steps (client-first -> server-first, client-final ->
    server-final). ``credentials(user) -> ScramCredential | None`` is the credential cache lookup (no blocking)."""
    MAX_STEPS = 2

    def __init__(self, mechanism, credentials, server_nonce=None):
        super().__init__()
        _hash(mechanism)
        self.name = mechanism
        self._server_nonce = server_nonce   # tests pass RFC 7677's; else 32 random bytes
        self._algo = MECHANISMS[mechanism][0]
        self._credentials = credentials
        self._state = "first"
        self._known = False

    def step(self, token):
        if self._state == "first":
            return self._first(_decode_token(token, "client-first message"))
        if self._state == "final":
            return self._final(_decode_token(token, "client-final message"))
        raise AuthenticationFailed("Unexpected SCRAM message after the exchange ended")

    def _fail(self):
        self._state = "failed"
        return AuthenticationFailed(_FAILED % self.name)

    def _first(self, text):
        m = _CLIENT_FIRST.fullmatch(text)
        if m is None:
            self._state = "failed"
            raise AuthenticationFailed("Invalid SCRAM client first message format")
        if m["cbind"] != "n":
            self._state = "failed"
            raise AuthenticationFailed("SCRAM channel binding is not supported (the client asked for %r)"
                                       % m["cbind"])
        user = unescape_username(m["user"])
        nonce = m["nonce"]
        if not user or not nonce or not _PRINTABLE.fullmatch(nonce):
            self._state = "failed"
            raise AuthenticationFailed("Invalid SCRAM client first message format")
        ext = {}
        for item in m["ext"].split(",")[1:]:
            k, _, v = item.partition("=")
            ext[k] = v
        if ext:
            # Kafka knows only "tokenauth" (delegation tokens, which kbroker does not have).
            self._state = "failed"
            if "tokenauth" in ext:
                raise AuthenticationFailed("Authentication failed: delegation tokens are not supported")
            raise AuthenticationFailed("Unsupported SCRAM extensions: %s" % ",".join(sorted(ext)))
        authzid = m["authzid"]
        if authzid is not None and authzid != "" and unescape_username(authzid) != user:
            self._state = "failed"
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        cred = self._credentials(user)
        self._known = cred is not None
        if cred is None:
            fake = _hmac(self._algo, _FAKE_SECRET, user.encode("utf-8"))
            cred = ScramCredential(fake[:32], os.urandom(len(fake)), os.urandom(len(fake)), DEFAULT_ITERATIONS)
        self._user = user
        self._cred = cred
        self._gs2 = text[:len(text) - len(text.split(",", 2)[2])]   # "n,," or "n,a=<authzid>,"
        self._client_first_bare = text[len(self._gs2):]
        self._nonce = nonce + (self._server_nonce or new_nonce())
        self._server_first = "r=%s,s=%s,i=%d" % (self._nonce, base64.b64encode(cred.salt).decode("ascii"),
                                                 cred.iterations)
        self._state = "final"
        return self._server_first.encode("ascii")

    def _final(self, text):
        m = _CLIENT_FINAL.fullmatch(text)
        if m is None:
            self._state = "failed"
            raise AuthenticationFailed("Invalid SCRAM client final message format")
        # Kafka's check is "ends with": Debian 12's librdkafka (1.9) sends its own nonce again in front of ours.
        if not m["nonce"].endswith(self._nonce):
            self._state = "failed"
            raise AuthenticationFailed("Invalid client nonce in the final client message.")
        if _b64(m["cbind"], "channel binding") != self._gs2.encode("utf-8"):
            self._state = "failed"
            raise AuthenticationFailed("Invalid SCRAM channel binding in the final client message")
        if m["ext"]:
            raise self._fail()
        proof = _b64(m["proof"], "client proof")
        cred = self._cred
        without_proof = text[:m.start("proof") - len(",p=")]
        auth_message = ("%s,%s,%s" % (self._client_first_bare, self._server_first, without_proof)).encode("utf-8")
        signature = _hmac(self._algo, cred.stored_key, auth_message)
        if len(proof) != len(signature):
            raise self._fail()
        client_key = _xor(proof, signature)
        if not (self._known and hmac.compare_digest(hashlib.new(self._algo, client_key).digest(), cred.stored_key)):
            raise self._fail()
        self._state = "done"
        self.complete = True
        self.authorization_id = self._user
        server_signature = _hmac(self._algo, cred.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)


class ScramClient(ClientMechanism):
    """The client side: ``first()`` -> client-first, ``step(server-first)`` -> client-final,
    ``step(server-final)`` -> None with ``complete`` True once the server's signature checked out. Raises
    AuthenticationFailed for a server that answers wrongly (nonce not extending ours, iterations below 4096, a bad
    signature, an ``e=`` error)."""

    def __init__(self, mechanism, username, password, nonce=None):
        super().__init__()
        _hash(mechanism)
        self.name = mechanism
        self._algo = MECHANISMS[mechanism][0]
        self._user = username
        self._password = password
        self._nonce = nonce or new_nonce()
        self._state = "first"

    def first(self):
        self._client_first_bare = "n=%s,r=%s" % (escape_username(self._user), self._nonce)
        self._state = "server-first"
        return ("n,," + self._client_first_bare).encode("utf-8")

    def step(self, challenge):
        text = _decode_token(challenge, "server message")
        if self._state == "server-first":
            return self._server_first(text)
        if self._state == "server-final":
            return self._server_final(text)
        raise AuthenticationFailed("Unexpected SCRAM server message after the exchange ended")

    def _server_first(self, text):
        if text.startswith("e="):
            raise AuthenticationFailed("SCRAM server error: %s" % text[2:])
        m = _SERVER_FIRST.fullmatch(text)
        if m is None:
            raise AuthenticationFailed("Invalid SCRAM server first message format")
        nonce, iterations = m["nonce"], int(m["iterations"])
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise AuthenticationFailed("Invalid server nonce: does not start with client nonce")
        if iterations < MIN_ITERATIONS:
            raise AuthenticationFailed("Requested iterations %d is less than the minimum %d for %s"
                                       % (iterations, MIN_ITERATIONS, self.name))
        salt = _b64(m["salt"], "salt")
        salted = salted_password(self.name, self._password, salt, iterations)
        without_proof = "c=biws,r=%s" % nonce
        auth_message = ("%s,%s,%s" % (self._client_first_bare, text, without_proof)).encode("utf-8")
        client_key = _hmac(self._algo, salted, b"Client Key")
        stored_key = hashlib.new(self._algo, client_key).digest()
        proof = _xor(client_key, _hmac(self._algo, stored_key, auth_message))
        self._server_signature = _hmac(self._algo, _hmac(self._algo, salted, b"Server Key"), auth_message)
        self._state = "server-final"
        return ("%s,p=%s" % (without_proof, base64.b64encode(proof).decode("ascii"))).encode("ascii")

    def _server_final(self, text):
        if text.startswith("e="):
            raise AuthenticationFailed("SCRAM server error: %s" % text[2:])
        if not text.startswith("v="):
            raise AuthenticationFailed("Invalid SCRAM server final message format")
        if not hmac.compare_digest(_b64(text[2:].split(",")[0], "server signature"), self._server_signature):
            raise AuthenticationFailed("Invalid server signature in the SCRAM server final message")
        self._state = "done"
        self.complete = True
        return None


def server_factory(mechanism, entry, context):
    """The authenticator's table entry (kbroker/security/authenticator.py): credentials come from the broker's
    SCRAM cache (``context.scram_credentials(user, mechanism)``, ``kbroker/security/scram_store.py``); the JAAS
    ScramLoginModule entry only says the listener serves SCRAM (its username/password are the broker's own)."""
    lookup = context.scram_credentials
    if lookup is None:
        raise ValueError("SCRAM needs the broker's credential store")
    return lambda: ScramServer(mechanism, lambda user: lookup(user, mechanism))
