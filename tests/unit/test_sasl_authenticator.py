"""The SASL authenticator state machine (kbroker/security/authenticator.py) on bytes: what each state accepts,
the answers it builds, and how it fails."""
import pytest

from kbroker.protocol.apis import APIS
from kbroker.protocol.headers import decode_response_header, encode_request_header
from kbroker.protocol.schema import Writer
from kbroker.security.authenticator import (MAX_API_VERSIONS, SERVER_MECHANISMS, ListenerSasl, MechanismContext,
                                            SaslConfigError, load_factory)
from kbroker.security.jaas import parse_entry
from kbroker.security.sasl import AuthenticationFailed, ServerMechanism
from kbroker.security.sasl.plain import PlainServer
from kbroker.security.sasl.scram import ScramClient, make_credential

CREDS = {"sue": make_credential("SCRAM-SHA-512", "sue-secret")}


def settings(**extra):
    entry = parse_entry('org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="pw";', "k")
    ctx = MechanismContext("SASL_PLAINTEXT", lambda u, m: CREDS.get(u) if m == "SCRAM-SHA-512" else None)
    mechs = {"PLAIN": load_factory("PLAIN", entry, ctx), "SCRAM-SHA-512": load_factory("SCRAM-SHA-512", entry, ctx)}
    mechs.update(extra)
    return ListenerSasl("SASL_PLAINTEXT", mechs)


def req(api_key, version, body, corr=7):
    api = APIS[api_key]
    w = Writer()
    w.buf += encode_request_header(api.request_header_version(version), api_key, version, corr, "t")
    api.encode_request(version, body, w)
    return memoryview(w.getvalue())


def resp(verdict, api_key, version, corr=7):
    api = APIS[api_key]
    data = verdict.reply.getvalue()
    got, pos = decode_response_header(data, api.response_header_version(version))
    assert got == corr
    return api.decode_response(version, data, pos)


def test_plain_v1_success_sets_principal():
    a = settings().new_authenticator()
    assert a.receive(req(18, 3, {})).dispatch
    v = a.receive(req(17, 1, {"mechanism": "PLAIN"}))
    assert resp(v, 17, 1) == {"error_code": 0, "mechanisms": ["PLAIN", "SCRAM-SHA-512"]} and not v.close
    v = a.receive(req(36, 2, {"auth_bytes": b"\0alice\0pw"}))
    assert resp(v, 36, 2)["error_code"] == 0 and resp(v, 36, 2)["session_lifetime_ms"] == 0
    assert a.complete and a.principal == "User:alice"


def test_scram_v0_raw_tokens():
    a = settings().new_authenticator()
    assert resp(a.receive(req(17, 0, {"mechanism": "SCRAM-SHA-512"})), 17, 0)["error_code"] == 0
    assert a.raw
    c = ScramClient("SCRAM-SHA-512", "sue", "sue-secret")
    v = a.receive(memoryview(c.first()))
    final = c.step(v.reply.getvalue())
    v = a.receive(memoryview(final))
    assert c.step(v.reply.getvalue()) is None and c.complete
    assert a.complete and not a.raw and a.principal == "User:sue"


def test_failure_answers_58_then_close_and_raw_failure_just_closes():
    a = settings().new_authenticator()
    a.receive(req(17, 1, {"mechanism": "PLAIN"}))
    v = a.receive(req(36, 1, {"auth_bytes": b"\0alice\0nope"}))
    assert resp(v, 36, 1) == {"error_code": 58, "error_message": "Authentication failed: Invalid username or "
                              "password", "auth_bytes": b"", "session_lifetime_ms": 0}
    assert v.close and a.failed and not a.complete
    a = settings().new_authenticator()
    a.receive(req(17, 0, {"mechanism": "PLAIN"}))
    v = a.receive(memoryview(b"\0alice\0nope"))
    assert v.reply is None and v.close and a.failed


@pytest.mark.parametrize("frames", [
    [req(3, 1, {"topics": None})],                                                    # Metadata first
    [req(36, 1, {"auth_bytes": b"x"})],                                               # no handshake yet
    [req(17, 1, {"mechanism": "PLAIN"}), req(18, 0, {})],                             # ApiVersions after it
    [req(17, 1, {"mechanism": "PLAIN"}), req(3, 1, {"topics": None})],                # Metadata during it
    [req(18, 0, {}, corr=i) for i in range(MAX_API_VERSIONS + 1)],                   # ApiVersions forever
    [memoryview(b"\0\x11")],                                                           # no header
    [memoryview(b"\0\x11\0\x07\0\0\0\1\0\0")],                                         # handshake v7
    [memoryview(bytes(req(17, 1, {"mechanism": "PLAIN"}))[:-3])],                     # truncated body
])
def test_anything_else_closes(frames):
    a = settings().new_authenticator()
    for f in frames[:-1]:
        assert not a.receive(f).close
    v = a.receive(frames[-1])
    assert v.close and v.reply is None and not a.complete and not a.failed


def test_unsupported_mechanism_lists_enabled_and_closes():
    a = settings().new_authenticator()
    v = a.receive(req(17, 1, {"mechanism": "GSSAPI"}))
    assert resp(v, 17, 1) == {"error_code": 33, "mechanisms": ["PLAIN", "SCRAM-SHA-512"]}
    assert v.close


def test_steps_are_bounded_and_mechanism_bugs_fail_the_client_only():
    class Chatty(ServerMechanism):
        name = "CHATTY"
        MAX_STEPS = 3

        def step(self, token):
            if token == b"boom":
                raise RuntimeError("bug")
            return b"more"

    a = settings(CHATTY=Chatty).new_authenticator()
    a.receive(req(17, 1, {"mechanism": "CHATTY"}))
    for _ in range(3):
        assert resp(a.receive(req(36, 1, {"auth_bytes": b"x"})), 36, 1)["error_code"] == 0
    v = a.receive(req(36, 1, {"auth_bytes": b"x"}))
    assert resp(v, 36, 1)["error_code"] == 58 and "more than 3" in resp(v, 36, 1)["error_message"] and v.close
    a = settings(CHATTY=Chatty).new_authenticator()
    a.receive(req(17, 1, {"mechanism": "CHATTY"}))
    v = a.receive(req(36, 1, {"auth_bytes": b"boom"}))
    assert resp(v, 36, 1)["error_code"] == 58 and "bug" not in resp(v, 36, 1)["error_message"]


def test_mechanism_table():
    assert set(SERVER_MECHANISMS) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI"}
    with pytest.raises(SaslConfigError, match="OAUTHBEARER is not supported"):
        load_factory("OAUTHBEARER", None, MechanismContext("L"))
    with pytest.raises(SaslConfigError, match="no SASL mechanism"):
        ListenerSasl("L", {})
    assert isinstance(settings().mechanisms["PLAIN"](), PlainServer)
    with pytest.raises(AuthenticationFailed):
        settings().mechanisms["PLAIN"]().step(b"\0bob\0pw")
