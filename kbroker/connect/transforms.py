"""Single message transforms (Kafka's org.apache.kafka.connect.transforms) and predicates (KIP-585).

A connector's ``transforms=a,b`` applies ``transforms.a.type`` then ``transforms.b.type`` to every record; each
transform is configured with its ``transforms.<alias>.*`` keys, prefix stripped and ``type`` removed (the worker
does that, kbroker/connect/connector_config.py), through its ``config_def()``: a bad or missing key raises
ConfigError with Kafka's message. ``apply`` returns a new record (``record.new_record``), the record itself when
nothing changes, or None to drop it (Filter).

Every transform handles both shapes of data, as Kafka's: schemaless (key/value a dict, schema None) and schema'd
(a ``Struct`` with its struct ``Schema``); updated schemas are cached per input schema (16 entries, as Kafka's
LRUCache(16)). Transforms on a key or a value come in pairs named as Kafka's classes, ``InsertField$Key`` and
``InsertField$Value`` (``InsertField.Key`` / ``InsertField.Value`` here).

Predicates: ``transforms.<alias>.predicate=<name>`` (+ ``negate``) applies the transform only to the records
the predicate ``predicates.<name>.type`` matches (or does not); ``Predicated`` wraps a transform with one.
Headers here are the record's raw ``(key, bytes | None)`` pairs (kbroker/connect/records.py): InsertHeader writes
its literal as UTF-8, which is what Kafka's SimpleHeaderConverter writes for it.
"""
import base64
import datetime as _dt
import decimal as _decimal
import logging
import re
import threading
from collections import OrderedDict

from kbroker.connect import configdef as cd
from kbroker.connect.data import (
    ARRAY, BOOLEAN, BYTES, FLOAT32, FLOAT64, INT8, INT16, INT32, INT64, INT_RANGES, MAP, STRING, STRUCT, Date,
    Schema, SchemaBuilder, Struct, Time, Timestamp, copy_schema_basics, infer_schema_type)
from kbroker.connect.exceptions import ConfigError, ConnectError, DataError
from kbroker.connect.records import SinkRecord

log = logging.getLogger(__name__)

__all__ = ["Transformation", "Predicate", "Predicated", "InsertField", "ReplaceField", "MaskField", "ValueToKey",
           "ExtractField", "HoistField", "Cast", "Flatten", "TimestampConverter", "SetSchemaMetadata",
           "RegexRouter", "TimestampRouter", "Filter", "InsertHeader", "DropHeaders", "HeaderFrom", "TopicNameMatches",
           "HasHeaderKey", "RecordIsTombstone", "BUILTIN_TRANSFORMS", "BUILTIN_PREDICATES", "java_regex",
           "java_replacement", "simple_date_format", "simple_date_parser"]

_REPLACE_NULL_DOC = ("Whether to replace fields that have a default value and that are null to the default value. "
                     "When set to true, the default value is used, otherwise null is used.")
_SCHEMA_CACHE_SIZE = 16


class _Cache:
    """Kafka's SynchronizedCache(LRUCache(16)) of updated schemas, keyed by the input schema."""

    def __init__(self, size=_SCHEMA_CACHE_SIZE):
        self.size = size
        self.data = OrderedDict()
        self.lock = threading.Lock()

    def get_or_make(self, key, make):
        with self.lock:
            try:
                value = self.data[key]
                self.data.move_to_end(key)
                return value
            except KeyError:
                pass
        value = make(key)            # outside the lock: it may raise (a DataError for the record)
        with self.lock:
            self.data[key] = value
            if len(self.data) > self.size:
                self.data.popitem(last=False)
        return value


def _class_name(value):
    return "null" if value is None else type(value).__qualname__


def require_map(value, purpose):
    if not isinstance(value, dict):
        raise DataError("Only Map objects supported in absence of schema for [%s], found: %s"
                        % (purpose, _class_name(value)))
    return value


def require_struct(value, purpose):
    if not isinstance(value, Struct):
        raise DataError("Only Struct objects supported for [%s], found: %s" % (purpose, _class_name(value)))
    return value


def require_schema(schema, purpose):
    if schema is None:
        raise DataError("Schema required for [%s]" % purpose)


def require_sink_record(record, purpose):
    if not isinstance(record, SinkRecord):
        raise DataError("Only SinkRecord supported for [%s], found: %s" % (purpose, _class_name(record)))
    return record


class NonEmptyListValidator:
    """Kafka's NonEmptyListValidator ("Empty list")."""

    def ensure_valid(self, name, value):
        if not value:
            raise ConfigError(name, cd.java_str(value), "Empty list")

    def __str__(self):
        return "non-empty list"


# ---------------------------------------------------------------------------------------- Java regex, dates
# Java's POSIX and java.lang.Character classes (\p{Name}) as Python class bodies (ASCII, as Java's defaults).
_JAVA_CLASSES = {
    "Lower": "a-z", "Upper": "A-Z", "ASCII": "\\x00-\\x7F", "Alpha": "a-zA-Z", "Digit": "0-9",
    "Alnum": "a-zA-Z0-9", "Punct": "!-/:-@\\[-`{-~", "Graph": "!-~", "Print": " -~", "Blank": " \\t",
    "Cntrl": "\\x00-\\x1F\\x7F", "XDigit": "0-9a-fA-F", "Space": " \\t\\n\\x0B\\f\\r",
    "L": "^\\W\\d_", "IsAlphabetic": "^\\W\\d_", "IsDigit": "\\d", "IsLetter": "^\\W\\d_",
}


def _java_regex_source(pattern):
    """Java regex syntax Python's re lacks, translated: named groups ``(?<n>..)`` -> ``(?P<n>..)``, quoting
    ``\\Q...\\E`` -> escaped text, ``\\p{Name}`` / ``\\P{Name}`` POSIX classes -> character classes (inside or
    outside brackets). Possessive quantifiers and atomic groups are native in Python 3.11."""
    out, i, n, in_class = [], 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if nxt == "Q":
                end = pattern.find("\\E", i + 2)
                text = pattern[i + 2:] if end < 0 else pattern[i + 2:end]
                out.append(re.escape(text))
                i = n if end < 0 else end + 2
                continue
            if nxt in "pP" and i + 2 < n:
                if pattern[i + 2] == "{":
                    end = pattern.find("}", i + 3)
                    name = pattern[i + 3:end] if end > 0 else ""
                    size = end + 1 - i if end > 0 else 2
                else:
                    name, size = pattern[i + 2], 3
                name = name[2:] if name.startswith("Is") and name[2:] in _JAVA_CLASSES else name
                body = _JAVA_CLASSES.get(name)
                if body is None:
                    raise re.error("Unknown character property name {%s}" % name)
                negate = nxt == "P"
                if in_class:
                    if negate or body.startswith("^"):
                        raise re.error("negated class \\P{%s} inside [...] is not supported" % name)
                    out.append(body)
                elif body.startswith("^"):            # a negated body: \P{L} is its complement
                    out.append("[%s]" % (body[1:] if negate else body))
                else:
                    out.append("[%s%s]" % ("^" if negate else "", body))
                i += size
                continue
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
        elif c == "[":
            in_class = True
            out.append(c)
            i += 1
            if i < n and pattern[i] == "^":
                out.append("^")
                i += 1
            if i < n and pattern[i] == "]":          # a leading ] is a literal in both dialects
                out.append("\\]")
                i += 1
            continue
        elif pattern.startswith("(?<", i) and i + 3 < n and pattern[i + 3] not in "=!":
            out.append("(?P<")
            i += 3
            continue
        out.append(c)
        i += 1
    return "".join(out)


def java_regex(pattern):
    """A compiled Python regex for a Java regex (see _java_regex_source); re.error when it is not valid."""
    return re.compile(_java_regex_source(pattern))


class RegexValidator:
    """Kafka's RegexValidator ("Invalid regex: ...")."""

    def ensure_valid(self, name, value):
        try:
            java_regex(value)
        except (re.error, TypeError) as e:
            raise ConfigError(name, value, "Invalid regex: %s" % e) from None

    def __str__(self):
        return "valid regex"


