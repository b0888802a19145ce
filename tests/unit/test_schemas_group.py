"""Group-coordination and inter-broker API schemas, __consumer_offsets records and consumer-protocol payloads.

The comparison with Kafka 3.9's JSON message specs (these APIs, the record schemas, every version) is
tests/unit/test_schemas_reference.py, the one spec cross-check.

1. registry: each API under its Kafka key and name;
2. round trips: every version encodes a message with a non-default value in every field (and, separately, null in
   every nullable field), decodes it back to the same dict, and re-encodes to the same bytes;
3. golden bytes: the same messages encoded by kafka-python's own protocol classes;
4. exact bytes of __consumer_offsets records (the 0.10.1 layouts Burrow and old tools read) and consumer payloads.
"""
import struct

import pytest

from kbroker.coordinator import consumer_protocol as cp
from kbroker.coordinator import schemas as rs
from kbroker.protocol.schema import SchemaError, _in
from kbroker.protocol.apis import (
    controlled_shutdown, delete_groups, describe_groups, find_coordinator, heartbeat, join_group, leader_and_isr,
    leave_group, list_groups, offset_commit, offset_fetch, offset_for_leader_epoch, stop_replica, sync_group,
    update_metadata,
)

MODULES = [offset_commit, offset_fetch, find_coordinator, join_group, heartbeat, leave_group, sync_group,
           describe_groups, list_groups, delete_groups, leader_and_isr, stop_replica, update_metadata,
           controlled_shutdown, offset_for_leader_epoch]
APIS = [m.API for m in MODULES]
EXPECTED_KEYS = {8: "OffsetCommit", 9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat",
                 13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups", 16: "ListGroups", 42: "DeleteGroups",
                 4: "LeaderAndIsr", 5: "StopReplica", 6: "UpdateMetadata", 7: "ControlledShutdown",
                 23: "OffsetForLeaderEpoch"}
RECORDS = [rs.OFFSET_COMMIT_KEY, rs.OFFSET_COMMIT_VALUE, rs.GROUP_METADATA_KEY, rs.GROUP_METADATA_VALUE,
           cp.SUBSCRIPTION, cp.ASSIGNMENT]


def versions_of(rng):
    return range(rng[0], rng[1] + 1)


def api_cases():
    return [(api, v) for api in APIS for v in versions_of(api.valid)]


def record_cases():
    return [(s, v) for s in RECORDS for v in versions_of(s.valid)]


# ---------------------------------------------------------------------------------------------------- 1. registry

def test_registry_collects_every_group_api():
    from kbroker.protocol.apis import APIS as REGISTRY
    for api in APIS:
        assert REGISTRY[api.key] is api and EXPECTED_KEYS[api.key] == api.name
    assert sorted(EXPECTED_KEYS) == sorted(api.key for api in APIS)


# ------------------------------------------------------------------------------------------------ 2. round trips

class Gen:
    """Builds a message with a distinct non-default value in every field present at a version."""

    def __init__(self, version, flexible, nulls=False):
        self.version, self.flexible, self.nulls, self.n = version, flexible, nulls, 0

    def _next(self):
        self.n += 1
        return self.n

    def present(self, f):
        return _in(f.versions, self.version) and (f.tag is None or self.flexible)

    def struct(self, fields):
        return {f.name: self.value(f) for f in fields if self.present(f)}

    def value(self, f):
        t, n = f.type, self._next()
        if self.nulls and _in(f.nullable, self.version):
            return None
        if t == "[]":
            return [self.struct(f.fields) for _ in range(2)]
        if t == "{}":
            return self.struct(f.fields)
        if t == "[]int32":
            return [n, -n, 7]
        if t == "[]string":
            return ["s%d" % n, "\u00e9t\u00e9-%d" % n]
        if t == "bool":
            return not f.default
        if t == "string":
            return "v%d-%s" % (n, f.name)
        if t in ("bytes", "records"):
            return bytes([n % 256, 0, 255]) * 2
        if t == "uuid":
            return bytes(range(n % 200, n % 200 + 16))
        bits = {"int8": 7, "int16": 15, "int32": 31, "int64": 63, "uint16": 16, "uint32": 32}.get(t)
        if bits is not None:
            # a value whose bytes are all distinct-ish and never equal to the default
            v = (n * 3) % 100 + 1            # fits int8
            v = v if v != f.default else v + 1
            return -v if t.startswith("int") and n % 2 else v
        raise AssertionError("no generator for %s" % t)


def expected(fields, version, flexible, msg):
    """The decoded dict: present fields as sent, every other field at its default."""
    out = {}
    for f in fields:
        if _in(f.versions, version) and (f.tag is None or flexible) and f.name in msg:
            v = msg[f.name]
            if f.type == "[]" and v is not None:
                v = [expected(f.fields, version, flexible, e) for e in v]
            elif f.type == "{}" and v is not None:
                v = expected(f.fields, version, flexible, v)
            out[f.name] = v
        elif f.type == "{}":
            out[f.name] = expected(f.fields, version, flexible, {})
        else:
            out[f.name] = f.default
    return out


