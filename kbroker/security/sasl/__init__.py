"""SASL mechanisms, server and client side, as small state machines over bytes (no sockets here).

The contract every server mechanism keeps (``ServerMechanism``), so that ``kbroker/security/authenticator.py`` can
drive any of them the same way over SaslHandshake v0 raw tokens or SaslAuthenticate v0-v2:

* ``step(token) -> bytes | None``: consume the client's next token and return the challenge to send back
  (``b""`` for an empty one), or None when there is nothing to send. Raises ``AuthenticationFailed`` (a wrong
  password, an unknown user, a malformed token) whose message is safe to send to the client (it never says
  whether the user exists). After the step that completes the exchange, ``complete`` is True.
* ``complete``: the exchange finished successfully.
* ``authorization_id``: the authenticated user name once ``complete`` (the principal is ``User:<it>``, before any
  principal mapping rules).
* ``MAX_STEPS`` bounds the number of tokens a client may send (a client that keeps talking is dropped).

Client mechanisms (``ClientMechanism``: ``first() -> bytes``, ``step(challenge) -> bytes | None``, ``complete``)
are what brokers use towards each other and what the command-line tools use.
"""


class AuthenticationFailed(Exception):
    """The client's credentials or tokens were refused. ``str(e)`` is what the client is told
    (SASL_AUTHENTICATION_FAILED, 58): never more than Kafka says ("Authentication failed: Invalid username or
    password", "Authentication failed during authentication due to invalid credentials with SASL mechanism
    SCRAM-SHA-256")."""


class ServerMechanism:
    """Base of the server side of one mechanism for one connection (module docstring has the contract)."""
    name = None
    MAX_STEPS = 8

    def __init__(self):
        self.complete = False
        self.authorization_id = None

    def step(self, token):
        raise NotImplementedError


class ClientMechanism:
    """Base of the client side of one mechanism for one connection."""
    name = None

    def __init__(self):
        self.complete = False

    def first(self):
        raise NotImplementedError

    def step(self, challenge):
        raise NotImplementedError
