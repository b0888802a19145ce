"""kbroker/gcpolicy.py: settled state is frozen out of the collector's reach; cycles are still reclaimed."""
import gc
import weakref

import pytest

from kbroker.gcpolicy import YOUNG_EVERY, GcPolicy


class Node:
    """A two-object reference cycle (only the cycle finder can free it) with a weakref handle."""
    __slots__ = ("peer", "__weakref__")

    def __init__(self):
        self.peer = None


def cycle():
    a, b = Node(), Node()
    a.peer, b.peer = b, a
    return a


@pytest.fixture(autouse=True)
def quiet_heap():
    """Start each test with the test process's own heap frozen (so the counts below are this test's objects)
    and give the process its collector back afterwards."""
    gc.collect()
    gc.freeze()
    thresholds = gc.get_threshold()
    yield
    gc.set_threshold(*thresholds)
    gc.unfreeze()
    gc.collect()


def promote(objs):
    """Move ``objs`` (alive) into generation 2, as time and CPython's collections would."""
    gc.collect()
    return objs


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_below_the_threshold_nothing_is_frozen():
    frozen = gc.get_freeze_count()
    keep = promote([cycle() for _ in range(1_000)])
    policy = GcPolicy(freeze_at=5_000, collect_max=20_000)
    policy.check()
    assert policy.freezes == 0
    assert gc.get_freeze_count() == frozen
    assert len(gc.get_objects(2)) >= 2_000
    del keep


def test_settled_state_is_frozen_and_its_dead_cycles_collected_first():
    frozen = gc.get_freeze_count()
    keep = promote([cycle() for _ in range(4_000)])          # 8,000 nodes + the list
    dead = promote([cycle() for _ in range(1_000)])
    refs = [weakref.ref(c) for c in dead]
    del dead                                                 # 1,000 cycles now garbage, in generation 2
    policy = GcPolicy(freeze_at=5_000, collect_max=20_000)
    policy.check()
    assert policy.freezes == 1
    assert all(r() is None for r in refs)                    # collected before the freeze, not frozen garbage
    assert gc.get_freeze_count() - frozen >= 8_000
    assert len(gc.get_objects(2)) < 100                      # what a full collection walks from now on
    assert all(c.peer.peer is c for c in keep)               # live state untouched
    policy.check()
    assert policy.freezes == 1                               # nothing new to freeze


def test_a_burst_is_frozen_without_a_full_collection_and_compaction_reclaims_its_dead_cycles():
    clock = Clock()
    policy = GcPolicy(freeze_at=5_000, collect_max=8_000, compact_s=3600, clock=clock)
    burst = promote([cycle() for _ in range(6_000)])         # 12,000 > collect_max
    young_garbage = cycle()
    young_ref = weakref.ref(young_garbage)
    del young_garbage
    policy.check()
    assert policy.freezes == 1 and policy.compactions == 0
    assert young_ref() is None                               # young generations are still collected
    assert len(gc.get_objects(2)) < 100
    refs = [weakref.ref(c) for c in burst[:500]]
    del burst[:500]                                          # cycles that die while frozen
    gc.collect()
    assert all(r() is not None for r in refs)                # out of the collector's reach...
    clock.now = 3599.0
    policy.check()
    assert policy.compactions == 0
    clock.now = 3600.0
    policy.check()
    assert policy.compactions == 1
    assert all(r() is None for r in refs)                    # ...until the hourly compaction
    assert len(burst) == 5_500 and all(c.peer.peer is c for c in burst)
    assert len(gc.get_objects(2)) < 100                      # and frozen again after it


def test_settle_freezes_everything_after_one_collection():
    keep = [cycle() for _ in range(2_000)]
    dead = cycle()
    ref = weakref.ref(dead)
    del dead
    policy = GcPolicy()
    policy.settle()
    assert ref() is None
    assert len(gc.get_objects(2)) < 100 and len(gc.get_objects(0)) < 100
    assert policy.freezes == 1
    assert gc.get_threshold()[0] == YOUNG_EVERY == 10_000       # young collections every 10,000 allocations
    del keep


def test_after_settle_young_collections_come_every_ten_thousand_allocations():
    GcPolicy().settle()
    seen = []
    gc.callbacks.append(lambda phase, info: seen.append(info["generation"]) if phase == "start" else None)
    try:
        keep = [[] for _ in range(9_000)]         # tracked containers: below the threshold, no collection
        assert seen == []
        keep += [[] for _ in range(2_000)]        # past it: one young collection
        assert seen == [0]
    finally:
        gc.callbacks.pop()
    del keep
