"""kbroker.controller.assignment: Kafka's replica assignment, exact layouts for fixed start index / shift."""
import random
from collections import Counter

import pytest

from kbroker import errors
from kbroker.controller.assignment import (
    DISABLED, SAFE, assign_replicas_to_brokers, rack_alternated_brokers, start_index_for_new_partitions,
)


def test_five_brokers_ten_partitions_rf3_like_kafkas_doc_comment():
    # AdminUtils' doc comment table: start index 0 (and hence shift 0), brokers 0..4.
    got = assign_replicas_to_brokers(range(5), 10, 3, start_index=0)
    assert got == {0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
                   5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}


def test_start_index_and_shift_are_independent_when_both_given():
    got = assign_replicas_to_brokers([1, 2, 3], 4, 2, start_index=1, replica_shift=0)
    # first = brokers[(p + 1) % 3]; follower = first + 1 + shift % 2; the shift grows at p = 3.
    assert got == {0: [2, 3], 1: [3, 1], 2: [1, 2], 3: [2, 1]}


def test_broker_ids_are_sorted_first():
    assert assign_replicas_to_brokers([12, 10, 11], 3, 1, start_index=0) == {0: [10], 1: [11], 2: [12]}


def test_start_partition_id_continues_numbering_and_wrap_shift():
    got = assign_replicas_to_brokers(range(3), 2, 2, start_index=0, start_partition_id=3)
    # p=3 wraps (3 % 3 == 0): shift 0 -> 1, so the follower is two places on.
    assert got == {3: [0, 2], 4: [1, 0]}


def test_rack_alternated_list():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_brokers(racks) == [0, 3, 1, 5, 4, 2]
    del racks[5]
    assert rack_alternated_brokers(racks) == [0, 3, 1, 4, 2]


def test_rack_aware_exact_layout():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    got = assign_replicas_to_brokers(racks, 7, 3, start_index=0)
    assert got == {0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0], 5: [2, 0, 3], 6: [0, 4, 2]}


@pytest.mark.parametrize("seed", range(5))
def test_rack_aware_every_partition_spans_all_racks_and_leaders_are_even(seed):
    racks = {0: "r1", 1: "r2", 2: "r2", 3: "r3", 4: "r3", 5: "r1"}
    got = assign_replicas_to_brokers(racks, 6, 3, rng=random.Random(seed))
    for replicas in got.values():
        assert sorted({racks[b] for b in replicas}) == ["r1", "r2", "r3"]
    assert Counter(r[0] for r in got.values()) == Counter(range(6))
    assert Counter(b for r in got.values() for b in r) == {b: 3 for b in range(6)}


def test_mixed_racks():
    brokers = [(0, "r1"), (1, None), (2, "r2")]
    with pytest.raises(errors.InvalidReplicaAssignment):
        assign_replicas_to_brokers(brokers, 3, 2, start_index=0)
    unaware = {0: [0, 1], 1: [1, 2], 2: [2, 0]}
    assert assign_replicas_to_brokers(brokers, 3, 2, start_index=0, rack_aware_mode=SAFE) == unaware
    assert assign_replicas_to_brokers(brokers, 3, 2, start_index=0, rack_aware_mode=DISABLED) == unaware


def test_errors():
    with pytest.raises(errors.InvalidReplicationFactor) as e:
        assign_replicas_to_brokers([1], 1, 3)
    assert str(e.value) == "replication factor: 3 larger than available brokers: 1"
    assert e.value.code == 38
    with pytest.raises(errors.InvalidReplicationFactor):
        assign_replicas_to_brokers([1], 1, 0)
    with pytest.raises(errors.InvalidPartitions) as e:
        assign_replicas_to_brokers([1], 0, 1)
    assert e.value.code == 37


def test_random_start_is_seeded_by_rng():
    a = assign_replicas_to_brokers(range(4), 8, 2, rng=random.Random(7))
    b = assign_replicas_to_brokers(range(4), 8, 2, rng=random.Random(7))
    assert a == b
    assert Counter(r[0] for r in a.values()) == {b: 2 for b in range(4)}


def test_start_index_for_new_partitions():
    assert start_index_for_new_partitions({0: [2, 0], 1: [0, 1]}, [0, 1, 2]) == 2
    assert start_index_for_new_partitions({0: [7]}, [1, 5, 9]) == 2   # first id >= 7
    assert start_index_for_new_partitions({0: [10]}, [1, 5, 9]) == 0
