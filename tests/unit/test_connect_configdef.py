"""kbroker.connect.configdef: Kafka's ConfigDef parsing, validation messages and the validate endpoint's JSON."""
import pytest

from kbroker.connect.configdef import (
    BOOLEAN, CLASS, DOUBLE, INT, LIST, LONG, PASSWORD, SHORT, STRING, NO_DEFAULT, CaseInsensitiveValidString,
    CompositeValidator, ConfigDef, ConfigValue, NonEmptyString, NonEmptyStringWithoutControlChars, Password, Range,
    Recommender, ValidList, ValidString, key_info_json, value_info_json)
from kbroker.connect.exceptions import ConfigError


def _def():
    return (ConfigDef()
            .define("name", STRING, validator=NonEmptyStringWithoutControlChars(), group="Common",
                    order_in_group=1, width="MEDIUM", display_name="Connector name")
            .define("tasks.max", INT, 1, Range.at_least(1), "HIGH", "Maximum number of tasks", "Common", 3)
            .define("topics", LIST, "", importance="HIGH", group="Common", order_in_group=4, width="LONG")
            .define("errors.tolerance", STRING, "none", CaseInsensitiveValidString.in_("none", "all"),
                    "MEDIUM", group="Error Handling")
            .define("flag", BOOLEAN, False, importance="LOW")
            .define("ratio", DOUBLE, 0.5, Range.between(0, 1))
            .define("big", LONG, 10)
            .define("small", SHORT, 1)
            .define("secret", PASSWORD, None)
            .define("cls", CLASS, None))


def test_parse_types_defaults_and_trimming():
    d = _def()
    out = d.parse({"name": " c1 ", "tasks.max": " 3 ", "topics": " a ,b,  c ", "flag": "TRUE", "ratio": "0.25",
                   "big": "9223372036854775807", "small": "-32768", "secret": "pw", "cls": " a.B ",
                   "undefined.key": "ignored"})
    assert out == {"name": "c1", "tasks.max": 3, "topics": ["a", "b", "c"], "errors.tolerance": "none",
                   "flag": True, "ratio": 0.25, "big": 2 ** 63 - 1, "small": -32768, "secret": Password("pw"),
                   "cls": "a.B"}
    assert str(out["secret"]) == "[hidden]" and out["secret"].value == "pw"
    assert d.parse({"name": "x", "topics": "  "})["topics"] == []
    # already-typed values pass through; Java's double syntax (hex, suffixes) is read
    assert d.parse({"name": "x", "tasks.max": 7, "flag": True, "ratio": 1})["ratio"] == 1.0
    assert [d.parse({"name": "x", "ratio": r})["ratio"] for r in ("0x1p-1", ".5", "5e-1", "0.5f")] == [0.5] * 4


@pytest.mark.parametrize("props,message", [
    ({}, 'Missing required configuration "name" which has no default value.'),
    ({"name": "x", "tasks.max": "0"}, "Invalid value 0 for configuration tasks.max: Value must be at least 1"),
    ({"name": "x", "tasks.max": "abc"}, "Invalid value abc for configuration tasks.max: Not a number of type INT"),
    ({"name": "x", "tasks.max": "2147483648"},
     "Invalid value 2147483648 for configuration tasks.max: Not a number of type INT"),
    ({"name": "x", "small": "32768"}, "Invalid value 32768 for configuration small: Not a number of type SHORT"),
    ({"name": "x", "tasks.max": 1.5},
     "Invalid value 1.5 for configuration tasks.max: Expected value to be a 32-bit integer, but it was a "
     "java.lang.Double"),
    ({"name": "x", "flag": "yes"}, "Invalid value yes for configuration flag: Expected value to be either true "
                                   "or false"),
    ({"name": "x", "ratio": "2"}, "Invalid value 2.0 for configuration ratio: Value must be no more than 1"),
    ({"name": "x", "ratio": "1_0"}, "Invalid value 1_0 for configuration ratio: Not a number of type DOUBLE"),
    ({"name": "x", "ratio": "0x1p+1"}, "Invalid value 2.0 for configuration ratio: Value must be no more than 1"),
    ({"name": "x", "errors.tolerance": "some"},
     "Invalid value some for configuration errors.tolerance: String must be one of (case insensitive): ALL, NONE"),
    ({"name": ""}, "Invalid value  for configuration name: String may not be empty"),
    ({"name": "a\tb"}, "Invalid value a\tb for configuration name: String may not contain control sequences but "
                       "had the following ASCII chars: 9"),
    ({"name": "x", "topics": 5}, "Invalid value 5 for configuration topics: Expected a comma separated list."),
])
def test_parse_errors_have_kafkas_messages(props, message):
    with pytest.raises(ConfigError) as e:
        _def().parse(props)
    assert str(e.value) == message


