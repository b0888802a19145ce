"""Transactional offset commits in the group coordinator (TxnOffsetCommit, KIP-98/447): pending per producer until
the marker's ``complete_transaction``, Kafka's newer-record rule against plain commits, replay of transactional
batches and markers, KIP-447 member checks, expiry and deletion, OffsetFetch require_stable and the handler's
authorization -- on a fake clock and a fake ``__consumer_offsets`` log with real offsets."""
import pytest

from kbroker import errors
from kbroker.coordinator import offsets_log
from kbroker.coordinator.coordinator import LOADING, GroupCoordinator
from kbroker.coordinator.group import COMPLETING_REBALANCE, STABLE, OffsetAndMetadata, partition_for
from kbroker.coordinator.timers import FakeScheduler
from kbroker.record import iter_records
from kbroker.record.batch import batch_header
from kbroker.record.control import Marker
from kbroker.security.acl import DESCRIBE, GROUP, READ, TOPIC, TRANSACTIONAL_ID, WRITE
from tests.unit.test_coordinator import CFG, join, stable_group, sync
from tests.unit.ctx import Unused
from tests.unit.test_handler_authorization import Authorizer, _handlers, call  # noqa: F401 (_handlers: fixture)

PID, EPOCH = 4000, 3
T0, T1 = ("t", 0), ("t", 1)


class LogStore:
    """``__consumer_offsets`` partitions as logs of real offsets: one entry per record (``(key, value, batch base
    offset, producer id)``, producer id -1 for plain batches) and one per marker (a ``Marker``, one offset)."""

    def __init__(self):
        self.logs = {}
        self.batches = []           # (partition, base offset, producer id, producer epoch, records)
        self.fail = None

    def append(self, index, records, now, producer_id=-1, producer_epoch=-1):
        if self.fail is not None:
            raise self.fail
        base = len(self.logs.setdefault(index, []))
        for k, v in records:
            self.logs[index].append((k, v, base, producer_id))
        self.batches.append((index, base, producer_id, producer_epoch, len(records)))
        return base

    def marker(self, index, pid, commit):
        self.logs.setdefault(index, []).append(Marker(pid, EPOCH, commit, 0))

    def read(self, index):
        return list(self.logs.get(index, []))


def make(store=None, topics=None, **over):
    cfg = dict(CFG, **over)
    sched = FakeScheduler()
    store = store or LogStore()
    exists = None if topics is None else (lambda tp: tp in topics)
    c = GroupCoordinator(cfg, sched, store, topic_exists=exists)
    for p in range(cfg["offsets.topic.num.partitions"]):
        c.load_partition(p)
    return c, sched, store


def offs(**by_partition):
    """{("t", n): (offset, leader epoch, metadata, commit ts)} from p0=5, p1=7, ..."""
    return {("t", int(k[1:])): (v, -1, "", -1) for k, v in by_partition.items()}


def txn(c, group="g", pid=PID, epoch=EPOCH, generation=-1, member="", instance=None, **by_partition):
    return c.handle_txn_commit(group, pid, epoch, generation, member, instance, offs(**by_partition))


def committed(c, group="g"):
    err, found = c.fetch_offsets(group, None)
    assert err == 0
    return {tp: o.offset for tp, o in found.items()}


# --------------------------------------------------------------------------------------- pending -> complete
def test_txn_commit_is_pending_until_the_commit_marker():
    c, _, store = make()
    assert txn(c, p0=5, p1=7) == {T0: 0, T1: 0}
    # One transactional batch of the producer, both records in it.
    assert store.batches == [(0, 0, PID, EPOCH, 2)]
    assert committed(c) == {}
    assert c.fetch_offsets("g", [T0])[1] == {T0: None}
    assert c.pending_partitions("g") == {T0, T1}
    assert c.metadata.producer_groups == {PID: {"g"}}
    store.marker(0, PID, True)
    assert c.complete_transaction(PID, [0], True) == 1
    assert committed(c) == {T0: 5, T1: 7}
    assert c.pending_partitions("g") == set() and c.metadata.producer_groups == {}
    assert c.groups["g"].offsets[T0].record_offset == 0
    assert c.complete_transaction(PID, [0], True) == 0          # a repeated marker changes nothing


