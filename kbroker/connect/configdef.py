"""Kafka's ConfigDef: declarative config definitions, their parsing and their validation.

A ``ConfigDef`` is an ordered map name -> ``ConfigKey``. Two operations, with Kafka's semantics:

- ``parse(props)``: every defined key to its typed value (strings are parsed, already-typed values are checked),
  defaults filled in, validators run; the FIRST problem raises ``ConfigError`` with Kafka's message
  ("Invalid value x for configuration n: Value must be at least 1", "Missing required configuration \\"n\\" which
  has no default value."). Keys that are not defined are left out of the result (callers such as the worker config
  warn about them).
- ``validate(props)``: never raises for a bad value; one ``ConfigValue`` per key with every error message collected
  (what ``PUT /connector-plugins/{plugin}/config/validate`` reports), plus Kafka's recommender pass
  (recommended values and visibility, parents before their ``dependents``).

Types and their Python values (the REST spelling of a type is its name, e.g. ``"LIST"``):

=========  ===========================================================================================
BOOLEAN    bool; strings "true"/"false", case-insensitive, surrounding whitespace ignored
STRING     str, stripped
INT        int in [-2**31, 2**31 - 1];  SHORT: [-2**15, 2**15 - 1];  LONG: [-2**63, 2**63 - 1]
DOUBLE     float (ints accepted)
LIST       list of str; a string is split on commas with the whitespace around them (Kafka's
           ``\\s*,\\s*``); "" (after stripping) is the empty list
CLASS      a class object, or the stripped class name as given (plugins resolve names; Python cannot
           load Java's ``Class.forName``)
PASSWORD   ``Password`` (its str() is "[hidden]", so it never leaks into logs or the REST API)
=========  ===========================================================================================

As in Kafka, a default value is parsed and validated when the key is defined: a bad default is a programming
error and raises at definition time.
"""
import re

from kbroker.connect.exceptions import ConfigError

__all__ = [
    "NO_DEFAULT", "BOOLEAN", "STRING", "INT", "SHORT", "LONG", "DOUBLE", "LIST", "CLASS", "PASSWORD", "TYPES",
    "HIGH", "MEDIUM", "LOW", "NONE", "SHORT_WIDTH", "MEDIUM_WIDTH", "LONG_WIDTH",
    "Password", "ConfigKey", "ConfigValue", "ConfigDef", "Recommender",
    "Range", "ValidString", "ValidList", "CaseInsensitiveValidString", "NonEmptyString",
    "NonEmptyStringWithoutControlChars", "NonNullValidator", "CompositeValidator", "LambdaValidator",
    "convert_to_string", "key_info_json", "value_info_json", "java_str", "java_hash_set_order",
]


class _NoDefault:
    """The marker of a required key (Kafka's ``ConfigDef.NO_DEFAULT_VALUE``)."""
    __slots__ = ()

    def __repr__(self):
        return "NO_DEFAULT"


NO_DEFAULT = _NoDefault()

# Types (Kafka's ConfigDef.Type names, as the REST API spells them).
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = (
    "BOOLEAN", "STRING", "INT", "SHORT", "LONG", "DOUBLE", "LIST", "CLASS", "PASSWORD")
TYPES = (BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD)
# Importance.
HIGH, MEDIUM, LOW = "HIGH", "MEDIUM", "LOW"
_IMPORTANCES = (HIGH, MEDIUM, LOW)
# Width (NONE, SHORT, MEDIUM, LONG); the constants carry a suffix where a name clashes with a type or importance.
NONE, SHORT_WIDTH, MEDIUM_WIDTH, LONG_WIDTH = "NONE", "SHORT", "MEDIUM", "LONG"
_WIDTHS = ("NONE", "SHORT", "MEDIUM", "LONG")

# Integer bounds of Java's int, short and long: a value outside fails as Java's parse does ("Not a number of type").
_INT_BOUNDS = {INT: (-2 ** 31, 2 ** 31 - 1), SHORT: (-2 ** 15, 2 ** 15 - 1), LONG: (-2 ** 63, 2 ** 63 - 1)}
_INT_WORDS = {INT: "a 32-bit integer", SHORT: "a 16-bit integer", LONG: "a 64-bit integer"}
_COMMA = re.compile(r"\s*,\s*")
# Java's Integer.parseInt accepts an optional sign and decimal digits only (no "_", no spaces inside, no "0x").
_JAVA_INT = re.compile(r"[+-]?[0-9]+\Z")
# Java's Double.parseDouble: decimal or hex floats, NaN, Infinity; Python's float() also takes "inf"/"nan"/"1_0".
_JAVA_HEX_DOUBLE = re.compile(r"[+-]?0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?\d+[fFdD]?\Z")
_JAVA_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)[fFdD]?)\Z")


