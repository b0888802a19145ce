"""AlterUserScramCredentials (api key 51, KIP-554): add, replace or remove users' SCRAM credentials.

Version 0 only, flexible. The client salts and hashes the password itself (``salted_password`` = PBKDF2 of the
password with ``salt`` and ``iterations``), so the password never crosses the wire; the broker derives the stored
and server keys from it. ``mechanism``: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512. One result per user named.
"""
from kbroker.protocol.schema import Api, Field as F

API = Api(
    key=51, name="AlterUserScramCredentials", valid="0", flexible="0+",
    request=[
        F("deletions", "[]", fields=[
            F("name", "string"),
            F("mechanism", "int8"),
        ]),
        F("upsertions", "[]", fields=[
            F("name", "string"),
            F("mechanism", "int8"),
            F("iterations", "int32"),
            F("salt", "bytes"),
            F("salted_password", "bytes"),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", "[]", fields=[
            F("user", "string"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
        ]),
    ],
)
