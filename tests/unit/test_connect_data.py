"""kbroker.connect.data: Connect's schemas, structs and logical types with Kafka's semantics and messages."""
import datetime as dt
import decimal

import pytest

from kbroker.connect.data import (
    ARRAY, INT32, MAP, STRUCT, Date, Decimal, Field, Schema, SchemaAndValue, SchemaBuilder, SchemaBuilderError,
    Struct, Time, Timestamp, copy_schema_basics, infer_schema_type, validate_value)
from kbroker.connect.exceptions import DataError


def _person():
    return (SchemaBuilder.struct().name("com.example.Person").version(2).doc("a person")
            .field("name", Schema.STRING_SCHEMA)
            .field("age", Schema.OPTIONAL_INT32_SCHEMA)
            .field("city", SchemaBuilder.string().optional().default_value("Paris").build())
            .field("tags", SchemaBuilder.array(Schema.STRING_SCHEMA).optional().build())
            .build())


def test_builder_builds_an_immutable_equal_schema():
    a, b = _person(), _person()
    assert a == b and hash(a) == hash(b) and a is not b
    assert a.type == STRUCT and a.name == "com.example.Person" and a.version == 2 and a.doc == "a person"
    assert [f.name for f in a.fields] == ["name", "age", "city", "tags"]
    assert a.field("city") == Field("city", 2, SchemaBuilder.string().optional().default_value("Paris").build())
    assert a.field("nope") is None
    assert str(a) == "Schema{com.example.Person:STRUCT}" and str(Schema.INT32_SCHEMA) == "Schema{INT32}"
    assert a != (SchemaBuilder.struct().name("com.example.Person").field("name", Schema.STRING_SCHEMA).build())
    m = SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT64_SCHEMA).optional().build()
    assert (m.type, m.key_schema, m.value_schema, m.optional) == (MAP, Schema.STRING_SCHEMA, Schema.INT64_SCHEMA, True)
    assert SchemaBuilder.array(Schema.INT32_SCHEMA).build().type == ARRAY
    assert Schema.OPTIONAL_STRING_SCHEMA.optional and not Schema.STRING_SCHEMA.optional


def test_builder_errors_are_kafkas():
    with pytest.raises(SchemaBuilderError, match="^Invalid SchemaBuilder call: name has already been set.$"):
        SchemaBuilder.int32().name("a").name("b")
    SchemaBuilder.int32().name("a").name("a")      # the same value again is fine, as Kafka's
    with pytest.raises(SchemaBuilderError, match="^Cannot create fields on type INT32$"):
        SchemaBuilder.int32().field("f", Schema.STRING_SCHEMA)
    with pytest.raises(SchemaBuilderError, match="^Cannot create field because of field name duplication f$"):
        SchemaBuilder.struct().field("f", Schema.STRING_SCHEMA).field("f", Schema.INT32_SCHEMA)
    with pytest.raises(SchemaBuilderError, match="Invalid default value"):
        SchemaBuilder.int32().default_value("x")
    with pytest.raises(SchemaBuilderError, match="Invalid default value"):
        SchemaBuilder.int8().default_value(128)
    with pytest.raises(DataError, match="^Cannot look up fields on non-struct type$"):
        Schema.INT32_SCHEMA.field("x")