def test_abort_drops_the_pending_offsets_and_keeps_the_committed_ones():
    c, _, store = make()
    assert c.handle_commit("g", -1, "", None, -1, offs(p0=3)) == {T0: 0}
    assert txn(c, p0=5, p1=7) == {T0: 0, T1: 0}
    assert committed(c) == {T0: 3}
    assert c.complete_transaction(PID, [0], False) == 1
    assert committed(c) == {T0: 3} and c.pending_partitions("g") == set()


def test_a_plain_commit_after_the_transactional_one_wins():
    c, _, store = make()
    txn(c, p0=5)                                                 # record offset 0
    assert c.handle_commit("g", -1, "", None, -1, offs(p0=9)) == {T0: 0}   # record offset 1
    assert committed(c) == {T0: 9}
    c.complete_transaction(PID, [0], True)
    assert committed(c) == {T0: 9}                               # Kafka: the newer record stays
    # The other way round: the transactional record is the newer one.
    c.handle_commit("g", -1, "", None, -1, offs(p1=2))           # record offset 2
    txn(c, p1=4)                                                 # record offset 3
    c.complete_transaction(PID, [0], True)
    assert committed(c) == {T0: 9, T1: 4}


def test_two_producers_are_completed_separately():
    c, _, _ = make()
    txn(c, pid=1, p0=5)
    txn(c, pid=2, p0=6, p1=8)
    assert c.pending_partitions("g") == {T0, T1}
    c.complete_transaction(1, [0], True)
    assert committed(c) == {T0: 5} and c.pending_partitions("g") == {T0, T1}
    c.complete_transaction(2, [0], False)
    assert committed(c) == {T0: 5} and c.pending_partitions("g") == set()


def test_completion_only_touches_the_groups_of_the_marked_partitions():
    c, _, _ = make(**{"offsets.topic.num.partitions": 50})
    # "my-group" lives in partition 12, "hello" in 22 (test_coordinator's hash vectors).
    assert (partition_for("my-group", 50), partition_for("hello", 50)) == (12, 22)
    txn(c, group="my-group", p0=1)
    txn(c, group="hello", p0=2)
    assert c.complete_transaction(PID, [12], True) == 1
    assert committed(c, "my-group") == {T0: 1} and committed(c, "hello") == {}
    assert c.metadata.producer_groups == {PID: {"hello"}}
    assert c.complete_transaction(PID, [22, 30], True) == 1
    assert committed(c, "hello") == {T0: 2}


def test_a_retry_replaces_the_pending_offset_and_the_later_record_is_committed():
    c, _, _ = make()
    txn(c, p0=5)
    txn(c, p0=6)
    c.complete_transaction(PID, [0], True)
    assert committed(c) == {T0: 6} and c.groups["g"].offsets[T0].record_offset == 1


# ------------------------------------------------------------------------------------------------ failures
def test_failed_append_leaves_nothing_pending_and_maps_the_error():
    c, _, store = make()
    store.fail = errors.NotEnoughReplicas("isr")
    assert txn(c, p0=5) == {T0: errors.COORDINATOR_NOT_AVAILABLE}
    store.fail = errors.InvalidProducerEpoch("fenced")
    assert txn(c, p0=5) == {T0: errors.INVALID_PRODUCER_EPOCH}   # passed through, as Kafka
    store.fail = errors.NotLeaderOrFollower("moved")
    assert txn(c, p0=5) == {T0: errors.NOT_COORDINATOR}
    assert c.pending_partitions("g") == set() and c.metadata.producer_groups == {}
    store.fail = None
    assert txn(c, p0=5) == {T0: 0}
    assert c.pending_partitions("g") == {T0}


def test_metadata_and_unknown_topics_are_refused_per_partition():
    c, _, store = make(topics={T0, T1})
    res = c.handle_txn_commit("g", PID, EPOCH, -1, "", None,
                              {T0: (1, -1, "x" * 4097, -1), T1: (2, -1, "", -1), ("nope", 0): (3, -1, "", -1)})
    assert res == {T0: errors.OFFSET_METADATA_TOO_LARGE, T1: 0, ("nope", 0): errors.UNKNOWN_TOPIC_OR_PARTITION}
    assert store.batches == [(0, 0, PID, EPOCH, 1)] and c.pending_partitions("g") == {T1}


