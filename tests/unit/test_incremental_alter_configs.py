"""IncrementalAlterConfigs (44): schema against Kafka's JSON spec, exact bytes, operation semantics, the handler.

The schema's comparison with Kafka's JSON spec is tests/unit/test_schemas_reference.py (every registered API); the
round trips reuse tests/unit/test_schemas_client.py's generators. The
handler runs against a fake topic-admin collaborator holding topic overrides the way kbroker's TopicAdmin reports
them (``describe_topic_config`` entries with Kafka's config_source ids, ``alter_topic_config`` replacing the set).
"""
import pytest

from kbroker.handlers import registry
from kbroker import errors
from kbroker.handlers.incremental_alter_configs import apply_ops, check_ops, incremental_alter_configs
from kbroker.protocol.apis import APIS
from kbroker.server.router import Router
from kbroker.topic_admin import ConfigDescription
from tests.unit.ctx import make_ctx
from tests.unit import test_schemas_client as sc

MOD, SPEC = "incremental_alter_configs", "IncrementalAlterConfigs"
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


# ------------------------------------------------------------------------------------------------- schema

def test_registered_under_key_44():
    assert APIS[44] is sc.api_of(MOD) and APIS[44].name == SPEC


@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
@pytest.mark.parametrize("v", [0, 1])
def test_round_trip(v, nulls):
    sc.test_round_trip(MOD, v, nulls)


REQUEST = {"resources": [{"resource_type": 2, "resource_name": "t",
                          "configs": [{"name": "a", "config_operation": 1, "value": None}]}],
           "validate_only": True}


def test_request_v0_bytes():
    wire = sc.api_of(MOD).encode_request(0, REQUEST).getvalue()
    # resources: int32 count 1 | int8 type 2 | string "t" | configs: int32 1 | string "a" | int8 op 1 |
    # nullable string null (-1) | bool validate_only
    assert wire == (b"\x00\x00\x00\x01" + b"\x02" + b"\x00\x01t" + b"\x00\x00\x00\x01" + b"\x00\x01a" + b"\x01"
                    + b"\xff\xff" + b"\x01")


def test_request_v1_bytes_are_compact_with_tag_sections():
    wire = sc.api_of(MOD).encode_request(1, REQUEST).getvalue()
    # compact arrays/strings (length + 1), null compact string = 0, an empty tag section (0) after every struct
    assert wire == (b"\x02" + b"\x02" + b"\x02t" + b"\x02" + b"\x02a" + b"\x01" + b"\x00" + b"\x00"
                    + b"\x00" + b"\x01" + b"\x00")


def test_response_v1_bytes():
    resp = {"throttle_time_ms": 0, "responses": [{"error_code": 40, "error_message": "bad", "resource_type": 2,
                                                  "resource_name": "t"}]}
    wire = sc.api_of(MOD).encode_response(1, resp).getvalue()
    assert wire == (b"\x00\x00\x00\x00" + b"\x02" + b"\x00\x28" + b"\x04bad" + b"\x02" + b"\x02t" + b"\x00"
                    + b"\x00")


def test_router_advertises_v0_v1():
    assert (44, 0, 1) in Router(registry()).api_versions()


# ------------------------------------------------------------------------------------------------- operations

EFFECTIVE = {"cleanup.policy": "delete", "retention.ms": "604800000",
             "leader.replication.throttled.replicas": ""}


def test_set_and_delete():
    got = apply_ops({"retention.ms": "5", "segment.ms": "9"}, EFFECTIVE,
                    [("retention.ms", SET, "7"), ("segment.ms", DELETE, None), ("flush.ms", DELETE, None),
                     ("max.message.bytes", SET, "2048")])
    assert got == {"retention.ms": "7", "max.message.bytes": "2048"}


def test_append_to_unset_key_starts_from_the_effective_value():
    assert apply_ops({}, EFFECTIVE, [("cleanup.policy", APPEND, "compact")]) == {"cleanup.policy": "delete,compact"}


def test_append_keeps_existing_items_once_and_appends_in_order():
    got = apply_ops({"cleanup.policy": "compact"}, EFFECTIVE, [("cleanup.policy", APPEND, "compact,delete")])
    assert got == {"cleanup.policy": "compact,delete"}
    got = apply_ops({}, EFFECTIVE, [("leader.replication.throttled.replicas", APPEND, "0:1, 1:2")])
    assert got == {"leader.replication.throttled.replicas": "0:1,1:2"}


def test_subtract_removes_each_item_once():
    got = apply_ops({"cleanup.policy": "compact,delete"}, EFFECTIVE, [("cleanup.policy", SUBTRACT, "delete,x")])
    assert got == {"cleanup.policy": "compact"}
    assert apply_ops({}, EFFECTIVE, [("cleanup.policy", SUBTRACT, "delete")]) == {"cleanup.policy": ""}


