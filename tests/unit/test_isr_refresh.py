"""A LeaderAndIsr with our leader and leader epoch but a newer znode version (partition epoch) refreshes the ISR and
the version (Kafka >= 2.8 accepts an equal leader epoch with a newer partition epoch). Found by CI: after a
ZooKeeper outage, a leader's ISR write had landed while its answer was lost; with the stale version every later
ISR write "lost a race", and the new controller's LeaderAndIsr (same leader epoch) was ignored, so the ISR never
filled again."""
from types import SimpleNamespace

from kbroker.replica.partition import Partition


def _part(**kw):
    p = Partition.__new__(Partition)        # only the fields refresh_state reads and writes
    p.topic, p.index, p.broker_id = "t", 0, 1
    p.leader, p.leader_epoch, p.isr, p.zk_version = 1, 4, [1, 2, 3], 7
    p.woken = 0
    p.maybe_advance_hw = lambda: None
    p._wake = lambda: setattr(p, "woken", p.woken + 1)
    for k, v in kw.items():
        setattr(p, k, v)
    return p


def la(leader=1, epoch=4, isr=(1,), version=8):
    return SimpleNamespace(leader=leader, leader_epoch=epoch, isr=list(isr), zk_version=version)


def test_same_epoch_newer_version_takes_isr_and_version():
    p = _part()
    assert p.refresh_state(la(isr=(1,), version=8))
    assert (p.isr, p.zk_version, p.woken) == ([1], 8, 1)
    # afterwards the next conditional ISR write uses version 8, not the stale 7


def test_other_states_are_left_to_the_normal_rules():
    for state in (la(version=7), la(version=6), la(epoch=5), la(epoch=3), la(leader=2)):
        p = _part()
        assert not p.refresh_state(state)
        assert (p.isr, p.zk_version) == ([1, 2, 3], 7)
