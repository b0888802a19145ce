"""The ACL authorizer (kbroker/security/authorizer.py): Kafka's matching rules, the znode format, the conditional
writes and the change notifications, over the embedded coordination backend; and the ACL handlers
(kbroker/handlers/acls.py) through a real RequestContext."""
import json
import logging

import gevent
import pytest

from kbroker import errors
from kbroker.coord.embedded import EmbeddedBackend
from kbroker.handlers import acls as acl_handlers
from kbroker.protocol.apis import APIS
from kbroker.security import acl
from kbroker.security.authorizer import (ANY_ENTRY, AclAuthorizer, AclBinding, AclBindingFilter, AclEntry,
                                         AclIndex, EntryFilter, PatternFilter, ResourcePattern, decode_acls,
                                         decode_extended_change, decode_literal_change, encode_acls, encode_change,
                                         resource_path)
from kbroker.server.context import ClientIdentity, RequestContext
from tests.unit.ctx import make_services

ALICE, BOB = "User:alice", "User:bob"


def who(principal=ALICE, host="10.0.0.1"):
    return ClientIdentity("PLAINTEXT", "PLAINTEXT", principal, host, 5000)


def lit(name, rt=acl.TOPIC):
    return ResourcePattern(rt, name, acl.LITERAL)


def pre(name, rt=acl.TOPIC):
    return ResourcePattern(rt, name, acl.PREFIXED)


def allow(principal=ALICE, op=acl.READ, host="*"):
    return AclEntry(principal, host, op, acl.ALLOW)


def deny(principal=ALICE, op=acl.READ, host="*"):
    return AclEntry(principal, host, op, acl.DENY)


@pytest.fixture
def backend(tmp_path):
    b = EmbeddedBackend(str(tmp_path / "coord")).start()
    yield b
    b.stop()


@pytest.fixture
def authz(backend):
    a = AclAuthorizer(backend, sleep=lambda s: None).start()
    yield a
    a.stop()


def add(a, *bindings):
    assert a.create_acls(bindings) == [None] * len(bindings)


# ----------------------------------------------------------------------------------------------- matching

