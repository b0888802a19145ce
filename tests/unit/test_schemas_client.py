"""Schemas of the client-facing APIs (group "client"): registry, round trips, golden bytes.

The comparison with Kafka 3.9's JSON message specs (every registered API, every version) is
tests/unit/test_schemas_reference.py, the one spec cross-check.

1. Every version round-trips a message where every present field has a non-default value (and a variant where every
   nullable field is null): decode(encode(m)) == m with absent fields at their defaults, and encode(decode(b)) == b.
2. Golden bytes: a few requests/responses are encoded by kafka-python's own protocol classes and by our codec.
"""
import importlib
import uuid

import pytest

# module name -> Api.name (the APIs whose round trips and golden bytes this file checks)
MODULES = {
    "produce": "Produce",
    "fetch": "Fetch",
    "list_offsets": "ListOffsets",
    "metadata": "Metadata",
    "api_versions": "ApiVersions",
    "create_topics": "CreateTopics",
    "delete_topics": "DeleteTopics",
    "init_producer_id": "InitProducerId",
    "describe_configs": "DescribeConfigs",
    "alter_configs": "AlterConfigs",
    "create_partitions": "CreatePartitions",
    "sasl_handshake": "SaslHandshake",
    "sasl_authenticate": "SaslAuthenticate",
    "delete_records": "DeleteRecords",
    "describe_log_dirs": "DescribeLogDirs",
}

INT_RANGE = {"int8": 127, "int16": 32767, "int32": 2 ** 31 - 1, "int64": 2 ** 63 - 1, "uint16": 65535,
             "uint32": 2 ** 32 - 1}


def api_of(mod):
    return importlib.import_module("kbroker.protocol.apis." + mod).API


def versions_of(mod):
    lo, hi = api_of(mod).valid
    return [(mod, v) for v in range(lo, hi + 1)]


ALL_VERSIONS = [mv for mod in MODULES for mv in versions_of(mod)]


def in_range(rng, v):
    return rng is not None and rng[0] <= v <= rng[1]


# ------------------------------------------------------------------------------------------------ registry

def test_modules_registered():
    from kbroker.protocol.apis import APIS
    for mod in MODULES:
        api = api_of(mod)
        assert APIS[api.key] is api and api.name == MODULES[mod]


# ---------------------------------------------------------------------------------------------- 1. round trips

def present(f, v, flexible):
    return in_range(f.versions, v) and (f.tag is None or flexible)


def defaults_of(fields, v, flexible):
    """The dict the decoder yields for fields the wire did not carry."""
    return {f.name: absent_value(f, v, flexible) for f in fields}


def absent_value(f, v, flexible):
    if f.type == "{}":
        return defaults_of(f.fields, v, flexible)
    if f.type.startswith("["):
        return None if f.default is None else list(f.default)
    return f.default


def scalar(kind, i, name, default):
    if kind in INT_RANGE:
        val = (11 + 7 * i) % INT_RANGE[kind]
        return val if val != default else val + 1
    return {
        "bool": not default,
        "string": "%s-\u00e9%d" % (name, i),
        "bytes": bytes([i, 0xFF, 0]) + name.encode(),
        "records": b"REC:" + name.encode(),
        "uuid": bytes(range(i, i + 16)),
        "float64": 2.5 + i,
    }[kind]


def generate(fields, v, flexible, nulls=False, salt=0):
    """Every present field non-default (or None when nulls and nullable); absent fields at their defaults."""
    out = {}
    for i, f in enumerate(fields):
        i += salt
        if not present(f, v, flexible):
            out[f.name] = absent_value(f, v, flexible)
        elif nulls and in_range(f.nullable, v):
            out[f.name] = None
        elif f.type == "{}":
            out[f.name] = generate(f.fields, v, flexible, nulls, salt + 1)
        elif f.type == "[]":
            out[f.name] = [generate(f.fields, v, flexible, nulls, salt + k) for k in (1, 2)]
        elif f.type.startswith("[]"):
            elem = f.type[2:]
            out[f.name] = [scalar(elem, i + k, f.name, None) for k in (0, 1)]
        else:
            out[f.name] = scalar(f.type, i, f.name, f.default)
    return out


@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
@pytest.mark.parametrize("mod,v", ALL_VERSIONS)
def test_round_trip(mod, v, nulls):
    api = api_of(mod)
    flexible = api.is_flexible(v)
    for fields, enc, dec in ((api.request_fields, api.encode_request, api.decode_request),
                             (api.response_fields, api.encode_response, api.decode_response)):
        msg = generate(fields, v, flexible, nulls)
        wire = enc(v, msg).getvalue()
        back = dec(v, wire)
        assert back == msg
        assert enc(v, back).getvalue() == wire