def java_str(value):
    """``value`` as Java's ``String.valueOf`` shows it in Kafka's messages: null, true/false, [a, b], {k=v}."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(java_str(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join("%s=%s" % (java_str(k), java_str(v)) for k, v in value.items()) + "}"
    if isinstance(value, type):
        return "class " + _class_name(value)
    return str(value)


def _class_name(cls):
    return getattr(cls, "KAFKA_CLASS", None) or "%s.%s" % (cls.__module__, cls.__qualname__)


def _type_name(value):
    """The Java class name Kafka's "but it was a ..." messages name for a Python value."""
    if isinstance(value, bool):
        return "java.lang.Boolean"
    if isinstance(value, int):
        return "java.lang.Long" if not -2 ** 31 <= value < 2 ** 31 else "java.lang.Integer"
    if isinstance(value, float):
        return "java.lang.Double"
    if isinstance(value, str):
        return "java.lang.String"
    if isinstance(value, (list, tuple)):
        return "java.util.ArrayList"
    if isinstance(value, dict):
        return "java.util.HashMap"
    return type(value).__qualname__


class Password:
    """A secret config value (Kafka's ``Password``): ``str()``/``repr()`` are "[hidden]"; ``.value`` is the text."""
    __slots__ = ("value",)
    HIDDEN = "[hidden]"

    def __init__(self, value):
        self.value = value

    def __str__(self):
        return self.HIDDEN

    __repr__ = __str__

    def __eq__(self, other):
        return isinstance(other, Password) and other.value == self.value

    def __hash__(self):
        return hash(self.value)


def _not_a_number(name, value, type_):
    raise ConfigError(name, value, "Not a number of type " + type_)


def parse_type(name, value, type_):
    """``value`` (a str or an already typed value) as ``type_``'s Python value; ConfigError in Kafka's words.

    None stays None (Kafka: a null value is not parsed; validators decide whether it is acceptable)."""
    if value is None:
        return None
    trimmed = value.strip() if isinstance(value, str) else None
    if type_ == BOOLEAN:
        if trimmed is not None:
            if trimmed.lower() == "true":
                return True
            if trimmed.lower() == "false":
                return False
        elif isinstance(value, bool):
            return value
        raise ConfigError(name, java_str(value), "Expected value to be either true or false")
    if type_ == PASSWORD:
        if isinstance(value, Password):
            return value
        if trimmed is not None:
            return Password(trimmed)
        raise ConfigError(name, java_str(value), "Expected value to be a string, but it was a " + _type_name(value))
    if type_ == STRING:
        if trimmed is not None:
            return trimmed
        raise ConfigError(name, java_str(value), "Expected value to be a string, but it was a " + _type_name(value))
    if type_ in _INT_BOUNDS:
        lo, hi = _INT_BOUNDS[type_]
        if trimmed is not None:
            if not _JAVA_INT.match(trimmed) or not lo <= int(trimmed) <= hi:
                raise ConfigError(name, value, "Not a number of type " + type_)
            return int(trimmed)
        if isinstance(value, int) and not isinstance(value, bool):
            if lo <= value <= hi:
                return value
        raise ConfigError(name, java_str(value),
                          "Expected value to be %s, but it was a %s" % (_INT_WORDS[type_], _type_name(value)))
    if type_ == DOUBLE:
        if trimmed is not None:
            if _JAVA_DOUBLE.match(trimmed):
                return float(trimmed.rstrip("fFdD").replace("Infinity", "inf"))
            try:
                # Java's parseDouble also reads hexadecimal floats ("0x1p-1")
                return float.fromhex(trimmed.rstrip("fFdD")) if _JAVA_HEX_DOUBLE.match(trimmed) else \
                    _not_a_number(name, value, type_)
            except ValueError:
                _not_a_number(name, value, type_)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise ConfigError(name, java_str(value), "Expected value to be a double, but it was a " + _type_name(value))
    if type_ == LIST:
        if isinstance(value, (list, tuple)):
            return list(value)
        if trimmed is not None:
            return _COMMA.split(trimmed) if trimmed else []
        raise ConfigError(name, java_str(value), "Expected a comma separated list.")
    if type_ == CLASS:
        if isinstance(value, type):
            return value
        if trimmed is not None:
            return trimmed
        raise ConfigError(name, java_str(value), "Expected a Class instance or class name.")
    raise ValueError("unknown config type %r" % (type_,))


