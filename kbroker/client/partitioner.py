"""Kafka's default key partitioner: ``(murmur2(key) & 0x7fffffff) % num_partitions``.

``murmur2`` is the 32-bit MurmurHash2 variant of Kafka's Java ``Utils.murmur2`` (seed 0x9747b28c, m 0x5bd1e995,
r 24, little-endian 4-byte blocks, tail bytes folded in from the highest one down) and returns what Java returns:
a *signed* int32 (murmur2(b"") == 275646681, murmur2(b"a") == -1563381124). kafka-python's version returns the same
hash as an unsigned int; ``& 0x7fffffff`` (Java's ``toPositive``) makes both agree, so a key lands on the same
partition whichever Kafka client wrote it. Unkeyed records are spread round robin by the caller.
"""

_SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24
_MASK = 0xFFFFFFFF


def murmur2(data):
    data = bytes(data)
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n4 = length & ~3
    for i in range(0, n4, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> _R
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    tail = length & 3
    if tail == 3:
        h ^= data[n4 + 2] << 16
    if tail >= 2:
        h ^= data[n4 + 1] << 8
    if tail >= 1:
        h ^= data[n4]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n):
    return n & 0x7FFFFFFF


def partition_for_key(key, num_partitions):
    return to_positive(murmur2(key)) % num_partitions
