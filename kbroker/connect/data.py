"""Connect's data API (Kafka's org.apache.kafka.connect.data): schemas, structs and the logical types.

A ``Schema`` is immutable and compares by value (type, optionality, default, name, version, doc, parameters,
fields / key and value schemas), as Kafka's ConnectSchema. Schema types are the lower-case names the JSON
converter writes: "int8" "int16" "int32" "int64" "float32" "float64" "boolean" "string" "bytes" "array" "map"
"struct" (``Schema.type``); Kafka's messages name them upper-case ("INT32").

Python values per type (what ``validate_value`` accepts; converters produce exactly these):

=============  ===============================================================================================
int8..int64    int (not bool) within the type's two's-complement range
float32/64     float (an int is accepted, as Python's numeric tower)
boolean        bool
string         str
bytes          bytes, bytearray, memoryview
array          list or tuple;  map: dict;  struct: ``Struct`` whose schema equals the field's
Decimal        decimal.Decimal whose scale (digits after the point) equals the schema's "scale" parameter
Date           datetime.date (a datetime is accepted if its time part is midnight); days since 1970-01-01
Time           datetime.time (or a datetime: its time of day); milliseconds since midnight
Timestamp      datetime.datetime (naive = UTC); milliseconds since the epoch (sub-millisecond digits dropped)
=============  ===============================================================================================

Logical types are a primitive schema with a name (``Decimal.LOGICAL_NAME`` ...) and version 1, as Kafka's, so the
JSON converter writes them exactly as Kafka does.
"""
import datetime as _dt
import decimal as _decimal

from kbroker.connect.exceptions import DataError

__all__ = [
    "INT8", "INT16", "INT32", "INT64", "FLOAT32", "FLOAT64", "BOOLEAN", "STRING", "BYTES", "ARRAY", "MAP",
    "STRUCT", "PRIMITIVE_TYPES", "Schema", "SchemaBuilder", "SchemaBuilderError", "Field", "Struct",
    "SchemaAndValue", "Decimal", "Date", "Time", "Timestamp", "validate_value", "infer_schema_type",
    "copy_schema_basics",
]

INT8, INT16, INT32, INT64 = "int8", "int16", "int32", "int64"
FLOAT32, FLOAT64, BOOLEAN, STRING, BYTES = "float32", "float64", "boolean", "string", "bytes"
ARRAY, MAP, STRUCT = "array", "map", "struct"
PRIMITIVE_TYPES = (INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING, BYTES)
_ALL_TYPES = PRIMITIVE_TYPES + (ARRAY, MAP, STRUCT)
# Two's-complement ranges of Java's byte, short, int and long.
INT_RANGES = {INT8: (-2 ** 7, 2 ** 7 - 1), INT16: (-2 ** 15, 2 ** 15 - 1), INT32: (-2 ** 31, 2 ** 31 - 1),
              INT64: (-2 ** 63, 2 ** 63 - 1)}


class SchemaBuilderError(DataError):
    """A SchemaBuilder misuse (Kafka's SchemaBuilderException, a DataException)."""


def _upper(type_):
    return type_.upper()


class Field:
    """A struct field: name, index (position in the struct), schema."""
    __slots__ = ("name", "index", "schema")

    def __init__(self, name, index, schema):
        self.name = name
        self.index = index
        self.schema = schema

    def __eq__(self, other):
        return (isinstance(other, Field) and self.name == other.name and self.index == other.index
                and self.schema == other.schema)

    def __hash__(self):
        return hash((self.name, self.index))

    def __repr__(self):
        return "Field{name=%s, index=%d, schema=%s}" % (self.name, self.index, self.schema)