def test_struct_put_get_defaults_and_validate():
    s = Struct(_person()).put("name", "Ann").put("tags", ["a", "b"])
    assert s.get("name") == "Ann" and s.get("age") is None
    assert s.get("city") == "Paris" and s.get_without_default("city") is None     # default on read only
    assert s.get_string("name") == "Ann" and s.get_array("tags") == ["a", "b"]
    s.validate()
    assert str(s) == "Struct{name=Ann,tags=[a, b]}"
    assert s == Struct(_person()).put("name", "Ann").put("tags", ["a", "b"])
    assert s != Struct(_person()).put("name", "Bob")
    with pytest.raises(DataError, match='^Invalid value: null used for required field: "name", schema type: STRING$'):
        Struct(_person()).validate()
    with pytest.raises(DataError, match="^nope is not a valid field name$"):
        s.put("nope", 1)
    with pytest.raises(DataError, match="^Field 'name' is not of type INT32$"):
        s.get_int32("name")
    with pytest.raises(DataError, match='^Invalid Python object for schema with type INT32: .*str.* for field: "age"$'):
        s.put("age", "12")
    with pytest.raises(DataError, match="^Not a struct schema: Schema{INT32}$"):
        Struct(Schema.INT32_SCHEMA)
    with pytest.raises(DataError, match="^Struct schemas do not match.$"):
        other = SchemaBuilder.struct().field("x", Schema.INT32_SCHEMA).build()
        Struct(SchemaBuilder.struct().field("inner", _person()).build()).put("inner", Struct(other).put("x", 1))


@pytest.mark.parametrize("schema,value,ok", [
    (Schema.INT8_SCHEMA, 127, True), (Schema.INT8_SCHEMA, 128, False), (Schema.INT8_SCHEMA, True, False),
    (Schema.INT16_SCHEMA, -32768, True), (Schema.INT32_SCHEMA, 2 ** 31, False),
    (Schema.INT64_SCHEMA, 2 ** 63 - 1, True),
    (Schema.FLOAT32_SCHEMA, 1.5, True), (Schema.FLOAT64_SCHEMA, 2, True), (Schema.FLOAT64_SCHEMA, "2", False),
    (Schema.BOOLEAN_SCHEMA, False, True), (Schema.BOOLEAN_SCHEMA, 0, False), (Schema.STRING_SCHEMA, "", True),
    (Schema.BYTES_SCHEMA, b"\x00", True), (Schema.BYTES_SCHEMA, "x", False), (Schema.STRING_SCHEMA, None, False),
    (Schema.OPTIONAL_STRING_SCHEMA, None, True),
    (SchemaBuilder.array(Schema.INT32_SCHEMA).build(), [1, 2], True),
    (SchemaBuilder.array(Schema.INT32_SCHEMA).build(), [1, None], False),
    (SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT32_SCHEMA).build(), {"a": 1}, True),
    (SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT32_SCHEMA).build(), {1: 1}, False),
    (Decimal.schema(2), decimal.Decimal("1.00"), True), (Decimal.schema(2), 1.0, False),
    (Date.SCHEMA, dt.date(2020, 1, 1), True), (Date.SCHEMA, 18262, False),
    (Time.SCHEMA, dt.time(1, 2, 3), True), (Timestamp.SCHEMA, dt.datetime(2020, 1, 1), True),
    (Timestamp.SCHEMA, dt.date(2020, 1, 1), False),
])
def test_validate_value(schema, value, ok):
    if ok:
        validate_value(schema, value)
    else:
        with pytest.raises(DataError):
            validate_value(schema, value)


def test_validate_value_messages_name_the_location():
    arr = SchemaBuilder.array(Schema.INT32_SCHEMA).build()
    with pytest.raises(DataError, match="^Invalid value: null used for required element of array value, "
                                        "schema type: INT32$"):
        validate_value(arr, [None])
    mp = SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT32_SCHEMA).build()
    with pytest.raises(DataError, match='key of map field: "m"$'):
        validate_value(mp, {1: 2}, "m")
    with pytest.raises(DataError, match='^Invalid Python object for schema "org.apache.kafka.connect.data.Date" '
                                        'with type INT32'):
        validate_value(Date.SCHEMA, 5)


def test_logical_schemas_are_kafkas():
    d = Decimal.schema(2)
    assert (d.type, d.name, d.version, d.parameters) == ("bytes", "org.apache.kafka.connect.data.Decimal", 1,
                                                         {"scale": "2"})
    assert (Date.SCHEMA.type, Date.SCHEMA.name, Date.SCHEMA.version) == (
        "int32", "org.apache.kafka.connect.data.Date", 1)
    assert (Time.SCHEMA.type, Time.SCHEMA.name) == ("int32", "org.apache.kafka.connect.data.Time")
    assert (Timestamp.SCHEMA.type, Timestamp.SCHEMA.name) == ("int64", "org.apache.kafka.connect.data.Timestamp")


