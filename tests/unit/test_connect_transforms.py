"""kbroker.connect.transforms: Kafka's SMTs (config keys, errors, schemaless and schema'd records) and predicates."""
import datetime as dt
import decimal

import pytest

from kbroker.connect.data import Schema, SchemaBuilder, Struct, Timestamp
from kbroker.connect.exceptions import ConfigError, DataError
from kbroker.connect.records import SinkRecord, SourceRecord
from kbroker.connect.transforms import (
    BUILTIN_PREDICATES, BUILTIN_TRANSFORMS, Cast, DropHeaders, ExtractField, Filter, Flatten, HasHeaderKey, HeaderFrom,
    HoistField, InsertField, InsertHeader, MaskField, Predicated, RecordIsTombstone, RegexRouter, ReplaceField,
    SetSchemaMetadata, TimestampConverter, TimestampRouter, TopicNameMatches, ValueToKey, java_replacement,
    simple_date_format)

TS = 1483425001864          # 2017-01-03T06:30:01.864Z


def _xf(cls, **conf):
    t = cls()
    t.configure({k.replace("_", "."): v for k, v in conf.items()})
    return t


def _sink(value=None, value_schema=None, key=None, key_schema=None, topic="test", partition=0, offset=42,
          timestamp=TS, headers=()):
    return SinkRecord(topic, partition, key_schema, key, value_schema, value, timestamp, tuple(headers),
                      kafka_offset=offset)


def _source(value=None, value_schema=None, topic="test", partition=0, timestamp=TS):
    return SourceRecord(topic, partition, None, None, value_schema, value, timestamp)


SIMPLE = (SchemaBuilder.struct().name("name").version(1).doc("doc")
          .field("magic", Schema.OPTIONAL_INT64_SCHEMA).build())


# ------------------------------------------------------------------------------------------------- InsertField
def test_insert_field_with_schema_required_and_optional():
    xf = _xf(InsertField.Value, topic_field="topic_field!", partition_field="partition_field",
             offset_field="offset_field!", timestamp_field="timestamp_field?", static_field="instance_id",
             static_value="my-instance-id")
    out = xf.apply(_sink(Struct(SIMPLE).put("magic", 42), SIMPLE))
    s = out.value_schema
    assert (s.name, s.version, s.doc) == ("name", 1, "doc")
    assert [(f.name, f.schema) for f in s.fields] == [
        ("magic", Schema.OPTIONAL_INT64_SCHEMA), ("topic_field", Schema.STRING_SCHEMA),
        ("partition_field", Schema.OPTIONAL_INT32_SCHEMA), ("offset_field", Schema.INT64_SCHEMA),
        ("timestamp_field", Timestamp.builder().optional().build()),
        ("instance_id", Schema.OPTIONAL_STRING_SCHEMA)]
    v = out.value
    assert (v.get("magic"), v.get("topic_field"), v.get("partition_field"), v.get("offset_field"),
            v.get("instance_id")) == (42, "test", 0, 42, "my-instance-id")
    assert v.get("timestamp_field") == dt.datetime(2017, 1, 3, 6, 30, 1, 864000, tzinfo=dt.timezone.utc)
    assert out.key is None and out.topic == "test" and out.kafka_offset == 42
    # the updated schema is cached: a second record gets the identical object
    assert xf.apply(_sink(Struct(SIMPLE).put("magic", 1), SIMPLE)).value_schema is s


def test_insert_field_schemaless_and_nulls():
    xf = _xf(InsertField.Value, topic_field="topic_field!", partition_field="partition_field",
             offset_field="offset_field!", timestamp_field="timestamp_field?", static_field="instance_id",
             static_value="my-instance-id")
    out = xf.apply(_sink({"magic": 42}))
    assert out.value_schema is None
    assert out.value == {"magic": 42, "topic_field": "test", "partition_field": 0, "offset_field": 42,
                         "timestamp_field": TS, "instance_id": "my-instance-id"}
    tomb = _sink(None)
    assert xf.apply(tomb) is tomb                                   # null values pass through
    no_ts = _xf(InsertField.Value, timestamp_field="ts").apply(_sink({"a": 1}, timestamp=None))
    assert no_ts.value == {"a": 1}
    key = _xf(InsertField.Key, topic_field="t").apply(_sink({"v": 1}, key={"k": 1}))
    assert key.key == {"k": 1, "t": "test"} and key.value == {"v": 1}