class Schema:
    """An immutable Connect schema (Kafka's ConnectSchema); build one with ``SchemaBuilder``.

    ``fields`` is a tuple of Field for a struct (empty for a struct without fields) and None otherwise;
    ``key_schema`` is set for maps, ``value_schema`` for arrays and maps; ``parameters`` is a dict or None."""
    __slots__ = ("type", "optional", "default", "name", "version", "doc", "parameters", "fields", "key_schema",
                 "value_schema", "_by_name", "_hash")

    def __init__(self, type, optional=False, default=None, name=None, version=None, doc=None, parameters=None,
                 fields=None, key_schema=None, value_schema=None):
        if type not in _ALL_TYPES:
            raise DataError("Unknown schema type: %r" % (type,))
        self.type = type
        self.optional = optional
        self.default = default
        self.name = name
        self.version = version
        self.doc = doc
        self.parameters = dict(parameters) if parameters is not None else None
        if type == STRUCT:
            self.fields = tuple(fields or ())
            self._by_name = {f.name: f for f in self.fields}
        else:
            self.fields = None
            self._by_name = None
        self.key_schema = key_schema
        self.value_schema = value_schema
        self._hash = None

    def field(self, name):
        """The Field called ``name``, or None; DataError on a non-struct schema (Kafka's message)."""
        if self.type != STRUCT:
            raise DataError("Cannot look up fields on non-struct type")
        return self._by_name.get(name)

    def schema(self):
        return self

    def _key(self):
        return (self.type, self.optional, self.name, self.version, self.doc, self.parameters, self.fields,
                self.key_schema, self.value_schema)

    def __eq__(self, other):
        if self is other:
            return True
        if not isinstance(other, Schema):
            return NotImplemented
        return self._key() == other._key() and _deep_equals(self.default, other.default)

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):
        if self._hash is None:
            self._hash = hash((self.type, self.optional, self.name, self.version, self.fields, self.key_schema,
                               self.value_schema))
        return self._hash

    def __repr__(self):
        # Kafka's ConnectSchema.toString: Schema{name:TYPE} or Schema{TYPE}
        if self.name is not None:
            return "Schema{%s:%s}" % (self.name, _upper(self.type))
        return "Schema{%s}" % _upper(self.type)

    __str__ = __repr__


def _deep_equals(a, b):
    if isinstance(a, (bytes, bytearray, memoryview)) and isinstance(b, (bytes, bytearray, memoryview)):
        return bytes(a) == bytes(b)
    return a == b


class SchemaBuilder:
    """Kafka's fluent SchemaBuilder: ``SchemaBuilder.struct().name("n").field("a", Schema.INT32_SCHEMA).build()``.

    Each property may be set once (a second, different value raises "Invalid SchemaBuilder call: name has already
    been set."); ``default_value`` is validated against the schema being built."""

    def __init__(self, type):
        if type is None:
            raise SchemaBuilderError("type cannot be null")
        if type not in _ALL_TYPES:
            raise SchemaBuilderError("Unknown schema type: %r" % (type,))
        self.type = type
        self._optional = None
        self._default = None
        self._name = None
        self._version = None
        self._doc = None
        self._parameters = None
        self._fields = {} if type == STRUCT else None
        self.key_schema = None
        self.value_schema = None

    # ------------------------------------------------------------------------------------------------ factories
    @classmethod
    def int8(cls):
        return cls(INT8)

    @classmethod
    def int16(cls):
        return cls(INT16)

    @classmethod
    def int32(cls):
        return cls(INT32)

    @classmethod
    def int64(cls):
        return cls(INT64)

    @classmethod
    def float32(cls):
        return cls(FLOAT32)

    @classmethod
    def float64(cls):
        return cls(FLOAT64)

    @classmethod
    def bool(cls):
        return cls(BOOLEAN)

    boolean = bool

    @classmethod
    def string(cls):
        return cls(STRING)

    @classmethod
    def bytes(cls):
        return cls(BYTES)

    @classmethod
    def struct(cls):
        return cls(STRUCT)

    @classmethod
    def array(cls, value_schema):
        if value_schema is None:
            raise SchemaBuilderError("valueSchema cannot be null.")
        b = cls(ARRAY)
        b.value_schema = value_schema
        return b

    @classmethod
    def map(cls, key_schema, value_schema):
        if key_schema is None:
            raise SchemaBuilderError("keySchema cannot be null.")
        if value_schema is None:
            raise SchemaBuilderError("valueSchema cannot be null.")
        b = cls(MAP)
        b.key_schema = key_schema
        b.value_schema = value_schema
        return b

    # ------------------------------------------------------------------------------------------------- setters
    def _check_can_set(self, what, current, value):
        if current is not None and current != value:
            raise SchemaBuilderError("Invalid SchemaBuilder call: %s has already been set." % what)

    def optional(self):
        self._check_can_set("optional", self._optional, True)
        self._optional = True
        return self

    def required(self):
        self._check_can_set("optional", self._optional, False)
        self._optional = False
        return self

    def default_value(self, value):
        self._check_can_set("default", self._default, value)
        try:
            validate_value(self, value)
        except DataError as e:
            raise SchemaBuilderError("Invalid default value: %s" % e) from e
        self._default = value
        return self

    def name(self, name):
        self._check_can_set("name", self._name, name)
        self._name = name
        return self

    def version(self, version):
        self._check_can_set("version", self._version, version)
        self._version = version
        return self

    def doc(self, doc):
        self._check_can_set("doc", self._doc, doc)
        self._doc = doc
        return self

    def parameter(self, key, value):
        if self._parameters is None:
            self._parameters = {}
        self._parameters[key] = value
        return self

    def parameters(self, params):
        if self._parameters is None:
            self._parameters = {}
        self._parameters.update(params)
        return self

    def field(self, name, schema):
        if self.type != STRUCT:
            raise SchemaBuilderError("Cannot create fields on type " + _upper(self.type))
        if name is None:
            raise SchemaBuilderError("fieldName cannot be null.")
        if schema is None:
            raise SchemaBuilderError("fieldSchema for field %s cannot be null." % name)
        if name in self._fields:
            raise SchemaBuilderError("Cannot create field because of field name duplication " + name)
        self._fields[name] = Field(name, len(self._fields), schema)
        return self

    # ------------------------------------------------------------------------- the Schema view (Kafka's builder is one)
    @property
    def fields(self):
        if self.type != STRUCT:
            raise DataError("Cannot list fields on non-struct type")
        return tuple(self._fields.values())

    def get_field(self, name):
        if self.type != STRUCT:
            raise DataError("Cannot look up fields on non-struct type")
        return self._fields.get(name)

    @property
    def is_optional(self):
        return bool(self._optional)

    @property
    def default(self):
        return self._default

    @property
    def schema_name(self):
        return self._name

    def build(self):
        return Schema(self.type, bool(self._optional), self._default, self._name, self._version, self._doc,
                      self._parameters, tuple(self._fields.values()) if self._fields is not None else None,
                      self.key_schema, self.value_schema)

    schema = build


