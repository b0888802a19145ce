"""Converters: Connect data <-> record bytes (Kafka's org.apache.kafka.connect.storage / json / converters).

A ``Converter`` is configured with the worker's or connector's ``key.converter.*`` / ``value.converter.*`` keys
(prefix stripped) and ``is_key``; a ``HeaderConverter`` with ``header.converter.*``. Every converter takes its
options through a ConfigDef, as Kafka's, so a bad value raises ConfigError with Kafka's message.

JsonConverter writes the bytes Kafka's writes (Jackson's compact output), byte for byte:

- envelope ``{"schema":<schema>,"payload":<value>}`` when ``schemas.enable`` (default true); a schema is
  ``{"type":T[,"items":S | "keys":S,"values":S | "fields":[S+{"field":name}...]],"optional":B[,"name":N]
  [,"version":V][,"doc":D][,"parameters":{...}][,"default":X]}`` with T one of boolean int8 int16 int32 int64 float
  (float32) double (float64) bytes string array map struct;
- numbers as Java prints them (float32 with float precision: 0.1f is ``0.1``; doubles ``1.0E10``, ``1.0E-4``
  outside [1e-3, 1e7); the shortest digits, as JDK 19+'s Double.toString -- JDK 17's differs for rare values such
  as 2e23, which it prints 1.9999999999999998E23); non-finite numbers as the strings "NaN", "Infinity"; bytes as
  base64 strings; Decimal as base64 of the unscaled bytes (``decimal.format=BASE64``) or a JSON number
  (``NUMERIC``); Date/Time/Timestamp as their integers; strings escaped as Jackson does (``\\"`` ``\\\\``
  ``\\b\\t\\n\\f\\r``, other controls ``\\u00XX``, characters beyond U+FFFF as their escaped surrogate pair
  ``\\uD83D\\uDE00``, everything else raw UTF-8);
- a null value with no schema is None (a tombstone) either way.

tests/unit/test_connect_converters.py holds bytes captured from Kafka 4.4.0's JsonConverter and checks both
directions against them. Reading is Kafka's too (leading zeros accepted, floats read exactly, trailing content
ignored), with one deliberate difference: a JSON value of the wrong kind for its schema (a string
where the schema says int32) is a DataError here, where Jackson silently reads 0/false/null.
"""
import base64
import binascii
import codecs
import datetime as _dt
import decimal as _decimal
import json
import math
import re
import struct as _struct
import threading
from collections import OrderedDict

from kbroker.connect import configdef as cd
from kbroker.connect.data import (
    ARRAY, BOOLEAN, BYTES, FLOAT32, FLOAT64, INT16, INT32, INT64, INT8, INT_RANGES, MAP, STRING, STRUCT,
    Date, Decimal, Schema, SchemaAndValue, SchemaBuilder, Struct, Time, Timestamp, infer_schema_type)
from kbroker.connect.exceptions import DataError

__all__ = ["Converter", "HeaderConverter", "JsonConverter", "StringConverter", "ByteArrayConverter",
           "IntegerConverter", "LongConverter", "ShortConverter", "FloatConverter", "DoubleConverter",
           "BooleanConverter", "SimpleHeaderConverter", "BUILTIN_CONVERTERS", "BUILTIN_HEADER_CONVERTERS",
           "java_double_str", "java_float_str", "values_to_string", "values_parse_string"]

TYPE_CONFIG = "converter.type"
KEY, VALUE, HEADER = "key", "value", "header"


def _converter_config_def():
    """Kafka's ConverterConfig.newConfigDef(): the required ``converter.type`` (key | value | header)."""
    return cd.ConfigDef().define(TYPE_CONFIG, cd.STRING, cd.NO_DEFAULT, cd.ValidString.in_(KEY, VALUE, HEADER),
                                 cd.LOW, "How this converter will be used.")


class Converter:
    """Kafka's Converter. Subclasses define ``config_def()`` and the two conversions."""
    KAFKA_CLASS = None

    def config_def(self):
        return _converter_config_def()

    def configure(self, configs, is_key):
        conf = dict(configs)
        conf[TYPE_CONFIG] = KEY if is_key else VALUE
        self._configure(conf)

    def _configure(self, conf):
        """``conf`` includes ``converter.type``; parse it with ``config_def()`` (ConfigError on a bad value)."""
        self.config = self.config_def().parse(conf)

    def from_connect_data(self, topic, schema, value):
        raise NotImplementedError

    def to_connect_data(self, topic, data):
        raise NotImplementedError

    def close(self):
        pass


class HeaderConverter:
    """Kafka's HeaderConverter; ``configure`` gets the ``header.converter.*`` keys (prefix stripped)."""
    KAFKA_CLASS = None

    def config_def(self):
        return cd.ConfigDef()

    def configure(self, configs):
        pass

    def from_connect_header(self, topic, key, schema, value):
        raise NotImplementedError

    def to_connect_header(self, topic, key, data):
        raise NotImplementedError

    def close(self):
        pass


class _BothConverter(Converter, HeaderConverter):
    """A converter that is also a header converter (Kafka's String/Json/ByteArray/number converters)."""

    def configure(self, configs, is_key=None):
        conf = dict(configs)
        if is_key is not None:
            conf[TYPE_CONFIG] = KEY if is_key else VALUE
        else:
            conf.setdefault(TYPE_CONFIG, HEADER)
        self._configure(conf)

    def from_connect_header(self, topic, key, schema, value):
        return self.from_connect_data(topic, schema, value)

    def to_connect_header(self, topic, key, data):
        return self.to_connect_data(topic, data)


# ------------------------------------------------------------------------------------------ Java number printing
def _java_format(negative, digits, point):
    """Java's Float/Double.toString layout for the shortest ``digits`` with the decimal point after ``point``
    digits (value = 0.digits * 10**point): plain in [1e-3, 1e7), else d.dddE<n>."""
    sign = "-" if negative else ""
    exp = point - 1                                  # scientific exponent of the leading digit
    if -3 <= exp < 7:
        if point <= 0:
            return sign + "0." + "0" * (-point) + digits
        if point >= len(digits):
            return sign + digits + "0" * (point - len(digits)) + ".0"
        return sign + digits[:point] + "." + digits[point:]
    frac = digits[1:] or "0"
    return "%s%s.%sE%d" % (sign, digits[0], frac, exp)


def _shortest(x, precision_max, roundtrip):
    """The shortest decimal digits of ``x`` that read back to ``x`` (``roundtrip``), as (negative, digits, point)."""
    for p in range(1, precision_max + 1):
        text = "%.*e" % (p - 1, x)
        if roundtrip(float(text)) == x:
            break
    mant, _, e = text.partition("e")
    negative = mant.startswith("-")
    digits = mant.lstrip("-").replace(".", "").rstrip("0") or "0"
    return negative, digits, int(e) + 1


