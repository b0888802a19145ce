"""SaslHandshake (api key 17): choose a SASL mechanism; the broker answers with the mechanisms it enables.

Versions 0-1, never flexible (Kafka cannot bump it: clients <= 2.4 negotiate it wrongly, KAFKA-9577). In v0 the SASL
tokens then flow as raw size-prefixed frames; v1 means they are wrapped in SaslAuthenticate requests. The response
is the same in both versions.
"""
from kbroker.protocol.schema import Api, Field as F

API = Api(
    key=17, name="SaslHandshake", valid="0-1", flexible="none",
    request=[
        F("mechanism", "string"),
    ],
    response=[
        F("error_code", "int16"),
        F("mechanisms", "[]string"),
    ],
)