def test_insert_field_errors():
    with pytest.raises(ConfigError, match="^No field insertion configured$"):
        _xf(InsertField.Value)
    with pytest.raises(ConfigError, match="^Invalid value null for configuration static.value: No value specified "
                                          "for static field: f$"):
        _xf(InsertField.Value, static_field="f")
    with pytest.raises(DataError, match=r"^Only SinkRecord supported for \[field insertion\], found: SourceRecord$"):
        _xf(InsertField.Value, offset_field="o").apply(_source({"a": 1}))
    with pytest.raises(DataError, match=r"^Only Map objects supported in absence of schema for \[field insertion\], "
                                        r"found: str$"):
        _xf(InsertField.Value, topic_field="t").apply(_sink("text"))
    with pytest.raises(DataError, match=r"^Only Struct objects supported for \[field insertion\], found: dict$"):
        _xf(InsertField.Value, topic_field="t").apply(_sink({"a": 1}, SIMPLE))


# ------------------------------------------------------------------------------------------------ ReplaceField
def test_replace_field_schemaless():
    xf = _xf(ReplaceField.Value, exclude="dont", renames="abc:xyz,foo:bar")
    out = xf.apply(_sink({"dont": "whatever", "abc": 42, "foo": True, "etc": "etc"}))
    assert out.value == {"xyz": 42, "bar": True, "etc": "etc"}
    inc = _xf(ReplaceField.Value, include="abc,foo", exclude="foo")
    assert inc.apply(_sink({"abc": 1, "foo": 2, "x": 3})).value == {"abc": 1}


def test_replace_field_with_schema_and_deprecated_aliases():
    schema = (SchemaBuilder.struct().name("s").field("dont", Schema.STRING_SCHEMA).field("abc", Schema.INT32_SCHEMA)
              .field("foo", Schema.BOOLEAN_SCHEMA).field("etc", Schema.STRING_SCHEMA).build())
    value = Struct(schema).put("dont", "whatever").put("abc", 42).put("foo", True).put("etc", "etc")
    for conf in ({"exclude": "dont", "renames": "abc:xyz,foo:bar"},
                 {"blacklist": "dont", "renames": "abc:xyz,foo:bar"}):
        out = _xf(ReplaceField.Value, **{k: v for k, v in conf.items()}).apply(_sink(value, schema))
        assert [f.name for f in out.value_schema.fields] == ["xyz", "bar", "etc"]
        assert out.value_schema.name == "s"
        assert (out.value.get("xyz"), out.value.get("bar"), out.value.get("etc")) == (42, True, "etc")
    wl = _xf(ReplaceField.Value, whitelist="abc").apply(_sink(value, schema))
    assert [f.name for f in wl.value_schema.fields] == ["abc"]


@pytest.mark.parametrize("renames", ["foo", "a:b:c", "a:"])
def test_replace_field_bad_renames(renames):
    with pytest.raises(ConfigError, match="^Invalid value .* for configuration renames: Invalid rename mapping: "):
        _xf(ReplaceField.Value, renames=renames)


# --------------------------------------------------------------------------------------------------- MaskField
def _mask_schema():
    return (SchemaBuilder.struct().field("magic", Schema.INT32_SCHEMA).field("bool", Schema.BOOLEAN_SCHEMA)
            .field("int64", Schema.INT64_SCHEMA).field("float64", Schema.FLOAT64_SCHEMA)
            .field("string", Schema.STRING_SCHEMA).field("array", SchemaBuilder.array(Schema.STRING_SCHEMA).build())
            .field("map", SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.STRING_SCHEMA).build())
            .field("ts", Timestamp.SCHEMA).build())


def _mask_value(schema):
    return (Struct(schema).put("magic", 42).put("bool", True).put("int64", 64).put("float64", 6.4)
            .put("string", "secret").put("array", ["x"]).put("map", {"k": "v"})
            .put("ts", dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc)))


