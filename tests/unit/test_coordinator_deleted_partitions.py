"""GroupCoordinator.on_partitions_deleted (Kafka's onPartitionsDeleted, called for StopReplica delete=true): the
offsets of deleted partitions are tombstoned in every group, the others stay (a topic re-created under the same
name -- Kafka Streams' repartition topics after kafka-streams-application-reset -- is then read from its start)."""
from kbroker import errors
from kbroker.coordinator import offsets_log
from tests.unit.test_coordinator import make


def test_deleted_partitions_lose_their_offsets_in_every_group():
    c, _, store = make()
    for group in ("g1", "g2"):
        assert c.handle_commit(group, -1, "", None, -1, {("t", 0): (5, -1, "", -1), ("t", 1): (6, -1, "", -1),
                                                         ("u", 0): (7, -1, "", -1)}) == {
            ("t", 0): 0, ("t", 1): 0, ("u", 0): 0}
    before = len(store.read(0))
    c.on_partitions_deleted([("t", 0), ("t", 1), ("gone", 0)])
    for group in ("g1", "g2"):
        err, found = c.fetch_offsets(group, None)
        assert err == 0 and {tp: o.offset for tp, o in found.items()} == {("u", 0): 7}
    tombstones = store.read(0)[before:]
    # one tombstone per removed offset (2 groups x 2 partitions), keyed as Kafka's OffsetKey, null value
    assert len(tombstones) == 4 and all(r[1] is None for r in tombstones), tombstones
    assert {r[0] for r in tombstones} == {offsets_log.offset_tombstone(g, "t", p)[0]
                                          for g in ("g1", "g2") for p in (0, 1)}


def test_a_failed_tombstone_keeps_the_offsets():
    c, _, store = make()
    c.handle_commit("g", -1, "", None, -1, {("t", 0): (5, -1, "", -1)})
    store.fail = errors.NotEnoughReplicas("isr")
    c.on_partitions_deleted([("t", 0)])
    assert c.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 5