def java_replacement(replacement):
    """A Java Matcher replacement (``$1``, ``${name}``, ``\\$`` escapes) as a Python ``re`` template."""
    out = []
    i, n = 0, len(replacement)
    while i < n:
        c = replacement[i]
        if c == "\\":
            if i + 1 >= n:
                raise ValueError("character to be escaped is missing")
            nxt = replacement[i + 1]
            out.append("\\\\" if nxt == "\\" else nxt)
            i += 2
        elif c == "$":
            if i + 1 < n and replacement[i + 1] == "{":
                end = replacement.find("}", i + 2)
                if end < 0:
                    raise ValueError("named capturing group is missing trailing '}'")
                out.append("\\g<%s>" % replacement[i + 2:end])
                i = end + 1
            else:
                j = i + 1
                while j < n and replacement[j].isdigit():
                    j += 1
                if j == i + 1:
                    raise ValueError("Illegal group reference")
                out.append("\\g<%s>" % replacement[i + 1:j])
                i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December"]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def _sdf_field(letter, count, t):
    if letter == "y":
        return "%02d" % (t.year % 100) if count == 2 else "%0*d" % (count, t.year)
    if letter == "M":
        if count >= 4:
            return _MONTHS[t.month - 1]
        if count == 3:
            return _MONTHS[t.month - 1][:3]
        return "%0*d" % (count, t.month)
    if letter == "d":
        return "%0*d" % (count, t.day)
    if letter == "D":
        return "%0*d" % (count, t.timetuple().tm_yday)
    if letter == "H":
        return "%0*d" % (count, t.hour)
    if letter == "k":
        return "%0*d" % (count, t.hour or 24)
    if letter == "K":
        return "%0*d" % (count, t.hour % 12)
    if letter == "h":
        return "%0*d" % (count, t.hour % 12 or 12)
    if letter == "m":
        return "%0*d" % (count, t.minute)
    if letter == "s":
        return "%0*d" % (count, t.second)
    if letter == "S":
        return "%0*d" % (count, t.microsecond // 1000)
    if letter == "E":
        return _DAYS[t.weekday()] if count >= 4 else _DAYS[t.weekday()][:3]
    if letter == "u":
        return "%0*d" % (count, t.isoweekday())
    if letter == "a":
        return "AM" if t.hour < 12 else "PM"
    if letter == "Z":
        return "+0000"
    if letter == "X":
        return "Z"
    if letter == "z":
        return "UTC"
    if letter == "G":
        return "AD"
    raise ValueError("Illegal pattern character '%s'" % letter)


def simple_date_format(pattern):
    """A function formatting an aware UTC datetime with a java.text.SimpleDateFormat pattern (letters yMdDHkKhmsS
    EuaZXzG; 'quoted' literal text, '' a quote). ValueError for other pattern letters, as Java's constructor."""
    parts = []                       # literal str or (letter, count)
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "'":
            if i + 1 < n and pattern[i + 1] == "'":
                parts.append("'")
                i += 2
                continue
            end = i + 1
            text = []
            while end < n:
                if pattern[end] == "'":
                    if end + 1 < n and pattern[end + 1] == "'":
                        text.append("'")
                        end += 2
                        continue
                    break
                text.append(pattern[end])
                end += 1
            if end >= n:
                raise ValueError("Unterminated quote")
            parts.append("".join(text))
            i = end + 1
        elif c.isascii() and c.isalpha():
            j = i
            while j < n and pattern[j] == c:
                j += 1
            parts.append((c, j - i))
            _sdf_field(c, j - i, _dt.datetime(2000, 1, 1))      # validates the letter now
            i = j
        else:
            parts.append(c)
            i += 1

    def fmt(t):
        return "".join(p if isinstance(p, str) else _sdf_field(p[0], p[1], t) for p in parts)
    return fmt


# ------------------------------------------------------------------------------------------------ base classes
class Transformation:
    """Kafka's Transformation: ``config_def()``, ``configure(configs)``, ``apply(record)``, ``close()``."""
    KAFKA_CLASS = None
    CONFIG_DEF = cd.ConfigDef()

    def config_def(self):
        return self.CONFIG_DEF

    def configure(self, configs):
        self.config = self.config_def().parse(configs)

    def apply(self, record):
        raise NotImplementedError

    def close(self):
        pass

    def version(self):
        from importlib import metadata
        try:
            return metadata.version("kbroker")
        except metadata.PackageNotFoundError:
            return "unknown"


class _KeyOrValue:
    """The key/value half of a $Key/$Value pair: which schema and object the transform works on."""
    OPERATES_ON = None       # "key" | "value"

    def operating_schema(self, record):
        return record.key_schema if self.OPERATES_ON == "key" else record.value_schema

    def operating_value(self, record):
        return record.key if self.OPERATES_ON == "key" else record.value

    def new_record(self, record, schema, value):
        if self.OPERATES_ON == "key":
            return record.new_record(key_schema=schema, key=value)
        return record.new_record(value_schema=schema, value=value)


def _key_value_pair(base, kafka_name):
    """Defines ``base.Key`` and ``base.Value`` (Kafka's ``<kafka_name>$Key`` / ``$Value``)."""
    key = type(base.__name__ + ".Key", (_KeyOrValue, base), {
        "OPERATES_ON": "key", "KAFKA_CLASS": kafka_name + "$Key", "__qualname__": base.__name__ + ".Key",
        "__doc__": base.__doc__})
    value = type(base.__name__ + ".Value", (_KeyOrValue, base), {
        "OPERATES_ON": "value", "KAFKA_CLASS": kafka_name + "$Value", "__qualname__": base.__name__ + ".Value",
        "__doc__": base.__doc__})
    base.Key, base.Value = key, value
    return base


def _field_value(struct, field, replace_null_with_default):
    return struct.get(field) if replace_null_with_default else struct.get_without_default(field)


# ------------------------------------------------------------------------------------------------- InsertField
class InsertField(Transformation):
    """Insert fields from the record's metadata (``topic.field``, ``partition.field``, ``offset.field`` (sinks
    only), ``timestamp.field``) or a ``static.field``/``static.value``. A field name ending in ``!`` is required
    in the updated schema, ``?`` (the default) optional."""
    PURPOSE = "field insertion"
    _OPT = ("Suffix with <code>!</code> to make this a required field, or <code>?</code> to keep it optional "
            "(the default).")
    CONFIG_DEF = (cd.ConfigDef()
                  .define("topic.field", cd.STRING, None, importance=cd.MEDIUM,
                          documentation="Field name for Kafka topic. " + _OPT)
                  .define("partition.field", cd.STRING, None, importance=cd.MEDIUM,
                          documentation="Field name for Kafka partition. " + _OPT)
                  .define("offset.field", cd.STRING, None, importance=cd.MEDIUM,
                          documentation="Field name for Kafka offset - only applicable to sink connectors.<br/>" + _OPT)
                  .define("timestamp.field", cd.STRING, None, importance=cd.MEDIUM,
                          documentation="Field name for record timestamp. " + _OPT)
                  .define("static.field", cd.STRING, None, importance=cd.MEDIUM,
                          documentation="Field name for static data field. " + _OPT)
                  .define("static.value", cd.STRING, None, importance=cd.MEDIUM,
                          documentation="Static field value, if field name configured.")
                  .define("replace.null.with.default", cd.BOOLEAN, True, importance=cd.MEDIUM,
                          documentation=_REPLACE_NULL_DOC))

    @staticmethod
    def _spec(text):
        """(name, optional) from "name", "name?" (optional) or "name!" (required); None when unset."""
        if text is None:
            return None
        if text.endswith("?"):
            return text[:-1], True
        if text.endswith("!"):
            return text[:-1], False
        return text, True

    def configure(self, configs):
        super().configure(configs)
        c = self.config
        self.topic_field = self._spec(c["topic.field"])
        self.partition_field = self._spec(c["partition.field"])
        self.offset_field = self._spec(c["offset.field"])
        self.timestamp_field = self._spec(c["timestamp.field"])
        self.static_field = self._spec(c["static.field"])
        self.static_value = c["static.value"]
        self.replace_null_with_default = c["replace.null.with.default"]
        if not any((self.topic_field, self.partition_field, self.offset_field, self.timestamp_field,
                    self.static_field)):
            raise ConfigError("No field insertion configured")
        if self.static_field is not None and self.static_value is None:
            raise ConfigError("static.value", "null", "No value specified for static field: %s"
                              % self.static_field[0])
        self._cache = _Cache()

    def apply(self, record):
        value = self.operating_value(record)
        if value is None:
            return record
        if self.operating_schema(record) is None:
            return self._schemaless(record, value)
        return self._with_schema(record, value)

    def _inserts(self, record, typed):
        """(spec, value) pairs to insert; ``typed``: the timestamp as a datetime (schema'd) or millis."""
        out = []
        if self.topic_field:
            out.append((self.topic_field, record.topic))
        if self.partition_field and record.kafka_partition is not None:
            out.append((self.partition_field, record.kafka_partition))
        if self.offset_field:
            out.append((self.offset_field, require_sink_record(record, self.PURPOSE).kafka_offset))
        if self.timestamp_field and record.timestamp is not None:
            ts = record.timestamp
            out.append((self.timestamp_field, Timestamp.to_logical(Timestamp.SCHEMA, ts) if typed else ts))
        if self.static_field and self.static_value is not None:
            out.append((self.static_field, self.static_value))
        return out

    def _schemaless(self, record, value):
        updated = dict(require_map(value, self.PURPOSE))
        for (name, _), v in self._inserts(record, False):
            updated[name] = v
        return self.new_record(record, None, updated)

    def _updated_schema(self, schema):
        b = copy_schema_basics(schema, SchemaBuilder.struct())
        for f in schema.fields:
            b.field(f.name, f.schema)
        opt_ts = Timestamp.builder().optional().build()
        for spec, opt, req in ((self.topic_field, Schema.OPTIONAL_STRING_SCHEMA, Schema.STRING_SCHEMA),
                               (self.partition_field, Schema.OPTIONAL_INT32_SCHEMA, Schema.INT32_SCHEMA),
                               (self.offset_field, Schema.OPTIONAL_INT64_SCHEMA, Schema.INT64_SCHEMA),
                               (self.timestamp_field, opt_ts, Timestamp.SCHEMA),
                               (self.static_field, Schema.OPTIONAL_STRING_SCHEMA, Schema.STRING_SCHEMA)):
            if spec is not None:
                b.field(spec[0], opt if spec[1] else req)
        return b.build()

    def _with_schema(self, record, value):
        value = require_struct(value, self.PURPOSE)
        schema = self._cache.get_or_make(value.schema, self._updated_schema)
        updated = Struct(schema)
        for f in value.schema.fields:
            updated.put(f.name, _field_value(value, f, self.replace_null_with_default))
        for (name, _), v in self._inserts(record, True):
            updated.put(name, v)
        return self.new_record(record, schema, updated)


_key_value_pair(InsertField, "org.apache.kafka.connect.transforms.InsertField")


# ------------------------------------------------------------------------------------------------ ReplaceField
def _java_split(text, sep):
    """Java's String.split(sep): trailing empty strings removed."""
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _parse_renames(mappings):
    out = {}
    for m in mappings:
        parts = _java_split(m, ":")
        if len(parts) != 2:
            raise ConfigError("renames", cd.java_str(list(mappings)), "Invalid rename mapping: " + m)
        out[parts[0]] = parts[1]
    return out


class ReplaceField(Transformation):
    """Filter or rename fields: ``exclude`` (wins over include), ``include`` (only these), ``renames``
    (``old:new,...``). ``blacklist``/``whitelist`` are accepted as Kafka's deprecated aliases of exclude/include
    (used only when the new key is not set; a warning is logged)."""
    PURPOSE = "field replacement"
    CONFIG_DEF = (cd.ConfigDef()
                  .define("exclude", cd.LIST, [], importance=cd.MEDIUM,
                          documentation="Fields to exclude. This takes precedence over the fields to include.")
                  .define("include", cd.LIST, [], importance=cd.MEDIUM,
                          documentation="Fields to include. If specified, only these fields will be used.")
                  .define("renames", cd.LIST, [],
                          cd.LambdaValidator(lambda name, value: _parse_renames(value),
                                             "list of colon-delimited pairs, e.g. <code>foo:bar,abc:xyz</code>"),
                          cd.MEDIUM, "Field rename mappings.")
                  .define("replace.null.with.default", cd.BOOLEAN, True, importance=cd.MEDIUM,
                          documentation=_REPLACE_NULL_DOC)
                  .define("blacklist", cd.LIST, None, importance=cd.LOW,
                          documentation="Deprecated. Use exclude instead.")
                  .define("whitelist", cd.LIST, None, importance=cd.LOW,
                          documentation="Deprecated. Use include instead."))

    def configure(self, configs):
        configs = dict(configs)
        for old, new in (("blacklist", "exclude"), ("whitelist", "include")):
            if old in configs:
                if new in configs:
                    log.warning("ReplaceField: '%s' is deprecated and ignored since '%s' is set", old, new)
                else:
                    log.warning("ReplaceField: '%s' is deprecated; use '%s'", old, new)
                    configs[new] = configs[old]
        super().configure(configs)
        c = self.config
        self.exclude = set(c["exclude"])
        self.include = set(c["include"])
        self.renames = _parse_renames(c["renames"])
        self.reverse = {v: k for k, v in self.renames.items()}
        self.replace_null_with_default = c["replace.null.with.default"]
        self._cache = _Cache()

    def _keep(self, name):
        return name not in self.exclude and (not self.include or name in self.include)

    def apply(self, record):
        value = self.operating_value(record)
        if value is None:
            return record
        if self.operating_schema(record) is None:
            value = require_map(value, self.PURPOSE)
            return self.new_record(record, None, {self.renames.get(k, k): v for k, v in value.items()
                                                  if self._keep(k)})
        value = require_struct(value, self.PURPOSE)
        schema = self._cache.get_or_make(value.schema, self._updated_schema)
        updated = Struct(schema)
        for f in schema.fields:
            updated.put(f.name, _field_value(value, self.reverse.get(f.name, f.name), self.replace_null_with_default))
        return self.new_record(record, schema, updated)

    def _updated_schema(self, schema):
        b = copy_schema_basics(schema, SchemaBuilder.struct())
        for f in schema.fields:
            if self._keep(f.name):
                b.field(self.renames.get(f.name, f.name), f.schema)
        return b.build()


_key_value_pair(ReplaceField, "org.apache.kafka.connect.transforms.ReplaceField")


# --------------------------------------------------------------------------------------------------- MaskField
def _null_value(value):
    """MaskField's "valid null value" of a value's type (Kafka's PRIMITIVE_VALUE_MAPPING)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return 0
    if isinstance(value, float):
        return 0.0
    if isinstance(value, _decimal.Decimal):
        return _decimal.Decimal(0)
    if isinstance(value, str):
        return ""
    if isinstance(value, _dt.datetime):
        return _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
    if isinstance(value, _dt.date):
        return _dt.date(1970, 1, 1)
    if isinstance(value, _dt.time):
        return _dt.time(0)
    if isinstance(value, (list, tuple)):
        return []
    if isinstance(value, dict):
        return {}
    raise DataError("Cannot mask value of type: %s" % type(value))


def _custom_value(value, replacement):
    """The replacement converted to the value's type (numbers and strings only, as Kafka's)."""
    if isinstance(value, str):
        return replacement
    if isinstance(value, bool) or not isinstance(value, (int, float, _decimal.Decimal)):
        raise DataError("Cannot mask value of type %s with custom replacement." % type(value))
    try:
        number = _decimal.Decimal(replacement.strip())
        if not number.is_finite():
            raise ValueError
    except (ValueError, ArithmeticError):
        raise DataError("Unable to convert %s (class java.lang.String) to number" % replacement) from None
    if isinstance(value, int):
        return int(number)
    if isinstance(value, float):
        return float(number)
    return number


class MaskField(Transformation):
    """Mask ``fields`` with their type's null value (0, false, "", empty list/map, the epoch) or with
    ``replacement`` converted to the field's type (numbers and strings only)."""
    PURPOSE = "mask fields"
    CONFIG_DEF = (cd.ConfigDef()
                  .define("fields", cd.LIST, cd.NO_DEFAULT, NonEmptyListValidator(), cd.HIGH,
                          "Names of fields to mask.")
                  .define("replacement", cd.STRING, None, cd.NonEmptyString(), cd.LOW,
                          "Custom value replacement, that will be applied to all 'fields' values (numeric or "
                          "non-empty string values only).")
                  .define("replace.null.with.default", cd.BOOLEAN, True, importance=cd.MEDIUM,
                          documentation=_REPLACE_NULL_DOC))

    def configure(self, configs):
        super().configure(configs)
        self.fields = list(dict.fromkeys(self.config["fields"]))
        self.masked_set = set(self.fields)
        self.replacement = self.config["replacement"]
        self.replace_null_with_default = self.config["replace.null.with.default"]

    def _mask(self, value):
        if value is None:
            return None
        if self.replacement is None:
            return _null_value(value)
        return _custom_value(value, self.replacement)

    def apply(self, record):
        value = self.operating_value(record)
        if self.operating_schema(record) is None:
            value = require_map(value, self.PURPOSE)
            updated = dict(value)
            for name in self.fields:            # as Kafka's: a missing field is put as null
                updated[name] = self._mask(value.get(name))
            return self.new_record(record, None, updated)
        value = require_struct(value, self.PURPOSE)
        updated = Struct(value.schema)
        for f in value.schema.fields:
            v = _field_value(value, f, self.replace_null_with_default)
            updated.put(f, self._mask(v) if f.name in self.masked_set else v)
        return self.new_record(record, self.operating_schema(record), updated)


