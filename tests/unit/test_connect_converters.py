"""kbroker.connect.converters: Kafka's JsonConverter byte for byte, String/ByteArray/number converters and
SimpleHeaderConverter. Expected bytes are what Kafka's JsonConverter (Jackson, compact) writes for the same data."""
import datetime as dt
import decimal

import pytest

from kbroker.connect.converters import (
    BUILTIN_CONVERTERS, BUILTIN_HEADER_CONVERTERS, BooleanConverter, ByteArrayConverter, DoubleConverter,
    IntegerConverter, JsonConverter, LongConverter, SimpleHeaderConverter, StringConverter, java_double_str,
    java_float_str, values_parse_string, values_to_string)
from kbroker.connect.data import Date, Decimal, Schema, SchemaAndValue, SchemaBuilder, Struct, Time, Timestamp
from kbroker.connect.exceptions import ConfigError, DataError


def _json(**conf):
    c = JsonConverter()
    c.configure({k.replace("_", "."): v for k, v in conf.items()}, False)
    return c


QUICKSTART = b'{"schema":{"type":"string","optional":false},"payload":"foo"}'


def test_quickstart_bytes_exactly():
    c = _json()
    assert c.from_connect_data("connect-test", Schema.STRING_SCHEMA, "foo") == QUICKSTART
    assert c.to_connect_data("connect-test", QUICKSTART) == SchemaAndValue(Schema.STRING_SCHEMA, "foo")
    # the 0.10.1 quickstart's worker used internal converters with schemas off: plain JSON
    assert _json(schemas_enable="false").from_connect_data("t", Schema.STRING_SCHEMA, "foo") == b'"foo"'


