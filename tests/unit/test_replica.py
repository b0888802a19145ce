"""Replication units: leader-epoch cache (file bytes, semantics, rebuild), leader-side Partition (HW, ISR shrink and
expand on a fake clock, fencing), delayed produce (acks=all), the fetch / OffsetForLeaderEpoch handlers' codes."""
import os
import time

import gevent
import pytest

from kbroker import errors
from kbroker.handlers.fetch import fetch as fetch_handler
from kbroker.handlers.offsets_for_leader_epoch import offset_for_leader_epoch
from kbroker.handlers.produce import produce as produce_handler
from kbroker.log.config import LogConfig
from kbroker.log.log import Log
from kbroker.record import Record, build_batch
from kbroker.replica.delayed_produce import DelayedProduce, append_and_wait
from kbroker.replica.epoch_cache import FILE_NAME, UNDEFINED, LeaderEpochCache
from kbroker.replica.partition import Partition
from tests.unit.ctx import make_ctx


def batch(n=1, value=b"v", epoch=-1, base=0, pid=-1, seq=-1):
    return build_batch([Record(i, 1000 + i, None, value, ()) for i in range(n)], base_offset=base,
                       partition_leader_epoch=epoch, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                       base_sequence=seq)


class Clock:
    def __init__(self, t=1_000_000):
        self.t = t

    def __call__(self):
        return self.t


def make_partition(tmp_path, isr=(1, 2, 3), min_isr=1, clock=None, writer=None, lag=10000, name="t-0", spawn=None):
    lc = LogConfig(min_insync_replicas=min_isr)
    lg = Log(str(tmp_path / name), lc)
    part = Partition("t", 0, lg, lc, 1, clock=clock or Clock(), isr_writer=writer, replica_lag_time_max_ms=lag,
                     isr_spawn=spawn)
    part.make_leader(1, list(isr), [1, 2, 3], 0)
    return part


# ------------------------------------------------------------------------------------------- epoch cache

def test_epoch_cache_file_bytes_and_assign(tmp_path):
    c = LeaderEpochCache(str(tmp_path))
    assert c.assign(0, 0) is True
    assert c.assign(2, 150) is True
    assert (tmp_path / FILE_NAME).read_bytes() == b"0\n2\n0 0\n2 150\n"
    assert c.assign(2, 170) is False                 # same epoch, later offset: no change
    assert c.assign(5, 140) is True                  # non-monotonic: epoch 2@150 is dropped
    assert c.entries() == [(0, 0), (5, 140)]
    assert (tmp_path / FILE_NAME).read_bytes() == b"0\n2\n0 0\n5 140\n"
    assert not os.path.exists(str(tmp_path / FILE_NAME) + ".tmp")


def test_epoch_cache_end_offset_semantics(tmp_path):
    c = LeaderEpochCache(str(tmp_path), [(1, 10), (3, 20), (4, 35)])
    assert c.end_offset_for(4, 50) == (4, 50)        # latest -> LEO
    assert c.end_offset_for(3, 50) == (3, 35)
    assert c.end_offset_for(2, 50) == (1, 20)        # unknown middle epoch -> floor epoch, next start
    assert c.end_offset_for(0, 50) == (0, 10)        # below earliest -> first known start (Kafka >= 2.0)
    assert c.end_offset_for(5, 50) == UNDEFINED      # above every known epoch
    assert c.end_offset_for(-1, 50) == UNDEFINED
    assert LeaderEpochCache(str(tmp_path)).end_offset_for(0, 7) == UNDEFINED
    assert c.start_offset_of(3) == 20 and c.start_offset_of(2) == -1


def test_epoch_cache_truncation(tmp_path):
    c = LeaderEpochCache(str(tmp_path), [(1, 10), (3, 20), (4, 35)])
    assert c.truncate_from_end(35) is True
    assert c.entries() == [(1, 10), (3, 20)]
    assert c.truncate_from_end(21) is False
    assert c.truncate_from_start(25) is True
    assert c.entries() == [(3, 25)]
    assert (tmp_path / FILE_NAME).read_bytes() == b"0\n1\n3 25\n"
    c.clear()
    assert (tmp_path / FILE_NAME).read_bytes() == b"0\n0\n"