_key_value_pair(MaskField, "org.apache.kafka.connect.transforms.MaskField")


# -------------------------------------------------------------------------------------------------- ValueToKey
class ValueToKey(Transformation):
    """Replace the key with a struct/map of the value's ``fields`` (in the configured order)."""
    KAFKA_CLASS = "org.apache.kafka.connect.transforms.ValueToKey"
    PURPOSE = "copying fields from value to key"
    CONFIG_DEF = (cd.ConfigDef()
                  .define("fields", cd.LIST, cd.NO_DEFAULT, NonEmptyListValidator(), cd.HIGH,
                          "Field names on the record value to extract as the record key.")
                  .define("replace.null.with.default", cd.BOOLEAN, True, importance=cd.MEDIUM,
                          documentation=_REPLACE_NULL_DOC))

    def configure(self, configs):
        super().configure(configs)
        self.fields = self.config["fields"]
        self.replace_null_with_default = self.config["replace.null.with.default"]
        self._cache = _Cache()

    def apply(self, record):
        if record.value_schema is None:
            value = require_map(record.value, self.PURPOSE)
            return record.new_record(key_schema=None, key={f: value.get(f) for f in self.fields})
        value = require_struct(record.value, self.PURPOSE)
        key_schema = self._cache.get_or_make(value.schema, self._key_schema)
        key = Struct(key_schema)
        for f in self.fields:
            key.put(f, _field_value(value, f, self.replace_null_with_default))
        return record.new_record(key_schema=key_schema, key=key)

    def _key_schema(self, schema):
        b = SchemaBuilder.struct()
        for name in self.fields:
            f = schema.field(name)
            if f is None:
                raise DataError("Field does not exist: " + name)
            b.field(name, f.schema)
        return b.build()