@pytest.mark.parametrize("schema,value,expected", [
    (Schema.BOOLEAN_SCHEMA, True, b'{"schema":{"type":"boolean","optional":false},"payload":true}'),
    (Schema.INT8_SCHEMA, 12, b'{"schema":{"type":"int8","optional":false},"payload":12}'),
    (Schema.INT16_SCHEMA, -12, b'{"schema":{"type":"int16","optional":false},"payload":-12}'),
    (Schema.INT32_SCHEMA, 12, b'{"schema":{"type":"int32","optional":false},"payload":12}'),
    (Schema.INT64_SCHEMA, 4398046511104, b'{"schema":{"type":"int64","optional":false},"payload":4398046511104}'),
    (Schema.FLOAT32_SCHEMA, 12.34, b'{"schema":{"type":"float","optional":false},"payload":12.34}'),
    (Schema.FLOAT64_SCHEMA, 12.34, b'{"schema":{"type":"double","optional":false},"payload":12.34}'),
    (Schema.FLOAT64_SCHEMA, 1e10, b'{"schema":{"type":"double","optional":false},"payload":1.0E10}'),
    (Schema.FLOAT64_SCHEMA, 5.0, b'{"schema":{"type":"double","optional":false},"payload":5.0}'),
    (Schema.BYTES_SCHEMA, b"test-string", b'{"schema":{"type":"bytes","optional":false},"payload":"dGVzdC1zdHJpbmc="}'),
    (Schema.OPTIONAL_STRING_SCHEMA, None, b'{"schema":{"type":"string","optional":true},"payload":null}'),
    (SchemaBuilder.string().name("n").version(2).doc("the doc").parameter("foo", "bar").build(), "x",
     b'{"schema":{"type":"string","optional":false,"name":"n","version":2,"doc":"the doc",'
     b'"parameters":{"foo":"bar"}},"payload":"x"}'),
    (SchemaBuilder.string().optional().default_value("default").build(), None,
     b'{"schema":{"type":"string","optional":true,"default":"default"},"payload":"default"}'),
    (SchemaBuilder.array(Schema.INT32_SCHEMA).build(), [1, 2, 3],
     b'{"schema":{"type":"array","items":{"type":"int32","optional":false},"optional":false},"payload":[1,2,3]}'),
    (SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT32_SCHEMA).build(), {"key1": 12, "key2": 15},
     b'{"schema":{"type":"map","keys":{"type":"string","optional":false},"values":{"type":"int32","optional":false},'
     b'"optional":false},"payload":{"key1":12,"key2":15}}'),
    (SchemaBuilder.map(Schema.INT32_SCHEMA, Schema.INT32_SCHEMA).build(), {1: 12, 2: 15},
     b'{"schema":{"type":"map","keys":{"type":"int32","optional":false},"values":{"type":"int32","optional":false},'
     b'"optional":false},"payload":[[1,12],[2,15]]}'),
    (Decimal.schema(2), decimal.Decimal("1.56"),
     b'{"schema":{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","version":1,'
     b'"parameters":{"scale":"2"}},"payload":"AJw="}'),
    (Date.SCHEMA, dt.date(1997, 5, 19),
     b'{"schema":{"type":"int32","optional":false,"name":"org.apache.kafka.connect.data.Date","version":1},'
     b'"payload":10000}'),
    (Time.SCHEMA, dt.time(4, 0),
     b'{"schema":{"type":"int32","optional":false,"name":"org.apache.kafka.connect.data.Time","version":1},'
     b'"payload":14400000}'),
    (Timestamp.SCHEMA, dt.datetime(1970, 2, 16, 7, 6, 40, tzinfo=dt.timezone.utc),
     b'{"schema":{"type":"int64","optional":false,"name":"org.apache.kafka.connect.data.Timestamp","version":1},'
     b'"payload":4000000000}'),
    (SchemaBuilder.int64().name(Timestamp.LOGICAL_NAME).version(1).optional().default_value(
        dt.datetime(1970, 1, 1, 0, 0, 0, 42000, tzinfo=dt.timezone.utc)).build(), None,
     b'{"schema":{"type":"int64","optional":true,"name":"org.apache.kafka.connect.data.Timestamp","version":1,'
     b'"default":42},"payload":42}'),
])
def test_json_converter_bytes_and_round_trip(schema, value, expected):
    c = _json()
    assert c.from_connect_data("t", schema, value) == expected
    back = c.to_connect_data("t", expected)
    assert back.schema == schema
    want = schema.default if value is None else value
    if schema.type == "float32":
        assert back.value == pytest.approx(want, rel=1e-7)
    else:
        assert back.value == want


def _struct_schema():
    return (SchemaBuilder.struct().name("foobar")
            .field("c1", Schema.OPTIONAL_INT32_SCHEMA)
            .field("c2", Schema.OPTIONAL_STRING_SCHEMA)
            .field("create_ts", Timestamp.SCHEMA)
            .field("tags", SchemaBuilder.array(Schema.STRING_SCHEMA).optional().build())
            .field("city", SchemaBuilder.string().optional().default_value("Paris").build())
            .build())


STRUCT_BYTES = (
    b'{"schema":{"type":"struct","fields":['
    b'{"type":"int32","optional":true,"field":"c1"},'
    b'{"type":"string","optional":true,"field":"c2"},'
    b'{"type":"int64","optional":false,"name":"org.apache.kafka.connect.data.Timestamp","version":1,'
    b'"field":"create_ts"},'
    b'{"type":"array","items":{"type":"string","optional":false},"optional":true,"field":"tags"},'
    b'{"type":"string","optional":true,"default":"Paris","field":"city"}],'
    b'"optional":false,"name":"foobar"},'
    b'"payload":{"c1":10000,"c2":null,"create_ts":1501834166000,"tags":["a","b"],"city":"Paris"}}')