@pytest.mark.parametrize("v", range(0, 13))
def test_metadata_topics_encoded_beforehand_write_the_same_bytes(v):
    """Api.encode_element: a topic entry encoded on its own (schema.Encoded) and put in a later response of the
    same version gives the bytes of the whole response encoded from dicts, flexible versions (tagged fields
    inside the entry) too; another field or a version without that array is a SchemaError."""
    from kbroker.protocol.schema import Encoded, SchemaError
    api = api_of("metadata")
    msg = generate(api.response_fields, v, api.is_flexible(v), False)
    wire = api.encode_response(v, msg).getvalue()
    first, second = msg["topics"]
    element = api.encode_element("resp", v, "topics", second)
    assert type(element) is Encoded and bytes(element) in wire
    mixed = dict(msg, topics=[first, element])
    assert api.encode_response(v, mixed).getvalue() == wire
    assert api.decode_response(v, wire) == api.decode_response(v, api.encode_response(v, mixed).getvalue())
    with pytest.raises(SchemaError):
        api.encode_element("resp", v, "brokers_x", first)


# ------------------------------------------------------------------------------------- 2. exact / golden bytes

def test_api_versions_v3_response_writes_no_feature_tags():
    api = api_of("api_versions")
    wire = api.encode_response(3, {"error_code": 0, "api_keys": [{"api_key": 0, "min_version": 0,
                                                                   "max_version": 9}]}).getvalue()
    # error_code | compact array (1 elem -> uvarint 2) | key,min,max | elem tags (0) | throttle | tags count 0
    assert wire == b"\x00\x00" + b"\x02" + b"\x00\x00\x00\x00\x00\x09" + b"\x00" + b"\x00\x00\x00\x00" + b"\x00"
    assert api.response_header_version(3) == 0


def test_api_versions_v0_response_bytes():
    api = api_of("api_versions")
    wire = api.encode_response(0, {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0,
                                                                    "max_version": 4}]}).getvalue()
    assert wire == b"\x00\x23" + b"\x00\x00\x00\x01" + b"\x00\x12\x00\x00\x00\x04"


def test_metadata_v1_null_topics_means_all():
    api = api_of("metadata")
    assert api.encode_request(1, {"topics": None}).getvalue() == b"\xff\xff\xff\xff"
    assert api.decode_request(1, b"\xff\xff\xff\xff")["topics"] is None
    # v0 has no null: an empty array is "all topics"
    assert api.encode_request(0, {"topics": []}).getvalue() == b"\x00\x00\x00\x00"


def test_fetch_request_v15_replica_state_tag():
    api = api_of("fetch")
    d = api.decode_request(15, api.encode_request(15, {"max_wait_ms": 500, "min_bytes": 1}).getvalue())
    assert d["replica_state"] == {"replica_id": -1, "replica_epoch": -1}
    assert d["replica_id"] == -1 and d["max_bytes"] == 0x7FFFFFFF and d["session_epoch"] == -1
    wire = api.encode_request(15, {"replica_state": {"replica_id": 3, "replica_epoch": -1}, "max_wait_ms": 0,
                                   "min_bytes": 0, "max_bytes": 0, "isolation_level": 0, "session_id": 0,
                                   "session_epoch": 0}).getvalue()
    # max_wait, min_bytes, max_bytes (3 x int32) | isolation int8 | session id, epoch (2 x int32) = 21 zero bytes,
    # then empty compact topics, forgotten_topics_data and rack_id (uvarint 1 each)
    body = b"\x00" * 21 + b"\x01\x01\x01"
    # tag section: 1 field, tag 1, size 13 (int32 + int64 + empty nested tag section)
    assert wire == body + b"\x01\x01\x0d" + b"\x00\x00\x00\x03" + b"\xff" * 8 + b"\x00"


def test_sasl_handshake_v1_never_flexible():
    api = api_of("sasl_handshake")
    assert not api.is_flexible(1) and api.request_header_version(1) == 1
    wire = api.encode_response(1, {"error_code": 0, "mechanisms": ["PLAIN", "SCRAM-SHA-256"]}).getvalue()
    assert wire == b"\x00\x00" + b"\x00\x00\x00\x02" + b"\x00\x05PLAIN" + b"\x00\x0dSCRAM-SHA-256"


def test_create_topics_defaults_fill_absent_fields():
    api = api_of("create_topics")
    # v0: topics [] | timeout_ms int32 -- validate_only (v1+) is absent and decodes to its default
    d = api.decode_request(0, b"\x00\x00\x00\x00" + b"\x00\x00\x75\x30")
    assert d == {"topics": [], "timeout_ms": 30000, "validate_only": False}
    assert api.encode_request(1, {}).getvalue() == b"\x00\x00\x00\x00" + b"\x00\x00\xea\x60" + b"\x00"


