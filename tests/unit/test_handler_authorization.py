"""Every handler's authorization (issue 10 item 4; the rules are in each handler's docstring and
kbroker/handlers/auth.py), in process: a fake authorizer with an allow-set answers for User:alice on a
SASL_PLAINTEXT connection. Denied -> Kafka's exact error code and no side effect (collaborators a denied request
must not reach are ``Unused``, which fail the test on first touch, or record what they were asked); allowed ->
the handler goes on as without an authorizer.

Requests and responses go through the codec (encode + decode), so they have exactly the shapes and defaults the
network gives them.
"""
import time
from types import SimpleNamespace

import pytest

from kbroker import errors
from kbroker.handlers import auth
from kbroker.handlers import registry as load_handlers
from kbroker.protocol.apis import APIS
from kbroker.record import Record, build_batch
from kbroker.security.acl import (ALTER, ALTER_CONFIGS, CLUSTER, CLUSTER_ACTION, CLUSTER_NAME, CREATE, DELETE,
                                  DESCRIBE, DESCRIBE_CONFIGS, GROUP, IDEMPOTENT_WRITE, OPERATION_CODES, READ, TOPIC,
                                  TRANSACTIONAL_ID, WRITE)
from kbroker.server import context
from kbroker.server.connection import CloseConnection
from kbroker.server.context import IN_PROCESS, ClientIdentity, RequestContext
from kbroker.server.router import _REGISTRY
from tests.unit.ctx import FakeConn, Unused, make_services

ALICE = ClientIdentity("SASL_PLAINTEXT", "SASL_PLAINTEXT", "User:alice", "10.0.0.5", 40000)
# Topic, group, transactional id and cluster authorization failures.
TA, GA, TXA, CA = (errors.TOPIC_AUTHORIZATION_FAILED, errors.GROUP_AUTHORIZATION_FAILED,
                   errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, errors.CLUSTER_AUTHORIZATION_FAILED)
assert (TA, GA, TXA, CA) == (29, 30, 53, 31)

# The API keys each test below exercises (test_every_api_of_the_handler_files_is_covered checks the list).
COVERED = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 22, 23, 32, 33, 37, 42, 44}
HANDLER_FILES = {"api_versions", "cluster", "configs", "fetch", "groups", "incremental_alter_configs",
                 "init_producer_id", "list_offsets", "metadata", "offsets_for_leader_epoch", "produce",
                 "topics_admin"}


class Authorizer:
    """The Authorization protocol over an allow-set of (operation, resource type, name); ``any_type``: the
    (operation, resource type) pairs authorize_by_resource_type allows. Records every question."""

    def __init__(self, *allowed, any_type=()):
        self.allowed = set(allowed)
        self.any_type = set(any_type)
        self.asked = []
        self.quiet = []     # questions asked with log_denied=False (a denial only filters the answer)

    def authorize(self, identity, operation, resource_type, name, log_denied=True):
        assert identity is ALICE, identity
        self.asked.append((operation, resource_type, name))
        if not log_denied:
            self.quiet.append((operation, resource_type, name))
        return (operation, resource_type, name) in self.allowed

    def authorize_by_resource_type(self, identity, operation, resource_type):
        assert identity is ALICE, identity
        self.asked.append((operation, resource_type, "<any>"))
        return (operation, resource_type) in self.any_type


def ctx(authorizer, api_key, version, connection=None, **given):
    return RequestContext(ALICE, make_services(authorizer=authorizer, **given), api_key, version, 7, "cli",
                          connection or FakeConn())


def request(api_key, version, body):
    api = APIS[api_key]
    return api.decode_request(version, api.encode_request(version, body).getvalue())


def roundtrip(api_key, version, resp):
    """The response as a client decodes it (fields the handler left out read as their defaults)."""
    api = APIS[api_key]
    return api.decode_response(version, api.encode_response(version, resp).getvalue())


def call(api_key, version, body, authorizer, **given):
    resp = _REGISTRY[api_key].fn(ctx(authorizer, api_key, version, **given), request(api_key, version, body))
    return roundtrip(api_key, version, resp)


@pytest.fixture(autouse=True, scope="module")
def _handlers():
    load_handlers()


def test_the_fake_implements_the_authorization_protocol():
    for name in ("authorize", "authorize_by_resource_type"):
        assert name in vars(context.Authorization) and callable(getattr(Authorizer(), name))


def test_every_api_of_the_handler_files_is_covered():
    load_handlers()
    served = {k for k, h in _REGISTRY.items() if h.fn.__module__.rsplit(".", 1)[-1] in HANDLER_FILES}
    assert served == COVERED


# ------------------------------------------------------------------------------------------------ Produce

class Appends:
    """The replica collaborator for Produce: topics t and u exist; records every append."""

    def __init__(self):
        self.appended = []

    def leader_partition(self, topic, p):
        if topic not in ("t", "u"):
            raise errors.UnknownTopicOrPartition(topic)
        appended = self.appended

        class Part:
            def append(self, records, version, acks):
                appended.append((topic, p))
                return SimpleNamespace(base_offset=len(appended) - 1, log_append_time=-1, log_start_offset=0)
        return Part()