# ------------------------------------------------------------------------------------------------ ExtractField
def _field_path(path, version):
    """The path's steps: V1 one name (dots included); V2 dot-separated names, a `back-ticked` step may hold
    dots (a back tick inside one is written \\`), as Kafka's SingleFieldPath."""
    if version == "V1":
        return [path]
    steps, i, n = [], 0, len(path)
    while i <= n:
        if i < n and path[i] == "`":
            j, buf = i + 1, []
            while j < n:
                if path[j] == "\\" and j + 1 < n and path[j + 1] == "`":
                    buf.append("`")
                    j += 2
                    continue
                if path[j] == "`" and (j + 1 == n or path[j + 1] == "."):
                    break
                buf.append(path[j])
                j += 1
            if j >= n:
                raise ConfigError("Incomplete backtick pair in path: [%s], consider adding a backslash before "
                                  "backtick at position %d to escape it" % (path, i))
            steps.append("".join(buf))
            i = j + 2
        else:
            j = path.find(".", i)
            if j < 0:
                steps.append(path[i:])
                break
            steps.append(path[i:j])
            i = j + 1
    return steps


class ExtractField(Transformation):
    """Replace the key/value with one of its fields (``field``; ``field.syntax.version`` V1 (default) a plain
    name, V2 a dotted path into nested structs/maps). Null values pass through."""
    PURPOSE = "field extraction"
    CONFIG_DEF = (cd.ConfigDef()
                  .define("field", cd.STRING, cd.NO_DEFAULT, importance=cd.MEDIUM,
                          documentation="Field name to extract.")
                  .define("replace.null.with.default", cd.BOOLEAN, True, importance=cd.MEDIUM,
                          documentation=_REPLACE_NULL_DOC)
                  .define("field.syntax.version", cd.STRING, "V1", cd.CaseInsensitiveValidString.in_("V1", "V2"),
                          cd.HIGH, "Defines the version of the syntax to access fields. If set to `V1`, then the "
                                   "field paths are limited to access the elements at the root level of the struct "
                                   "or map. If set to `V2`, the syntax will support accessing nested elements."))

    def configure(self, configs):
        super().configure(configs)
        self.path = self.config["field"]
        self.steps = _field_path(self.path, self.config["field.syntax.version"].upper())
        self.replace_null_with_default = self.config["replace.null.with.default"]

    def apply(self, record):
        schema, value = self.operating_schema(record), self.operating_value(record)
        if schema is None:
            if value is None:
                return self.new_record(record, None, None)
            value = require_map(value, self.PURPOSE)
            for i, step in enumerate(self.steps):
                if i:           # a nested step needs a map, as Kafka's SingleFieldPath
                    if value is None:
                        break
                    require_map(value, "nested field access")
                value = value.get(step)
            return self.new_record(record, None, value)
        if value is not None:
            require_struct(value, self.PURPOSE)
        field_schema = schema
        for step in self.steps:
            field = field_schema.field(step) if field_schema.type == STRUCT else None
            if field is None:
                raise DataError("Unknown field: " + self.path)
            field_schema = field.schema
            if value is not None:
                value = _field_value(value, step, self.replace_null_with_default)
        return self.new_record(record, field_schema, value)


_key_value_pair(ExtractField, "org.apache.kafka.connect.transforms.ExtractField")


# -------------------------------------------------------------------------------------------------- HoistField
class HoistField(Transformation):
    """Wrap the key/value in a struct (schema'd) or map (schemaless) with one field named ``field``."""
    CONFIG_DEF = cd.ConfigDef().define("field", cd.STRING, cd.NO_DEFAULT, importance=cd.MEDIUM,
                                       documentation="Field name for the single field that will be created in the "
                                                     "resulting Struct or Map.")

    def configure(self, configs):
        super().configure(configs)
        self.field = self.config["field"]
        self._cache = _Cache()

    def apply(self, record):
        schema, value = self.operating_schema(record), self.operating_value(record)
        if schema is None:
            return self.new_record(record, None, {self.field: value})
        updated_schema = self._cache.get_or_make(schema, lambda s: SchemaBuilder.struct().field(self.field, s).build())
        return self.new_record(record, updated_schema, Struct(updated_schema).put(self.field, value))


_key_value_pair(HoistField, "org.apache.kafka.connect.transforms.HoistField")


# ------------------------------------------------------------------------------------------- SetSchemaMetadata
class SetSchemaMetadata(Transformation):
    """Set the key/value schema's ``schema.name`` and/or ``schema.version`` (a struct value is re-made with it)."""
    CONFIG_DEF = (cd.ConfigDef()
                  .define("schema.name", cd.STRING, None, importance=cd.HIGH, documentation="Schema name to set.")
                  .define("schema.version", cd.INT, None, importance=cd.HIGH, documentation="Schema version to set.")
                  .define("replace.null.with.default", cd.BOOLEAN, True, importance=cd.MEDIUM,
                          documentation=_REPLACE_NULL_DOC))

    def configure(self, configs):
        super().configure(configs)
        self.name = self.config["schema.name"]
        self.schema_version = self.config["schema.version"]
        self.replace_null_with_default = self.config["replace.null.with.default"]
        if self.name is None and self.schema_version is None:
            raise ConfigError("Neither schema name nor version configured")

    def apply(self, record):
        schema, value = self.operating_schema(record), self.operating_value(record)
        if value is None and schema is None:
            return record
        require_schema(schema, "updating schema metadata")
        updated = Schema(schema.type, schema.optional, schema.default,
                         self.name if self.name is not None else schema.name,
                         self.schema_version if self.schema_version is not None else schema.version,
                         schema.doc, schema.parameters, schema.fields,
                         schema.key_schema if schema.type == MAP else None,
                         schema.value_schema if schema.type in (MAP, ARRAY) else None)
        if isinstance(value, Struct):
            new_value = Struct(updated)
            for f in updated.fields:
                new_value.put(f, _field_value(value, f.name, self.replace_null_with_default))
            value = new_value
        return self.new_record(record, updated, value)


_key_value_pair(SetSchemaMetadata, "org.apache.kafka.connect.transforms.SetSchemaMetadata")


