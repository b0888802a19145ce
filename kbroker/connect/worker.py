"""The worker: runs connectors and tasks (Kafka's Worker, WorkerConnector, WorkerSourceTask, WorkerSinkTask).

Threads, not gevent (confluent-kafka blocks in C and releases the GIL). Connectors run in the caller's thread
(``start_connector`` returns once ``start`` returned or failed); each task runs in a thread of its own.

Source task loop: ``poll()`` -> per record: transformations -> key/value converters (header values that are not
bytes go through the header converter) -> ``producer.produce`` (acks=all, enable.idempotence=true,
message.timeout.ms=2147483647, partitioner=murmur2_random (Java's) and client.id
``connector-producer-<connector>-<task>``: Kafka's worker defaults; the worker's ``producer.*`` and the connector's
``producer.override.*`` keys win). Offsets: the latest
(partition -> offset) of the records polled since the last commit is kept; every ``offset.flush.interval.ms``, and
when the task stops, the worker flushes the producer -- waiting up to ``offset.flush.timeout.ms`` for EVERY record
polled so far to be acknowledged -- and only then writes those offsets to the offset store and calls
``task.commit()``. A flush that times out commits nothing (the offsets stay pending: at-least-once). A record
dropped by a transformation, or skipped by the error handler, counts as acknowledged. A failed delivery fails the
task (errors.tolerance=none) or is logged and skipped (all).

Sink task loop: confluent-kafka consumer in group ``connect-<connector>`` (enable.auto.commit=false,
auto.offset.reset=earliest, client.id ``connector-consumer-<connector>-<task>``; ``consumer.*`` and
``consumer.override.*`` win) subscribed to ``topics`` or ``topics.regex`` -> per record: key/value converters ->
SinkRecord (headers as consumed: (str, bytes)) -> transformations -> ``task.put(batch)`` (at most
``consumer.max.poll.records`` records, 500 by default as Java's) -> the consumed offsets become committable. Every ``offset.flush.interval.ms`` (or after
``context.request_commit()``), at a revocation and when the task stops: ``task.pre_commit(offsets)`` (its default
is ``flush``), the dead letter queue producer is flushed, then the consumer commits what pre_commit returned,
synchronously. ``RetriableError`` from ``put``: the same batch is offered again after ``context.timeout(ms)``
(default 1 s), the partitions paused meanwhile while the consumer keeps polling (group membership).

KIP-158: a source whose config has ``topic.creation.*`` keys (and the worker's ``topic.creation.enable``) creates
each topic it sends to, if missing, with its group's partitions, replication factor and topic configs
(``TopicCreator``).

Statuses (status store): a task is RUNNING once started (PAUSED when its connector is paused), FAILED with the
stack trace when ``start``/``poll``/``put``/a converter or transformation (under tolerance none) raised,
UNASSIGNED after a clean stop. KIP-558: the first record produced to / consumed from a topic records it as an
active topic of the connector (``topic.tracking.enable``).

Stopping: ``stop_tasks`` signals every task, calls SourceTask.stop() at once (to wake a blocked ``poll``, as Kafka
does), then waits for each thread up to ``task.shutdown.graceful.timeout.ms`` in all; a thread still running then
is abandoned (its status is no longer updated; Kafka "cancels" it the same way).
"""
import logging
import threading
import time
import traceback

from kbroker.connect import errorhandling as eh
from kbroker.connect import status as st
from kbroker.connect.api import ConnectorContext, SinkTaskContext, SourceTask, SourceTaskContext
from kbroker.connect.connector_config import ConnectorConfig
from kbroker.connect.exceptions import ConfigError, ConnectError, RetriableError
from kbroker.connect.offsets import OffsetStorageReader, offset_key, offset_value
from kbroker.connect.plugins import connector_type_of
from kbroker.connect.records import ConnectorTaskId, SinkRecord
from kbroker.connect.status import ConnectorStatus, TaskStatus

log = logging.getLogger("kbroker.connect.worker")

STARTED, PAUSED, STOPPED = "STARTED", "PAUSED", "STOPPED"
TASK_CLASS = "task.class"         # Kafka's TaskConfig.TASK_CLASS_CONFIG, added to every task config
MAX_POLL_RECORDS = 500            # Java consumer's max.poll.records default: the largest batch handed to put()
SINK_CONSUME_TIMEOUT = 0.5        # s a sink loop waits for records: bounds how late a stop/pause is seen
DEFAULT_PUT_RETRY_MS = 1000       # put() raised RetriableError and the task set no context.timeout
# Kafka's worker producer: acks=all, unbounded delivery timeout, idempotent; murmur2 for keyed records (the Java
# client's partitioner: a key lands where a Java producer would put it).
PRODUCER_DEFAULTS = {"acks": "all", "enable.idempotence": "true", "message.timeout.ms": "2147483647",
                     "partitioner": "murmur2_random"}
CONSUMER_DEFAULTS = {"enable.auto.commit": "false", "auto.offset.reset": "earliest",
                     "enable.partition.eof": "false"}


def _trace(exc):
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def _str_map(d):
    return {str(k): v if isinstance(v, str) else ("" if v is None else str(v)) for k, v in d.items()}