def _batch(transactional=False):
    return build_batch([Record(0, 1_700_000_000_000, None, b"v")], producer_id=7 if transactional else -1,
                       producer_epoch=0 if transactional else -1, is_transactional=transactional)


def produce_body(entries, acks=1, tid=None):
    """entries: [(topic, partition, records)]"""
    topics = {}
    for t, p, rec in entries:
        topics.setdefault(t, []).append({"index": p, "records": rec})
    return {"transactional_id": tid, "acks": acks, "timeout_ms": 1000,
            "topic_data": [{"name": t, "partition_data": ps} for t, ps in topics.items()]}


def produce_codes(resp):
    return {(t["name"], p["index"]): p["error_code"] for t in resp["responses"] for p in t["partition_responses"]}


def test_produce_needs_write_on_each_topic_asked_once_per_topic():
    a, reps = Authorizer((WRITE, TOPIC, "u")), Appends()
    body = produce_body([("t", 0, _batch()), ("t", 1, _batch()), ("t", 2, _batch()), ("u", 0, _batch()),
                         ("nope", 0, _batch())])
    resp = call(0, 9, body, a, replicas=reps)
    assert produce_codes(resp) == {("t", 0): TA, ("t", 1): TA, ("t", 2): TA, ("u", 0): 0, ("nope", 0): TA}
    assert reps.appended == [("u", 0)]
    assert sorted(a.asked) == [(WRITE, TOPIC, "nope"), (WRITE, TOPIC, "t"), (WRITE, TOPIC, "u")]


def test_produce_of_a_denied_topic_fails_before_the_acks_check():
    resp = call(0, 9, produce_body([("t", 0, _batch())], acks=2), Authorizer(), replicas=Unused("replicas"))
    assert produce_codes(resp) == {("t", 0): TA}


def test_transactional_produce_needs_write_on_its_transactional_id():
    body = produce_body([("u", 0, _batch()), ("t", 0, _batch(transactional=True))], tid="tx1")
    allowed_topics = [(WRITE, TOPIC, "t"), (WRITE, TOPIC, "u")]
    resp = call(0, 9, body, Authorizer(*allowed_topics), replicas=Unused("replicas"))
    assert produce_codes(resp) == {("u", 0): TXA, ("t", 0): TXA}
    # A null transactional id never has it, whatever the ACLs.
    resp = call(0, 9, produce_body([("t", 0, _batch(True))]), Authorizer(*allowed_topics),
                replicas=Unused("replicas"))
    assert produce_codes(resp) == {("t", 0): TXA}
    # acks=0 wants no response: the connection is closed, nothing appended.
    with pytest.raises(CloseConnection):
        call(0, 9, produce_body([("t", 0, _batch(True))], acks=0, tid="tx1"), Authorizer(),
             replicas=Unused("replicas"))
    reps = Appends()
    resp = call(0, 9, body, Authorizer((WRITE, TRANSACTIONAL_ID, "tx1"), *allowed_topics), replicas=reps)
    assert produce_codes(resp) == {("u", 0): 0, ("t", 0): 0} and len(reps.appended) == 2


def test_idempotent_produce_needs_no_idempotent_write():
    reps = Appends()
    idem = build_batch([Record(0, 1, None, b"v")], producer_id=3, producer_epoch=0, base_sequence=0)
    resp = call(0, 9, produce_body([("u", 0, idem)]), Authorizer((WRITE, TOPIC, "u")), replicas=reps)
    assert produce_codes(resp) == {("u", 0): 0} and reps.appended == [("u", 0)]


# ------------------------------------------------------------------------------------------ InitProducerId

class Ids:
    def __init__(self):
        self.issued = 0

    def next_id(self):
        self.issued += 1
        return 1000 + self.issued


def test_init_producer_id():
    idem = {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1}
    txn = dict(idem, transactional_id="tx1")
    assert call(22, 4, idem, Authorizer(), producer_ids=Unused("producer_ids"))["error_code"] == CA
    assert call(22, 4, txn, Authorizer(), producer_ids=Unused("producer_ids"))["error_code"] == TXA
    # Allowed transactional id: the transaction coordinator answers (none on this broker: 15).
    assert call(22, 4, txn, Authorizer((WRITE, TRANSACTIONAL_ID, "tx1")), transactions=None)["error_code"] == \
        errors.COORDINATOR_NOT_AVAILABLE
    ids = Ids()
    r = call(22, 4, idem, Authorizer((IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME)), producer_ids=ids)
    assert (r["error_code"], r["producer_id"], ids.issued) == (0, 1001, 1)
    # Kafka >= 2.8 (KIP-679): Write on any topic is enough.
    a = Authorizer(any_type=[(WRITE, TOPIC)])
    r = call(22, 4, idem, a, producer_ids=ids)
    assert (r["error_code"], r["producer_id"]) == (0, 1002)
    assert a.asked == [(IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME), (WRITE, TOPIC, "<any>")]


# ----------------------------------------------------------------------------- Fetch, ListOffsets, OffsetForLeaderEpoch