def _nonfinite(x):
    return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")


def java_double_str(x):
    """Java's Double.toString(x) (shortest digits): 1.0, 0.001, 1.0E-4, 1.0E7, 1.2345678E7, -0.0, NaN."""
    if not math.isfinite(x):
        return _nonfinite(x)
    if x == 0:
        return "-0.0" if math.copysign(1, x) < 0 else "0.0"
    return _java_format(*_shortest(x, 17, lambda v: v))


def _to_f32(x):
    """``x`` rounded to the nearest float32 (overflow to +-inf, as Java's (float) cast)."""
    try:
        return _struct.unpack("<f", _struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def java_float_str(x):
    """Java's Float.toString of the float32 nearest ``x``: 0.1 -> "0.1" (not 0.10000000149011612)."""
    x = _to_f32(x)
    if not math.isfinite(x):
        return _nonfinite(x)
    if x == 0:
        return "-0.0" if math.copysign(1, x) < 0 else "0.0"
    return _java_format(*_shortest(x, 9, _to_f32))


# ------------------------------------------------------------------------------------------------- JSON writing
class _F32(float):
    """A float32 payload value (printed with float precision)."""


_ESCAPES = {i: "\\u%04X" % i for i in range(0x20)}
_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\", 0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f",
                 0x0D: "\\r"})


# Jackson (2.x, COMBINE_UNICODE_SURROGATES_IN_UTF8 off by default) writes a character beyond the BMP as its
# escaped UTF-16 surrogate pair: U+1F600 is \uD83D\uDE00, not 4 raw UTF-8 bytes.
_ASTRAL = re.compile("[\U00010000-\U0010FFFF]")


def _surrogates(m):
    cp = ord(m.group()) - 0x10000
    return "\\u%04X\\u%04X" % (0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF))


def _json_str(s):
    s = s.translate(_ESCAPES)
    if not s.isascii() and _ASTRAL.search(s):
        s = _ASTRAL.sub(_surrogates, s)
    return '"' + s + '"'


def _write(node, out):
    """Jackson's compact rendering of a node tree (dicts keep their insertion order)."""
    if node is None:
        out.append("null")
    elif node is True:
        out.append("true")
    elif node is False:
        out.append("false")
    elif isinstance(node, str):
        out.append(_json_str(node))
    elif isinstance(node, int):
        out.append(str(node))
    elif isinstance(node, _F32):
        # Jackson quotes non-finite numbers (WRITE_NAN_AS_STRINGS, on by default)
        out.append(java_float_str(node) if math.isfinite(node) else _json_str(_nonfinite(node)))
    elif isinstance(node, float):
        out.append(java_double_str(node) if math.isfinite(node) else _json_str(_nonfinite(node)))
    elif isinstance(node, _decimal.Decimal):
        out.append(str(node))                 # BigDecimal.toString and Python's str agree (to-sci-string)
    elif isinstance(node, dict):
        out.append("{")
        first = True
        for k, v in node.items():
            if not first:
                out.append(",")
            first = False
            out.append(_json_str(k))
            out.append(":")
            _write(v, out)
        out.append("}")
    elif isinstance(node, list):
        out.append("[")
        for i, v in enumerate(node):
            if i:
                out.append(",")
            _write(v, out)
        out.append("]")
    else:
        raise DataError("Couldn't convert %r to JSON." % (node,))


def _dumps(node):
    out = []
    _write(node, out)
    return "".join(out).encode("utf-8")


# ------------------------------------------------------------------------------------------------- JSON reading
class _Missing:
    """Jackson's MissingNode: what an empty input reads as."""


_MISSING = _Missing()


def _reject_constant(name):
    raise ValueError("Non-standard token '%s'" % name)


# A JSON string (kept as is) or the zeros leading a number's integer part (dropped, keeping the sign).
_LEADING_ZEROS = re.compile(r'("(?:[^"\\]|\\.)*")|(?<![\w.+-])(-?)0+(?=\d)')
_DECODER = json.JSONDecoder(parse_float=_decimal.Decimal, parse_constant=_reject_constant)


def _loads(data):
    """Jackson's ObjectMapper.readTree: the first JSON value (trailing content ignored, as Jackson's default);
    floats as decimal.Decimal (USE_BIG_DECIMAL_FOR_FLOATS); empty input -> _MISSING."""
    try:
        text = bytes(data).decode("utf-8")
        if text.startswith("\ufeff"):
            text = text[1:]
        text = text.lstrip(" \t\r\n")
        if not text:
            return _MISSING
        try:
            return _DECODER.raw_decode(text)[0]
        except ValueError:
            # Kafka's reader enables ALLOW_LEADING_ZEROS_FOR_NUMBERS ("payload": 0012 is 12); Python's does not,
            # so strip them (outside strings) and read again -- only on this slow path.
            fixed = _LEADING_ZEROS.sub(lambda m: m.group(1) or m.group(2), text)
            if fixed == text:
                raise
            return _DECODER.raw_decode(fixed)[0]
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise DataError("Converting byte[] to Kafka Connect data failed due to serialization error: %s" % e) from e


def _node_type(node):
    """Jackson's JsonNodeType name of a parsed node (for Kafka's messages)."""
    if node is None:
        return "NULL"
    if node is _MISSING:
        return "MISSING"
    if isinstance(node, bool):
        return "BOOLEAN"
    if isinstance(node, (int, _decimal.Decimal)):
        return "NUMBER"
    if isinstance(node, str):
        return "STRING"
    if isinstance(node, list):
        return "ARRAY"
    return "OBJECT"


def _wrap(n, type_):
    """Java's narrowing cast of an integer to byte/short/int/long."""
    lo, hi = INT_RANGES[type_]
    span = hi - lo + 1
    return (n - lo) % span + lo


_JSON_TYPE_NAMES = {BOOLEAN: "boolean", INT8: "int8", INT16: "int16", INT32: "int32", INT64: "int64",
                    FLOAT32: "float", FLOAT64: "double", BYTES: "bytes", STRING: "string", ARRAY: "array",
                    MAP: "map", STRUCT: "struct"}
_FROM_JSON_TYPE = {v: k for k, v in _JSON_TYPE_NAMES.items()}


class _LRU:
    """A bounded cache (schemas.cache.size entries): Kafka's SynchronizedCache(LRUCache), so a converter shared
    by several task threads stays consistent."""

    def __init__(self, size):
        self.size = size
        self.data = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key):
        with self.lock:
            try:
                value = self.data[key]
            except (KeyError, TypeError):
                return None
            self.data.move_to_end(key)
            return value

    def put(self, key, value):
        if self.size <= 0:
            return
        with self.lock:
            try:
                self.data[key] = value
            except TypeError:          # an unhashable default inside the schema: not cached
                return
            self.data.move_to_end(key)
            while len(self.data) > self.size:
                self.data.popitem(last=False)


