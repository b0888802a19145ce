"""KIP-298 error handling: retries, tolerance, error log and dead letter queue (Kafka's RetryWithToleranceOperator,
LogReporter, DeadLetterQueueReporter).

The worker runs each per-record step of a task through ``RetryWithToleranceOperator.execute(stage, cls, fn)``:

- ``RetriableError`` (ours) is retried: first after 300 ms, then the delay doubles, capped by
  ``errors.retry.delay.max.ms``, for at most ``errors.retry.timeout`` ms (0: no retry, -1: forever) -- then it is
  a failure like any other;
- any other exception is a failure: under ``errors.tolerance=none`` it raises ``ToleranceExceeded`` ("Tolerance
  exceeded in error handler", the failure as its ``__cause__``), which fails the task with that trace; under
  ``all`` the failure is reported (below) and ``execute`` returns ``SKIP``: the record is dropped and the task goes
  on (its offset is still committed, as Kafka's).

Reporters, for every tolerated failure (and the last one before a task fails):

- log (``errors.log.enable``): one ERROR line "Error encountered in task <conn>-<n>. Executing stage '<STAGE>'
  with class '<class>', where consumed record is {topic='t', partition=p, offset=o}." (the whole record with
  ``errors.log.include.messages``; "where source record is ..." for sources);
- dead letter queue (sinks, ``errors.deadletterqueue.topic.name``): the ORIGINAL consumed record -- key, value and
  headers bytes as read, its timestamp -- produced to that topic (created with 1 partition and
  ``errors.deadletterqueue.topic.replication.factor`` when missing); with ``errors.deadletterqueue.context.headers
  .enable`` these headers are appended, values UTF-8: ``__connect.errors.topic``, ``.partition``, ``.offset``
  (decimal), ``.connector.name``, ``.task.id`` (decimal), ``.stage``, ``.class.name``, ``.exception.class.name``,
  ``.exception.message``, ``.exception.stacktrace``. The DLQ producer is flushed before the task's consumer
  offsets are committed (so a committed offset never outruns its DLQ copy).
"""
import logging
import threading
import time
import traceback

from kbroker.connect.exceptions import ConnectError, RetriableError

log = logging.getLogger("kbroker.connect.errors")

# Kafka's ErrorHandlingMetrics/Stage names, as the __connect.errors.stage header carries them.
KEY_CONVERTER = "KEY_CONVERTER"
VALUE_CONVERTER = "VALUE_CONVERTER"
HEADER_CONVERTER = "HEADER_CONVERTER"
TRANSFORMATION = "TRANSFORMATION"
TASK_PUT = "TASK_PUT"
TASK_POLL = "TASK_POLL"
KAFKA_PRODUCE = "KAFKA_PRODUCE"
KAFKA_CONSUME = "KAFKA_CONSUME"

HEADER_PREFIX = "__connect.errors."
HEADER_ORIG_TOPIC = HEADER_PREFIX + "topic"
HEADER_ORIG_PARTITION = HEADER_PREFIX + "partition"
HEADER_ORIG_OFFSET = HEADER_PREFIX + "offset"
HEADER_CONNECTOR_NAME = HEADER_PREFIX + "connector.name"
HEADER_TASK_ID = HEADER_PREFIX + "task.id"
HEADER_STAGE = HEADER_PREFIX + "stage"
HEADER_EXECUTING_CLASS = HEADER_PREFIX + "class.name"
HEADER_EXCEPTION = HEADER_PREFIX + "exception.class.name"
HEADER_EXCEPTION_MESSAGE = HEADER_PREFIX + "exception.message"
HEADER_EXCEPTION_STACK_TRACE = HEADER_PREFIX + "exception.stacktrace"

RETRY_DELAY_MIN_MS = 300   # Kafka's RetryWithToleranceOperator.RETRIES_DELAY_MIN_MS
DLQ_PARTITIONS = 1         # Kafka's DLQ_NUM_DESIRED_PARTITIONS


class _Skip:
    def __repr__(self):
        return "SKIP"


SKIP = _Skip()


class ToleranceExceeded(ConnectError):
    """A failure under errors.tolerance=none (Kafka's message)."""

    def __init__(self):
        super().__init__("Tolerance exceeded in error handler")


