"""The partition side of transactions over the wire, on a real broker process (raw protocol, our client):
transactional batches hold the last stable offset, WriteTxnMarkers (27) from a client ends them, read_committed
Fetch stops at the LSO and gets the aborted transactions, ListOffsets answers the LSO, and after kill -9 the
restarted broker rebuilds open transactions, the LSO and the .txnindex from the log."""
from __future__ import annotations

import os
import time

import pytest

from kbroker import errors
from kbroker.client.connection import BrokerConnection
from kbroker.record import Record, build_batch, iter_records
from tests.integration.harness import BrokerProcess, wait_until

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def broker(tmp_path):
    b = BrokerProcess(tmp_path, overrides={"num.partitions": 1})
    b.start()
    yield b
    b.close()


def connect(b):
    return BrokerConnection(b.host, b.port, client_id="txn-partition")


def create(conn, topic):
    r = conn.request(19, {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1}],
                          "timeout_ms": 10000}, version=4)
    assert r["topics"][0]["error_code"] == 0
    wait_until(lambda: conn.request(3, {"topics": [{"name": topic}]}, version=4)["topics"][0]["partitions"][0]
               ["leader_id"] >= 0, 10)


def producer_id(conn):
    r = conn.request(22, {"transactional_id": None, "transaction_timeout_ms": 60000}, version=1)
    assert r["error_code"] == 0
    return r["producer_id"], r["producer_epoch"]