def _freeze(node):
    """A hashable key for a parsed JSON schema node."""
    if isinstance(node, dict):
        return ("{",) + tuple((k, _freeze(v)) for k, v in node.items())
    if isinstance(node, list):
        return ("[",) + tuple(_freeze(v) for v in node)
    return (type(node).__name__, node)


class JsonConverter(_BothConverter):
    """Kafka's JsonConverter (see the module docstring). Keys: ``schemas.enable`` (true), ``schemas.cache.size``
    (1000), ``decimal.format`` (BASE64 | NUMERIC, case-insensitive), ``replace.null.with.default`` (true)."""
    KAFKA_CLASS = "org.apache.kafka.connect.json.JsonConverter"

    def __init__(self):
        self.config = None
        self._configure({TYPE_CONFIG: VALUE})

    def config_def(self):
        return (_converter_config_def()
                .define("schemas.enable", cd.BOOLEAN, True, importance=cd.HIGH,
                        documentation="Include schemas within each of the serialized values and keys.",
                        group="Schemas", order_in_group=0, width="MEDIUM", display_name="Enable Schemas")
                .define("schemas.cache.size", cd.INT, 1000, importance=cd.HIGH,
                        documentation="The maximum number of schemas that can be cached in this converter "
                                      "instance.", group="Schemas", order_in_group=1, width="MEDIUM",
                        display_name="Schema Cache Size")
                .define("decimal.format", cd.STRING, "BASE64", cd.CaseInsensitiveValidString.in_("BASE64", "NUMERIC"),
                        cd.LOW, "Controls which format this converter will serialize decimals in. This value is case "
                                "insensitive and can be either 'BASE64' (default) or 'NUMERIC'",
                        "Serialization", 0, "MEDIUM", "Decimal Format")
                .define("replace.null.with.default", cd.BOOLEAN, True, importance=cd.LOW,
                        documentation="Whether to replace fields that have a default value and that are null to the "
                                      "default value. When set to true, the default value is used, otherwise null "
                                      "is used.", group="Serialization", order_in_group=1, width="MEDIUM",
                        display_name="Replace null with default"))

    def _configure(self, conf):
        super()._configure(conf)
        c = self.config
        self.schemas_enable = c["schemas.enable"]
        self.decimal_numeric = c["decimal.format"].upper() == "NUMERIC"
        self.replace_null_with_default = c["replace.null.with.default"]
        self._to_json_cache = _LRU(c["schemas.cache.size"])
        self._schema_text_cache = _LRU(c["schemas.cache.size"])
        self._to_connect_cache = _LRU(c["schemas.cache.size"])

    # ----------------------------------------------------------------------------------------------- to bytes
    def from_connect_data(self, topic, schema, value):
        if schema is None and value is None:
            return None
        try:
            if self.schemas_enable:
                out = ['{"schema":', self._schema_text(schema), ',"payload":']
                _write(self._to_json(schema, value), out)
                out.append("}")
                return "".join(out).encode("utf-8")
            return _dumps(self._to_json(schema, value))
        except RecursionError as e:
            raise DataError("Converting Kafka Connect data to byte[] failed due to serialization error: %s" % e)

    def _schema_text(self, schema):
        """The schema's rendered JSON, cached with the schema (most records share a handful of schemas)."""
        if schema is None:
            return "null"
        text = self._schema_text_cache.get(schema)
        if text is None:
            out = []
            _write(self.as_json_schema(schema), out)
            text = "".join(out)
            self._schema_text_cache.put(schema, text)
        return text

    def as_json_schema(self, schema):
        """The schema's JSON node (key order as Kafka's asJsonSchema), or None."""
        if schema is None:
            return None
        cached = self._to_json_cache.get(schema)
        if cached is not None:
            return cached
        t = schema.type
        node = {"type": _JSON_TYPE_NAMES[t]}
        if t == ARRAY:
            node["items"] = self.as_json_schema(schema.value_schema)
        elif t == MAP:
            node["keys"] = self.as_json_schema(schema.key_schema)
            node["values"] = self.as_json_schema(schema.value_schema)
        elif t == STRUCT:
            fields = []
            for f in schema.fields:
                fnode = dict(self.as_json_schema(f.schema))
                fnode["field"] = f.name
                fields.append(fnode)
            node["fields"] = fields
        node["optional"] = schema.optional
        if schema.name is not None:
            node["name"] = schema.name
        if schema.version is not None:
            node["version"] = schema.version
        if schema.doc is not None:
            node["doc"] = schema.doc
        if schema.parameters is not None:
            node["parameters"] = dict(schema.parameters)
        if schema.default is not None:
            node["default"] = self._to_json(schema, schema.default)
        self._to_json_cache.put(schema, node)
        return node

    def _to_json(self, schema, value):
        if value is None:
            if schema is None:
                return None
            if schema.default is not None and self.replace_null_with_default:
                return self._to_json(schema, schema.default)
            if schema.optional:
                return None
            raise DataError("Conversion error: null value for field that is required and has no default value")
        if schema is not None and schema.name is not None:
            logical = _LOGICAL_TO_JSON.get(schema.name)
            if logical is not None:
                return logical(self, schema, value)
        if schema is None:
            t = infer_schema_type(value)
            if t is None:
                raise DataError("Python class %s does not have corresponding schema type." % type(value))
        else:
            t = schema.type
        if t in INT_RANGES:
            if isinstance(value, int) and not isinstance(value, bool):
                lo, hi = INT_RANGES[t]
                if lo <= value <= hi:
                    return value
            raise DataError("Invalid type for %s: %s" % (t.upper(), type(value)))
        if t in (FLOAT32, FLOAT64):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return _F32(value) if t == FLOAT32 else float(value)
            raise DataError("Invalid type for %s: %s" % (t.upper(), type(value)))
        if t == BOOLEAN:
            if isinstance(value, bool):
                return value
        elif t == STRING:
            if isinstance(value, str):
                return value
        elif t == BYTES:
            if isinstance(value, (bytes, bytearray, memoryview)):
                return base64.b64encode(bytes(value)).decode("ascii")
            raise DataError("Invalid type for bytes type: %s" % type(value))
        elif t == ARRAY:
            if isinstance(value, (list, tuple)):
                vs = schema.value_schema if schema is not None else None
                return [self._to_json(vs, v) for v in value]
        elif t == MAP:
            if isinstance(value, dict):
                return self._map_to_json(schema, value)
        elif t == STRUCT:
            if isinstance(value, Struct):
                if value.schema != schema:
                    raise DataError("Mismatching schema.")
                return {f.name: self._to_json(f.schema, value.get_without_default(f)) for f in schema.fields}
        raise DataError("Invalid type for %s: %s" % (t.upper() if schema is not None else "unknown schema",
                                                     type(value)))

    def _map_to_json(self, schema, value):
        if schema is None:
            object_mode = all(isinstance(k, str) for k in value)
            ks = vs = None
        else:
            object_mode = schema.key_schema.type == STRING
            ks, vs = schema.key_schema, schema.value_schema
        if object_mode:
            out = {}
            for k, v in value.items():
                key = self._to_json(ks, k)
                out[key if isinstance(key, str) else _as_text(key)] = self._to_json(vs, v)
            return out
        return [[self._to_json(ks, k), self._to_json(vs, v)] for k, v in value.items()]

    # --------------------------------------------------------------------------------------------- from bytes
    def to_connect_data(self, topic, data):
        if data is None:
            return SchemaAndValue.NULL
        node = _loads(data)
        if self.schemas_enable:
            if not (isinstance(node, dict) and len(node) == 2 and "schema" in node and "payload" in node):
                raise DataError('JsonConverter with schemas.enable requires "schema" and "payload" fields and may '
                                'not contain additional fields. If you are trying to deserialize plain JSON data, '
                                'set schemas.enable=false in your converter configuration.')
            schema_node, payload = node["schema"], node["payload"]
        else:
            schema_node, payload = None, node
        try:
            schema = self.as_connect_schema(schema_node)
            return SchemaAndValue(schema, self._to_connect(schema, payload))
        except RecursionError as e:
            raise DataError("Converting byte[] to Kafka Connect data failed: nested too deeply") from e

    def as_connect_schema(self, node):
        """A Schema from its JSON node (Kafka's asConnectSchema), or None for a null node."""
        if node is None:
            return None
        if not isinstance(node, dict):
            raise DataError("Schema must contain 'type' field")
        key = _freeze(node)
        cached = self._to_connect_cache.get(key)
        if cached is not None:
            return cached
        type_name = node.get("type")
        if not isinstance(type_name, str):
            raise DataError("Schema must contain 'type' field")
        t = _FROM_JSON_TYPE.get(type_name)
        if t is None:
            raise DataError("Unknown schema type: " + type_name)
        if t == ARRAY:
            items = node.get("items")
            if items is None:
                raise DataError("Array schema did not specify the element type")
            builder = SchemaBuilder.array(self.as_connect_schema(items))
        elif t == MAP:
            if "keys" not in node:
                raise DataError("Map schema did not specify the key type")
            if "values" not in node:
                raise DataError("Map schema did not specify the value type")
            builder = SchemaBuilder(MAP)
            builder.key_schema = self.as_connect_schema(node["keys"])
            builder.value_schema = self.as_connect_schema(node["values"])
        elif t == STRUCT:
            builder = SchemaBuilder.struct()
            fields = node.get("fields")
            if not isinstance(fields, list):
                raise DataError('Struct schema\'s "fields" argument is not an array.')
            for f in fields:
                fname = f.get("field") if isinstance(f, dict) else None
                if not isinstance(fname, str):
                    raise DataError("Struct schema's field name not specified properly")
                builder.field(fname, self.as_connect_schema(f))
        else:
            builder = SchemaBuilder(t)
        if node.get("optional") is True:
            builder.optional()
        else:
            builder.required()
        if isinstance(node.get("name"), str):
            builder.name(node["name"])
        version = node.get("version")
        if isinstance(version, int) and not isinstance(version, bool):
            builder.version(_wrap(version, INT32))
        if isinstance(node.get("doc"), str):
            builder.doc(node["doc"])
        params = node.get("parameters")
        if isinstance(params, dict):
            for k, v in params.items():
                if not isinstance(v, str):
                    raise DataError("Schema parameters must have string values.")
                builder.parameter(k, v)
        if "default" in node:
            draft = builder.build()          # the schema without its default reads the default value
            builder.default_value(self._to_connect(draft, node["default"]))
        schema = builder.build()
        self._to_connect_cache.put(key, schema)
        return schema

    def _to_connect(self, schema, node):
        if schema is not None:
            t = schema.type
            if node is None or node is _MISSING:
                if schema.default is not None and self.replace_null_with_default:
                    return schema.default
                if schema.optional:
                    return None
                raise DataError("Invalid null value for required %s field" % t.upper())
            if schema.name is not None:
                logical = _LOGICAL_TO_CONNECT.get(schema.name)
                if logical is not None:
                    return logical(schema, node)
        else:
            if node is None or node is _MISSING:
                return None
            if isinstance(node, bool):
                t = BOOLEAN
            elif isinstance(node, int):
                t = INT64
            elif isinstance(node, _decimal.Decimal):
                t = FLOAT64
            elif isinstance(node, str):
                t = STRING
            elif isinstance(node, list):
                t = ARRAY
            else:
                t = MAP
        return _TO_CONNECT[t](self, schema, node)