class ConsumedRecord:
    """A record as the consumer returned it (what the DLQ gets back)."""
    __slots__ = ("topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value", "headers")

    def __init__(self, topic, partition, offset, timestamp=None, timestamp_type=None, key=None, value=None,
                 headers=()):
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers = tuple(headers or ())

    def describe(self, include_messages):
        text = "{topic='%s', partition=%d, offset=%d" % (self.topic, self.partition, self.offset)
        if self.timestamp is not None:
            text += ", timestamp=%d, timestampType=%s" % (self.timestamp, self.timestamp_type or "CreateTime")
        if include_messages:
            text += ", key=%r, value=%r, headers=%r" % (self.key, self.value, list(self.headers))
        return text + "}"


class ProcessingContext:
    """What failed: stage, executing class, the consumed or the source record, the exception."""

    def __init__(self, task_id):
        self.task_id = task_id
        self.reset()

    def reset(self, consumed=None, source_record=None):
        self.consumed = consumed
        self.source_record = source_record
        self.stage = None
        self.executing_class = None
        self.error = None


def class_name(obj):
    """``module.QualName`` of a class, an instance or a function (the DLQ's ``__connect.errors.class.name``)."""
    if obj is None:
        return "null"
    if not isinstance(obj, type) and not callable(obj):
        obj = type(obj)
    module = getattr(obj, "__module__", None)
    qual = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", repr(obj))
    return "%s.%s" % (module, qual) if module else qual


def close_producer(producer, timeout):
    """Close ``producer`` within ``timeout`` seconds: what is still unacknowledged then is purged (its offsets were
    not committed, so it is sent again by the next owner: at-least-once), since close() alone waits for it
    without a bound (message.timeout.ms is 2^31 ms)."""
    try:
        if producer.flush(timeout):
            producer.purge()
            producer.poll(0)
        producer.close()
    except Exception as e:
        log.warning("error while closing a producer: %s", e)


def format_trace(exc):
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


class LogReporter:
    def __init__(self, task_id, include_messages):
        self.task_id = task_id
        self.include_messages = include_messages

    def report(self, ctx):
        if ctx.consumed is not None:
            where = ", where consumed record is %s" % ctx.consumed.describe(self.include_messages)
        elif ctx.source_record is not None:
            record = ctx.source_record if self.include_messages else _source_summary(ctx.source_record)
            where = ", where source record is = %s" % (record,)
        else:
            where = ""
        log.error("Error encountered in task %s. Executing stage '%s' with class '%s'%s.", self.task_id,
                  ctx.stage, ctx.executing_class, where, exc_info=ctx.error)

    def flush(self, timeout):
        return True

    def close(self):
        pass


def _source_summary(record):
    return "SourceRecord{sourcePartition=%s, sourceOffset=%s, topic=%s}" % (
        record.source_partition, record.source_offset, record.topic)


class DeadLetterQueueReporter:
    """Sinks' dead letter queue (module docstring). ``producer`` is a confluent_kafka.Producer (bytes in, bytes
    out); ``create_topic(name, partitions, replication)`` makes the topic when it is missing."""

    def __init__(self, task_id, topic, context_headers, producer):
        self.task_id = task_id
        self.topic = topic.strip()
        self.context_headers = context_headers
        self.producer = producer
        self._failed = []

    def report(self, ctx):
        consumed = ctx.consumed
        if consumed is None or not self.topic:
            return
        headers = list(consumed.headers)
        if self.context_headers:
            headers.extend(self.context_header_list(ctx))
        kwargs = {}
        if consumed.timestamp is not None and consumed.timestamp >= 0:
            kwargs["timestamp"] = consumed.timestamp
        self.producer.produce(self.topic, value=consumed.value, key=consumed.key, headers=headers,
                              on_delivery=self._on_delivery, **kwargs)
        self.producer.poll(0)

    def context_header_list(self, ctx):
        """[(name, bytes)] of the context headers, in Kafka's order."""
        out = []
        if ctx.consumed is not None:
            out += [(HEADER_ORIG_TOPIC, ctx.consumed.topic.encode()),
                    (HEADER_ORIG_PARTITION, str(ctx.consumed.partition).encode()),
                    (HEADER_ORIG_OFFSET, str(ctx.consumed.offset).encode())]
        out += [(HEADER_CONNECTOR_NAME, self.task_id.connector.encode()),
                (HEADER_TASK_ID, str(self.task_id.task).encode()),
                (HEADER_STAGE, str(ctx.stage).encode()),
                (HEADER_EXECUTING_CLASS, str(ctx.executing_class).encode())]
        if ctx.error is not None:
            out += [(HEADER_EXCEPTION, class_name(type(ctx.error)).encode()),
                    (HEADER_EXCEPTION_MESSAGE, str(ctx.error).encode()),
                    (HEADER_EXCEPTION_STACK_TRACE, format_trace(ctx.error).encode())]
        return out

    def _on_delivery(self, err, msg):
        if err is not None:
            log.error("Could not produce message to dead letter queue. topic=%s: %s", self.topic, err)
            self._failed.append(err)

    def flush(self, timeout):
        """True when every DLQ record was acknowledged within ``timeout`` seconds."""
        return self.producer.flush(timeout) == 0

    def close(self, timeout=5.0):
        close_producer(self.producer, timeout)


