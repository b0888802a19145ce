"""Kafka's key partitioner for the records kbroker.streams writes (sinks, repartition topics).

``murmur2`` is Kafka's Java ``Utils.murmur2`` (32-bit MurmurHash2, seed 0x9747b28c; returns a signed int32:
murmur2(b"21") == -973932308), shared with the rest of kbroker in kbroker/client/partitioner.py.
``default_partition(key_bytes, n) = (murmur2(key_bytes) & 0x7fffffff) % n`` is Java's default for keyed records
(BuiltInPartitioner.partitionForKey) and librdkafka's ``murmur2_random`` for non-null keys, so a record written by
kbroker.streams lands where Kafka Streams would put it: both sides of a co-partitioned join meet in one task.
"""
from kbroker.client.partitioner import murmur2, to_positive

__all__ = ["murmur2", "to_positive", "default_partition", "StreamPartitioner"]


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