def test_epoch_cache_rebuilt_from_log_when_file_missing(tmp_path):
    lc = LogConfig()
    lg = Log(str(tmp_path / "t-0"), lc)
    part = Partition("t", 0, lg, lc, 1)
    part.make_leader(0, [1], [1], 0)
    part.append(batch(2), None, 1)                   # 0-1 epoch 0
    part.make_leader(2, [1], [1], 0)
    part.append(batch(1), None, 1)                   # 2 epoch 2
    part.make_leader(3, [1], [1], 0)
    part.append(batch(3), None, 1)                   # 3-5 epoch 3
    assert part.epoch_cache.entries() == [(0, 0), (2, 2), (3, 3)]
    path = tmp_path / "t-0" / FILE_NAME
    assert path.read_bytes() == b"0\n3\n0 0\n2 2\n3 3\n"
    lg.close()
    os.unlink(path)
    lg2 = Log(str(tmp_path / "t-0"), lc)
    cache = LeaderEpochCache.load(lg2)
    assert cache.entries() == [(0, 0), (2, 2), (3, 3)]
    assert path.read_bytes() == b"0\n3\n0 0\n2 2\n3 3\n"
    # A checkpoint naming an epoch past the log end (the tail was lost in a crash) is cut on load.
    path.write_bytes(b"0\n4\n0 0\n2 2\n3 3\n4 9\n")
    assert LeaderEpochCache.load(lg2).entries() == [(0, 0), (2, 2), (3, 3)]
    lg2.close()


def test_leader_stamps_its_epoch_in_batches(tmp_path):
    part = make_partition(tmp_path, isr=[1])
    part.make_leader(7, [1], [1], 0)
    part.append(batch(1, epoch=-1), None, 1)
    raw = part.log.read(0, 1 << 20).region.read_bytes()
    assert int.from_bytes(raw[12:16], "big", signed=True) == 7


# ------------------------------------------------------------------------------------------- leader state

def test_hw_advances_only_when_every_isr_member_has_the_offset(tmp_path):
    part = make_partition(tmp_path)
    part.append(batch(3), None, 1)
    assert (part.log_end_offset, part.high_watermark) == (3, 0)
    part.update_follower(2, 3)
    assert part.high_watermark == 0                  # follower 3's LEO is still unknown
    part.update_follower(3, 1)
    assert part.high_watermark == 1
    part.update_follower(3, 3)
    assert part.high_watermark == 3
    part.update_follower(3, 2)                       # a stale fetch never moves the HW back
    assert part.high_watermark == 3
    # consumers read below the HW only; followers up to the LEO
    part.append(batch(2), None, 1)
    assert part.read(3, 1 << 20).region.size == 0
    assert part.read_for_follower(2, 3, 1 << 20, record=False).region.size > 0


def test_single_member_isr_commits_on_append(tmp_path):
    part = make_partition(tmp_path, isr=[1])
    r = part.append(batch(4), None, -1)
    assert (r.last_offset, part.high_watermark) == (3, 4)
    assert part.ack_status(3, part.leadership) == 0


def test_isr_shrink_after_lag_and_expand_on_catch_up(tmp_path):
    clock = Clock()
    writes = []

    def writer(topic, p, leader, epoch, isr, version):
        writes.append((topic, p, leader, epoch, list(isr), version))
        return version + 1
    part = make_partition(tmp_path, clock=clock, writer=writer, lag=10000)
    part.append(batch(5), None, 1)
    clock.t += 4000
    part.update_follower(2, 5)                       # caught up at t+4000
    part.update_follower(3, 2)                       # behind; never caught up since election at t
    clock.t += 6000                                  # t+10000: follower 3 lagged exactly 10000 -> stays
    assert part.maybe_shrink_isr() is False
    clock.t += 1
    assert part.maybe_shrink_isr() is True
    assert part.isr == [1, 2] and part.zk_version == 1
    assert writes == [("t", 0, 1, 1, [1, 2], 0)]
    assert part.high_watermark == 5                  # shrinking let the HW reach min(5, 5)
    part.update_follower(3, 4)                       # below the HW: not back yet
    assert part.isr == [1, 2]
    part.update_follower(3, 5)
    assert part.isr == [1, 2, 3] and part.zk_version == 2
    assert writes[-1] == ("t", 0, 1, 1, [1, 2, 3], 1)


