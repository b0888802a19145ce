"""The leader's ISR write (Broker.write_isr) when its conditional set fails with BadVersion.

A conditional set of the partition state znode can be applied by ZooKeeper while its answer is lost with the
connection; the client retries it on the next connection and gets BadVersion against its own write (kazoo's
command retry; Kafka's ReplicationUtils.checkLeaderAndIsrZkData is the same case). Found by scripts/fault_soak.py
after a whole-ensemble outage: the leader kept ISR [1, 0, 2] in memory and zk version 8 for good while the znode
said [1, 0] at version 9, so it never expanded the ISR again.

Rules: BadVersion + the znode holds exactly (leader, leader_epoch, isr, controller_epoch) we wrote -> our write, its
version returned and the controller notified; anything else (a controller's election, another ISR) -> None.
"""
from types import SimpleNamespace

import pytest

from kbroker.broker import Broker
from kbroker.coord import EmbeddedBackend
from kbroker.coord.metadata_store import TopicStore


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
    return SimpleNamespace(topic_store=store, replica_manager=SimpleNamespace(get_partition=lambda t, p: part))


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