def test_mask_field_with_schema_null_values():
    schema = _mask_schema()
    xf = _xf(MaskField.Value, fields="bool,int64,float64,string,array,map,ts")
    v = xf.apply(_sink(_mask_value(schema), schema)).value
    assert v.get("magic") == 42
    assert (v.get("bool"), v.get("int64"), v.get("float64"), v.get("string"), v.get("array"), v.get("map")) == (
        False, 0, 0.0, "", [], {})
    assert v.get("ts") == dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def test_mask_field_replacement_and_schemaless():
    schema = _mask_schema()
    v = _xf(MaskField.Value, fields="int64,string", replacement="123").apply(
        _sink(_mask_value(schema), schema)).value
    assert (v.get("int64"), v.get("string")) == (123, "123")
    out = _xf(MaskField.Value, fields="magic,price,missing", replacement="-1").apply(
        _sink({"magic": 42, "price": decimal.Decimal("9.99"), "keep": "x"}))
    assert out.value == {"magic": -1, "price": decimal.Decimal("-1"), "keep": "x", "missing": None}
    with pytest.raises(DataError, match="^Cannot mask value of type .*bool.* with custom replacement.$"):
        _xf(MaskField.Value, fields="b", replacement="1").apply(_sink({"b": True}))
    with pytest.raises(DataError, match="^Unable to convert abc .* to number$"):
        _xf(MaskField.Value, fields="n", replacement="abc").apply(_sink({"n": 5}))
    with pytest.raises(ConfigError, match='^Missing required configuration "fields" which has no default value.$'):
        _xf(MaskField.Value)
    with pytest.raises(ConfigError, match="^Invalid value \\[\\] for configuration fields: Empty list$"):
        _xf(MaskField.Value, fields="")
    with pytest.raises(ConfigError, match="^Invalid value  for configuration replacement: String must be non-empty$"):
        _xf(MaskField.Value, fields="a", replacement="")


# -------------------------------------------------------------------------------------------------- ValueToKey
def test_value_to_key_both_shapes():
    xf = _xf(ValueToKey, fields="a,b")
    out = xf.apply(_sink({"a": 1, "b": 2, "c": 3}))
    assert out.key_schema is None and out.key == {"a": 1, "b": 2} and out.value == {"a": 1, "b": 2, "c": 3}
    schema = (SchemaBuilder.struct().field("a", Schema.INT32_SCHEMA).field("b", Schema.INT32_SCHEMA)
              .field("c", Schema.INT32_SCHEMA).build())
    out = xf.apply(_sink(Struct(schema).put("a", 1).put("b", 2).put("c", 3), schema))
    assert [(f.name, f.schema) for f in out.key_schema.fields] == [("a", Schema.INT32_SCHEMA),
                                                                    ("b", Schema.INT32_SCHEMA)]
    assert out.key == Struct(out.key_schema).put("a", 1).put("b", 2)
    with pytest.raises(DataError, match="^Field does not exist: nope$"):
        _xf(ValueToKey, fields="nope").apply(_sink(Struct(schema).put("a", 1).put("b", 2).put("c", 3), schema))


# ------------------------------------------------------------------------------------------------ ExtractField
def test_extract_field():
    assert _xf(ExtractField.Key, field="magic").apply(_sink(key={"magic": 42})).key == 42
    schema = SchemaBuilder.struct().field("magic", Schema.INT32_SCHEMA).build()
    out = _xf(ExtractField.Key, field="magic").apply(_sink(key=Struct(schema).put("magic", 42), key_schema=schema))
    assert (out.key_schema, out.key) == (Schema.INT32_SCHEMA, 42)
    assert _xf(ExtractField.Value, field="x").apply(_sink(None)).value is None           # nulls pass
    null_with_schema = _xf(ExtractField.Value, field="magic").apply(_sink(None, schema))
    assert (null_with_schema.value_schema, null_with_schema.value) == (Schema.INT32_SCHEMA, None)
    with pytest.raises(DataError, match="^Unknown field: nope$"):
        _xf(ExtractField.Value, field="nope").apply(_sink(Struct(schema).put("magic", 1), schema))
    # V1 takes the dotted name literally; V2 walks nested fields
    assert _xf(ExtractField.Value, field="a.b").apply(_sink({"a.b": 1, "a": {"b": 2}})).value == 1
    assert _xf(ExtractField.Value, field="a.b", field_syntax_version="v2").apply(
        _sink({"a.b": 1, "a": {"b": 2}})).value == 2
    assert _xf(ExtractField.Value, field="`a.b`", field_syntax_version="V2").apply(
        _sink({"a.b": 1, "a": {"b": 2}})).value == 1
    assert _xf(ExtractField.Value, field="a.x.y", field_syntax_version="V2").apply(_sink({"a": {}})).value is None
    with pytest.raises(DataError, match=r"^Only Map objects supported in absence of schema for \[nested field "
                                        r"access\], found: int$"):
        _xf(ExtractField.Value, field="a.b.c", field_syntax_version="V2").apply(_sink({"a": {"b": 2}}))
    with pytest.raises(ConfigError, match="^Incomplete backtick pair in path: \\[`a\\], consider adding a backslash "
                                          "before backtick at position 0 to escape it$"):
        _xf(ExtractField.Value, field="`a", field_syntax_version="V2")
    inner = SchemaBuilder.struct().field("b", Schema.STRING_SCHEMA).build()
    outer = SchemaBuilder.struct().field("a", inner).build()
    nested = _xf(ExtractField.Value, field="a.b", field_syntax_version="V2").apply(
        _sink(Struct(outer).put("a", Struct(inner).put("b", "deep")), outer))
    assert (nested.value_schema, nested.value) == (Schema.STRING_SCHEMA, "deep")
    with pytest.raises(ConfigError, match="String must be one of \\(case insensitive\\): V1, V2"):
        _xf(ExtractField.Value, field="a", field_syntax_version="V3")