def test_struct_bytes_both_directions():
    schema = _struct_schema()
    ts = dt.datetime(2017, 8, 4, 8, 9, 26, tzinfo=dt.timezone.utc)
    value = Struct(schema).put("c1", 10000).put("create_ts", ts).put("tags", ["a", "b"])
    c = _json()
    assert c.from_connect_data("t", schema, value) == STRUCT_BYTES
    back = c.to_connect_data("t", STRUCT_BYTES)
    assert back.schema == schema
    assert back.value == Struct(schema).put("c1", 10000).put("create_ts", ts).put("tags", ["a", "b"]).put(
        "city", "Paris")                      # replace.null.with.default filled it on write
    # replace.null.with.default=false keeps the null
    raw = _json(replace_null_with_default="false").from_connect_data("t", schema, value)
    assert raw.endswith(b'"tags":["a","b"],"city":null}}')
    # a struct written without the optional fields reads with nulls / defaults
    minimal = (b'{"schema":{"type":"struct","fields":[{"field":"required","type":"string"},'
               b'{"field":"opt","type":"string","optional":true}]},"payload":{"required":"r"}}')
    got = c.to_connect_data("t", minimal)
    assert got.value.get("required") == "r" and got.value.get("opt") is None


def test_schemas_disabled_plain_json_both_directions():
    c = _json(schemas_enable="false")
    assert c.from_connect_data("t", None, {"a": [1, 2.5, None, True], "b": "x"}) == \
        b'{"a":[1,2.5,null,true],"b":"x"}'
    assert c.from_connect_data("t", _struct_schema(), Struct(_struct_schema()).put(
        "create_ts", dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc))) == \
        b'{"c1":null,"c2":null,"create_ts":0,"tags":null,"city":"Paris"}'
    got = c.to_connect_data("t", b'{"field1": 1, "field2": [1, "2", 3.5], "f3": null}')
    assert got.schema is None and got.value == {"field1": 1, "field2": [1, "2", 3.5], "f3": None}
    assert isinstance(got.value["field2"][2], float)
    assert c.to_connect_data("t", b"12") == SchemaAndValue(None, 12)
    assert c.to_connect_data("t", b"null") == SchemaAndValue(None, None)
    assert c.to_connect_data("t", b"") == SchemaAndValue(None, None)
    # an optional schema with a null value is "null", not a tombstone; no schema and no value is a tombstone
    assert c.from_connect_data("t", Schema.OPTIONAL_STRING_SCHEMA, None) == b"null"
    assert c.from_connect_data("t", None, None) is None


def test_tombstones_and_null_schema_envelope():
    c = _json()
    assert c.from_connect_data("t", None, None) is None
    assert c.to_connect_data("t", None) == SchemaAndValue.NULL
    assert c.from_connect_data("t", None, "x") == b'{"schema":null,"payload":"x"}'
    assert c.to_connect_data("t", b'{ "schema": null, "payload": { "field1": 1, "field2": 2} }') == \
        SchemaAndValue(None, {"field1": 1, "field2": 2})
    assert c.to_connect_data("t", b'{"schema":null,"payload":null}') == SchemaAndValue.NULL


def test_schemaless_maps_with_non_string_keys_are_pairs():
    c = _json(schemas_enable="false")
    assert c.from_connect_data("t", None, {1: "a", 2: "b"}) == b'[[1,"a"],[2,"b"]]'
    assert c.from_connect_data("t", None, {"k": b"\x00\xff"}) == b'{"k":"AP8="}'


def test_strings_escaped_as_jackson():
    c = _json(schemas_enable="false")
    assert c.from_connect_data("t", Schema.STRING_SCHEMA, 'a"b\\c\n\t\x01\x7fé€😀') == \
        '"a\\"b\\\\c\\n\\t\\u0001\x7fé€\\uD83D\\uDE00"'.encode("utf-8")
    assert c.to_connect_data("t", '"a\\"b\\u0001é"'.encode()) == SchemaAndValue(None, 'a"b\x01é')