def produce(conn, topic, values, pid=-1, epoch=-1, seq=-1, txn=False):
    now = int(time.time() * 1000)
    batch = build_batch([Record(i, now, None, v, ()) for i, v in enumerate(values)], producer_id=pid,
                        producer_epoch=epoch, base_sequence=seq, is_transactional=txn)
    r = conn.request(0, {"transactional_id": "tx" if txn else None, "acks": -1, "timeout_ms": 10000,
                         "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]},
                     version=7)
    p = r["responses"][0]["partition_responses"][0]
    return p["error_code"], p["base_offset"]


def fetch(conn, topic, offset, isolation, version=11):
    r = conn.request(1, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                         "isolation_level": isolation, "session_id": 0, "session_epoch": -1,
                         "topics": [{"topic": topic, "partitions": [
                             {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                              "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                         "forgotten_topics_data": [], "rack_id": ""}, version=version)
    p = r["responses"][0]["partitions"][0]
    values = [(o, v) for o, _ts, _k, v, _h in iter_records(bytes(p["records"] or b""))]
    aborted = None if p["aborted_transactions"] is None else [(a["producer_id"], a["first_offset"])
                                                               for a in p["aborted_transactions"]]
    return p["error_code"], p["high_watermark"], p["last_stable_offset"], values, aborted


def markers(conn, topic, pid, epoch, commit, coordinator_epoch=0, version=1):
    r = conn.request(27, {"markers": [{"producer_id": pid, "producer_epoch": epoch, "transaction_result": commit,
                                       "topics": [{"name": topic, "partition_indexes": [0]}],
                                       "coordinator_epoch": coordinator_epoch}]}, version=version)
    return r["markers"][0]["topics"][0]["partitions"][0]["error_code"]


def latest(conn, topic, isolation):
    r = conn.request(2, {"replica_id": -1, "isolation_level": isolation, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1}]}]},
        version=5)
    return r["topics"][0]["partitions"][0]["offset"]


def test_markers_lso_read_committed_and_recovery_after_kill9(broker):
    conn = connect(broker)
    create(conn, "tp")
    a, ae = producer_id(conn)
    b, be = producer_id(conn)
    assert produce(conn, "tp", [b"plain0", b"plain1"]) == (0, 0)                      # 0-1
    assert produce(conn, "tp", [b"a0", b"a1"], a, ae, 0, txn=True) == (0, 2)          # 2-3 txn A
    assert produce(conn, "tp", [b"b0"], b, be, 0, txn=True) == (0, 4)                 # 4   txn B
    assert produce(conn, "tp", [b"plain2"]) == (0, 5)                                 # 5
    # A's open transaction holds the LSO at 2.
    assert produce(conn, "tp", [b"x"], a, ae, 2, txn=False)[0] == errors.INVALID_TXN_STATE
    err, hw, lso, values, aborted = fetch(conn, "tp", 0, 1)
    assert (err, hw, lso, [o for o, _ in values], aborted) == (0, 6, 2, [0, 1], [])
    err, hw, lso, values, aborted = fetch(conn, "tp", 0, 0)
    assert (lso, [o for o, _ in values], aborted) == (2, [0, 1, 2, 3, 4, 5], None)
    assert (latest(conn, "tp", 0), latest(conn, "tp", 1)) == (6, 2)
    # A aborts (marker at 6), coordinator epoch 3; an older coordinator epoch is fenced, an older producer epoch too.
    assert markers(conn, "tp", a, ae, False, 3) == 0
    assert markers(conn, "tp", a, ae, True, 2) == errors.TRANSACTION_COORDINATOR_FENCED
    assert markers(conn, "tp", a, ae - 1 if ae > 0 else -1, True, 3, version=0) == errors.INVALID_PRODUCER_EPOCH
    assert markers(conn, "nope", a, ae, True, 3) == errors.UNKNOWN_TOPIC_OR_PARTITION
    err, hw, lso, values, aborted = fetch(conn, "tp", 0, 1)
    assert (hw, lso, [o for o, _ in values], aborted) == (7, 4, [0, 1, 2, 3], [(a, 2)])
    conn.close()
    # kill -9: the restarted broker rebuilds B's open transaction, A's abort and the .txnindex from the log.
    broker.kill9()
    broker.start()
    conn = connect(broker)
    wait_until(lambda: fetch(conn, "tp", 0, 0)[0] == 0, 20)
    err, hw, lso, values, aborted = fetch(conn, "tp", 0, 1)
    assert (err, hw, lso, [o for o, _ in values], aborted) == (0, 7, 4, [0, 1, 2, 3], [(a, 2)])
    assert latest(conn, "tp", 1) == 4
    assert markers(conn, "tp", a, ae, True, 2) == errors.TRANSACTION_COORDINATOR_FENCED
    assert markers(conn, "tp", b, be, True, 3) == 0                                  # 7: B commits
    err, hw, lso, values, aborted = fetch(conn, "tp", 0, 1)
    assert (hw, lso, aborted) == (8, 8, [(a, 2)])
    assert [o for o, _ in values] == [0, 1, 2, 3, 4, 5]                              # never a control record
    assert fetch(conn, "tp", 7, 1)[3:] == ([], [])
    d = os.path.join(broker.log_dir, "tp-0")
    assert os.path.getsize(os.path.join(d, "00000000000000000000.txnindex")) == 34
    assert produce(conn, "tp", [b"b1"], b, be, 1, txn=True) == (0, 8)                # 8: B opens another
    conn.close()
    # Clean shutdown: a producer-state snapshot at the log end (9); the restart loads it (nothing replayed).
    assert broker.stop() == 0
    assert "00000000000000000009.snapshot" in os.listdir(d)
    broker.start()
    conn = connect(broker)
    wait_until(lambda: fetch(conn, "tp", 0, 0)[0] == 0, 20)
    err, hw, lso, values, aborted = fetch(conn, "tp", 0, 1)
    assert (hw, lso, aborted) == (9, 8, [(a, 2)])
    assert markers(conn, "tp", a, ae, True, 2) == errors.TRANSACTION_COORDINATOR_FENCED
    assert produce(conn, "tp", [b"b1"], b, be, 1, txn=True) == (0, 8)                # a retry: its first offset
    assert markers(conn, "tp", b, be, False, 3) == 0                                 # 9: B aborts
    err, hw, lso, values, aborted = fetch(conn, "tp", 0, 1)
    assert (lso, [o for o, _ in values], aborted) == (10, [0, 1, 2, 3, 4, 5, 8], [(a, 2), (b, 8)])
    conn.close()


# ------------------------------------------------------------------------ replicated: follower made leader
def test_follower_made_leader_knows_open_transactions_and_aborts(tmp_path):
    """Leader 0 and follower 1 (ZooKeeper cluster): the follower applies the replicated markers to its producer
    state and .txnindex; after the leader is killed -9 it leads with the same LSO and aborted transactions, fences
    an older coordinator epoch, and completes the transaction that is still open."""
    from tests.integration.test_cluster_common import require_zookeeper
    from tests.integration.test_replication_common import FAILOVER_S, RCluster

    require_zookeeper()
    c = RCluster(tmp_path, n=2, overrides={"min.insync.replicas": 1})
    try:
        c.start()
        c.create_topic("rt", assignment=[[0, 1]])
        c.wait_full_isr("rt", 1)
        leader, follower = c.brokers
        conn = connect(leader)
        a, ae = producer_id(conn)
        b, be = producer_id(conn)
        assert produce(conn, "rt", [b"p0"]) == (0, 0)                                  # 0
        assert produce(conn, "rt", [b"a0", b"a1"], a, ae, 0, txn=True) == (0, 1)       # 1-2 A
        assert produce(conn, "rt", [b"b0"], b, be, 0, txn=True) == (0, 3)              # 3   B
        assert markers(conn, "rt", a, ae, False, 5) == 0                               # 4   ABORT A (acks=all)
        assert produce(conn, "rt", [b"p1"]) == (0, 5)                                  # 5
        assert fetch(conn, "rt", 0, 1)[1:3] == (6, 3)
        conn.close()
        txnindex = c.partition_dir(follower, "rt", 0) / "00000000000000000000.txnindex"
        wait_until(lambda: txnindex.exists() and txnindex.stat().st_size == 34, 20, message="follower .txnindex")
        leader.kill9()
        fconn = connect(follower)

        def led_by_follower():
            got = fetch(fconn, "rt", 0, 1)
            return got if got[0] == 0 else None
        err, hw, lso, values, aborted = wait_until(led_by_follower, FAILOVER_S, 0.2, "broker 1 leading rt-0",
                                                   ignore=(OSError,))
        assert (hw, lso, [o for o, _ in values], aborted) == (6, 3, [0, 1, 2], [(a, 1)])
        assert produce(fconn, "rt", [b"x"], b, be, 1, txn=False)[0] == errors.INVALID_TXN_STATE
        assert markers(fconn, "rt", a, ae, True, 4) == errors.TRANSACTION_COORDINATOR_FENCED   # A's was 5
        assert markers(fconn, "rt", b, be, True, 5) == 0                               # 6 COMMIT B
        err, hw, lso, values, aborted = fetch(fconn, "rt", 0, 1)
        assert (hw, lso, [o for o, _ in values], aborted) == (7, 7, [0, 1, 2, 3, 5], [(a, 1)])
        fconn.close()
    finally:
        c.close()