# (ACLs on the resource, identity, operation, topic asked about, expected)
MATCHING = [
    ("no ACLs, default deny", [], who(), acl.READ, "orders", False),
    ("literal allow", [(lit("orders"), allow())], who(), acl.READ, "orders", True),
    ("other topic's ACL does not apply", [(lit("orders"), allow())], who(), acl.READ, "orders2", False),
    ("other principal", [(lit("orders"), allow(BOB))], who(), acl.READ, "orders", False),
    ("other operation", [(lit("orders"), allow(op=acl.WRITE))], who(), acl.READ, "orders", False),
    ("deny beats allow", [(lit("orders"), allow()), (lit("orders"), deny())], who(), acl.READ, "orders", False),
    ("deny on wildcard beats literal allow", [(lit("orders"), allow()), (lit("*"), deny())], who(), acl.READ,
     "orders", False),
    ("deny by prefix beats literal allow", [(lit("orders"), allow()), (pre("ord"), deny())], who(), acl.READ,
     "orders", False),
    ("deny of another op leaves this one", [(lit("orders"), allow()), (lit("orders"), deny(op=acl.WRITE))], who(),
     acl.READ, "orders", True),
    ("deny All denies Read", [(lit("orders"), allow()), (lit("orders"), deny(op=acl.ALL))], who(), acl.READ,
     "orders", False),
    ("deny of Read does not deny Describe", [(lit("orders"), allow(op=acl.DESCRIBE)), (lit("orders"), deny())],
     who(), acl.DESCRIBE, "orders", True),
    ("wildcard principal", [(lit("orders"), allow("User:*"))], who(), acl.READ, "orders", True),
    # Kafka compares the ACL's principal with User:*, whatever the caller's principal type.
    ("wildcard principal matches any principal type", [(lit("orders"), allow("User:*"))], who("Group:x"),
     acl.READ, "orders", True),
    ("User:* is not a prefix", [(lit("orders"), allow("User:al*"))], who(), acl.READ, "orders", False),
    ("wildcard resource", [(lit("*"), allow())], who(), acl.READ, "anything", True),
    ("wildcard resource of another type", [(lit("*", acl.GROUP), allow())], who(), acl.READ, "orders", False),
    ("prefix matches", [(pre("ord"), allow())], who(), acl.READ, "orders", True),
    ("prefix equal to the name", [(pre("orders"), allow())], who(), acl.READ, "orders", True),
    ("longer prefix does not match", [(pre("orders-eu"), allow())], who(), acl.READ, "orders", False),
    ("prefix of another type", [(pre("ord", acl.GROUP), allow())], who(), acl.READ, "orders", False),
    ("literal is not a prefix", [(lit("ord"), allow())], who(), acl.READ, "orders", False),
    ("literal named * asked as a name", [(lit("*"), allow())], who(), acl.READ, "*", True),
    ("exact host", [(lit("orders"), allow(host="10.0.0.1"))], who(), acl.READ, "orders", True),
    ("other host", [(lit("orders"), allow(host="10.0.0.2"))], who(), acl.READ, "orders", False),
    ("IPv4-mapped address is the IPv4 one", [(lit("orders"), allow(host="10.0.0.1"))], who(host="::ffff:10.0.0.1"),
     acl.READ, "orders", True),
    ("IPv6 host", [(lit("orders"), allow(host="fe80::1"))], who(host="fe80::1"), acl.READ, "orders", True),
    ("deny from other host only", [(lit("orders"), allow()), (lit("orders"), deny(host="10.0.0.2"))], who(),
     acl.READ, "orders", True),
    ("All allows Read", [(lit("orders"), allow(op=acl.ALL))], who(), acl.READ, "orders", True),
    ("Write implies Describe", [(lit("orders"), allow(op=acl.WRITE))], who(), acl.DESCRIBE, "orders", True),
    ("Read implies Describe", [(lit("orders"), allow(op=acl.READ))], who(), acl.DESCRIBE, "orders", True),
    ("Delete implies Describe", [(lit("orders"), allow(op=acl.DELETE))], who(), acl.DESCRIBE, "orders", True),
    ("Alter implies Describe", [(lit("orders"), allow(op=acl.ALTER))], who(), acl.DESCRIBE, "orders", True),
    ("Create does not imply Describe", [(lit("orders"), allow(op=acl.CREATE))], who(), acl.DESCRIBE, "orders",
     False),
    ("Describe does not imply Read", [(lit("orders"), allow(op=acl.DESCRIBE))], who(), acl.READ, "orders", False),
    ("AlterConfigs implies DescribeConfigs", [(lit("orders"), allow(op=acl.ALTER_CONFIGS))], who(),
     acl.DESCRIBE_CONFIGS, "orders", True),
    ("DescribeConfigs does not imply AlterConfigs", [(lit("orders"), allow(op=acl.DESCRIBE_CONFIGS))], who(),
     acl.ALTER_CONFIGS, "orders", False),
    ("Alter does not imply DescribeConfigs", [(lit("orders"), allow(op=acl.ALTER))], who(), acl.DESCRIBE_CONFIGS,
     "orders", False),
]


@pytest.mark.parametrize("bindings, ident, op, name, expected", [m[1:] for m in MATCHING],
                         ids=[m[0] for m in MATCHING])
def test_matching(authz, bindings, ident, op, name, expected):
    add(authz, *[AclBinding(p, e) for p, e in bindings])
    assert authz.authorize(ident, op, acl.TOPIC, name) is expected


def test_group_cluster_and_transactional_id_resources(authz):
    add(authz, AclBinding(lit("g1", acl.GROUP), allow()),
        AclBinding(lit(acl.CLUSTER_NAME, acl.CLUSTER), allow(op=acl.CLUSTER_ACTION)),
        AclBinding(pre("tx-", acl.TRANSACTIONAL_ID), allow(op=acl.WRITE)))
    assert authz.authorize(who(), acl.READ, acl.GROUP, "g1")
    assert not authz.authorize(who(), acl.READ, acl.TOPIC, "g1")
    assert authz.authorize(who(), acl.CLUSTER_ACTION, acl.CLUSTER, acl.CLUSTER_NAME)
    assert not authz.authorize(who(), acl.ALTER, acl.CLUSTER, acl.CLUSTER_NAME)
    assert authz.authorize(who(), acl.WRITE, acl.TRANSACTIONAL_ID, "tx-1")
    assert authz.authorize(who(), acl.DESCRIBE, acl.TRANSACTIONAL_ID, "tx-1")
    assert not authz.authorize(who(), acl.WRITE, acl.TRANSACTIONAL_ID, "tx")


