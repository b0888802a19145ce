"""AlterReplicaLogDirs (api key 34): move replicas to other log directories of the answering broker (KIP-113).

Versions 0-2 (0 deprecated), flexible from 2. Version notes: v1 answers before throttling; v2 is the first flexible
version. ``path`` is an absolute log directory path as the broker's log.dirs name it.
"""
from kbroker.protocol.schema import Api, Field as F

_TOPIC = [
    F("name", "string"),
    F("partitions", "[]int32"),
]

_DIR = [
    F("path", "string"),
    F("topics", "[]", fields=_TOPIC),
]

_PARTITION_RESULT = [
    F("partition_index", "int32"),
    F("error_code", "int16"),
]

_TOPIC_RESULT = [
    F("topic_name", "string"),
    F("partitions", "[]", fields=_PARTITION_RESULT),
]

API = Api(
    key=34, name="AlterReplicaLogDirs", valid="0-2", flexible="2+",
    request=[
        F("dirs", "[]", fields=_DIR),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", "[]", fields=_TOPIC_RESULT),
    ],
)