def test_a_caught_up_replica_of_an_ineligible_broker_stays_out_of_the_isr(tmp_path):
    """KIP-841: the controller takes a dead broker out of the ISRs without a new leader epoch, so a zombie (its
    session expired, the process still fetching) is not fenced by the epoch; the leader keeps it out of the ISR
    while its metadata does not list the broker (``isr_eligible``), and takes it back once it does."""
    writes = []

    def writer(topic, p, leader, epoch, isr, version):
        writes.append(list(isr))
        return version + 1
    live = {1, 2}
    part = make_partition(tmp_path, isr=(1, 2), writer=writer)
    part.isr_eligible = live.__contains__
    part.append(batch(5), None, 1)
    part.update_follower(2, 5)
    part.update_follower(3, 5)                       # caught up, but broker 3 is not registered
    assert part.isr == [1, 2] and writes == [] and part.high_watermark == 5
    live.add(3)                                      # registered again: the next fetch takes it back
    part.update_follower(3, 5)
    assert part.isr == [1, 2, 3] and writes == [[1, 2, 3]]


def test_hw_waits_for_a_replica_whose_isr_expansion_is_being_written(tmp_path):
    # The expansion is in ZooKeeper (where the controller may elect the new member) before the write returns;
    # meanwhile the HW must be computed over the maximal ISR, or it passes the new member's LEO and a leader
    # change to it loses acknowledged records (seen as a fatal OUT_OF_ORDER_SEQUENCE in a rolling restart).
    from gevent.event import Event
    release = Event()
    started = []

    def slow_writer(topic, p, leader, epoch, isr, version):
        started.append(list(isr))
        release.wait(5)
        return version + 1
    part = make_partition(tmp_path, isr=[1, 2], writer=slow_writer)
    part.append(batch(5), None, 1)
    part.update_follower(2, 2)
    assert part.high_watermark == 2
    g = gevent.spawn(part.update_follower, 3, 2)      # follower 3 reached the HW: expansion to [1, 2, 3]
    gevent.sleep(0)
    assert started == [[1, 2, 3]] and part.isr == [1, 2]
    part.update_follower(2, 5)                        # 2 caught up while the write is in flight
    assert part.high_watermark == 2                   # not 5: follower 3 has only offsets < 2
    release.set()
    g.join(5)
    assert part.isr == [1, 2, 3] and part.high_watermark == 2
    part.update_follower(3, 5)
    assert part.high_watermark == 5


def test_single_member_fast_path_waits_for_a_pending_expansion(tmp_path):
    from gevent.event import Event
    release = Event()

    def slow_writer(topic, p, leader, epoch, isr, version):
        release.wait(5)
        return version + 1
    part = make_partition(tmp_path, isr=[1], writer=slow_writer)
    part.append(batch(2), None, 1)
    assert part.high_watermark == 2
    part.make_leader(1, [1], [1, 2, 3], 1)            # keeps the log; follower 2 fetches at the HW
    g = gevent.spawn(part.update_follower, 2, 2)
    gevent.sleep(0)
    part.append(batch(3), None, 1)                    # ISR [1] but [1, 2] is being written
    assert part.high_watermark == 2
    release.set()
    g.join(5)
    assert part.isr == [1, 2] and part.high_watermark == 2
    part.update_follower(2, 5)
    assert part.high_watermark == 5


def test_isr_expansion_in_the_background_does_not_hold_the_fetch(tmp_path):
    """With ``isr_spawn`` (the ReplicaManager's gevent.spawn) a follower's catch-up returns at once: the
    expansion's write runs in its own greenlet (where concurrent writes meet in the broker's ISR write batches),
    the HW waits over the maximal ISR meanwhile, and the ISR is taken when the write lands. A second catch-up
    while the write is in flight starts no second write."""
    from gevent.event import Event
    release = Event()
    writes = []

    def slow_writer(topic, p, leader, epoch, isr, version):
        writes.append(list(isr))
        release.wait(5)
        return version + 1
    part = make_partition(tmp_path, isr=[1, 2], writer=slow_writer, spawn=gevent.spawn)
    part.append(batch(5), None, 1)
    part.update_follower(2, 5)
    assert part.high_watermark == 5
    part.update_follower(3, 5)                        # caught up: returns without waiting for the write
    part.update_follower(3, 5)
    assert part.isr == [1, 2] and part.maximal_isr() == [1, 2, 3]
    gevent.sleep(0)
    assert writes == [[1, 2, 3]]
    release.set()
    deadline = time.monotonic() + 5
    while part.isr != [1, 2, 3] and time.monotonic() < deadline:
        gevent.sleep(0.001)
    assert part.isr == [1, 2, 3] and part.zk_version == 1 and writes == [[1, 2, 3]]


