"""Incremental fetch sessions (KIP-227; kbroker/server/fetch_sessions.py and the Fetch handler): full -> incremental
with only changed partitions, adds, updates, forgotten partitions, epochs, the error codes 70/71, closing, eviction
and the O(changed) read -- in process, the handler's decoded requests over real Logs and Partitions."""
import time

import gevent
import pytest

from kbroker import errors
from kbroker.handlers.fetch import fetch as fetch_handler
from kbroker.server import fetch_sessions as fs
from kbroker.server.fetch_sessions import EVICTION_MS, FetchSessionCache
from tests.unit.ctx import make_ctx
from tests.unit.test_handler_fetch import Replicas, recs


class Clock:
    def __init__(self):
        self.now = int(time.time() * 1000) + 1000     # ahead of the wall clock the Partitions started with

    def __call__(self):
        return self.now


def part_req(p, offset, pmb=1 << 20):
    return {"partition": p, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": -1,
            "partition_max_bytes": pmb}


def request(session_id, epoch, parts=(), forgotten=(), max_wait=0, min_bytes=0, replica_id=-1):
    """``parts`` [(topic, p, fetch_offset)], ``forgotten`` [(topic, p)]."""
    topics = {}
    for topic, p, offset in parts:
        topics.setdefault(topic, []).append(part_req(p, offset))
    gone = {}
    for topic, p in forgotten:
        gone.setdefault(topic, []).append(p)
    return {"replica_id": replica_id, "max_wait_ms": max_wait, "min_bytes": min_bytes, "max_bytes": 1 << 30,
            "isolation_level": 0, "session_id": session_id, "session_epoch": epoch, "rack_id": "",
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [{"topic": t, "partitions": ps} for t, ps in gone.items()]}


def answered(resp):
    """{(topic, p): (error, hw, record bytes)} of the response, in order."""
    out = {}
    for t in resp["responses"]:
        for p in t["partitions"]:
            r = p["records"]
            n = len(r) if r else 0
            out[(t["topic"], p["partition_index"])] = (p["error_code"], p["high_watermark"], n)
    return out


class LeaderReplicas(Replicas):
    """Replicas whose leader_partition refuses a partition not led here, as the ReplicaManager does."""

    def leader_partition(self, topic, p):
        part = super().leader_partition(topic, p)
        if not part.is_leader:
            raise errors.NotLeaderOrFollower("%s-%d" % (topic, p))
        return part


class Broker:
    """The handler over ``LeaderReplicas`` with one FetchSessionCache."""

    def __init__(self, tmp_path, names, slots=1000, isr=(1,), clock=None, max_partitions=fs.MAX_CACHED_PARTITIONS):
        self.replicas = LeaderReplicas(tmp_path, names, isr=isr)
        self.clock = clock or Clock()
        self.cache = FetchSessionCache(slots, follower_refresh_ms=1000, clock=self.clock,
                                       max_partitions=max_partitions)

    def fetch(self, body, version=12):
        ctx = make_ctx(version, replicas=self.replicas, config=self.replicas.config, fetch_sessions=self.cache)
        return fetch_handler(ctx, body)

    def append(self, topic, p, n=1):
        self.replicas.append(topic, p, recs(n, 10))


NAMES = [("a", 0), ("a", 1), ("b", 0)]
ALL = [("a", 0, 0), ("a", 1, 0), ("b", 0, 0)]


@pytest.fixture
def b(tmp_path):
    return Broker(tmp_path, NAMES)


def test_full_fetch_creates_a_session_and_idle_incremental_fetches_answer_nothing(b):
    b.append("a", 1, 3)
    r = b.fetch(request(0, 0, ALL))
    sid = r["session_id"]
    assert sid > 0 and r["error_code"] == 0
    assert set(answered(r)) == {("a", 0), ("a", 1), ("b", 0)}          # a full answer names every partition
    assert b.cache.get(sid).epoch == 1 and len(b.cache.get(sid)) == 3 and b.cache.partitions_cached == 3
    # a-1 had data at offset 0: the client moves to 3; nothing else changed -> an empty answer
    r = b.fetch(request(sid, 1, [("a", 1, 3)]))
    assert (r["error_code"], r["session_id"], r["responses"]) == (0, sid, [])
    r = b.fetch(request(sid, 2))
    assert (r["error_code"], r["session_id"], r["responses"]) == (0, sid, [])
    assert b.cache.incremental_fetches == 2 and b.cache.get(sid).epoch == 3


