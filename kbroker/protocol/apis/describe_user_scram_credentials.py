"""DescribeUserScramCredentials (api key 50, KIP-554): which SCRAM mechanisms (and iteration counts) users have.

Version 0 only, flexible. ``users`` null or empty describes every user that has a credential. ``mechanism`` is
KIP-554's ScramMechanism byte: 0 UNKNOWN, 1 SCRAM-SHA-256, 2 SCRAM-SHA-512. Salts and keys are never returned.
"""
from kbroker.protocol.schema import Api, Field as F

API = Api(
    key=50, name="DescribeUserScramCredentials", valid="0", flexible="0+",
    request=[
        F("users", "[]", nullable="0+", fields=[
            F("name", "string"),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("results", "[]", fields=[
            F("user", "string"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
            F("credential_infos", "[]", fields=[
                F("mechanism", "int8"),
                F("iterations", "int32"),
            ]),
        ]),
    ],
)