def convert_to_string(value, type_=None):
    """A parsed value as the REST API shows it (Kafka's ``ConfigDef.convertToString``): None stays None; LIST
    joined with ","; PASSWORD "[hidden]"; booleans "true"/"false"; CLASS the class name."""
    if value is None:
        return None
    if type_ == LIST or (type_ is None and isinstance(value, (list, tuple))):
        return ",".join(java_str(v) for v in value)
    if isinstance(value, type):
        return _class_name(value)
    return java_str(value)          # floats: Python's "1.0" as Java's Double.toString (1e7 and up differ)


# ----------------------------------------------------------------------------------------------------- validators
class Range:
    """A numeric range (Kafka's ``Range.atLeast`` / ``Range.between``); None is refused ("Value must be non-null")."""

    def __init__(self, min_=None, max_=None):
        self.min = min_
        self.max = max_

    @classmethod
    def at_least(cls, n):
        return cls(n, None)

    @classmethod
    def between(cls, a, b):
        return cls(a, b)

    def ensure_valid(self, name, value):
        if value is None:
            raise ConfigError(name, "null", "Value must be non-null")
        if self.min is not None and value < self.min:
            raise ConfigError(name, java_str(value), "Value must be at least %s" % (self.min,))
        if self.max is not None and value > self.max:
            raise ConfigError(name, java_str(value), "Value must be no more than %s" % (self.max,))

    def __str__(self):
        if self.min is None:
            return "[...,%s]" % (self.max,)
        if self.max is None:
            return "[%s,...]" % (self.min,)
        return "[%s,...,%s]" % (self.min, self.max)


class ValidString:
    """One of a fixed set of strings, case-sensitive (Kafka's ``ValidString.in``)."""

    def __init__(self, names):
        self.valid = list(names)

    @classmethod
    def in_(cls, *names):
        return cls(names)

    def ensure_valid(self, name, value):
        if value not in self.valid:
            raise ConfigError(name, java_str(value), "String must be one of: " + ", ".join(self.valid))

    def __str__(self):
        return "[" + ", ".join(self.valid) + "]"


def _java_string_hash(s):
    """Java's String.hashCode (over UTF-16 code units, 32-bit)."""
    h = 0
    units = s.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h


def java_hash_set_order(strings):
    """The iteration order of a java.util.HashSet after adding ``strings`` in order (Kafka prints some sets in its
    messages, so its texts depend on it): buckets by (hash ^ hash >>> 16) & (table size - 1), insertion order
    within a bucket; the table (16) doubles when the size passes 0.75 of it, and also when a bucket reaches 9
    entries while the table is below 64 (HashMap.treeifyBin resizes small tables instead of making a tree)."""
    cap, size = 16, 0
    table = [[] for _ in range(cap)]

    def grow():
        nonlocal cap, table
        cap *= 2
        bigger = [[] for _ in range(cap)]
        for chain in table:
            for entry in chain:          # a split keeps the relative order within each new bucket
                bigger[entry[0] & (cap - 1)].append(entry)
        table = bigger

    for s in strings:
        h = _java_string_hash(s)
        h ^= h >> 16
        chain = table[h & (cap - 1)]
        if any(e[1] == s for e in chain):
            continue
        chain.append((h, s))
        if len(chain) >= 9 and cap < 64:
            grow()
        size += 1
        if size > cap * 0.75:
            grow()
    return [e[1] for chain in table for e in chain]


class CaseInsensitiveValidString:
    """One of a fixed set of strings, ignoring case (Kafka's ``CaseInsensitiveValidString.in``). Kafka keeps the
    names upper-cased in a HashSet and lists them in its order: "String must be one of (case insensitive): ALL,
    NONE" for ("none", "all")."""

    def __init__(self, names):
        upper = list(dict.fromkeys(n.upper() for n in names))
        self.valid = java_hash_set_order(upper)
        self._upper = set(upper)

    @classmethod
    def in_(cls, *names):
        return cls(names)

    def ensure_valid(self, name, value):
        if value is None or value.upper() not in self._upper:
            raise ConfigError(name, java_str(value),
                              "String must be one of (case insensitive): " + ", ".join(self.valid))

    def __str__(self):
        return "(case insensitive) [" + ", ".join(self.valid) + "]"