def _as_text(node):
    """Jackson's JsonNode.asText of a non-string key node."""
    if node is None:
        return "null"
    if isinstance(node, bool):
        return "true" if node else "false"
    if isinstance(node, _F32):
        return java_float_str(node)
    if isinstance(node, float):
        return java_double_str(node)
    return str(node)


def _expect(cond, t, node):
    if not cond:
        raise DataError("Invalid value for %s schema: JSON %s" % (t.upper(), _node_type(node)))


def _is_number(node):
    return isinstance(node, (int, _decimal.Decimal)) and not isinstance(node, bool)


def _int_reader(t):
    def read(conv, schema, node):
        _expect(_is_number(node), t, node)
        return _wrap(int(node), t)       # Jackson's intValue/longValue: truncation, then Java's narrowing cast
    return read


def _float_reader(t):
    def read(conv, schema, node):
        if isinstance(node, str) and node in ("NaN", "Infinity", "-Infinity"):
            value = float(node.replace("Infinity", "inf"))    # what Jackson writes for non-finite numbers
        else:
            _expect(_is_number(node), t, node)
            value = float(node)
        return _to_f32(value) if t == FLOAT32 else value
    return read


def _read_bool(conv, schema, node):
    _expect(isinstance(node, bool), BOOLEAN, node)
    return node


def _read_string(conv, schema, node):
    _expect(isinstance(node, str), STRING, node)
    return node


def _b64(node):
    try:
        return base64.b64decode(node, validate=True)
    except (binascii.Error, ValueError) as e:
        raise DataError("Invalid bytes field") from e


def _read_bytes(conv, schema, node):
    _expect(isinstance(node, str), BYTES, node)
    return _b64(node)


def _read_array(conv, schema, node):
    _expect(isinstance(node, list), ARRAY, node)
    vs = schema.value_schema if schema is not None else None
    return [conv._to_connect(vs, v) for v in node]