# -------------------------------------------------------------------------------------------------------- Cast
_CAST_IN = (INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING, BYTES)
_CAST_OUT = (INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING)
_JAVA_FLOAT_TEXT = re.compile(r"[+-]?(NaN|Infinity|((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)[fFdD]?)\Z")


def _cast_type(name):
    t = name.strip().lower()
    if t not in INT_RANGES and t not in (FLOAT32, FLOAT64, BOOLEAN, STRING, BYTES, ARRAY, MAP, STRUCT):
        raise ConfigError("Invalid type found in casting spec: " + name.strip())
    if t not in _CAST_OUT:
        raise ConfigError("Cast transformation does not support casting to %s; supported types are [%s]"
                          % (t.upper(), ", ".join(x.upper() for x in _CAST_OUT)))
    return t


def _parse_cast_spec(mappings):
    """{field: type} from "f1:type,f2:type", or {None: type} for one whole-value "type" (Kafka's rules)."""
    if not mappings:
        raise ConfigError("Must specify at least one field to cast.")
    out = {}
    whole = False
    for m in mappings:
        parts = _java_split(m, ":")
        if len(parts) > 2:
            raise ConfigError("renames", cd.java_str(list(mappings)), "Invalid rename mapping: " + m)
        if len(parts) == 1:
            out[None] = _cast_type(parts[0] if parts else "")
            whole = True
        else:
            out[parts[0].strip()] = _cast_type(parts[1])
    if whole and len(mappings) > 1:
        raise ConfigError("Cast transformations that specify a type to cast the entire value to may only specify a "
                          "single cast in their spec")
    return out


def _java_narrow(value, type_):
    """Java's Number.byteValue()/shortValue()/intValue()/longValue(): floats truncate (saturating at the long
    range, NaN is 0), then the two's-complement narrowing cast."""
    if isinstance(value, float):
        if value != value:
            n = 0
        elif value >= 2 ** 63:
            n = 2 ** 63 - 1
        elif value < -2 ** 63:
            n = -2 ** 63
        else:
            n = int(value)
        if type_ in (INT8, INT16, INT32):      # double -> int saturates at the int range first
            n = max(-2 ** 31, min(2 ** 31 - 1, n))
    else:
        n = int(value)
    lo, hi = INT_RANGES[type_]
    return (n - lo) % (hi - lo + 1) + lo


def _cast_value(schema, value, target):
    """Kafka's Cast.castValueToType."""
    if value is None:
        return None
    source = schema.type if schema is not None else infer_schema_type(value)
    if source is None:
        raise DataError("Cast transformation was passed a value of type %s which is not supported by Connect's "
                        "data API" % type(value))
    if source not in _CAST_IN:
        raise DataError("Cast transformation does not support casting from %s; supported types are [%s]"
                        % (source.upper(), ", ".join(x.upper() for x in _CAST_IN)))
    if schema is not None and schema.name is not None and target != STRING:
        for logical in (Date, Time, Timestamp):
            if schema.name == logical.LOGICAL_NAME:
                value = logical.from_logical(schema, value)
    try:
        if target == STRING:
            return _cast_to_string(schema, value)
        if isinstance(value, bool):
            number = 1 if value else 0
            return float(number) if target in (FLOAT32, FLOAT64) else (value if target == BOOLEAN else number)
        if isinstance(value, (int, float, _decimal.Decimal)):
            if target == BOOLEAN:
                return _java_narrow(int(value) if isinstance(value, _decimal.Decimal) else value, INT64) != 0
            if target in (FLOAT32, FLOAT64):
                return float(value)
            return _java_narrow(value if not isinstance(value, _decimal.Decimal) else int(value), target)
        if isinstance(value, str):
            if target == BOOLEAN:
                return value.lower() == "true"          # Java's Boolean.parseBoolean
            if target in (FLOAT32, FLOAT64):
                text = value.strip()
                if not _JAVA_FLOAT_TEXT.match(text):
                    raise ValueError(value)
                return float(text.rstrip("fFdD").replace("Infinity", "inf"))
            if not re.fullmatch(r"[+-]?\d+", value):
                raise ValueError(value)
            n = int(value)
            lo, hi = INT_RANGES[target]
            if not lo <= n <= hi:
                raise ValueError(value)
            return n
    except ValueError:
        raise DataError("Value (%s) was out of range for requested data type" % value) from None
    raise DataError("Unexpected type in Cast transformation: %s" % type(value))