class WorkerConnector:
    """One connector instance and its state."""

    def __init__(self, worker, name, props, connector, on_reconfigure):
        self.worker = worker
        self.name = name
        self.props = dict(props)
        self.connector = connector
        self.on_reconfigure = on_reconfigure
        self.kind = connector_type_of(type(connector))
        self.state = None          # STARTED | PAUSED | STOPPED | "FAILED"
        self.started = False       # connector.start returned and stop has not been called since
        self.lock = threading.RLock()

    def _context(self):
        def reconfigure():
            if self.on_reconfigure is not None:
                self.on_reconfigure(self.name)

        def error(exc):
            self.fail(exc)
        return ConnectorContext(reconfigure, error)

    def initialize(self):
        self.connector.initialize(self._context())

    def transition(self, target):
        """Move to ``target`` (STARTED | PAUSED | STOPPED); False (and FAILED status) when start/stop raised. A
        FAILED connector stays FAILED until it is restarted (stopped and started again), as Kafka's."""
        with self.lock:
            if self.state == "FAILED":
                log.warning("Cannot transition connector %s to %s since it has failed", self.name, target)
                return False
            try:
                if target == STARTED and not self.started:
                    self.connector.start(dict(self.props))
                    self.started = True
                elif target in (PAUSED, STOPPED) and self.started:
                    self.started = False
                    self.connector.stop()
            except Exception as e:
                self.fail(e)
                return False
            if self.state == "FAILED":       # context.raise_error() during start/stop
                return False
            self.state = target
            state = {STARTED: st.RUNNING, PAUSED: st.PAUSED, STOPPED: st.STOPPED}[target]
            self.worker._put(ConnectorStatus(self.name, state, None, self.worker.worker_id, self.worker.generation))
            return True

    def fail(self, exc):
        log.error("Connector %s failed: %s", self.name, exc, exc_info=exc)
        self.state = "FAILED"
        self.worker._put(ConnectorStatus(self.name, st.FAILED, _trace(exc), self.worker.worker_id,
                                         self.worker.generation))

    def shutdown(self):
        with self.lock:
            if self.started:
                self.started = False
                try:
                    self.connector.stop()
                except Exception as e:
                    log.error("Error while shutting down connector %s: %s", self.name, e, exc_info=e)


class WorkerTask:
    """A task's thread and the parts every kind shares (state, status, converters, transformations, errors)."""

    def __init__(self, worker, task_id, conn_config, task_props, task, target_state):
        self.worker = worker
        self.id = task_id
        self.conn_config = conn_config
        self.task_props = dict(task_props)
        self.task = task
        self.target_state = target_state
        self.stopping = threading.Event()
        self.state_changed = threading.Condition()
        self.thread = threading.Thread(target=self._run, name="task-%s" % task_id, daemon=True)
        self.abandoned = False
        self.failed = False
        self.started = False       # task.start() returned: stop() may be called from another thread
        self._stop_called = False
        self._stop_lock = threading.Lock()
        self._topics = set()
        self.key_converter = worker._converter(conn_config, "key.converter", True)
        self.value_converter = worker._converter(conn_config, "value.converter", False)
        self.header_converter = worker._header_converter(conn_config)
        self.stages = conn_config.transformations()
        self.errors = eh.RetryWithToleranceOperator.from_config(conn_config, task_id, (), self.stopping)

    # ------------------------------------------------------------------------------------------------ lifecycle
    def _reporters(self):
        out = []
        if self.conn_config["errors.log.enable"]:
            out.append(eh.LogReporter(self.id, self.conn_config["errors.log.include.messages"]))
        return out

    def start(self):
        self.thread.start()

    def _status(self, state, trace=None):
        if not self.abandoned:
            self.worker._put(TaskStatus(self.id, state, trace, self.worker.worker_id, self.worker.generation))

    def _run(self):
        try:
            self.errors.reporters.extend(self._reporters())   # the DLQ's clients: in this thread, not the caller's
            self.initialize_and_start()
            self.started = True
            self._status(st.PAUSED if self.target_state == PAUSED else st.RUNNING)
            self.execute()
        except Exception as e:
            self.failed = True
            log.error("%s Task threw an uncaught and unrecoverable exception. Task is being killed and will not "
                      "recover until manually restarted: %s", self.id, e, exc_info=e)
            self._status(st.FAILED, _trace(e))
        finally:
            try:
                self.close()
            except Exception as e:
                log.error("%s error while closing: %s", self.id, e, exc_info=e)
            self._task_stop()
            for stage in self.stages:
                stage.close()
            self.errors.close()
            if not self.failed:
                self._status(st.UNASSIGNED)

    def wake(self):
        """From the stopping thread: SourceTask.stop() wakes a blocked poll(), as Kafka's; a task not started yet
        is stopped by its own thread when it ends."""
        if self.started:
            self._task_stop()

    def _task_stop(self):
        with self._stop_lock:
            if self._stop_called:
                return
            self._stop_called = True
        try:
            self.task.stop()
        except Exception as e:
            log.error("%s task.stop() failed: %s", self.id, e, exc_info=e)

    def signal_stop(self):
        self.stopping.set()
        with self.state_changed:
            self.state_changed.notify_all()

    def set_target_state(self, state):
        with self.state_changed:
            if state == self.target_state:
                return
            self.target_state = state
            self.state_changed.notify_all()
        if not self.failed and not self.stopping.is_set():
            self._status(st.PAUSED if state == PAUSED else st.RUNNING)

    def wait_while_paused(self, timeout):
        with self.state_changed:
            if self.target_state == PAUSED and not self.stopping.is_set():
                self.state_changed.wait(timeout)

    @property
    def paused(self):
        return self.target_state == PAUSED

    def record_active_topic(self, topic):
        if topic not in self._topics:
            self._topics.add(topic)
            if self.worker.config.get("topic.tracking.enable", True):
                self.worker.status_store.put_topic(self.id.connector, topic, self.id)

    def transform(self, record):
        """Record after every stage; None when a stage dropped it or a failure was tolerated (SKIP)."""
        for stage in self.stages:
            record = self.errors.execute(eh.TRANSFORMATION, stage.transform, stage.apply, record)
            if record is None or record is eh.SKIP:
                return None
        return record

    def initialize_and_start(self):
        raise NotImplementedError

    def execute(self):
        raise NotImplementedError

    def close(self):
        pass