class Reads:
    """The replica collaborator for the read APIs: every partition of t and u exists; records reads."""

    def __init__(self):
        self.calls = []

    def _part(self, topic, p):
        calls = self.calls

        class Part:
            high_watermark = 5
            last_stable_offset = 5
            log_start_offset = 0
            log_end_offset = 5
            leader_epoch = 3
            leader = 1
            epoch_cache = SimpleNamespace(end_offset_for=lambda epoch, leo: (epoch, leo))

            def check_leader_epoch(self, epoch):
                pass

            def read(self, offset, limit, min_one):
                calls.append(("read", topic, p))
                return SimpleNamespace(size=0, first_entry_incomplete=False)

            def read_for_follower(self, replica_id, offset, limit, min_one, record, log_start_offset=-1):
                calls.append(("follower", topic, p))
                return SimpleNamespace(size=0, first_entry_incomplete=False)

            def add_waiter(self, ev, follower):
                calls.append(("wait", topic, p))

            def remove_waiter(self, ev, follower):
                pass
        return Part()

    def leader_partition(self, topic, p):
        if topic not in ("t", "u"):
            raise errors.UnknownTopicOrPartition(topic)
        return self._part(topic, p)

    get_partition = leader_partition


def fetch_body(parts, replica_id=-1, max_wait=0):
    topics = {}
    for t, p in parts:
        topics.setdefault(t, []).append({"partition": p, "current_leader_epoch": -1, "fetch_offset": 0,
                                         "log_start_offset": -1, "partition_max_bytes": 1 << 20})
    return {"replica_id": replica_id, "max_wait_ms": max_wait, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [],
            "rack_id": "", "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]}


def fetch_codes(resp):
    return {(t["topic"], p["partition_index"]): p["error_code"] for t in resp["responses"] for p in t["partitions"]}


def test_fetch_consumer_needs_read_on_each_topic():
    reps, a = Reads(), Authorizer((READ, TOPIC, "u"))
    resp = call(1, 12, fetch_body([("t", 0), ("t", 1), ("u", 0), ("gone", 0)]), a, replicas=reps,
                config={})
    assert fetch_codes(resp) == {("t", 0): TA, ("t", 1): TA, ("u", 0): 0, ("gone", 0): TA}
    assert reps.calls == [("read", "u", 0)]
    assert sorted(a.asked) == [(READ, TOPIC, "gone"), (READ, TOPIC, "t"), (READ, TOPIC, "u")]


def test_fetch_with_every_partition_denied_waits_for_nothing():
    reps = Reads()
    t0 = time.monotonic()
    resp = call(1, 12, fetch_body([("t", 0)], max_wait=3000), Authorizer(), replicas=reps, config={})
    assert fetch_codes(resp) == {("t", 0): TA} and reps.calls == []
    assert time.monotonic() - t0 < 1.0


def test_follower_fetch_needs_cluster_action():
    reps = Reads()
    resp = call(1, 12, fetch_body([("t", 0), ("u", 1)], replica_id=2), Authorizer((READ, TOPIC, "t")),
                replicas=reps, config={})
    assert fetch_codes(resp) == {("t", 0): TA, ("u", 1): TA} and reps.calls == []  # no follower LEO recorded
    resp = call(1, 12, fetch_body([("t", 0)], replica_id=2), Authorizer((CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)),
                replicas=reps, config={})
    assert fetch_codes(resp) == {("t", 0): 0} and reps.calls == [("follower", "t", 0)]


def test_list_offsets_needs_describe_on_each_topic():
    body = {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": n, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}
        for n in ("t", "u")]}
    resp = call(2, 7, body, Authorizer((DESCRIBE, TOPIC, "u")), replicas=Reads())
    got = {t["name"]: (t["partitions"][0]["error_code"], t["partitions"][0]["offset"]) for t in resp["topics"]}
    assert got == {"t": (TA, -1), "u": (0, 5)}


def test_offset_for_leader_epoch_cluster_action_or_describe():
    body = {"replica_id": -1, "topics": [{"topic": n, "partitions": [
        {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 3}]} for n in ("t", "u")]}

    def codes(a):
        resp = call(23, 3, body, a, replicas=Reads())
        return {t["topic"]: (t["partitions"][0]["error_code"], t["partitions"][0]["end_offset"])
                for t in resp["topics"]}
    assert codes(Authorizer((DESCRIBE, TOPIC, "u"))) == {"t": (TA, -1), "u": (0, 5)}
    assert codes(Authorizer((CLUSTER_ACTION, CLUSTER, CLUSTER_NAME))) == {"t": (0, 5), "u": (0, 5)}


# ------------------------------------------------------------------------------------------------ Metadata

class Cache:
    """The metadata cache: topics ``t`` and ``u`` with one partition led by broker 1; records lookups."""
    controller_id = 1

    def __init__(self):
        st = SimpleNamespace(leader=1, leader_epoch=0, replicas=[1], isr=[1], offline_replicas=[])
        self.known = {"t": {0: st}, "u": {0: st}}
        self.looked = []

    def topics(self):
        return list(self.known)

    def topic(self, name):
        self.looked.append(name)
        return self.known.get(name)

    def memo(self, name, key, build):
        """MetadataCache.memo without the memo: every answer built from a recorded lookup."""
        parts = self.topic(name)
        return None if parts is None else build(parts)

    def alive_broker_ids(self):
        return {1}

    def alive_brokers(self, listener):
        return [SimpleNamespace(id=1, host="h", port=9092, rack=None)]