def test_super_users_and_allow_everyone_if_no_acl_found(backend):
    a = AclAuthorizer(backend, super_users=AclAuthorizer.parse_super_users(" User:admin ; User:ops;"),
                      allow_everyone_if_no_acl_found=True).start(watch=False)
    add(a, AclBinding(lit("orders"), deny(ALICE, acl.ALL)))
    assert a.super_users == {"User:admin", "User:ops"}
    assert a.authorize(who("User:admin"), acl.READ, acl.TOPIC, "orders")          # super user beats deny
    assert not a.authorize(who(ALICE), acl.READ, acl.TOPIC, "orders")
    assert not a.authorize(who(BOB), acl.READ, acl.TOPIC, "orders")                # ACLs exist: no allow for bob
    assert a.authorize(who(BOB), acl.READ, acl.TOPIC, "payments")                  # no ACL at all: allowed
    strict = AclAuthorizer(backend).start(watch=False)
    assert not strict.authorize(who(BOB), acl.READ, acl.TOPIC, "payments")
    with pytest.raises(ValueError, match="principalType:principalName"):
        AclAuthorizer.parse_super_users("User:a;admin")


def test_authorize_by_resource_type(authz):
    assert not authz.authorize_by_resource_type(who(), acl.WRITE, acl.TOPIC)
    add(authz, AclBinding(pre("ord"), allow(op=acl.WRITE)))
    assert authz.authorize_by_resource_type(who(), acl.WRITE, acl.TOPIC)
    assert not authz.authorize_by_resource_type(who(BOB), acl.WRITE, acl.TOPIC)
    add(authz, AclBinding(pre("o"), deny(op=acl.WRITE)))           # covers every name the allow prefix covers
    assert not authz.authorize_by_resource_type(who(), acl.WRITE, acl.TOPIC)
    add(authz, AclBinding(lit("payments"), allow(op=acl.WRITE)))
    assert authz.authorize_by_resource_type(who(), acl.WRITE, acl.TOPIC)
    add(authz, AclBinding(lit("*"), deny(op=acl.WRITE)))
    assert not authz.authorize_by_resource_type(who(), acl.WRITE, acl.TOPIC)


def test_index_cost_is_per_resource_and_prefix_length():
    """A check looks at the ACLs of its own resource and one dict entry per distinct prefix length; 20,000 ACLs
    on other topics are never scanned."""
    idx = AclIndex()
    for i in range(10000):
        idx.put(lit("t%05d" % i), [allow()], 0)
        idx.put(pre("p%05d-" % i), [allow()], 0)
    idx.put(pre("x"), [deny()], 0)
    assert idx.prefix_lengths[acl.TOPIC] == (1, 7)
    assert idx.matching(acl.TOPIC, "t00042") == [allow()]
    assert idx.matching(acl.TOPIC, "p00042-a") == [allow()]
    assert idx.matching(acl.TOPIC, "xyz") == [deny()]
    idx.put(pre("x"), [], 0)
    assert idx.prefix_lengths[acl.TOPIC] == (7,)
    assert idx.matching(acl.TOPIC, "xyz") == []


def test_audit_log(authz, caplog):
    add(authz, AclBinding(lit("orders"), allow()))
    with caplog.at_level(logging.DEBUG, logger="kbroker.authorizer"):
        authz.authorize(who(BOB, "10.0.0.7"), acl.READ, acl.TOPIC, "orders")
        authz.authorize(who(ALICE), acl.READ, acl.TOPIC, "orders")
    recs = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "kbroker.authorizer"]
    assert recs == [
        ("INFO", "Principal = User:bob is Denied Operation = Read from host = 10.0.0.7 on resource = "
                 "Topic:LITERAL:orders"),
        ("DEBUG", "Principal = User:alice is Allowed Operation = Read from host = 10.0.0.1 on resource = "
                  "Topic:LITERAL:orders")]
    # A check that only filters an answer (Kafka's logIfDenied = false): the denial is audited at DEBUG only.
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="kbroker.authorizer"):
        assert not authz.authorize(who(BOB, "10.0.0.7"), acl.READ, acl.TOPIC, "orders", log_denied=False)
    assert [r for r in caplog.records if r.name == "kbroker.authorizer"] == []
    with caplog.at_level(logging.DEBUG, logger="kbroker.authorizer"):
        authz.authorize(who(BOB, "10.0.0.7"), acl.READ, acl.TOPIC, "orders", log_denied=False)
    assert [r.levelname for r in caplog.records if r.name == "kbroker.authorizer"] == ["DEBUG"]