def test_coordinator_state_errors():
    c, _, _ = make(**{"offsets.topic.num.partitions": 50})
    assert c.handle_txn_commit("", PID, EPOCH, -1, "", None, offs(p0=1)) == {T0: errors.INVALID_GROUP_ID}
    c.owned[12] = LOADING
    assert txn(c, group="my-group", p0=1) == {T0: errors.COORDINATOR_LOAD_IN_PROGRESS}
    c.unload_partition(12)
    assert txn(c, group="my-group", p0=1) == {T0: errors.NOT_COORDINATOR}
    c.shutdown()
    assert txn(c, group="hello", p0=1) == {T0: errors.COORDINATOR_NOT_AVAILABLE}


# ------------------------------------------------------------------------------------- KIP-447 member checks
def test_generation_and_member_checks_when_the_request_names_them():
    c, _, _ = make()
    m1 = stable_group(c)[0]
    assert txn(c, generation=1, member=m1, p0=1) == {T0: 0}
    assert txn(c, generation=2, member=m1, p0=1) == {T0: errors.ILLEGAL_GENERATION}
    assert txn(c, generation=1, member="ghost", p0=1) == {T0: errors.UNKNOWN_MEMBER_ID}
    assert txn(c, generation=-1, member="ghost", p0=1) == {T0: errors.UNKNOWN_MEMBER_ID}
    assert txn(c, generation=1, member="", p0=1) == {T0: errors.UNKNOWN_MEMBER_ID}
    # v0-v2 (or a producer outside the group): generation -1 and no member are accepted in a Stable group.
    assert txn(c, p0=2) == {T0: 0}
    # Unknown group naming a member: refused, and no group is created for it.
    assert txn(c, group="nogroup", generation=1, member="m", p0=1) == {T0: errors.UNKNOWN_MEMBER_ID}
    assert "nogroup" not in c.groups
    assert txn(c, group="fresh", p0=1) == {T0: 0}
    assert c.groups["fresh"].state == "Empty"


def test_transactional_commit_is_not_refused_during_a_rebalance():
    c, _, _ = make()
    m1 = join(c).value["member_id"]
    assert c.groups["g"].is_(COMPLETING_REBALANCE)
    assert c.handle_commit("g", 1, m1, None, -1, offs(p0=1)) == {T0: errors.REBALANCE_IN_PROGRESS}
    assert txn(c, generation=1, member=m1, p0=1) == {T0: 0}     # Kafka checks no state for TxnOffsetCommit


def test_static_member_fencing():
    c, _, _ = make()
    b1 = join(c, instance="i1")
    m1 = b1.value["member_id"]
    sync(c, m1, 1, {m1: b"A"})
    assert c.groups["g"].is_(STABLE)
    assert txn(c, generation=1, member=m1, instance="i1", p0=1) == {T0: 0}
    assert txn(c, generation=1, member="old", instance="i1", p0=1) == {T0: errors.FENCED_INSTANCE_ID}
    assert txn(c, generation=1, member=m1, instance="i9", p0=1) == {T0: errors.UNKNOWN_MEMBER_ID}


# ----------------------------------------------------------------------------------------------- replay
def test_replay_applies_markers_and_keeps_open_transactions_pending():
    store = LogStore()
    c, _, _ = make(store=store)
    c.handle_commit("g", -1, "", None, -1, offs(p0=1))          # offset 0
    txn(c, pid=1, p0=10)                                        # offset 1
    txn(c, pid=2, p1=20)                                        # offset 2
    txn(c, pid=3, p0=30, p1=31)                                 # offsets 3-4
    store.marker(0, 1, True)                                    # offset 5
    store.marker(0, 2, False)
    c.complete_transaction(1, [0], True)
    c.complete_transaction(2, [0], False)
    txn(c, group="h", pid=1, p0=40)                             # the producer's next transaction, still open
    c2, _, _ = make(store=store)
    assert committed(c2) == {T0: 10}
    assert c2.groups["g"].offsets[T0].record_offset == 1
    assert c2.pending_partitions("g") == {T0, T1} and c2.pending_partitions("h") == {T0}
    assert c2.groups["g"].pending_txn == {3: c2.groups["g"].pending_txn[3]}
    assert {tp: o.offset for tp, o in c2.groups["g"].pending_txn[3].items()} == {T0: 30, T1: 31}
    assert c2.metadata.producer_groups == {3: {"g"}, 1: {"h"}}
    assert "h" in c2.groups and committed(c2, "h") == {}
    # The open transactions' markers arrive after the load.
    store.marker(0, 3, True)
    assert c2.complete_transaction(3, [0], True) == 1
    assert committed(c2) == {T0: 30, T1: 31}
    store.marker(0, 1, False)
    c2.complete_transaction(1, [0], False)
    assert committed(c2, "h") == {}
    # And a third load sees the same.
    c3, _, _ = make(store=store)
    assert committed(c3) == {T0: 30, T1: 31} and committed(c3, "h") == {}
    assert c3.pending_partitions("g") == set() and c3.metadata.producer_groups == {}