class AutoCreate:
    def __init__(self, cache):
        self.cache, self.created = cache, []

    def auto_create_topic(self, name):
        self.created.append(name)
        self.cache.known[name] = self.cache.known["t"]


def metadata(a, topics, version=9, auto=True, **flags):
    cache = Cache()
    admin = AutoCreate(cache)
    body = dict({"topics": None if topics is None else [{"name": n} for n in topics],
                 "allow_auto_topic_creation": True}, **flags)
    resp = call(3, version, body, a, metadata=cache, topics=admin, config={"auto.create.topics.enable": auto})
    return {t["name"]: t["error_code"] for t in resp["topics"]}, resp, cache, admin


def test_metadata_all_topics_lists_only_describable_ones():
    a = Authorizer((DESCRIBE, TOPIC, "u"))
    got, _, _, _ = metadata(a, None)
    assert got == {"u": 0}
    # Listing all topics only filters: no question is a refusal to audit (Kafka's logIfDenied = false) ...
    assert a.asked and sorted(a.quiet) == sorted(a.asked)
    # ... while naming a topic the principal may not describe is one.
    a = Authorizer((DESCRIBE, TOPIC, "u"))
    metadata(a, ["t"])
    assert (DESCRIBE, TOPIC, "t") in a.asked and (DESCRIBE, TOPIC, "t") not in a.quiet
    got, _, _, _ = metadata(Authorizer((DESCRIBE, TOPIC, "u")), [], version=0)  # v0: empty = all
    assert got == {"u": 0}


def test_metadata_named_topics_without_describe_disclose_nothing():
    got, _, cache, admin = metadata(Authorizer((DESCRIBE, TOPIC, "u")), ["t", "u", "missing"])
    assert got == {"t": TA, "u": 0, "missing": TA}
    assert cache.looked == ["u"] and admin.created == []     # existence of t / missing never looked at


def test_metadata_auto_creation_needs_create_on_cluster_or_topic():
    describe = [(DESCRIBE, TOPIC, n) for n in ("new1", "new2")]
    got, _, _, admin = metadata(Authorizer(*describe), ["new1", "new2"])
    assert got == {"new1": TA, "new2": TA} and admin.created == []
    got, _, _, admin = metadata(Authorizer(*describe, (CREATE, TOPIC, "new2")), ["new1", "new2"])
    assert got == {"new1": TA, "new2": 0} and admin.created == ["new2"]
    a = Authorizer(*describe, (CREATE, CLUSTER, CLUSTER_NAME))
    got, _, _, admin = metadata(a, ["new1", "new2"])
    assert got == {"new1": 0, "new2": 0} and admin.created == ["new1", "new2"]
    assert a.asked.count((CREATE, CLUSTER, CLUSTER_NAME)) == 1
    # Auto-creation off: an unknown (describable) topic is just unknown; Create is not asked.
    a = Authorizer(*describe)
    got, _, _, admin = metadata(a, ["new1"], auto=False)
    assert got == {"new1": errors.UNKNOWN_TOPIC_OR_PARTITION} and (CREATE, CLUSTER, CLUSTER_NAME) not in a.asked


def bits(*ops):
    return sum(1 << OPERATION_CODES[op] for op in ops)


def test_metadata_authorized_operations_kip_430():
    a = Authorizer((DESCRIBE, TOPIC, "u"), (READ, TOPIC, "u"), (DESCRIBE, CLUSTER, CLUSTER_NAME),
                   (CREATE, CLUSTER, CLUSTER_NAME))
    got, resp, _, _ = metadata(a, ["t", "u"], version=9, include_cluster_authorized_operations=True,
                               include_topic_authorized_operations=True)
    assert resp["cluster_authorized_operations"] == bits(DESCRIBE, CREATE)
    ops = {t["name"]: t["topic_authorized_operations"] for t in resp["topics"]}
    assert ops == {"t": auth.OPERATIONS_OMITTED, "u": bits(DESCRIBE, READ)}
    # Not asked for: "not provided"; no Describe on the Cluster: 0.
    _, resp, _, _ = metadata(Authorizer((DESCRIBE, TOPIC, "u")), ["u"], include_cluster_authorized_operations=True)
    assert resp["cluster_authorized_operations"] == 0
    assert resp["topics"][0]["topic_authorized_operations"] == auth.OPERATIONS_OMITTED


# ------------------------------------------------------------------------------------------------ groups

OAM = SimpleNamespace


