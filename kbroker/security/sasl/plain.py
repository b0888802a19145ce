"""SASL PLAIN (RFC 4616), server and client side.

One client message, UTF-8: ``[authzid] NUL authcid NUL passwd``. Kafka's ``PlainSaslServer`` rules: the
authorization id, when not empty, must equal the user name; user name and password must not be empty. The users are
the ``user_<name>="<password>"`` options of the JAAS ``PlainLoginModule`` entry (``kbroker/security/jaas.py``);
passwords are compared in constant time (``hmac.compare_digest`` over the UTF-8 bytes), and an unknown user is
compared against a dummy so that the time does not tell whether the user exists.
"""
import hmac

from kbroker.security.sasl import AuthenticationFailed, ClientMechanism, ServerMechanism

NAME = "PLAIN"
LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
# Kafka's messages (PlainSaslServer): the one for wrong credentials never says which part was wrong.
INVALID = "Authentication failed: Invalid username or password"
_DUMMY = b"\0" * 32


def users_from_options(options):
    """``{"user_alice": "pw", "username": ..., ...}`` (JAAS options) -> ``{"alice": "pw"}``."""
    return {k[len("user_"):]: v for k, v in options.items() if k.startswith("user_") and len(k) > len("user_")}


class PlainServer(ServerMechanism):
    """``users``: {name: password} (str). One step: the client's message -> ``b""`` (Kafka answers PLAIN with an
    empty token) or AuthenticationFailed."""
    name = NAME
    MAX_STEPS = 1

    def __init__(self, users):
        super().__init__()
        self._users = users
        self._done = False

    def step(self, token):
        if self._done:
            raise AuthenticationFailed("Unexpected SASL PLAIN message after the exchange ended")
        self._done = True
        try:
            text = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        parts = text.split("\0")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens, got %d" % len(parts))
        authzid, user, password = parts
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        expected = self._users.get(user)
        given = password.encode("utf-8")
        ok = hmac.compare_digest(given, expected.encode("utf-8") if expected is not None else _DUMMY)
        if expected is None or not ok:
            raise AuthenticationFailed(INVALID)
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        self.complete = True
        self.authorization_id = user
        return b""


class PlainClient(ClientMechanism):
    name = NAME

    def __init__(self, username, password):
        super().__init__()
        self._message = ("\0%s\0%s" % (username, password)).encode("utf-8")

    def first(self):
        return self._message

    def step(self, challenge):
        # The server's (empty) answer ends the exchange; a SaslAuthenticate error is the caller's to raise.
        self.complete = True
        return None


def server_factory(mechanism, entry, context):
    """The authenticator's table entry (kbroker/security/authenticator.py): PLAIN's users are the ``user_<name>``
    options of ``entry`` (a PlainLoginModule JAAS entry), read once at startup."""
    users = users_from_options(entry.options)
    return lambda: PlainServer(users)