def plain(d):
    """memoryview -> bytes, recursively (records decode zero-copy)."""
    if isinstance(d, dict):
        return {k: plain(v) for k, v in d.items()}
    if isinstance(d, list):
        return [plain(v) for v in d]
    if isinstance(d, memoryview):
        return bytes(d)
    return d


def roundtrip(fields, version, flexible, encode, decode, nulls):
    msg = Gen(version, flexible, nulls).struct(fields)
    data = encode(msg)
    got = plain(decode(data))
    assert got == expected(fields, version, flexible, msg)
    assert encode(got) == data
    return data


@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
@pytest.mark.parametrize("api,version", api_cases(), ids=lambda x: getattr(x, "name", x))
def test_api_roundtrip(api, version, nulls):
    flex = api.is_flexible(version)
    roundtrip(api.request_fields, version, flex, lambda m: api.encode_request(version, m).getvalue(),
              lambda b: api.decode_request(version, b), nulls)
    roundtrip(api.response_fields, version, flex, lambda m: api.encode_response(version, m).getvalue(),
              lambda b: api.decode_response(version, b), nulls)


@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
@pytest.mark.parametrize("schema,version", record_cases(), ids=lambda x: getattr(x, "name", x))
def test_record_roundtrip(schema, version, nulls):
    def dec(b):
        v, d = schema.decode(b)
        assert v == version
        return d
    data = roundtrip(schema.fields, version, schema.is_flexible(version), lambda m: schema.encode(version, m), dec,
                     nulls)
    assert data[:2] == struct.pack(">h", version)


def test_tagged_type_only_written_when_not_default():
    api = update_metadata.API
    base = api.encode_request(8, {}).getvalue()
    tagged = api.encode_request(8, {"type": 2}).getvalue()
    # request v8 with every field default: controller_id, is_kraft_controller, controller_epoch, broker_epoch,
    # topic_states (empty), live_brokers (empty), then an empty tagged section
    assert base == b"\x00\x00\x00\x00" + b"\x00" + b"\x00\x00\x00\x00" + b"\xff" * 8 + b"\x01\x01\x00"
    # tag 0, size 1, int8 2
    assert tagged == base[:-1] + b"\x01\x00\x01\x02"
    assert api.decode_request(8, tagged)["type"] == 2
    assert api.decode_request(7, api.encode_request(7, {"type": 2}).getvalue())["type"] == 0


# ------------------------------------------------------------------------------------- 3. kafka-python golden bytes

def test_golden_join_group_v1_old_classes():
    from kafka.protocol.old.group import JoinGroupRequest_v1
    theirs = JoinGroupRequest_v1("grp", 10000, 30000, "", "consumer", [("range", b"\x00\x00meta")]).encode()
    ours = join_group.API.encode_request(1, {
        "group_id": "grp", "session_timeout_ms": 10000, "rebalance_timeout_ms": 30000, "member_id": "",
        "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b"\x00\x00meta"}],
    }).getvalue()
    assert ours == bytes(theirs)


def test_golden_offset_commit_v2_old_classes():
    from kafka.protocol.old.commit import OffsetCommitRequest_v2
    theirs = OffsetCommitRequest_v2("grp", 4, "member-1", -1, [("t", [(0, 42, ""), (3, 1 << 40, None)])]).encode()
    ours = offset_commit.API.encode_request(2, {
        "group_id": "grp", "generation_id_or_member_epoch": 4, "member_id": "member-1", "retention_time_ms": -1,
        "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "committed_offset": 42, "committed_metadata": ""},
            {"partition_index": 3, "committed_offset": 1 << 40, "committed_metadata": None}]}],
    }).getvalue()
    assert ours == bytes(theirs)


def test_golden_find_coordinator_v1_and_offset_fetch_response_v3():
    from kafka.protocol.old.find_coordinator import FindCoordinatorRequest_v1
    from kafka.protocol.old.commit import OffsetFetchResponse_v3
    assert find_coordinator.API.encode_request(1, {"key": "txn-1", "key_type": 1}).getvalue() == \
        bytes(FindCoordinatorRequest_v1("txn-1", 1).encode())
    theirs = bytes(OffsetFetchResponse_v3(5, [("t", [(0, 17, "md", 0), (1, -1, "", 3)])], 0).encode())
    got = offset_fetch.API.decode_response(3, theirs)
    assert got["throttle_time_ms"] == 5 and got["error_code"] == 0
    assert got["topics"][0]["partitions"][1] == {"partition_index": 1, "committed_offset": -1,
                                                 "committed_leader_epoch": -1, "metadata": "", "error_code": 3}
    assert offset_fetch.API.encode_response(3, got).getvalue() == theirs