class Coordinator:
    """The group coordinator: answers everything with success; records calls."""
    active = True

    def __init__(self):
        self.calls = []

    def partition_for(self, group):
        return 0

    def join_group(self, group, member, inst, client, host, rebalance, session, ptype, protocols, req_known, cb):
        self.calls.append(("join", group))
        cb({"error_code": 0, "generation_id": 1, "protocol_type": "consumer", "protocol_name": "range",
            "leader": "m1", "member_id": "m1", "members": []})

    def sync_group(self, group, generation, member, inst, ptype, pname, assignments, cb):
        self.calls.append(("sync", group))
        cb({"error_code": 0, "protocol_type": "consumer", "protocol_name": "range", "assignment": b"a"})

    def heartbeat(self, group, generation, member, inst=None):
        self.calls.append(("heartbeat", group))
        return 0

    def leave_group(self, group, leaving):
        self.calls.append(("leave", group))
        return 0, [0] * len(leaving)

    def handle_commit(self, group, generation, member, inst, retention, offsets):
        self.calls.append(("commit", group, sorted(offsets)))
        return {tp: 0 for tp in offsets}

    def commit_unchecked(self, group, offsets):
        self.calls.append(("commit0", group, sorted(offsets)))
        return {tp: 0 for tp in offsets}

    def fetch_offsets(self, group, partitions):
        self.calls.append(("fetch", group, partitions))
        committed = {("t", 0): OAM(offset=10, leader_epoch=1, metadata=""),
                     ("u", 0): OAM(offset=20, leader_epoch=1, metadata="")}
        if partitions is None:
            return 0, committed
        return 0, {tp: committed[tp] for tp in partitions if tp in committed}

    def describe_group(self, group):
        self.calls.append(("describe", group))
        return 0, {"state": "Stable", "protocol_type": "consumer", "protocol": "range", "members": []}

    def list_groups(self):
        return 0, [("g1", "consumer", "Stable"), ("g2", "consumer", "Empty")]

    def delete_group(self, group):
        self.calls.append(("delete", group))
        return 0


class OffsetsTopic:
    def __init__(self):
        self.ensured = 0

    def ensure_offsets_topic(self):
        self.ensured += 1


class Brokers:
    def alive_brokers(self, listener):
        return [SimpleNamespace(id=1, host="h", port=9092, rack=None)]

    def partition(self, topic, p):
        return SimpleNamespace(leader=1) if topic == "__consumer_offsets" else None


def test_find_coordinator_needs_describe_on_group_or_transactional_id():
    body = {"key_type": 0, "coordinator_keys": ["g1", "g2"]}
    topics = OffsetsTopic()
    resp = call(10, 4, body, Authorizer((DESCRIBE, GROUP, "g2")), groups=Coordinator(), topics=topics,
                metadata=Brokers())
    assert [(c["key"], c["error_code"], c["node_id"]) for c in resp["coordinators"]] == [("g1", GA, -1),
                                                                                         ("g2", 0, 1)]
    # Denied alone: the offsets topic is not even ensured.
    resp = call(10, 3, {"key": "g1", "key_type": 0}, Authorizer(), groups=Unused("groups"),
                topics=Unused("topics"))
    assert (resp["error_code"], resp["node_id"]) == (GA, -1)
    resp = call(10, 3, {"key": "tx1", "key_type": 1}, Authorizer(), topics=Unused("topics"))
    assert resp["error_code"] == TXA
    resp = call(10, 3, {"key": "tx1", "key_type": 1}, Authorizer((DESCRIBE, TRANSACTIONAL_ID, "tx1")),
                transactions=None)
    assert resp["error_code"] == errors.COORDINATOR_NOT_AVAILABLE    # no transaction coordinator here


MEMBERSHIP = [
    (11, 7, {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
             "group_instance_id": None, "protocol_type": "consumer",
             "protocols": [{"name": "range", "metadata": b""}]}, "join"),
    (14, 5, {"group_id": "g", "generation_id": 1, "member_id": "m1", "group_instance_id": None,
             "protocol_type": "consumer", "protocol_name": "range", "assignments": []}, "sync"),
    (12, 4, {"group_id": "g", "generation_id": 1, "member_id": "m1", "group_instance_id": None}, "heartbeat"),
    (13, 4, {"group_id": "g", "members": [{"member_id": "m1", "group_instance_id": None}]}, "leave"),
    (13, 0, {"group_id": "g", "member_id": "m1"}, "leave"),
]


@pytest.mark.parametrize("api_key,version,body,call_name", MEMBERSHIP, ids=lambda x: str(x)[:12])
def test_membership_apis_need_read_on_the_group(api_key, version, body, call_name):
    resp = call(api_key, version, body, Authorizer((DESCRIBE, GROUP, "g")), groups=Unused("groups"))
    assert resp["error_code"] == GA
    if api_key == 11:
        assert (resp["member_id"], resp["generation_id"], resp["members"]) == ("", -1, [])
    if api_key == 13 and version >= 3:
        assert resp["members"] == []
    coord = Coordinator()
    resp = call(api_key, version, body, Authorizer((READ, GROUP, "g")), groups=coord)
    assert resp["error_code"] == 0 and coord.calls == [(call_name, "g")]