# ----------------------------------------------------------------------------------------------- storage

def test_znode_layout_and_json_round_trip(authz, backend):
    add(authz, AclBinding(lit("orders"), allow()), AclBinding(lit("orders"), deny(BOB, acl.WRITE, "10.0.0.2")),
        AclBinding(pre("ord"), allow(op=acl.DESCRIBE_CONFIGS)),
        AclBinding(lit(acl.CLUSTER_NAME, acl.CLUSTER), allow(op=acl.IDEMPOTENT_WRITE)))
    data, stat = backend.get("/kafka-acl/Topic/orders")
    assert json.loads(data) == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
        {"principal": "User:bob", "permissionType": "Deny", "operation": "Write", "host": "10.0.0.2"}]}
    assert stat.version == 0        # both entries in one write
    assert json.loads(backend.get("/kafka-acl-extended/prefixed/Topic/ord")[0])["acls"] == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "DescribeConfigs", "host": "*"}]
    assert json.loads(backend.get("/kafka-acl/Cluster/kafka-cluster")[0])["acls"][0]["operation"] == \
        "IdempotentWrite"
    changes = backend.get_children("/kafka-acl-changes")
    assert sorted(backend.get("/kafka-acl-changes/" + c)[0] for c in changes) == [
        b"Cluster:kafka-cluster", b"Topic:orders"]
    ext = backend.get_children("/kafka-acl-extended-changes")
    assert [json.loads(backend.get("/kafka-acl-extended-changes/" + c)[0]) for c in ext] == [
        {"version": 1, "resourceType": "Topic", "name": "ord", "patternType": "PREFIXED"}]
    assert all(c.startswith("acl_changes_") for c in changes + ext)
    # What Kafka writes reads back, whatever the key order and case.
    kafka = b'{"version":1,"acls":[{"host":"*","operation":"READ","permissionType":"ALLOW","principal":"User:x"}]}'
    assert decode_acls(kafka) == {AclEntry("User:x", "*", acl.READ, acl.ALLOW)}
    entries = {allow(), deny(BOB, acl.CLUSTER_ACTION, "::1")}
    assert decode_acls(encode_acls(entries)) == entries
    for p in (lit("orders"), pre("ord"), lit("g", acl.GROUP), pre("tx", acl.TRANSACTIONAL_ID)):
        path, data = encode_change(p)
        assert (decode_literal_change if path == "/kafka-acl-changes" else decode_extended_change)(data) == p
    assert resource_path(pre("ord", acl.GROUP)) == "/kafka-acl-extended/prefixed/Group/ord"
    for bad in (b"{", b'{"acls":[{"principal":"User:x"}]}', b'{"acls":[{"principal":"User:x","host":"*",'
                b'"operation":"Fly","permissionType":"Allow"}]}'):
        with pytest.raises(ValueError):
            decode_acls(bad)


def test_no_change_writes_nothing_and_empty_resource_is_deleted(authz, backend):
    add(authz, AclBinding(lit("orders"), allow()))
    add(authz, AclBinding(lit("orders"), allow()))     # already there
    assert backend.get("/kafka-acl/Topic/orders")[1].version == 0
    assert len(backend.get_children("/kafka-acl-changes")) == 1
    [[(binding, err)]] = authz.delete_acls([AclBindingFilter(PatternFilter(acl.TOPIC, "orders", acl.LITERAL),
                                                             ANY_ENTRY)])
    assert binding == AclBinding(lit("orders"), allow()) and err is None
    assert backend.exists("/kafka-acl/Topic/orders") is None
    assert len(backend.get_children("/kafka-acl-changes")) == 2
    assert authz.acls() == []


def test_conditional_write_retries_on_conflict(backend):
    """Another writer changes the znode between our read and our write: the write is retried on the new version
    and both writers' ACLs survive."""
    a = AclAuthorizer(backend, sleep=lambda s: None).start(watch=False)
    other = AclAuthorizer(backend, sleep=lambda s: None).start(watch=False)
    add(a, AclBinding(lit("orders"), allow()))
    add(other, AclBinding(lit("orders"), allow(BOB)))        # ``a``'s cache still has version 0
    add(a, AclBinding(lit("orders"), allow("User:carol")))
    assert decode_acls(backend.get("/kafka-acl/Topic/orders")[0]) == {allow(), allow(BOB), allow("User:carol")}
    assert backend.get("/kafka-acl/Topic/orders")[1].version == 2