def test_case_insensitive_accepts_any_case_and_keeps_value():
    assert _def().parse({"name": "x", "errors.tolerance": "ALL"})["errors.tolerance"] == "ALL"
    # Kafka lists the names from a java.util.HashSet; this order is what Kafka 4.4.0 prints for the same names
    # (colliding hashes make the table grow to 64 buckets)
    many = CaseInsensitiveValidString.in_("none", "all", "x", "Some", "other", "a1", "b2", "c3", "d4", "e5", "f6",
                                          "g7", "h8", "i9")
    with pytest.raises(ConfigError, match="one of \\(case insensitive\\): ALL, A1, C3, E5, G7, I9, SOME, X, NONE, "
                                          "OTHER, B2, D4, F6, H8$"):
        many.ensure_valid("k", "zz")


def test_validators_messages():
    with pytest.raises(ConfigError, match="^Invalid value c for configuration k: String must be one of: a, b$"):
        ValidString.in_("a", "b").ensure_valid("k", "c")
    with pytest.raises(ConfigError, match="^Invalid value z for configuration k: String must be one of: x, y$"):
        ValidList.in_("x", "y").ensure_valid("k", ["x", "z"])
    ValidList.in_("x", "y").ensure_valid("k", ["y", "x"])
    with pytest.raises(ConfigError, match="^Invalid value  for configuration k: String must be non-empty$"):
        NonEmptyString().ensure_valid("k", "")
    with pytest.raises(ConfigError, match="Value must be non-null"):
        Range.at_least(0).ensure_valid("k", None)
    with pytest.raises(ConfigError, match="Value must be at least 1"):
        CompositeValidator.of(Range.at_least(1), Range.between(0, 9)).ensure_valid("k", 0)
    assert str(Range.between(1, 5)) == "[1,...,5]" and str(Range.at_least(0)) == "[0,...]"


def test_bad_default_and_double_definition_are_programming_errors():
    with pytest.raises(ConfigError, match="Value must be at least 1"):
        ConfigDef().define("k", INT, 0, Range.at_least(1))
    with pytest.raises(ConfigError, match="^Configuration k is defined twice.$"):
        ConfigDef().define("k", INT, 0).define("k", INT, 1)


def test_validate_collects_every_error_never_raises():
    values = {v.name: v for v in _def().validate({"tasks.max": "x", "errors.tolerance": "foo", "topics": "a,b"})}
    assert list(values) == ["name", "tasks.max", "topics", "errors.tolerance", "flag", "ratio", "big", "small",
                            "secret", "cls"]
    assert values["name"].errors == ['Missing required configuration "name" which has no default value.']
    # as Kafka: the validator also sees the null a failed parse leaves
    assert values["tasks.max"].errors == ["Invalid value x for configuration tasks.max: Not a number of type INT",
                                          "Invalid value null for configuration tasks.max: Value must be non-null"]
    assert values["tasks.max"].value is None
    assert values["topics"] == ConfigValue("topics", ["a", "b"], [], [], True)
    assert values["errors.tolerance"].errors == [
        "Invalid value foo for configuration errors.tolerance: String must be one of (case insensitive): ALL, NONE"]
    assert sum(len(v.errors) for v in values.values()) == 4


