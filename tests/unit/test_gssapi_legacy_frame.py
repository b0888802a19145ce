"""Kafka 0.9's GSSAPI opening (kbroker/security/authenticator.py ``_legacy_gssapi_frame``): a first frame that is
no Kafka request goes to GSSAPI when the listener enables it -- and only then, and only as the very first frame.
A fake GSSAPI mechanism records the tokens; the real one is exercised against a KDC in
tests/integration/test_security_gssapi.py::test_kafka_09_first_frame_gssapi_without_handshake."""
from kbroker.protocol.apis import APIS
from kbroker.protocol.headers import encode_request_header
from kbroker.protocol.schema import Writer
from kbroker.security.authenticator import ListenerSasl
from kbroker.security.sasl import AuthenticationFailed, ServerMechanism
from kbroker.security.sasl.plain import PlainServer

# A Kerberos AP-REQ starts with the ASN.1 application tag 0x60 and a long length: as a Kafka header that is api
# key 0x6082 (none) -- or too short to parse at all.
AP_REQ = b"\x60\x82\x02\x9a" + bytes(range(200))


class FakeGssapi(ServerMechanism):
    name = "GSSAPI"

    def __init__(self, seen):
        super().__init__()
        self.seen = seen

    def step(self, token):
        self.seen.append(bytes(token))
        if token != AP_REQ:
            raise AuthenticationFailed("bad token")
        self.complete, self.authorization_id = True, "legacy"
        return b"ap-rep"


def listener(*mechanisms):
    seen = []
    factories = {"PLAIN": lambda: PlainServer({"alice": "pw"}), "GSSAPI": lambda: FakeGssapi(seen)}
    return ListenerSasl("SASL_PLAINTEXT", {m: factories[m] for m in mechanisms}), seen


def api_versions():
    api = APIS[18]
    w = Writer()
    w.buf += encode_request_header(api.request_header_version(0), 18, 0, 1, "t")
    api.encode_request(0, {}, w)
    return memoryview(w.getvalue())


def test_first_frame_token_goes_to_gssapi_raw():
    settings, seen = listener("PLAIN", "GSSAPI")
    a = settings.new_authenticator()
    v = a.receive(memoryview(AP_REQ))
    assert seen == [AP_REQ] and v.reply.getvalue() == b"ap-rep" and not v.close
    assert a.complete and a.principal == "User:legacy"


def test_unparsable_short_first_frame_goes_to_gssapi_and_fails_closed():
    settings, seen = listener("GSSAPI")
    a = settings.new_authenticator()
    v = a.receive(memoryview(b"\x60"))
    assert seen == [b"\x60"] and v.close and v.reply is None and not a.complete


def test_without_gssapi_enabled_the_frame_is_refused():
    settings, seen = listener("PLAIN")
    a = settings.new_authenticator()
    v = a.receive(memoryview(AP_REQ))
    assert v.close and "ILLEGAL_SASL_STATE" in v.close and seen == [] and not a.complete


def test_only_the_very_first_frame():
    # After ApiVersions a client has shown it speaks Kafka: the same bytes are then an illegal request.
    settings, seen = listener("PLAIN", "GSSAPI")
    a = settings.new_authenticator()
    assert a.receive(api_versions()).dispatch
    v = a.receive(memoryview(AP_REQ))
    assert v.close and "ILLEGAL_SASL_STATE" in v.close and seen == []