def test_golden_flexible_versions_new_classes():
    from kafka.protocol.consumer.group import HeartbeatRequest, JoinGroupRequest, OffsetFetchRequest
    P = JoinGroupRequest.JoinGroupRequestProtocol
    theirs = JoinGroupRequest[6](group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=30000,
                                 member_id="m", group_instance_id=None, protocol_type="consumer",
                                 protocols=[P(name="range", metadata=b"xy")]).encode()
    ours = join_group.API.encode_request(6, {
        "group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 30000, "member_id": "m",
        "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b"xy"}]}).getvalue()
    assert ours == bytes(theirs)

    G = OffsetFetchRequest.OffsetFetchRequestGroup
    theirs = OffsetFetchRequest[8](groups=[G(group_id="g", topics=[
        G.OffsetFetchRequestTopics(name="t", partition_indexes=[0, 1])]), G(group_id="h", topics=None)],
        require_stable=True).encode()
    ours = offset_fetch.API.encode_request(8, {"groups": [
        {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0, 1]}]},
        {"group_id": "h", "topics": None}], "require_stable": True}).getvalue()
    assert ours == bytes(theirs)

    theirs = HeartbeatRequest[4](group_id="g", generation_id=5, member_id="m", group_instance_id="i").encode()
    assert bytes(theirs) == b"\x02g\x00\x00\x00\x05\x02m\x02i\x00"
    assert heartbeat.API.encode_request(4, {"group_id": "g", "generation_id": 5, "member_id": "m",
                                            "group_instance_id": "i"}).getvalue() == bytes(theirs)


def test_golden_consumer_protocol_old_classes():
    from kafka.protocol.old.consumer_protocol import (ConsumerProtocolMemberAssignment_v0,
                                                      ConsumerProtocolMemberMetadata_v0)
    theirs = bytes(ConsumerProtocolMemberMetadata_v0(0, ["a", "b"], b"").encode())
    assert cp.encode_subscription(["a", "b"], b"") == theirs
    assert cp.decode_subscription(theirs) == (0, {"topics": ["a", "b"], "user_data": b"", "owned_partitions": [],
                                                  "generation_id": -1, "rack_id": None})
    theirs = bytes(ConsumerProtocolMemberAssignment_v0(0, [("a", [0, 2]), ("b", [1])], b"").encode())
    assert cp.encode_assignment([("a", [0, 2]), ("b", [1])], b"") == theirs
    assert cp.decode_assignment(theirs)[1]["assigned_partitions"] == [{"topic": "a", "partitions": [0, 2]},
                                                                      {"topic": "b", "partitions": [1]}]


# --------------------------------------------------------------------- 4. __consumer_offsets and consumer payloads

def s16(s):
    return struct.pack(">h", len(s)) + s


def test_offset_commit_key_and_value_v1_bytes():
    key = rs.offset_commit_key("grp", "top", 3)
    assert key == b"\x00\x01" + s16(b"grp") + s16(b"top") + b"\x00\x00\x00\x03"
    assert rs.decode_key(key) == (rs.OFFSET_KEY, 1, {"group": "grp", "topic": "top", "partition": 3})
    # 0.10.1 value v1: offset, metadata, commit_timestamp, expire_timestamp
    value = rs.OFFSET_COMMIT_VALUE.encode(1, {"offset": 42, "metadata": "m", "commit_timestamp": 1000,
                                              "expire_timestamp": 2000})
    assert value == b"\x00\x01" + struct.pack(">q", 42) + s16(b"m") + struct.pack(">qq", 1000, 2000)
    assert rs.decode_value(rs.OFFSET_KEY, value) == (1, {"offset": 42, "leader_epoch": -1, "metadata": "m",
                                                         "commit_timestamp": 1000, "expire_timestamp": 2000})
    # v3 (Kafka 2.1+): leader_epoch sits right after offset; no expire timestamp
    v3 = rs.OFFSET_COMMIT_VALUE.encode(3, {"offset": 42, "leader_epoch": 7, "metadata": "", "commit_timestamp": 9})
    assert v3 == b"\x00\x03" + struct.pack(">qi", 42, 7) + b"\x00\x00" + struct.pack(">q", 9)
    # v4 is flexible: compact string (len+1) and an empty tagged section
    v4 = rs.OFFSET_COMMIT_VALUE.encode(4, {"offset": 42, "leader_epoch": 7, "metadata": "", "commit_timestamp": 9})
    assert v4 == b"\x00\x04" + struct.pack(">qi", 42, 7) + b"\x01" + struct.pack(">q", 9) + b"\x00"
    assert rs.decode_value(rs.OFFSET_KEY, None) is None