def test_create_validation(authz):
    bindings = [
        AclBinding(lit("ok"), allow()),
        AclBinding(ResourcePattern(acl.ANY, "x", acl.LITERAL), allow()),
        AclBinding(ResourcePattern(acl.UNKNOWN, "x", acl.LITERAL), allow()),
        AclBinding(ResourcePattern(acl.TOPIC, "x", acl.MATCH), allow()),
        AclBinding(lit("x"), AclEntry(ALICE, "*", acl.ANY, acl.ALLOW)),
        AclBinding(lit("x"), AclEntry(ALICE, "*", acl.READ, acl.UNKNOWN)),
        AclBinding(lit(""), allow()),
        AclBinding(pre("*"), allow()),
        AclBinding(lit("other", acl.CLUSTER), allow()),
        AclBinding(lit("a/b", acl.GROUP), allow()),
        AclBinding(lit("x"), allow("alice")),
    ]
    res = authz.create_acls(bindings)
    assert res[0] is None
    assert all(isinstance(e, errors.InvalidRequest) for e in res[1:])
    msgs = [e.message for e in res[1:]]
    assert msgs == ["Failed to create ACL: resourceType must not be ANY",
                    "Failed to create ACL: ACL binding contains unknown elements",
                    "Failed to create ACL: patternType must not be MATCH",
                    "Failed to create ACL: operation must not be ANY",
                    "Failed to create ACL: ACL binding contains unknown elements",
                    "Failed to create ACL: Invalid empty resource name",
                    "Failed to create ACL: A PREFIXED pattern cannot be the wildcard *: use a LITERAL * for every "
                    "name",
                    "Failed to create ACL: The only valid name for the CLUSTER resource is kafka-cluster",
                    "Failed to create ACL: ACL binding contains invalid resource name: a/b",
                    "Failed to create ACL: expected a string in format principalType:principalName but got alice"]
    assert authz.acls() == [AclBinding(lit("ok"), allow())]


def test_filters(authz):
    add(authz, AclBinding(lit("orders"), allow()), AclBinding(lit("*"), allow(BOB)),
        AclBinding(pre("ord"), deny()), AclBinding(pre("pay"), allow()), AclBinding(lit("g", acl.GROUP), allow()))

    def names(pf, ef=ANY_ENTRY):
        return [(b.pattern.name, b.pattern.pattern_type, b.entry.principal)
                for b in authz.acls(AclBindingFilter(pf, ef))]
    assert names(PatternFilter(acl.ANY, None, acl.ANY_PATTERN)) == [
        ("*", "LITERAL", BOB), ("orders", "LITERAL", ALICE), ("ord", "PREFIXED", ALICE), ("pay", "PREFIXED", ALICE),
        ("g", "LITERAL", ALICE)]
    assert names(PatternFilter(acl.TOPIC, "orders", acl.MATCH)) == [
        ("*", "LITERAL", BOB), ("orders", "LITERAL", ALICE), ("ord", "PREFIXED", ALICE)]
    assert names(PatternFilter(acl.TOPIC, "ord", acl.ANY_PATTERN)) == [("ord", "PREFIXED", ALICE)]
    assert names(PatternFilter(acl.TOPIC, "orders", acl.LITERAL)) == [("orders", "LITERAL", ALICE)]
    assert names(PatternFilter(acl.TOPIC, None, acl.PREFIXED)) == [("ord", "PREFIXED", ALICE),
                                                                   ("pay", "PREFIXED", ALICE)]
    assert names(PatternFilter(acl.ANY, None, acl.ANY_PATTERN), EntryFilter(None, None, acl.ANY, acl.DENY)) == [
        ("ord", "PREFIXED", ALICE)]
    assert names(PatternFilter(acl.ANY, None, acl.ANY_PATTERN), EntryFilter(BOB, "*", acl.READ, acl.ANY)) == [
        ("*", "LITERAL", BOB)]


