"""The transaction coordinator's API logic (kbroker/transaction/coordinator.py) over an in-memory
``__transaction_state`` and a fake partition leader answering WriteTxnMarkers: exact error codes, the records
logged, markers, fencing, timeouts, expiry, loading and unloading."""
import gevent
import pytest

from kbroker import errors
from kbroker.coordinator.timers import FakeScheduler
from kbroker.transaction import metadata as m
from kbroker.transaction import txn_log
from kbroker.transaction.coordinator import TransactionCoordinator
from kbroker.transaction.markers import TxnMarkerChannel
from kbroker.transaction.state_manager import TransactionStateManager, partition_for

N = 4


class MemStore:
    """``__transaction_state`` in memory: {partition: [(key, value)]}; ``fail`` = exception to raise once."""

    def __init__(self):
        self.logs = {}
        self.fail = None

    def append(self, index, records, now):
        if self.fail is not None:
            e, self.fail = self.fail, None
            raise e
        self.logs.setdefault(index, []).extend(records)

    def read(self, index):
        return list(self.logs.get(index, []))

    def states(self, tid):
        """[(state name, epoch)] logged for ``tid``; a tombstone is ("tombstone", None)."""
        out = []
        for k, v in self.logs.get(partition_for(tid, N), []):
            if txn_log.decode_key(k) == tid:
                rec = txn_log.decode_value(v)
                out.append(("tombstone", None) if rec is None else (m.BY_ID[rec.state_id].name, rec.producer_epoch))
        return out


class Leaders:
    """Every partition led by broker 1; ``send`` answers WriteTxnMarkers with ``codes`` (default 0) and records the
    markers written; ``hold`` parks the answer until released."""

    def __init__(self):
        self.written = []          # (producer id, epoch, commit, coordinator epoch, (topic, p))
        self.codes = {}
        self.hold = None
        self.requests = 0

    def leader_of(self, t, p):
        return None if t == "deleted" else 1

    def send(self, broker_id, body):
        self.requests += 1
        if self.hold is not None:
            self.hold.wait()
        out = []
        for mk in body["markers"]:
            topics = []
            for t in mk["topics"]:
                parts = []
                for p in t["partition_indexes"]:
                    code = self.codes.get((t["name"], p), 0)
                    if code == 0:
                        self.written.append((mk["producer_id"], mk["producer_epoch"], mk["transaction_result"],
                                             mk["coordinator_epoch"], (t["name"], p)))
                    parts.append({"partition_index": p, "error_code": code})
                topics.append({"name": t["name"], "partitions": parts})
            out.append({"producer_id": mk["producer_id"], "topics": topics})
        return {"markers": out}


class Pids:
    def __init__(self):
        self.n = 1000

    def next_id(self):
        self.n += 1
        return self.n


CONFIG = {"transaction.max.timeout.ms": 900000}


@pytest.fixture
def env():
    sched = FakeScheduler()
    store = MemStore()
    state = TransactionStateManager(store, sched.now_ms, lambda: N, expiration_ms=3600000)
    leaders = Leaders()
    channel = TxnMarkerChannel(leaders.leader_of, leaders.send, sched)
    coord = TransactionCoordinator(CONFIG, sched, state, channel, Pids())
    for i in range(N):
        coord.begin_load(i, 5)
        assert coord.load_partition(i, 5)
    yield coord, store, leaders, sched
    coord.shutdown()


def settle(sched, rounds=20):
    """Let the marker senders run and due retries fire."""
    for _ in range(rounds):
        gevent.sleep(0)
        sched.advance(100)
        gevent.sleep(0)


def test_init_new_id_then_reinit_bumps_and_fences(env):
    coord, store, _l, _s = env
    assert coord.init_producer_id("app", 60000) == (0, 1001, 0)
    assert coord.init_producer_id("app", 60000) == (0, 1001, 1)
    assert store.states("app") == [("Empty", 0), ("Empty", 1)]
    # the first instance (epoch 0) is fenced on its next call
    assert coord.add_partitions("app", 1001, 0, {("t", 0)}) == errors.PRODUCER_FENCED
    assert coord.end_txn("app", 1001, 0, True) == errors.PRODUCER_FENCED
    assert coord.add_partitions("app", 999, 1, {("t", 0)}) == errors.INVALID_PRODUCER_ID_MAPPING
    assert coord.add_partitions("nobody", 1001, 1, {("t", 0)}) == errors.INVALID_PRODUCER_ID_MAPPING


def test_bad_timeouts_and_ids(env):
    coord = env[0]
    assert coord.init_producer_id("app", 900001)[0] == errors.INVALID_TRANSACTION_TIMEOUT
    assert coord.init_producer_id("app", 0)[0] == errors.INVALID_TRANSACTION_TIMEOUT
    assert coord.init_producer_id("", 1000)[0] == errors.INVALID_REQUEST
    assert coord.init_producer_id("app", 900000)[0] == 0


