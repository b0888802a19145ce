"""The follower's side of fetch sessions (kbroker/replica/fetch_session_client.py): full first, then only changed
partitions and forgotten ones, the error and sessionless answers, and a network reset."""
from kbroker.replica.fetch_session_client import FetchSessionClient


def want(**offsets):
    """{("t", p): request} from p<n>=offset keywords."""
    return {("t", int(k[1:])): {"partition": int(k[1:]), "current_leader_epoch": 1, "fetch_offset": v,
                                "log_start_offset": 0, "partition_max_bytes": 100} for k, v in offsets.items()}


def test_full_then_only_changed_and_forgotten():
    c = FetchSessionClient()
    sid, epoch, send, gone = c.build(want(p0=0, p1=0, p2=0))
    assert (sid, epoch, sorted(send), gone) == (0, 0, [("t", 0), ("t", 1), ("t", 2)], [])
    assert c.handle_response({"error_code": 0, "session_id": 77})
    sid, epoch, send, gone = c.build(want(p0=0, p1=5, p2=0))
    assert (sid, epoch, list(send), gone) == (77, 1, [("t", 1)], [])
    assert c.handle_response({"error_code": 0, "session_id": 77})
    sid, epoch, send, gone = c.build(want(p0=0, p1=5))                  # p2 no longer wanted
    assert (sid, epoch, send, gone) == (77, 2, {}, [("t", 2)])
    assert c.handle_response({"error_code": 0, "session_id": 77})
    sid, epoch, send, gone = c.build(want(p0=0, p1=5, p3=9))
    assert (epoch, list(send), gone) == (3, [("t", 3)], [])
    assert c.full_requests == 1 and c.incremental_requests == 3 and c.partitions_sent == 5


def test_session_errors_and_sessionless_answers():
    c = FetchSessionClient()
    c.build(want(p0=0))
    c.handle_response({"error_code": 0, "session_id": 5})
    c.build(want(p0=1))
    assert not c.handle_response({"error_code": 71, "session_id": 0})
    assert c.build(want(p0=1))[:2] == (5, 0)                  # full, closing session 5
    assert not c.handle_response({"error_code": 70, "session_id": 0})
    assert c.build(want(p0=1))[:2] == (0, 0)                  # full, no session to close
    assert c.handle_response({"error_code": 0, "session_id": 0})   # the leader had no slot: stay sessionless
    sid, epoch, send, _ = c.build(want(p0=1))
    assert (sid, epoch, list(send)) == (0, 0, [("t", 0)])
    c.handle_response({"error_code": 0, "session_id": 8})
    c.build(want(p0=2))
    c.handle_response({"error_code": 0, "session_id": 0})     # the leader closed it
    assert c.build(want(p0=2))[:2] == (0, 0)


def test_reset_after_a_network_error_closes_the_session():
    c = FetchSessionClient()
    c.build(want(p0=0))
    c.handle_response({"error_code": 0, "session_id": 9})
    c.build(want(p0=0))
    c.reset()
    sid, epoch, send, gone = c.build(want(p0=0))
    assert (sid, epoch, list(send), gone) == (9, 0, [("t", 0)], [])


# ------------------------------------------------------------------- followers over the wire, in process

def test_followers_replicate_through_incremental_sessions(tmp_path):
    """Two followers of 20 partitions on broker 1: full fetch, then incremental ones that carry only the partitions
    that moved; the logs end byte-identical and the leader's cache saw incremental fetches."""
    from kbroker.replica.delayed_produce import append_and_wait
    from tests.unit.test_replica_cluster import Cluster, batch, log_bytes, wait_for
    c = Cluster(tmp_path, 3)
    try:
        for p in range(20):
            c.lair([1, 2, 3], 1, 1, [1, 2, 3], [1, 2, 3], p=p)
        leaders = [c.nodes[1].rm.get_partition("t", p) for p in range(20)]
        fetchers = [c.nodes[j].rm.fetcher_for(1) for j in (2, 3)]
        wait_for(lambda: all(f.session.epoch > 1 for f in fetchers))
        sent_before = [f.session.partitions_sent for f in fetchers]
        for i in range(30):
            _r, code = append_and_wait(leaders[i % 3], batch(b"v%d" % i), None, 5000)
            assert code == 0
        assert [lp.high_watermark for lp in leaders[:3]] == [10, 10, 10]
        for j in (2, 3):
            for p in range(3):
                wait_for(lambda: c.nodes[j].rm.get_partition("t", p).high_watermark == 10)
                assert log_bytes(c.nodes[j].rm.get_partition("t", p)) == log_bytes(leaders[p])
        cache = c.nodes[1].sessions
        assert len(cache) == 2 and cache.incremental_fetches > 0 and cache.partitions_cached == 40
        # 30 appends on 3 partitions: the followers sent a few entries for those three, never the 17 idle ones
        sent = [f.session.partitions_sent - b for f, b in zip(fetchers, sent_before)]
        assert all(0 < n <= 3 * 30 for n in sent), sent
        assert all(f.session.full_requests == 1 for f in fetchers)
        assert all(leaders[p].isr == [1, 2, 3] for p in range(20))
    finally:
        c.stop()


# ------------------------------------------------------------------- the fetcher's rounds: O(changed partitions)

class _Part:
    """A followed partition as the fetcher reads and moves it (offsets only; appended bytes are counted)."""

    def __init__(self, topic, index):
        self.topic, self.index = topic, index
        self.log_end_offset = 0
        self.log_start_offset = 0
        self.hw = 0

    def append_as_follower(self, records):
        self.log_end_offset += records.count(b"r")      # one b"r" per record

    def update_follower_hw(self, hw):
        self.hw = min(hw, self.log_end_offset)

    def apply_leader_log_start_offset(self, offset):
        self.log_start_offset = max(self.log_start_offset, offset)