class ValidList:
    """A list whose every element is one of ``names`` (Kafka's ``ValidList.in``)."""

    def __init__(self, names):
        self._string = ValidString(names)

    @classmethod
    def in_(cls, *names):
        return cls(names)

    def ensure_valid(self, name, value):
        if value is None:
            raise ConfigError(name, "null", "Value must be non-null")
        for item in value:
            self._string.ensure_valid(name, item)

    def __str__(self):
        return str(self._string)


class NonEmptyString:
    """Kafka's ``NonEmptyString``: null passes (Kafka checks only a present value), "" is refused."""

    def ensure_valid(self, name, value):
        if value is not None and value == "":
            raise ConfigError(name, value, "String must be non-empty")

    def __str__(self):
        return "non-empty string"


class NonEmptyStringWithoutControlChars:
    """Kafka's validator of connector names: "" is refused, and ISO control characters (U+0000-U+001F,
    U+007F-U+009F) too; null passes (a missing required name is reported as missing, once)."""

    def ensure_valid(self, name, value):
        if value is None:
            return
        if value == "":
            raise ConfigError(name, value, "String may not be empty")
        bad = [c for c in value if ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F]
        if bad:
            raise ConfigError(name, value, "String may not contain control sequences but had the following ASCII "
                              "chars: " + ", ".join(str(ord(c)) for c in bad))

    def __str__(self):
        return "non-empty string without ISO control characters"


class NonNullValidator:
    def ensure_valid(self, name, value):
        if value is None:
            raise ConfigError(name, "null", "Entry must be non null")

    def __str__(self):
        return "non-null string"


class CompositeValidator:
    """Every validator in turn (Kafka's ``CompositeValidator.of``)."""

    def __init__(self, validators):
        self.validators = list(validators)

    @classmethod
    def of(cls, *validators):
        return cls(validators)

    def ensure_valid(self, name, value):
        for v in self.validators:
            _ensure_valid(v, name, value)

    def __str__(self):
        return ", ".join(str(v) for v in self.validators)


class LambdaValidator:
    """A validator from a function ``f(name, value)`` raising ConfigError, and its description."""

    def __init__(self, func, description=""):
        self.func = func
        self.description = description

    @classmethod
    def with_(cls, func, description=""):
        return cls(func, description)

    def ensure_valid(self, name, value):
        self.func(name, value)

    def __str__(self):
        return self.description


def _ensure_valid(validator, name, value):
    """A validator is an object with ``ensure_valid(name, value)`` or a plain function of (name, value)."""
    if hasattr(validator, "ensure_valid"):
        validator.ensure_valid(name, value)
    else:
        validator(name, value)


class Recommender:
    """Kafka's Recommender: ``valid_values(name, parsed) -> list`` and ``visible(name, parsed) -> bool``, where
    ``parsed`` maps every key parsed so far to its typed value."""

    def valid_values(self, name, parsed):
        return []

    def visible(self, name, parsed):
        return True


# ------------------------------------------------------------------------------------------------ keys and values
class ConfigKey:
    """One defined key; its attributes are ``ConfigDef.define``'s arguments (``default`` parsed)."""
    __slots__ = ("name", "type", "default", "validator", "importance", "documentation", "group", "order_in_group",
                 "width", "display_name", "dependents", "recommender")

    def __init__(self, name, type, default=NO_DEFAULT, validator=None, importance=HIGH, documentation="",
                 group=None, order_in_group=-1, width=NONE, display_name=None, dependents=(), recommender=None):
        if type not in TYPES:
            raise ValueError("unknown config type %r for %s" % (type, name))
        if importance not in _IMPORTANCES:
            raise ValueError("unknown importance %r for %s" % (importance, name))
        if width not in _WIDTHS:
            raise ValueError("unknown width %r for %s" % (width, name))
        self.name = name
        self.type = type
        self.default = default if default is NO_DEFAULT else parse_type(name, default, type)
        self.validator = validator
        if validator is not None and self.default is not NO_DEFAULT:
            _ensure_valid(validator, name, self.default)
        self.importance = importance
        self.documentation = documentation
        self.group = group
        self.order_in_group = order_in_group
        self.width = width
        self.display_name = name if display_name is None else display_name
        self.dependents = list(dependents)
        self.recommender = recommender

    @property
    def has_default(self):
        return self.default is not NO_DEFAULT

    def __repr__(self):
        return "ConfigKey(%r, %s, default=%r)" % (self.name, self.type, self.default)


