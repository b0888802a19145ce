"""SaslAuthenticate (api key 36): carry one SASL token each way after a v1 SaslHandshake.

Versions 0-2, flexible from 2. Version notes: v1 adds the session lifetime (0 = no re-authentication required,
KIP-368); v2 is the first flexible version.
"""
from kbroker.protocol.schema import Api, Field as F

API = Api(
    key=36, name="SaslAuthenticate", valid="0-2", flexible="2+",
    request=[
        F("auth_bytes", "bytes"),
    ],
    response=[
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("auth_bytes", "bytes"),
        F("session_lifetime_ms", "int64", "1+", default=0),
    ],
)
