"""The one cross-check of kbroker's message schemas against Kafka 3.9's JSON message specs (issue 9, item 8).

What is checked, against the spec file of the same name:

* every ``Api`` registered in ``kbroker.protocol.apis.APIS`` *when the tests run* (a schema module added to the
  package is checked without editing this file), request and response side;
* every ``RecordSchema`` defined in ``kbroker.coordinator.schemas`` / ``kbroker.coordinator.consumer_protocol``
  (``__consumer_offsets`` keys/values, consumer-protocol subscription/assignment), found the same way.

Per schema: ``apiKey`` and name, ``validVersions`` and ``flexibleVersions`` (equal: a client picks any version in
the range the broker advertises, so a version the schema skips would be a silent UNSUPPORTED_VERSION); then for
every version, recursively into nested structs (inline ``fields`` or ``commonStructs``):

* the ordered regular fields as (name, type, nullable, default), and
* the tagged fields by tag, with the same four attributes.

Names are Kafka's CamelCase in snake_case, a ``_`` before each upper-case letter that follows a lower-case letter or
a digit (``ThrottleTimeMs`` -> ``throttle_time_ms``, ``isKRaftController`` -> ``is_kraft_controller``). Types:
primitives by name, ``"[]"`` for an array of structs, ``"[]int32"``/``"[]string"`` for arrays of primitives,
``"{}"`` for a struct. Defaults: the spec's ``default`` (``"null"`` -> None, ``"0x7fffffff"`` -> int), else Kafka's
implicit zero value (0, 0.0, ``""``, False, ``b""``, the nil UUID, ``[]``) -- and None for ``records``, kbroker's
convention. ``ignorable`` and ``about`` do not reach the wire and are not compared.

Where the specs come from: ``reference_root()`` is ``$KBROKER_REFERENCE_DIR`` when set, else
``<repo>/../shared/reference`` (the CI checkout has ``shared/`` beside the repository); the specs are its
``kafka-message-specs/`` folder. When that folder is missing the tests **fail** under ``CI=true`` (GitHub Actions,
GitLab and most CI systems set it) and skip, naming the path looked at, elsewhere -- a check that skips silently
in CI is no check.

Failures list every difference of a schema at once, e.g. ``Fetch request v15 .topics[].partitions[]: regular
fields differ``, followed by both field lists.
"""
import functools
import importlib
import json
import os
import re
from pathlib import Path

import pytest

from kbroker.coordinator.schemas import RecordSchema
from kbroker.protocol.apis import APIS
from kbroker.protocol.schema import Api, Field as F, _in, parse_versions

REPO = Path(__file__).resolve().parents[2]
REFERENCE_ENV = "KBROKER_REFERENCE_DIR"
SPECS_FOLDER = "kafka-message-specs"
# Modules whose module-level RecordSchema objects are checked (the only ones kbroker defines).
RECORD_MODULES = ("kbroker.coordinator.schemas", "kbroker.coordinator.consumer_protocol")

PRIMITIVES = {"int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "bool", "uuid", "string", "bytes",
              "records"}
IMPLICIT_DEFAULTS = {"bool": False, "string": "", "bytes": b"", "records": None, "uuid": b"\x00" * 16,
                     "float64": 0.0}


# ---------------------------------------------------------------------------------------------------- locator

def in_ci(environ=None):
    """True when the CI variable says so (``CI=true``; ``1``/``yes`` accepted too)."""
    return (environ if environ is not None else os.environ).get("CI", "").strip().lower() in ("true", "1", "yes")


def reference_root(environ=None):
    """$KBROKER_REFERENCE_DIR, else ``<repo>/../shared/reference``."""
    env = environ if environ is not None else os.environ
    override = env.get(REFERENCE_ENV)
    return Path(override) if override else REPO.parent / "shared" / "reference"


def specs_dir(environ=None):
    return reference_root(environ) / SPECS_FOLDER


def require_specs(environ=None):
    """The spec folder, or the test's end: ``pytest.fail`` in CI, ``pytest.skip`` elsewhere."""
    path = specs_dir(environ)
    if path.is_dir():
        return path
    why = "Kafka's JSON message specs not found at %s (set %s to the shared/reference folder)" % (path,
                                                                                                 REFERENCE_ENV)
    if in_ci(environ):
        pytest.fail("CI=true: " + why + "; the schema cross-check may not be skipped in CI", pytrace=False)
    pytest.skip(why)