# ---------------------------------------------------------------------------------- HoistField, SetSchemaMetadata
def test_hoist_field_and_set_schema_metadata():
    out = _xf(HoistField.Key, field="magic").apply(_sink(key=42, key_schema=Schema.INT32_SCHEMA))
    assert [(f.name, f.schema) for f in out.key_schema.fields] == [("magic", Schema.INT32_SCHEMA)]
    assert out.key.get("magic") == 42
    assert _xf(HoistField.Value, field="line").apply(_sink("foo")).value == {"line": "foo"}
    meta = _xf(SetSchemaMetadata.Value, schema_name="foo", schema_version="42")
    out = meta.apply(_sink(Struct(SIMPLE).put("magic", 7), SIMPLE))
    assert (out.value_schema.name, out.value_schema.version, out.value_schema.doc) == ("foo", 42, "doc")
    assert out.value.schema == out.value_schema and out.value.get("magic") == 7
    with pytest.raises(ConfigError, match="^Neither schema name nor version configured$"):
        _xf(SetSchemaMetadata.Value)
    with pytest.raises(DataError, match=r"^Schema required for \[updating schema metadata\]$"):
        meta.apply(_sink({"a": 1}))


# ----------------------------------------------------------------------------------------------------- routers
@pytest.mark.parametrize("regex,replacement,topic,expected", [
    ("(.*)", "prefix-$1", "orig", "prefix-orig"),
    ("(.*)-(\\d\\d)", "$1-x-$2", "orig-01", "orig-x-01"),
    ("(?<name>[a-z]+)\\.raw", "${name}.clean", "users.raw", "users.clean"),
    ("(.*)-(\\d\\d)", "$1", "orig-1", "orig-1"),           # no full match: unchanged
    ("orig", "\\$literal", "orig", "$literal"),
    ("\\Qa.b\\E-(\\d+)", "x$1", "a.b-12", "x12"), ("\\Qa.b\\E-(\\d+)", "x$1", "axb-12", "axb-12"),
    ("(\\p{Alpha}+)_\\P{Digit}", "$1", "abc_x", "abc"), ("([\\p{Digit}x]+)", "<$1>", "1x2", "<1x2>"),
    ("(a*+)b", "$1", "aab", "aa"),
])
def test_regex_router(regex, replacement, topic, expected):
    assert _xf(RegexRouter, regex=regex, replacement=replacement).apply(_sink({}, topic=topic)).topic == expected


def test_regex_router_config_errors():
    with pytest.raises(ConfigError, match="^Invalid value \\(unclosed for configuration regex: Invalid regex: "):
        _xf(RegexRouter, regex="(unclosed", replacement="x")
    with pytest.raises(ConfigError, match='^Missing required configuration "replacement"'):
        _xf(RegexRouter, regex="x")


