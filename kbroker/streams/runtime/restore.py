"""The RestoreConsumer (kbroker.streams.state.state_manager's protocol) over a confluent-kafka Consumer that never
joins a group (``assign()`` only): what ProcessorStateManager.restore and the standby tasks read changelogs with.

* ``offsets(topic, p)`` = (log start offset, end offset) from ListOffsets; under exactly_once_v2 the consumer is
  ``isolation.level=read_committed``, so the end offset is the last stable offset: an open (or aborted) transaction
  of a crashed instance is never restored. An active task's restore under EOS (``wait_stable_s``) first waits until
  the LSO equals the high watermark: while a task is being restored nobody may write its changelog, so an open
  transaction there is a dead or fenced owner's, and restoring only up to its first offset would miss what later
  owners committed AFTER it (a crashed instance's transaction holds the LSO back until the coordinator aborts it,
  transaction.timeout.ms; a restarted instance fences its own at once, its process id being kept in the state
  directory). The wait is bounded by ``wait_stable_s``; then the LSO is used as it is (logged).
* ``poll(topic, p, position, n)`` assigns the partition at ``position`` when it is not already reading there,
  consumes up to ``n`` records within POLL_WAIT_S, and returns them with the next position. Offsets skip
  (compaction, transaction markers, aborted records under read_committed); the consumer's end-of-partition event
  carries the offset it reached, so a trailing commit marker still moves the position to the end offset; a read
  stops at the end offset ``offsets()`` gave (read_committed: the LSO, beyond which no EOF event comes while a
  transaction is open).
"""
from __future__ import annotations

import logging
import time

from kbroker.streams.state.state_manager import ChangelogRecord

log = logging.getLogger("kbroker.streams.restore")

POLL_WAIT_S = 0.5          # one poll's wait for records (bounds how long a restore waits on an empty read)
SLICE_S = 0.02             # one consume() inside it
WATERMARK_TIMEOUT_S = 10.0


class KafkaRestoreConsumer:
    """RestoreConsumer over a librdkafka consumer configuration (StreamsConfig.restore_consumer_config)."""

    def __init__(self, conf: dict, wait_stable_s: float | None = None):
        from confluent_kafka import Consumer
        conf = dict(conf)
        self.wait_stable_s = wait_stable_s
        self._hw_conf = dict(conf, **{"isolation.level": "read_uncommitted"})
        self._hw_consumer = None
        conf["enable.partition.eof"] = "true"
        # the broker long-polls a fetch that finds no data below the end (a trailing commit marker, or data above
        # the last stable offset under read_committed) for fetch.wait.max.ms (500 by default): 10 ms instead
        conf.setdefault("fetch.wait.max.ms", "10")
        self.ends = {}               # (topic, partition) -> end offset given by offsets()
        self.consumer = Consumer(conf)
        self.reading = None          # (topic, partition) assigned
        self.expected = None         # next position the consumer will return for it

    def offsets(self, topic, partition):
        from confluent_kafka import TopicPartition
        tp = TopicPartition(topic, partition)
        low, high = self.consumer.get_watermark_offsets(tp, timeout=WATERMARK_TIMEOUT_S, cached=False)
        if self.wait_stable_s is not None:
            from confluent_kafka import Consumer
            if self._hw_consumer is None:
                self._hw_consumer = Consumer(self._hw_conf)
            deadline = time.monotonic() + self.wait_stable_s
            logged = False
            while True:
                hw = self._hw_consumer.get_watermark_offsets(tp, timeout=WATERMARK_TIMEOUT_S, cached=False)[1]
                if high >= hw:
                    break
                if time.monotonic() >= deadline:
                    log.warning("restore of %s-%d: an open transaction still holds the last stable offset at %d "
                                "(high watermark %d) after %.0f s; restoring up to it", topic, partition, high, hw,
                                self.wait_stable_s)
                    break
                if not logged:
                    log.info("restore of %s-%d: waiting for an open transaction of a previous owner to end (last "
                             "stable offset %d, high watermark %d)", topic, partition, high, hw)
                    logged = True
                time.sleep(0.1)
                low, high = self.consumer.get_watermark_offsets(tp, timeout=WATERMARK_TIMEOUT_S, cached=False)
        self.ends[(topic, partition)] = max(high, 0)
        return max(low, 0), max(high, 0)

    def _seek(self, topic, partition, position):
        from confluent_kafka import TopicPartition
        if self.reading != (topic, partition):
            self.consumer.assign([TopicPartition(topic, partition, position)])
            self.reading = (topic, partition)
        else:
            self.consumer.seek(TopicPartition(topic, partition, position))
        self.expected = position

    def poll(self, topic, partition, position, max_records):
        from confluent_kafka import KafkaError
        if self.reading != (topic, partition) or self.expected != position:
            try:
                self._seek(topic, partition, position)
            except Exception:  # noqa: BLE001 - seek before the assignment is active: assign again
                from confluent_kafka import TopicPartition
                self.consumer.assign([TopicPartition(topic, partition, position)])
                self.reading, self.expected = (topic, partition), position
        out = []
        nxt = position
        deadline = time.monotonic() + POLL_WAIT_S
        while True:
            # short consumes: return as soon as something (records or the end-of-partition event) came, instead of
            # waiting the whole POLL_WAIT_S for max_records that a short changelog does not have
            msgs = self.consumer.consume(num_messages=max_records - len(out), timeout=SLICE_S)
            eof = False
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF and m.topic() == topic and m.partition() == partition:
                        nxt = max(nxt, m.offset())
                        eof = True
                        continue
                    if err.fatal():
                        from kbroker.streams.errors import ProcessorStateException
                        raise ProcessorStateException("restore of %s-%d: %s" % (topic, partition, err))
                    log.debug("restore of %s-%d: %s", topic, partition, err)
                    continue
                if m.topic() != topic or m.partition() != partition or m.offset() < position:
                    continue
                out.append(ChangelogRecord(m.offset(), m.key(), m.value(), m.timestamp()[1]))
                nxt = max(nxt, m.offset() + 1)
            end = self.ends.get((topic, partition))
            if end is not None and nxt >= end:
                break      # under read_committed nothing after the end (LSO) is returned: no EOF event comes
            if eof or len(out) >= max_records or (out and not msgs) or time.monotonic() >= deadline:
                break
        self.expected = nxt
        return out, nxt

    def close(self):
        try:
            if self._hw_consumer is not None:
                self._hw_consumer.close()
            self.consumer.close()
        except Exception:  # noqa: BLE001 - closing
            pass