@pytest.fixture(scope="module")
def specs():
    return require_specs()


@functools.lru_cache(maxsize=None)
def load_spec(path):
    """A spec file as a dict (Kafka's JSON allows ``//`` comment lines; they are dropped first)."""
    with open(path, encoding="utf-8") as fh:
        return json.loads("".join(line for line in fh if not line.lstrip().startswith("//")))


def find_spec(root, name):
    """``<root>/<name>.json`` or ``<root>/<sub>/<name>.json`` (record schemas live in per-coordinator folders)."""
    hits = [root / (name + ".json")] + sorted(root.glob("*/%s.json" % name))
    hits = [p for p in hits if p.is_file()]
    assert hits, "no spec file %s.json under %s" % (name, root)
    return hits[0]


# ------------------------------------------------------------------------------------------------- comparison

def snake(name):
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def spec_type(f, common):
    """(kbroker type string, child field list or None) of a spec field."""
    t = f["type"]
    if t.startswith("[]"):
        if t[2:] in PRIMITIVES:
            return t, None
        return "[]", f.get("fields") or common[t[2:]]
    if t in PRIMITIVES:
        return t, None
    return "{}", f.get("fields") or common[t]


def spec_default(f, kind):
    """What a decoder yields for the field when the wire does not carry it; "struct" for nested structs."""
    if kind == "{}":
        return "struct"
    d = f.get("default")
    if d is None:
        return [] if kind.startswith("[") else IMPLICIT_DEFAULTS.get(kind, 0)
    if not isinstance(d, str):  # a few specs write a JSON number (InitProducerIdResponse)
        return d
    if d == "null":
        return None
    if kind == "bool":
        return {"true": True, "false": False}[d]
    if kind == "float64":
        return float(d)
    if kind in PRIMITIVES - {"string", "bytes", "records", "uuid"}:
        return int(d, 0)
    return d


def spec_struct(fields, v, common):
    """(regular [(name, type, nullable, default, children)], {tag: same}) of a spec struct at version v."""
    regular, tagged = [], {}
    for f in fields:
        if not _in(parse_versions(f["versions"]), v):
            continue
        kind, children = spec_type(f, common)
        entry = (snake(f["name"]), kind, _in(parse_versions(f.get("nullableVersions")), v), spec_default(f, kind),
                 children)
        if "tag" in f and _in(parse_versions(f.get("taggedVersions", f["versions"])), v):
            tagged[f["tag"]] = entry
        else:
            regular.append(entry)
    return regular, tagged


def our_struct(fields, v):
    regular, tagged = [], {}
    for f in fields:
        if not _in(f.versions, v):
            continue
        entry = (f.name, f.type, _in(f.nullable, v), "struct" if f.type == "{}" else f.default, f.fields)
        if f.tag is not None:
            tagged[f.tag] = entry
        else:
            regular.append(entry)
    return regular, tagged


def _shape(entries):
    return [e[:4] for e in entries]


def diff_struct(spec_fields, ours, v, common, where):
    """Every difference between a spec struct and ours at version v, as readable lines (recursive)."""
    problems = []
    s_reg, s_tag = spec_struct(spec_fields, v, common)
    o_reg, o_tag = our_struct(ours, v)
    if _shape(s_reg) != _shape(o_reg):
        problems.append("%s: regular fields differ\n      ours: %s\n      spec: %s"
                        % (where, _shape(o_reg), _shape(s_reg)))
    if {t: e[:4] for t, e in s_tag.items()} != {t: e[:4] for t, e in o_tag.items()}:
        problems.append("%s: tagged fields differ\n      ours: %s\n      spec: %s"
                        % (where, {t: e[:4] for t, e in sorted(o_tag.items())},
                           {t: e[:4] for t, e in sorted(s_tag.items())}))
    pairs = [(s, o) for s, o in zip(s_reg, o_reg)] + [(s_tag[t], o_tag[t]) for t in sorted(s_tag) if t in o_tag]
    for s, o in pairs:
        if s[4] is not None and o[4] is not None and s[0] == o[0]:
            suffix = "[]" if s[1] == "[]" else ""
            problems += diff_struct(s[4], o[4], v, common, "%s.%s%s" % (where, o[0], suffix))
    return problems


