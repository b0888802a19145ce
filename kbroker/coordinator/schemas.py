"""Record schemas of the ``__consumer_offsets`` topic: keys and values of offset commits and group metadata.

Every key and every value is ``int16 version`` followed by a struct of that version. The version prefix is not part
of the struct; it is how a reader tells the record kinds apart:

    key version 0 or 1  -> OffsetCommitKey     group string | topic string | partition int32   (v0 == v1 on the wire)
    key version 2       -> GroupMetadataKey    group string
    value               -> OffsetCommitValue (v0-4) or GroupMetadataValue (v0-4), chosen by the key's kind;
                           a null value (tombstone) deletes the offset / the group.

Versions 0-3 use the classic encoding (int16-length strings, int32-length bytes and arrays); version 4 of both values
is flexible (compact lengths + tagged-field sections, KIP-915), so only new fields may be added as tagged fields.
Kafka 0.10.1 writes key v1 / offset value v1 (with expire_timestamp) and key v2 / group value v1; Kafka 2.3+ writes
offset value v3 (v1 when an explicit retention was asked for) and group value v3. An unknown version is an error
(``SchemaError``): the coordinator must not silently misread its own state.

``RecordSchema`` wraps a field list written in the protocol DSL (``kbroker.protocol.schema.Field``) and compiles it
with the protocol codec, so these bytes are produced by exactly the same code as the wire protocol.
"""
import struct

from kbroker.protocol.schema import Field as F, SchemaError, Writer, _compile_fields, _in, parse_versions

_VERSION = struct.Struct(">h")


class RecordSchema:
    """A versioned data struct prefixed by its int16 version (``__consumer_offsets`` records, consumer protocol).

    ``clamp_newer=True`` reads a version above ``valid`` with the highest known layout and ignores what follows
    (the consumer protocol's rule: later versions only append fields); otherwise such a version raises.
    """

    def __init__(self, name, valid, flexible, fields, clamp_newer=False):
        self.name = name
        self.valid = parse_versions(valid)
        self.flexible = parse_versions(flexible)
        self.fields = fields
        self.clamp_newer = clamp_newer
        self._cache = {}

    def is_flexible(self, version):
        return _in(self.flexible, version)

    def _compiled(self, version):
        c = self._cache.get(version)
        if c is None:
            if not _in(self.valid, version):
                raise SchemaError("%s v%d is not described" % (self.name, version))
            c = self._cache[version] = _compile_fields(self.fields, version, self.is_flexible(version))
        return c

    def layout_version(self, version):
        """The version whose layout is used to read ``version`` (differs only for clamped newer versions)."""
        if version > self.valid[1] and self.clamp_newer:
            return self.valid[1]
        return version

    def encode_body(self, version, msg):
        w = Writer()
        self._compiled(version).encode(w, msg)
        return w.getvalue()

    def encode(self, version, msg):
        """``int16 version`` + struct; a missing key takes the field default."""
        return _VERSION.pack(version) + self.encode_body(version, msg)

    def decode_body(self, version, buf, pos=0):
        """Returns (dict, end position)."""
        return self._compiled(self.layout_version(version)).decode(buf, pos)

    def decode(self, buf, pos=0):
        """Reads the version prefix and the struct; returns (version, dict). Trailing bytes are ignored."""
        if len(buf) - pos < 2:
            raise SchemaError("%s: no version prefix" % self.name)
        version = _VERSION.unpack_from(buf, pos)[0]
        if version < 0:
            raise SchemaError("%s: negative version %d" % (self.name, version))
        d, _ = self.decode_body(version, buf, pos + 2)
        return version, d

    def __repr__(self):
        return "RecordSchema(%s)" % self.name


OFFSET_COMMIT_KEY = RecordSchema("OffsetCommitKey", "0-1", "none", [
    F("group", "string", "0-1"),
    F("topic", "string", "0-1"),
    F("partition", "int32", "0-1"),
])

GROUP_METADATA_KEY = RecordSchema("GroupMetadataKey", "2", "none", [
    F("group", "string", "2"),
])

OFFSET_COMMIT_VALUE = RecordSchema("OffsetCommitValue", "0-4", "4+", [
    F("offset", "int64"),
    F("leader_epoch", "int32", "3+", default=-1),          # v3 adds the leader epoch (fencing)
    F("metadata", "string"),
    F("commit_timestamp", "int64"),
    F("expire_timestamp", "int64", "1", default=-1),       # only v1: v2+ expire by broker retention
])

# Kafka's common struct MemberMetadata.
MEMBER_METADATA = [
    F("member_id", "string"),
    F("group_instance_id", "string", "3+", nullable="3+", default=None),   # v3: static membership
    F("client_id", "string"),
    F("client_host", "string"),
    F("rebalance_timeout", "int32", "1+", default=-1),     # v1 (0.10.1): sits before session_timeout
    F("session_timeout", "int32"),
    F("subscription", "bytes"),
    F("assignment", "bytes"),
]

GROUP_METADATA_VALUE = RecordSchema("GroupMetadataValue", "0-4", "4+", [
    F("protocol_type", "string"),
    F("generation", "int32"),
    F("protocol", "string", nullable="0+"),
    F("leader", "string", nullable="0+"),
    F("current_state_timestamp", "int64", "2+", default=-1),   # v2: when the group last changed state
    F("members", "[]", fields=MEMBER_METADATA),
])

OFFSET_KEY = "offset"
GROUP_KEY = "group"


def decode_key(buf):
    """(kind, version, dict) with kind ``OFFSET_KEY`` (key v0/v1) or ``GROUP_KEY`` (key v2)."""
    if buf is None or len(buf) < 2:
        raise SchemaError("__consumer_offsets key shorter than its version")
    version = _VERSION.unpack_from(buf, 0)[0]
    if version in (0, 1):
        return OFFSET_KEY, version, OFFSET_COMMIT_KEY.decode(buf)[1]
    if version == 2:
        return GROUP_KEY, version, GROUP_METADATA_KEY.decode(buf)[1]
    raise SchemaError("unknown __consumer_offsets key version %d" % version)


def decode_value(kind, buf):
    """(version, dict) for the value of a key of ``kind``, or None for a tombstone (null value)."""
    if buf is None:
        return None
    schema = OFFSET_COMMIT_VALUE if kind == OFFSET_KEY else GROUP_METADATA_VALUE
    return schema.decode(buf)


def offset_commit_key(group, topic, partition, version=1):
    return OFFSET_COMMIT_KEY.encode(version, {"group": group, "topic": topic, "partition": partition})


def group_metadata_key(group):
    return GROUP_METADATA_KEY.encode(2, {"group": group})