@pytest.mark.parametrize("x,double,float_", [
    (1.0, "1.0", "1.0"), (0.001, "0.001", "0.001"), (0.0001, "1.0E-4", "1.0E-4"), (1e7, "1.0E7", "1.0E7"),
    (9999999.0, "9999999.0", "9999999.0"), (12345678.9, "1.23456789E7", "1.2345679E7"), (0.1, "0.1", "0.1"),
    (0.1 + 0.2, "0.30000000000000004", "0.3"), (-0.0, "-0.0", "-0.0"), (1e21, "1.0E21", "1.0E21"),
    (123.456, "123.456", "123.456"), (3.4e38, "3.4E38", "3.4E38"), (1e39, "1.0E39", "Infinity"),
])
def test_java_number_strings(x, double, float_):
    assert java_double_str(x) == double
    assert java_float_str(x) == float_


def test_decimal_numeric_format_and_reading_both_forms():
    c = _json(decimal_format="numeric")
    s = Decimal.schema(2)
    out = c.from_connect_data("t", s, decimal.Decimal("1.56"))
    assert out.endswith(b'"payload":1.56}')
    assert c.to_connect_data("t", out).value == decimal.Decimal("1.56")
    # base64 input is accepted whatever the format
    assert _json(decimal_format="NUMERIC").to_connect_data("t", _json().from_connect_data(
        "t", s, decimal.Decimal("-1.29"))).value == decimal.Decimal("-1.29")
    big = (b'{"schema":{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","version":1,'
           b'"parameters":{"scale":"17"}},"payload":1.23456789123456789}')
    assert str(c.to_connect_data("t", big).value) == "1.23456789123456789"     # full precision (BigDecimal)
    with pytest.raises(DataError, match="mismatching scale"):          # BASE64 checks the scale (NUMERIC does not)
        _json().from_connect_data("t", s, decimal.Decimal("1.5"))


def test_leading_zeros_and_defaults_on_read():
    c = _json()
    assert c.to_connect_data("t", b'{ "schema": { "type": "int8" }, "payload": 0012 }') == \
        SchemaAndValue(Schema.INT8_SCHEMA, 12)
    assert c.to_connect_data("t", b'{ "schema": { "type": "boolean", "default": true }, "payload": null }') == \
        SchemaAndValue(SchemaBuilder.bool().default_value(True).build(), True)
    got = _json(replace_null_with_default="false").to_connect_data(
        "t", b'{"schema":{"type":"string","optional":true,"default":"default"},"payload":null}')
    assert got.value is None and got.schema.default == "default"


@pytest.mark.parametrize("data,message", [
    (b'{"a":1}', 'JsonConverter with schemas.enable requires "schema" and "payload" fields and may not contain '
                 'additional fields. If you are trying to deserialize plain JSON data, set schemas.enable=false in '
                 'your converter configuration.'),
    (b'not json', "Converting byte[] to Kafka Connect data failed due to serialization error"),
    (b'{"schema":{"type":"int32"},"payload":null}', "Invalid null value for required INT32 field"),
    (b'{"schema":{"type":"whatever"},"payload":1}', "Unknown schema type: whatever"),
    (b'{"schema":{"optional":true},"payload":1}', "Schema must contain 'type' field"),
    (b'{"schema":{"type":"array"},"payload":[]}', "Array schema did not specify the element type"),
    (b'{"schema":{"type":"map","keys":{"type":"string"},"values":{"type":"int32"}},"payload":[]}',
     "Maps with string fields should be encoded as JSON objects, but found ARRAY"),
    (b'{"schema":{"type":"struct","fields":[]},"payload":[]}',
     "Structs should be encoded as JSON objects, but found ARRAY"),
    (b'{"schema":{"type":"string","parameters":{"a":1}},"payload":"x"}', "Schema parameters must have string values."),
    (b'{"schema":{"type":"int32","name":"org.apache.kafka.connect.data.Date"},"payload":"x"}',
     "Invalid type for Date, underlying representation should be integer but was STRING"),
    (b'{"schema":{"type":"int32"},"payload":NaN}', "serialization error"),
    (b'[' * 100000, "Converting byte[] to Kafka Connect data failed"),
    (b'{"schema":{"type":"int64","name":"org.apache.kafka.connect.data.Timestamp"},"payload":9223372036854775807}',
     "outside the years 1-9999"),
    (b'{"schema":null,"payload":' + b'1' * 5000 + b'}', "serialization error"),
])
def test_json_read_errors(data, message):
    with pytest.raises(DataError) as e:
        _json().to_connect_data("t", data)
    assert message in str(e.value)


