"""SaslHandshake (17) v0-v1 and SaslAuthenticate (36) v0-v2 once a connection is past authentication.

Before authentication a SASL listener's frames go to the connection's authenticator
(``kbroker/security/authenticator.py``), which runs the exchange; these handlers only see the requests that come
after it, or on a PLAINTEXT/SSL listener, and answer as Kafka's KafkaApis does: ILLEGAL_SASL_STATE (34). They are
registered so that ApiVersions advertises the SASL APIs on every listener (clients read the versions from it).
"""
from kbroker.security.authenticator import ILLEGAL_SASL_STATE
from kbroker.server.router import handler


@handler(17, (0, 1))
def sasl_handshake(ctx, req):
    return {"error_code": ILLEGAL_SASL_STATE, "mechanisms": []}


@handler(36, (0, 2))
def sasl_authenticate(ctx, req):
    message = ("SaslAuthenticate request received after successful authentication"
               if ctx.identity.security_protocol.startswith("SASL_") else
               "Unexpected SASL request on a %s listener" % ctx.identity.security_protocol)
    return {"error_code": ILLEGAL_SASL_STATE, "error_message": message, "auth_bytes": b"", "session_lifetime_ms": 0}
