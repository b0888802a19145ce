"""Kafka's key partitioner for the records kbroker.streams writes (sinks, repartition topics).

``murmur2`` is Kafka's Java ``Utils.murmur2`` (32-bit MurmurHash2, seed 0x9747b28c; returns a signed int32:
murmur2(b"21") == -973932308), shared with the rest of kbroker in kbroker/client/partitioner.py -- loaded on first
use: importing the kbroker.client package costs ~40 ms and ~80 modules, which ``import kbroker.streams`` should not
pay for a function the runtime rarely calls (librdkafka's ``murmur2_random`` partitions the records it sends).
``default_partition(key_bytes, n) = (murmur2(key_bytes) & 0x7fffffff) % n`` is Java's default for keyed records
(BuiltInPartitioner.partitionForKey) and librdkafka's ``murmur2_random`` for non-null keys, so a record written by
kbroker.streams lands where Kafka Streams would put it: both sides of a co-partitioned join meet in one task.
"""

__all__ = ["murmur2", "to_positive", "default_partition", "StreamPartitioner"]

_murmur2 = None


def murmur2(data):
    """Kafka's Utils.murmur2 of ``data`` (bytes-like): a signed int32."""
    global _murmur2
    if _murmur2 is None:
        from kbroker.client.partitioner import murmur2 as impl
        _murmur2 = impl
    return _murmur2(data)


def to_positive(n):
    """Java's Utils.toPositive: the hash with its sign bit cleared."""
    return n & 0x7FFFFFFF


def default_partition(key_bytes, num_partitions):
    """The partition of a record with serialized key ``key_bytes`` (not None) among ``num_partitions`` (>= 1)."""
    if num_partitions <= 0:
        raise ValueError("num_partitions must be positive, got %r" % (num_partitions,))
    return to_positive(murmur2(key_bytes)) % num_partitions


class StreamPartitioner:
    """Kafka's StreamPartitioner: ``partition(topic, key, value, num_partitions) -> int | None`` on the objects
    (before serialization). None means "the default": murmur2 of the serialized key (or the producer's choice for
    a null key). A plain function with the same signature is accepted wherever a partitioner is."""

    def partition(self, topic, key, value, num_partitions):
        return None