def test_ops_apply_in_request_order():
    ops = [("cleanup.policy", SET, "compact"), ("cleanup.policy", APPEND, "delete")]
    assert apply_ops({}, EFFECTIVE, ops) == {"cleanup.policy": "compact,delete"}


@pytest.mark.parametrize("op", [APPEND, SUBTRACT])
def test_append_subtract_need_a_list_key(op):
    with pytest.raises(errors.InvalidConfig, match="not allowed for config key: retention.ms"):
        apply_ops({}, EFFECTIVE, [("retention.ms", op, "5")])
    with pytest.raises(errors.InvalidConfig, match="Unknown topic config name: no.such"):
        apply_ops({}, EFFECTIVE, [("no.such", op, "5")])


def test_check_ops_rejects_duplicates_nulls_and_unknown_operations():
    c = lambda name, op, value: {"name": name, "config_operation": op, "value": value}  # noqa: E731
    assert check_ops([c("a", SET, "1"), c("b", DELETE, None)]) == [("a", SET, "1"), ("b", DELETE, None)]
    with pytest.raises(errors.InvalidRequest, match="duplicate config keys"):
        check_ops([c("a", SET, "1"), c("a", DELETE, None)])
    with pytest.raises(errors.InvalidRequest, match="Null value not supported for : a, b"):
        check_ops([c("a", SET, None), c("b", APPEND, None), c("c", DELETE, None)])
    with pytest.raises(errors.InvalidRequest, match="Unknown operations type 4"):
        check_ops([c("a", 4, "1")])


# ------------------------------------------------------------------------------------------------- handler

class _TopicAdmin:
    """The topic-admin collaborator: topic overrides as kbroker's TopicAdmin reports and replaces them."""
    DEFAULTS = {"cleanup.policy": "delete", "retention.ms": "604800000", "max.message.bytes": "1048588"}

    def __init__(self, topics):
        self.topics = {t: dict(o) for t, o in topics.items()}
        self.altered = []

    def describe_topic_config(self, name):
        if name not in self.topics:
            raise errors.UnknownTopicOrPartition("Topic '%s' does not exist." % name)
        over = self.topics[name]
        return [ConfigDescription(k, over.get(k, d), 1 if k in over else 5) for k, d in sorted(self.DEFAULTS.items())]

    def alter_topic_config(self, name, configs, validate_only=False):
        bad = [k for k in configs if k not in self.DEFAULTS]
        if bad:
            raise errors.InvalidConfig("Unknown topic config name: %s" % bad[0])
        self.altered.append((name, dict(configs), validate_only))
        if not validate_only:
            self.topics[name] = dict(configs)


def _Ctx(admin, version=1):
    return make_ctx(version, topics=admin, broker_id=0)


def _res(rtype, name, *ops):
    return {"resource_type": rtype, "resource_name": name,
            "configs": [{"name": n, "config_operation": o, "value": v} for n, o, v in ops]}


def _codes(resp):
    return [(r["resource_name"], r["error_code"]) for r in resp["responses"]]


def test_handler_changes_only_the_named_keys():
    admin = _TopicAdmin({"t": {"retention.ms": "5", "max.message.bytes": "2048"}})
    resp = incremental_alter_configs(_Ctx(admin), {"validate_only": False, "resources": [
        _res(2, "t", ("retention.ms", DELETE, None), ("cleanup.policy", APPEND, "compact"))]})
    assert _codes(resp) == [("t", 0)] and resp["throttle_time_ms"] == 0
    assert admin.topics["t"] == {"max.message.bytes": "2048", "cleanup.policy": "delete,compact"}


def test_handler_validate_only_changes_nothing():
    admin = _TopicAdmin({"t": {"retention.ms": "5"}})
    resp = incremental_alter_configs(_Ctx(admin, 0), {"validate_only": True, "resources": [
        _res(2, "t", ("retention.ms", SET, "9"))]})
    assert _codes(resp) == [("t", 0)]
    assert admin.altered == [("t", {"retention.ms": "9"}, True)] and admin.topics["t"] == {"retention.ms": "5"}


def test_handler_errors_per_resource():
    admin = _TopicAdmin({"t": {}, "u": {}})
    resp = incremental_alter_configs(_Ctx(admin), {"validate_only": False, "resources": [
        _res(2, "t", ("retention.ms", SET, "1")),
        _res(2, "missing", ("retention.ms", SET, "1")),
        _res(2, "t", ("retention.ms", SET, "2")),
        _res(2, "u", ("retention.ms", SET, "3")),
    ]})
    # The same resource twice: both entries refused, the others still served.
    assert _codes(resp) == [("t", errors.INVALID_REQUEST), ("missing", errors.UNKNOWN_TOPIC_OR_PARTITION),
                            ("t", errors.INVALID_REQUEST), ("u", 0)]
    assert resp["responses"][0]["error_message"] == "Each resource must appear at most once."
    assert admin.topics == {"t": {}, "u": {"retention.ms": "3"}}