def _cast_to_string(schema, value):
    from kbroker.connect.converters import java_date_text, java_double_str, java_float_str
    if isinstance(value, (_dt.date, _dt.time)):
        return java_date_text(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_float_str(value) if schema is not None and schema.type == FLOAT32 else java_double_str(value)
    return str(value)


_CAST_BUILDERS = {INT8: SchemaBuilder.int8, INT16: SchemaBuilder.int16, INT32: SchemaBuilder.int32,
                  INT64: SchemaBuilder.int64, FLOAT32: SchemaBuilder.float32, FLOAT64: SchemaBuilder.float64,
                  BOOLEAN: SchemaBuilder.bool, STRING: SchemaBuilder.string}


class Cast(Transformation):
    """Cast fields (``spec=f1:int32,f2:string``) or the whole key/value (``spec=int64``) to int8..int64, float32,
    float64, boolean or string; bytes cast to string are base64, dates to Kafka's ISO text."""
    PURPOSE = "cast types"
    CONFIG_DEF = (cd.ConfigDef()
                  .define("spec", cd.LIST, cd.NO_DEFAULT,
                          cd.LambdaValidator(lambda name, value: _parse_cast_spec(value),
                                             "list of colon-delimited pairs, e.g. <code>foo:bar,abc:xyz</code>"),
                          cd.HIGH, "List of fields and the type to cast them to of the form field1:type,field2:type "
                                   "to cast fields of Maps or Structs. A single type to cast the entire value. Valid "
                                   "types are int8, int16, int32, int64, float32, float64, boolean, and string. Note "
                                   "that binary fields can only be cast to string.")
                  .define("replace.null.with.default", cd.BOOLEAN, True, importance=cd.MEDIUM,
                          documentation=_REPLACE_NULL_DOC))

    def configure(self, configs):
        super().configure(configs)
        self.casts = _parse_cast_spec(self.config["spec"])
        self.whole = self.casts.get(None)
        self.replace_null_with_default = self.config["replace.null.with.default"]
        self._cache = _Cache()

    def apply(self, record):
        schema, value = self.operating_schema(record), self.operating_value(record)
        if value is None:
            return record
        if schema is None:
            if self.whole is not None:
                return self.new_record(record, None, _cast_value(None, value, self.whole))
            value = require_map(value, self.PURPOSE)
            updated = dict(value)
            for name, target in self.casts.items():
                updated[name] = _cast_value(None, value.get(name), target)
            return self.new_record(record, None, updated)
        updated_schema = self._cache.get_or_make(schema, self._updated_schema)
        if self.whole is not None:
            return self.new_record(record, updated_schema, _cast_value(schema, value, self.whole))
        value = require_struct(value, self.PURPOSE)
        updated = Struct(updated_schema)
        for f in value.schema.fields:
            v = _field_value(value, f, self.replace_null_with_default)
            target = self.casts.get(f.name)
            updated.put(f.name, _cast_value(f.schema, v, target) if target is not None else v)
        return self.new_record(record, updated_schema, updated)

    def _updated_schema(self, schema):
        if self.whole is not None:
            b = copy_schema_basics(schema, _CAST_BUILDERS[self.whole]())
        else:
            b = copy_schema_basics(schema, SchemaBuilder.struct())
            for f in schema.fields:
                target = self.casts.get(f.name)
                if target is None:
                    b.field(f.name, f.schema)
                    continue
                fb = _CAST_BUILDERS[target]()
                if f.schema.optional:
                    fb.optional()
                if f.schema.default is not None:
                    fb.default_value(_cast_value(f.schema, f.schema.default, target))
                b.field(f.name, fb.build())
        if schema.optional:
            b.optional()
        if schema.default is not None:
            b.default_value(_cast_value(schema, schema.default, b.type))
        return b.build()


_key_value_pair(Cast, "org.apache.kafka.connect.transforms.Cast")


# ----------------------------------------------------------------------------------------------------- Flatten
_FLAT_LEAVES = (INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING, BYTES, ARRAY)


class Flatten(Transformation):
    """Flatten nested structs (schema'd) or maps (schemaless) into one level, names joined by ``delimiter``
    (default "."); a field under an optional parent becomes optional, a parent's default gives the fields theirs."""
    PURPOSE = "flattening"
    CONFIG_DEF = cd.ConfigDef().define(
        "delimiter", cd.STRING, ".", importance=cd.MEDIUM,
        documentation="Delimiter to insert between field names from the input record when generating field names "
                      "for the output record")

    def configure(self, configs):
        super().configure(configs)
        self.delimiter = self.config["delimiter"]
        self._cache = _Cache()

    def _name(self, prefix, name):
        return name if not prefix else prefix + self.delimiter + name

    def apply(self, record):
        schema, value = self.operating_schema(record), self.operating_value(record)
        if value is None:
            return record
        if schema is None:
            out = {}
            self._flatten_map(require_map(value, self.PURPOSE), "", out)
            return self.new_record(record, None, out)
        require_struct(value, self.PURPOSE)
        updated_schema = self._cache.get_or_make(schema, self._updated_schema)
        out = Struct(updated_schema)
        self._flatten_struct(value, "", out)
        return self.new_record(record, updated_schema, out)

    def _flatten_map(self, value, prefix, out):
        for k, v in value.items():
            name = self._name(prefix, k)
            if v is None:
                out[name] = None
                continue
            t = infer_schema_type(v)
            if t is None:
                raise DataError("Flatten transformation was passed a value of type %s which is not supported by "
                                "Connect's data API" % type(v))
            if t == MAP:
                self._flatten_map(require_map(v, self.PURPOSE), name, out)
            elif t in _FLAT_LEAVES:
                out[name] = v
            else:
                raise DataError("Flatten transformation does not support %s for record without schemas (for field "
                                "%s)." % (type(v), name))

    def _updated_schema(self, schema):
        b = copy_schema_basics(schema, SchemaBuilder.struct())
        self._build_schema(schema, "", b, schema.optional, schema.default)
        return b.build()

    def _build_schema(self, schema, prefix, builder, optional, parent_default):
        for f in schema.fields:
            name = self._name(prefix, f.name)
            f_optional = optional or f.schema.optional
            default = f.schema.default
            if default is None and parent_default is not None:
                default = parent_default.get(f)
            if f.schema.type in _FLAT_LEAVES:
                fb = copy_schema_basics(f.schema)
                if f_optional:
                    fb.optional()
                if default is not None:
                    fb.default_value(default)
                builder.field(name, fb.build())
            elif f.schema.type == STRUCT:
                self._build_schema(f.schema, name, builder, f_optional, default)
            else:
                raise DataError("Flatten transformation does not support %s for record with schemas (for field %s)."
                                % (f.schema.type.upper(), name))

    def _flatten_struct(self, value, prefix, out):
        if value is None:
            return
        for f in value.schema.fields:
            name = self._name(prefix, f.name)
            if f.schema.type == STRUCT:
                self._flatten_struct(value.get(f), name, out)
            else:
                out.put(name, value.get(f))


_key_value_pair(Flatten, "org.apache.kafka.connect.transforms.Flatten")


# ------------------------------------------------------------------------------------------ TimestampConverter
_SDF_NUMERIC = "yMdDHkKhmsSu"


def simple_date_parser(pattern):
    """A function reading text with a SimpleDateFormat pattern into UTC epoch milliseconds, as Java's
    ``DateFormat.parse(String)``: from the start of the text (trailing text ignored); a numeric field takes its
    letter count of digits when another numeric field follows directly, else any number of digits. ValueError
    when the text does not match."""
    simple_date_format(pattern)            # validates the letters (ValueError as Java's constructor)
    parts, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "'":
            j = pattern.find("'", i + 1)
            text = "'" if j == i + 1 else pattern[i + 1:j]
            parts.append(re.escape(text))
            i = j + 1 if j > 0 else n
        elif c.isascii() and c.isalpha():
            j = i
            while j < n and pattern[j] == c:
                j += 1
            parts.append((c, j - i))
            i = j
        else:
            parts.append(re.escape(c))
            i += 1
    regex, fields = [], []
    for k, part in enumerate(parts):
        if isinstance(part, str):
            regex.append(part)
            continue
        letter, count = part
        nxt = parts[k + 1] if k + 1 < len(parts) else None
        adjacent_numeric = isinstance(nxt, tuple) and nxt[0] in _SDF_NUMERIC
        if letter in _SDF_NUMERIC and not (letter == "M" and count >= 3):
            regex.append("([+-]?\\d{%d})" % count if adjacent_numeric else "([+-]?\\d+)")
        elif letter == "M" or letter == "E":
            regex.append("([A-Za-z]+)")
        elif letter == "a":
            regex.append("(AM|PM|am|pm)")
        elif letter in "ZX":
            regex.append("(Z|[+-]\\d{2}:?\\d{2}|[+-]\\d{2})")
        else:
            regex.append("([A-Za-z]+)")
        fields.append(part)
    compiled = re.compile("".join(regex))
    months = {m[:3].lower(): k + 1 for k, m in enumerate(_MONTHS)}

    def parse(text):
        m = compiled.match(text)
        if m is None:
            raise ValueError(text)
        v = {"y": 1970, "M": 1, "d": 1, "H": 0, "m": 0, "s": 0, "S": 0, "h": None, "a": None, "offset": 0}
        for (letter, count), g in zip(fields, m.groups()):
            if letter == "y":
                year = int(g)
                v["y"] = year + (2000 if year < 50 else 1900) if count == 2 and len(g) == 2 else year
            elif letter == "M":
                v["M"] = int(g) if g.lstrip("+-").isdigit() else months.get(g[:3].lower(), 0)
                if not v["M"]:
                    raise ValueError(text)
            elif letter in "dHmsS":
                v[letter] = int(g)
            elif letter == "k":
                v["H"] = int(g) % 24
            elif letter in "hK":
                v["h"] = int(g) % 12
            elif letter == "a":
                v["a"] = g.upper()
            elif letter in "ZX":
                if g != "Z":
                    sign = -1 if g[0] == "-" else 1
                    digits = g[1:].replace(":", "")
                    v["offset"] = sign * (int(digits[:2]) * 60 + int(digits[2:4] or 0))
        if v["h"] is not None:
            v["H"] = v["h"] + (12 if v["a"] == "PM" else 0)
        elif v["a"] == "PM" and v["H"] < 12:
            v["H"] += 12
        # Java's default parsing is lenient: out-of-range fields roll over (month 13 is January next year)
        base = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
        try:
            years_months = (v["y"] - 1970) * 12 + v["M"] - 1
            y, mo = divmod(years_months, 12)
            day0 = _dt.datetime(1970 + y, mo + 1, 1, tzinfo=_dt.timezone.utc)
        except (ValueError, OverflowError):
            raise ValueError(text) from None
        t = day0 + _dt.timedelta(days=v["d"] - 1, hours=v["H"], minutes=v["m"] - v["offset"], seconds=v["s"],
                                 milliseconds=v["S"])
        delta = t - base
        return (delta.days * 86400 + delta.seconds) * 1000 + delta.microseconds // 1000
    return parse


def _trunc_div(a, b):
    """Java's integer division (toward zero), as TimeUnit conversions use."""
    q = abs(a) // b
    return q if a >= 0 else -q


class TimestampConverter(Transformation):
    """Convert a timestamp field (``field``, or the whole key/value when empty) between ``target.type`` string
    (with ``format``, a SimpleDateFormat pattern, UTC), unix (``unix.precision`` seconds | milliseconds |
    microseconds | nanoseconds), Date, Time and Timestamp."""
    PURPOSE = "converting timestamp formats"
    CONFIG_DEF = (cd.ConfigDef()
                  .define("field", cd.STRING, "", importance=cd.HIGH,
                          documentation="The field containing the timestamp, or empty if the entire value is a "
                                        "timestamp")
                  .define("target.type", cd.STRING, cd.NO_DEFAULT,
                          cd.ValidString.in_("string", "unix", "Date", "Time", "Timestamp"), cd.HIGH,
                          "The desired timestamp representation: string, unix, Date, Time, or Timestamp")
                  .define("format", cd.STRING, "", importance=cd.MEDIUM,
                          documentation="A SimpleDateFormat-compatible format for the timestamp. Used to generate "
                                        "the output when type=string or used to parse the input if the input is a "
                                        "string.")
                  .define("unix.precision", cd.STRING, "milliseconds",
                          cd.ValidString.in_("nanoseconds", "microseconds", "milliseconds", "seconds"), cd.LOW,
                          "The desired Unix precision for the timestamp: seconds, milliseconds, microseconds, or "
                          "nanoseconds. Used to generate the output when type=unix or used to parse the input if the "
                          "input is a Long.Note: This SMT will cause precision loss during conversions from, and to, "
                          "values with sub-millisecond components.")
                  .define("replace.null.with.default", cd.BOOLEAN, True, importance=cd.MEDIUM,
                          documentation=_REPLACE_NULL_DOC))
    _UNIT = {"seconds": 1000, "milliseconds": 1, "microseconds": -1000, "nanoseconds": -1000000}

    def configure(self, configs):
        super().configure(configs)
        c = self.config
        self.field = c["field"]
        self.target = c["target.type"]
        self.precision = c["unix.precision"]
        self.replace_null_with_default = c["replace.null.with.default"]
        pattern = c["format"]
        if self.target == "string" and not pattern.strip():
            raise ConfigError("TimestampConverter requires format option to be specified when using string "
                              "timestamps")
        self.formatter = self.parser = None
        if pattern.strip():
            try:
                self.formatter = simple_date_format(pattern)
                self.parser = simple_date_parser(pattern)
            except ValueError:
                raise ConfigError("TimestampConverter requires a SimpleDateFormat-compatible pattern for string "
                                  "timestamps: " + pattern) from None
        self.pattern = pattern
        self._cache = _Cache()

    # -------------------------------------------------------------------------------------- raw <-> types
    def _to_millis(self, value, kind):
        if kind == "string":
            if not isinstance(value, str):
                raise DataError("Expected string timestamp to be a String, but found %s" % type(value))
            try:
                return self.parser(value)
            except (ValueError, TypeError):
                raise DataError("Could not parse timestamp: value (%s) does not match pattern (%s)"
                                % (value, self.pattern)) from None
        if kind == "unix":
            if not isinstance(value, int) or isinstance(value, bool):
                raise DataError("Expected Unix timestamp to be a Long, but found %s" % type(value))
            unit = self._UNIT[self.precision]
            return value * unit if unit > 0 else _trunc_div(value, -unit)
        if isinstance(value, _dt.datetime):
            return Timestamp.from_logical(Timestamp.SCHEMA, value)
        if isinstance(value, _dt.date):
            return Date.from_logical(Date.SCHEMA, value) * 86400000
        if isinstance(value, _dt.time):
            return Time.from_logical(Time.SCHEMA, value)
        raise DataError("Expected %s to be a java.util.Date, but found %s" % (kind, type(value)))

    def _from_millis(self, ms):
        t = self.target
        if t == "unix":
            unit = self._UNIT[self.precision]
            return _trunc_div(ms, unit) if unit > 0 else ms * -unit
        dt_value = Timestamp.to_logical(Timestamp.SCHEMA, ms)
        if t == "string":
            return self.formatter(dt_value)
        if t == "Date":
            return dt_value.date()
        if t == "Time":
            return dt_value.timetz().replace(tzinfo=None)
        return dt_value

    def _type_schema(self, optional):
        t = self.target
        if t == "string":
            return Schema.OPTIONAL_STRING_SCHEMA if optional else Schema.STRING_SCHEMA
        if t == "unix":
            return Schema.OPTIONAL_INT64_SCHEMA if optional else Schema.INT64_SCHEMA
        logical = {"Date": Date, "Time": Time, "Timestamp": Timestamp}[t]
        return logical.builder().optional().build() if optional else logical.SCHEMA

    @staticmethod
    def _kind_of_schema(schema):
        for name, cls in (("Timestamp", Timestamp), ("Date", Date), ("Time", Time)):
            if schema.name == cls.LOGICAL_NAME:
                return name
        if schema.type == STRING:
            return "string"
        if schema.type == INT64:
            return "unix"
        raise ConnectError("Schema %s does not correspond to a known timestamp type format" % (schema,))

    @staticmethod
    def _kind_of_value(value):
        if isinstance(value, (_dt.date, _dt.time)):
            return "Timestamp"
        if isinstance(value, int) and not isinstance(value, bool):
            return "unix"
        if isinstance(value, str):
            return "string"
        raise DataError("TimestampConverter does not support %s objects as timestamps" % type(value))

    def _convert(self, value, kind=None):
        if value is None:
            return None
        return self._from_millis(self._to_millis(value, kind or self._kind_of_value(value)))

    # ---------------------------------------------------------------------------------------------- apply
    def apply(self, record):
        schema, value = self.operating_schema(record), self.operating_value(record)
        if schema is None:
            if value is None or not self.field:
                return self.new_record(record, None, self._convert(value))
            value = require_map(value, self.PURPOSE)
            updated = dict(value)
            updated[self.field] = self._convert(value.get(self.field))
            return self.new_record(record, None, updated)
        if not self.field:
            return self.new_record(record, self._type_schema(schema.optional),
                                   self._convert(value, self._kind_of_schema(schema)))
        if value is not None:
            require_struct(value, self.PURPOSE)
        updated_schema = self._cache.get_or_make(schema, self._updated_schema)
        return self.new_record(record, updated_schema, self._convert_struct(value, updated_schema))

    def _updated_schema(self, schema):
        b = copy_schema_basics(schema, SchemaBuilder.struct())
        for f in schema.fields:
            b.field(f.name, self._type_schema(f.schema.optional) if f.name == self.field else f.schema)
        if schema.optional:
            b.optional()
        if schema.default is not None:
            b.default_value(self._convert_struct(schema.default, b.build()))
        return b.build()

    def _convert_struct(self, value, updated_schema):
        if value is None:
            return None
        out = Struct(updated_schema)
        for f in value.schema.fields:
            v = _field_value(value, f, self.replace_null_with_default)
            out.put(f.name, self._convert(v, self._kind_of_schema(f.schema)) if f.name == self.field else v)
        return out


_key_value_pair(TimestampConverter, "org.apache.kafka.connect.transforms.TimestampConverter")


# ----------------------------------------------------------------------------------------------------- routers
class RegexRouter(Transformation):
    """Rename the topic when the whole topic name matches ``regex``: ``replacement`` with Java's ``$1`` group
    references (e.g. regex ``(.*)-(.*)``, replacement ``$2``)."""
    KAFKA_CLASS = "org.apache.kafka.connect.transforms.RegexRouter"
    CONFIG_DEF = (cd.ConfigDef()
                  .define("regex", cd.STRING, cd.NO_DEFAULT, RegexValidator(), cd.HIGH,
                          "Regular expression to use for matching.")
                  .define("replacement", cd.STRING, cd.NO_DEFAULT, importance=cd.HIGH,
                          documentation="Replacement string."))

    def configure(self, configs):
        super().configure(configs)
        self.regex = java_regex(self.config["regex"])
        try:
            self.template = java_replacement(self.config["replacement"])
        except ValueError as e:
            raise ConfigError("replacement", self.config["replacement"], str(e)) from None

    def apply(self, record):
        m = self.regex.fullmatch(record.topic)
        if m is None:
            return record
        try:
            topic = m.expand(self.template)
        except (re.error, IndexError) as e:
            raise DataError("Invalid replacement for topic %s: %s" % (record.topic, e)) from None
        return record.new_record(topic=topic)


class TimestampRouter(Transformation):
    """Route to ``topic.format`` (default ``${topic}-${timestamp}``) with the record timestamp formatted in UTC by
    ``timestamp.format`` (java.text.SimpleDateFormat, default ``yyyyMMdd``). A record without a timestamp is a
    DataError ("Timestamp missing on record: ...")."""
    KAFKA_CLASS = "org.apache.kafka.connect.transforms.TimestampRouter"
    CONFIG_DEF = (cd.ConfigDef()
                  .define("topic.format", cd.STRING, "${topic}-${timestamp}", importance=cd.HIGH,
                          documentation="Format string which can contain <code>${topic}</code> and "
                                        "<code>${timestamp}</code> as placeholders for the topic and timestamp, "
                                        "respectively.")
                  .define("timestamp.format", cd.STRING, "yyyyMMdd", importance=cd.HIGH,
                          documentation="Format string for the timestamp that is compatible with "
                                        "<code>java.text.SimpleDateFormat</code>."))

    def configure(self, configs):
        super().configure(configs)
        self.topic_format = self.config["topic.format"]
        try:
            self.format = simple_date_format(self.config["timestamp.format"])
        except ValueError as e:
            raise ConfigError("timestamp.format", self.config["timestamp.format"], str(e)) from None

    def apply(self, record):
        if record.timestamp is None:
            raise DataError("Timestamp missing on record: %s" % (record,))
        stamp = self.format(Timestamp.to_logical(Timestamp.SCHEMA, record.timestamp))
        topic = self.topic_format.replace("${topic}", record.topic).replace("${timestamp}", stamp)
        return record.new_record(topic=topic)


class Filter(Transformation):
    """Drops every record (use it with a predicate: KIP-585)."""
    KAFKA_CLASS = "org.apache.kafka.connect.transforms.Filter"

    def apply(self, record):
        return None


# ----------------------------------------------------------------------------------------------------- headers
class InsertHeader(Transformation):
    """Add header ``header`` with ``value.literal`` (UTF-8) to every record."""
    KAFKA_CLASS = "org.apache.kafka.connect.transforms.InsertHeader"
    CONFIG_DEF = (cd.ConfigDef()
                  .define("header", cd.STRING, cd.NO_DEFAULT, cd.NonNullValidator(), cd.HIGH,
                          "The name of the header.")
                  .define("value.literal", cd.STRING, cd.NO_DEFAULT, cd.NonNullValidator(), cd.HIGH,
                          "The literal value that is to be set as the header value on all records."))

    def configure(self, configs):
        super().configure(configs)
        self.header = (self.config["header"], self.config["value.literal"].encode("utf-8"))

    def apply(self, record):
        return record.new_record(headers=tuple(record.headers) + (self.header,))


class DropHeaders(Transformation):
    """Remove the ``headers`` named (every occurrence)."""
    KAFKA_CLASS = "org.apache.kafka.connect.transforms.DropHeaders"
    CONFIG_DEF = cd.ConfigDef().define("headers", cd.LIST, cd.NO_DEFAULT, NonEmptyListValidator(), cd.HIGH,
                                       "The name of the headers to be removed.")

    def configure(self, configs):
        super().configure(configs)
        self.names = set(self.config["headers"])

    def apply(self, record):
        return record.new_record(headers=tuple(h for h in record.headers if h[0] not in self.names))


class HeaderFrom(Transformation):
    """Copy or move (``operation``) the key/value ``fields`` into the headers named by ``headers`` (same order).
    Headers here carry bytes: each value is written as Kafka's default header converter (SimpleHeaderConverter)
    writes it, a null as a null header."""
    CONFIG_DEF = (cd.ConfigDef()
                  .define("fields", cd.LIST, cd.NO_DEFAULT, NonEmptyListValidator(), cd.HIGH,
                          "Field names in the record whose values are to be copied or moved to headers.")
                  .define("headers", cd.LIST, cd.NO_DEFAULT, NonEmptyListValidator(), cd.HIGH,
                          "Header names, in the same order as the field names listed in the fields configuration "
                          "property.")
                  .define("operation", cd.STRING, cd.NO_DEFAULT, cd.ValidString.in_("move", "copy"), cd.HIGH,
                          "Either <code>move</code> if the fields are to be moved to the headers (removed from the "
                          "key/value), or <code>copy</code> if the fields are to be copied to the headers (retained "
                          "in the key/value).")
                  .define("replace.null.with.default", cd.BOOLEAN, True, importance=cd.MEDIUM,
                          documentation=_REPLACE_NULL_DOC))

    def configure(self, configs):
        super().configure(configs)
        self.fields = self.config["fields"]
        self.headers = self.config["headers"]
        if len(self.fields) != len(self.headers):
            raise ConfigError("'fields' config must have the same number of elements as 'headers' config.")
        self.move = self.config["operation"] == "move"
        self.replace_null_with_default = self.config["replace.null.with.default"]
        self._cache = _Cache()

    @staticmethod
    def _header_bytes(schema, value):
        from kbroker.connect.converters import values_to_string
        return None if value is None else values_to_string(schema, value).encode("utf-8")

    def apply(self, record):
        schema, value = self.operating_schema(record), self.operating_value(record)
        purpose = "header " + ("move" if self.move else "copy")
        added = []
        if schema is None:
            value = require_map(value, purpose)
            updated = dict(value)
            for name, header in zip(self.fields, self.headers):
                if self.move:
                    updated.pop(name, None)
                added.append((header, self._header_bytes(None, value.get(name))))
        else:
            value = require_struct(value, purpose)
            updated_schema, updated = schema, value
            if self.move:
                updated_schema = self._cache.get_or_make(schema, self._moved_schema)
                updated = Struct(updated_schema)
                for f in updated_schema.fields:
                    updated.put(f, _field_value(value, f.name, self.replace_null_with_default))
            for name, header in zip(self.fields, self.headers):
                field = schema.field(name)
                if field is None:
                    raise DataError("%s is not a valid field name" % name)
                added.append((header, self._header_bytes(
                    field.schema, _field_value(value, name, self.replace_null_with_default))))
            schema = updated_schema
        out = self.new_record(record, schema, updated)
        return out.new_record(headers=tuple(record.headers) + tuple(added))

    def _moved_schema(self, schema):
        b = copy_schema_basics(schema, SchemaBuilder.struct())
        for f in schema.fields:
            if f.name not in self.fields:
                b.field(f.name, f.schema)
        return b.build()


_key_value_pair(HeaderFrom, "org.apache.kafka.connect.transforms.HeaderFrom")


# --------------------------------------------------------------------------------------------------- predicates
class Predicate:
    """Kafka's Predicate (KIP-585): ``config_def()``, ``configure(configs)``, ``test(record) -> bool``."""
    KAFKA_CLASS = None
    CONFIG_DEF = cd.ConfigDef()

    def config_def(self):
        return self.CONFIG_DEF

    def configure(self, configs):
        self.config = self.config_def().parse(configs)

    def test(self, record):
        raise NotImplementedError

    def close(self):
        pass


class TopicNameMatches(Predicate):
    """True when the whole topic name matches ``pattern`` (a Java regex)."""
    KAFKA_CLASS = "org.apache.kafka.connect.transforms.predicates.TopicNameMatches"
    CONFIG_DEF = cd.ConfigDef().define(
        "pattern", cd.STRING, cd.NO_DEFAULT, cd.CompositeValidator.of(cd.NonEmptyString(), RegexValidator()),
        cd.MEDIUM, "A Java regular expression for matching against the name of a record's topic.")

    def configure(self, configs):
        super().configure(configs)
        self.pattern = java_regex(self.config["pattern"])

    def test(self, record):
        return record.topic is not None and self.pattern.fullmatch(record.topic) is not None


class HasHeaderKey(Predicate):
    """True when the record has at least one header called ``name``."""
    KAFKA_CLASS = "org.apache.kafka.connect.transforms.predicates.HasHeaderKey"
    CONFIG_DEF = cd.ConfigDef().define("name", cd.STRING, cd.NO_DEFAULT, cd.NonEmptyString(), cd.MEDIUM,
                                       "The header name.")

    def configure(self, configs):
        super().configure(configs)
        self.name = self.config["name"]

    def test(self, record):
        return any(h[0] == self.name for h in record.headers)


class RecordIsTombstone(Predicate):
    """True when the record's value is None."""
    KAFKA_CLASS = "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone"

    def test(self, record):
        return record.value is None


class Predicated:
    """A transform applied only where ``predicate.test(record) != negate`` (Kafka's TransformationStage);
    other records pass unchanged."""

    def __init__(self, transformation, predicate=None, negate=False):
        self.transformation = transformation
        self.predicate = predicate
        self.negate = negate

    def apply(self, record):
        if self.predicate is None or self.predicate.test(record) != self.negate:
            return self.transformation.apply(record)
        return record

    def close(self):
        self.transformation.close()


def _builtins():
    out = {}
    for cls in (InsertField, ReplaceField, MaskField, ExtractField, HoistField, SetSchemaMetadata, Cast, Flatten,
                TimestampConverter, HeaderFrom):
        out[cls.Key.KAFKA_CLASS] = cls.Key
        out[cls.Value.KAFKA_CLASS] = cls.Value
    for cls in (ValueToKey, RegexRouter, TimestampRouter, Filter, InsertHeader, DropHeaders):
        out[cls.KAFKA_CLASS] = cls
    return out


BUILTIN_TRANSFORMS = _builtins()
BUILTIN_PREDICATES = {c.KAFKA_CLASS: c for c in (TopicNameMatches, HasHeaderKey, RecordIsTombstone)}