def test_delete_reports_each_binding_under_the_first_matching_filter(authz, backend):
    add(authz, AclBinding(lit("orders"), allow()), AclBinding(lit("orders"), allow(BOB)),
        AclBinding(pre("ord"), allow()))
    by_any = AclBindingFilter(PatternFilter(acl.TOPIC, None, acl.ANY_PATTERN), EntryFilter(ALICE, None, acl.ANY,
                                                                                            acl.ANY))
    everything = AclBindingFilter(PatternFilter(acl.ANY, None, acl.ANY_PATTERN), ANY_ENTRY)
    nothing = AclBindingFilter(PatternFilter(acl.GROUP, "x", acl.LITERAL), ANY_ENTRY)
    first, second, third = authz.delete_acls([by_any, everything, nothing])
    assert sorted(b for b, e in first) == sorted([AclBinding(lit("orders"), allow()), AclBinding(pre("ord"),
                                                                                                  allow())])
    assert second == [(AclBinding(lit("orders"), allow(BOB)), None)]
    assert third == []
    assert authz.acls() == []
    assert backend.get_children("/kafka-acl/Topic") == []


def test_delete_reaches_acls_this_broker_has_not_seen(backend):
    """A definite filter (type, name, LITERAL/PREFIXED/ANY) deletes from the znode even when the cache does not
    have the resource yet (Kafka's filterToResources)."""
    writer = AclAuthorizer(backend).start(watch=False)
    reader = AclAuthorizer(backend).start(watch=False)
    add(writer, AclBinding(lit("orders"), allow()))
    assert reader.acls() == []
    [deleted] = reader.delete_acls([AclBindingFilter(PatternFilter(acl.TOPIC, "orders", acl.ANY_PATTERN),
                                                     ANY_ENTRY)])
    assert deleted == [(AclBinding(lit("orders"), allow()), None)]
    assert backend.exists("/kafka-acl/Topic/orders") is None


# ----------------------------------------------------------------------------------------------- notifications

def wait_for(cond, timeout=5.0):
    deadline = gevent.get_hub().loop.now() + timeout
    while not cond():
        assert gevent.get_hub().loop.now() < deadline, "condition not met within %.1f s" % timeout
        gevent.sleep(0.01)


def test_startup_load_and_change_notifications(backend):
    writer = AclAuthorizer(backend).start(watch=False)
    add(writer, AclBinding(lit("orders"), allow()), AclBinding(pre("pay"), allow()))
    follower = AclAuthorizer(backend).start()
    try:
        assert follower.authorize(who(), acl.READ, acl.TOPIC, "orders")          # loaded at start
        assert follower.authorize(who(), acl.READ, acl.TOPIC, "payments")
        add(writer, AclBinding(lit("orders"), deny()))
        wait_for(lambda: not follower.authorize(who(), acl.READ, acl.TOPIC, "orders"))
        writer.delete_acls([AclBindingFilter(PatternFilter(acl.TOPIC, "pay", acl.PREFIXED), ANY_ENTRY)])
        wait_for(lambda: not follower.authorize(who(), acl.READ, acl.TOPIC, "payments"))
        # A tool writing the znodes the way Kafka's does (no kbroker involved).
        backend.create("/kafka-acl/Group/g1", encode_acls([allow(op=acl.READ)]), makepath=True)
        backend.create("/kafka-acl-changes/acl_changes_", b"Group:g1", sequence=True)
        wait_for(lambda: follower.authorize(who(), acl.READ, acl.GROUP, "g1"))
        assert follower.acls() == writer.acls() + [AclBinding(lit("g1", acl.GROUP), allow())]
    finally:
        follower.stop()


def test_bad_notification_and_unreadable_znode_fail_closed(backend):
    a = AclAuthorizer(backend).start()
    try:
        add(a, AclBinding(lit("orders"), deny(BOB)), AclBinding(lit("orders"), allow()))
        backend.create("/kafka-acl-changes/acl_changes_", b"garbage", sequence=True)
        backend.set("/kafka-acl/Topic/orders", b"{not json")
        backend.create("/kafka-acl-changes/acl_changes_", b"Topic:orders", sequence=True)
        marker = b"Topic:marker"
        backend.create("/kafka-acl/Topic/marker", encode_acls([allow()]), makepath=True)
        backend.create("/kafka-acl-changes/acl_changes_", marker, sequence=True)
        wait_for(lambda: a.authorize(who(), acl.READ, acl.TOPIC, "marker"))
        assert not a.authorize(who(BOB), acl.READ, acl.TOPIC, "orders")     # the deny is kept
    finally:
        a.stop()
    with pytest.raises(ValueError, match="/kafka-acl/Topic/orders"):
        AclAuthorizer(backend).start(watch=False)        # a broker does not start without every ACL