def test_replay_newer_record_rule_matches_memory():
    store = LogStore()
    c, _, _ = make(store=store)
    txn(c, p0=5)
    c.handle_commit("g", -1, "", None, -1, offs(p0=9))
    store.marker(0, PID, True)
    c.complete_transaction(PID, [0], True)
    assert committed(c) == {T0: 9}
    assert committed(make(store=store)[0]) == {T0: 9}


def test_replay_of_the_offsets_log_format():
    """The store's entry forms: plain pairs (position = record offset), 4-tuples, markers."""
    rec = offsets_log.offset_record
    O = OffsetAndMetadata                                           # noqa: N806
    st = offsets_log.replay([
        rec("g", "t", 0, O(1, "", 5, 6)),
        rec("g", "t", 0, O(2, "", 5, 6)) + (1, 7),
        rec("g", "t", 1, O(3, "", 5, 6)) + (2, 8),
        Marker(7, 0, True, 0),
        offsets_log.offset_tombstone("g", "t", 1) + (4, -1),       # a plain tombstone drops 8's pending too
        Marker(8, 0, True, 0),
    ])
    assert {tp: o.offset for tp, o in st.offsets["g"].items()} == {T0: 2}
    assert st.offsets["g"][T0].record_offset == 1 and st.pending == {} and st.last_offset == 4


def test_the_transactional_batch_bytes():
    recs = [offsets_log.offset_record("g", "t", 0, OffsetAndMetadata(5, "", 1, 2)),
            offsets_log.offset_record("g", "t", 1, OffsetAndMetadata(6, "", 1, 2))]
    data = offsets_log.build(recs, 1000, PID, EPOCH)
    h = batch_header(data, 0)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional, h.is_control,
            h.records_count) == (PID, EPOCH, -1, True, False, 2)
    assert [(bytes(k), bytes(v)) for _, _, k, v, _ in iter_records(data)] == recs
    plain = batch_header(offsets_log.build(recs, 1000), 0)
    assert (plain.producer_id, plain.producer_epoch, plain.base_sequence, plain.is_transactional) == \
        (-1, -1, -1, False)


# ------------------------------------------------------------------------------------- expiry and deletion
def test_expiry_keeps_pending_partitions_and_their_group():
    c, sched, store = make(**{"offsets.retention.minutes": 1})
    c.handle_commit("s", -1, "", None, -1, offs(p0=1, p1=2))
    txn(c, group="s", p1=3)
    sched.advance(61000)
    assert c.expire_offsets() == 1                      # t-0 only: t-1 has a transactional commit pending
    assert committed(c, "s") == {T1: 2} and "s" in c.groups
    txn(c, group="s", p1=4, pid=9)
    c.complete_transaction(PID, [0], False)
    sched.advance(61000)
    assert c.expire_offsets() == 0 and "s" in c.groups  # producer 9 still pending: group kept, t-1 kept
    c.complete_transaction(9, [0], False)
    assert c.expire_offsets() == 1 and "s" not in c.groups
    assert store.logs[0][-1][:2] == offsets_log.group_tombstone("s")
    # A group holding only pending offsets is not removed either.
    txn(c, group="only", p0=7)
    sched.advance(61000)
    assert c.expire_offsets() == 0 and c.pending_partitions("only") == {T0}