def test_isr_write_lost_race_keeps_old_isr(tmp_path):
    clock = Clock()
    part = make_partition(tmp_path, clock=clock, writer=lambda *a: None)
    clock.t += 20000
    assert part.maybe_shrink_isr() is False
    assert part.isr == [1, 2, 3] and part.zk_version == 0


def test_caught_up_as_of_previous_fetch(tmp_path):
    clock = Clock()
    part = make_partition(tmp_path, clock=clock)
    part.update_follower(2, 0)                       # at t: LEO 0 -> caught up at t
    part.append(batch(1), None, 1)
    clock.t += 9000
    part.update_follower(2, 0)                       # LEO 1 now, but offset 0 >= LEO at previous fetch -> t
    st = part.followers[2]
    assert st.last_caught_up_ms == 1_000_000
    clock.t += 500
    part.update_follower(2, 1)
    assert st.last_caught_up_ms == 1_009_500


def test_fencing_codes(tmp_path):
    part = make_partition(tmp_path)
    part.check_leader_epoch(1)
    part.check_leader_epoch(-1)
    with pytest.raises(errors.FencedLeaderEpoch) as e:
        part.check_leader_epoch(0)
    assert e.value.code == 74
    with pytest.raises(errors.UnknownLeaderEpoch) as e:
        part.check_leader_epoch(2)
    assert e.value.code == 75


# ------------------------------------------------------------------------------------------- delayed produce

def test_delayed_produce_completes_on_hw_advance(tmp_path):
    part = make_partition(tmp_path, isr=[1, 2], min_isr=2)
    part.followers[2].leo = 0
    delayed = DelayedProduce()
    r, ack = delayed.append(part, batch(2), None)
    assert ack.error_code is None and part.ack_status(r.last_offset, part.leadership) is None

    def follower():
        gevent.sleep(0.05)
        part.update_follower(2, 1)                   # HW 1: not enough for offset 1
        gevent.sleep(0.05)
        part.update_follower(2, 2)
    g = gevent.spawn(follower)
    delayed.wait(5000)
    g.join()
    assert ack.error_code == 0 and part.high_watermark == 2
    assert not part.waiters                          # the wait's Event left the partition


def test_delayed_produce_single_member_isr_needs_no_wait(tmp_path):
    part = make_partition(tmp_path, isr=[1])
    delayed = DelayedProduce()
    r, ack = delayed.append(part, batch(3), None)
    assert (r.last_offset, ack.error_code) == (2, 0)  # complete in the append itself
    t0 = time.monotonic()
    delayed.wait(5000)
    assert time.monotonic() - t0 < 0.05 and ack.error_code == 0


def test_delayed_produce_times_out(tmp_path):
    part = make_partition(tmp_path, isr=[1, 2])
    r, code = append_and_wait(part, batch(1), None, 50)
    assert code == errors.REQUEST_TIMED_OUT == 7
    assert part.log_end_offset == 1 and part.high_watermark == 0   # the records stay in the log


def test_delayed_produce_gives_up_when_nobody_waits(tmp_path):
    part = make_partition(tmp_path, isr=[1, 2])
    delayed = DelayedProduce()
    _r, ack = delayed.append(part, batch(1), None)
    closing = []
    gevent.spawn_later(0.02, lambda: (closing.append(1), part._wake()))   # a wake after the connection closed
    t0 = time.monotonic()
    delayed.wait(5000, give_up=lambda: bool(closing))
    assert time.monotonic() - t0 < 1 and ack.error_code == errors.REQUEST_TIMED_OUT