class ConfigValue:
    """The validation result of one key (Kafka's ``ConfigValue``)."""
    __slots__ = ("name", "value", "recommended_values", "errors", "visible")

    def __init__(self, name, value=None, recommended_values=None, errors=None, visible=True):
        self.name = name
        self.value = value
        self.recommended_values = list(recommended_values or [])
        self.errors = list(errors or [])
        self.visible = visible

    def add_error(self, message):
        self.errors.append(message)

    def __eq__(self, other):
        return isinstance(other, ConfigValue) and all(
            getattr(self, a) == getattr(other, a) for a in self.__slots__)

    def __repr__(self):
        return "ConfigValue(%r, value=%r, recommended_values=%r, errors=%r, visible=%r)" % (
            self.name, self.value, self.recommended_values, self.errors, self.visible)


def _missing_message(name):
    return 'Missing required configuration "%s" which has no default value.' % name


def _missing(name):
    err = ConfigError(_missing_message(name))
    err.name = name
    return err


class ConfigDef:
    """An ordered set of ConfigKeys; see the module docstring."""

    def __init__(self, base=None):
        self._keys = dict(base._keys) if base is not None else {}
        self._groups = list(base._groups) if base is not None else []

    def define(self, name, type, default=NO_DEFAULT, validator=None, importance=HIGH, documentation="",
               group=None, order_in_group=-1, width=NONE, display_name=None, dependents=(), recommender=None):
        """Adds a key and returns self (chainable). Defining a name twice is an error (Kafka: "Configuration x is
        defined twice.")."""
        return self.define_key(ConfigKey(name, type, default, validator, importance, documentation, group,
                                         order_in_group, width, display_name, dependents, recommender))

    def define_key(self, key):
        if key.name in self._keys:
            raise ConfigError("Configuration %s is defined twice." % key.name)
        if key.group is not None and key.group not in self._groups:
            self._groups.append(key.group)
        self._keys[key.name] = key
        return self

    def keys(self):
        """name -> ConfigKey, in definition order."""
        return dict(self._keys)

    def names(self):
        return list(self._keys)

    def groups(self):
        """Group names in the order their first key was defined (the validate endpoint's ``groups``)."""
        return list(self._groups)

    def __contains__(self, name):
        return name in self._keys

    def __len__(self):
        return len(self._keys)

    def merge(self, other):
        """A new ConfigDef with this one's keys then ``other``'s; a key in both keeps this one's definition
        (the connector's own keys never replace the common connector keys)."""
        merged = ConfigDef(self)
        for name, key in other._keys.items():
            if name not in merged._keys:
                merged.define_key(key)
        return merged

    def embed(self, prefix, group, starting_order, child):
        """Adds ``child``'s keys as ``prefix + name`` in ``group``, ordered from ``starting_order`` (Kafka's
        ``ConfigDef.embed``: how a connector's definition gains ``transforms.<alias>.*`` keys)."""
        for i, key in enumerate(child._keys.values()):
            self.define(prefix + key.name, key.type, key.default, key.validator, key.importance, key.documentation,
                        group, starting_order + i, key.width, key.display_name,
                        [prefix + d for d in key.dependents],
                        _PrefixedRecommender(prefix, key.recommender) if key.recommender else None)
        return self

    # ---------------------------------------------------------------------------------------------------- parse
    def parse(self, props):
        """Typed values of every defined key; ConfigError (Kafka's message) on the first problem."""
        self._check_dependents()
        values = {}
        for key in self._keys.values():
            if key.name in props:
                value = parse_type(key.name, props[key.name], key.type)
            elif key.default is NO_DEFAULT:
                raise _missing(key.name)
            else:
                value = key.default
            if key.validator is not None:
                _ensure_valid(key.validator, key.name, value)
            values[key.name] = value
        return values

    def _undefined_dependents(self):
        return sorted({d for k in self._keys.values() for d in k.dependents if d not in self._keys})

    def _check_dependents(self):
        undefined = self._undefined_dependents()
        if undefined:
            raise ConfigError("Some configurations in are referred in the dependents, but not defined: "
                              + ",".join(undefined))

    # ------------------------------------------------------------------------------------------------- validate
    def validate(self, props):
        """One ConfigValue per defined key, in definition order (then any undefined dependent), errors collected."""
        return list(self.validate_all(props).values())

    def validate_all(self, props):
        values = {name: ConfigValue(name) for name in self._keys}
        for name in self._undefined_dependents():
            values[name] = ConfigValue(name, errors=[name + " is referred in the dependents, but not defined."],
                                       visible=False)
        parsed = {}
        roots = self._roots()
        for name in roots:
            self._parse_for_validate(name, props, parsed, values, set())
        for name in roots:
            self._recommend(name, parsed, values, set())
        return values

    def _roots(self):
        children = {d for k in self._keys.values() for d in k.dependents}
        return [name for name in self._keys if name not in children]

    def _parse_for_validate(self, name, props, parsed, values, seen):
        key = self._keys.get(name)
        if key is None or name in seen:      # undefined dependent, or a cycle in dependents
            return
        seen.add(name)
        cv = values[name]
        value = None
        if name in props:
            try:
                value = parse_type(name, props[name], key.type)
            except ConfigError as e:
                cv.add_error(str(e))
        elif key.default is NO_DEFAULT:
            cv.add_error(_missing_message(name))
        else:
            value = key.default
        if key.validator is not None:
            # As Kafka: the validator also sees None after a parse failure and may add its own message.
            try:
                _ensure_valid(key.validator, name, value)
            except ConfigError as e:
                cv.add_error(str(e))
        cv.value = value
        parsed[name] = value
        for dep in key.dependents:
            self._parse_for_validate(dep, props, parsed, values, seen)

    def _recommend(self, name, parsed, values, seen):
        key = self._keys.get(name)
        if key is None or name in seen:
            return
        seen.add(name)
        cv = values[name]
        if key.recommender is not None:
            try:
                recommended = list(key.recommender.valid_values(name, parsed))
                if cv.recommended_values:
                    allowed = cv.recommended_values
                    recommended = [r for r in recommended if r in allowed]
                cv.recommended_values = recommended
                cv.visible = bool(key.recommender.visible(name, parsed))
            except ConfigError as e:
                cv.add_error(str(e))
        for dep in key.dependents:
            self._recommend(dep, parsed, values, seen)