def test_handler_topic_config_errors():
    admin = _TopicAdmin({"u": {}, "v": {}})
    resp = incremental_alter_configs(_Ctx(admin), {"validate_only": False, "resources": [
        _res(2, "u", ("retention.ms", APPEND, "1")),
        _res(2, "v", ("bogus", SET, "1")),
    ]})
    assert _codes(resp) == [("u", errors.INVALID_CONFIG), ("v", errors.INVALID_CONFIG)]
    assert "bogus" in resp["responses"][1]["error_message"]
    assert admin.topics == {"u": {}, "v": {}}


def test_handler_broker_resources_go_to_the_dynamic_broker_configs(tmp_path):
    """Broker resources (KIP-226, kbroker/config/dynamic.py): this broker's id and "" change; another id, a
    non-integer name, a read-only key refused with Kafka's INVALID_REQUEST messages; other types refused."""
    from kbroker.config import BrokerConfig
    from kbroker.config.dynamic import DynamicBrokerConfig
    from kbroker.coord.embedded import EmbeddedBackend
    backend = EmbeddedBackend(str(tmp_path / "coord")).start()
    try:
        cfg = BrokerConfig.from_dict({"log.dirs": str(tmp_path / "d"), "broker.id": "0"})
        dyn = DynamicBrokerConfig(cfg, 0, backend, lambda fn, *a: fn(*a))
        ctx = make_ctx(1, topics=_TopicAdmin({}), broker_id=0, broker_configs=dyn, config=cfg)
        resps = [incremental_alter_configs(ctx, {"validate_only": False, "resources": [r]})["responses"][0] for r in (
            _res(4, "0", ("log.retention.ms", SET, "1000")),
            _res(4, "", ("log.cleanup.policy", APPEND, "compact")),
            _res(4, "7", ("log.retention.ms", SET, "1")),
            _res(4, "x", ("log.retention.ms", SET, "1")),
            _res(4, "0", ("broker.id", SET, "3")),
            _res(4, "0", ("message.max.bytes", APPEND, "1")),
            _res(8, "0", ("kafka", SET, "DEBUG")),
            _res(32, "g", ("consumer.session.timeout.ms", SET, "1")),
        )]
        assert [r["error_code"] for r in resps] == [0, 0] + [errors.INVALID_REQUEST] * 3 + \
            [errors.INVALID_CONFIG] + [errors.INVALID_REQUEST] * 2
        msgs = [r["error_message"] for r in resps]
        assert "Unexpected broker id, expected 0, but received 7" == msgs[2]
        assert "Node id must be an integer" in msgs[3]
        assert msgs[4] == ("Invalid config value for resource ConfigResource(type=BROKER, name='0'): Cannot update "
                           "these configs dynamically: Set(broker.id)")
        assert msgs[5] == "Config value append is not allowed for config key: message.max.bytes"
        assert "Unsupported resource type 8" in msgs[6]
        assert dyn.read("0") == {"log.retention.ms": "1000"}
        assert dyn.read("<default>") == {"log.cleanup.policy": "delete,compact"}
        assert cfg.retention_ms == 1000 and cfg["log.cleanup.policy"] == ["delete", "compact"]
        resp = incremental_alter_configs(ctx, {"validate_only": False, "resources": [
            _res(4, "0", ("log.retention.ms", DELETE, None)), _res(4, "", ("log.cleanup.policy", SUBTRACT, "delete"))]})
        assert _codes(resp) == [("0", 0), ("", 0)] and dyn.read("0") == {} and cfg.retention_ms == 7 * 24 * 3600 * 1000
        assert dyn.read("<default>") == {"log.cleanup.policy": "compact"} and cfg["log.cleanup.policy"] == ["compact"]
        resp = incremental_alter_configs(ctx, {"validate_only": True, "resources": [
            _res(4, "", ("log.cleanup.policy", DELETE, None))]})
        assert _codes(resp) == [("", 0)] and dyn.read("<default>") == {"log.cleanup.policy": "compact"}
    finally:
        backend.stop()


@pytest.mark.parametrize("name", ["", "t/partitions", "..", "a b"])
def test_handler_illegal_topic_name_is_invalid_topic(name):
    admin = _TopicAdmin({"t": {}})
    resp = incremental_alter_configs(_Ctx(admin), {"validate_only": False, "resources": [
        _res(2, name, ("retention.ms", SET, "1"))]})
    assert _codes(resp) == [(name, errors.INVALID_TOPIC_EXCEPTION)] and admin.altered == []