def create_dlq_topic(admin, topic, replication_factor):
    """Kafka's createAndSetup: create ``topic`` (1 partition) unless it exists; ConnectError when that fails."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewTopic
    md = admin.list_topics(timeout=10)
    if topic in md.topics and md.topics[topic].error is None:
        return
    log.error("Topic %s doesn't exist. Will attempt to create topic.", topic)
    futures = admin.create_topics([NewTopic(topic, num_partitions=DLQ_PARTITIONS,
                                            replication_factor=int(replication_factor))], request_timeout=15)
    try:
        futures[topic].result(timeout=20)
    except Exception as e:
        err = e.args[0] if e.args else None
        if getattr(err, "code", lambda: None)() == KafkaError.TOPIC_ALREADY_EXISTS:
            return
        raise ConnectError("Could not initialize dead letter queue with topic=%s: %s" % (topic, e)) from None


class RetryWithToleranceOperator:
    """See the module docstring. One per task, used by the task's thread only (``stop_event`` interrupts a retry
    wait)."""

    def __init__(self, retry_timeout_ms=0, retry_delay_max_ms=60000, tolerance="none", reporters=(),
                 stop_event=None, task_id=None):
        self.retry_timeout_ms = int(retry_timeout_ms)
        self.retry_delay_max_ms = int(retry_delay_max_ms)
        self.tolerance = tolerance
        self.reporters = list(reporters)
        self.stop_event = stop_event or threading.Event()
        self.context = ProcessingContext(task_id)
        self.total_failures = 0
        self.total_skipped = 0

    @classmethod
    def from_config(cls, connector_config, task_id, reporters=(), stop_event=None):
        return cls(connector_config["errors.retry.timeout"], connector_config["errors.retry.delay.max.ms"],
                   connector_config["errors.tolerance"], reporters, stop_event, task_id)

    @property
    def tolerate_all(self):
        return self.tolerance == "all"

    def execute(self, stage, executing, fn, *args):
        """``fn(*args)`` with retries and tolerance; its result, or SKIP (a tolerated failure). The success path
        costs one call and a try: it runs several times per record."""
        try:
            return fn(*args)
        except RetriableError as e:
            return self._retry(stage, executing, fn, args, e)
        except Exception as e:
            self._mark(stage, executing)
            return self._failed(e)

    def _mark(self, stage, executing):
        ctx = self.context
        ctx.stage = stage
        ctx.executing_class = class_name(executing)

    def _retry(self, stage, executing, fn, args, first):
        self._mark(stage, executing)
        deadline = None if self.retry_timeout_ms < 0 else time.monotonic() + self.retry_timeout_ms / 1000.0
        error = first
        attempt = 1
        while True:
            delay = self._backoff(attempt, deadline)
            if delay is None or self.stop_event.wait(delay):
                return self._failed(error)
            log.debug("%s: retrying %s after %s (attempt %d)", self.context.task_id, stage, error, attempt)
            attempt += 1
            try:
                return fn(*args)
            except RetriableError as e:
                error = e
            except Exception as e:
                return self._failed(e)

    def _backoff(self, attempt, deadline):
        if deadline is not None and self.retry_timeout_ms == 0:
            return None
        delay = min(RETRY_DELAY_MIN_MS * (2 ** (attempt - 1)), self.retry_delay_max_ms) / 1000.0
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            delay = min(delay, remaining)
        return delay

    def _failed(self, exc):
        ctx = self.context
        ctx.error = exc
        self.total_failures += 1
        self.report()
        if not self.tolerate_all:
            raise ToleranceExceeded() from exc
        self.total_skipped += 1
        return SKIP

    def report(self):
        for reporter in self.reporters:
            try:
                reporter.report(self.context)
            except Exception as e:     # a reporter's failure must not hide the record's
                log.error("error reporter %s failed: %s", type(reporter).__name__, e)

    def flush(self, timeout):
        return all(r.flush(timeout) for r in self.reporters)

    def close(self):
        for r in self.reporters:
            r.close()