# Kafka's constant schemas (Schema.INT8_SCHEMA, ..., Schema.OPTIONAL_STRING_SCHEMA).
for _t in PRIMITIVE_TYPES:
    _n = {"float32": "FLOAT32", "float64": "FLOAT64"}.get(_t, _t.upper())
    setattr(Schema, _n + "_SCHEMA", Schema(_t))
    setattr(Schema, "OPTIONAL_" + _n + "_SCHEMA", Schema(_t, optional=True))
Schema.BOOLEAN_SCHEMA = Schema(BOOLEAN)
Schema.OPTIONAL_BOOLEAN_SCHEMA = Schema(BOOLEAN, optional=True)
del _t, _n


# -------------------------------------------------------------------------------------------------- logical types
class Decimal:
    """Arbitrary-precision decimal: bytes holding the unscaled value's two's-complement big-endian integer (Java's
    BigInteger.toByteArray: the minimal length, at least 1 byte), scale in the "scale" parameter."""
    LOGICAL_NAME = "org.apache.kafka.connect.data.Decimal"
    SCALE_FIELD = "scale"

    @classmethod
    def builder(cls, scale):
        return SchemaBuilder.bytes().name(cls.LOGICAL_NAME).parameter(cls.SCALE_FIELD, str(scale)).version(1)

    @classmethod
    def schema(cls, scale):
        return cls.builder(scale).build()

    @classmethod
    def scale(cls, schema):
        params = schema.parameters or {}
        text = params.get(cls.SCALE_FIELD)
        if text is None:
            raise DataError("Invalid Decimal schema: scale parameter not found.")
        try:
            return int(text)
        except ValueError:
            raise DataError("Invalid scale parameter found in Decimal schema: %s" % text) from None

    @staticmethod
    def value_scale(value):
        """The scale of a decimal.Decimal as Java's BigDecimal.scale(): digits after the point (may be negative)."""
        return -value.as_tuple().exponent

    @classmethod
    def from_logical(cls, schema, value):
        scale = cls.scale(schema)
        if not value.is_finite():
            raise DataError("Decimal value %s is not finite" % value)
        vscale = cls.value_scale(value)
        if vscale != scale:
            raise DataError("Decimal value has mismatching scale for given Decimal schema. Schema has scale %d, "
                            "value has scale %d." % (scale, vscale))
        sign, digits, _ = value.as_tuple()
        unscaled = int("".join(map(str, digits)))     # exact: no context rounding (scaleb would round at 28 digits)
        return _int_to_bytes(-unscaled if sign else unscaled)

    @classmethod
    def to_logical(cls, schema, data):
        unscaled = int.from_bytes(bytes(data), "big", signed=True) if len(data) else 0
        digits = tuple(int(c) for c in str(abs(unscaled)))
        return _decimal.Decimal((1 if unscaled < 0 else 0, digits, -cls.scale(schema)))