def test_old_notifications_are_purged(backend):
    now = [1000.0]
    a = AclAuthorizer(backend, clock=lambda: now[0]).start(watch=False)
    add(a, AclBinding(lit("orders"), allow()))
    old = backend.get_children("/kafka-acl-changes")
    assert len(old) == 1
    ctime = backend.get("/kafka-acl-changes/" + old[0])[1].ctime
    now[0] = (ctime + 15 * 60 * 1000 - 1000) / 1000.0     # 14 min 59 s later: kept
    follower = AclAuthorizer(backend, clock=lambda: now[0]).start()
    try:
        gevent.sleep(0.05)
        assert backend.get_children("/kafka-acl-changes") == old
        now[0] = (ctime + 15 * 60 * 1000 + 1000) / 1000.0  # 15 min 1 s: the next pass deletes it
        add(a, AclBinding(lit("orders"), allow(BOB)))
        wait_for(lambda: old[0] not in backend.get_children("/kafka-acl-changes"))
        wait_for(lambda: follower.authorize(who(BOB), acl.READ, acl.TOPIC, "orders"))
    finally:
        follower.stop()


# ----------------------------------------------------------------------------------------------- handlers

def ctx_for(api_key, version, authorizer, principal="User:ANONYMOUS"):
    ident = ClientIdentity("PLAINTEXT", "PLAINTEXT", principal, "127.0.0.1", 5000)
    return RequestContext(ident, make_services(authorizer=authorizer), api_key, version, 1, "c", None)


def round_trip(api_key, version, req, authorizer, principal="User:ANONYMOUS"):
    """Encode ``req`` as a client would, decode as the broker does, run the handler, encode and decode the
    answer: what a client reads."""
    api = APIS[api_key]
    w = api.encode_request(version, req)
    decoded = api.decode_request(version, bytes(w.getvalue()))
    fn = {29: acl_handlers.describe_acls, 30: acl_handlers.create_acls, 31: acl_handlers.delete_acls}[api_key]
    resp = fn(ctx_for(api_key, version, authorizer, principal), decoded)
    return api.decode_response(version, bytes(api.encode_response(version, resp).getvalue()))


def creation(name, op=3, perm=3, rt=2, pt=3, principal="User:alice", host="*"):
    return {"resource_type": rt, "resource_name": name, "resource_pattern_type": pt, "principal": principal,
            "host": host, "operation": op, "permission_type": perm}


DESCRIBE_ALL = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_handlers_round_trip(backend, version):
    authz = AclAuthorizer(backend, super_users=["User:ANONYMOUS"]).start(watch=False)
    pt = 4 if version else 3
    r = round_trip(30, version, {"creations": [creation("orders"), creation("ord", pt=pt, perm=2, op=4),
                                               creation("", op=3)]}, authz)
    assert [(x["error_code"], x["error_message"]) for x in r["results"]] == [
        (0, None), (0, None), (42, "Failed to create ACL: Invalid empty resource name")]
    flt = dict(DESCRIBE_ALL, pattern_type_filter=1 if version else 3)
    r = round_trip(29, version, flt, authz)
    assert r["error_code"] == 0
    got = [(x["resource_type"], x["resource_name"], x["pattern_type"], [tuple(a.values()) for a in x["acls"]])
           for x in r["resources"]]
    if version:
        expected = [(2, "orders", 3, [("User:alice", "*", 3, 3)]), (2, "ord", 4, [("User:alice", "*", 4, 2)])]
    else:       # v0 knows LITERAL only: "ord" was created as a literal name
        expected = [(2, "ord", 3, [("User:alice", "*", 4, 2)]), (2, "orders", 3, [("User:alice", "*", 3, 3)])]
    assert got == expected
    r = round_trip(31, version, {"filters": [dict(flt, resource_type_filter=2, resource_name_filter="orders"),
                                             dict(flt, operation=0)]}, authz)
    first, second = r["filter_results"]
    assert (first["error_code"], [(m["resource_name"], m["principal"], m["operation"], m["error_code"])
                                  for m in first["matching_acls"]]) == (0, [("orders", "User:alice", 3, 0)])
    assert second["error_code"] == 42 and "UNKNOWN" in second["error_message"]
    assert [b.pattern for b in authz.acls()] == [pre("ord") if version else lit("ord")]