class _PrefixedRecommender(Recommender):
    """A child's recommender seen through ``embed``: it gets the parsed values with the prefix stripped."""

    def __init__(self, prefix, inner):
        self.prefix = prefix
        self.inner = inner

    def _strip(self, parsed):
        n = len(self.prefix)
        return {k[n:]: v for k, v in parsed.items() if k.startswith(self.prefix)}

    def valid_values(self, name, parsed):
        return self.inner.valid_values(name[len(self.prefix):], self._strip(parsed))

    def visible(self, name, parsed):
        return self.inner.visible(name[len(self.prefix):], self._strip(parsed))


# ------------------------------------------------------------------------------------------------ REST renderings
def key_info_json(key):
    """Kafka's ConfigKeyInfo JSON (the validate endpoint's ``definition``); the default as a string
    (``convert_to_string``), None with ``"required": true`` when there is none."""
    return {
        "name": key.name,
        "type": key.type,
        "required": not key.has_default,
        "default_value": convert_to_string(key.default, key.type) if key.has_default else None,
        "importance": key.importance,
        "documentation": key.documentation,
        "group": key.group,
        "width": key.width,
        "display_name": key.display_name,
        "dependents": list(key.dependents),
        "order_in_group": key.order_in_group,     # Kafka's ConfigKeyInfo JSON name (checked against Kafka 4.3)
    }


def value_info_json(value, type_=None):
    """Kafka's ConfigValueInfo JSON (the validate endpoint's ``value``): the value and the recommended values as
    strings (PASSWORD "[hidden]"); ``type_`` is the key's type when known (LIST recommendations are rendered as
    STRING, as Kafka's)."""
    rec_type = STRING if type_ == LIST else type_
    return {
        "name": value.name,
        "value": convert_to_string(value.value, type_),
        "recommended_values": [convert_to_string(r, rec_type) for r in value.recommended_values],
        "errors": list(value.errors),
        "visible": value.visible,
    }