class WorkerSourceTask(WorkerTask):
    def initialize_and_start(self):
        from confluent_kafka import Producer
        from kbroker.client.rdkafka_props import check
        self.reader = OffsetStorageReader(self.id.connector, self.worker.offset_store)
        conf = dict(PRODUCER_DEFAULTS)
        conf["client.id"] = "connector-producer-%s" % self.id
        conf.update(self.worker.config.client_config("producer", self.conn_config.client_overrides("producer")))
        self.producer = check(Producer, conf, "producer of %s" % self.id)
        groups = self.conn_config.topic_creation_groups()
        self.topic_creator = None
        if groups:
            from confluent_kafka.admin import AdminClient
            from kbroker.client.rdkafka_props import connection_only
            admin_conf = connection_only(self.worker.config.client_config(
                "admin", self.conn_config.client_overrides("admin")))
            self.topic_creator = TopicCreator(check(AdminClient, admin_conf, "admin of %s" % self.id), groups,
                                              self.id)
        # Latest (partition, offset) per source partition polled since the last commit, keyed by the partition's
        # items (cheap to hash); serialised to Kafka's bytes only at commit time (json.dumps per record was 60% of
        # the worker's own cost per record).
        self.pending = {}
        self.delivery_errors = []
        self.task.initialize(SourceTaskContext(self.task_props, self.reader))
        self.task.start(dict(self.task_props))

    def execute(self):
        interval = self.worker.config["offset.flush.interval.ms"] / 1000.0
        next_commit = time.monotonic() + interval
        while not self.stopping.is_set():
            self.producer.poll(0)
            self._check_delivery_errors()
            if time.monotonic() >= next_commit:
                self.commit_offsets()
                next_commit = time.monotonic() + interval
            if self.paused:
                self.wait_while_paused(min(0.5, interval))
                continue
            try:
                records = self.task.poll()
            except RetriableError as e:
                log.warning("%s failed to poll records from SourceTask. Will retry operation: %s", self.id, e)
                continue
            if not records:
                continue
            self.send_records(records)

    def _check_delivery_errors(self):
        """A failed delivery fails the task (tolerance none); under tolerance all it is reported (stage
        KAFKA_PRODUCE, as Kafka's) and the record counts as handled."""
        if not self.delivery_errors:
            return
        err, record = self.delivery_errors[0]
        if not self.errors.tolerate_all:
            raise ConnectError("Unrecoverable exception from producer send callback: %s" % (err,))
        errors, self.delivery_errors = self.delivery_errors, []
        ctx = self.errors.context
        for err, record in errors:
            ctx.reset(source_record=record)
            ctx.stage, ctx.executing_class = eh.KAFKA_PRODUCE, eh.class_name(type(self.producer))
            ctx.error = ConnectError("Failed to send record: %s" % (err,))
            self.errors.report()

    def send_records(self, records):
        for record in records:
            self.errors.context.reset(source_record=record)
            transformed = self.transform(record)
            if transformed is not None:
                transformed = self._convert_and_send(transformed, record)
            if transformed is None:
                self._ack_without_send(record)

    def _ack_without_send(self, record):
        self._note_offset(record)
        try:
            self.task.commit_record(record, None)
        except Exception as e:
            log.warning("%s exception thrown while calling task.commit_record(): %s", self.id, e)

    def _note_offset(self, record):
        partition = record.source_partition
        if partition is not None:
            try:
                key = tuple(partition.items())
                hash(key)
            except TypeError:          # a nested (unhashable) value: the bytes are the key
                key = offset_key(self.id.connector, partition)
            self.pending[key] = (partition, record.source_offset)

    def _convert_and_send(self, record, original):
        topic = record.topic
        key = self.errors.execute(eh.KEY_CONVERTER, self.key_converter, self.key_converter.from_connect_data,
                                  topic, record.key_schema, record.key)
        if key is eh.SKIP:
            return None
        value = self.errors.execute(eh.VALUE_CONVERTER, self.value_converter,
                                    self.value_converter.from_connect_data, topic, record.value_schema, record.value)
        if value is eh.SKIP:
            return None
        headers = self.errors.execute(eh.HEADER_CONVERTER, self.header_converter, self._headers, topic,
                                      record.headers)
        if headers is eh.SKIP:
            return None
        if self.topic_creator is not None and topic not in self._topics:
            self.topic_creator.ensure(topic)
        kwargs = {}
        if record.kafka_partition is not None:
            kwargs["partition"] = record.kafka_partition
        if record.timestamp is not None:
            kwargs["timestamp"] = record.timestamp
        if headers:
            kwargs["headers"] = headers

        def delivered(err, msg, original=original):
            if err is not None:
                log.error("%s failed to send record to %s: %s", self.id, topic, err)
                self.delivery_errors.append((err, original))
                return
            try:
                self.task.commit_record(original, (msg.topic(), msg.partition(), msg.offset()))
            except Exception as e:
                log.warning("%s exception thrown while calling task.commit_record(): %s", self.id, e)

        while True:
            try:
                self.producer.produce(topic, value=value, key=key, on_delivery=delivered, **kwargs)
                break
            except BufferError:          # librdkafka's queue is full: serve callbacks, then try again
                self.producer.poll(0.1)
                if self.stopping.is_set() and self.abandoned:
                    raise ConnectError("%s abandoned while the producer queue was full" % self.id) from None
        self._note_offset(original)
        self.record_active_topic(topic)
        return record

    def _headers(self, topic, headers):
        out = []
        for k, v in headers or ():
            if v is not None and not isinstance(v, (bytes, bytearray)):
                v = self.header_converter.from_connect_header(topic, k, None, v)
            out.append((k, v))
        return out

    def commit_offsets(self):
        """Flush the producer (all polled records acknowledged) then write the pending offsets; False when the
        flush timed out (nothing written)."""
        timeout = self.worker.config["offset.flush.timeout.ms"] / 1000.0
        taken = dict(self.pending)
        left = self.producer.flush(timeout)
        if left:
            log.error("%s Failed to flush, timed out while waiting for producer to flush outstanding %d messages",
                      self.id, left)
            return False
        self._check_delivery_errors()
        if taken:
            snapshot = {offset_key(self.id.connector, p): offset_value(o) for p, o in taken.values()}
            try:
                self.worker.offset_store.set(snapshot)
            except Exception as e:
                log.error("%s Failed to commit offsets: %s", self.id, e)
                return False
            for k, v in taken.items():
                if self.pending.get(k) is v:      # not polled again since: nothing newer to write
                    del self.pending[k]
        try:
            self.task.commit()
        except Exception as e:
            log.error("%s Exception thrown while calling task.commit(): %s", self.id, e)
        return True

    def close(self):
        producer = getattr(self, "producer", None)
        if producer is None or self.abandoned:
            return
        try:
            # Also after a failure: the offsets of the records acknowledged before it are safe to keep (a
            # delivery failure under tolerance none raises in commit_offsets, so then nothing is written).
            self.commit_offsets()
        finally:
            eh.close_producer(producer, self.worker.config["offset.flush.timeout.ms"] / 1000.0)


