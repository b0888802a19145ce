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