def _read_map(conv, schema, node):
    ks = schema.key_schema if schema is not None else None
    vs = schema.value_schema if schema is not None else None
    if schema is None or ks.type == STRING:
        if not isinstance(node, dict):
            raise DataError("Maps with string fields should be encoded as JSON objects, but found "
                            + _node_type(node))
        return {k: conv._to_connect(vs, v) for k, v in node.items()}
    if not isinstance(node, list):
        raise DataError("Maps with non-string fields should be encoded as JSON array of tuples, but found "
                        + _node_type(node))
    out = {}
    for entry in node:
        if not isinstance(entry, list):
            raise DataError("Found invalid map entry instead of array tuple: " + _node_type(entry))
        if len(entry) != 2:
            raise DataError("Found invalid map entry, expected length 2 but found :%d" % len(entry))
        key = conv._to_connect(ks, entry[0])
        try:
            out[key] = conv._to_connect(vs, entry[1])
        except TypeError:
            raise DataError("Map key of type %s is not usable in Python (unhashable)" % ks.type.upper()) from None
    return out


def _read_struct(conv, schema, node):
    if not isinstance(node, dict):
        raise DataError("Structs should be encoded as JSON objects, but found " + _node_type(node))
    result = Struct(schema)
    for f in schema.fields:
        result.put(f, conv._to_connect(f.schema, node.get(f.name)))
    return result


_TO_CONNECT = {BOOLEAN: _read_bool, INT8: _int_reader(INT8), INT16: _int_reader(INT16), INT32: _int_reader(INT32),
               INT64: _int_reader(INT64), FLOAT32: _float_reader(FLOAT32), FLOAT64: _float_reader(FLOAT64),
               BYTES: _read_bytes, STRING: _read_string, ARRAY: _read_array, MAP: _read_map, STRUCT: _read_struct}


# Logical types: to JSON and back (Kafka's LOGICAL_CONVERTERS).
def _decimal_to_json(conv, schema, value):
    if not isinstance(value, _decimal.Decimal):
        raise DataError("Invalid type for Decimal, expected BigDecimal but was %s" % type(value))
    if conv.decimal_numeric:
        return value
    return base64.b64encode(Decimal.from_logical(schema, value)).decode("ascii")


def _decimal_to_connect(schema, node):
    if _is_number(node):
        return _decimal.Decimal(node)
    if isinstance(node, str):
        try:
            return Decimal.to_logical(schema, _b64(node))
        except DataError as e:
            raise DataError("Invalid bytes for Decimal field") from e
    raise DataError("Invalid type for Decimal, underlying representation should be numeric or bytes but was "
                    + _node_type(node))


def _temporal_to_json(cls, accepted):
    def to_json(conv, schema, value):
        if not isinstance(value, accepted):
            raise DataError("Invalid type for %s, expected Date but was %s" % (cls.__name__, type(value)))
        return cls.from_logical(schema, value)
    return to_json


def _is_java_int(node):
    return isinstance(node, int) and not isinstance(node, bool) and -2 ** 31 <= node < 2 ** 31


def _date_to_connect(schema, node):
    if not _is_java_int(node):
        raise DataError("Invalid type for Date, underlying representation should be integer but was "
                        + _node_type(node))
    return Date.to_logical(schema, node)


def _time_to_connect(schema, node):
    if not _is_java_int(node):
        raise DataError("Invalid type for Time, underlying representation should be integer but was "
                        + _node_type(node))
    return Time.to_logical(schema, node)


def _timestamp_to_connect(schema, node):
    if not (isinstance(node, int) and not isinstance(node, bool)):
        raise DataError("Invalid type for Timestamp, underlying representation should be integral but was "
                        + _node_type(node))
    return Timestamp.to_logical(schema, _wrap(node, INT64))


_LOGICAL_TO_JSON = {
    Decimal.LOGICAL_NAME: _decimal_to_json,
    Date.LOGICAL_NAME: _temporal_to_json(Date, _dt.date),
    Time.LOGICAL_NAME: _temporal_to_json(Time, (_dt.time, _dt.datetime)),
    Timestamp.LOGICAL_NAME: _temporal_to_json(Timestamp, _dt.datetime),
}
_LOGICAL_TO_CONNECT = {
    Decimal.LOGICAL_NAME: _decimal_to_connect,
    Date.LOGICAL_NAME: _date_to_connect,
    Time.LOGICAL_NAME: _time_to_connect,
    Timestamp.LOGICAL_NAME: _timestamp_to_connect,
}


# --------------------------------------------------------------------------------------------- StringConverter
def _java_to_string(value):
    """Java's ``value.toString()`` for what StringConverter is given."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double_str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join("null" if v is None else _java_to_string(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join("%s=%s" % (_java_to_string(k), "null" if v is None else _java_to_string(v))
                               for k, v in value.items()) + "}"
    return str(value)


class StringConverter(_BothConverter):
    """Kafka's StringConverter: ``str(value)`` in ``converter.encoding`` (UTF-8); reading gives
    (OPTIONAL_STRING_SCHEMA, text), malformed bytes replaced by U+FFFD as Java's String(bytes, charset).
    ``key.serializer.encoding`` / ``value.serializer.encoding`` (and ``...deserializer.encoding``) override the
    encoding per direction, as Kafka's StringSerializer/StringDeserializer read them."""
    KAFKA_CLASS = "org.apache.kafka.connect.storage.StringConverter"

    def __init__(self):
        self._configure({TYPE_CONFIG: VALUE})

    def config_def(self):
        return _converter_config_def().define(
            "converter.encoding", cd.STRING, "UTF-8", importance=cd.HIGH,
            documentation="The name of the Java character set to use for encoding strings as byte arrays.",
            width="MEDIUM", display_name="Encoding")

    def _configure(self, conf):
        super()._configure(conf)
        encoding = self.config["converter.encoding"]
        kind = self.config[TYPE_CONFIG]
        ser = conf.get("%s.serializer.encoding" % kind) or encoding
        deser = conf.get("%s.deserializer.encoding" % kind) or encoding
        for key, name in (("converter.encoding", ser), ("converter.encoding", deser)):
            try:
                codecs.lookup(name)
            except LookupError:
                raise cd.ConfigError(key, name, "Unsupported encoding") from None
        self.encoding, self.decoding = ser, deser

    def from_connect_data(self, topic, schema, value):
        if value is None:
            return None
        try:
            return _java_to_string(value).encode(self.encoding)
        except UnicodeEncodeError as e:
            raise DataError("Failed to serialize to a string: %s" % e) from e

    def to_connect_data(self, topic, data):
        if data is None:
            return SchemaAndValue(Schema.OPTIONAL_STRING_SCHEMA, None)
        return SchemaAndValue(Schema.OPTIONAL_STRING_SCHEMA, bytes(data).decode(self.decoding, "replace"))