def test_json_write_errors():
    c = _json()
    with pytest.raises(DataError, match="^Conversion error: null value for field that is required and has no "
                                        "default value$"):
        c.from_connect_data("t", Schema.STRING_SCHEMA, None)
    with pytest.raises(DataError, match="^Mismatching schema.$"):
        c.from_connect_data("t", None, Struct(_struct_schema()))
    with pytest.raises(DataError, match="Invalid type for INT32"):
        c.from_connect_data("t", Schema.INT32_SCHEMA, "1")
    with pytest.raises(DataError, match="does not have corresponding schema type"):
        c.from_connect_data("t", None, object())


def test_json_config_errors_and_cache_bound():
    with pytest.raises(ConfigError, match="^Invalid value maybe for configuration schemas.enable: Expected value to "
                                          "be either true or false$"):
        _json(schemas_enable="maybe")
    with pytest.raises(ConfigError, match="String must be one of \\(case insensitive\\): NUMERIC, BASE64"):
        _json(decimal_format="hex")
    c = _json(schemas_cache_size="2")
    for i in range(5):
        c.from_connect_data("t", SchemaBuilder.int32().name("s%d" % i).build(), i)
        c.to_connect_data("t", b'{"schema":{"type":"int32","name":"r%d"},"payload":1}' % i)
    assert len(c._to_json_cache.data) == 2 and len(c._to_connect_cache.data) == 2


def test_string_converter():
    c = StringConverter()
    c.configure({}, False)
    assert c.from_connect_data("t", Schema.STRING_SCHEMA, "héllo") == "héllo".encode()
    assert c.from_connect_data("t", None, 12) == b"12"
    assert c.from_connect_data("t", None, True) == b"true"
    assert c.from_connect_data("t", None, None) is None
    assert c.to_connect_data("t", b"h\xc3\xa9") == SchemaAndValue(Schema.OPTIONAL_STRING_SCHEMA, "hé")
    assert c.to_connect_data("t", b"\xff").value == "\ufffd"            # Java's replacement on bad bytes
    assert c.to_connect_data("t", None) == SchemaAndValue(Schema.OPTIONAL_STRING_SCHEMA, None)
    latin = StringConverter()
    latin.configure({"converter.encoding": "ISO-8859-1"}, True)
    assert latin.from_connect_data("t", None, "é") == b"\xe9"
    per_direction = StringConverter()
    per_direction.configure({"key.serializer.encoding": "UTF-16BE"}, True)
    assert per_direction.from_connect_data("t", None, "a") == b"\x00a"
    assert per_direction.to_connect_data("t", b"a").value == "a"        # deserializer stays UTF-8
    with pytest.raises(ConfigError, match="Unsupported encoding"):
        StringConverter().configure({"converter.encoding": "NOPE-1"}, False)