def test_commit_writes_markers_then_complete(env):
    coord, store, leaders, sched = env
    _, pid, epoch = coord.init_producer_id("app", 60000)
    assert coord.add_partitions("app", pid, epoch, {("t", 0), ("t", 1)}) == 0
    assert coord.add_partitions("app", pid, epoch, {("t", 1)}) == 0          # already in: nothing logged
    assert coord.add_partitions("app", pid, epoch, {("u", 2)}) == 0
    leaders.hold = gevent.event.Event()
    assert coord.end_txn("app", pid, epoch, True) == 0
    gevent.sleep(0)
    # markers in flight: the producer's next calls wait
    assert coord.add_partitions("app", pid, epoch, {("t", 0)}) == errors.CONCURRENT_TRANSACTIONS
    assert coord.end_txn("app", pid, epoch, True) == errors.CONCURRENT_TRANSACTIONS
    assert coord.init_producer_id("app", 60000)[0] == errors.CONCURRENT_TRANSACTIONS
    assert coord.describe("app")["transaction_state"] == "PrepareCommit"
    leaders.hold.set()
    leaders.hold = None
    settle(sched)
    assert sorted(w[4] for w in leaders.written) == [("t", 0), ("t", 1), ("u", 2)]
    assert {w[:4] for w in leaders.written} == {(pid, epoch, True, 5)}
    assert store.states("app") == [("Empty", 0), ("Ongoing", 0), ("Ongoing", 0), ("PrepareCommit", 0),
                                   ("CompleteCommit", 0)]
    assert coord.end_txn("app", pid, epoch, True) == 0                       # a retry of a completed commit
    assert coord.end_txn("app", pid, epoch, False) == errors.INVALID_TXN_STATE
    d = coord.describe("app")
    assert (d["transaction_state"], d["topics"], d["producer_epoch"]) == ("CompleteCommit", [], 0)


def test_end_txn_on_empty_is_invalid_txn_state(env):
    coord = env[0]
    _, pid, epoch = coord.init_producer_id("app", 60000)
    assert coord.end_txn("app", pid, epoch, True) == errors.INVALID_TXN_STATE
    assert coord.end_txn("app", pid, epoch, False) == errors.INVALID_TXN_STATE


def test_init_during_ongoing_fences_and_aborts_first(env):
    coord, store, leaders, sched = env
    _, pid, epoch = coord.init_producer_id("app", 60000)
    coord.add_partitions("app", pid, epoch, {("t", 0)})
    assert coord.init_producer_id("app", 60000)[0] == errors.CONCURRENT_TRANSACTIONS
    settle(sched)
    # aborted with the fenced epoch + 1, then the retry bumps again
    assert leaders.written == [(pid, 1, False, 5, ("t", 0))]
    assert coord.init_producer_id("app", 60000) == (0, pid, 2)
    assert store.states("app")[-3:] == [("PrepareAbort", 1), ("CompleteAbort", 1), ("Empty", 2)]
    assert coord.end_txn("app", pid, epoch, True) == errors.PRODUCER_FENCED


def test_timed_out_transaction_is_aborted_and_the_producer_fenced(env):
    coord, store, leaders, sched = env
    _, pid, epoch = coord.init_producer_id("app", 1000)
    coord.add_partitions("app", pid, epoch, {("t", 0)})
    assert coord.abort_timed_out() == 0
    sched.advance(1001)
    assert coord.abort_timed_out() == 1
    settle(sched)
    assert leaders.written == [(pid, epoch + 1, False, 5, ("t", 0))]
    assert store.states("app")[-2:] == [("PrepareAbort", 1), ("CompleteAbort", 1)]
    assert coord.add_partitions("app", pid, epoch, {("t", 0)}) == errors.PRODUCER_FENCED
    assert coord.end_txn("app", pid, epoch, True) == errors.PRODUCER_FENCED


def test_markers_retry_until_written_and_skip_deleted_partitions(env):
    coord, store, leaders, sched = env
    _, pid, epoch = coord.init_producer_id("app", 60000)
    coord.add_partitions("app", pid, epoch, {("t", 0), ("deleted", 0)})
    leaders.codes[("t", 0)] = errors.NOT_LEADER_OR_FOLLOWER
    assert coord.end_txn("app", pid, epoch, False) == 0
    settle(sched, 3)
    assert leaders.written == [] and coord.describe("app")["transaction_state"] == "PrepareAbort"
    assert coord.describe("app")["topics"] == [{"topic": "t", "partitions": [0]}]
    n = leaders.requests
    del leaders.codes[("t", 0)]
    settle(sched)
    assert leaders.requests > n and leaders.written == [(pid, epoch, False, 5, ("t", 0))]
    assert store.states("app")[-1] == ("CompleteAbort", 0)


