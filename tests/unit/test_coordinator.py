"""GroupCoordinator state machine on a fake clock, record bytes of __consumer_offsets, coordinator hashing."""
import struct

import pytest

from kbroker import errors
from kbroker.coordinator import offsets_log, schemas
from kbroker.coordinator.coordinator import LOADING, GroupCoordinator
from kbroker.coordinator.group import (COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE, Group,
                                       IllegalStateTransition, Member, OffsetAndMetadata, java_string_hash,
                                       kafka_abs, partition_for)
from kbroker.coordinator.timers import FakeScheduler

CFG = {
    "offsets.topic.num.partitions": 1,
    "group.min.session.timeout.ms": 6000,
    "group.max.session.timeout.ms": 300000,
    "group.initial.rebalance.delay.ms": 0,
    "offsets.retention.minutes": 1440,
    "offset.metadata.max.bytes": 4096,
}
PROTO = [("range", b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")]


class MemStore:
    def __init__(self):
        self.parts = {}
        self.fail = None

    def append(self, index, records, now):
        if self.fail is not None:
            raise self.fail
        self.parts.setdefault(index, []).extend(records)

    def read(self, index):
        return list(self.parts.get(index, []))


def make(store=None, topics=None, **over):
    cfg = dict(CFG, **over)
    sched = FakeScheduler()
    store = store or MemStore()
    exists = None if topics is None else (lambda tp: tp in topics)
    c = GroupCoordinator(cfg, sched, store, topic_exists=exists)
    for p in range(cfg["offsets.topic.num.partitions"]):
        c.load_partition(p)
    return c, sched, store


class Box:
    def __init__(self):
        self.value = None
        self.calls = 0

    def __call__(self, v):
        self.value = v
        self.calls += 1

    @property
    def done(self):
        return self.calls > 0

    @property
    def error(self):
        return self.value["error_code"]


def join(c, member_id="", group="g", session=10000, rebalance=20000, ptype="consumer", protocols=PROTO,
         require_known=False, instance=None, client="cl"):
    box = Box()
    c.join_group(group, member_id, instance, client, "/127.0.0.1", rebalance, session, ptype, protocols,
                 require_known, box)
    return box


def sync(c, member_id, generation, assignments=None, group="g", ptype=None, pname=None):
    box = Box()
    c.sync_group(group, generation, member_id, None, ptype, pname, assignments or {}, box)
    return box


def stable_group(c, group="g"):
    """One member joined and synced; returns [its member id]."""
    join(c, group=group)
    g = c.groups[group]
    assert g.is_(COMPLETING_REBALANCE), g
    ids = list(g.members)
    leader = g.leader_id
    followers = [sync(c, m, g.generation, group=group) for m in ids if m != leader]
    lb = sync(c, leader, g.generation, {m: ("a-" + m).encode() for m in ids}, group=group)
    assert lb.error == 0 and all(f.error == 0 for f in followers)
    assert g.is_(STABLE)
    return [leader] + [m for m in ids if m != leader]


# ------------------------------------------------------------------------------------------------ hashing
@pytest.mark.parametrize("s,h,p50", [
    ("", 0, 0),
    ("hello", 99162322, 22),
    ("my-group", -1906497762, 12),            # Kafka's own answer for "my-group" with 50 partitions is 12
    ("test-group", 627841412, 12),
    ("polygenelubricants", -2147483648, 0),   # Integer.MIN_VALUE: Utils.abs maps it to 0
    ("\U0001F600", 1772899, 49),              # a surrogate pair counts as two UTF-16 code units
    ("console-consumer-12345", 158455506, 6),
])
def test_java_hash_vectors(s, h, p50):
    assert java_string_hash(s) == h
    assert partition_for(s, 50) == p50


def test_kafka_abs():
    assert kafka_abs(-(1 << 31)) == 0
    assert kafka_abs(-5) == 5
    assert kafka_abs(7) == 7


# ------------------------------------------------------------------------------------------ state machine
def test_illegal_transitions_raise():
    g = Group("g")
    with pytest.raises(IllegalStateTransition):
        g.transition(STABLE)
    with pytest.raises(IllegalStateTransition):
        g.transition(COMPLETING_REBALANCE)
    g.transition(PREPARING_REBALANCE)
    g.transition(COMPLETING_REBALANCE)
    g.transition(STABLE)
    g.transition(PREPARING_REBALANCE)
    g.transition(EMPTY)
    g.transition(DEAD)
    with pytest.raises(IllegalStateTransition):
        g.transition(EMPTY)


def test_single_member_join_sync_heartbeat():
    c, sched, store = make()
    b = join(c)
    assert b.done and b.error == 0
    r = b.value
    assert r["generation_id"] == 1 and r["leader"] == r["member_id"] and r["protocol_name"] == "range"
    assert r["member_id"].startswith("cl-") and len(r["member_id"]) == 3 + 36
    assert [m["member_id"] for m in r["members"]] == [r["member_id"]]
    assert r["members"][0]["metadata"] == PROTO[0][1]
    g = c.groups["g"]
    assert g.is_(COMPLETING_REBALANCE)
    assert c.heartbeat("g", 1, r["member_id"]) == errors.REBALANCE_IN_PROGRESS
    s = sync(c, r["member_id"], 1, {r["member_id"]: b"ASSIGN"})
    assert s.error == 0 and s.value["assignment"] == b"ASSIGN"
    assert g.is_(STABLE)
    assert c.heartbeat("g", 1, r["member_id"]) == 0
    # the group metadata record was written with the assignment
    kind, _, key = schemas.decode_key(store.parts[0][-1][0])
    v, value = schemas.decode_value(kind, store.parts[0][-1][1])
    assert (kind, key, v) == (schemas.GROUP_KEY, {"group": "g"}, 1)
    assert value["generation"] == 1 and value["protocol"] == "range" and value["leader"] == r["member_id"]
    assert value["members"][0]["assignment"] == b"ASSIGN" and value["members"][0]["rebalance_timeout"] == 20000


def test_member_id_required_then_rejoin():
    c, _, _ = make()
    b = join(c, require_known=True)
    assert b.error == errors.MEMBER_ID_REQUIRED
    mid = b.value["member_id"]
    assert mid.startswith("cl-") and "g" in c.groups and not c.groups["g"].members
    b2 = join(c, member_id=mid, require_known=True)
    assert b2.error == 0 and b2.value["member_id"] == mid and b2.value["generation_id"] == 1


def test_pending_member_id_forgotten_after_session():
    c, sched, _ = make()
    mid = join(c, require_known=True).value["member_id"]
    sched.advance(10001)
    assert join(c, member_id=mid).error == errors.UNKNOWN_MEMBER_ID


def test_second_member_triggers_rebalance_and_follower_sync_waits():
    c, sched, _ = make()
    m1 = stable_group(c)[0]
    b2 = join(c, client="c2")
    g = c.groups["g"]
    assert not b2.done and g.is_(PREPARING_REBALANCE)
    assert c.heartbeat("g", 1, m1) == errors.REBALANCE_IN_PROGRESS
    b1 = join(c, member_id=m1)
    assert b1.done and b2.done and g.is_(COMPLETING_REBALANCE)
    assert b1.value["generation_id"] == b2.value["generation_id"] == 2
    assert b1.value["leader"] == m1 == b2.value["leader"]
    m2 = b2.value["member_id"]
    assert [m["member_id"] for m in b1.value["members"]] == [m1, m2]
    assert b2.value["members"] == []
    # stale generation and unknown member
    assert sync(c, m2, 1).error == errors.ILLEGAL_GENERATION
    assert sync(c, "nobody", 2).error == errors.UNKNOWN_MEMBER_ID
    assert sync(c, m2, 2, ptype="connect").error == errors.INCONSISTENT_GROUP_PROTOCOL
    s2 = sync(c, m2, 2)
    assert not s2.done
    s1 = sync(c, m1, 2, {m1: b"A1"})          # m2 missing from the leader's map: gets an empty assignment
    assert s1.value["assignment"] == b"A1" and s2.error == 0 and s2.value["assignment"] == b""
    assert g.is_(STABLE)
    # a stable follower rejoining with the same metadata gets the current generation back, no rebalance
    again = join(c, member_id=m2)
    assert again.error == 0 and again.value["generation_id"] == 2 and g.is_(STABLE)
    assert sync(c, m2, 2).value["assignment"] == b""


def test_session_expiry_removes_member_and_rebalances():
    c, sched, _ = make()
    c.min_session = 1000
    b1 = join(c, session=6000)
    m1 = b1.value["member_id"]
    b2 = join(c, session=6000, client="c2")
    join(c, member_id=m1, session=6000)
    g = c.groups["g"]
    m2 = b2.value["member_id"]
    sync(c, m2, 2)
    sync(c, m1, 2, {m1: b"x", m2: b"y"})
    assert g.is_(STABLE)
    for _ in range(5):                         # m1 heartbeats every second, m2 is silent
        sched.advance(1000)
        assert c.heartbeat("g", 2, m1) == 0
    sched.advance(999)                         # m2 last seen at its SyncGroup (t=0): deadline t=6000
    assert m2 in g.members
    assert c.heartbeat("g", 2, m1) == 0
    sched.advance(1)
    assert m2 not in g.members and g.is_(PREPARING_REBALANCE)
    assert c.heartbeat("g", 2, m1) == errors.REBALANCE_IN_PROGRESS
    assert c.heartbeat("g", 2, m2) == errors.UNKNOWN_MEMBER_ID
    r = join(c, member_id=m1, session=6000)
    assert r.value["generation_id"] == 3 and [m["member_id"] for m in r.value["members"]] == [m1]


def test_rebalance_timeout_removes_members_that_do_not_rejoin():
    c, sched, _ = make()
    m1, m2 = None, None
    b1 = join(c, rebalance=15000)
    m1 = b1.value["member_id"]
    b2 = join(c, client="c2", rebalance=15000)
    join(c, member_id=m1, rebalance=15000)
    m2 = b2.value["member_id"]
    g = c.groups["g"]
    sync(c, m2, 2)
    sync(c, m1, 2, {})
    b3 = join(c, client="c3", rebalance=15000)   # new member: rebalance; m2 keeps heartbeating but never rejoins
    rj = join(c, member_id=m1, rebalance=15000)
    assert not rj.done and not b3.done
    for _ in range(14):
        sched.advance(1000)
        assert c.heartbeat("g", 2, m2) == errors.REBALANCE_IN_PROGRESS
    sched.advance(1000)
    assert rj.done and b3.done and m2 not in g.members
    assert rj.value["generation_id"] == 3 and len(rj.value["members"]) == 2
    assert c.heartbeat("g", 2, m2) == errors.UNKNOWN_MEMBER_ID


def test_leader_that_does_not_rejoin_is_replaced():
    c, sched, _ = make()
    m1 = join(c).value["member_id"]
    b2 = join(c, client="c2")
    join(c, member_id=m1)
    m2 = b2.value["member_id"]
    sync(c, m2, 2)
    sync(c, m1, 2, {})
    rj = join(c, member_id=m2, protocols=[("range", b"changed")])     # changed metadata: rebalance
    sched.advance(20000)
    assert rj.value["leader"] == m2 and rj.value["generation_id"] == 3 and m1 not in c.groups["g"].members


def test_initial_rebalance_delay_waits_and_extends():
    c, sched, _ = make(**{"group.initial.rebalance.delay.ms": 3000})
    b1 = join(c, rebalance=10000)
    sched.advance(2000)
    b2 = join(c, client="c2", rebalance=10000)
    sched.advance(1000)          # delay over, but a member arrived during it: extended by another 3000
    assert not b1.done and not b2.done
    sched.advance(2999)
    assert not b1.done
    sched.advance(1)
    assert b1.done and b2.done and b1.value["generation_id"] == 1 and len(b1.value["members"]) == 2


def test_initial_delay_capped_by_rebalance_timeout():
    c, sched, _ = make(**{"group.initial.rebalance.delay.ms": 3000})
    b1 = join(c, rebalance=4000)
    for i in range(3):
        sched.advance(1000)
        join(c, client="x%d" % i, rebalance=4000)
    sched.advance(1000)
    assert b1.done and len(b1.value["members"]) == 4


@pytest.mark.parametrize("session", [5999, 300001])
def test_invalid_session_timeout(session):
    c, _, _ = make()
    assert join(c, session=session).error == errors.INVALID_SESSION_TIMEOUT
    assert "g" not in c.groups


def test_inconsistent_group_protocol():
    c, _, _ = make()
    assert join(c, ptype="").error == errors.INCONSISTENT_GROUP_PROTOCOL
    assert join(c, protocols=[]).error == errors.INCONSISTENT_GROUP_PROTOCOL
    stable_group(c)
    assert join(c, ptype="connect").error == errors.INCONSISTENT_GROUP_PROTOCOL
    assert join(c, protocols=[("roundrobin", b"")]).error == errors.INCONSISTENT_GROUP_PROTOCOL


def test_protocol_selection_by_votes():
    c, _, _ = make()
    b1 = join(c, protocols=[("roundrobin", b"r"), ("range", b"g")])
    m1 = b1.value["member_id"]
    b2 = join(c, protocols=[("range", b"g"), ("roundrobin", b"r")], client="c2")
    b3 = join(c, protocols=[("range", b"g"), ("sticky", b"s")], client="c3")
    join(c, member_id=m1, protocols=[("roundrobin", b"r"), ("range", b"g")])
    assert b2.value["protocol_name"] == "range" == b3.value["protocol_name"]


def test_unknown_member_and_invalid_group_id():
    c, _, _ = make()
    assert join(c, member_id="ghost").error == errors.UNKNOWN_MEMBER_ID
    stable_group(c)
    assert join(c, member_id="ghost").error == errors.UNKNOWN_MEMBER_ID
    assert join(c, group="").error == errors.INVALID_GROUP_ID
    assert c.heartbeat("g", 1, "ghost") == errors.UNKNOWN_MEMBER_ID
    assert c.heartbeat("nogroup", 1, "ghost") == errors.UNKNOWN_MEMBER_ID
    assert sync(c, "ghost", 1, group="nogroup").error == errors.UNKNOWN_MEMBER_ID
    assert c.leave_group("nogroup", [("x", None)])[0] == errors.UNKNOWN_MEMBER_ID


def test_not_coordinator_loading_and_shutdown():
    c, _, _ = make(**{"offsets.topic.num.partitions": 2})
    c.unload_partition(1)
    gid = next(f"grp{i}" for i in range(100) if partition_for(f"grp{i}", 2) == 1)
    assert join(c, group=gid).error == errors.NOT_COORDINATOR
    c.owned[1] = LOADING
    assert join(c, group=gid).error == errors.COORDINATOR_LOAD_IN_PROGRESS
    assert c.heartbeat(gid, 1, "m") == 0            # Kafka: no error for heartbeats while loading
    assert c.handle_commit(gid, -1, "", None, -1, {("t", 0): (1, -1, "", -1)}) == {
        ("t", 0): errors.COORDINATOR_LOAD_IN_PROGRESS}
    assert c.list_groups()[0] == errors.COORDINATOR_LOAD_IN_PROGRESS
    other = next(f"grp{i}" for i in range(100) if partition_for(f"grp{i}", 2) == 0)
    m1 = join(c, group=other).value["member_id"]
    parked = join(c, group=other, client="c2")
    assert not parked.done
    c.shutdown()
    assert parked.error == errors.NOT_COORDINATOR
    assert c.heartbeat(other, 1, m1) == errors.COORDINATOR_NOT_AVAILABLE


def test_leave_group_rebalance_and_last_member_empties():
    c, sched, store = make()
    m1 = join(c).value["member_id"]
    b2 = join(c, client="c2")
    join(c, member_id=m1)
    m2 = b2.value["member_id"]
    sync(c, m2, 2)
    sync(c, m1, 2, {})
    g = c.groups["g"]
    assert c.leave_group("g", [(m1, None)]) == (0, [0])
    assert g.is_(PREPARING_REBALANCE) and g.leader_id == m2
    r = join(c, member_id=m2)
    assert r.value["generation_id"] == 3 and r.value["leader"] == m2
    sync(c, m2, 3, {})
    assert c.leave_group("g", [(m2, None), ("ghost", None)]) == (0, [0, errors.UNKNOWN_MEMBER_ID])
    assert g.is_(EMPTY) and g.generation == 4
    kind, _, _ = schemas.decode_key(store.parts[0][-1][0])
    _, value = schemas.decode_value(kind, store.parts[0][-1][1])
    assert value["generation"] == 4 and value["members"] == [] and value["protocol"] is None


def test_member_leaving_while_parked_join_gets_unknown_member():
    c, _, _ = make()
    m1 = stable_group(c)[0]
    b2 = join(c, client="c2")
    assert not b2.done
    assert c.leave_group("g", [(m1, None)]) == (0, [0])
    assert b2.done and b2.error == 0 and b2.value["leader"] == b2.value["member_id"]


def test_rebalance_during_completing_answers_parked_sync():
    c, _, _ = make()
    m1 = join(c).value["member_id"]
    b2 = join(c, client="c2")
    join(c, member_id=m1)
    s2 = sync(c, b2.value["member_id"], 2)
    assert not s2.done
    join(c, client="c3")
    assert s2.error == errors.REBALANCE_IN_PROGRESS


def test_sync_append_failure_answers_all_and_rebalances():
    c, _, store = make()
    m1 = join(c).value["member_id"]
    store.fail = errors.NotLeaderOrFollower("moved")
    s = sync(c, m1, 1, {m1: b"x"})
    assert s.error == errors.NOT_COORDINATOR
    assert c.groups["g"].is_(PREPARING_REBALANCE)


# ------------------------------------------------------------------------------------------------ offsets
def test_offset_commit_rules():
    c, _, store = make(topics={("t", 0), ("t", 1)})
    one = {("t", 0): (5, -1, "meta", -1)}
    assert c.handle_commit("g", 3, "m", None, -1, one) == {("t", 0): errors.ILLEGAL_GENERATION}
    assert c.handle_commit("g", -1, "", None, -1, one) == {("t", 0): 0}      # simple consumer
    assert c.fetch_offsets("g", [("t", 0), ("t", 1)])[1][("t", 0)].offset == 5
    assert c.fetch_offsets("g", [("t", 1)])[1] == {("t", 1): None}
    m1 = join(c).value["member_id"]
    assert c.handle_commit("g", 1, m1, None, -1, one) == {("t", 0): errors.REBALANCE_IN_PROGRESS}
    sync(c, m1, 1, {})
    assert c.handle_commit("g", 1, "ghost", None, -1, one) == {("t", 0): errors.UNKNOWN_MEMBER_ID}
    assert c.handle_commit("g", -1, "", None, -1, one) == {("t", 0): errors.UNKNOWN_MEMBER_ID}
    assert c.handle_commit("g", 7, m1, None, -1, one) == {("t", 0): errors.ILLEGAL_GENERATION}
    res = c.handle_commit("g", 1, m1, None, -1, {("t", 0): (9, 3, "", -1), ("t", 1): (1, -1, "x" * 4097, -1),
                                                 ("nope", 0): (1, -1, "", -1)})
    assert res == {("t", 0): 0, ("t", 1): errors.OFFSET_METADATA_TOO_LARGE,
                   ("nope", 0): errors.UNKNOWN_TOPIC_OR_PARTITION}
    err, found = c.fetch_offsets("g", None)
    assert err == 0 and list(found) == [("t", 0)] and found[("t", 0)].offset == 9
    assert found[("t", 0)].leader_epoch == 3
    store.fail = errors.MessageTooLarge("big")
    assert c.handle_commit("g", 1, m1, None, -1, one) == {("t", 0): errors.INVALID_COMMIT_OFFSET_SIZE}
    store.fail = errors.NotLeaderOrFollower("moved")
    assert c.handle_commit("g", 1, m1, None, -1, one) == {("t", 0): errors.NOT_COORDINATOR}
    store.fail = errors.NotEnoughReplicas("isr")
    assert c.handle_commit("g", 1, m1, None, -1, one) == {("t", 0): errors.COORDINATOR_NOT_AVAILABLE}
    assert c.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 9     # failed commits changed nothing


def test_commit_during_preparing_rebalance_is_accepted():
    c, _, _ = make()
    m1 = stable_group(c)[0]
    join(c, client="c2")
    assert c.groups["g"].is_(PREPARING_REBALANCE)
    assert c.handle_commit("g", 1, m1, None, -1, {("t", 0): (3, -1, "", -1)}) == {("t", 0): 0}


def test_commit_v0_skips_membership():
    c, _, _ = make()
    stable_group(c)
    assert c.commit_unchecked("g", {("t", 0): (4, -1, None, -1)}) == {("t", 0): 0}
    assert c.fetch_offsets("g", [("t", 0)])[1][("t", 0)].metadata == ""


def test_reload_restores_offsets_and_groups():
    store = MemStore()
    c, sched, _ = make(store=store)
    ids = stable_group(c)
    m1 = ids[0]
    c.handle_commit("g", 1, m1, None, -1, {("t", 0): (11, -1, "m", -1), ("t", 1): (12, -1, "", -1)})
    c.handle_commit("simple", -1, "", None, -1, {("t", 0): (3, -1, "", -1)})
    assert c.delete_group("simple") == 0
    c2, _, _ = make(store=store)
    g = c2.groups["g"]
    assert g.is_(STABLE) and g.generation == 1 and list(g.members) == [m1] and g.leader_id == m1
    assert g.members[m1].assignment == ("a-" + m1).encode() and g.protocol == "range"
    assert {tp: o.offset for tp, o in g.offsets.items()} == {("t", 0): 11, ("t", 1): 12}
    assert "simple" not in c2.groups
    assert c2.heartbeat("g", 1, m1) == 0


def test_delete_groups():
    c, _, store = make()
    stable_group(c)
    assert c.delete_group("g") == errors.NON_EMPTY_GROUP
    assert c.delete_group("nothing") == errors.GROUP_ID_NOT_FOUND
    c.handle_commit("e", -1, "", None, -1, {("t", 0): (1, -1, "", -1)})
    n = len(store.parts[0])
    assert c.delete_group("e") == 0
    assert store.parts[0][n:] == [offsets_log.offset_tombstone("e", "t", 0), offsets_log.group_tombstone("e")]
    assert c.describe_group("e")[1]["state"] == DEAD
    assert c.delete_group("e") == errors.GROUP_ID_NOT_FOUND


def test_offset_expiry_only_for_empty_groups():
    c, sched, store = make(**{"offsets.retention.minutes": 1})
    m1 = stable_group(c)[0]
    c.handle_commit("g", 1, m1, None, -1, {("t", 0): (1, -1, "", -1)})
    c.handle_commit("s", -1, "", None, -1, {("t", 0): (2, -1, "", -1)})
    for _ in range(6):
        sched.advance(5000)
        c.heartbeat("g", 1, m1)
    c.handle_commit("s", -1, "", None, 1000, {("t", 1): (3, -1, "", -1)})
    for _ in range(20):
        sched.advance(5000)
        c.heartbeat("g", 1, m1)
    assert c.expire_offsets() == 2                # both of "s"; "g" has a live member
    assert "s" not in c.groups and ("t", 0) in c.groups["g"].offsets
    assert store.parts[0][-1] == offsets_log.group_tombstone("s")


def test_describe_and_list():
    c, _, _ = make()
    m1 = stable_group(c)[0]
    err, s = c.describe_group("g")
    assert err == 0 and s["state"] == STABLE and s["protocol"] == "range" and s["protocol_type"] == "consumer"
    assert s["members"][0]["member_id"] == m1 and s["members"][0]["client_host"] == "/127.0.0.1"
    assert s["members"][0]["assignment"] == ("a-" + m1).encode()
    join(c, client="c2")
    err, s = c.describe_group("g")
    assert s["state"] == PREPARING_REBALANCE and s["protocol"] == "" and s["members"][0]["metadata"] == b""
    assert c.list_groups() == (0, [("g", "consumer", PREPARING_REBALANCE)])


def test_static_member_restart_keeps_assignment_without_rebalance():
    c, _, store = make()
    b1 = join(c, instance="i1")
    m1 = b1.value["member_id"]
    b2 = join(c, instance="i2", client="c2")
    join(c, member_id=m1, instance="i1")
    m2 = b2.value["member_id"]
    sync(c, m2, 2)
    sync(c, m1, 2, {m1: b"A", m2: b"B"})
    g = c.groups["g"]
    kind, _, _ = schemas.decode_key(store.parts[0][-1][0])
    v, value = schemas.decode_value(kind, store.parts[0][-1][1])
    assert v == 3 and [m["group_instance_id"] for m in value["members"]] == ["i1", "i2"]
    r = join(c, instance="i2", client="c2")        # i2 restarted: new id, same assignment, still Stable
    new2 = r.value["member_id"]
    assert r.error == 0 and new2 != m2 and g.is_(STABLE) and r.value["generation_id"] == 2
    assert sync(c, new2, 2).value["assignment"] == b"B"
    assert c.heartbeat("g", 2, m2) == errors.UNKNOWN_MEMBER_ID
    assert c.heartbeat("g", 2, new2, "i1") == errors.FENCED_INSTANCE_ID
    assert c.leave_group("g", [("", "i2")]) == (0, [0])
    assert g.is_(PREPARING_REBALANCE)


# ------------------------------------------------------------------------------------------- record bytes
def test_offset_record_bytes():
    k, v = offsets_log.offset_record("g", "t", 3, OffsetAndMetadata(5, "", 1000, 2000))
    assert k == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    assert v == b"\x00\x01" + struct.pack(">q", 5) + b"\x00\x00" + struct.pack(">qq", 1000, 2000)
    kind, ver, key = schemas.decode_key(k)
    assert (kind, ver, key) == (schemas.OFFSET_KEY, 1, {"group": "g", "topic": "t", "partition": 3})
    assert schemas.decode_value(kind, v) == (1, {"offset": 5, "leader_epoch": -1, "metadata": "",
                                                 "commit_timestamp": 1000, "expire_timestamp": 2000})
    assert offsets_log.offset_tombstone("g", "t", 3) == (k, None)


def test_group_record_bytes_v1():
    g = Group("grp")
    m = Member("m-1", None, "cid", "/h", 300, 200, "consumer", [("range", b"SUB")])
    m.assignment = b"ASG"
    g.add_member(m)
    g.generation, g.protocol = 7, "range"
    k, v = offsets_log.group_record(g, 123)
    assert k == b"\x00\x02\x00\x03grp"
    s = lambda x: struct.pack(">h", len(x)) + x.encode()     # noqa: E731
    b = lambda x: struct.pack(">i", len(x)) + x              # noqa: E731
    assert v == (b"\x00\x01" + s("consumer") + struct.pack(">i", 7) + s("range") + s("m-1") +
                 struct.pack(">i", 1) + s("m-1") + s("cid") + s("/h") + struct.pack(">ii", 300, 200) +
                 b(b"SUB") + b(b"ASG"))


def test_batch_round_trip():
    from kbroker.record import iter_records
    recs = [offsets_log.offset_record("g", "t", 0, OffsetAndMetadata(1, "", 5, 6)), offsets_log.group_tombstone("g")]
    data = offsets_log.build(recs, 1234)
    out = [(bytes(k), None if v is None else bytes(v)) for _, _, k, v, _ in iter_records(data)]
    assert out == recs
    st = offsets_log.replay(out)
    assert st.offsets == {} and st.groups == {}


def test_replay_skips_garbage():
    good = offsets_log.offset_record("g", "t", 0, OffsetAndMetadata(1, "", 5, 6))
    st = offsets_log.replay([(b"\x00\x09xx", b"zz"), good])
    assert st.offsets["g"][("t", 0)].offset == 1


def test_an_expiry_past_int64_is_never_not_a_failed_commit():
    """retention_time_ms (OffsetCommit v2-v4) and commit_timestamp (v1) are a client's int64s: their sum may pass
    2^63 - 1. The commit is kept with the expiry held at the int64 maximum (before, encoding its record raised and
    the broker dropped the connection mid-commit); a commit that the offsets expire sweep then keeps."""
    c, _, _ = make(topics={("t", 0), ("t", 1)})
    top = 2 ** 63 - 1
    assert c.handle_commit("g", -1, "", None, top, {("t", 0): (5, -1, "", -1)}) == {("t", 0): 0}
    assert c.handle_commit("g", -1, "", None, 1000, {("t", 1): (7, -1, "", top)}) == {("t", 1): 0}
    got = c.fetch_offsets("g", [("t", 0), ("t", 1)])[1]
    assert (got[("t", 0)].offset, got[("t", 0)].expire_timestamp) == (5, top)
    assert (got[("t", 1)].offset, got[("t", 1)].commit_timestamp, got[("t", 1)].expire_timestamp) == (7, top, top)
    assert c.expire_offsets() == 0