class ByteArrayConverter(_BothConverter):
    """Kafka's ByteArrayConverter: bytes pass through; reading gives (OPTIONAL_BYTES_SCHEMA, bytes)."""
    KAFKA_CLASS = "org.apache.kafka.connect.converters.ByteArrayConverter"

    def from_connect_data(self, topic, schema, value):
        if schema is not None and schema.type != BYTES:
            raise DataError("Invalid schema type for ByteArrayConverter: " + schema.type.upper())
        if value is not None and not isinstance(value, (bytes, bytearray, memoryview)):
            raise DataError("ByteArrayConverter is not compatible with objects of type %s" % type(value))
        return bytes(value) if value is not None else None

    def to_connect_data(self, topic, data):
        return SchemaAndValue(Schema.OPTIONAL_BYTES_SCHEMA, bytes(data) if data is not None else None)


class _NumberConverter(_BothConverter):
    """Kafka's NumberConverter: big-endian fixed-size integers / IEEE floats, as Kafka's serializers."""
    TYPE_NAME = None
    SCHEMA = None
    FORMAT = None

    def from_connect_data(self, topic, schema, value):
        if value is None:
            return None
        accepted = (int, float) if self.FORMAT in (">f", ">d") else int
        try:
            if isinstance(value, bool) or not isinstance(value, accepted):
                raise TypeError
            return _struct.pack(self.FORMAT, value)       # struct.error when out of the type's range
        except (TypeError, _struct.error, OverflowError):
            raise DataError("Failed to serialize to %s (was %s): " % (self.TYPE_NAME, type(value))) from None

    def to_connect_data(self, topic, data):
        if data is None:
            return SchemaAndValue(self.SCHEMA, None)
        size = _struct.calcsize(self.FORMAT)
        if len(data) != size:
            raise DataError("Failed to deserialize %s: Size of data received by %sDeserializer is not %d"
                            % (self.TYPE_NAME, self.DESERIALIZER, size))
        return SchemaAndValue(self.SCHEMA, _struct.unpack(self.FORMAT, bytes(data))[0])


class IntegerConverter(_NumberConverter):
    KAFKA_CLASS = "org.apache.kafka.connect.converters.IntegerConverter"
    TYPE_NAME, SCHEMA, FORMAT, DESERIALIZER = "integer", Schema.OPTIONAL_INT32_SCHEMA, ">i", "Integer"


class LongConverter(_NumberConverter):
    KAFKA_CLASS = "org.apache.kafka.connect.converters.LongConverter"
    TYPE_NAME, SCHEMA, FORMAT, DESERIALIZER = "long", Schema.OPTIONAL_INT64_SCHEMA, ">q", "Long"


class ShortConverter(_NumberConverter):
    KAFKA_CLASS = "org.apache.kafka.connect.converters.ShortConverter"
    TYPE_NAME, SCHEMA, FORMAT, DESERIALIZER = "short", Schema.OPTIONAL_INT16_SCHEMA, ">h", "Short"


class FloatConverter(_NumberConverter):
    KAFKA_CLASS = "org.apache.kafka.connect.converters.FloatConverter"
    TYPE_NAME, SCHEMA, FORMAT, DESERIALIZER = "float", Schema.OPTIONAL_FLOAT32_SCHEMA, ">f", "Float"


class DoubleConverter(_NumberConverter):
    KAFKA_CLASS = "org.apache.kafka.connect.converters.DoubleConverter"
    TYPE_NAME, SCHEMA, FORMAT, DESERIALIZER = "double", Schema.OPTIONAL_FLOAT64_SCHEMA, ">d", "Double"


class BooleanConverter(_BothConverter):
    """Kafka's BooleanConverter: one byte, 0x01 true / 0x00 false."""
    KAFKA_CLASS = "org.apache.kafka.connect.converters.BooleanConverter"

    def from_connect_data(self, topic, schema, value):
        if schema is not None and schema.type != BOOLEAN:
            raise DataError("Invalid schema type for BooleanConverter: " + schema.type.upper())
        if value is None:
            return None
        if not isinstance(value, bool):
            raise DataError("BooleanConverter is not compatible with objects of type %s" % type(value))
        return b"\x01" if value else b"\x00"

    def to_connect_data(self, topic, data):
        if data is None:
            return SchemaAndValue(Schema.OPTIONAL_BOOLEAN_SCHEMA, None)
        if len(data) != 1:
            raise DataError("Failed to deserialize boolean: Size of data received by BooleanDeserializer is not 1")
        if data[0] not in (0, 1):
            raise DataError("Failed to deserialize boolean: Unexpected byte received by BooleanDeserializer: %d"
                            % data[0])
        return SchemaAndValue(Schema.OPTIONAL_BOOLEAN_SCHEMA, data[0] == 1)


# ------------------------------------------------------------------------------------- SimpleHeaderConverter
def values_to_string(schema, value):
    """Kafka's Values.convertToString: top-level strings raw, nested ones quoted with \\\\ and \\" escaped;
    bytes as base64; lists [a,b]; maps and structs {k:v}; dates yyyy-MM-dd, times HH:mm:ss.SSSZ, timestamps
    yyyy-MM-ddTHH:mm:ss.SSSZ (UTC). None stays None."""
    if value is None:
        return None
    out = []
    _append(out, value, False)
    return "".join(out)


def _append(out, value, embedded):
    if value is None:
        out.append("null")
    elif isinstance(value, bool):
        out.append("true" if value else "false")
    elif isinstance(value, (int, _decimal.Decimal)):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(java_double_str(value))
    elif isinstance(value, str):
        out.append('"%s"' % value.replace("\\", "\\\\").replace('"', '\\"') if embedded else value)
    elif isinstance(value, (bytes, bytearray, memoryview)):
        text = base64.b64encode(bytes(value)).decode("ascii")
        out.append('"%s"' % text if embedded else text)
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, v in enumerate(value):
            if i:
                out.append(",")
            _append(out, v, True)
        out.append("]")
    elif isinstance(value, dict):
        out.append("{")
        for i, (k, v) in enumerate(value.items()):
            if i:
                out.append(",")
            _append(out, k, True)
            out.append(":")
            _append(out, v, True)
        out.append("}")
    elif isinstance(value, Struct):
        out.append("{")
        for i, f in enumerate(value.schema.fields):
            if i:
                out.append(",")
            _append(out, f.name, True)
            out.append(":")
            _append(out, value.get(f), True)
        out.append("}")
    elif isinstance(value, (_dt.date, _dt.time)):
        out.append(java_date_text(value))
    else:
        raise DataError("Failed to serialize unexpected value type %s: %s" % (type(value).__qualname__, value))