def test_delete_group_tombstones_pending_partitions_too_in_memory_and_on_replay():
    store = LogStore()
    c, _, _ = make(store=store)
    c.handle_commit("e", -1, "", None, -1, offs(p0=1))
    txn(c, group="e", p0=2, p1=3)
    assert c.delete_group("e") == 0
    tail = [e[:2] for e in store.logs[0][-3:]]
    assert tail == [offsets_log.offset_tombstone("e", "t", 0), offsets_log.offset_tombstone("e", "t", 1),
                    offsets_log.group_tombstone("e")]
    assert "e" not in c.groups and c.metadata.producer_groups == {}
    store.marker(0, PID, True)
    assert c.complete_transaction(PID, [0], True) == 0
    assert committed(c, "e") == {}
    c2, _, _ = make(store=store)
    assert "e" not in c2.groups and c2.metadata.producer_groups == {}


def test_unload_forgets_the_producers_of_the_dropped_groups():
    c, _, _ = make()
    txn(c, p0=1)
    c.unload_partition(0)
    assert c.metadata.producer_groups == {} and c.complete_transaction(PID, [0], True) == 0


def test_completion_racing_the_append_treats_the_in_flight_record_as_newest():
    """The marker lands while the transactional batch waits for the in-sync replicas (record offset unknown)."""
    class RacingStore(LogStore):
        def append(self, index, records, now, producer_id=-1, producer_epoch=-1):
            base = super().append(index, records, now, producer_id, producer_epoch)
            if producer_id >= 0:
                self.marker(index, producer_id, True)
                assert coord.complete_transaction(producer_id, [index], True) == 1
            return base
    coord, _, store = make(store=RacingStore())
    coord.handle_commit("g", -1, "", None, -1, offs(p0=1))
    assert txn(coord, p0=5) == {T0: 0}
    assert committed(coord) == {T0: 5} and coord.groups["g"].offsets[T0].record_offset == 1
    assert coord.pending_partitions("g") == set() and coord.metadata.producer_groups == {}


# --------------------------------------------------------------------------------------------- handlers
class Coord:
    """The GroupCoordination calls the two handlers make; records them."""
    active = True

    def __init__(self, commit_result=0, pending=()):
        self.calls = []
        self.commit_result = commit_result
        self.pending = set(pending)

    def handle_txn_commit(self, group_id, pid, epoch, generation, member, instance, offsets):
        self.calls.append(("txn", group_id, pid, epoch, generation, member, instance, sorted(offsets)))
        return {tp: self.commit_result for tp in offsets}

    def fetch_offsets(self, group_id, partitions):
        found = {T0: OffsetAndMetadata(5, "m", 1), T1: OffsetAndMetadata(7, "", 1)}
        if partitions is None:
            return 0, found
        return 0, {tp: found.get(tp) for tp in partitions}

    def pending_partitions(self, group_id):
        self.calls.append(("pending", group_id))
        return self.pending


class OffsetsTopic:
    def ensure_offsets_topic(self):
        pass


def txn_body(parts, pid=PID, generation=-1, member="", instance=None):
    topics = {}
    for t, p in parts:
        topics.setdefault(t, []).append({"partition_index": p, "committed_offset": 10 + p,
                                         "committed_leader_epoch": 2, "committed_metadata": "md"})
    return {"transactional_id": "tx", "group_id": "g", "producer_id": pid, "producer_epoch": EPOCH,
            "generation_id": generation, "member_id": member, "group_instance_id": instance,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}


def codes(resp):
    return {(t["name"], p["partition_index"]): p["error_code"] for t in resp["topics"] for p in t["partitions"]}


ALL = ((WRITE, TRANSACTIONAL_ID, "tx"), (READ, GROUP, "g"), (READ, TOPIC, "t"), (READ, TOPIC, "u"))
PARTS = [T0, T1, ("u", 0)]