def test_byte_array_and_number_converters():
    b = ByteArrayConverter()
    b.configure({}, False)
    assert b.from_connect_data("t", Schema.BYTES_SCHEMA, b"\x00\x01") == b"\x00\x01"
    assert b.to_connect_data("t", b"\x02") == SchemaAndValue(Schema.OPTIONAL_BYTES_SCHEMA, b"\x02")
    with pytest.raises(DataError, match="^Invalid schema type for ByteArrayConverter: STRING$"):
        b.from_connect_data("t", Schema.STRING_SCHEMA, b"x")
    with pytest.raises(DataError, match="ByteArrayConverter is not compatible with objects of type"):
        b.from_connect_data("t", None, "x")
    i = IntegerConverter()
    i.configure({}, True)
    assert i.from_connect_data("t", None, -2) == b"\xff\xff\xff\xfe"
    assert i.to_connect_data("t", b"\x00\x00\x01\x00") == SchemaAndValue(Schema.OPTIONAL_INT32_SCHEMA, 256)
    with pytest.raises(DataError, match="Size of data received by IntegerDeserializer is not 4"):
        i.to_connect_data("t", b"\x00")
    with pytest.raises(DataError, match="Failed to serialize to integer"):
        i.from_connect_data("t", None, 2 ** 31)
    assert LongConverter().from_connect_data("t", None, 1) == b"\x00" * 7 + b"\x01"
    assert DoubleConverter().to_connect_data("t", b"?\xf0\x00\x00\x00\x00\x00\x00").value == 1.0
    bc = BooleanConverter()
    assert bc.from_connect_data("t", None, True) == b"\x01" and bc.to_connect_data("t", b"\x00").value is False
    with pytest.raises(DataError, match="Unexpected byte received by BooleanDeserializer: 2"):
        bc.to_connect_data("t", b"\x02")


def test_simple_header_converter_round_trips():
    h = SimpleHeaderConverter()
    h.configure({})
    cases = [
        (Schema.STRING_SCHEMA, "hello world", b"hello world"),
        (Schema.BOOLEAN_SCHEMA, True, b"true"),
        (Schema.INT8_SCHEMA, 12, b"12"),
        (Schema.INT16_SCHEMA, 1000, b"1000"),
        (Schema.INT32_SCHEMA, 100000, b"100000"),
        (Schema.INT64_SCHEMA, 2 ** 40, b"1099511627776"),
        (Schema.FLOAT32_SCHEMA, 1.5, b"1.5"),
        (SchemaBuilder.array(Schema.INT8_SCHEMA).build(), [1, 2, 3], b"[1,2,3]"),
        (SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT8_SCHEMA).build(), {"a": 1, "b": 2}, b'{"a":1,"b":2}'),
        (Date.SCHEMA, dt.date(2020, 2, 29), b"2020-02-29"),
        (Timestamp.SCHEMA, dt.datetime(2020, 2, 29, 1, 2, 3, 4000, tzinfo=dt.timezone.utc),
         b"2020-02-29T01:02:03.004Z"),
    ]
    for schema, value, text in cases:
        assert h.from_connect_header("t", "k", schema, value) == text
        assert h.to_connect_header("t", "k", text) == SchemaAndValue(schema, value), text
    assert h.from_connect_header("t", "k", None, None) is None
    assert h.to_connect_header("t", "k", None) == SchemaAndValue.NULL
    assert h.to_connect_header("t", "k", b"\xff\xfe") == SchemaAndValue(Schema.BYTES_SCHEMA, b"\xff\xfe")
    assert values_to_string(None, ["a", 'q"', None]) == '["a","q\\"",null]'
    assert values_parse_string("[1, oops") == SchemaAndValue(Schema.STRING_SCHEMA, "[1, oops")
    assert values_parse_string("") == SchemaAndValue(Schema.STRING_SCHEMA, "")


def test_builtin_maps_use_kafka_class_names():
    assert BUILTIN_CONVERTERS["org.apache.kafka.connect.json.JsonConverter"] is JsonConverter
    assert BUILTIN_CONVERTERS["org.apache.kafka.connect.storage.StringConverter"] is StringConverter
    assert BUILTIN_CONVERTERS["org.apache.kafka.connect.converters.ByteArrayConverter"] is ByteArrayConverter
    assert BUILTIN_HEADER_CONVERTERS["org.apache.kafka.connect.storage.SimpleHeaderConverter"] is \
        SimpleHeaderConverter
    assert "org.apache.kafka.connect.storage.SimpleHeaderConverter" not in BUILTIN_CONVERTERS