def java_date_text(value):
    """A date, time or datetime as Kafka's Values.dateFormatFor prints the java.util.Date holding it (UTC):
    milliseconds since the epoch below one day -> "HH:mm:ss.SSSZ" (so a Time, and also 1970-01-01 and any
    instant before it, as Java does), a whole number of days -> "yyyy-MM-dd", else "yyyy-MM-ddTHH:mm:ss.SSSZ"."""
    if isinstance(value, _dt.datetime):
        ms = Timestamp.from_logical(Timestamp.SCHEMA, value)
    elif isinstance(value, _dt.date):
        ms = Date.from_logical(Date.SCHEMA, value) * 86400000
    else:
        ms = Time.from_logical(Time.SCHEMA, value)
    t = Timestamp.to_logical(Timestamp.SCHEMA, ms)
    millis = "%03dZ" % (t.microsecond // 1000)
    if ms < 86400000:
        return t.strftime("%H:%M:%S.") + millis
    if ms % 86400000 == 0:
        return "%04d-%02d-%02d" % (t.year, t.month, t.day)
    return "%04d-%02d-%02dT" % (t.year, t.month, t.day) + t.strftime("%H:%M:%S.") + millis


# ------------------------------------------------------------------------------ header values (Kafka's Values)
_DELIMITERS = frozenset(':,{}[]"')
_BIG_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\Z")
_TEMPORAL_LENGTHS = {13: "time", 24: "timestamp", 10: "date"}     # Kafka picks the format by the text's length
_TEMPORAL_RES = {
    "date": re.compile(r"([+-]?\d+)-([+-]?\d+)-([+-]?\d+)"),
    "time": re.compile(r"([+-]?\d+):([+-]?\d+):([+-]?\d+)\.([+-]?\d+)Z"),
    "timestamp": re.compile(r"([+-]?\d+)-([+-]?\d+)-([+-]?\d+)T([+-]?\d+):([+-]?\d+):([+-]?\d+)\.([+-]?\d+)Z"),
}


def _lenient_millis(y, mo, d, h=0, mi=0, s=0, ms=0):
    """Epoch milliseconds of a lenient (java.text.SimpleDateFormat default) UTC date: fields roll over
    (2020-02-30 is 2020-03-01)."""
    yy, mm = divmod((y - 1970) * 12 + mo - 1, 12)
    start = _dt.date(1970 + yy, mm + 1, 1)
    days = (start - _dt.date(1970, 1, 1)).days + d - 1
    return ((days * 24 + h) * 60 + mi) * 60000 + s * 1000 + ms


def _parse_temporal(token):
    """Kafka's parseAsTemporal: a Time, Timestamp or Date when the token has that format's length and its start
    parses with it (leniently); None otherwise."""
    token = token.replace("\\:", ":")
    kind = _TEMPORAL_LENGTHS.get(len(token))
    if kind is None:
        return None
    m = _TEMPORAL_RES[kind].match(token)
    if m is None:
        return None
    f = [int(g) for g in m.groups()]
    try:
        if kind == "date":
            ms = _lenient_millis(*f)
            return SchemaAndValue(Date.SCHEMA, Date.to_logical(Date.SCHEMA, ms // 86400000))
        if kind == "time":
            ms = _lenient_millis(1970, 1, 1, *f)
            return SchemaAndValue(Time.SCHEMA, Timestamp.to_logical(Timestamp.SCHEMA, ms).time())
        return SchemaAndValue(Timestamp.SCHEMA, Timestamp.to_logical(Timestamp.SCHEMA, _lenient_millis(*f)))
    except (ValueError, OverflowError, DataError):
        return None


def _parse_number(token):
    """Kafka's parseAsNumber: an integral value in the smallest of int8..int64, else float32 (float64 when
    float32 overflows) for a number with a fraction, else an exact Decimal; None when not a number."""
    if not _BIG_DECIMAL.match(token):
        return None
    d = _decimal.Decimal(token)
    exponent = d.as_tuple().exponent
    if d == d.to_integral_value() and -2 ** 63 <= d < 2 ** 63:
        n = int(d)
        for t, schema in ((INT8, Schema.INT8_SCHEMA), (INT16, Schema.INT16_SCHEMA), (INT32, Schema.INT32_SCHEMA),
                          (INT64, Schema.INT64_SCHEMA)):
            lo, hi = INT_RANGES[t]
            if lo <= n <= hi:
                return SchemaAndValue(schema, n)
    f = float(d)
    if exponent != 0 and math.isfinite(_to_f32(f)):
        return SchemaAndValue(Schema.FLOAT32_SCHEMA, _to_f32(f))
    if exponent != 0 and math.isfinite(f):
        return SchemaAndValue(Schema.FLOAT64_SCHEMA, f)
    return SchemaAndValue(Decimal.schema(Decimal.value_scale(d)), d)


def _tokens(text):
    """Kafka's Values.Parser tokens: each unescaped delimiter (: , { } [ ] ") alone, the runs between them whole
    (whitespace included); a backslash escapes the next character."""
    out, start, escaped = [], 0, False
    for i, c in enumerate(text):
        if c == "\\":
            escaped = not escaped
            continue
        if c in _DELIMITERS and not escaped:
            if start < i:
                out.append(text[start:i])
            out.append(c)
            start = i + 1
        escaped = False
    if start < len(text):
        out.append(text[start:])
    return out


def _merge_schemas(previous, new):
    """Kafka's Values.mergeSchemas: the numeric widening of two schemas, or None when they have none."""
    order = (INT8, INT16, INT32, INT64, FLOAT32, FLOAT64)
    if previous.type != new.type:
        if previous.type in order and new.type in order:
            return new if order.index(new.type) > order.index(previous.type) else previous
        return None
    if previous.optional == new.optional:
        return previous if previous.optional else new
    return previous if previous == new else None


class _Merger:
    def __init__(self):
        self.common = None
        self.compatible = True

    def merge(self, sv):
        if sv is not None and sv.schema is not None and self.compatible:
            self.common = sv.schema if self.common is None else _merge_schemas(self.common, sv.schema)
            self.compatible = self.common is not None


def _align(schema, value):
    """Kafka's Values.convertTo for the elements of a parsed array/map: numbers to the common numeric type; a null
    under a required schema is a DataError (the text then stays a STRING)."""
    if value is None:
        if schema.optional:
            return None
        raise DataError("Unable to convert a null value to a schema that requires a value")
    if schema.name is None:
        if schema.type in (FLOAT32, FLOAT64) and isinstance(value, (int, float, _decimal.Decimal)) \
                and not isinstance(value, bool):
            return _to_f32(float(value)) if schema.type == FLOAT32 else float(value)
        if schema.type in INT_RANGES and isinstance(value, (int, float)) and not isinstance(value, bool):
            return _wrap(int(value), schema.type)
    return value


class _ValueParser:
    """Kafka's Values.ValueParser over ``_tokens``: what SimpleHeaderConverter reads header text as."""

    def __init__(self, text):
        self.text = text
        self.toks = _tokens(text)
        self.pos = 0

    def has_next(self):
        return self.pos < len(self.toks)

    def next(self):
        tok = self.toks[self.pos]
        self.pos += 1
        return tok

    def can_consume(self, expected):
        """The next non-blank token (trimmed) is ``expected``: consume through it."""
        p = self.pos
        while p < len(self.toks) and not self.toks[p].strip() and p + 1 < len(self.toks):
            p += 1
        if p < len(self.toks) and self.toks[p].strip() == expected:
            self.pos = p + 1
            return True
        return False

    def _literal(self, embedded, literal):
        mark = self.pos
        if self.can_consume(literal) and (embedded or not self.has_next()):
            return True
        self.pos = mark
        return False

    def parse(self, embedded):
        if not self.has_next():
            return None
        if embedded and self.can_consume('"'):
            return self.quoted()
        if self._literal(embedded, "null"):
            return None
        if self._literal(embedded, "true"):
            return SchemaAndValue(Schema.BOOLEAN_SCHEMA, True)
        if self._literal(embedded, "false"):
            return SchemaAndValue(Schema.BOOLEAN_SCHEMA, False)
        mark = self.pos
        try:
            if self.can_consume("["):
                return self.array()
            if self.can_consume("{"):
                return self.map()
        except DataError:
            self.pos = mark
        token = self.next()
        if not token.strip():
            return SchemaAndValue(Schema.STRING_SCHEMA, token)
        return self.next_token(embedded, token.strip())

    def next_token(self, embedded, token):
        first = token[0]
        if first.isdigit():
            mark = self.pos
            if self.pos + 4 <= len(self.toks):
                sv = _parse_temporal(token + "".join(self.toks[self.pos:self.pos + 4]))
                if sv is not None:
                    self.pos += 4
                    return sv
            self.pos = mark
            sv = _parse_temporal(token)
            if sv is not None:
                return sv
        if first.isdigit() or first in "+-":
            sv = _parse_number(token)
            if sv is not None:
                return sv
        if embedded:
            raise DataError("Failed to parse embedded value")
        return SchemaAndValue(Schema.STRING_SCHEMA, self.text)

    def quoted(self):
        parts = []
        while self.has_next():
            if self.can_consume('"'):
                break
            parts.append(self.next())
        content = "".join(parts)
        return _parse_temporal(content) or SchemaAndValue(Schema.STRING_SCHEMA, content)

    def array(self):
        items, merger = [], _Merger()
        while self.has_next():
            if self.can_consume("]"):
                if merger.common is None:
                    return SchemaAndValue(SchemaBuilder(ARRAY).build(), items)
                schema = SchemaBuilder.array(merger.common).build()
                return SchemaAndValue(schema, [_align(merger.common, v) for v in items])
            if self.can_consume(","):
                raise DataError("Unable to parse an empty array element: " + self.text)
            sv = self.parse(True)
            merger.merge(sv)
            items.append(sv.value if sv is not None else None)
            mark = self.pos
            if self.can_consume("]"):
                self.pos = mark
            elif not self.can_consume(","):
                raise DataError("Array elements missing ',' delimiter")
        raise DataError("Array is missing terminating ']': " + self.text)

    def map(self):
        out, keys, values = {}, _Merger(), _Merger()
        while self.has_next():
            if self.can_consume("}"):
                ks, vs = keys.common, values.common
                b = SchemaBuilder(MAP)
                if ks is not None and vs is not None:
                    b.key_schema, b.value_schema = ks, vs
                    out = {_align(ks, k): _align(vs, v) for k, v in out.items()}
                elif ks is not None:
                    b.key_schema, b.value_schema = ks, None
                    out = {_align(ks, k): v for k, v in out.items()}
                return SchemaAndValue(b.build(), out)
            if self.can_consume(","):
                raise DataError("Unable to parse a map entry with no key or value: " + self.text)
            key = self.parse(True)
            if key is None or key.value is None:
                raise DataError("Map entry may not have a null key: " + self.text)
            if not self.can_consume(":"):
                raise DataError("Map entry is missing ':' in " + self.text)
            value = self.parse(True)
            try:
                out[key.value] = value.value if value is not None else None
            except TypeError:
                raise DataError("Map key is not hashable: " + self.text) from None
            self.can_consume(",")
            keys.merge(key)
            values.merge(value)
        raise DataError("Map is missing terminating '}': " + self.text)


def values_parse_string(text):
    """Kafka's Values.parseString (what SimpleHeaderConverter reads header text as): "" -> STRING; null; true /
    false; an integer in the smallest of int8..int64, a fractional number as float32 (float64, then an exact
    Decimal, when it does not fit); Kafka's ISO date (yyyy-MM-dd), time (HH:mm:ss.SSSZ) and timestamp forms
    (chosen by length, parsed leniently: 2020-02-30 is March 1st); [..] arrays and {..} maps of those with their
    common schema; anything else is the STRING it was. A leading number ends at the first delimiter, as Kafka's
    tokenizer does ("1,2" reads as the int8 1)."""
    if text is None:
        return SchemaAndValue.NULL
    if text == "":
        return SchemaAndValue(Schema.STRING_SCHEMA, text)
    try:
        sv = _ValueParser(text).parse(False)
    except RecursionError:
        return SchemaAndValue(Schema.STRING_SCHEMA, text)
    return sv if sv is not None else SchemaAndValue.NULL


class SimpleHeaderConverter(HeaderConverter):
    """Kafka's default header converter: values as their ``Values.convertToString`` UTF-8 text; reading infers
    the schema from the text (``values_parse_string``); bytes that are not UTF-8 stay BYTES."""
    KAFKA_CLASS = "org.apache.kafka.connect.storage.SimpleHeaderConverter"

    def from_connect_header(self, topic, key, schema, value):
        if value is None:
            return None
        return values_to_string(schema, value).encode("utf-8")

    def to_connect_header(self, topic, key, data):
        if data is None:
            return SchemaAndValue.NULL
        try:
            return values_parse_string(bytes(data).decode("utf-8"))
        except (UnicodeDecodeError, DataError):
            return SchemaAndValue(Schema.BYTES_SCHEMA, bytes(data))


BUILTIN_CONVERTERS = {c.KAFKA_CLASS: c for c in (
    JsonConverter, StringConverter, ByteArrayConverter, IntegerConverter, LongConverter, ShortConverter,
    FloatConverter, DoubleConverter, BooleanConverter)}
BUILTIN_HEADER_CONVERTERS = dict(BUILTIN_CONVERTERS)
BUILTIN_HEADER_CONVERTERS[SimpleHeaderConverter.KAFKA_CLASS] = SimpleHeaderConverter