@pytest.mark.parametrize("text,scale,hexbytes", [
    ("1.56", 2, "009c"), ("-1.56", 2, "ff64"), ("0.00", 2, "00"), ("1.27", 2, "7f"), ("1.28", 2, "0080"),
    ("-1.28", 2, "80"), ("-1.29", 2, "ff7f"), ("1.23456789123456789", 17, "01b69b4bacd05f15"),
    ("123456789012345678901234567890.12", 2, "009bd30a3c645943dd1690a03a14"), ("-0.01", 2, "ff"),
])
def test_decimal_bytes_are_javas_biginteger_bytes(text, scale, hexbytes):
    # Java: new BigDecimal(text).unscaledValue().toByteArray()
    s = Decimal.schema(scale)
    value = decimal.Decimal(text)
    assert Decimal.from_logical(s, value).hex() == hexbytes
    back = Decimal.to_logical(s, bytes.fromhex(hexbytes))
    assert back == value and str(back) == text


def test_decimal_scale_mismatch():
    with pytest.raises(DataError, match="^Decimal value has mismatching scale for given Decimal schema. Schema has "
                                        "scale 2, value has scale 1.$"):
        Decimal.from_logical(Decimal.schema(2), decimal.Decimal("1.5"))
    with pytest.raises(DataError, match="scale parameter not found"):
        Decimal.from_logical(Schema.BYTES_SCHEMA, decimal.Decimal("1.5"))


def test_date_time_timestamp_round_trip():
    assert Date.from_logical(Date.SCHEMA, dt.date(1997, 5, 19)) == 10000
    assert Date.to_logical(Date.SCHEMA, 10000) == dt.date(1997, 5, 19)
    assert Date.from_logical(Date.SCHEMA, dt.datetime(1970, 1, 2, tzinfo=dt.timezone.utc)) == 1
    with pytest.raises(DataError, match="should not have any time fields set to non-zero values"):
        Date.from_logical(Date.SCHEMA, dt.datetime(1970, 1, 2, 1))
    assert Time.from_logical(Time.SCHEMA, dt.time(4, 0, 0)) == 14400000
    assert Time.to_logical(Time.SCHEMA, 14400123) == dt.time(4, 0, 0, 123000)
    with pytest.raises(DataError, match="^Time values must use number of milliseconds greater than 0 and less than "
                                        "86400000$"):
        Time.to_logical(Time.SCHEMA, -1)
    ts = Timestamp.to_logical(Timestamp.SCHEMA, 4000000000)
    assert ts == dt.datetime(1970, 2, 16, 7, 6, 40, tzinfo=dt.timezone.utc)
    assert Timestamp.from_logical(Timestamp.SCHEMA, ts) == 4000000000
    assert Timestamp.from_logical(Timestamp.SCHEMA, dt.datetime(1969, 12, 31, 23, 59, 59, 999000)) == -1
    with pytest.raises(DataError, match="schema does not match"):
        Timestamp.from_logical(Date.SCHEMA, ts)


def test_infer_and_copy_basics_and_schema_and_value():
    assert [infer_schema_type(v) for v in (True, 1, 1.5, "s", b"b", [1], {"a": 1}, None, dt.date.today())] == [
        "boolean", "int64", "float64", "string", "bytes", "array", "map", None, None]
    src = SchemaBuilder.int32().name("n").version(3).doc("d").parameter("k", "v").optional().build()
    copy = copy_schema_basics(src).build()
    assert (copy.type, copy.name, copy.version, copy.doc, copy.parameters, copy.optional) == (
        INT32, "n", 3, "d", {"k": "v"}, False)
    schema, value = SchemaAndValue(Schema.STRING_SCHEMA, "x")
    assert (schema, value) == (Schema.STRING_SCHEMA, "x")
    assert SchemaAndValue.NULL == SchemaAndValue(None, None)