def diff_schema(spec, name, valid, flexible, fields, where, key=None):
    """Differences of one side (or one record schema) from its spec: header facts, then every version's fields."""
    problems = []
    if spec["name"] != name:
        problems.append("%s: spec name %s" % (where, spec["name"]))
    if key is not None and spec.get("apiKey") != key:
        problems.append("%s: api key %s, spec %s" % (where, key, spec.get("apiKey")))
    s_valid, s_flex = parse_versions(spec["validVersions"]), parse_versions(spec["flexibleVersions"])
    if valid != s_valid:
        problems.append("%s: valid versions %s, spec %s" % (where, valid, s_valid))
    if flexible != s_flex:
        problems.append("%s: flexible versions %s, spec %s" % (where, flexible, s_flex))
    common = {s["name"]: s["fields"] for s in spec.get("commonStructs", [])}
    lo, hi = max(valid[0], s_valid[0]), min(valid[1], s_valid[1])
    for v in range(lo, hi + 1):
        problems += diff_struct(spec["fields"], fields, v, common, "%s v%d" % (where, v))
    return problems


def api_problems(root, api, side):
    spec = load_spec(find_spec(root, api.name + side.capitalize()))
    fields = api.request_fields if side == "request" else api.response_fields
    problems = diff_schema(spec, api.name + side.capitalize(), api.valid, api.flexible, fields,
                           "%s %s" % (api.name, side), key=api.key)
    if spec.get("type") != side:
        problems.append("%s %s: spec type %s" % (api.name, side, spec.get("type")))
    return problems


def record_schemas():
    found = {}
    for modname in RECORD_MODULES:
        for value in vars(importlib.import_module(modname)).values():
            if isinstance(value, RecordSchema):
                found[value.name] = value
    return [found[n] for n in sorted(found)]


def _report(problems):
    return "%d difference(s) from Kafka's spec:\n  %s" % (len(problems), "\n  ".join(problems))


# ------------------------------------------------------------------------------------------------- the checks

API_SIDES = [(api, side) for _, api in sorted(APIS.items()) for side in ("request", "response")]


@pytest.mark.parametrize("api,side", API_SIDES, ids=["%s-%s" % (a.name, s) for a, s in API_SIDES])
def test_api_matches_spec(specs, api, side):
    problems = api_problems(specs, api, side)
    assert not problems, _report(problems)


RECORDS = record_schemas()


@pytest.mark.parametrize("schema", RECORDS, ids=[s.name for s in RECORDS])
def test_record_schema_matches_spec(specs, schema):
    spec = load_spec(find_spec(specs, schema.name))
    problems = diff_schema(spec, schema.name, schema.valid, schema.flexible, schema.fields, schema.name)
    assert not problems, _report(problems)


def test_discovery_covers_the_registry_and_the_records():
    # the parametrisation is built from the live registry: every key, both sides, no duplicate
    assert sorted({a.key for a, _ in API_SIDES}) == sorted(APIS) and len(API_SIDES) == 2 * len(APIS)
    assert {s.name for s in RECORDS} >= {"OffsetCommitKey", "OffsetCommitValue", "GroupMetadataKey",
                                         "GroupMetadataValue", "ConsumerProtocolSubscription",
                                         "ConsumerProtocolAssignment"}


# ---------------------------------------------------------------------------- the check catches what it should

def _fetch_like(request):
    """A copy of Fetch's schema with a different request field list."""
    real = APIS[1]
    return Api(key=real.key, name=real.name, valid="%d-%d" % real.valid, flexible="%d+" % real.flexible[0],
               request=request, response=real.response_fields)


def _replace(fields, name, new):
    return [new if f.name == name else f for f in fields]


def test_real_fetch_schema_has_no_differences(specs):
    assert api_problems(specs, _fetch_like(APIS[1].request_fields), "request") == []


@pytest.mark.parametrize("mutant,expected", [
    # nullability dropped from a top-level field
    (lambda fs: _replace(fs, "rack_id", F("rack_id", "string", "11+", nullable="11+")), "regular fields differ"),
    # renamed field
    (lambda fs: _replace(fs, "max_wait_ms", F("max_wait", "int32")), "regular fields differ"),
    # wrong default (Kafka's max_bytes default is 0x7fffffff)
    (lambda fs: _replace(fs, "max_bytes", F("max_bytes", "int32", "3+", default=0)), "regular fields differ"),
    # wrong type
    (lambda fs: _replace(fs, "isolation_level", F("isolation_level", "int16", "4+")), "regular fields differ"),
    # a tagged field missing (ClusterId, tag 0, v12+)
    (lambda fs: [f for f in fs if f.name != "cluster_id"], "tagged fields differ"),
    # two fields in the wrong order (max_wait_ms, min_bytes are positions 3 and 4; tagged fields may sit anywhere)
    (lambda fs: fs[:3] + [fs[4], fs[3]] + fs[5:], "regular fields differ"),
], ids=["nullable", "name", "default", "type", "tag", "order"])
def test_check_reports_each_kind_of_difference(specs, mutant, expected):
    problems = api_problems(specs, _fetch_like(mutant(list(APIS[1].request_fields))), "request")
    assert problems and all(expected in p for p in problems), problems