def _int_to_bytes(n):
    """Java's BigInteger.toByteArray: big-endian two's complement, minimal length including a sign bit."""
    length = (n + (n < 0)).bit_length() // 8 + 1
    return n.to_bytes(length, "big", signed=True)


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_EPOCH_DATE = _dt.date(1970, 1, 1)
MILLIS_PER_DAY = 24 * 60 * 60 * 1000


def _utc(value):
    return value.replace(tzinfo=_dt.timezone.utc) if value.tzinfo is None else value


class Date:
    """A calendar date: int32 days since 1970-01-01 (Kafka's Date)."""
    LOGICAL_NAME = "org.apache.kafka.connect.data.Date"

    @classmethod
    def builder(cls):
        return SchemaBuilder.int32().name(cls.LOGICAL_NAME).version(1)

    @classmethod
    def from_logical(cls, schema, value):
        if schema.name != cls.LOGICAL_NAME:
            raise DataError("Requested conversion of Date object but the schema does not match.")
        if isinstance(value, _dt.datetime):
            v = _utc(value).astimezone(_dt.timezone.utc)
            if (v.hour, v.minute, v.second, v.microsecond) != (0, 0, 0, 0):
                raise DataError("Kafka Connect Date type should not have any time fields set to non-zero values.")
            value = v.date()
        return (value - _EPOCH_DATE).days

    @classmethod
    def to_logical(cls, schema, value):
        if schema.name != cls.LOGICAL_NAME:
            raise DataError("Requested conversion of Date object but the schema does not match.")
        try:
            return _EPOCH_DATE + _dt.timedelta(days=value)
        except OverflowError:
            raise DataError("Date value %d (days) is outside the years 1-9999 Python's date supports" % value) from None