def _kafka_python(cls, version, msg):
    """Build kafka-python's message object from one of our dicts (same snake_case names)."""
    def convert(container_cls, d):
        kwargs = {}
        for name, fld in container_cls.fields.items():
            if name not in d or not fld.for_version_q(version):
                continue
            val = d[name]
            if fld.is_struct() and val is not None:
                val = convert(fld.data_class, val)
            elif fld.is_struct_array() and val is not None:
                val = [convert(fld.data_class, e) for e in val]
            elif fld.type_str == "uuid":
                val = uuid.UUID(bytes=val)
            kwargs[name] = val
        return container_cls(**kwargs)
    obj = convert(cls, msg)
    return bytes(obj.encode(version=version))


GOLDEN = [
    ("metadata", "MetadataRequest", "kafka.protocol.metadata", 1, "request"),
    ("metadata", "MetadataRequest", "kafka.protocol.metadata", 9, "request"),
    ("metadata", "MetadataRequest", "kafka.protocol.metadata", 12, "request"),
    ("metadata", "MetadataResponse", "kafka.protocol.metadata", 7, "response"),
    ("produce", "ProduceRequest", "kafka.protocol.producer", 3, "request"),
    ("produce", "ProduceRequest", "kafka.protocol.producer", 9, "request"),
    ("produce", "ProduceResponse", "kafka.protocol.producer", 10, "response"),
    ("fetch", "FetchRequest", "kafka.protocol.consumer", 4, "request"),
    ("fetch", "FetchRequest", "kafka.protocol.consumer", 12, "request"),
    ("fetch", "FetchRequest", "kafka.protocol.consumer", 17, "request"),
    ("fetch", "FetchResponse", "kafka.protocol.consumer", 11, "response"),
    ("fetch", "FetchResponse", "kafka.protocol.consumer", 16, "response"),
    ("list_offsets", "ListOffsetsRequest", "kafka.protocol.consumer", 0, "request"),
    ("list_offsets", "ListOffsetsRequest", "kafka.protocol.consumer", 7, "request"),
    ("list_offsets", "ListOffsetsResponse", "kafka.protocol.consumer", 4, "response"),
    ("api_versions", "ApiVersionsRequest", "kafka.protocol.metadata", 3, "request"),
    ("api_versions", "ApiVersionsResponse", "kafka.protocol.metadata", 2, "response"),
    ("create_topics", "CreateTopicsRequest", "kafka.protocol.admin", 4, "request"),
    ("create_topics", "CreateTopicsRequest", "kafka.protocol.admin", 5, "request"),
    ("create_topics", "CreateTopicsResponse", "kafka.protocol.admin", 7, "response"),
    ("delete_topics", "DeleteTopicsRequest", "kafka.protocol.admin", 3, "request"),
    ("delete_topics", "DeleteTopicsRequest", "kafka.protocol.admin", 6, "request"),
    ("init_producer_id", "InitProducerIdRequest", "kafka.protocol.producer", 1, "request"),
    ("init_producer_id", "InitProducerIdRequest", "kafka.protocol.producer", 4, "request"),
    ("describe_configs", "DescribeConfigsRequest", "kafka.protocol.admin", 1, "request"),
    ("describe_configs", "DescribeConfigsResponse", "kafka.protocol.admin", 0, "response"),
    ("describe_configs", "DescribeConfigsResponse", "kafka.protocol.admin", 4, "response"),
    ("alter_configs", "AlterConfigsRequest", "kafka.protocol.admin", 2, "request"),
    ("create_partitions", "CreatePartitionsRequest", "kafka.protocol.admin", 1, "request"),
    ("create_partitions", "CreatePartitionsRequest", "kafka.protocol.admin", 3, "request"),
    ("sasl_handshake", "SaslHandshakeRequest", "kafka.protocol.sasl", 1, "request"),
    ("sasl_handshake", "SaslHandshakeResponse", "kafka.protocol.sasl", 1, "response"),
    ("sasl_authenticate", "SaslAuthenticateRequest", "kafka.protocol.sasl", 2, "request"),
    ("sasl_authenticate", "SaslAuthenticateResponse", "kafka.protocol.sasl", 1, "response"),
    ("delete_records", "DeleteRecordsRequest", "kafka.protocol.admin", 2, "request"),
    ("describe_log_dirs", "DescribeLogDirsRequest", "kafka.protocol.admin", 0, "request"),
    ("describe_log_dirs", "DescribeLogDirsResponse", "kafka.protocol.admin", 4, "response"),
]


@pytest.mark.parametrize("mod,cls_name,kp_mod,v,side", GOLDEN,
                         ids=["%s-v%d-%s" % (g[0], g[3], g[4]) for g in GOLDEN])
def test_golden_bytes_vs_kafka_python(mod, cls_name, kp_mod, v, side):
    kp = pytest.importorskip(kp_mod)
    cls = getattr(kp, cls_name)
    api = api_of(mod)
    fields = api.request_fields if side == "request" else api.response_fields
    msg = generate(fields, v, api.is_flexible(v))
    ours = (api.encode_request if side == "request" else api.encode_response)(v, msg).getvalue()
    assert ours == _kafka_python(cls, v, msg)