class TopicCreator:
    """KIP-158: a source task creates a topic the first time it sends to it, unless the topic exists, with the
    first group (``topic.creation.groups`` order, then ``default``) whose include/exclude regexes take it; a topic
    no group takes is left to the broker. ConnectError (the task fails) when the creation fails for any reason but
    "already exists" -- as Kafka's "Task failed to create new topic"."""

    METADATA_TIMEOUT = 10.0    # s for the topic list
    CREATE_TIMEOUT = 30.0      # s for the CreateTopics answer

    def __init__(self, admin, groups, task_id):
        self.admin = admin
        self.groups = groups
        self.task_id = task_id
        self.known = set()

    def ensure(self, topic):
        if topic in self.known:
            return
        from confluent_kafka import KafkaError
        from confluent_kafka.admin import NewTopic
        md = self.admin.list_topics(timeout=self.METADATA_TIMEOUT)
        if topic in md.topics and md.topics[topic].error is None:
            self.known.add(topic)
            return
        group = next((g for g in self.groups if g.matches(topic)), None)
        if group is None:
            log.info("%s: topic %s matches no topic creation group: left to the broker", self.task_id, topic)
            self.known.add(topic)
            return
        new = NewTopic(topic, num_partitions=group.partitions, replication_factor=group.replication_factor,
                       config=dict(group.configs))
        futures = self.admin.create_topics([new], request_timeout=self.CREATE_TIMEOUT)
        try:
            futures[topic].result(timeout=self.CREATE_TIMEOUT)
            log.info("%s: created topic %s (group %s: %d partitions, replication factor %d, configs %s)",
                     self.task_id, topic, group.name, group.partitions, group.replication_factor, group.configs)
        except Exception as e:
            err = e.args[0] if e.args else None
            if getattr(err, "code", lambda: None)() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise ConnectError("Task failed to create new topic %s (group %s): %s. Ensure that the task is "
                                   "authorized to create topics or that the topic exists and restart the task"
                                   % (topic, group.name, e)) from None
        self.known.add(topic)