def test_txn_offset_commit_authorization_order():
    def allow(*skip):
        return Authorizer(*[a for a in ALL if a not in skip])
    resp = call(28, 3, txn_body(PARTS), allow(ALL[0]), groups=Unused("groups"), topics=Unused("topics"))
    assert codes(resp) == {tp: errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for tp in PARTS}
    resp = call(28, 3, txn_body(PARTS), allow(ALL[1]), groups=Unused("groups"), topics=Unused("topics"))
    assert codes(resp) == {tp: errors.GROUP_AUTHORIZATION_FAILED for tp in PARTS}
    resp = call(28, 3, txn_body(PARTS), allow(ALL[2], ALL[3]), groups=Unused("groups"), topics=Unused("topics"))
    assert codes(resp) == {tp: errors.TOPIC_AUTHORIZATION_FAILED for tp in PARTS}
    coord = Coord()
    resp = call(28, 3, txn_body(PARTS, generation=4, member="m", instance="i"), allow(ALL[2]), groups=coord,
                topics=OffsetsTopic())
    assert codes(resp) == {T0: errors.TOPIC_AUTHORIZATION_FAILED, T1: errors.TOPIC_AUTHORIZATION_FAILED,
                           ("u", 0): 0}
    assert coord.calls == [("txn", "g", PID, EPOCH, 4, "m", "i", [("u", 0)])]


def test_txn_offset_commit_versions_and_bad_producer():
    coord = Coord()
    resp = call(28, 0, txn_body([T0]), Authorizer(*ALL), groups=coord, topics=OffsetsTopic())
    assert codes(resp) == {T0: 0}
    # v0-v2 carry no generation/member: the defaults reach the coordinator.
    assert coord.calls == [("txn", "g", PID, EPOCH, -1, "", None, [T0])]
    for version, expected in ((1, errors.COORDINATOR_NOT_AVAILABLE), (2, errors.COORDINATOR_LOAD_IN_PROGRESS),
                              (4, errors.COORDINATOR_LOAD_IN_PROGRESS)):
        resp = call(28, version, txn_body([T0]), Authorizer(*ALL),
                    groups=Coord(errors.COORDINATOR_LOAD_IN_PROGRESS), topics=OffsetsTopic())
        assert codes(resp) == {T0: expected}, version
    resp = call(28, 3, txn_body([T0], pid=-1), Authorizer(*ALL), groups=Unused("groups"), topics=Unused("t"))
    assert codes(resp) == {T0: errors.INVALID_REQUEST}
    resp = call(28, 3, txn_body([T0]), Authorizer(*ALL), groups=None, topics=Unused("topics"))
    assert codes(resp) == {T0: errors.COORDINATOR_NOT_AVAILABLE}


def fetch(version, require_stable, topics, pending):
    body = {"group_id": "g", "require_stable": require_stable,
            "topics": None if topics is None else [{"name": "t", "partition_indexes": topics}]}
    coord = Coord(pending=pending)
    resp = call(9, version, body, Authorizer((DESCRIBE, GROUP, "g"), (DESCRIBE, TOPIC, "t")), groups=coord)
    return coord, {(t["name"], p["partition_index"]): (p["error_code"], p["committed_offset"])
                   for t in resp["topics"] for p in t["partitions"]}


def test_offset_fetch_require_stable():
    coord, got = fetch(7, True, [0, 1, 2], {T1, ("t", 2)})
    assert got == {T0: (0, 5), T1: (errors.UNSTABLE_OFFSET_COMMIT, -1), ("t", 2): (errors.UNSTABLE_OFFSET_COMMIT, -1)}
    _, got = fetch(7, True, None, {T1})                          # all committed partitions, each checked
    assert got == {T0: (0, 5), T1: (errors.UNSTABLE_OFFSET_COMMIT, -1)}
    coord, got = fetch(7, False, [0, 1], {T1})                   # without it: the committed offset
    assert got == {T0: (0, 5), T1: (0, 7)} and ("pending", "g") not in coord.calls
    coord, got = fetch(6, False, [0, 1], {T1})
    assert got == {T0: (0, 5), T1: (0, 7)} and ("pending", "g") not in coord.calls