def commit_body(parts, version=8):
    topics = {}
    for t, p in parts:
        topics.setdefault(t, []).append({"partition_index": p, "committed_offset": 5, "committed_leader_epoch": -1,
                                         "commit_timestamp": -1, "committed_metadata": ""})
    return {"group_id": "g", "generation_id_or_member_epoch": 1, "member_id": "m1", "group_instance_id": None,
            "retention_time_ms": -1, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}


def commit_codes(resp):
    return {(t["name"], p["partition_index"]): p["error_code"] for t in resp["topics"] for p in t["partitions"]}


def test_offset_commit_needs_read_on_group_then_on_each_topic():
    parts = [("t", 0), ("t", 1), ("u", 0)]
    resp = call(8, 8, commit_body(parts), Authorizer((READ, TOPIC, "t"), (READ, TOPIC, "u")),
                groups=Unused("groups"), topics=Unused("topics"))
    assert commit_codes(resp) == {tp: GA for tp in parts}
    # Every topic denied: the coordinator (and the offsets topic) is not involved.
    resp = call(8, 8, commit_body(parts), Authorizer((READ, GROUP, "g")), groups=Unused("groups"),
                topics=Unused("topics"))
    assert commit_codes(resp) == {tp: TA for tp in parts}
    coord, topics = Coordinator(), OffsetsTopic()
    resp = call(8, 8, commit_body(parts), Authorizer((READ, GROUP, "g"), (READ, TOPIC, "u")), groups=coord,
                topics=topics)
    assert commit_codes(resp) == {("t", 0): TA, ("t", 1): TA, ("u", 0): 0}
    assert coord.calls == [("commit", "g", [("u", 0)])]
    coord = Coordinator()
    resp = call(8, 0, commit_body(parts), Authorizer((READ, GROUP, "g"), (READ, TOPIC, "t")), groups=coord,
                topics=OffsetsTopic())
    assert commit_codes(resp) == {("t", 0): 0, ("t", 1): 0, ("u", 0): TA}
    assert coord.calls == [("commit0", "g", [("t", 0), ("t", 1)])]


def fetch_offsets(a, topics, version=7, coord=None):
    body = {"group_id": "g", "require_stable": False,
            "topics": None if topics is None else [{"name": t, "partition_indexes": [0]} for t in topics]}
    resp = call(9, version, body, a, groups=Coordinator() if coord is None else coord)
    return resp, {(t["name"], p["partition_index"]): (p["error_code"], p["committed_offset"])
                  for t in resp["topics"] for p in t["partitions"]}


def test_offset_fetch_needs_describe_on_group_and_topics():
    resp, got = fetch_offsets(Authorizer((DESCRIBE, TOPIC, "t")), ["t"], coord=Unused("groups"))
    assert resp["error_code"] == GA
    resp, got = fetch_offsets(Authorizer((DESCRIBE, TOPIC, "t")), ["t"], version=1, coord=Unused("groups"))
    assert got == {("t", 0): (GA, -1)}           # v0-v1: the error goes per partition
    coord = Coordinator()
    resp, got = fetch_offsets(Authorizer((DESCRIBE, GROUP, "g"), (DESCRIBE, TOPIC, "u")), ["t", "u"],
                              coord=coord)
    assert resp["error_code"] == 0 and got == {("t", 0): (TA, -1), ("u", 0): (0, 20)}
    assert coord.calls == [("fetch", "g", [("u", 0)])]
    # All the group's offsets: the topics it may not Describe are left out.
    resp, got = fetch_offsets(Authorizer((DESCRIBE, GROUP, "g"), (DESCRIBE, TOPIC, "u")), None)
    assert got == {("u", 0): (0, 20)}


def test_describe_list_delete_groups():
    body = {"groups": ["g1", "g2"], "include_authorized_operations": True}
    coord = Coordinator()
    resp = call(15, 5, body, Authorizer((DESCRIBE, GROUP, "g2"), (DELETE, GROUP, "g2")), groups=coord)
    got = {g["group_id"]: (g["error_code"], g["group_state"], g["authorized_operations"]) for g in resp["groups"]}
    assert got == {"g1": (GA, "", auth.OPERATIONS_OMITTED), "g2": (0, "Stable", bits(DESCRIBE, DELETE))}
    assert coord.calls == [("describe", "g2")]

    def listed(a):
        return [g["group_id"] for g in call(16, 4, {"states_filter": []}, a, groups=Coordinator())["groups"]]
    assert listed(Authorizer()) == []
    assert listed(Authorizer((DESCRIBE, GROUP, "g2"))) == ["g2"]
    assert listed(Authorizer((DESCRIBE, CLUSTER, CLUSTER_NAME))) == ["g1", "g2"]

    coord = Coordinator()
    resp = call(42, 2, {"groups_names": ["g1", "g2"]}, Authorizer((DELETE, GROUP, "g1"), (DESCRIBE, GROUP, "g2")),
                groups=coord)
    assert [(r["group_id"], r["error_code"]) for r in resp["results"]] == [("g1", 0), ("g2", GA)]
    assert coord.calls == [("delete", "g1")]


# ------------------------------------------------------------------------------------------------ topic admin