# Bytes written by Apache Kafka 4.4.0's JsonConverter (connect-json 4.4.0, Jackson 2.21, JDK 17) for the same
# data, captured once: every field kind, logical types, defaults, parameters, metadata and escapes.
KAFKA_STRUCT = (
    b'{"schema":{"type":"struct","fields":[{"type":"int32","optional":true,"field":"c1"},{"type":"string",'
    b'"optional":true,"field":"c2"},{"type":"int64","optional":false,"name":"org.apache.kafka.connect.data.Timestamp",'
    b'"version":1,"field":"create_ts"},{"type":"array","items":{"type":"string","optional":false},"optional":true,'
    b'"field":"tags"},{"type":"string","optional":true,"default":"Paris","field":"city"},{"type":"map","keys":'
    b'{"type":"int32","optional":false},"values":{"type":"string","optional":false},"optional":false,"field":"m"},'
    b'{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":'
    b'{"scale":"2"},"default":"/38=","field":"dec"},{"type":"int32","optional":false,"name":'
    b'"org.apache.kafka.connect.data.Date","version":1,"field":"d"},{"type":"int32","optional":false,"name":'
    b'"org.apache.kafka.connect.data.Time","version":1,"field":"tm"},{"type":"bytes","optional":true,"field":"b"},'
    b'{"type":"int8","optional":false,"default":-3,"field":"i8"}],"optional":false,"name":"foobar","version":3,'
    b'"doc":"d","parameters":{"p1":"v1","a0":"v0"}},"payload":{"c1":10000,"c2":null,"create_ts":1501834166000,'
    b'"tags":["a","b"],"city":"Paris","m":[[1,"x"]],"dec":"/38=","d":10000,"tm":14400123,"b":"AP8B","i8":-3}}')
KAFKA_F32 = (b'{"schema":{"type":"array","items":{"type":"float","optional":false},"optional":false},'
             b'"payload":[12.34,0.1,1.2345679E7,1.0E-5,3.4E38,100.0,"NaN",1.0E7,9999999.0,0.001]}')
KAFKA_ESCAPES = ('{"schema":{"type":"string","optional":false},"payload":"a\\"b\\\\c\\n\\t\\u0001\\u001F\x7f\u00e9'
                 '\u20ac\\uD83D\\uDE00/\u2028<>&\'"}').encode("utf-8")


def _kafka_struct_schema():
    return (SchemaBuilder.struct().name("foobar").version(3).doc("d").parameter("p1", "v1").parameter("a0", "v0")
            .field("c1", Schema.OPTIONAL_INT32_SCHEMA).field("c2", Schema.OPTIONAL_STRING_SCHEMA)
            .field("create_ts", Timestamp.SCHEMA)
            .field("tags", SchemaBuilder.array(Schema.STRING_SCHEMA).optional().build())
            .field("city", SchemaBuilder.string().optional().default_value("Paris").build())
            .field("m", SchemaBuilder.map(Schema.INT32_SCHEMA, Schema.STRING_SCHEMA).build())
            .field("dec", Decimal.builder(2).optional().default_value(decimal.Decimal("-1.29")).build())
            .field("d", Date.SCHEMA).field("tm", Time.SCHEMA).field("b", Schema.OPTIONAL_BYTES_SCHEMA)
            .field("i8", SchemaBuilder.int8().default_value(-3).build()).build())