def test_incremental_answers_only_partitions_with_new_data(b):
    sid = b.fetch(request(0, 0, ALL))["session_id"]
    b.append("b", 0, 2)
    r = b.fetch(request(sid, 1))
    assert answered(r) == {("b", 0): (0, 2, answered(r)[("b", 0)][2])} and answered(r)[("b", 0)][2] > 0
    # not moved by the client: Kafka reads it again at the same offset, so it is answered again
    assert set(answered(b.fetch(request(sid, 2)))) == {("b", 0)}
    assert answered(b.fetch(request(sid, 3, [("b", 0, 2)]))) == {}


def test_added_partition_is_answered_and_forgotten_one_never_again(b):
    sid = b.fetch(request(0, 0, [("a", 0, 0)]))["session_id"]
    r = b.fetch(request(sid, 1, [("a", 1, 0)], forgotten=[("a", 0)]))
    assert answered(r) == {("a", 1): (0, 0, 0)}                    # new to the session: answered once, in full
    session = b.cache.get(sid)
    assert list(session.partitions) == [("a", 1)]
    b.append("a", 0, 1)
    assert answered(b.fetch(request(sid, 2))) == {}                  # forgotten: its data is not sent
    assert b.replicas.parts[("a", 0)].waiters == set()               # nor is it watched any longer
    b.append("a", 1, 1)
    assert answered(b.fetch(request(sid, 3)))[("a", 1)][:2] == (0, 1)


def test_wrong_epoch_is_71_and_changes_nothing(b):
    sid = b.fetch(request(0, 0, ALL))["session_id"]
    for bad in (2, 5, 0x7FFFFFFF, -2):
        r = b.fetch(request(sid, bad, [("a", 0, 0)]))
        assert (r["error_code"], r["session_id"], r["responses"]) == (errors.INVALID_FETCH_SESSION_EPOCH, 0, [])
    assert b.cache.errors == 4 and b.cache.get(sid).epoch == 1
    assert b.fetch(request(sid, 1))["error_code"] == 0


def test_unknown_session_id_is_70(b):
    for sid, epoch in ((12345, 1), (0, 1)):
        r = b.fetch(request(sid, epoch, ALL))
        assert (r["error_code"], r["session_id"], r["responses"]) == (errors.FETCH_SESSION_ID_NOT_FOUND, 0, [])
    assert len(b.cache) == 0


def test_final_epoch_closes_and_full_fetch_replaces(b):
    sid = b.fetch(request(0, 0, ALL))["session_id"]
    r = b.fetch(request(sid, 0, ALL))                    # a full fetch naming a session closes it, opens another
    sid2 = r["session_id"]
    assert sid2 > 0 and sid2 != sid and b.cache.get(sid) is None and len(b.cache) == 1
    r = b.fetch(request(sid2, -1, ALL))                  # FINAL: closed, answered sessionless
    assert r["session_id"] == 0 and set(answered(r)) == set(NAMES) and len(b.cache) == 0
    assert all(not p.waiters for p in b.replicas.parts.values())
    assert b.fetch(request(sid2, 1))["error_code"] == errors.FETCH_SESSION_ID_NOT_FOUND
    assert b.fetch(request(0, -1, ALL))["session_id"] == 0 and len(b.cache) == 0


def test_forgetting_every_partition_closes_the_session(b):
    sid = b.fetch(request(0, 0, [("a", 0, 0)]))["session_id"]
    r = b.fetch(request(sid, 1, forgotten=[("a", 0)]))
    assert r["session_id"] == 0 and b.cache.get(sid) is None


def test_no_slots_means_sessionless(tmp_path):
    b = Broker(tmp_path, NAMES, slots=0)
    assert b.fetch(request(0, 0, ALL))["session_id"] == 0 and len(b.cache) == 0


def test_cached_partitions_are_bounded_across_sessions(tmp_path):
    b = Broker(tmp_path, NAMES + [("c", p) for p in range(4)], max_partitions=5)
    one = b.fetch(request(0, 0, ALL))["session_id"]
    assert one and b.cache.partitions_cached == 3
    assert b.fetch(request(0, 0, [("c", 0, 0), ("c", 1, 0), ("c", 2, 0)]))["session_id"] == 0   # 6 > 5
    two = b.fetch(request(0, 0, [("c", 0, 0), ("c", 1, 0)]))["session_id"]
    assert two and b.cache.partitions_cached == 5
    # growing a session past the bound closes it: answered sessionless, the request's partitions only
    r = b.fetch(request(one, 1, [("c", 3, 0)]))
    assert r["session_id"] == 0 and set(answered(r)) == {("c", 3)} and b.cache.get(one) is None
    assert b.cache.partitions_cached == 2 and not b.replicas.parts[("a", 0)].waiters