def test_timestamp_router():
    xf = _xf(TimestampRouter)
    assert xf.apply(_sink({}, topic="test")).topic == "test-20170103"
    custom = _xf(TimestampRouter, topic_format="${timestamp}_${topic}_${topic}",
                 timestamp_format="yyyy-MM-dd'T'HH:mm:ss.SSS, EEE MMM yy")
    assert custom.apply(_sink({}, topic="t")).topic == "2017-01-03T06:30:01.864, Tue Jan 17_t_t"
    with pytest.raises(DataError, match="^Timestamp missing on record: "):
        xf.apply(_sink({}, timestamp=None))
    with pytest.raises(ConfigError, match="Illegal pattern character 'q'"):
        _xf(TimestampRouter, timestamp_format="yyyyq")
    assert simple_date_format("''yy''")(dt.datetime(2009, 1, 1)) == "'09'"
    assert java_replacement("a$1b${x}\\$") == "a\\g<1>b\\g<x>$"


# ---------------------------------------------------------------------------------------- headers, Filter, preds
def test_header_transforms():
    rec = _sink({"a": 1}, headers=[("keep", b"1"), ("drop", b"2"), ("drop", None)])
    assert _xf(DropHeaders, headers="drop,other").apply(rec).headers == (("keep", b"1"),)
    assert _xf(InsertHeader, header="h", value_literal="caf\u00e9").apply(rec).headers[-1] == ("h", b"caf\xc3\xa9")
    with pytest.raises(ConfigError, match='^Missing required configuration "value.literal"'):
        _xf(InsertHeader, header="h")


def test_filter_with_predicates():
    tomb, live = _sink(None, topic="a"), _sink({"x": 1}, topic="b")
    drop_tombstones = Predicated(_xf(Filter), _xf(RecordIsTombstone))
    assert drop_tombstones.apply(tomb) is None and drop_tombstones.apply(live) is live
    keep_only_a = Predicated(_xf(Filter), _xf(TopicNameMatches, pattern="a|c"), negate=True)
    assert keep_only_a.apply(tomb) is tomb and keep_only_a.apply(live) is None
    has = _xf(HasHeaderKey, name="h")
    assert has.test(_sink({}, headers=[("h", None)])) and not has.test(live)
    assert not _xf(TopicNameMatches, pattern="a").test(_sink({}, topic="ab"))     # whole-name match
    with pytest.raises(ConfigError, match="Invalid regex"):
        _xf(TopicNameMatches, pattern="(")
    with pytest.raises(ConfigError, match="String must be non-empty"):
        _xf(HasHeaderKey, name="")


def test_builtin_names_are_kafkas():
    for name in ("InsertField$Value", "InsertField$Key", "ReplaceField$Value", "MaskField$Value", "ValueToKey",
                 "ExtractField$Key", "ExtractField$Value", "RegexRouter", "TimestampRouter", "HoistField$Value",
                 "Filter", "SetSchemaMetadata$Value", "InsertHeader", "DropHeaders", "Cast$Value", "Flatten$Key"):
        assert "org.apache.kafka.connect.transforms." + name in BUILTIN_TRANSFORMS, name
    assert BUILTIN_TRANSFORMS["org.apache.kafka.connect.transforms.InsertField$Value"] is InsertField.Value
    assert sorted(BUILTIN_PREDICATES) == ["org.apache.kafka.connect.transforms.predicates." + n
                                          for n in ("HasHeaderKey", "RecordIsTombstone", "TopicNameMatches")]


# ------------------------------------------------------------------------------------------------ Cast, Flatten
@pytest.mark.parametrize("spec,schema,value,expected", [
    # each expected value is what Kafka 4.4.0's Cast$Value returns for the same input
    ("int8", None, 300, 44), ("int8", None, 1e10, -1), ("int32", None, -1.9, -1), ("int16", None, "123", 123),
    ("boolean", None, 0.5, False), ("boolean", None, "TRUE", True), ("boolean", None, "yes", False),
    ("string", None, 1.5, "1.5"), ("string", Schema.FLOAT32_SCHEMA, 0.1, "0.1"), ("string", None, b"\x01\x02", "AQI="),
    ("float32", None, "1.5f", 1.5), ("float64", None, " 2.5 ", 2.5), ("int64", None, True, 1),
    ("int64", Timestamp.SCHEMA, dt.datetime(1970, 1, 1, 0, 0, 1, 234000, tzinfo=dt.timezone.utc), 1234),
    ("string", Timestamp.SCHEMA, dt.datetime(1970, 1, 1, 0, 0, 1, 234000, tzinfo=dt.timezone.utc), "00:00:01.234Z"),
    ("string", Timestamp.SCHEMA, dt.datetime(2020, 1, 2, tzinfo=dt.timezone.utc), "2020-01-02"),
])
def test_cast_whole_value(spec, schema, value, expected):
    out = _xf(Cast.Value, spec=spec).apply(_sink(value, schema))
    assert out.value == expected and type(out.value) is type(expected)
    if schema is not None:
        assert out.value_schema.type == spec