class WorkerSinkTask(WorkerTask):
    def _reporters(self):
        out = super()._reporters()
        dlq = (self.conn_config.get("errors.deadletterqueue.topic.name") or "").strip()
        if dlq:
            from confluent_kafka import Producer
            from confluent_kafka.admin import AdminClient
            from kbroker.client.rdkafka_props import check, connection_only
            conf = dict(PRODUCER_DEFAULTS)
            conf["client.id"] = "connector-dlq-producer-%s" % self.id
            conf.update(self.worker.config.client_config("producer",
                                                         self.conn_config.client_overrides("producer")))
            admin = check(AdminClient, connection_only(
                self.worker.config.client_config("admin", self.conn_config.client_overrides("admin"))),
                "admin of %s" % self.id)
            eh.create_dlq_topic(admin, dlq, self.conn_config["errors.deadletterqueue.topic.replication.factor"])
            out.append(eh.DeadLetterQueueReporter(
                self.id, dlq, self.conn_config["errors.deadletterqueue.context.headers.enable"],
                check(Producer, conf, "dead letter queue producer of %s" % self.id)))
        return out

    def initialize_and_start(self):
        from confluent_kafka import Consumer
        from kbroker.client.rdkafka_props import check
        self._closing = False
        self._last_consumer_warning = 0.0
        self.current = {}          # (topic, partition) -> next offset, put() returned for everything before it
        self.assigned = set()
        self.max_poll_records = self._max_poll_records()
        conf = dict(CONSUMER_DEFAULTS)
        conf["group.id"] = "connect-%s" % self.id.connector
        conf["client.id"] = "connector-consumer-%s" % self.id
        conf.update(self.worker.config.client_config("consumer", self.conn_config.client_overrides("consumer")))
        self.consumer = check(Consumer, conf, "consumer of %s" % self.id)
        self.cooperative = "cooperative" in conf.get("partition.assignment.strategy", "")
        self.context = SinkTaskContext(self.task_props, self._report_errant)
        self.task.initialize(self.context)
        self.task.start(dict(self.task_props))
        topics = self.conn_config.get("topics") or []
        regex = self.conn_config.get("topics.regex") or ""
        # librdkafka subscribes to a pattern when the name starts with "^" and searches it; Kafka's topics.regex
        # must match the whole topic name (Pattern.matches): "^(regex)$".
        subscription = topics if topics else ["^(%s)$" % regex]
        self.consumer.subscribe(subscription, on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _max_poll_records(self):
        """Java's ``max.poll.records`` (``consumer.`` worker key or ``consumer.override.``; librdkafka has no such
        key, so rdkafka_props drops it): the largest batch handed to ``put``."""
        raw = self.conn_config.prefixed("consumer.override.").get("max.poll.records") \
            or self.worker.config.originals.get("consumer.max.poll.records")
        if raw is None:
            return MAX_POLL_RECORDS
        try:
            value = int(str(raw).strip())
        except ValueError:
            value = 0
        if value < 1:
            raise ConfigError("max.poll.records", raw, "Value must be at least 1")
        return value

    def _report_errant(self, record, exc):
        ctx = self.errors.context
        ctx.stage = eh.TASK_PUT
        ctx.executing_class = eh.class_name(self.task)
        ctx.error = exc
        self.errors.report()
        if not self.errors.tolerate_all:
            raise eh.ToleranceExceeded() from exc

    # ------------------------------------------------------------------------------------------------ rebalance
    def _on_assign(self, consumer, partitions):
        tps = [(p.topic, p.partition) for p in partitions]
        self.assigned.update(tps)
        self.context.assigned = set(self.assigned)
        self.task.open(tps)
        for p in partitions:
            reset = self.context.offsets_to_reset.pop((p.topic, p.partition), None)
            if reset is not None:
                p.offset = reset
        if self.cooperative:
            consumer.incremental_assign(partitions)
        else:
            consumer.assign(partitions)
        if self.paused:
            consumer.pause(partitions)

    def _warn_consumer_error(self, err):
        now = time.monotonic()
        if now - self._last_consumer_warning >= 10.0:      # one line per 10 s, not one per consume() call
            self._last_consumer_warning = now
            log.warning("%s consumer error: %s", self.id, err)

    def _on_revoke(self, consumer, partitions):
        if self._closing:
            return      # close() committed and closed the partitions itself
        tps = [(p.topic, p.partition) for p in partitions]
        self.commit_offsets({tp: off for tp, off in self.current.items() if tp in set(tps)})
        try:
            self.task.close(tps)
        finally:
            for tp in tps:
                self.assigned.discard(tp)
                self.current.pop(tp, None)
            self.context.assigned = set(self.assigned)

    # ------------------------------------------------------------------------------------------------ loop
    def execute(self):
        interval = self.worker.config["offset.flush.interval.ms"] / 1000.0
        next_commit = time.monotonic() + interval
        was_paused = False
        while not self.stopping.is_set():
            if self.paused != was_paused:
                self._apply_pause(self.paused)
                was_paused = self.paused
            if time.monotonic() >= next_commit or self.context.commit_requested:
                self.context.commit_requested = False
                self.commit_offsets(dict(self.current))
                next_commit = time.monotonic() + interval
            # Records fetched just before a pause are still delivered: dropping them would move the consumer's
            # position past records that were never put (their offsets committed later: loss).
            msgs = self.consumer.consume(num_messages=self.max_poll_records, timeout=SINK_CONSUME_TIMEOUT)
            batch, offsets = self.convert_messages(msgs)
            if batch or offsets:
                self.deliver(batch, offsets)
            self._apply_context_requests()

    def _apply_pause(self, paused):
        from confluent_kafka import TopicPartition
        parts = [TopicPartition(t, p) for t, p in self.assigned]
        if not parts:
            return
        if paused:
            self.consumer.pause(parts)
        else:
            self.consumer.resume([TopicPartition(t, p) for t, p in self.assigned if (t, p) not in self.context.paused])

    def convert_messages(self, msgs):
        """(batch of SinkRecords, {(topic, partition): next offset}) of consumed ``msgs`` (errors handled)."""
        from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, KafkaError
        ts_names = {TIMESTAMP_CREATE_TIME: "CreateTime", TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}
        batch = []
        offsets = {}
        ctx = self.errors.context
        topics = self._topics
        for msg in msgs:
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                if err.fatal():
                    raise ConnectError("Consumer error: %s" % err)
                # Not fatal (a subscribed topic that does not exist yet, a broker down): librdkafka recovers by
                # itself, as Kafka's consumer does inside poll().
                self._warn_consumer_error(err)
                continue
            topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
            offsets[(topic, partition)] = offset + 1
            ts_type, ts = msg.timestamp()
            ts_name = ts_names.get(ts_type)
            consumed = eh.ConsumedRecord(topic, partition, offset, ts if ts_name else None,
                                         ts_name or "NoTimestampType", msg.key(), msg.value(), msg.headers() or ())
            ctx.reset(consumed=consumed)
            if topic not in topics:
                self.record_active_topic(topic)
            record = self.convert(consumed)
            if record is not None and self.stages:
                record = self.transform(record)
            if record is not None:
                batch.append(record)
        return batch, offsets

    def convert(self, c):
        key = self.errors.execute(eh.KEY_CONVERTER, self.key_converter, self.key_converter.to_connect_data,
                                  c.topic, c.key)
        if key is eh.SKIP:
            return None
        value = self.errors.execute(eh.VALUE_CONVERTER, self.value_converter,
                                    self.value_converter.to_connect_data, c.topic, c.value)
        if value is eh.SKIP:
            return None
        return SinkRecord(c.topic, c.partition, _schema(key), _value(key), _schema(value), _value(value),
                          c.timestamp, tuple(c.headers), kafka_offset=c.offset,
                          timestamp_type=c.timestamp_type)

    def deliver(self, batch, offsets):
        """``task.put(batch)`` (again after a RetriableError, until it succeeds or the task stops); then the
        batch's offsets are committable."""
        while True:
            try:
                self.task.put(list(batch))
                break
            except RetriableError as e:
                wait = self.context.timeout_ms if self.context.timeout_ms is not None else DEFAULT_PUT_RETRY_MS
                log.warning("%s RetriableException from SinkTask: %s; retrying in %d ms", self.id, e, wait)
                if not self._wait_paused(wait / 1000.0):
                    return       # stopping: not put, so its offsets are not committed
            except eh.ToleranceExceeded:
                raise
            except Exception as e:
                raise ConnectError("Exiting WorkerSinkTask due to unrecoverable exception.") from e
        for tp, off in offsets.items():
            if tp in self.assigned:
                self.current[tp] = off

    def _wait_paused(self, seconds):
        """Wait ``seconds`` before the batch is offered again, as Kafka's: every partition paused and the consumer
        still polled (librdkafka's max.poll.interval.ms would otherwise take the task out of its group during a
        long wait). A record that still arrives (fetched before the pause, or of a partition assigned meanwhile)
        is not lost: its partition is rewound to it afterwards. False when the task is stopping."""
        from confluent_kafka import TopicPartition
        parts = [TopicPartition(t, p) for t, p in sorted(self.assigned)]
        if parts:
            self.consumer.pause(parts)
        rewind = {}
        deadline = time.monotonic() + seconds
        try:
            while not self.stopping.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    return True
                for msg in self.consumer.consume(num_messages=self.max_poll_records,
                                                 timeout=min(left, SINK_CONSUME_TIMEOUT)):
                    if msg.error() is None:
                        tp = (msg.topic(), msg.partition())
                        rewind[tp] = min(rewind.get(tp, msg.offset()), msg.offset())
            return False
        finally:
            for (t, p), off in rewind.items():
                if (t, p) in self.assigned:
                    self.consumer.seek(TopicPartition(t, p, off))
            keep = self.context.paused
            resume = [TopicPartition(t, p) for t, p in sorted(self.assigned) if (t, p) not in keep]
            if resume and not self.paused:
                self.consumer.resume(resume)

    def _apply_context_requests(self):
        from confluent_kafka import TopicPartition
        ctx = self.context
        if ctx.offsets_to_reset:
            for tp, off in list(ctx.offsets_to_reset.items()):
                if tp in self.assigned:
                    self.consumer.seek(TopicPartition(tp[0], tp[1], off))
                    self.current[tp] = off
                    del ctx.offsets_to_reset[tp]
        while ctx.pause_changes:
            what, tps = ctx.pause_changes.pop(0)
            parts = [TopicPartition(t, p) for t, p in tps]
            if what == "pause":
                self.consumer.pause(parts)
            elif not self.paused:
                self.consumer.resume(parts)

    def commit_offsets(self, offsets):
        """pre_commit -> flush the DLQ -> synchronous consumer commit of what pre_commit returned."""
        from confluent_kafka import TopicPartition
        if not offsets:
            return True
        try:
            committable = self.task.pre_commit(dict(offsets))
        except Exception as e:
            log.error("%s Commit of offsets threw an unexpected exception: %s", self.id, e, exc_info=e)
            return False
        if not committable:
            return True
        if not self.errors.flush(self.worker.config["offset.flush.timeout.ms"] / 1000.0):
            log.error("%s dead letter queue records not acknowledged in time: offsets not committed", self.id)
            return False
        parts = [TopicPartition(t, p, int(o)) for (t, p), o in sorted(committable.items())
                 if (t, p) in self.assigned]
        if not parts:
            return True
        try:
            self.consumer.commit(offsets=parts, asynchronous=False)
        except Exception as e:
            log.error("%s Commit of offsets failed: %s", self.id, e)
            return False
        return True

    def close(self):
        consumer = getattr(self, "consumer", None)
        if consumer is None:
            return
        self._closing = True
        try:
            if not self.failed and not self.abandoned:
                self.commit_offsets(dict(self.current))
            if self.assigned:
                try:
                    self.task.close(sorted(self.assigned))
                except Exception as e:
                    log.error("%s task.close() failed: %s", self.id, e)
        finally:
            self.assigned.clear()
            consumer.close()


def _class_path(cls):
    return "%s.%s" % (cls.__module__, cls.__qualname__)


def _schema(sv):
    return getattr(sv, "schema", None) if sv is not None else None


def _value(sv):
    if sv is None:
        return None
    return getattr(sv, "value", sv)


class Worker:
    """See the module docstring. Thread-safe: the herder calls it from REST threads and its own."""

    def __init__(self, config, plugins, offset_store, status_store, worker_id):
        self.config = config
        self.plugins = plugins
        self.offset_store = offset_store
        self.status_store = status_store
        self.worker_id = worker_id
        self._generation = 0
        self._lock = threading.RLock()
        self._connectors = {}
        self._tasks = {}

    @property
    def generation(self):
        """The group generation statuses carry: the status store's (the distributed herder sets it there), else
        the one set here (standalone: 0)."""
        return getattr(self.status_store, "generation", self._generation)

    @generation.setter
    def generation(self, value):
        self._generation = value

    def start(self):
        """Starts the offset store (the herder owns the status store, as Kafka's)."""
        self.offset_store.start()

    def stop(self):
        with self._lock:
            tasks = list(self._tasks)
            names = list(self._connectors)
        self.stop_tasks(tasks)
        for name in names:
            self.stop_connector(name)
        self.offset_store.stop()

    def _put(self, status):
        try:
            self.status_store.put(status)
        except Exception as e:
            log.error("cannot write status %s: %s", status, e)

    # ------------------------------------------------------------------------------------------------ plugins
    def _converter(self, conn_config, key, is_key):
        cls_name = conn_config.get(key)
        if cls_name:
            configs = conn_config.prefixed(key + ".")
        else:
            cls_name = self.config[key]
            configs = self.config.converter_configs(key)
        converter = self.plugins.converter_class(cls_name)()
        converter.configure(configs, is_key)
        return converter

    def _header_converter(self, conn_config):
        cls_name = conn_config.get("header.converter")
        if cls_name:
            configs = conn_config.prefixed("header.converter.")
        else:
            cls_name = self.config["header.converter"]
            configs = self.config.converter_configs("header.converter")
        try:
            cls = self.plugins.header_converter_class(cls_name)
        except ConfigError:
            if conn_config.get("header.converter"):
                raise
            return None       # the default SimpleHeaderConverter is not there yet: bytes headers only
        converter = cls()
        if hasattr(converter, "configure"):
            try:
                converter.configure(configs)
            except TypeError:
                converter.configure(configs, False)
        return converter

    # ------------------------------------------------------------------------------------------------ connectors
    def start_connector(self, name, props, on_reconfigure, target_state=STARTED):
        """Instantiate, initialize and (unless paused/stopped) start ``name``; True when it is running/paused.
        FAILED status with the trace (and False) when its config or start fails."""
        with self._lock:
            if name in self._connectors:
                raise ConnectError("Connector %s already running on this worker" % name)
        self._put(ConnectorStatus(name, st.UNASSIGNED, None, self.worker_id, self.generation))
        try:
            cls = self.plugins.connector_class(props.get("connector.class", ""))
            ConnectorConfig(self.plugins, props, connector_type_of(cls), self.config)
            connector = cls()
        except Exception as e:
            log.error("Failed to start connector %s: %s", name, e)
            self._put(ConnectorStatus(name, st.FAILED, _trace(e), self.worker_id, self.generation))
            return False
        wc = WorkerConnector(self, name, props, connector, on_reconfigure)
        try:
            wc.initialize()
        except Exception as e:
            wc.fail(e)
            return False
        with self._lock:
            self._connectors[name] = wc
        return wc.transition(target_state)

    def connector_task_configs(self, name, props):
        """The connector's ``task_configs(tasks.max)``, each with ``task.class`` (and, for sinks, ``topics`` /
        ``topics.regex``) added as Kafka's Worker.connectorTaskConfigs does; values as str."""
        wc = self._connector(name)
        conn_config = ConnectorConfig(self.plugins, props, wc.kind, self.config)
        max_tasks = conn_config["tasks.max"]
        with wc.lock:
            if not wc.started:
                raise ConnectError("Connector %s is not running" % name)
            configs = wc.connector.task_configs(max_tasks)
            task_cls = wc.connector.task_class()
        configs = list(configs or [])
        if len(configs) > max_tasks:
            raise ConnectError("Connector %s generated %d tasks, which is greater than %d, the maximum number of "
                               "tasks it is configured to create." % (name, len(configs), max_tasks))
        out = []
        for c in configs:
            c = _str_map(c)
            c[TASK_CLASS] = _class_path(task_cls)
            if wc.kind == "sink":
                for key in ("topics", "topics.regex"):
                    if props.get(key):
                        c[key] = props[key]
            out.append(c)
        return out

    def _connector(self, name):
        with self._lock:
            wc = self._connectors.get(name)
        if wc is None:
            raise ConnectError("Connector %s not found in this worker" % name)
        return wc

    def stop_connector(self, name):
        with self._lock:
            wc = self._connectors.pop(name, None)
        if wc is None:
            return False
        wc.shutdown()
        if wc.state != "FAILED":
            self._put(ConnectorStatus(name, st.UNASSIGNED, None, self.worker_id, self.generation))
        return True

    def is_running(self, name):
        with self._lock:
            wc = self._connectors.get(name)
        return wc is not None and wc.started

    # ------------------------------------------------------------------------------------------------ tasks
    def start_task(self, task_id, connector_props, task_props, target_state=STARTED):
        """Start ``task_id`` in a thread of its own; True when its thread started. FAILED status with the trace
        (and False) when its config, class, clients or converters cannot be made."""
        if not isinstance(task_id, ConnectorTaskId):
            task_id = ConnectorTaskId(*task_id)
        with self._lock:
            if task_id in self._tasks:
                raise ConnectError("Task already exists in this worker: %s" % task_id)
        self._put(TaskStatus(task_id, st.UNASSIGNED, None, self.worker_id, self.generation))
        try:
            conn_cls = self.plugins.connector_class(connector_props.get("connector.class", ""))
            kind = connector_type_of(conn_cls)
            conn_config = ConnectorConfig(self.plugins, connector_props, kind, self.config)
            task_cls_name = task_props.get(TASK_CLASS)
            task_cls = self._task_class(task_cls_name, conn_cls)
            task = task_cls()
            worker_task_cls = WorkerSourceTask if isinstance(task, SourceTask) else WorkerSinkTask
            if (kind == "source") != (worker_task_cls is WorkerSourceTask):
                raise ConfigError("Task %s of a %s connector is not a %s task" % (task_cls.__name__, kind, kind))
            wt = worker_task_cls(self, task_id, conn_config, task_props, task, target_state)
        except Exception as e:
            log.error("Failed to start task %s: %s", task_id, e, exc_info=e)
            self._put(TaskStatus(task_id, st.FAILED, _trace(e), self.worker_id, self.generation))
            return False
        with self._lock:
            self._tasks[task_id] = wt
        wt.start()
        return True

    def _task_class(self, name, conn_cls):
        """The class ``task.class`` names: the connector's own ``task_class()`` when the names agree (the usual
        case; it also covers classes no import path reaches), else imported by name."""
        own = conn_cls().task_class()
        if not name or name == _class_path(own):
            return own
        from kbroker.connect.plugins import import_class
        try:
            return import_class(name)
        except (ImportError, AttributeError, ValueError) as e:
            raise ConfigError(TASK_CLASS, name, "cannot load the task class: %s" % e) from None

    def stop_tasks(self, task_ids):
        """Stop ``task_ids`` and wait for them, task.shutdown.graceful.timeout.ms in all; each commits its
        offsets before it ends. Returns the ids still running when the time was up (abandoned)."""
        ids = [t if isinstance(t, ConnectorTaskId) else ConnectorTaskId(*t) for t in task_ids]
        with self._lock:
            tasks = [self._tasks.pop(t) for t in ids if t in self._tasks]
        for wt in tasks:
            wt.signal_stop()
            if isinstance(wt, WorkerSourceTask):
                threading.Thread(target=wt.wake, name="stop-%s" % wt.id, daemon=True).start()
        deadline = time.monotonic() + self.config["task.shutdown.graceful.timeout.ms"] / 1000.0
        abandoned = []
        for wt in tasks:
            wt.thread.join(max(0.0, deadline - time.monotonic()))
            if wt.thread.is_alive():
                wt.abandoned = True
                abandoned.append(wt.id)
                log.error("Graceful stop of task %s failed.", wt.id)
        return abandoned

    def set_target_state(self, name, state):
        """STARTED | PAUSED | STOPPED for ``name`` and its running tasks (tasks are paused, not stopped)."""
        with self._lock:
            wc = self._connectors.get(name)
            tasks = [t for tid, t in self._tasks.items() if tid.connector == name]
        if wc is not None:
            wc.transition(state)
        if state in (STARTED, PAUSED):
            for wt in tasks:
                wt.set_target_state(state)

    def connector_names(self):
        with self._lock:
            return set(self._connectors)

    def task_ids(self):
        with self._lock:
            return set(self._tasks)

    def task_state(self, task_id):
        """"running" | "failed" | "stopped" (thread ended) for a task of this worker; None when unknown."""
        with self._lock:
            wt = self._tasks.get(task_id)
        if wt is None:
            return None
        if wt.failed:
            return "failed"
        return "running" if wt.thread.is_alive() else "stopped"

    def active_topics(self, name):
        return self.status_store.topics_of(name)