def test_fenced_coordinator_stops_sending(env):
    coord, store, leaders, sched = env
    _, pid, epoch = coord.init_producer_id("app", 60000)
    coord.add_partitions("app", pid, epoch, {("t", 0)})
    leaders.codes[("t", 0)] = errors.TRANSACTION_COORDINATOR_FENCED
    assert coord.end_txn("app", pid, epoch, True) == 0
    settle(sched)
    n = leaders.requests
    settle(sched)
    assert leaders.requests == n == 1
    assert store.states("app")[-1] == ("PrepareCommit", 0)


def test_failed_log_write_maps_the_error_and_changes_nothing(env):
    coord, store, _l, _s = env
    _, pid, epoch = coord.init_producer_id("app", 60000)
    store.fail = errors.NotEnoughReplicas("x")
    assert coord.add_partitions("app", pid, epoch, {("t", 0)}) == errors.COORDINATOR_NOT_AVAILABLE
    store.fail = errors.NotLeaderOrFollower("x")
    assert coord.add_partitions("app", pid, epoch, {("t", 0)}) == errors.NOT_COORDINATOR
    assert coord.describe("app")["transaction_state"] == "Empty"
    assert coord.add_partitions("app", pid, epoch, {("t", 0)}) == 0


def test_not_coordinator_and_loading(env):
    coord = env[0]
    p = partition_for("app", N)
    coord.unload_partition(p)
    assert coord.init_producer_id("app", 60000)[0] == errors.NOT_COORDINATOR
    assert coord.describe("app")["error_code"] == errors.NOT_COORDINATOR
    coord.begin_load(p, 6)
    assert coord.init_producer_id("app", 60000)[0] == errors.COORDINATOR_LOAD_IN_PROGRESS
    assert coord.list_transactions([], [])["error_code"] == errors.COORDINATOR_LOAD_IN_PROGRESS


def test_reload_restores_state_and_resends_prepared_markers():
    sched = FakeScheduler()
    store = MemStore()
    leaders = Leaders()

    def make():
        state = TransactionStateManager(store, sched.now_ms, lambda: N, expiration_ms=3600000)
        c = TransactionCoordinator(CONFIG, sched, state, TxnMarkerChannel(leaders.leader_of, leaders.send, sched),
                                   Pids())
        return c

    a = make()
    p = partition_for("app", N)
    a.begin_load(p, 5)
    a.load_partition(p, 5)
    _, pid, epoch = a.init_producer_id("app", 60000)
    a.add_partitions("app", pid, epoch, {("t", 3)})
    leaders.codes[("t", 3)] = errors.NOT_LEADER_OR_FOLLOWER
    assert a.end_txn("app", pid, epoch, True) == 0
    settle(sched, 2)
    a.unload_partition(p)                   # leadership moved: this coordinator stops
    del leaders.codes[("t", 3)]
    settle(sched)
    assert leaders.written == []
    b = make()
    b.begin_load(p, 6)
    assert b.load_partition(p, 6)
    settle(sched)
    assert leaders.written == [(pid, epoch, True, 6, ("t", 3))]     # the new coordinator epoch
    assert b.describe("app")["transaction_state"] == "CompleteCommit"
    assert b.init_producer_id("app", 60000) == (0, pid, epoch + 1)
    a.shutdown()
    b.shutdown()


def test_expiry_tombstones_idle_ids(env):
    coord, store, _l, sched = env
    coord.init_producer_id("idle", 60000)
    _, pid, epoch = coord.init_producer_id("busy", 60000)
    coord.add_partitions("busy", pid, epoch, {("t", 0)})
    sched.advance(3600001)
    assert coord.expire_transactional_ids() == 1
    assert store.states("idle")[-1] == ("tombstone", None)
    assert coord.describe("idle")["error_code"] == errors.TRANSACTIONAL_ID_NOT_FOUND
    assert coord.describe("busy")["transaction_state"] == "Ongoing"


def test_list_and_describe(env):
    coord, _s, _l, sched = env
    _, pid, epoch = coord.init_producer_id("a", 60000)
    coord.add_partitions("a", pid, epoch, {("t", 0), ("t", 1)})
    coord.init_producer_id("b", 60000)
    got = coord.list_transactions([], [])
    assert sorted((s["transactional_id"], s["transaction_state"]) for s in got["transaction_states"]) == [
        ("a", "Ongoing"), ("b", "Empty")]
    got = coord.list_transactions(["Ongoing", "Bogus"], [])
    assert got["unknown_state_filters"] == ["Bogus"]
    assert [s["transactional_id"] for s in got["transaction_states"]] == ["a"]
    assert coord.list_transactions([], [pid])["transaction_states"][0]["transactional_id"] == "a"
    sched.advance(5000)
    assert [s["transactional_id"] for s in coord.list_transactions([], [], 4000)["transaction_states"]] == ["a"]
    assert coord.list_transactions([], [], 6000)["transaction_states"] == []
    d = coord.describe("a")
    assert d["topics"] == [{"topic": "t", "partitions": [0, 1]}] and d["transaction_timeout_ms"] == 60000
    assert d["error_code"] == 0 and d["producer_id"] == pid
    assert coord.describe("zzz")["error_code"] == errors.TRANSACTIONAL_ID_NOT_FOUND


