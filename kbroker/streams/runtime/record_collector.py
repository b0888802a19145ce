"""The RecordCollector of the real runtime: a StreamThread's confluent-kafka Producer, shared by its tasks (Kafka's
RecordCollectorImpl + StreamsProducer).

Partitioning: an explicit partition (changelog records go to the task's partition; a sink's StreamPartitioner)
is used as given; otherwise librdkafka's ``murmur2_random`` partitioner places the record, which for a keyed
record is Java's default partitioner exactly ((murmur2(key bytes) & 0x7fffffff) % partitions, the function of
kbroker.streams.partitioner) and for a null key picks a random partition (Java: sticky; both are "any").

at_least_once
    idempotent producer (acks=all); ``flush()`` waits for every record sent so far to be acknowledged; a failed
    delivery is raised there (a StreamsException naming the topic, partition and error), so offsets are never
    committed past a record that was not written.
exactly_once_v2
    ONE transactional producer per StreamThread, ``transactional.id = <application.id>-<process uuid>-<thread
    index>`` (init_transactions at start fences a previous incarnation of the same thread). A transaction begins
    at the first send after a commit (or at the commit itself when only offsets move); ``commit_transaction
    (offsets, group_metadata)`` = send_offsets_to_transaction + commit_transaction. An error that requires an abort
    or is fatal (fenced epoch, KIP-447 stale generation) raises TaskMigratedException: the thread aborts what it
    can, closes its tasks dirty (state wiped, restored read_committed) and makes a new producer.
"""
from __future__ import annotations

import logging

from kbroker.streams.errors import StreamsException, TaskMigratedException

log = logging.getLogger("kbroker.streams.record_collector")

OP_TIMEOUT_S = 30.0     # one transactional call (init/commit/abort/send_offsets)


def _kafka_error(exc):
    from confluent_kafka import KafkaError
    return exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None


class KafkaRecordCollector:
    """RecordCollector over one confluent-kafka Producer (module docstring). ``producer_factory()`` makes a new
    Producer (called again after a fatal error)."""

    def __init__(self, producer_factory, eos: bool, name: str = "collector"):
        self._factory = producer_factory
        self.eos = eos
        self.name = name
        self.producer = None
        self.in_transaction = False
        self.sent = 0                  # records handed to the producer (all time)
        self.failed = None             # first delivery error since the last flush: (topic, partition, error)
        self.acked_offsets = {}        # (topic, partition) -> offset after the last acknowledged record
        self._partitions = {}          # topic -> partition count (partitions_for)
        self.new_producer()

    # -- producer lifecycle
    def new_producer(self) -> None:
        old, self.producer = self.producer, None
        if old is not None:
            try:
                old.purge()
                old.flush(0)
            except Exception:  # noqa: BLE001 - the old producer is thrown away
                pass
        self.in_transaction = False
        self.failed = None
        self.producer = self._factory()
        if self.eos:
            self._txn_call("init_transactions", lambda: self.producer.init_transactions(OP_TIMEOUT_S))

    def _txn_call(self, what, op):
        from confluent_kafka import KafkaError, KafkaException
        attempts = 0
        while True:
            try:
                return op()
            except KafkaException as exc:
                err = _kafka_error(exc)
                attempts += 1
                if err is not None and err.retriable() and not err.fatal() and not err.txn_requires_abort() \
                        and attempts < 5:
                    log.info("%s: %s failed (%s), retrying", self.name, what, err)
                    continue
                if err is not None and err.code() == KafkaError._TIMED_OUT and attempts < 5:
                    continue
                raise TaskMigratedException("%s: %s failed: %s" % (self.name, what, exc)) from None

    # -- RecordCollector protocol
    def send(self, topic, key, value, timestamp, headers=None, partition=None) -> None:
        if self.failed is not None:
            self._raise_failed()
        if self.eos and not self.in_transaction:
            self._txn_call("begin_transaction", self.producer.begin_transaction)
            self.in_transaction = True
        kwargs = {"key": key, "value": value, "on_delivery": self._delivered}
        if timestamp is not None and timestamp >= 0:
            kwargs["timestamp"] = int(timestamp)
        if headers:
            kwargs["headers"] = [(k, v) for k, v in headers]
        if partition is not None and partition >= 0:
            kwargs["partition"] = int(partition)
        from confluent_kafka import KafkaException
        while True:
            try:
                self.producer.produce(topic, **kwargs)
                break
            except BufferError:           # librdkafka's queue is full: serve delivery reports, then retry
                self.producer.poll(0.05)
            except KafkaException as exc:
                raise TaskMigratedException("%s: produce to %s failed: %s" % (self.name, topic, exc)) from None
        self.sent += 1
        self.producer.poll(0)

    def _delivered(self, err, msg):
        if err is not None:
            if self.failed is None:
                self.failed = (msg.topic(), msg.partition(), err)
            return
        tp = (msg.topic(), msg.partition())
        if msg.offset() >= self.acked_offsets.get(tp, 0):
            self.acked_offsets[tp] = msg.offset() + 1

    def _raise_failed(self):
        topic, partition, err = self.failed
        text = ("%s: error sending a record to topic %s partition %s: %s" % (self.name, topic, partition, err))
        if self.eos or err.fatal():
            raise TaskMigratedException(text)
        raise StreamsException(text)

    def partitions_for(self, topic: str):
        """The partition count of ``topic`` (cached; metadata from the producer), None when unknown."""
        n = self._partitions.get(topic)
        if n is None:
            md = self.producer.list_topics(topic, timeout=10)
            tm = md.topics.get(topic)
            if tm is not None and tm.error is None and tm.partitions:
                n = self._partitions[topic] = len(tm.partitions)
        return n

    def flush(self, timeout: float = 300.0) -> None:
        """Wait until every record sent is acknowledged; raise the first delivery error."""
        left = self.producer.flush(timeout)
        if self.failed is not None:
            self._raise_failed()
        if left:
            raise StreamsException("%s: %d records not acknowledged after %.0f s" % (self.name, left, timeout))

    # -- exactly_once_v2
    def commit_transaction(self, offsets, group_metadata) -> None:
        """offsets: [TopicPartition(topic, partition, next offset)]: send them with the transaction and commit it
        (a transaction is begun first when nothing was sent since the last commit)."""
        if not self.in_transaction:
            if not offsets:
                return
            self._txn_call("begin_transaction", self.producer.begin_transaction)
            self.in_transaction = True
        if offsets:
            self._txn_call("send_offsets_to_transaction", lambda: self.producer.send_offsets_to_transaction(
                offsets, group_metadata, OP_TIMEOUT_S))
        self._txn_call("commit_transaction", lambda: self.producer.commit_transaction(OP_TIMEOUT_S))
        self.in_transaction = False
        if self.failed is not None:
            self._raise_failed()

    def abort_transaction(self) -> bool:
        """Abort the open transaction; False when the producer is unusable (the caller makes a new one)."""
        if not self.in_transaction:
            return True
        try:
            self.producer.abort_transaction(OP_TIMEOUT_S)
            self.in_transaction = False
            self.failed = None
            return True
        except Exception as exc:  # noqa: BLE001 - fenced / fatal: the producer is replaced
            log.warning("%s: abort_transaction failed: %s", self.name, exc)
            return False

    def close(self) -> None:
        if self.producer is None:
            return
        try:
            if self.eos and self.in_transaction:
                self.abort_transaction()
            self.producer.flush(5)
        except Exception:  # noqa: BLE001 - closing
            pass
        self.producer = None
