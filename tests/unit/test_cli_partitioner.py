"""murmur2 / default partitioner: Kafka's Java vectors, cross-checked with kafka-python's implementation."""
import random

import pytest

from kbroker.client.partitioner import murmur2, partition_for_key, to_positive

# Computed with the algorithm (seed 0x9747b28c, m 0x5bd1e995, r 24) and equal to the values Kafka's Java
# Utils.murmur2 returns (signed int32); "21", "foobar", "a-little-bit-long-string" and the two 40+ byte strings
# exercise the 4-byte loop and every tail length 0-3.
VECTORS = [
    (b"", 275646681),
    (b"a", -1563381124),
    (b"abc", 479470107),
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (bytes([ord("a"), ord("b"), ord("c")]), 479470107),
]


@pytest.mark.parametrize("data,expected", VECTORS)
def test_java_vectors(data, expected):
    assert murmur2(data) == expected


def test_tail_lengths_and_types():
    assert murmur2(bytearray(b"foobar")) == murmur2(memoryview(b"foobar")) == -790332482
    assert len({murmur2(b"abcd"[:n]) for n in range(5)}) == 5


def test_partition_for_key():
    assert to_positive(-1563381124) == 584102524
    assert partition_for_key(b"a", 3) == 1
    assert partition_for_key(b"", 10) == 275646681 % 10 == 1
    assert [partition_for_key(b"foobar", n) for n in (1, 2, 7)] == [0, (-790332482 & 0x7FFFFFFF) % 2,
                                                                    (-790332482 & 0x7FFFFFFF) % 7]


def test_matches_kafka_python():
    kp = pytest.importorskip("kafka.partitioner.default")
    rnd = random.Random(20240607)
    for n in range(300):
        data = bytes(rnd.getrandbits(8) for _ in range(n % 41))
        assert murmur2(data) & 0xFFFFFFFF == kp.murmur2(data)