def test_kip360_retry_with_the_previous_epoch(env):
    coord = env[0]
    _, pid, epoch = coord.init_producer_id("app", 60000)
    assert coord.init_producer_id("app", 60000, (pid, epoch)) == (0, pid, epoch + 1)
    assert coord.init_producer_id("app", 60000, (pid, epoch)) == (0, pid, epoch + 1)    # answer lost: again
    assert coord.init_producer_id("app", 60000, (pid + 5, 0))[0] == errors.PRODUCER_FENCED
    assert coord.init_producer_id("app", 60000, (pid, 7))[0] == errors.PRODUCER_FENCED


def test_java_string_hash_partition():
    # Java: "hello".hashCode() == 99162322; "polygenelubricants".hashCode() == Integer.MIN_VALUE, which Kafka's
    # Utils.abs maps to 0.
    assert partition_for("hello", 50) == 99162322 % 50 == 22
    assert partition_for("polygenelubricants", 50) == 0


def test_expiry_writes_one_batch_per_partition_and_a_failed_write_keeps_the_ids(env):
    coord, store, _l, sched = env
    ids = [t for t in ("x%d" % i for i in range(40)) if partition_for(t, N) == 1][:3]
    for t in ids:
        coord.init_producer_id(t, 60000)
    sched.advance(3600001)
    store.fail = errors.NotEnoughReplicas("x")
    assert coord.expire_transactional_ids() == 0
    assert all(coord.describe(t)["transaction_state"] == "Empty" for t in ids)
    before = len(store.logs[1])
    appends = []
    real = store.append
    store.append = lambda index, records, now: (appends.append(len(records)), real(index, records, now))
    assert coord.expire_transactional_ids() == 3
    assert appends == [3] and len(store.logs[1]) == before + 3
    assert all(coord.describe(t)["error_code"] == errors.TRANSACTIONAL_ID_NOT_FOUND for t in ids)


def test_exhausted_epoch_rotates_to_a_new_producer_id(env):
    coord, store, _l, _s = env
    _, pid, _epoch = coord.init_producer_id("old", 60000)
    _c, entry, md = coord.state.get("old")
    md.producer_epoch = 32766                      # as if 32,766 bumps had happened
    code, pid2, epoch2 = coord.init_producer_id("old", 60000)
    assert (code, epoch2) == (0, 0) and pid2 != pid
    assert store.states("old")[-1] == ("Empty", 0)


def test_no_producer_id_block_is_coordinator_not_available(env):
    coord = env[0]

    class Down:
        def next_id(self):
            raise OSError("ZooKeeper unreachable")
    coord.producer_ids = Down()
    assert coord.init_producer_id("new-one", 60000) == (errors.COORDINATOR_NOT_AVAILABLE, -1, -1)
    assert coord.describe("new-one")["error_code"] == errors.TRANSACTIONAL_ID_NOT_FOUND


def test_markers_go_to_each_partitions_leader_in_one_request_per_broker():
    sched = FakeScheduler()
    store = MemStore()
    sent = []

    def send(broker_id, body):
        sent.append((broker_id, sorted((t["name"], p) for mk in body["markers"] for t in mk["topics"]
                                       for p in t["partition_indexes"])))
        return Leaders().send(broker_id, body)

    state = TransactionStateManager(store, sched.now_ms, lambda: N, expiration_ms=3600000)
    coord = TransactionCoordinator(CONFIG, sched, state, TxnMarkerChannel(lambda t, p: p % 3, send, sched), Pids())
    p = partition_for("wide", N)
    coord.begin_load(p, 1)
    coord.load_partition(p, 1)
    _, pid, epoch = coord.init_producer_id("wide", 60000)
    parts = {("t", i) for i in range(3000)}
    assert coord.add_partitions("wide", pid, epoch, parts) == 0
    assert coord.end_txn("wide", pid, epoch, True) == 0
    settle(sched)
    assert sorted(b for b, _ in sent) == [0, 1, 2]
    for b, tps in sent:
        assert tps == sorted(("t", i) for i in range(b, 3000, 3))
    assert coord.describe("wide")["transaction_state"] == "CompleteCommit"
    coord.shutdown()