def test_cast_fields_and_errors():
    schema = (SchemaBuilder.struct().name("s").field("a", SchemaBuilder.int64().optional().default_value(5).build())
              .field("b", Schema.STRING_SCHEMA).field("c", Schema.BOOLEAN_SCHEMA).build())
    out = _xf(Cast.Value, spec="a:string,b:int32").apply(_sink(Struct(schema).put("b", "42").put("c", True), schema))
    fields = {f.name: f.schema for f in out.value_schema.fields}
    assert fields["a"] == SchemaBuilder.string().optional().default_value("5").build()
    assert fields["b"] == Schema.INT32_SCHEMA and fields["c"] == Schema.BOOLEAN_SCHEMA
    assert (out.value.get("a"), out.value.get("b"), out.value.get("c")) == ("5", 42, True)
    assert _xf(Cast.Value, spec="n:float64").apply(_sink({"n": 3, "o": "x"})).value == {"n": 3.0, "o": "x"}
    with pytest.raises(DataError, match=r"^Value \(70000\) was out of range for requested data type$"):
        _xf(Cast.Value, spec="int16").apply(_sink("70000"))
    with pytest.raises(ConfigError, match=r"^Cast transformation does not support casting to BYTES; supported types "
                                          r"are \[INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING\]$"):
        _xf(Cast.Value, spec="bytes")
    with pytest.raises(ConfigError, match="^Invalid type found in casting spec: foo$"):
        _xf(Cast.Value, spec="a:foo")
    with pytest.raises(ConfigError, match="may only specify a single cast in their spec"):
        _xf(Cast.Value, spec="int8,a:int16")
    with pytest.raises(DataError, match=r"^Cast transformation does not support casting from MAP; supported "
                                        r"types are \[INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING, "
                                        r"BYTES\]$"):
        _xf(Cast.Value, spec="string").apply(_sink({"a": 1}))


def test_flatten_both_shapes():
    inner = (SchemaBuilder.struct().field("x", Schema.INT32_SCHEMA)
             .field("y", SchemaBuilder.array(Schema.STRING_SCHEMA).build()).optional().build())
    outer = SchemaBuilder.struct().name("o").field("a", Schema.STRING_SCHEMA).field("in", inner).build()
    xf = _xf(Flatten.Value, delimiter="_")
    out = xf.apply(_sink(Struct(outer).put("a", "z").put("in", Struct(inner).put("x", 1).put("y", ["q"])), outer))
    assert out.value_schema.name == "o"
    assert [(f.name, f.schema.type, f.schema.optional) for f in out.value_schema.fields] == [
        ("a", "string", False), ("in_x", "int32", True), ("in_y", "array", True)]    # optional parent -> optional
    assert str(out.value) == "Struct{a=z,in_x=1,in_y=[q]}"
    assert xf.apply(_sink({"a": {"b": 2, "c": None}, "d": [1]})).value == {"a_b": 2, "a_c": None, "d": [1]}
    with pytest.raises(DataError, match=r"^Flatten transformation does not support MAP for record with schemas "
                                        r"\(for field m\).$"):
        bad = SchemaBuilder.struct().field("m", SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.STRING_SCHEMA)
                                           .build()).build()
        xf.apply(_sink(Struct(bad).put("m", {}), bad))