def test_group_metadata_key_and_value_v1_bytes():
    key = rs.group_metadata_key("grp")
    assert key == b"\x00\x02" + s16(b"grp")
    assert rs.decode_key(key) == (rs.GROUP_KEY, 2, {"group": "grp"})
    member = {"member_id": "m-1", "client_id": "c", "client_host": "/1.2.3.4", "rebalance_timeout": 300000,
              "session_timeout": 10000, "subscription": b"\x00\x00", "assignment": b""}
    value = rs.GROUP_METADATA_VALUE.encode(1, {"protocol_type": "consumer", "generation": 5, "protocol": "range",
                                               "leader": "m-1", "members": [member]})
    assert value == (b"\x00\x01" + s16(b"consumer") + b"\x00\x00\x00\x05" + s16(b"range") + s16(b"m-1") +
                     b"\x00\x00\x00\x01" + s16(b"m-1") + s16(b"c") + s16(b"/1.2.3.4") +
                     struct.pack(">ii", 300000, 10000) + b"\x00\x00\x00\x02\x00\x00" + b"\x00\x00\x00\x00")
    version, d = rs.decode_value(rs.GROUP_KEY, value)
    assert version == 1 and d["members"][0]["rebalance_timeout"] == 300000
    assert d["members"][0]["group_instance_id"] is None and d["current_state_timestamp"] == -1
    # an empty group (generation ended with no members): null protocol and leader
    empty = rs.GROUP_METADATA_VALUE.encode(0, {"protocol_type": "consumer", "generation": 6, "protocol": None,
                                               "leader": None, "members": []})
    assert empty == b"\x00\x00" + s16(b"consumer") + b"\x00\x00\x00\x06" + b"\xff\xff\xff\xff" + b"\x00\x00\x00\x00"


def test_consumer_offsets_unknown_versions_raise():
    with pytest.raises(SchemaError):
        rs.decode_key(b"\x00\x03" + s16(b"g"))
    with pytest.raises(SchemaError):
        rs.decode_key(b"\x00")
    with pytest.raises(SchemaError):
        rs.decode_value(rs.OFFSET_KEY, b"\x00\x05" + b"\x00" * 30)
    with pytest.raises(SchemaError):
        rs.decode_value(rs.GROUP_KEY, b"\x00\x01\x00\x08consu")   # truncated
    with pytest.raises(SchemaError):
        rs.GROUP_METADATA_KEY.encode(1, {"group": "g"})


def test_subscription_versions_bytes():
    v3 = cp.encode_subscription(["t"], None, version=3, owned_partitions=[("t", [1])], generation_id=4,
                                rack_id="r1")
    assert v3 == (b"\x00\x03" + b"\x00\x00\x00\x01" + s16(b"t") + b"\xff\xff\xff\xff" +
                  b"\x00\x00\x00\x01" + s16(b"t") + b"\x00\x00\x00\x01\x00\x00\x00\x01" +
                  b"\x00\x00\x00\x04" + s16(b"r1"))
    assert cp.decode_subscription(v3) == (3, {"topics": ["t"], "user_data": None,
                                              "owned_partitions": [{"topic": "t", "partitions": [1]}],
                                              "generation_id": 4, "rack_id": "r1"})


def test_consumer_protocol_newer_version_reads_known_prefix():
    v3 = cp.encode_subscription(["t"], b"ud", version=3, generation_id=2)
    newer = b"\x00\x07" + v3[2:] + b"\x00\x00\x00\x2a future field"
    version, d = cp.decode_subscription(newer)
    assert version == 7 and d["topics"] == ["t"] and d["user_data"] == b"ud" and d["generation_id"] == 2
    a = cp.encode_assignment([("t", [0])], None)
    assert cp.decode_assignment(b"\x00\x09" + a[2:] + b"junk") == (9, {"assigned_partitions": [
        {"topic": "t", "partitions": [0]}], "user_data": None})


def test_consumer_protocol_malformed_raise():
    for bad in (b"", b"\x00", b"\xff\xff" + b"\x00" * 8, b"\x00\x00\x00\x00\x00\x05\x00\x01"):
        with pytest.raises(SchemaError):
            cp.decode_subscription(bad)
        with pytest.raises(SchemaError):
            cp.decode_assignment(bad)


def test_records_decode_from_memoryview_slices():
    # keys/values read from a log segment arrive as memoryview slices of a bigger buffer
    blob = b"junk" + rs.offset_commit_key("g", "t", 1) + cp.encode_subscription(["a"], b"u")
    mv = memoryview(blob)
    assert rs.decode_key(mv[4:4 + 12]) == (rs.OFFSET_KEY, 1, {"group": "g", "topic": "t", "partition": 1})
    assert cp.decode_subscription(mv[16:])[1]["user_data"] == b"u"
