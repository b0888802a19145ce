"""The leader's ISR write (Broker.write_isr -> replica/isr_writes.py) when its conditional set fails with BadVersion,
and the batching of concurrent writes.

A conditional set of the partition state znode can be applied by ZooKeeper while its answer is lost with the
connection; the client retries it on the next connection and gets BadVersion against its own write (kazoo's
command retry; Kafka's ReplicationUtils.checkLeaderAndIsrZkData is the same case). Found by scripts/fault_soak.py
after a whole-ensemble outage: the leader kept ISR [1, 0, 2] in memory and zk version 8 for good while the znode
said [1, 0] at version 9, so it never expanded the ISR again.

Rules: BadVersion + the znode holds exactly (leader, leader_epoch, isr, controller_epoch) we wrote -> our write, its
version returned and the controller notified; anything else (a controller's election, another ISR) -> None.
"""
import time
from types import SimpleNamespace

import gevent
import pytest

from kbroker.broker import Broker
from kbroker.coord import EmbeddedBackend
from kbroker.coord.metadata_store import TopicStore
from kbroker.coord.znodes import IsrChangeNotificationSequenceZNode
from kbroker.replica.isr_writes import IsrWriteBatcher


@pytest.fixture
def store(tmp_path):
    backend = EmbeddedBackend(str(tmp_path)).start()
    s = TopicStore(backend)
    s.create_topic("t", {0: [1, 0, 2]})
    s.set_partition_state("t", 0, 1, [1, 0, 2], 3, 5)   # version 0
    yield s
    backend.stop()


def fake_broker(store):
    part = SimpleNamespace(controller_epoch=5)
    return SimpleNamespace(topic_store=store, replica_manager=SimpleNamespace(get_partition=lambda t, p: part),
                           _isr_writes=IsrWriteBatcher(store))


def notifications(store):
    return store.backend.get_children("/isr_change_notification") if store.backend.exists(
        "/isr_change_notification") else []


def test_a_retry_that_meets_its_own_applied_write_succeeds(store):
    applied = store.set_partition_state("t", 0, 1, [1, 0], 3, 5, expected_version=0)   # answer "lost"
    assert applied == 1
    version = Broker.write_isr(fake_broker(store), "t", 0, 1, 3, [1, 0], 0)              # the retry
    assert version == 1
    assert store.partition_state("t", 0) == (1, 3, [1, 0], 5, 1)
    assert len(notifications(store)) == 1


def test_a_different_state_is_a_lost_race(store):
    store.set_partition_state("t", 0, 0, [0, 2], 4, 6)          # a controller elected broker 0 meanwhile
    assert Broker.write_isr(fake_broker(store), "t", 0, 1, 3, [1, 0], 0) is None
    assert store.partition_state("t", 0) == (0, 4, [0, 2], 6, 1)
    assert notifications(store) == []


def test_same_isr_other_order_or_epoch_is_not_ours(store):
    store.set_partition_state("t", 0, 1, [0, 1], 3, 5, expected_version=0)
    assert Broker.write_isr(fake_broker(store), "t", 0, 1, 3, [1, 0], 0) is None
    store.set_partition_state("t", 0, 1, [1, 0], 4, 5, expected_version=1)   # leader epoch 4, not ours (3)
    assert Broker.write_isr(fake_broker(store), "t", 0, 1, 3, [1, 0], 0) is None


def test_plain_success(store):
    assert Broker.write_isr(fake_broker(store), "t", 0, 1, 3, [1, 0], 0) == 1
    assert len(notifications(store)) == 1