def test_not_enough_replicas_after_append_when_isr_shrinks(tmp_path):
    clock = Clock()
    part = make_partition(tmp_path, isr=[1, 2], min_isr=2, clock=clock)

    def shrink():
        gevent.sleep(0.02)
        clock.t += 20000
        part.maybe_shrink_isr()
    g = gevent.spawn(shrink)
    _r, code = append_and_wait(part, batch(1), None, 5000)
    g.join()
    assert part.isr == [1]
    assert code == errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND == 20


def test_delayed_produce_loses_leadership(tmp_path):
    part = make_partition(tmp_path, isr=[1, 2])
    g = gevent.spawn_later(0.02, part.make_follower, 2, 2, [2], [1, 2], 1)
    _r, code = append_and_wait(part, batch(1), None, 5000)
    g.join()
    assert code == errors.NOT_LEADER_OR_FOLLOWER


# ------------------------------------------------------------------------------------------- handlers

def Ctx(replicas, version):
    return make_ctx(version, replicas=replicas)


class OnePartReplicas:
    """The replica collaborator hosting only t-0 (``part``)."""

    def __init__(self, part):
        self.part = part

    def get_partition(self, topic, p):
        return self.part if (topic, p) == ("t", 0) else None

    def leader_partition(self, topic, p):
        if (topic, p) != ("t", 0):
            raise errors.UnknownTopicOrPartition("x")
        if not self.part.is_leader:
            raise errors.NotLeaderOrFollower("x")
        return self.part


def produce_req(acks, timeout_ms=1000, n=1):
    return {"transactional_id": None, "acks": acks, "timeout_ms": timeout_ms,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch(n)}]}]}


def test_produce_acks_all_not_enough_replicas_before_append(tmp_path):
    part = make_partition(tmp_path, isr=[1], min_isr=2)
    resp = produce_handler(Ctx(OnePartReplicas(part), 9), produce_req(-1))
    pr = resp["responses"][0]["partition_responses"][0]
    assert pr["error_code"] == errors.NOT_ENOUGH_REPLICAS == 19
    assert part.log_end_offset == 0                  # nothing appended
    resp = produce_handler(Ctx(OnePartReplicas(part), 9), produce_req(1))   # acks=1 ignores min.insync
    assert resp["responses"][0]["partition_responses"][0]["error_code"] == 0
    assert part.log_end_offset == 1


def test_produce_acks_all_waits_then_times_out_with_7(tmp_path):
    part = make_partition(tmp_path, isr=[1, 2], min_isr=2)
    resp = produce_handler(Ctx(OnePartReplicas(part), 9), produce_req(-1, timeout_ms=60, n=3))
    pr = resp["responses"][0]["partition_responses"][0]
    assert (pr["error_code"], pr["base_offset"]) == (7, 0)
    assert part.log_end_offset == 3                  # appended; only the acknowledgement failed
    g = gevent.spawn_later(0.03, part.update_follower, 2, 6)
    resp = produce_handler(Ctx(OnePartReplicas(part), 9), produce_req(-1, timeout_ms=5000, n=3))
    g.join()
    pr = resp["responses"][0]["partition_responses"][0]
    assert (pr["error_code"], pr["base_offset"]) == (0, 3)


def fetch_req(offset, epoch=-1, replica_id=-1, max_wait=0):
    return {"replica_id": replica_id, "max_wait_ms": max_wait, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": "t", "partitions": [{"partition": 0, "current_leader_epoch": epoch,
                                                      "fetch_offset": offset, "log_start_offset": -1,
                                                      "partition_max_bytes": 1 << 20}]}]}


def _pd(resp):
    return resp["responses"][0]["partitions"][0]