def test_handlers_without_authorizer_and_without_permission(authz):
    r = round_trip(29, 1, DESCRIBE_ALL, None)
    assert (r["error_code"], r["error_message"]) == (54, "No Authorizer is configured on the broker")
    r = round_trip(30, 1, {"creations": [creation("a"), creation("b")]}, None)
    assert [x["error_code"] for x in r["results"]] == [54, 54]
    r = round_trip(31, 1, {"filters": [DESCRIBE_ALL]}, None)
    assert [x["error_code"] for x in r["filter_results"]] == [54]
    # With an authorizer and no ACL on the cluster, User:ANONYMOUS may do none of the three.
    assert round_trip(29, 1, DESCRIBE_ALL, authz)["error_code"] == 31
    assert [x["error_code"] for x in round_trip(30, 1, {"creations": [creation("a")]}, authz)["results"]] == [31]
    assert [x["error_code"] for x in round_trip(31, 1, {"filters": [DESCRIBE_ALL]}, authz)["filter_results"]] == [31]
    assert authz.acls() == []
    # Describe on the cluster allows DescribeAcls only; Alter allows the changes.
    add(authz, AclBinding(lit(acl.CLUSTER_NAME, acl.CLUSTER), allow("User:ANONYMOUS", acl.DESCRIBE)))
    assert round_trip(29, 1, DESCRIBE_ALL, authz)["error_code"] == 0
    assert [x["error_code"] for x in round_trip(30, 1, {"creations": [creation("a")]}, authz)["results"]] == [31]
    add(authz, AclBinding(lit(acl.CLUSTER_NAME, acl.CLUSTER), allow("User:ANONYMOUS", acl.ALTER)))
    assert [x["error_code"] for x in round_trip(30, 1, {"creations": [creation("a")]}, authz)["results"]] == [0]
    r = round_trip(29, 1, dict(DESCRIBE_ALL, operation=0), authz)
    assert r["error_code"] == 42 and not r["resources"]


# ----------------------------------------------------------------------------------------------- config

def test_authorizer_config_keys():
    from kbroker.config import BrokerConfig, ConfigError
    for cls in ("kafka.security.auth.SimpleAclAuthorizer", "kafka.security.authorizer.AclAuthorizer",
                "kbroker.security.authorizer.AclAuthorizer"):
        cfg = BrokerConfig.from_sources(None, ["authorizer.class.name=" + cls, "super.users=User:a;User:b",
                                               "allow.everyone.if.no.acl.found=true"])
        assert cfg.authorizer_class == cls
        assert cfg["allow.everyone.if.no.acl.found"] is True
    assert BrokerConfig.from_sources(None, []).authorizer_class is None
    with pytest.raises(ConfigError, match="kbroker provides only the ACL authorizer") as ei:
        BrokerConfig.from_sources(None, ["authorizer.class.name=org.apache.ranger.RangerKafkaAuthorizer"])
    assert ei.value.key == "authorizer.class.name"
    with pytest.raises(ConfigError, match="principalType:principalName") as ei:
        BrokerConfig.from_sources(None, ["super.users=User:a;admin"])
    assert ei.value.key == "super.users"


def test_handlers_refuse_unknown_codes(backend):
    authz = AclAuthorizer(backend, super_users=["User:ANONYMOUS"]).start(watch=False)
    r = round_trip(30, 1, {"creations": [creation("x", op=99), creation("x", perm=0), creation("x", rt=0),
                                         creation("x", rt=1), creation("x", pt=0), creation("x", pt=2),
                                         creation("x", op=1), creation("x", rt=127)]}, authz)
    assert [x["error_code"] for x in r["results"]] == [42] * 8
    assert all(x["error_message"].startswith("Failed to create ACL: ") for x in r["results"])
    for bad in (dict(DESCRIBE_ALL, resource_type_filter=0), dict(DESCRIBE_ALL, pattern_type_filter=9),
                dict(DESCRIBE_ALL, permission_type=0), dict(DESCRIBE_ALL, operation=50)):
        r = round_trip(29, 1, bad, authz)
        assert (r["error_code"], r["resources"]) == (42, [])
    assert authz.acls() == []
