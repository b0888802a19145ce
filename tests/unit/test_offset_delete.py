"""OffsetDelete (KIP-496) in the group coordinator: ``GroupCoordinator.delete_offsets`` on a fake clock and an
in-memory ``__consumer_offsets`` (tests/unit/test_coordinator.py's helpers)."""
from kbroker import errors
from kbroker.coordinator import offsets_log
from kbroker.coordinator.coordinator import _subscription_topics  # noqa: the parser under test

from .test_coordinator import join, make, sync


def subscription(*topics):
    """ConsumerProtocol Subscription v0: version, topics, null user data."""
    out = b"\x00\x00" + len(topics).to_bytes(4, "big")
    for t in topics:
        out += len(t).to_bytes(2, "big") + t.encode()
    return out + b"\xff\xff\xff\xff"


def commit(c, group, *tps):
    assert c.handle_commit(group, -1, "", None, -1, {tp: (7, -1, "", -1) for tp in tps}) == {tp: 0 for tp in tps}


def test_subscription_parser():
    assert _subscription_topics(subscription("a", "bb")) == ["a", "bb"]
    for bad in (b"\x00", b"\x00\x00\x00\x00\x00\x05\x00\x01a", b"\x00\x00\x00\x00\x00\x01\x00\x09a"):
        try:
            _subscription_topics(bad)
        except ValueError:
            continue
        raise AssertionError("accepted %r" % bad)


def test_empty_group_deletes_and_tombstones():
    c, _, store = make()
    commit(c, "g", ("t", 0), ("t", 1), ("u", 0))
    n = len(store.parts[0])
    assert c.delete_offsets("g", [("t", 0), ("u", 0), ("never", 3)]) == (0, {("t", 0): 0, ("u", 0): 0,
                                                                            ("never", 3): 0})
    assert store.parts[0][n:] == [offsets_log.offset_tombstone("g", "t", 0), offsets_log.offset_tombstone("g", "u", 0)]
    assert list(c.fetch_offsets("g", None)[1]) == [("t", 1)]
    # a failed write forgets nothing
    store.fail = errors.NotEnoughReplicas("isr")
    assert c.delete_offsets("g", [("t", 1)]) == (errors.COORDINATOR_NOT_AVAILABLE, {})
    assert list(c.fetch_offsets("g", None)[1]) == [("t", 1)]


def test_group_errors():
    c, _, _ = make()
    assert c.delete_offsets("nothing", [("t", 0)]) == (errors.GROUP_ID_NOT_FOUND, {})
    assert c.delete_offsets("", [("t", 0)]) == (errors.INVALID_GROUP_ID, {})
    # members of a non-consumer protocol: their subscriptions cannot be read
    m = join(c, group="conn", ptype="connect").value["member_id"]
    sync(c, m, 1, {}, group="conn")
    assert c.delete_offsets("conn", [("t", 0)]) == (errors.NON_EMPTY_GROUP, {})


def test_active_consumer_group_keeps_subscribed_topics():
    c, _, store = make()
    m = join(c, protocols=[("range", subscription("t"))]).value["member_id"]
    assert c.delete_offsets("g", [("t", 0)]) == (0, {("t", 0): errors.GROUP_SUBSCRIBED_TO_TOPIC})
    sync(c, m, 1, {})
    commit_ok = c.handle_commit("g", 1, m, None, -1, {("t", 0): (3, -1, "", -1), ("x", 0): (4, -1, "", -1)})
    assert commit_ok == {("t", 0): 0, ("x", 0): 0}
    assert c.delete_offsets("g", [("t", 0), ("x", 0)]) == (0, {("t", 0): errors.GROUP_SUBSCRIBED_TO_TOPIC,
                                                               ("x", 0): 0})
    assert list(c.fetch_offsets("g", None)[1]) == [("t", 0)]
    assert c.leave_group("g", [(m, None)]) == (0, [0])
    assert c.delete_offsets("g", [("t", 0)]) == (0, {("t", 0): 0})
    assert c.fetch_offsets("g", None)[1] == {}
