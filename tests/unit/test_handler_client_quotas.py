"""DescribeClientQuotas (48) / AlterClientQuotas (49): Kafka's filter semantics, errors and messages, validate_only,
authorization, and the wire schemas' round trip."""
import json

import pytest

from kbroker import errors
from kbroker.coord.embedded import EmbeddedBackend
from kbroker.handlers.client_quotas import alter_client_quotas, describe_client_quotas
from kbroker.protocol.apis import APIS
from kbroker.quota.store import QuotaAdmin, QuotaLimits


@pytest.fixture
def backend(tmp_path):
    b = EmbeddedBackend(str(tmp_path / "coord")).start()
    yield b
    b.stop()


class Ctx:
    def __init__(self, admin, allowed=True):
        self.services = type("S", (), {"client_quotas": admin, "authorizer": None if allowed else object()})()
        self.identity = type("I", (), {"in_process": False})()
        self.allowed = allowed
        self.asked = []

    def authorize(self, op, rtype, name, log_denied=True):
        self.asked.append((op, rtype, name))
        return self.allowed


def U(name):
    return {"entity_type": "user", "entity_name": name}


def C(name):
    return {"entity_type": "client-id", "entity_name": name}


def op(key, value=0.0, remove=False):
    return {"key": key, "value": value, "remove": remove}


def alter(ctx, *entries, validate_only=False):
    req = {"entries": [{"entity": e, "ops": o} for e, o in entries], "validate_only": validate_only}
    return [(r["error_code"], r["error_message"]) for r in alter_client_quotas(ctx, req)["entries"]]


def describe(ctx, *components, strict=False):
    req = {"components": [{"entity_type": t, "match_type": m, "match": n} for t, m, n in components],
           "strict": strict}
    return describe_client_quotas(ctx, req)


def entities(resp):
    assert resp["error_code"] == 0, resp
    return {(tuple((p["entity_type"], p["entity_name"]) for p in e["entity"]),
             tuple((v["key"], v["value"]) for v in e["values"])) for e in resp["entries"]}


@pytest.fixture
def ctx(backend):
    limits = QuotaLimits(backend).load_all()
    c = Ctx(QuotaAdmin(backend, limits))
    c.limits = limits
    return c


def test_alter_writes_kafka_znodes_and_this_broker_applies_at_once(ctx, backend):
    assert alter(ctx, ([C("slow")], [op("producer_byte_rate", 1048576.0)]),
                 ([U("alice"), C(None)], [op("consumer_byte_rate", 2048.0), op("request_percentage", 12.5)]),
                 ([U(None)], [op("producer_byte_rate", 10.0)])) == [(0, None)] * 3
    assert json.loads(backend.get("/config/clients/slow")[0]) == {"version": 1,
                                                                  "config": {"producer_byte_rate": "1048576"}}
    assert json.loads(backend.get("/config/users/alice/clients/<default>")[0])["config"] == {
        "consumer_byte_rate": "2048", "request_percentage": "12.5"}
    assert backend.exists("/config/users/<default>") is not None
    assert ctx.limits.limit_for("producer_byte_rate", "bob", "slow") == (("bob", ""), 10.0)
    assert ctx.limits.limit_for("consumer_byte_rate", "alice", "x") == (("alice", "x"), 2048.0)
    # Remove one key, then the last
    assert alter(ctx, ([U(None)], [op("producer_byte_rate", remove=True)])) == [(0, None)]
    assert ctx.limits.limit_for("producer_byte_rate", "bob", "slow") == (("", "slow"), 1048576.0)


def test_alter_errors_as_kafka_each_entry_on_its_own(ctx, backend):
    got = alter(ctx,
                ([], [op("producer_byte_rate", 1.0)]),
                ([{"entity_type": "group", "entity_name": "g"}], [op("producer_byte_rate", 1.0)]),
                ([{"entity_type": "ip", "entity_name": "1.2.3.4"}], [op("connection_creation_rate", 1.0)]),
                ([U("")], [op("producer_byte_rate", 1.0)]),
                ([C("")], [op("producer_byte_rate", 1.0)]),
                ([C("a")], [op("producer_byte_rate", 1.0), op("fetch_rate", 1.0)]),
                ([C("b")], [op("producer_byte_rate", 1.5)]),
                ([C("c")], [op("consumer_byte_rate", -5.0)]),
                ([C("d")], [op("request_percentage", float("nan"))]),
                ([C("ok")], [op("request_percentage", 0.5), op("unknown_key", remove=True)]))
    assert got == [
        (42, "Invalid empty client quota entity"),
        (42, "Unhandled client quota entity type: group"),
        (42, "Unhandled client quota entity type: ip"),
        (42, "Empty user not supported"),
        (42, "Empty client-id not supported"),
        (42, "Invalid configuration key fetch_rate"),
        (42, "Configuration producer_byte_rate must be a LONG value"),
        (42, "Quota consumer_byte_rate must be a positive number, not -5.0"),
        (42, "Quota request_percentage must be a positive number, not nan"),
        (0, None)]
    # Nothing of a refused entry was written (entry "a" had a good op before its bad one).
    assert backend.get_children("/config/clients") == ["ok"]