def test_fetch_follower_vs_consumer_and_fencing(tmp_path):
    part = make_partition(tmp_path, isr=[1, 2])
    part.append(batch(2), None, 1)
    b = OnePartReplicas(part)
    pd = _pd(fetch_handler(Ctx(b, 11), fetch_req(0, epoch=1)))
    assert (pd["error_code"], pd["high_watermark"], pd["records"]) == (0, 0, b"")
    pd = _pd(fetch_handler(Ctx(b, 11), fetch_req(0, epoch=1, replica_id=2)))
    assert pd["error_code"] == 0 and pd["records"].size > 0          # followers read to the LEO
    assert part.followers[2].leo == 0
    pd = _pd(fetch_handler(Ctx(b, 11), fetch_req(2, epoch=1, replica_id=2)))
    assert (pd["error_code"], pd["high_watermark"]) == (0, 2)        # the follower's LEO advanced the HW
    assert _pd(fetch_handler(Ctx(b, 11), fetch_req(2, epoch=0, replica_id=2)))["error_code"] == 74
    assert _pd(fetch_handler(Ctx(b, 11), fetch_req(2, epoch=2, replica_id=2)))["error_code"] == 75
    assert _pd(fetch_handler(Ctx(b, 11), fetch_req(2, epoch=0)))["error_code"] == 74
    part.make_follower(2, 2, [2], [1, 2, 3], 1)
    assert _pd(fetch_handler(Ctx(b, 11), fetch_req(2, epoch=2, replica_id=3)))["error_code"] == 6


def test_follower_long_poll_wakes_on_append(tmp_path):
    part = make_partition(tmp_path, isr=[1, 2])
    b = OnePartReplicas(part)
    g = gevent.spawn_later(0.05, part.append, batch(1), None, 1)
    pd = _pd(fetch_handler(Ctx(b, 11), fetch_req(0, epoch=1, replica_id=2, max_wait=5000)))
    g.join()
    assert pd["records"].size > 0 and pd["high_watermark"] == 0