class Admin:
    """The topic admin: records what it changed."""

    def __init__(self):
        self.created, self.deleted, self.grown, self.altered = [], [], [], []

    def request_allowance(self):
        return SimpleNamespace(take=lambda name, n: None)

    def requested_partitions(self, n, assignment=None):
        return n

    def check_topic_partitions(self, name, n):
        pass

    def current_partitions(self, name):
        return 1

    def create_topic(self, name, num_partitions, replication_factor, assignment=None, configs=None,
                     validate_only=False, timeout_ms=30000):
        self.created.append(name)
        return {p: [1] for p in range(num_partitions)}

    def describe_topic_config(self, name):
        return [SimpleNamespace(name="cleanup.policy", value="delete", read_only=False, source_id=5,
                                sensitive=False)]

    def describe_broker_config(self):
        return self.describe_topic_config("")

    def delete_topic(self, name, timeout_ms=30000):
        self.deleted.append(name)

    def create_partitions(self, name, count, assignment=None, validate_only=False, timeout_ms=30000):
        self.grown.append(name)

    def alter_topic_config(self, name, configs, validate_only=False):
        self.altered.append(name)


def create_body(names):
    return {"topics": [{"name": n, "num_partitions": 2, "replication_factor": 1, "assignments": [], "configs": []}
                       for n in names], "timeout_ms": 0, "validate_only": False}


def test_create_topics_needs_create_on_cluster_or_topic():
    admin = Admin()
    resp = call(19, 5, create_body(["a", "b", "a"]), Authorizer((CREATE, TOPIC, "b"), (DESCRIBE_CONFIGS, TOPIC, "b")),
                topics=admin)
    got = [(t["name"], t["error_code"]) for t in resp["topics"]]
    assert got == [("a", errors.INVALID_REQUEST), ("b", 0), ("a", errors.INVALID_REQUEST)]
    assert admin.created == ["b"]
    resp = call(19, 5, create_body(["c", "d"]), Authorizer((CREATE, TOPIC, "d")), topics=admin)
    got = {t["name"]: (t["error_code"], t["error_message"], t["topic_config_error_code"], t["num_partitions"],
                       t["configs"]) for t in resp["topics"]}
    # d is created, but without DescribeConfigs its configs are withheld (v5's topic_config_error_code).
    assert got == {"c": (TA, "Authorization failed.", 0, -1, []), "d": (0, None, TA, -1, [])}
    assert admin.created == ["b", "d"]
    a = Authorizer((CREATE, CLUSTER, CLUSTER_NAME), (DESCRIBE_CONFIGS, TOPIC, "e"))
    resp = call(19, 5, create_body(["e", "f"]), a, topics=admin)
    assert [(t["name"], t["error_code"], t["num_partitions"]) for t in resp["topics"]] == [("e", 0, 2), ("f", 0, -1)]
    assert admin.created == ["b", "d", "e", "f"]


class Known:
    def contains_topic(self, name):
        return name in ("t", "u")


def test_delete_topics_needs_delete_whether_or_not_the_topic_exists():
    admin = Admin()
    body = {"topic_names": ["t", "u", "missing", "ghost"], "timeout_ms": 0}
    resp = call(20, 5, body, Authorizer((DELETE, TOPIC, "u"), (DELETE, TOPIC, "ghost"), (DESCRIBE, TOPIC, "t")),
                topics=admin, metadata=Known())
    got = {r["name"]: r["error_code"] for r in resp["responses"]}
    assert got == {"t": TA, "u": 0, "missing": TA, "ghost": errors.UNKNOWN_TOPIC_OR_PARTITION}
    assert admin.deleted == ["u"]


def test_create_partitions_needs_alter():
    admin = Admin()
    body = {"topics": [{"name": n, "count": 3, "assignments": None} for n in ("t", "u")], "timeout_ms": 0,
            "validate_only": False}
    resp = call(37, 3, body, Authorizer((ALTER, TOPIC, "u")), topics=admin)
    assert [(r["name"], r["error_code"]) for r in resp["results"]] == [("t", TA), ("u", 0)]
    assert admin.grown == ["u"]


# ------------------------------------------------------------------------------------------------ configs

def config_resources(*pairs, incremental=False, describe=False):
    if describe:
        return [{"resource_type": rt, "resource_name": n, "configuration_keys": None} for rt, n in pairs]
    if incremental:
        return [{"resource_type": rt, "resource_name": n, "configs": [
            {"name": "cleanup.policy", "config_operation": 0, "value": "compact"}]} for rt, n in pairs]
    return [{"resource_type": rt, "resource_name": n, "configs": [{"name": "cleanup.policy", "value": "compact"}]}
            for rt, n in pairs]


def result_codes(resp, key):
    return [(r["resource_type"], r["resource_name"], r["error_code"]) for r in resp[key]]