def test_recommender_and_dependents():
    class Rec(Recommender):
        def valid_values(self, name, parsed):
            return ["a", "b"] if parsed.get("mode") == "ab" else ["c"]

        def visible(self, name, parsed):
            return parsed.get("mode") == "ab"

    d = (ConfigDef().define("mode", STRING, "ab", dependents=["choice"])
         .define("choice", STRING, "a", recommender=Rec()))
    vals = {v.name: v for v in d.validate({})}
    assert vals["choice"].recommended_values == ["a", "b"] and vals["choice"].visible is True
    vals = {v.name: v for v in d.validate({"mode": "c"})}
    assert vals["choice"].recommended_values == ["c"] and vals["choice"].visible is False
    bad = ConfigDef().define("x", STRING, "", dependents=["nope"])
    vals = {v.name: v for v in bad.validate({})}
    assert vals["nope"].errors == ["nope is referred in the dependents, but not defined."]
    assert vals["nope"].visible is False
    with pytest.raises(ConfigError, match="referred in the dependents, but not defined: nope"):
        bad.parse({})


def test_merge_and_embed():
    common = ConfigDef().define("name", STRING, group="Common")
    own = ConfigDef().define("file", STRING, "", group="File").define("name", INT, 1)
    merged = common.merge(own)
    assert merged.names() == ["name", "file"] and merged.keys()["name"].type == STRING
    assert merged.groups() == ["Common", "File"]
    assert common.names() == ["name"]                 # merge builds a new def
    child = ConfigDef().define("field", STRING).define("replacement", STRING, None)
    d = ConfigDef().embed("transforms.mask.", "Transforms: mask", 5, child)
    keys = d.keys()
    assert list(keys) == ["transforms.mask.field", "transforms.mask.replacement"]
    assert keys["transforms.mask.replacement"].order_in_group == 6
    assert keys["transforms.mask.field"].group == "Transforms: mask"


def test_key_info_json_is_kafkas_config_key_info():
    keys = _def().keys()
    assert key_info_json(keys["tasks.max"]) == {
        "name": "tasks.max", "type": "INT", "required": False, "default_value": "1", "importance": "HIGH",
        "documentation": "Maximum number of tasks", "group": "Common", "width": "NONE",
        "display_name": "tasks.max", "dependents": [], "order_in_group": 3}
    name = key_info_json(keys["name"])
    assert name["required"] is True and name["default_value"] is None and name["display_name"] == "Connector name"
    assert name["width"] == "MEDIUM" and name["order_in_group"] == 1
    assert key_info_json(keys["flag"])["default_value"] == "false"
    assert key_info_json(keys["ratio"])["default_value"] == "0.5"
    assert key_info_json(keys["topics"])["default_value"] == ""
    assert key_info_json(keys["secret"])["default_value"] is None     # a null default is not "required"
    assert key_info_json(keys["secret"])["required"] is False
    assert NO_DEFAULT is not None


def test_value_info_json_renders_strings_and_hides_passwords():
    d = _def()
    vals = {v.name: v for v in d.validate({"name": "n", "topics": "a, b", "secret": "s3cret", "flag": "true"})}
    types = {n: k.type for n, k in d.keys().items()}
    assert value_info_json(vals["topics"], types["topics"]) == {
        "name": "topics", "value": "a,b", "recommended_values": [], "errors": [], "visible": True}
    assert value_info_json(vals["secret"], types["secret"])["value"] == "[hidden]"
    assert value_info_json(vals["secret"])["value"] == "[hidden]"          # without the type too
    assert value_info_json(vals["flag"], types["flag"])["value"] == "true"
    assert value_info_json(vals["tasks.max"], types["tasks.max"])["value"] == "1"
    assert value_info_json(vals["cls"], types["cls"])["value"] is None
