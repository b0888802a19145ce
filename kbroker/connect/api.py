"""The connector API (Kafka's org.apache.kafka.connect.connector / source / sink), for connectors written in Python.

Lifecycle, as Kafka's worker drives it (kbroker/connect/worker.py):

- Connector: ``initialize(context)`` -> ``start(props)`` -> ``task_configs(max_tasks)`` (again whenever the
  connector calls ``context.request_task_reconfiguration()``) -> ``stop()``. ``task_class()`` names the Task class.
  ``validate(props)`` runs before a connector is created or updated (REST ``.../config/validate`` too).
- SourceTask: ``initialize(context)`` -> ``start(props)`` -> ``poll()`` repeatedly (None or [] when nothing is ready;
  it should not block more than about a second, so that pause/stop are seen promptly) -> ``commit()`` after the
  worker wrote the offsets of the records acknowledged so far; ``commit_record(record, metadata)`` once per record
  when the producer acknowledged it -> ``stop()`` (from another thread, as Kafka's: wake ``poll`` up).
- SinkTask: ``initialize(context)`` -> ``start(props)`` -> ``open(partitions)`` on assignment -> ``put(records)``
  -> ``pre_commit(offsets)`` (default: ``flush(offsets)`` and return them) before the worker commits the consumer's
  offsets -> ``close(partitions)`` on revocation -> ``stop()``.

Offsets handed to ``flush``/``pre_commit`` are ``{(topic, partition): next_offset_to_consume}`` (Kafka's
OffsetAndMetadata: the offset after the last record put). Tasks signal failure by raising; RetriableError (from
kbroker.connect.exceptions) in ``poll``/``put`` makes the worker try again instead of failing the task.
"""
from kbroker.connect.exceptions import ConnectError


class ConnectorContext:
    """What a connector may ask of the runtime (Kafka's ConnectorContext)."""

    def __init__(self, on_reconfigure=None, on_error=None):
        self._on_reconfigure = on_reconfigure
        self._on_error = on_error

    def request_task_reconfiguration(self):
        """The connector's task configs changed (e.g. new tables): the herder asks ``task_configs`` again."""
        if self._on_reconfigure is not None:
            self._on_reconfigure()

    def raise_error(self, exc):
        """The connector failed in a background thread of its own: its status becomes FAILED with ``exc``'s trace."""
        if self._on_error is not None:
            self._on_error(exc)


class Connector:
    """A connector: splits a job into task configs. Subclass SourceConnector or SinkConnector."""

    context = None

    def version(self):
        return "unknown"

    def initialize(self, context):
        self.context = context

    def start(self, props):
        raise NotImplementedError

    def task_class(self):
        raise NotImplementedError

    def task_configs(self, max_tasks):
        """At most ``max_tasks`` dicts of str -> str, one per task."""
        raise NotImplementedError

    def stop(self):
        raise NotImplementedError

    def config_def(self):
        """This connector's own keys (kbroker.connect.configdef.ConfigDef); the runtime adds the common ones."""
        from kbroker.connect.configdef import ConfigDef
        return ConfigDef()

    def validate(self, props):
        """[ConfigValue] for ``props`` (Kafka's Connector.validate: the config def's validation)."""
        return self.config_def().validate(props)


class SourceConnector(Connector):
    pass


class SinkConnector(Connector):
    pass


class Task:
    """A task: does the copying. ``start`` gets one of the connector's ``task_configs``."""

    context = None

    def version(self):
        return "unknown"

    def start(self, props):
        raise NotImplementedError

    def stop(self):
        raise NotImplementedError


class SourceTaskContext:
    """Kafka's SourceTaskContext: the task's config and the reader of its committed offsets."""

    def __init__(self, configs, offset_reader):
        self._configs = dict(configs)
        self._reader = offset_reader

    def configs(self):
        return dict(self._configs)

    def offset_storage_reader(self):
        """kbroker.connect.offsets.OffsetStorageReader: ``offset(partition)`` -> the last committed offset dict."""
        return self._reader


class SourceTask(Task):
    def initialize(self, context):
        self.context = context

    def poll(self):
        """A list of SourceRecord, or None / [] when there is nothing now."""
        raise NotImplementedError

    def commit(self):
        """The worker committed the offsets of every record acknowledged so far (Kafka's SourceTask.commit)."""

    def commit_record(self, record, metadata):
        """``record`` was acknowledged by the cluster; ``metadata`` is (topic, partition, offset), or None when the
        record was dropped by a transform or skipped by the error handler."""


class SinkTaskContext:
    """Kafka's SinkTaskContext. The worker reads the requests (offsets to reset, pauses, commit) after each ``put``.

    ``offset`` resets where consumption resumes: ``offset((topic, partition), 42)`` or ``offset({tp: 42, ...})``.
    """

    def __init__(self, configs, reporter=None):
        self._configs = dict(configs)
        self._reporter = reporter
        self.offsets_to_reset = {}
        self.timeout_ms = None
        self.commit_requested = False
        self.paused = set()
        self.assigned = set()
        self.pause_changes = []   # [("pause"|"resume", tps)], drained by the worker's loop

    def configs(self):
        return dict(self._configs)

    def offset(self, tp_or_dict, offset=None):
        if isinstance(tp_or_dict, dict):
            for tp, off in tp_or_dict.items():
                self.offsets_to_reset[tuple(tp)] = int(off)
        else:
            if offset is None:
                raise ConnectError("offset(tp, offset) needs an offset")
            self.offsets_to_reset[tuple(tp_or_dict)] = int(offset)

    def timeout(self, ms):
        """After a RetriableError from ``put``, wait ``ms`` before redelivering the same records."""
        self.timeout_ms = int(ms)

    def assignment(self):
        return set(self.assigned)

    def pause(self, *tps):
        tps = [tuple(tp) for tp in tps]
        unknown = [tp for tp in tps if tp not in self.assigned]
        if unknown:
            raise ConnectError("Cannot pause partitions %s that are not assigned" % unknown)
        self.paused.update(tps)
        self.pause_changes.append(("pause", tps))

    def resume(self, *tps):
        tps = [tuple(tp) for tp in tps]
        unknown = [tp for tp in tps if tp not in self.assigned]
        if unknown:
            raise ConnectError("Cannot resume partitions %s that are not assigned" % unknown)
        self.paused.difference_update(tps)
        self.pause_changes.append(("resume", tps))

    def request_commit(self):
        self.commit_requested = True

    def errant_record_reporter(self):
        """KIP-610: ``reporter(record, exc)`` sends a SinkRecord the task cannot handle to the error handler (log,
        dead letter queue) under errors.tolerance=all; None when the worker has no error reporting configured."""
        return self._reporter


class SinkTask(Task):
    def initialize(self, context):
        self.context = context

    def put(self, records):
        raise NotImplementedError

    def flush(self, offsets):
        """Make everything put so far durable (``offsets``: {(topic, partition): next offset})."""

    def pre_commit(self, offsets):
        """The offsets the worker may commit now (Kafka's default: flush, then all of them)."""
        self.flush(offsets)
        return offsets

    def open(self, partitions):
        """The worker was assigned ``partitions`` [(topic, partition)]."""

    def close(self, partitions):
        """``partitions`` are revoked; their offsets were committed just before."""
