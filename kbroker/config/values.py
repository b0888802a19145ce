"""Config value types: constants, ConfigError, validators, and parsing/formatting of values."""
import logging
import re

from kbroker.errors import InvalidConfig

log = logging.getLogger("kbroker.config")


INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)
SHORT_MAX = 2**15 - 1
SHORT_MIN = -(2**15)
DOUBLE_MAX = 1.7976931348623157e308


class ConfigError(InvalidConfig, ValueError):
    """An invalid configuration value (message names the key, the value and what is allowed).

    It is Kafka's INVALID_CONFIG (40) as well: a topic config refused by ``validate_topic_config`` reaches the
    client with that code and this message, with no wrapping by the caller."""

    def __init__(self, message, key=None):
        super().__init__(message)
        self.key = key


class Password:
    """A secret config value; never printed."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return "[hidden]"

    __str__ = __repr__

    def __eq__(self, other):
        return isinstance(other, Password) and other.value == self.value

    def __hash__(self):
        return hash(self.value)


# --------------------------------------------------------------------------------------------------------------
# validators


class Range:
    def __init__(self, lo=None, hi=None):
        self.lo, self.hi = lo, hi

    def check(self, value):
        if value is None:
            return True
        return (self.lo is None or value >= self.lo) and (self.hi is None or value <= self.hi)

    def describe(self):
        if self.hi is None:
            return "[%s,...]" % self.lo
        if self.lo is None:
            return "[...,%s]" % self.hi
        return "[%s,...,%s]" % (self.lo, self.hi)


class OneOf:
    def __init__(self, *choices, case_sensitive=True):
        self.choices = choices
        self.case_sensitive = case_sensitive

    def _match(self, v):
        if self.case_sensitive:
            return v in self.choices
        return v.lower() in (c.lower() for c in self.choices)

    def check(self, value):
        if value is None:
            return True
        if isinstance(value, list):
            return all(self._match(v) for v in value)
        return self._match(value)

    def describe(self):
        return "one of [%s]" % ", ".join(self.choices)


class NonEmptyListOf(OneOf):
    def check(self, value):
        return value is not None and len(value) > 0 and super().check(value)

    def describe(self):
        return "a non-empty comma-separated list of [%s]" % ", ".join(self.choices)


class Pattern:
    def __init__(self, regex, what):
        self.regex = re.compile(regex)
        self.what = what

    def check(self, value):
        if value is None:
            return True
        items = value if isinstance(value, list) else [value]
        return all(self.regex.fullmatch(v) for v in items)

    def describe(self):
        return self.what


# Kafka's version strings: "0.10.1", "0.10.1-IV2", "2.8", "3.0-IV1".
_VERSION = Pattern(r"\d+\.\d+(\.\d+)?(-IV\d+)?", "a version like 0.10.1-IV2 or 3.0")
_CLASS = Pattern(r"[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*", "a fully qualified class name")
_COMPRESSION = OneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_TIMESTAMP_TYPE = OneOf("CreateTime", "LogAppendTime")
_CLEANUP = NonEmptyListOf("compact", "delete")
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


# --------------------------------------------------------------------------------------------------------------
# value parsing


def _fmt_value(v):
    if isinstance(v, Password):
        return "[hidden]"
    return repr(v)


def _invalid(key, value, why):
    return ConfigError("Invalid value %s for configuration %s: %s" % (_fmt_value(value), key, why), key)


def parse_value(key, type_, raw, validator=None):
    """Convert ``raw`` (a string, or a native YAML value) to ``type_`` and validate it. None stays None."""
    if raw is None:
        return None
    value = _convert(key, type_, raw)
    if validator is not None and not validator.check(value):
        raise _invalid(key, raw, "must be %s" % validator.describe())
    return value


def _convert(key, type_, raw):
    if type_ in ("int", "long", "short"):
        lo, hi = _TYPE_BOUNDS[type_]
        if isinstance(raw, bool):
            raise _invalid(key, raw, "not a number of type %s" % type_)
        if isinstance(raw, int):
            v = raw
        else:
            s = str(raw).strip()
            if not re.fullmatch(r"[+-]?\d+", s):
                raise _invalid(key, raw, "not a number of type %s" % type_)
            v = int(s)
        if not lo <= v <= hi:
            raise _invalid(key, raw, "out of range for type %s [%d,...,%d]" % (type_, lo, hi))
        return v
    if type_ == "double":
        if isinstance(raw, bool):
            raise _invalid(key, raw, "not a number of type double")
        if isinstance(raw, (int, float)):
            return float(raw)
        try:
            v = float(str(raw).strip())
        except ValueError:
            raise _invalid(key, raw, "not a number of type double") from None
        if v != v:
            raise _invalid(key, raw, "not a number of type double")
        return v
    if type_ == "bool":
        if isinstance(raw, bool):
            return raw
        s = str(raw).strip().lower()
        if s == "true":
            return True
        if s == "false":
            return False
        raise _invalid(key, raw, "expected true or false")
    if type_ == "list":
        if isinstance(raw, (list, tuple)):
            return [str(x).strip() for x in raw if str(x).strip()]
        s = str(raw).strip()
        return [p.strip() for p in s.split(",") if p.strip()] if s else []
    if type_ == "password":
        return raw if isinstance(raw, Password) else Password(str(raw).strip())
    if type_ in ("string", "class"):
        if isinstance(raw, bool):
            return "true" if raw else "false"
        return str(raw).strip()
    raise ConfigError("unknown config type %r for %s" % (type_, key), key)


def format_value(value):
    """Kafka's string form of a typed value (DescribeConfigs, --check-config, /config znodes)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    if isinstance(value, Password):
        return value.value
    if isinstance(value, float):
        return repr(value)
    return str(value)


def format_default(value):
    """A default value inside a message: "unset" for None, "empty" for "" or [], else Kafka's string form."""
    if value is None:
        return "unset"
    if value == "" or value == []:
        return "empty"
    return format_value(value)


_TYPE_BOUNDS = {"int": (INT_MIN, INT_MAX), "long": (LONG_MIN, LONG_MAX), "short": (SHORT_MIN, SHORT_MAX)}
