"""Payloads of the "consumer" group protocol type: the member subscription and the assignment.

A consumer puts a Subscription in each JoinGroup ``protocols[].metadata`` and the leader puts one Assignment per member
in SyncGroup ``assignments[].assignment``. Both are ``int16 version`` + struct in the classic (non-flexible)
encoding, for every version:

    Subscription v0: topics [string] | user_data nullable bytes
                 v1: + owned_partitions [topic string | partitions [int32]]   (cooperative rebalancing, Kafka 2.3+)
                 v2: + generation_id int32 (default -1; tells stale owned_partitions apart)
                 v3: + rack_id nullable string (rack-aware assignment)
    Assignment v0-3: assigned_partitions [topic string | partitions [int32]] | user_data nullable bytes
                     (v1-v3 exist only to track the subscription's version; the layout never changed)

Later versions may only append fields, so a version above 3 is read with the v3 layout and trailing bytes are
ignored (so are trailing bytes at known versions: some clients pad). The broker treats these bytes as opaque except
where it must look inside (group describe tooling, server-side checks); it never rewrites them.
"""
from kbroker.coordinator.schemas import RecordSchema
from kbroker.protocol.schema import Field as F

SUBSCRIPTION = RecordSchema("ConsumerProtocolSubscription", "0-3", "none", [
    F("topics", "[]string"),
    F("user_data", "bytes", nullable="0+", default=None),
    F("owned_partitions", "[]", "1+", fields=[
        F("topic", "string", "1+"),
        F("partitions", "[]int32", "1+"),
    ]),
    F("generation_id", "int32", "2+", default=-1),
    F("rack_id", "string", "3+", nullable="3+", default=None),
], clamp_newer=True)

ASSIGNMENT = RecordSchema("ConsumerProtocolAssignment", "0-3", "none", [
    F("assigned_partitions", "[]", fields=[
        F("topic", "string"),
        F("partitions", "[]int32"),
    ]),
    F("user_data", "bytes", nullable="0+", default=None),
], clamp_newer=True)

PROTOCOL_TYPE = "consumer"


def encode_subscription(topics, user_data=None, version=0, owned_partitions=(), generation_id=-1, rack_id=None):
    """Bytes for JoinGroup metadata. ``owned_partitions``: iterable of (topic, [partitions])."""
    return SUBSCRIPTION.encode(version, {
        "topics": list(topics), "user_data": user_data,
        "owned_partitions": [{"topic": t, "partitions": list(p)} for t, p in owned_partitions],
        "generation_id": generation_id, "rack_id": rack_id,
    })


def decode_subscription(buf):
    """(version, dict) from JoinGroup metadata bytes; raises ``SchemaError`` on malformed input."""
    return SUBSCRIPTION.decode(buf)


def encode_assignment(assigned, user_data=None, version=0):
    """Bytes for a SyncGroup assignment. ``assigned``: iterable of (topic, [partitions])."""
    return ASSIGNMENT.encode(version, {
        "assigned_partitions": [{"topic": t, "partitions": list(p)} for t, p in assigned],
        "user_data": user_data,
    })


def decode_assignment(buf):
    """(version, dict) from SyncGroup assignment bytes; raises ``SchemaError`` on malformed input (also on b"")."""
    return ASSIGNMENT.decode(buf)