def test_validate_only_writes_nothing(ctx, backend):
    assert alter(ctx, ([C("v")], [op("producer_byte_rate", 5.0)]),
                 ([C("w")], [op("producer_byte_rate", 5.5)]), validate_only=True) == [
        (0, None), (42, "Configuration producer_byte_rate must be a LONG value")]
    assert backend.exists("/config/clients/v") is None
    assert backend.exists("/config/changes") is None or backend.get_children("/config/changes") == []


@pytest.fixture
def eight(ctx):
    assert alter(ctx,
                 ([U("alice"), C("app")], [op("producer_byte_rate", 1.0)]),
                 ([U("alice"), C(None)], [op("producer_byte_rate", 2.0)]),
                 ([U("alice")], [op("producer_byte_rate", 3.0)]),
                 ([U(None), C("app")], [op("producer_byte_rate", 4.0)]),
                 ([U(None), C(None)], [op("producer_byte_rate", 5.0)]),
                 ([U(None)], [op("producer_byte_rate", 6.0)]),
                 ([C("app")], [op("producer_byte_rate", 7.0)]),
                 ([C(None)], [op("consumer_byte_rate", 8.0)])) == [(0, None)] * 8
    return ctx


P = "producer_byte_rate"


def test_describe_filters_as_kafka(eight):
    ctx = eight
    u, c = "user", "client-id"
    # No component: every entity (not strict); strict with no component: none.
    assert len(entities(describe(ctx))) == 8
    assert entities(describe(ctx, strict=True)) == set()
    # Exact user, strict: the user entity alone.
    assert entities(describe(ctx, (u, 0, "alice"), strict=True)) == {(((u, "alice"),), ((P, 3.0),))}
    # Exact user, not strict: the user entity and its user+client entities.
    assert entities(describe(ctx, (u, 0, "alice"))) == {
        (((u, "alice"),), ((P, 3.0),)), (((u, "alice"), (c, None)), ((P, 2.0),)),
        (((u, "alice"), (c, "app")), ((P, 1.0),))}
    # Default user + any client, strict.
    assert entities(describe(ctx, (u, 1, None), (c, 2, None), strict=True)) == {
        (((u, None), (c, None)), ((P, 5.0),)), (((u, None), (c, "app")), ((P, 4.0),))}
    # Default client-id only, strict: consumer quota of <default> client.
    assert entities(describe(ctx, (c, 1, None), strict=True)) == {(((c, None),), (("consumer_byte_rate", 8.0),))}
    # Any client-id, not strict: every entity with a client part.
    assert len(entities(describe(ctx, (c, 2, None)))) == 6
    # ip alone: kbroker has no IP quotas.
    assert entities(describe(ctx, ("ip", 2, None))) == set()


def test_describe_errors_as_kafka(ctx):
    cases = [((("user", 2, None), ("user", 0, "a")), (42, "Duplicate user filter component entity type")),
             ((("client-id", 2, None), ("client-id", 1, None)), (42, "Duplicate client filter component entity type")),
             ((("", 2, None),), (42, "Unexpected empty filter component entity type")),
             ((("group", 2, None),), (35, "Custom entity type 'group' not supported")),
             ((("user", 7, None),), (42, "Unexpected match type: 7")),
             ((("user", 0, None),), (42, "Missing name for an exact user filter component")),
             ((("ip", 2, None), ("user", 2, None)),
              (42, "Invalid entity filter component combination, IP filter component should not be used with "
                   "user or clientId filter component."))]
    for comps, want in cases:
        resp = describe(ctx, *comps)
        assert (resp["error_code"], resp["error_message"], resp["entries"]) == want + (None,), comps


def test_authorization_on_the_cluster(backend):
    denied = Ctx(QuotaAdmin(backend), allowed=False)
    resp = describe(denied)
    assert (resp["error_code"], resp["entries"]) == (errors.CLUSTER_AUTHORIZATION_FAILED, None)
    assert alter(denied, ([C("x")], [op(P, 1.0)]), ([U("y")], [op(P, 1.0)])) == [(31, None)] * 2
    assert denied.asked == [("DescribeConfigs", "Cluster", "kafka-cluster"), ("AlterConfigs", "Cluster",
                                                                             "kafka-cluster")]
    assert backend.exists("/config/clients/x") is None


@pytest.mark.parametrize("version", [0, 1])
def test_wire_round_trip(version):
    api = APIS[49]
    req = {"entries": [{"entity": [U("a"), C(None)], "ops": [op(P, 1048576.0), op("x", remove=True)]}],
           "validate_only": True}
    assert api.decode_request(version, api.encode_request(version, req).getvalue()) == req
    api = APIS[48]
    resp = {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
            "entries": [{"entity": [U(None)], "values": [{"key": P, "value": 12.5}]}]}
    assert api.decode_response(version, api.encode_response(version, resp).getvalue()) == resp