def test_offset_fetch_require_stable_through_the_real_coordinator():
    c, _, _ = make()
    c.handle_commit("g", -1, "", None, -1, offs(p0=3))
    txn(c, p0=5)
    body = {"group_id": "g", "require_stable": True, "topics": [{"name": "t", "partition_indexes": [0, 1]}]}
    resp = call(9, 7, body, Authorizer((DESCRIBE, GROUP, "g"), (DESCRIBE, TOPIC, "t")), groups=c)
    got = {p["partition_index"]: (p["error_code"], p["committed_offset"]) for p in resp["topics"][0]["partitions"]}
    assert got == {0: (errors.UNSTABLE_OFFSET_COMMIT, -1), 1: (0, -1)}
    body["require_stable"] = False
    resp = call(9, 7, body, Authorizer((DESCRIBE, GROUP, "g"), (DESCRIBE, TOPIC, "t")), groups=c)
    assert [(p["error_code"], p["committed_offset"]) for p in resp["topics"][0]["partitions"]] == [(0, 3), (0, -1)]
    c.complete_transaction(PID, [0], True)
    body["require_stable"] = True
    resp = call(9, 7, body, Authorizer((DESCRIBE, GROUP, "g"), (DESCRIBE, TOPIC, "t")), groups=c)
    assert [(p["error_code"], p["committed_offset"]) for p in resp["topics"][0]["partitions"]] == [(0, 5), (0, -1)]


# ------------------------------------------------------------------------- over a real __consumer_offsets log
def test_offsets_store_over_a_real_partition_with_markers(tmp_path):
    """``OffsetsStore`` appends the transactional batch through the partition (coordinator origin: producer id and
    epoch, sequence -1) and reads it back with the leader's markers; a fresh coordinator replays the same state."""
    from kbroker.internal_topics import GROUP_METADATA_TOPIC
    from kbroker.log.config import LogConfig
    from kbroker.log.log import Log
    from kbroker.record.batch import iter_batches
    from kbroker.replica.partition import Partition

    config = LogConfig(min_insync_replicas=1, file_delete_delay_ms=0)
    part = Partition(GROUP_METADATA_TOPIC, 0, Log(str(tmp_path / "co-0"), config), config, 1)

    class Replicas:
        def get_partition(self, topic, p):
            return part if (topic, p) == (GROUP_METADATA_TOPIC, 0) else None

    def coordinator():
        return make(store=offsets_log.OffsetsStore(Replicas(), commit_timeout_ms=1000))[0]
    c = coordinator()
    assert c.handle_commit("g", -1, "", None, -1, offs(p0=1)) == {T0: 0}          # offset 0
    assert txn(c, pid=7, epoch=2, p0=5, p1=6) == {T0: 0, T1: 0}                  # offsets 1-2
    assert txn(c, pid=8, epoch=0, p1=9) == {T1: 0}                               # offset 3
    buf = part.log.read(0, 1 << 20, None, True).region.read_bytes()
    heads = [(h.base_offset, h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional)
             for _, h in iter_batches(buf)]
    assert heads == [(0, -1, -1, -1, False), (1, 7, 2, -1, True), (3, 8, 0, -1, True)]
    part.write_marker(7, 2, 0, True)                                              # offset 4
    assert c.complete_transaction(7, [0], True) == 1
    assert committed(c) == {T0: 5, T1: 6} and c.groups["g"].offsets[T0].record_offset == 1
    c2 = coordinator()
    assert committed(c2) == {T0: 5, T1: 6} and c2.pending_partitions("g") == {T1}
    assert c2.metadata.producer_groups == {8: {"g"}}
    part.write_marker(8, 0, 0, False)                                             # offset 5
    assert c2.complete_transaction(8, [0], False) == 1
    assert committed(coordinator()) == {T0: 5, T1: 6}
    assert coordinator().pending_partitions("g") == set()


def test_a_failed_append_of_an_unloaded_group_keeps_the_reloaded_index():
    """The partition moves away and back during the append's wait: the reloaded group's pending offsets (from the
    log) must still be completed by the marker."""
    class MovingStore(LogStore):
        move = False

        def append(self, index, records, now, producer_id=-1, producer_epoch=-1):
            if self.move:
                coord.unload_partition(index)
                coord.load_partition(index)
                raise errors.NotLeaderOrFollower("moved during the wait")
            return super().append(index, records, now, producer_id, producer_epoch)
    coord, _, store = make(store=MovingStore())
    assert txn(coord, p0=5) == {T0: 0}
    store.move = True
    assert txn(coord, p0=6) == {T0: errors.NOT_COORDINATOR}
    store.move = False
    assert coord.metadata.producer_groups == {PID: {"g"}} and coord.pending_partitions("g") == {T0}
    assert coord.complete_transaction(PID, [0], True) == 1
    assert committed(coord) == {T0: 5}