class Time:
    """A time of day: int32 milliseconds since midnight (Kafka's Time)."""
    LOGICAL_NAME = "org.apache.kafka.connect.data.Time"

    @classmethod
    def builder(cls):
        return SchemaBuilder.int32().name(cls.LOGICAL_NAME).version(1)

    @classmethod
    def from_logical(cls, schema, value):
        if schema.name != cls.LOGICAL_NAME:
            raise DataError("Requested conversion of Time object but the schema does not match.")
        if isinstance(value, _dt.datetime):
            value = _utc(value).astimezone(_dt.timezone.utc).time()
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000

    @classmethod
    def to_logical(cls, schema, value):
        if schema.name != cls.LOGICAL_NAME:
            raise DataError("Requested conversion of Date object but the schema does not match.")
        if value < 0 or value > MILLIS_PER_DAY:
            raise DataError("Time values must use number of milliseconds greater than 0 and less than 86400000")
        if value == MILLIS_PER_DAY:        # Kafka accepts 86400000 (a java.util.Date of the next day's midnight)
            value = 0
        secs, ms = divmod(value, 1000)
        return _dt.time(secs // 3600, secs // 60 % 60, secs % 60, ms * 1000)


class Timestamp:
    """An instant: int64 milliseconds since the epoch (Kafka's Timestamp)."""
    LOGICAL_NAME = "org.apache.kafka.connect.data.Timestamp"

    @classmethod
    def builder(cls):
        return SchemaBuilder.int64().name(cls.LOGICAL_NAME).version(1)

    @classmethod
    def from_logical(cls, schema, value):
        if schema.name != cls.LOGICAL_NAME:
            raise DataError("Requested conversion of Timestamp object but the schema does not match.")
        delta = _utc(value) - _EPOCH
        return (delta.days * 86400 + delta.seconds) * 1000 + delta.microseconds // 1000

    @classmethod
    def to_logical(cls, schema, value):
        if schema.name != cls.LOGICAL_NAME:
            raise DataError("Requested conversion of Timestamp object but the schema does not match.")
        try:
            return _EPOCH + _dt.timedelta(milliseconds=value)
        except OverflowError:
            raise DataError("Timestamp value %d (ms) is outside the years 1-9999 Python's datetime supports"
                            % value) from None


for _cls in (Decimal, Date, Time, Timestamp):
    if _cls is not Decimal:
        _cls.SCHEMA = _cls.builder().build()
del _cls

LOGICAL_NAMES = (Decimal.LOGICAL_NAME, Date.LOGICAL_NAME, Time.LOGICAL_NAME, Timestamp.LOGICAL_NAME)


# --------------------------------------------------------------------------------------------------- validation
def _schema_name(schema):
    return schema._name if isinstance(schema, SchemaBuilder) else schema.name


def _is_optional(schema):
    return schema.is_optional if isinstance(schema, SchemaBuilder) else schema.optional


def _matches(schema, value):
    """Whether ``value``'s Python type fits ``schema`` (Kafka's expectedClassesFor)."""
    name = _schema_name(schema)
    if name == Decimal.LOGICAL_NAME:
        return isinstance(value, _decimal.Decimal)
    if name == Date.LOGICAL_NAME:
        return isinstance(value, _dt.date)
    if name == Time.LOGICAL_NAME:
        return isinstance(value, (_dt.time, _dt.datetime))
    if name == Timestamp.LOGICAL_NAME:
        return isinstance(value, _dt.datetime)
    t = schema.type
    if t in INT_RANGES:
        return isinstance(value, int) and not isinstance(value, bool)
    if t in (FLOAT32, FLOAT64):
        return isinstance(value, (float, int)) and not isinstance(value, bool)
    if t == BOOLEAN:
        return isinstance(value, bool)
    if t == STRING:
        return isinstance(value, str)
    if t == BYTES:
        return isinstance(value, (bytes, bytearray, memoryview))
    if t == ARRAY:
        return isinstance(value, (list, tuple))
    if t == MAP:
        return isinstance(value, dict)
    return isinstance(value, Struct)


def validate_value(schema, value, field=None):
    """DataError (Kafka's messages) unless ``value`` fits ``schema``; recurses into structs, arrays and maps."""
    _validate(schema, value, "value" if field is None else 'field: "%s"' % field)


def _validate(schema, value, location):
    if value is None:
        if not _is_optional(schema):
            raise DataError("Invalid value: null used for required %s, schema type: %s"
                            % (location, _upper(schema.type)))
        return
    if not _matches(schema, value):
        name = _schema_name(schema)
        raise DataError("Invalid Python object for schema%s with type %s: %s for %s" % (
            ' "%s"' % name if name is not None else "", _upper(schema.type), type(value), location))
    t = schema.type
    if t in INT_RANGES and _schema_name(schema) not in LOGICAL_NAMES:
        lo, hi = INT_RANGES[t]
        if not lo <= value <= hi:
            raise DataError("Invalid value %d for schema with type %s (range %d..%d) for %s"
                            % (value, _upper(t), lo, hi, location))
    elif t == STRUCT:
        target = schema.build() if isinstance(schema, SchemaBuilder) else schema
        if value.schema != target:
            raise DataError("Struct schemas do not match.")
        value.validate()
    elif t == ARRAY:
        where = "element of array " + location
        vs = _assert_schema(schema.value_schema, where)
        for item in value:
            _validate(vs, item, where)
    elif t == MAP:
        kwhere, vwhere = "key of map " + location, "value of map " + location
        ks = _assert_schema(schema.key_schema, kwhere)
        vs = _assert_schema(schema.value_schema, vwhere)
        for k, v in value.items():
            _validate(ks, k, kwhere)
            _validate(vs, v, vwhere)


def _assert_schema(schema, location):
    if schema is None:
        raise DataError("No schema defined for " + location)
    return schema


def infer_schema_type(value):
    """The schema type of a schemaless value (Kafka's ConnectSchema.schemaType(Class)): int -> int64,
    float -> float64, ...; None when there is none (logical values, None, other objects)."""
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, int):
        return INT64
    if isinstance(value, float):
        return FLOAT64
    if isinstance(value, str):
        return STRING
    if isinstance(value, (bytes, bytearray, memoryview)):
        return BYTES
    if isinstance(value, (list, tuple)):
        return ARRAY
    if isinstance(value, dict):
        return MAP
    if isinstance(value, Struct):
        return STRUCT
    return None