def test_check_descends_into_nested_structs(specs):
    topics = next(f for f in APIS[1].request_fields if f.name == "topics")
    parts = next(f for f in topics.fields if f.name == "partitions")
    bad_parts = F("partitions", "[]", fields=_replace(parts.fields, "fetch_offset", F("fetch_offset", "int32")))
    bad_topics = F("topics", "[]", fields=_replace(topics.fields, "partitions", bad_parts))
    problems = api_problems(specs, _fetch_like(_replace(list(APIS[1].request_fields), "topics", bad_topics)),
                            "request")
    # every version 0-17 reports the nested struct, by its path
    assert len(problems) == 18 and all(".topics[].partitions[]: regular fields differ" in p for p in problems)


def test_check_reports_version_ranges(specs):
    real = APIS[1]
    narrower = Api(key=1, name="Fetch", valid="0-16", flexible="12+", request=real.request_fields,
                   response=real.response_fields)
    assert api_problems(specs, narrower, "request") == ["Fetch request: valid versions (0, 16), spec (0, 17)"]
    other_key = Api(key=99, name="Fetch", valid="0-17", flexible="11+", request=real.request_fields,
                    response=real.response_fields)
    problems = api_problems(specs, other_key, "response")
    assert problems[:2] == ["Fetch response: api key 99, spec 1",
                            "Fetch response: flexible versions (11, 32767), spec (12, 32767)"]


def test_check_reports_record_schema_differences(specs):
    from kbroker.coordinator.schemas import OFFSET_COMMIT_VALUE as real
    # expire_timestamp exists only in v1 (v2+ expire by broker retention); "1+" would put it in v2-v4 too
    fields = _replace(real.fields, "expire_timestamp", F("expire_timestamp", "int64", "1+", default=-1))
    spec = load_spec(find_spec(specs, real.name))
    problems = diff_schema(spec, real.name, real.valid, real.flexible, fields, real.name)
    assert [p.split(":")[0] for p in problems] == ["OffsetCommitValue v2", "OffsetCommitValue v3",
                                                   "OffsetCommitValue v4"]


# ------------------------------------------------------------------------------------------------ the locator

def test_locator_defaults_to_shared_reference_beside_the_repo():
    assert reference_root({}) == REPO.parent / "shared" / "reference"
    assert specs_dir({}) == REPO.parent / "shared" / "reference" / "kafka-message-specs"


def test_locator_env_override(tmp_path):
    (tmp_path / SPECS_FOLDER).mkdir()
    env = {REFERENCE_ENV: str(tmp_path), "CI": "true"}
    assert require_specs(env) == tmp_path / SPECS_FOLDER


@pytest.mark.parametrize("value,ci", [("true", True), ("TRUE", True), ("1", True), ("", False), ("false", False),
                                      ("0", False)])
def test_ci_detection(value, ci):
    assert in_ci({"CI": value}) is ci
    assert in_ci({}) is False


def test_missing_reference_fails_under_ci(tmp_path):
    env = {REFERENCE_ENV: str(tmp_path / "absent"), "CI": "true"}
    with pytest.raises(pytest.fail.Exception, match="CI=true: .*absent/kafka-message-specs"):
        require_specs(env)


def test_missing_reference_skips_outside_ci(tmp_path):
    env = {REFERENCE_ENV: str(tmp_path / "absent")}
    with pytest.raises(pytest.skip.Exception, match="absent/kafka-message-specs"):
        require_specs(env)


def test_fixture_reads_the_process_environment(monkeypatch, tmp_path):
    # the `specs` fixture calls require_specs() with os.environ: the CI-fail path end to end
    monkeypatch.setenv(REFERENCE_ENV, str(tmp_path / "absent"))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception):
        require_specs()
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception):
        require_specs()