def test_bytes_equal_kafka_4_4_jsonconverter():
    schema = _kafka_struct_schema()
    value = (Struct(schema).put("c1", 10000).put("create_ts", dt.datetime(2017, 8, 4, 8, 9, 26, tzinfo=dt.timezone.utc))
             .put("tags", ["a", "b"]).put("m", {1: "x"}).put("d", dt.date(1997, 5, 19))
             .put("tm", dt.time(4, 0, 0, 123000)).put("b", b"\x00\xff\x01"))
    c = _json()
    assert c.from_connect_data("t", schema, value) == KAFKA_STRUCT
    back = c.to_connect_data("t", KAFKA_STRUCT)
    assert back.schema == schema
    assert c.from_connect_data("t", back.schema, back.value) == KAFKA_STRUCT
    f32 = SchemaBuilder.array(Schema.FLOAT32_SCHEMA).build()
    assert c.from_connect_data("t", f32, [12.34, 0.1, 1.2345679e7, 1e-5, 3.4e38, 100.0, float("nan"), 1e7,
                                          9999999.0, 0.001]) == KAFKA_F32
    assert c.from_connect_data("t", *c.to_connect_data("t", KAFKA_F32)) == KAFKA_F32
    text = "a\"b\\c\n\t\x01\x1f\x7f\u00e9\u20ac\U0001F600/\u2028<>&'"
    assert c.from_connect_data("t", Schema.STRING_SCHEMA, text) == KAFKA_ESCAPES
    assert c.to_connect_data("t", KAFKA_ESCAPES).value == text
    header = SimpleHeaderConverter().from_connect_header("t", "k", schema, value)
    assert header == (b'{"c1":10000,"c2":null,"create_ts":2017-08-04T08:09:26.000Z,"tags":["a","b"],"city":"Paris",'
                      b'"m":{1:"x"},"dec":-1.29,"d":1997-05-19,"tm":04:00:00.123Z,"b":"AP8B","i8":-3}')


@pytest.mark.parametrize("text,schema,value", [
    # what Kafka 4.4.0's SimpleHeaderConverter reads these as
    ("1.0", Schema.INT8_SCHEMA, 1), ("1e3", Schema.INT16_SCHEMA, 1000), ("70000", Schema.INT32_SCHEMA, 70000),
    ("3000000000", Schema.INT64_SCHEMA, 3000000000), (" 12 ", Schema.INT8_SCHEMA, 12),
    ("99999999999999999999", Decimal.schema(0), decimal.Decimal("99999999999999999999")),
    ("1.5e400", Decimal.schema(-399), decimal.Decimal("1.5e400")),
    ("[1,2,300]", SchemaBuilder.array(Schema.INT16_SCHEMA).build(), [1, 2, 300]),
    ("[1.5,2]", SchemaBuilder.array(Schema.FLOAT32_SCHEMA).build(), [1.5, 2.0]),
    ("10:11:12.013Z", Time.SCHEMA, dt.time(10, 11, 12, 13000)),
    (".5", Schema.STRING_SCHEMA, ".5"), ("1,2", Schema.INT8_SCHEMA, 1), ("[null,1]", Schema.STRING_SCHEMA, "[null,1]"),
    ('{"k":"v","k2":null}', Schema.STRING_SCHEMA, '{"k":"v","k2":null}'),
    ("2020-02-30", Date.SCHEMA, dt.date(2020, 3, 1)),                      # lenient, as SimpleDateFormat
    ('["2020-02-29"]', SchemaBuilder.array(Date.SCHEMA).build(), [dt.date(2020, 2, 29)]),
    ('["a\\"b"]', SchemaBuilder.array(Schema.STRING_SCHEMA).build(), ['a\\"b']),   # the escape is kept
    ("[[1,2],[3]]", SchemaBuilder.array(SchemaBuilder.array(Schema.INT8_SCHEMA).build()).build(), [[1, 2], [3]]),
])
def test_header_parsing_as_kafka(text, schema, value):
    got = SimpleHeaderConverter().to_connect_header("t", "k", text.encode())
    assert got == SchemaAndValue(schema, value)
    assert type(got.value) is type(value) and (not isinstance(value, list) or
                                                [type(v) for v in got.value] == [type(v) for v in value])
