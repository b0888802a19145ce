"""Fetch (api key 1): read record data from partition logs (consumers and follower replicas).

Versions 0-17, flexible from 12. Response ``records`` may be a ``FileRegion`` when encoding (the connection then
``sendfile``s it); for v0-v3 the handler passes down-converted bytes instead (magic 0 for v0/v1, magic 1 for v2/v3).
Version notes: v1 adds response throttle time; v2 means the client reads magic-1 messages; v3 adds a request-wide
``max_bytes`` and makes partition order significant; v4 adds isolation level, LSO and aborted transactions (client
reads v2 batches); v5 adds log start offsets; v6 only adds KAFKA_STORAGE_ERROR; v7 adds incremental fetch sessions
(KIP-227); v8 answers before throttling; v9 adds current leader epoch fencing (KIP-320); v10 permits zstd; v11 adds
rack id and preferred read replica (KIP-392); v12 is the first flexible version and adds last fetched epoch and
divergence/leader tags; v13 swaps topic names for topic ids (KIP-516); v14 allows OFFSET_MOVED_TO_TIERED_STORAGE;
v15 moves the replica id into a tagged ReplicaState (KIP-903); v16 adds node endpoints (KIP-951); v17 adds the
follower's directory id (KIP-853).
"""
from kbroker.protocol.schema import Api, Field as F

_REPLICA_STATE = [
    F("replica_id", "int32", "15+", default=-1),
    F("replica_epoch", "int64", "15+", default=-1),
]

_FETCH_PARTITION = [
    F("partition", "int32"),
    F("current_leader_epoch", "int32", "9+", default=-1),
    F("fetch_offset", "int64"),
    F("last_fetched_epoch", "int32", "12+", default=-1),
    F("log_start_offset", "int64", "5+", default=-1),
    F("partition_max_bytes", "int32"),
    F("replica_directory_id", "uuid", "17+", tag=0),
]

_FETCH_TOPIC = [
    F("topic", "string", "0-12"),
    F("topic_id", "uuid", "13+"),
    F("partitions", "[]", fields=_FETCH_PARTITION),
]

_FORGOTTEN_TOPIC = [
    F("topic", "string", "7-12"),
    F("topic_id", "uuid", "13+"),
    F("partitions", "[]int32", "7+"),
]

_EPOCH_END_OFFSET = [
    F("epoch", "int32", "12+", default=-1),
    F("end_offset", "int64", "12+", default=-1),
]

_LEADER_ID_AND_EPOCH = [
    F("leader_id", "int32", "12+", default=-1),
    F("leader_epoch", "int32", "12+", default=-1),
]

_SNAPSHOT_ID = [
    F("end_offset", "int64", "0+", default=-1),
    F("epoch", "int32", "0+", default=-1),
]

_ABORTED_TRANSACTION = [
    F("producer_id", "int64", "4+"),
    F("first_offset", "int64", "4+"),
]

_PARTITION_DATA = [
    F("partition_index", "int32"),
    F("error_code", "int16"),
    F("high_watermark", "int64"),
    F("last_stable_offset", "int64", "4+", default=-1),
    F("log_start_offset", "int64", "5+", default=-1),
    F("diverging_epoch", "{}", "12+", tag=0, fields=_EPOCH_END_OFFSET),
    F("current_leader", "{}", "12+", tag=1, fields=_LEADER_ID_AND_EPOCH),
    F("snapshot_id", "{}", "12+", tag=2, fields=_SNAPSHOT_ID),
    F("aborted_transactions", "[]", "4+", nullable="4+", fields=_ABORTED_TRANSACTION),
    F("preferred_read_replica", "int32", "11+", default=-1),
    F("records", "records", nullable="0+"),
]

_TOPIC_RESPONSE = [
    F("topic", "string", "0-12"),
    F("topic_id", "uuid", "13+"),
    F("partitions", "[]", fields=_PARTITION_DATA),
]

_NODE_ENDPOINT = [
    F("node_id", "int32", "16+"),
    F("host", "string", "16+"),
    F("port", "int32", "16+"),
    F("rack", "string", "16+", nullable="16+", default=None),
]

API = Api(
    key=1, name="Fetch", valid="0-17", flexible="12+",
    request=[
        F("cluster_id", "string", "12+", nullable="12+", default=None, tag=0),
        # v15: replaced by replica_state.replica_id.
        F("replica_id", "int32", "0-14", default=-1),
        F("replica_state", "{}", "15+", tag=1, fields=_REPLICA_STATE),
        F("max_wait_ms", "int32"),
        F("min_bytes", "int32"),
        F("max_bytes", "int32", "3+", default=0x7FFFFFFF),
        F("isolation_level", "int8", "4+", default=0),
        F("session_id", "int32", "7+", default=0),
        F("session_epoch", "int32", "7+", default=-1),
        F("topics", "[]", fields=_FETCH_TOPIC),
        F("forgotten_topics_data", "[]", "7+", fields=_FORGOTTEN_TOPIC),
        F("rack_id", "string", "11+", default=""),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+"),
        F("error_code", "int16", "7+"),
        F("session_id", "int32", "7+", default=0),
        F("responses", "[]", fields=_TOPIC_RESPONSE),
        F("node_endpoints", "[]", "16+", tag=0, fields=_NODE_ENDPOINT),
    ],
)