def test_v6_and_older_never_get_a_session(b):
    body = request(0, 0, ALL)
    for k in ("session_id", "session_epoch", "forgotten_topics_data", "rack_id"):
        del body[k]
    assert "session_id" not in b.fetch(body, version=6) or b.fetch(body, version=6)["session_id"] == 0
    assert len(b.cache) == 0


def test_error_partitions_are_answered_until_the_error_goes(b):
    sid = b.fetch(request(0, 0, ALL))["session_id"]
    part = b.replicas.parts[("a", 1)]
    part.make_follower(2, 2, [1, 2], [1, 2], 0)
    r = b.fetch(request(sid, 1))
    assert answered(r) == {("a", 1): (errors.NOT_LEADER_OR_FOLLOWER, -1, 0)}
    assert answered(b.fetch(request(sid, 2))) == {("a", 1): (errors.NOT_LEADER_OR_FOLLOWER, -1, 0)}
    part.make_leader(3, [1], [1], 0)
    assert answered(b.fetch(request(sid, 3))) == {("a", 1): (0, 0, 0)}     # back: answered once more (HW -1 -> 0)
    assert answered(b.fetch(request(sid, 4))) == {}


def test_an_idle_incremental_poll_reads_no_partition(tmp_path):
    names = [("t", p) for p in range(100)]
    b = Broker(tmp_path, names)
    reads = []
    for part in b.replicas.parts.values():
        real = part.read

        def counted(*a, _real=real, **k):
            reads.append(1)
            return _real(*a, **k)
        part.read = counted
    sid = b.fetch(request(0, 0, [(t, p, 0) for t, p in names]))["session_id"]
    assert reads == []              # the full fetch too: every partition is at its HW (nothing to read, no error)
    for epoch in range(1, 11):
        assert b.fetch(request(sid, epoch))["responses"] == []
    assert reads == []                                   # 10 idle polls of 100 partitions: no read at all
    b.append("t", 42, 1)
    assert set(answered(b.fetch(request(sid, 11)))) == {("t", 42)} and len(reads) == 1


def test_incremental_long_poll_wakes_on_its_partitions_only(b):
    sid = b.fetch(request(0, 0, [("a", 0, 0), ("a", 1, 0)]))["session_id"]
    gevent.spawn_later(0.1, b.append, "a", 1, 1)
    started = gevent.get_hub().loop.now()
    r = b.fetch(request(sid, 1, max_wait=30_000, min_bytes=1))
    assert set(answered(r)) == {("a", 1)} and answered(r)[("a", 1)][2] > 0
    # woken by the append, not ended by max_wait (30 s): CI's loaded parallel phase once took 2.7 s for this
    assert gevent.get_hub().loop.now() - started < 15.0
    gevent.spawn_later(0.05, b.append, "b", 0, 1)        # not in the session: does not end the wait
    started = gevent.get_hub().loop.now()
    r = b.fetch(request(sid, 2, [("a", 1, 1)], max_wait=300, min_bytes=1))
    assert r["responses"] == [] and gevent.get_hub().loop.now() - started >= 0.25


def test_partitions_with_data_rotate_to_the_back(b):
    sid = b.fetch(request(0, 0, ALL))["session_id"]
    for t, p in NAMES:
        b.append(t, p, 1)
    r = b.fetch(request(sid, 1))
    assert [(t["topic"], p["partition_index"]) for t in r["responses"] for p in t["partitions"]] == NAMES
    r = b.fetch(request(sid, 2, [("a", 0, 1), ("b", 0, 1)]))   # a-1 not moved: its data again, then last
    assert answered(r)[("a", 1)][2] > 0 and set(answered(r)) == {("a", 1)}
    assert [cp.tp for cp in sorted(b.cache.get(sid).partitions.values(), key=lambda c: c.order)] == \
        [("a", 0), ("b", 0), ("a", 1)]              # the order the next pass reads (and the budget is spent) in


def test_next_epoch_wraps_to_1():
    assert fs.next_epoch(0) == 1 and fs.next_epoch(0x7FFFFFFF) == 1 and fs.next_epoch(-1) == -1


# ------------------------------------------------------------------------------------------------ eviction

