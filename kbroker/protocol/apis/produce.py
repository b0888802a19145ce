"""Produce (api key 0): append record data to partition logs.

Request versions 0-11, flexible from 9. ``records`` holds a v0/v1 message set (v0-v2) or v2 record batches (v3+);
the record layer tells them apart by the magic byte, so the schema only carries the bytes (zero-copy memoryview).
Request version notes: v1-v2 are wire-identical to v0; v3 adds ``transactional_id`` and v2 record batches; v4 only
lets the broker answer KAFKA_STORAGE_ERROR (56); v5-v6 are the same as v3/v4; v7 permits zstd; v8 gets per-record
errors back; v9 is the first flexible version; v10 is v9 plus leader hints in the response (KIP-951); v11 allows
TRANSACTION_ABORTABLE (121).
"""
from kbroker.protocol.schema import Api, Field as F

_PARTITION_DATA = [
    F("index", "int32"),
    F("records", "records", nullable="0+"),
]

_TOPIC_DATA = [
    F("name", "string"),
    F("partition_data", "[]", fields=_PARTITION_DATA),
]

_RECORD_ERROR = [
    F("batch_index", "int32", "8+"),
    F("batch_index_error_message", "string", "8+", nullable="8+", default=None),
]

_LEADER_ID_AND_EPOCH = [
    F("leader_id", "int32", "10+", default=-1),
    F("leader_epoch", "int32", "10+", default=-1),
]

_PARTITION_RESPONSE = [
    F("index", "int32"),
    F("error_code", "int16"),
    F("base_offset", "int64"),
    # v2: the broker reports the LogAppendTime it stamped (-1 when the topic uses CreateTime).
    F("log_append_time_ms", "int64", "2+", default=-1),
    # v5: log start offset, so clients can tell a truncated log from a real sequence gap.
    F("log_start_offset", "int64", "5+", default=-1),
    # v8: which records made the whole batch fail (KIP-467).
    F("record_errors", "[]", "8+", fields=_RECORD_ERROR),
    F("error_message", "string", "8+", nullable="8+", default=None),
    # v10: new leader hint on NOT_LEADER_OR_FOLLOWER (KIP-951).
    F("current_leader", "{}", "10+", tag=0, fields=_LEADER_ID_AND_EPOCH),
]

_TOPIC_RESPONSE = [
    F("name", "string"),
    F("partition_responses", "[]", fields=_PARTITION_RESPONSE),
]

_NODE_ENDPOINT = [
    F("node_id", "int32", "10+"),
    F("host", "string", "10+"),
    F("port", "int32", "10+"),
    F("rack", "string", "10+", nullable="10+", default=None),
]

API = Api(
    key=0, name="Produce", valid="0-11", flexible="9+",
    request=[
        # v3: transactional producers identify themselves (null otherwise).
        F("transactional_id", "string", "3+", nullable="3+", default=None),
        F("acks", "int16"),
        F("timeout_ms", "int32"),
        F("topic_data", "[]", fields=_TOPIC_DATA),
    ],
    response=[
        F("responses", "[]", fields=_TOPIC_RESPONSE),
        # v1: quota throttle time.
        F("throttle_time_ms", "int32", "1+", default=0),
        # v10: endpoints of the leaders named in current_leader (KIP-951).
        F("node_endpoints", "[]", "10+", tag=0, fields=_NODE_ENDPOINT),
    ],
)