def test_concurrent_writes_go_out_as_one_batch_and_one_notification(tmp_path):
    """Leaders shrinking many ISRs at once (a broker died): the writes requested while one is in flight are
    written together, one set_many and one notification node naming every changed partition; a lost race among
    them (partition 3: a controller moved its znode on) fails only itself."""
    backend = EmbeddedBackend(str(tmp_path)).start()
    try:
        store = TopicStore(backend)
        n = 300
        store.create_topic("t", {p: [1, 0] for p in range(n)})
        for p in range(n):
            store.set_partition_state("t", p, 1, [1, 0], 3, 5)                  # version 0
        store.set_partition_state("t", 3, 0, [0], 4, 6)                         # version 1: not the leader's
        calls = []
        real = store.set_partition_states_if
        store.set_partition_states_if = lambda writes: (calls.append(len(writes)), real(writes))[1]
        batcher = IsrWriteBatcher(store)
        jobs = [gevent.spawn(batcher.write, "t", p, 1, 3, 5, [1], 0) for p in range(n)]
        gevent.joinall(jobs, raise_error=True)
        assert [j.value for j in jobs] == [None if p == 3 else 1 for p in range(n)]
        # All were queued before the writer ran: one batch.
        assert calls == [n] and batcher.batches == 1 and batcher.largest == n
        assert store.partition_state("t", 3) == (0, 4, [0], 6, 1)
        assert all(store.partition_state("t", p) == (1, 3, [1], 5, 1) for p in range(n) if p != 3)
        names = sorted(notifications(store))
        assert len(names) == 1
        listed = IsrChangeNotificationSequenceZNode.decode(backend.get("/isr_change_notification/" + names[0])[0])
        assert listed == [("t", p) for p in range(n) if p != 3]
        # A later write is a batch of its own (here at a stale version: a lost race, re-read, None).
        assert batcher.write("t", 0, 1, 3, 5, [1, 0], 0) is None
        assert calls == [n, 1] and batcher.batches == 2
    finally:
        backend.stop()


def test_a_failed_batch_re_reads_each_state(store):
    """The batch write itself failed (connection gone): each request re-reads; one whose write applied anyway is
    answered with its version, the others None."""
    batcher = IsrWriteBatcher(store)

    def lost(writes):
        store.set_partition_state("t", 0, 1, [1, 0], 3, 5, expected_version=0)     # applied, answer lost
        raise ConnectionError("connection loss")
    store.set_partition_states_if = lost
    assert batcher.write("t", 0, 1, 3, 5, [1, 0], 0) == 1
    assert len(notifications(store)) == 1


def test_stop_answers_queued_and_in_flight_writes_with_none(store):
    batcher = IsrWriteBatcher(store)
    started = gevent.event.Event()
    release = gevent.event.Event()

    def slow(writes):
        started.set()
        release.wait()
        return [0] * len(writes)
    store.set_partition_states_if = slow
    first = gevent.spawn(batcher.write, "t", 0, 1, 3, 5, [1, 0], 0)
    started.wait(5)
    second = gevent.spawn(batcher.write, "t", 0, 1, 3, 5, [1], 0)
    gevent.sleep(0)
    batcher.stop()
    assert second.get(timeout=5) is None
    assert first.get(timeout=5) is None             # the batch in flight is answered too: nobody waits forever


def test_a_failed_notification_is_sent_again(store, monkeypatch):
    """The writes stand when their notification fails (no connection): the partitions are announced again with
    the next batch or NOTIFY_RETRY_S later, so the controller learns of every ISR change."""
    from kbroker.replica import isr_writes
    monkeypatch.setattr(isr_writes, "NOTIFY_RETRY_S", 0.05)
    batcher = IsrWriteBatcher(store)
    real = store.notify_isr_changes
    calls = []

    def flaky(tps):
        calls.append(list(tps))
        if len(calls) == 1:
            raise ConnectionError("connection loss")
        real(tps)
    store.notify_isr_changes = flaky
    assert batcher.write("t", 0, 1, 3, 5, [1, 0], 0) == 1
    assert notifications(store) == []
    deadline = time.monotonic() + 5
    while not notifications(store) and time.monotonic() < deadline:
        gevent.sleep(0.01)
    assert calls == [[("t", 0)], [("t", 0)]] and len(notifications(store)) == 1
    batcher.stop()