# ------------------------------------------------------------------------------------------ TimestampConverter
@pytest.mark.parametrize("target,fmt,precision,schema,value,expected", [
    # expected values are Kafka 4.4.0's TimestampConverter$Value results for the same inputs
    ("string", "yyyy-MM-dd HH:mm:ss.SSS", None, None, TS, "2017-01-03 06:30:01.864"),
    ("unix", "yyyy-MM-dd HH:mm:ss.SSS", None, None, "2017-01-03 06:30:01.864", TS),
    ("unix", "yyyyMMddHHmmss", "seconds", None, "20170103063001", 1483425001),
    ("unix", "dd MMM yyyy hh:mm a Z", None, None, "03 Jan 2017 06:30 PM +0100", 1483464600000),
    ("unix", "yyyy-MM-dd", None, None, "2017-13-40 trailing", 1518134400000),      # lenient, as Java's
    ("unix", None, "microseconds", None, -1500, -1000),
    ("unix", None, "seconds", None, -1500, -1500),
    ("Date", None, None, Schema.INT64_SCHEMA, TS, dt.date(2017, 1, 3)),
    ("Time", None, None, Schema.INT64_SCHEMA, TS, dt.time(6, 30, 1, 864000)),
    ("unix", None, "nanoseconds", Timestamp.SCHEMA, dt.datetime(2017, 1, 3, 6, 30, 1, 864000, tzinfo=dt.timezone.utc),
     TS * 1000000),
    ("Timestamp", "yyyy-MM-dd", None, Schema.STRING_SCHEMA, "2017-01-03",
     dt.datetime(2017, 1, 3, tzinfo=dt.timezone.utc)),
])
def test_timestamp_converter(target, fmt, precision, schema, value, expected):
    conf = {"target.type": target}
    if fmt:
        conf["format"] = fmt
    if precision:
        conf["unix.precision"] = precision
    out = _xf(TimestampConverter.Value, **{k.replace(".", "_"): v for k, v in conf.items()}).apply(_sink(value, schema))
    assert out.value == expected and type(out.value) is type(expected)


def test_timestamp_converter_field_and_errors():
    schema = SchemaBuilder.struct().field("ts", Schema.INT64_SCHEMA).field("other", Schema.STRING_SCHEMA).build()
    xf = _xf(TimestampConverter.Value, field="ts", target_type="Timestamp")
    out = xf.apply(_sink(Struct(schema).put("ts", TS).put("other", "x"), schema))
    assert out.value_schema.field("ts").schema == Timestamp.SCHEMA
    assert out.value.get("ts") == dt.datetime(2017, 1, 3, 6, 30, 1, 864000, tzinfo=dt.timezone.utc)
    assert out.value.get("other") == "x"
    assert xf.apply(_sink({"ts": TS, "other": 1})).value["ts"] == out.value.get("ts")
    with pytest.raises(ConfigError, match="^TimestampConverter requires format option to be specified when using "
                                          "string timestamps$"):
        _xf(TimestampConverter.Value, target_type="string")
    with pytest.raises(ConfigError, match="String must be one of: string, unix, Date, Time, Timestamp"):
        _xf(TimestampConverter.Value, target_type="date")
    with pytest.raises(DataError, match=r"^Could not parse timestamp: value \(nope\) does not match pattern "
                                        r"\(yyyy-MM-dd\)$"):
        _xf(TimestampConverter.Value, target_type="unix", format="yyyy-MM-dd").apply(_sink("nope"))


def test_header_from_copy_and_move():
    schema = (SchemaBuilder.struct().name("s").field("id", Schema.INT32_SCHEMA).field("tags", SchemaBuilder.array(
        Schema.STRING_SCHEMA).build()).field("keep", Schema.STRING_SCHEMA).build())
    value = Struct(schema).put("id", 7).put("tags", ["a", "b"]).put("keep", "k")
    rec = _sink(value, schema, headers=[("h0", b"x")])
    moved = _xf(HeaderFrom.Value, fields="id,tags", headers="h-id,h-tags", operation="move").apply(rec)
    assert [f.name for f in moved.value_schema.fields] == ["keep"] and moved.value_schema.name == "s"
    assert moved.value.get("keep") == "k"
    assert moved.headers == (("h0", b"x"), ("h-id", b"7"), ("h-tags", b'["a","b"]'))
    copied = _xf(HeaderFrom.Value, fields="id", headers="h-id", operation="copy").apply(rec)
    assert copied.value is value and copied.headers[-1] == ("h-id", b"7")
    schemaless = _xf(HeaderFrom.Value, fields="a,missing", headers="ha,hm", operation="move").apply(
        _sink({"a": "text", "b": 1}))
    assert schemaless.value == {"b": 1} and schemaless.headers == (("ha", b"text"), ("hm", None))
    with pytest.raises(ConfigError, match="^'fields' config must have the same number of elements as 'headers' "
                                          "config.$"):
        _xf(HeaderFrom.Value, fields="a,b", headers="h", operation="copy")
    with pytest.raises(ConfigError, match="String must be one of: move, copy"):
        _xf(HeaderFrom.Value, fields="a", headers="h", operation="cut")