class _Leader:
    """The leader's side of the wire, scripted: ``answer`` {tp: (records, hw)} for the next Fetch; every request's
    body is kept."""

    def __init__(self):
        self.bodies = []
        self.answer = {}
        self.on_request = None

    def request(self, api_key, version, body):
        assert (api_key, version) == (1, 11)
        self.bodies.append(body)
        if self.on_request is not None:
            self.on_request()
        by_topic = {}
        for (t, p), (records, hw) in self.answer.items():
            by_topic.setdefault(t, []).append({"partition_index": p, "error_code": 0, "records": records,
                                               "high_watermark": hw, "log_start_offset": 0})
        self.answer = {}
        return {"error_code": 0, "session_id": 42,
                "responses": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]}

    def last(self):
        body = self.bodies[-1]
        return ({(t["topic"], p["partition"]): p["fetch_offset"] for t in body["topics"] for p in t["partitions"]},
                sorted((t["topic"], p) for t in body["forgotten_topics_data"] for p in t["partitions"]))


def _fetcher(n, monkeypatch):
    from kbroker.replica import fetcher as mod
    f = mod.ReplicaFetcher(2, 1, "h", 1, {"backoff_ms": 1000, "max_bytes": 1 << 20, "wait_ms": 500,
                                          "min_bytes": 1, "response_max_bytes": 10 << 20})
    f.conn = _Leader()
    parts = {("t", p): _Part("t", p) for p in range(n)}
    for tp, part in parts.items():
        f.add_partition(tp, part, 3)
        f._set_truncating(tp, f.states[tp], False)      # reconciled (as OffsetForLeaderEpoch would leave it)
    listed = []
    real = f._request
    monkeypatch.setattr(f, "_request", lambda st: listed.append(st) or real(st))
    return f, parts, listed


def test_an_idle_incremental_round_lists_no_partition_and_a_moved_one_is_sent(monkeypatch):
    f, parts, listed = _fetcher(2000, monkeypatch)
    now = 1000.0
    assert f._fetch_round(now)                       # full: every partition listed and sent
    assert len(listed) == 2000 and len(f.conn.last()[0]) == 2000
    listed.clear()
    f.conn.answer = {("t", 7): (b"rrr", 3), ("t", 1500): (b"r", 1)}
    assert f._fetch_round(now + 0.1)                 # incremental, nothing changed yet: nothing listed
    assert listed == [] and f.conn.last() == ({}, [])
    assert parts[("t", 7)].log_end_offset == 3
    assert f._fetch_round(now + 0.2)                 # the two that moved, at their new offsets, and only they
    assert len(listed) == 2
    assert f.conn.last() == ({("t", 7): 3, ("t", 1500): 1}, [])
    listed.clear()
    assert f._fetch_round(now + 0.3)
    assert listed == [] and f.conn.last() == ({}, [])
    assert f.session.partitions[("t", 7)]["fetch_offset"] == 3 and f.session.full_requests == 1


def test_the_sweep_sends_a_log_start_moved_without_the_fetcher(monkeypatch):
    from kbroker.replica.fetcher import SWEEP_S
    f, parts, listed = _fetcher(50, monkeypatch)
    now = 1000.0
    f._fetch_round(now)
    parts[("t", 9)].log_start_offset = 5               # this broker's retention moved it: nobody told the fetcher
    f._fetch_round(now + 0.1)
    assert f.conn.last() == ({}, [])
    listed.clear()
    f._fetch_round(now + SWEEP_S + 0.01)              # the sweep compares every partition again
    assert len(listed) == 50
    body = f.conn.bodies[-1]
    sent = {(t["topic"], p["partition"]): p["log_start_offset"] for t in body["topics"] for p in t["partitions"]}
    assert sent == {("t", 9): 5} and body["session_epoch"] > 0


def test_backed_off_removed_and_added_partitions_leave_and_join_the_session(monkeypatch):
    f, parts, listed = _fetcher(10, monkeypatch)
    now = 1000.0
    f._fetch_round(now)
    f._delay(f.states[("t", 2)])                      # an error backs it off: out of the session
    f.remove_partition(("t", 3))                      # became leader
    f._fetch_round(now + 0.1)
    assert f.conn.last() == ({}, [("t", 2), ("t", 3)])
    f.states[("t", 2)].delay_until = 0.0              # its backoff is over
    f._release(now + 0.2)
    f._fetch_round(now + 0.2)
    assert f.conn.last() == ({("t", 2): 0}, [])
    assert sorted(f.session.partitions) == sorted(tp for tp in parts if tp != ("t", 3))


def test_a_state_added_during_the_long_poll_gets_nothing_of_that_answer(monkeypatch):
    f, parts, listed = _fetcher(4, monkeypatch)
    now = 1000.0
    f._fetch_round(now)
    replacement = _Part("t", 1)

    def new_leader_and_isr():                        # a LeaderAndIsr lands while the Fetch is in flight
        f.add_partition(("t", 1), replacement, 4)
    f.conn.on_request = new_leader_and_isr
    f.conn.answer = {("t", 1): (b"rr", 2), ("t", 0): (b"r", 1)}
    f._fetch_round(now + 0.1)
    assert replacement.log_end_offset == 0 and parts[("t", 1)].log_end_offset == 0   # dropped: not its request
    assert parts[("t", 0)].log_end_offset == 1
    f.conn.on_request = None
    f._fetch_round(now + 0.2)                         # the new state reconciles first: out of the session till then
    assert f.conn.last() == ({("t", 0): 1}, [("t", 1)])