def test_describe_configs_needs_describe_configs():
    pairs = [(2, "t"), (2, "u"), (4, "1"), (2, "bad/name")]
    resp = call(32, 4, {"resources": config_resources(*pairs, describe=True), "include_synonyms": False,
                        "include_documentation": False}, Authorizer((DESCRIBE_CONFIGS, TOPIC, "u")), topics=Admin())
    assert result_codes(resp, "results") == [(2, "t", TA), (2, "u", 0), (4, "1", CA), (2, "bad/name", TA)]
    resp = call(32, 4, {"resources": config_resources((4, "1"), describe=True)},
                Authorizer((DESCRIBE_CONFIGS, CLUSTER, CLUSTER_NAME)), topics=Admin())
    assert result_codes(resp, "results") == [(4, "1", 0)] and resp["results"][0]["configs"]


def test_alter_configs_need_alter_configs():
    for api_key, version, incremental, key in ((33, 2, False, "responses"), (44, 1, True, "responses")):
        admin = Admin()
        body = {"resources": config_resources((2, "t"), (2, "u"), (4, "1"), (8, "1"), incremental=incremental),
                "validate_only": False}
        resp = call(api_key, version, body, Authorizer((ALTER_CONFIGS, TOPIC, "u")), topics=admin, broker_id=1)
        assert result_codes(resp, key) == [(2, "t", TA), (2, "u", 0), (4, "1", CA), (8, "1", CA)], api_key
        assert admin.altered == ["u"]
        # With AlterConfigs on the Cluster a broker resource gets kbroker's answer: its configs are static.
        resp = call(api_key, version, {"resources": config_resources((4, "1"), incremental=incremental),
                                       "validate_only": False},
                    Authorizer((ALTER_CONFIGS, CLUSTER, CLUSTER_NAME)), topics=admin, broker_id=1)
        assert result_codes(resp, key) == [(4, "1", errors.INVALID_REQUEST)]


# ------------------------------------------------------------------------------------------------ inter-broker

LAI = {"controller_id": 1, "controller_epoch": 5, "broker_epoch": 42, "topic_states": [
    {"topic_name": "t", "partition_states": [{"partition_index": 0, "controller_epoch": 5, "leader": 1,
                                              "leader_epoch": 2, "isr": [1], "partition_epoch": 3,
                                              "replicas": [1], "is_new": False}]}], "live_leaders": []}
STOP = {"controller_id": 1, "controller_epoch": 5, "broker_epoch": 42, "topic_states": [
    {"topic_name": "t", "partition_states": [{"partition_index": 0, "delete_partition": True}]}]}
UM = {"controller_id": 1, "controller_epoch": 5, "broker_epoch": 42, "live_brokers": [], "topic_states": []}
CS = {"broker_id": 2, "broker_epoch": 42}
INTER_BROKER = [(4, 4, LAI), (5, 3, STOP), (6, 6, UM), (7, 3, CS)]


class View:
    """A controller view that never agrees (so an authorized request stops at the next check)."""
    controller_id, epoch = 2, 9

    def is_current(self, cid, epoch, timeout):
        return False


@pytest.mark.parametrize("api_key,version,body", INTER_BROKER, ids=lambda x: str(x)[:8])
def test_controller_requests_need_cluster_action(api_key, version, body):
    untouched = dict(control_plane=Unused("control_plane"), replicas=Unused("replicas"),
                     metadata=Unused("metadata"), controller=Unused("controller"))
    resp = call(api_key, version, body, Authorizer((ALTER, CLUSTER, CLUSTER_NAME)), **untouched)
    assert resp["error_code"] == CA
    for p in resp.get("partition_errors", ()):
        assert p["error_code"] == CA
    plane = context.ControlPlane(View(), None, SimpleNamespace(wait_epoch=lambda timeout: 42))
    resp = call(api_key, version, body, Authorizer((CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)), control_plane=plane,
                controller=None)
    # Past authorization: the stale controller (11), or for ControlledShutdown no active controller here (41).
    assert resp["error_code"] == (errors.NOT_CONTROLLER if api_key == 7 else errors.STALE_CONTROLLER_EPOCH)


def test_the_in_process_path_asks_nothing():
    a = Authorizer()
    services = make_services(authorizer=a, metadata=Cache(), topics=AutoCreate(Cache()),
                             config={"auto.create.topics.enable": False})
    resp = roundtrip(3, 9, _REGISTRY[3].fn(RequestContext(IN_PROCESS, services, 3, 9), request(3, 9, {"topics": None})))
    assert sorted(t["name"] for t in resp["topics"]) == ["t", "u"] and a.asked == []


def test_api_versions_asks_nothing():
    a = Authorizer()
    conn = FakeConn()
    conn.router = SimpleNamespace(api_versions=lambda: [(18, 0, 3)])
    resp = _REGISTRY[18].fn(ctx(a, 18, 3, connection=conn), request(18, 3, {}))
    assert resp["error_code"] == 0 and a.asked == []


def test_without_an_authorizer_nothing_is_asked_and_everything_allowed():
    reps = Appends()
    c = RequestContext(ALICE, make_services(authorizer=None, replicas=reps), 0, 9, 1, "c", FakeConn())
    resp = _REGISTRY[0].fn(c, request(0, 9, produce_body([("t", 0, _batch())])))
    assert produce_codes(resp) == {("t", 0): 0}
    assert auth.authorized_operations(c, TOPIC, "t") == bits(*auth.SUPPORTED_OPERATIONS[TOPIC])