def ofle_req(epoch, current=-1, replica_id=2, topic="t"):
    return {"replica_id": replica_id, "topics": [{"topic": topic, "partitions": [
        {"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}]}]}


def test_offsets_for_leader_epoch_handler(tmp_path):
    part = make_partition(tmp_path, isr=[1])
    part.append(batch(2), None, 1)                   # epoch 1: 0-1
    part.make_leader(3, [1], [1, 2, 3], 0)
    part.append(batch(1), None, 1)                   # epoch 3: 2
    b = OnePartReplicas(part)

    def one(req, version=3):
        r = offset_for_leader_epoch(Ctx(b, version), req)["topics"][0]["partitions"][0]
        return r["error_code"], r["leader_epoch"], r["end_offset"]
    assert one(ofle_req(1)) == (0, 1, 2)
    assert one(ofle_req(2)) == (0, 1, 2)
    assert one(ofle_req(3, current=3)) == (0, 3, 3)
    assert one(ofle_req(4)) == (0, -1, -1)
    assert one(ofle_req(1, current=2)) == (74, -1, -1)
    assert one(ofle_req(1, current=4)) == (75, -1, -1)
    assert one(ofle_req(1, topic="nope")) == (3, -1, -1)
    part.make_follower(2, 4, [2], [1, 2, 3], 1)
    assert one(ofle_req(1)) == (6, -1, -1)
    assert one(ofle_req(1, replica_id=-2)) == (0, 1, 2)    # the debugging id may ask any replica



def test_new_epoch_for_the_same_leader_keeps_follower_state(tmp_path):
    part = make_partition(tmp_path)
    part.append(batch(2), None, 1)
    part.update_follower(2, 2)
    part.update_follower(3, 2)
    assert part.high_watermark == 2
    part.make_leader(2, [1, 2, 3], [1, 2, 3], 5)     # controller bumped the epoch, same leader
    assert part.followers[2].leo == 2 and part.epoch_cache.entries() == [(1, 0), (2, 2)]
    part.append(batch(1), None, 1)
    part.update_follower(2, 3)
    part.update_follower(3, 3)
    assert part.high_watermark == 3
    part.make_follower(2, 3, [1, 2, 3], [1, 2, 3], 6)
    part.make_leader(4, [1, 2, 3], [1, 2, 3], 7)     # leadership came back: follower LEOs unknown again
    assert part.followers[2].leo == -1 and part.leadership == 1


# ------------------------------------------------------------------------------------ follower copy, rebuilds

def _leader_with_history(tmp_path):
    """A leader log holding epochs 0 (offsets 0-2), 4 (3-4) and 6 (5-8); producer 9 wrote 0-2 and 5-8."""
    lc = LogConfig()
    part = Partition("t", 0, Log(str(tmp_path / "leader" / "t-0"), lc), lc, 1)
    part.make_leader(0, [1], [1], 0)
    part.append(batch(3, pid=9, seq=0), 3, 1)
    part.make_leader(4, [1], [1], 0)
    part.append(batch(2), 3, 1)
    part.make_leader(6, [1], [1], 0)
    part.append(batch(4, pid=9, seq=3), 3, 1)
    return part


def test_follower_copies_batches_and_learns_epochs_and_producers(tmp_path):
    leader = _leader_with_history(tmp_path)
    data = leader.log.read(0, 1 << 20).region.read_bytes()
    lc = LogConfig()
    f = Partition("t", 0, Log(str(tmp_path / "follower" / "t-0"), lc), lc, 2)
    f.make_follower(1, 6, [1, 2], [1, 2], 0)
    assert f.append_as_follower(data[:40]) == 0                 # a partial first batch: wait for the next fetch
    assert f.append_as_follower(data + data[:70]) == len(data)  # whole batches only, bytes kept
    assert f.log.read(0, 1 << 20).region.read_bytes() == data
    assert f.log_end_offset == 9
    assert f.epoch_cache.entries() == [(0, 0), (4, 3), (6, 5)]
    assert f.producers.last_sequence(9) == 6
    assert f.log.segments[0].offset_index.entries == 0          # index cadence: 4096 bytes, none passed
    assert f.log.segments[0].max_timestamp_so_far == 1003       # from the entries: batch 3's maxTimestamp
    assert f.append_as_follower(data) == 0                      # everything already held
    corrupt = bytearray(data)
    corrupt[70] ^= 0xFF                                         # inside the first batch's records: bad CRC
    with pytest.raises(errors.CorruptMessage):
        f.append_as_follower(bytes(corrupt))


def test_producer_state_and_epoch_cache_rebuilt_from_the_log(tmp_path):
    leader = _leader_with_history(tmp_path)
    lg, lc = leader.log, leader.log_config
    lg.close()
    os.unlink(os.path.join(lg.dir, FILE_NAME))
    again = Partition("t", 0, Log(lg.dir, lc), lc, 1)
    assert again.epoch_cache.entries() == [(0, 0), (4, 3), (6, 5)]
    assert again.producers.last_sequence(9) == 6
    again.make_leader(7, [1], [1], 0)
    dup = again.append(batch(4, pid=9, seq=3), 3, 1)            # a retry of the last batch: its original offsets
    assert (dup.duplicate, dup.base_offset, dup.last_offset) == (True, 5, 8)
    with pytest.raises(errors.OutOfOrderSequenceNumber):
        again.append(batch(1, pid=9, seq=9), 3, 1)
    assert again.append(batch(1, pid=9, seq=7), 3, 1).base_offset == 9
    # truncation rebuilds the producer state from what is left
    again.make_follower(2, 8, [1, 2], [1, 2], 0)
    assert again.truncate_to(5)
    assert again.producers.last_sequence(9) == 2
    assert again.epoch_cache.entries() == [(0, 0), (4, 3)]
    again.log.close()


def test_a_background_expansion_writes_at_the_version_it_was_decided_on(tmp_path):
    """A LeaderAndIsr landing between the catch-up and its background write (new epoch, new znode version) must make
    the write conditional on the version the expansion was decided on -- so ZooKeeper refuses it -- not on the new
    one, where it would pass and put the old leader epoch back."""
    writes = []

    def writer(topic, p, leader, epoch, isr, version):
        writes.append((epoch, list(isr), version))
        return None                                   # the znode moved on: a lost race

    spawned = []
    part = make_partition(tmp_path, isr=[1, 2], writer=writer, spawn=lambda fn, *args: spawned.append((fn, args)))
    part.make_leader(1, [1, 2], [1, 2, 3], 4)         # still leading, the znode at version 4
    part.append(batch(5), None, 1)
    part.update_follower(2, 5)
    part.update_follower(3, 5)                        # decided at epoch 1, znode version 4
    part.make_leader(2, [1, 2], [1, 2, 3], 7)         # the controller's new epoch lands first
    fn, args = spawned.pop()
    assert fn(*args) is False
    assert writes == [(1, [1, 2, 3], 4)]              # conditional on version 4: refused, nothing taken
    assert part.isr == [1, 2] and part.leader_epoch == 2 and part.zk_version == 7
