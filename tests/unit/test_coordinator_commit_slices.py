"""A large OffsetCommit hands the event loop back while it encodes its records (issue 8), and then checks its group
again before writing: what happened meanwhile decides, as if the commit had arrived after it."""
import pytest

from kbroker import errors
from kbroker.coordinator import coordinator as coordinator_module
from tests.unit.test_coordinator import join, make, stable_group, sync


class YieldingSlice:
    """Stands in for TimeSlice: every tick is a yield, and the first one runs ``during`` (another request)."""
    during = None

    def __init__(self):
        self.yields = 0

    def tick(self):
        self.yields += 1
        if self.yields == 1 and YieldingSlice.during is not None:
            YieldingSlice.during()


@pytest.fixture
def yielding(monkeypatch):
    monkeypatch.setattr(coordinator_module, "TimeSlice", YieldingSlice)
    YieldingSlice.during = None
    yield YieldingSlice


OFFSETS = {("t", p): (10 + p, -1, "", -1) for p in range(3)}


def test_a_commit_that_yielded_is_written_when_nothing_changed(yielding):
    c, _, store = make()
    m1 = stable_group(c)[0]
    assert c.handle_commit("g", 1, m1, None, -1, OFFSETS) == {tp: 0 for tp in OFFSETS}
    assert {tp: o.offset for tp, o in c.fetch_offsets("g", list(OFFSETS))[1].items()} == {
        ("t", 0): 10, ("t", 1): 11, ("t", 2): 12}
    assert len(store.parts[0]) == 3 + 1          # the group's metadata record, then one record per partition


def test_a_rebalance_completed_while_a_commit_yielded_makes_it_illegal_generation(yielding):
    c, _, store = make()
    m1 = stable_group(c)[0]
    before = len(store.parts[0])

    def rebalance():                             # a second member joins and the group moves to generation 2
        joined = join(c, client="c2")
        join(c, member_id=m1)
        assert joined.done and c.groups["g"].generation == 2
        sync(c, m1, 2, {})
    yielding.during = rebalance
    assert c.handle_commit("g", 1, m1, None, -1, OFFSETS) == {tp: errors.ILLEGAL_GENERATION for tp in OFFSETS}
    assert c.fetch_offsets("g", list(OFFSETS))[1] == {tp: None for tp in OFFSETS}
    assert not any(k is not None and b"\x00\x01t" in k for k, _v in store.parts[0][before:])


def test_a_group_deleted_while_a_simple_consumer_commit_yielded_is_not_resurrected(yielding):
    c, _, _ = make()
    assert c.handle_commit("g", -1, "", None, -1, {("t", 0): (1, -1, "", -1)}) == {("t", 0): 0}

    def delete_group():
        c.groups["g"].offsets.clear()
        assert c.delete_group("g") == 0
    yielding.during = delete_group
    # The group was re-created by the commit's second look (a simple consumer's commit may create it) -- but as a
    # new group: the commit's first one is gone, so nothing is written into it.
    assert c.handle_commit("g", -1, "", None, -1, OFFSETS) == {tp: errors.COORDINATOR_NOT_AVAILABLE
                                                                for tp in OFFSETS}
    assert c.fetch_offsets("g", list(OFFSETS))[1] == {tp: None for tp in OFFSETS}


def test_v0_commits_check_again_too(yielding):
    c, _, _ = make()
    c.commit_unchecked("g", {("t", 0): (1, -1, None, -1)})

    def unload():
        c.unload_partition(0)
    yielding.during = unload
    assert c.commit_unchecked("g", OFFSETS) == {tp: errors.NOT_COORDINATOR for tp in OFFSETS}
