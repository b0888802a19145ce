"""ApiVersions (api key 18): the (api_key, min_version, max_version) ranges the broker speaks.

Versions 0-4, flexible from 3. The response header is always v0 (no tagged section; see
``Api.response_header_version``), so a client that sent a too-new request can still read the UNSUPPORTED_VERSION
(35) answer, which the broker encodes at v0. The feature tags (0-3) are described for completeness; kbroker leaves
them at their defaults, so none is written. Version notes: v1 adds throttle time; v2 answers before throttling; v3
is the first flexible version and carries the client's software name/version; v4 allows a feature min version of 0
(KAFKA-17011).
"""
from kbroker.protocol.schema import Api, Field as F

_API_VERSION = [
    F("api_key", "int16"),
    F("min_version", "int16"),
    F("max_version", "int16"),
]

_SUPPORTED_FEATURE = [
    F("name", "string", "3+"),
    F("min_version", "int16", "3+"),
    F("max_version", "int16", "3+"),
]

_FINALIZED_FEATURE = [
    F("name", "string", "3+"),
    F("max_version_level", "int16", "3+"),
    F("min_version_level", "int16", "3+"),
]

API = Api(
    key=18, name="ApiVersions", valid="0-4", flexible="3+",
    request=[
        F("client_software_name", "string", "3+"),
        F("client_software_version", "string", "3+"),
    ],
    response=[
        F("error_code", "int16"),
        F("api_keys", "[]", fields=_API_VERSION),
        F("throttle_time_ms", "int32", "1+"),
        F("supported_features", "[]", "3+", tag=0, fields=_SUPPORTED_FEATURE),
        F("finalized_features_epoch", "int64", "3+", tag=1, default=-1),
        F("finalized_features", "[]", "3+", tag=2, fields=_FINALIZED_FEATURE),
        F("zk_migration_ready", "bool", "3+", tag=3, default=False),
    ],
)