def test_eviction_rules(tmp_path):
    clock = Clock()
    b = Broker(tmp_path, NAMES, slots=2, clock=clock)
    one = b.fetch(request(0, 0, [("a", 0, 0)]))["session_id"]
    clock.now += 10
    two = b.fetch(request(0, 0, [("a", 0, 0), ("a", 1, 0)]))["session_id"]
    assert one and two
    # full, both young: a consumer gets no session
    assert b.fetch(request(0, 0, ALL))["session_id"] == 0 and b.cache.evictions == 0
    # a follower (privileged) evicts the smallest unprivileged session
    f = b.fetch(request(0, 0, [("a", 0, 0)], replica_id=2))["session_id"]
    assert f and b.cache.get(one) is None and b.cache.get(two) is not None and b.cache.evictions == 1
    # a consumer cannot evict the follower, nor the younger consumer session
    assert b.fetch(request(0, 0, ALL))["session_id"] == 0
    # sessions created over EVICTION_MS ago are evictable by a session at least as large...
    clock.now += EVICTION_MS + 1
    b.fetch(request(two, 1))
    b.fetch(request(f, 1, replica_id=2))                 # both used just now: none is stale
    assert b.fetch(request(0, 0, [("b", 0, 0)]))["session_id"] == 0    # 1 partition < 2: not more valuable
    three = b.fetch(request(0, 0, ALL))["session_id"]                  # 3 partitions > 2: evicts `two`
    assert three and b.cache.get(two) is None and b.cache.get(f) is not None and b.cache.evictions == 2
    # ...and a session unused for over EVICTION_MS is evicted first, whatever its kind
    clock.now += 5
    b.fetch(request(three, 1))
    clock.now += EVICTION_MS - 10                        # f last used EVICTION_MS - 5 ago: not stale yet
    assert b.fetch(request(0, 0, [("b", 0, 0)]))["session_id"] == 0 and len(b.cache) == 2
    clock.now += 10                                       # f last used EVICTION_MS + 5 ago
    new = b.fetch(request(0, 0, [("b", 0, 0)]))["session_id"]
    assert new and b.cache.get(f) is None and b.cache.get(three) is not None and b.cache.evictions == 3
    assert all(len(p.replica_waiters) == 0 for p in b.replicas.parts.values())   # the follower's waiters went


# ------------------------------------------------------------------------------------------------ followers

def test_follower_session_keeps_an_idle_follower_caught_up(tmp_path):
    clock = Clock()
    b = Broker(tmp_path, [("r", 0), ("r", 1)], isr=(1, 2), clock=clock)
    parts = b.replicas.parts
    for part in parts.values():
        part.clock = clock
    b.append("r", 0, 2)
    sid = b.fetch(request(0, 0, [("r", 0, 0), ("r", 1, 0)], replica_id=2))["session_id"]
    r = b.fetch(request(sid, 1, [("r", 0, 2)], replica_id=2))
    assert answered(r) == {("r", 0): (0, 2, 0)}          # the HW moved with the follower's position
    assert parts[("r", 1)].followers[2].last_caught_up_ms == clock.now
    clock.now += 5000                                    # idle; refresh every 1000 ms of the cache's clock
    assert b.fetch(request(sid, 2, replica_id=2))["responses"] == []
    assert parts[("r", 1)].followers[2].last_caught_up_ms == clock.now
    assert parts[("r", 0)].followers[2].last_caught_up_ms == clock.now
    b.append("r", 1, 1)                                  # a follower session wakes on an append (LEO)
    r = b.fetch(request(sid, 3, replica_id=2))
    assert answered(r)[("r", 1)][2] > 0


def test_a_broker_joining_the_metadata_makes_idle_followers_report_at_once(tmp_path):
    """A follower taken out of an idle partition's ISR while its broker was not registered (the controller keeps
    the leader epoch) is taken back on its next fetch after ``refresh_followers_soon``, not a refresh interval
    later; before it, idle partitions are not re-read."""
    clock = Clock()
    b = Broker(tmp_path, [("r", 0), ("r", 1)], isr=(1, 2), clock=clock)
    parts = b.replicas.parts
    writes = []
    for part in parts.values():
        part.clock = clock
        part.isr_writer = lambda t, p, leader, epoch, isr, version: writes.append((p, list(isr))) or version + 1
    b.append("r", 0, 2)
    sid = b.fetch(request(0, 0, [("r", 0, 0), ("r", 1, 0)], replica_id=2))["session_id"]
    b.fetch(request(sid, 1, [("r", 0, 2)], replica_id=2))
    b.fetch(request(sid, 2, replica_id=2))               # answers r-0's new HW; both idle from here
    for part in parts.values():                          # the controller's removal: same leader epoch
        part.isr = [1]
    clock.now += 10                                      # well within the 1,000 ms refresh interval
    assert b.fetch(request(sid, 3, replica_id=2))["responses"] == []
    assert writes == [] and [p.isr for p in parts.values()] == [[1], [1]]
    b.cache.refresh_followers_soon()
    assert b.fetch(request(sid, 4, replica_id=2))["responses"] == []
    assert sorted(writes) == [(0, [1, 2]), (1, [1, 2])]