# ------------------------------------------------------------------------------------------------------- Struct
class Struct:
    """A record of named fields (Kafka's Struct). ``put`` validates each value against its field's schema;
    ``get`` returns the field's default when the value is None; ``validate`` checks the required fields."""
    __slots__ = ("schema", "_values")

    def __init__(self, schema):
        if isinstance(schema, SchemaBuilder):
            schema = schema.build()
        if schema is None or schema.type != STRUCT:
            raise DataError("Not a struct schema: %s" % (schema,))
        self.schema = schema
        self._values = [None] * len(schema.fields)

    def _lookup(self, name):
        if isinstance(name, Field):
            return name
        field = self.schema.field(name)
        if field is None:
            raise DataError("%s is not a valid field name" % name)
        return field

    def put(self, name, value):
        """Sets a field (by name or Field); returns self so puts chain."""
        field = self._lookup(name)
        validate_value(field.schema, value, field.name)
        self._values[field.index] = value
        return self

    def get(self, name):
        field = self._lookup(name)
        value = self._values[field.index]
        if value is None and field.schema.default is not None:
            return field.schema.default
        return value

    def get_without_default(self, name):
        return self._values[self._lookup(name).index]

    def _get_checked(self, name, type_):
        field = self._lookup(name)
        if field.schema.type != type_:
            raise DataError("Field '%s' is not of type %s" % (field.name, _upper(type_)))
        return self.get(field)

    def get_int8(self, name):
        return self._get_checked(name, INT8)

    def get_int16(self, name):
        return self._get_checked(name, INT16)

    def get_int32(self, name):
        return self._get_checked(name, INT32)

    def get_int64(self, name):
        return self._get_checked(name, INT64)

    def get_float32(self, name):
        return self._get_checked(name, FLOAT32)

    def get_float64(self, name):
        return self._get_checked(name, FLOAT64)

    def get_boolean(self, name):
        return self._get_checked(name, BOOLEAN)

    def get_string(self, name):
        return self._get_checked(name, STRING)

    def get_bytes(self, name):
        return self._get_checked(name, BYTES)

    def get_array(self, name):
        return self._get_checked(name, ARRAY)

    def get_map(self, name):
        return self._get_checked(name, MAP)

    def get_struct(self, name):
        return self._get_checked(name, STRUCT)

    def validate(self):
        """DataError when a required field without a default is None (or a value does not fit)."""
        for field in self.schema.fields:
            value = self._values[field.index]
            if value is None and (field.schema.optional or field.schema.default is not None):
                continue
            validate_value(field.schema, value, field.name)

    def __eq__(self, other):
        return (isinstance(other, Struct) and self.schema == other.schema
                and all(_deep_equals(a, b) for a, b in zip(self._values, other._values)))

    def __hash__(self):
        return hash((self.schema, tuple(bytes(v) if isinstance(v, (bytearray, memoryview)) else v
                                        for v in self._values if not isinstance(v, (list, dict)))))

    def __repr__(self):
        # Kafka's Struct.toString: Struct{a=1,b=x}, null fields left out
        return "Struct{%s}" % ",".join("%s=%s" % (f.name, _show(self._values[f.index]))
                                      for f in self.schema.fields if self._values[f.index] is not None)

    __str__ = __repr__


def _show(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join("%s=%s" % (_show(k), _show(v)) for k, v in value.items()) + "}"
    return str(value)


class SchemaAndValue:
    """A schema (or None) and a value (Kafka's SchemaAndValue); ``SchemaAndValue.NULL`` is (None, None)."""
    __slots__ = ("schema", "value")

    def __init__(self, schema, value):
        self.schema = schema
        self.value = value

    def __iter__(self):
        return iter((self.schema, self.value))

    def __eq__(self, other):
        return (isinstance(other, SchemaAndValue) and self.schema == other.schema
                and _deep_equals(self.value, other.value))

    def __hash__(self):
        return hash(self.schema)

    def __repr__(self):
        return "SchemaAndValue{schema=%s, value=%s}" % (self.schema, self.value)


SchemaAndValue.NULL = SchemaAndValue(None, None)


def copy_schema_basics(source, builder=None):
    """A builder with ``source``'s name, version, doc and parameters (Kafka's SchemaUtil.copySchemaBasics; not
    optionality, default or fields)."""
    if builder is None:
        builder = SchemaBuilder.array(source.value_schema) if source.type == ARRAY else SchemaBuilder(source.type)
        if source.type == MAP:
            builder.key_schema, builder.value_schema = source.key_schema, source.value_schema
    builder.name(source.name)
    builder.version(source.version)
    builder.doc(source.doc)
    if source.parameters is not None:
        builder.parameters(source.parameters)
    return builder
