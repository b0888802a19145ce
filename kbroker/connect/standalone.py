"""The standalone herder (Kafka's StandaloneHerder): one worker process runs every connector and task; connector
configs live in memory (the connector files on the command line and REST calls), offsets in
``offset.storage.file.filename`` (the worker's FileOffsetBackingStore), statuses in memory.

State, all under one lock (REST calls arrive on concurrent threads; Kafka's herder is ``synchronized``):

- ``_configs[name]``: the connector's config as given (``name`` included), insertion-ordered;
- ``_targets[name]``: "STARTED" | "PAUSED" | "STOPPED" (Kafka's TargetState);
- ``_tasks[name]``: the task configs the connector generated (``task_configs(tasks.max)``); task ``n`` of
  ``name`` runs with ``_tasks[name][n]``.

Lifecycle (as Kafka's): a put (create or replace) validates the config first (400 with Kafka's message listing
every error), stops the old connector instance, starts the new one, then regenerates the task configs and
restarts the tasks only when those changed. A connector that throws in ``start`` stays configured with status
FAILED and its trace (the create itself answers 201). ``on_reconfigure`` (a connector's
``context.request_task_reconfiguration()``) is queued to the herder's own thread, never run on the connector's.
Pause/resume change the target state of the running connector and tasks (a paused source polls nothing); stop
(KIP-875) stops the tasks and drops their configs, the connector's status is STOPPED; resume of a stopped
connector starts it again. Restart of a connector leaves its tasks alone unless their configs change; restart of
a task stops it (offsets committed first) and starts it with the same config.
"""
from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from kbroker.connect import connector_config
from kbroker.connect.exceptions import (AlreadyExistsError, BadRequestError, ConfigError, ConnectError,
                                        NotFoundError, ServiceUnavailableError)
from kbroker.connect.herder import WorkerHerder
from kbroker.connect.records import ConnectorTaskId
from kbroker.connect.status import ConnectorStatus

log = logging.getLogger("kbroker.connect.standalone")

STARTED, PAUSED, STOPPED = "STARTED", "PAUSED", "STOPPED"


def _freeze(partition):
    return tuple(sorted(partition.items())) if isinstance(partition, dict) else partition


class StandaloneHerder(WorkerHerder):
    """See the module docstring. ``status_store`` defaults to the worker's (``worker.status_store``)."""

    def __init__(self, worker, plugins, cluster_id, worker_id, status_store=None):
        self._worker = worker
        self._plugins = plugins
        self._cluster_id = cluster_id
        self._worker_id = worker_id
        self._status = status_store if status_store is not None else worker.status_store
        self._lock = threading.RLock()
        self._configs = {}
        self._targets = {}
        self._tasks = {}
        self._running = False
        # Kafka's requestExecutorService: task reconfigurations a connector asks for run here, one at a time.
        self._executor = None

    # ------------------------------------------------------------------------------------------------ lifecycle
    def start(self):
        with self._lock:
            if self._running:
                return
            log.info("Herder starting")
            self._status.start()          # the herder owns the status store; the worker its offset store
            self._worker.start()
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="connect-herder")
            self._running = True
            log.info("Herder started")

    def stop(self):
        with self._lock:
            if not self._running:
                return
            log.info("Herder stopping")
            self._running = False
            executor, self._executor = self._executor, None
        executor.shutdown(wait=True)
        with self._lock:
            for name in sorted(self._configs):
                try:
                    self._remove_tasks(name, forget_status=False)
                    self._worker.stop_connector(name)
                except Exception:   # keep stopping the others; each stop is bounded by the worker
                    log.exception("Failed to stop connector %s", name)
            self._worker.stop()
            self._status.stop()
            log.info("Herder stopped")

    def kafka_cluster_id(self):
        return self._cluster_id

    def worker_id(self):
        return self._worker_id

    def _check_running(self):
        if not self._running:
            raise ServiceUnavailableError("The herder is not running (starting or stopping)")

    def _require(self, name, message="Connector %s not found"):
        if name not in self._configs:
            raise NotFoundError(message % name)

    # ------------------------------------------------------------------------------------------------ reads
    def connectors(self):
        with self._lock:
            return sorted(self._configs)

    def _type(self, config):
        cls = (config or {}).get("connector.class")
        if not cls:
            return "unknown"
        try:
            return self._plugins.connector_type(cls)
        except Exception:   # a plugin that cannot be loaded any more: Kafka says "unknown" too
            return "unknown"

    def _info(self, name):
        config = self._configs[name]
        return {"name": name, "config": dict(config),
                "tasks": [ConnectorTaskId(name, i).to_json() for i in range(len(self._tasks.get(name, ())))],
                "type": self._type(config)}

    def connector_info(self, name):
        with self._lock:
            self._require(name)
            return self._info(name)

    def connector_config(self, name):
        with self._lock:
            self._require(name)
            return dict(self._configs[name])

    def task_configs(self, name):
        with self._lock:
            self._require(name)
            return [{"id": ConnectorTaskId(name, i).to_json(), "config": dict(c)}
                    for i, c in enumerate(self._tasks.get(name, ()))]

    def connector_status(self, name):
        # Not under the lock (as Kafka's, whose status reads are not synchronized): a status read must not wait
        # for a put or a stop holding the lock while tasks stop (up to task.shutdown.graceful.timeout.ms). The
        # status store is thread-safe and a dict lookup is atomic.
        status = self._status.get_connector(name)
        if status is None:
            raise NotFoundError("No status found for connector %s" % name)
        ntasks = len(self._tasks.get(name, ()))
        config = self._configs.get(name) or {}
        version = self._plugin_version(config)
        tasks = [self._with_version(t.to_json(), version) for t in self._status.tasks_of(name) if t.id.task < ntasks]
        return {"name": name, "connector": self._with_version(status.to_json(), version), "tasks": tasks,
                "type": self._type(config)}

    def task_status(self, name, task):
        task_id = ConnectorTaskId(name, int(task))
        status = self._status.get_task(task_id)
        if status is None:
            raise NotFoundError("No status found for task %s" % task_id)
        return self._with_version(status.to_json(), self._plugin_version(self._configs.get(name) or {}))

    def connector_active_topics(self, name):
        # Kafka answers an empty list (not 404) for a connector it does not know.
        return sorted(self._status.topics_of(name))

    def reset_connector_active_topics(self, name):
        self._status.reset_topics(name)

    def connector_plugins(self):
        return self._plugins.connector_plugins()

    def connector_offsets(self, name):
        """KIP-875 ``GET /connectors/{name}/offsets``: ``{"offsets": [{"partition": {...}, "offset": {...}}]}`` --
        a source's from the offset store, a sink's from its consumer group ``connect-<name>`` (partition
        ``{"kafka_topic", "kafka_partition"}``, offset ``{"kafka_offset"}``), as Kafka answers."""
        with self._lock:
            self._require(name)
            config = dict(self._configs[name])
        if self._type(config) == "sink":
            return {"offsets": self._sink_offsets(name)}
        from kbroker.connect.offsets import parse_key, parse_value
        out = []
        for key, value in sorted(self._worker.offset_store.snapshot().items()):
            connector, partition = parse_key(key)
            if connector == name and value is not None:
                out.append({"partition": partition, "offset": parse_value(value)})
        return {"offsets": out}

    def alter_connector_offsets(self, name, offsets):
        """KIP-875 ``PATCH /connectors/{name}/offsets``: ``offsets`` is the request's list of
        ``{"partition", "offset"}`` (a null offset removes the partition's); the connector must be STOPPED."""
        return self._modify_offsets(name, offsets)

    def reset_connector_offsets(self, name):
        """KIP-875 ``DELETE /connectors/{name}/offsets``: every offset of the connector removed (a sink's
        consumer group deleted); the connector must be STOPPED."""
        return self._modify_offsets(name, None)

    def _modify_offsets(self, name, offsets):
        with self._lock:
            self._check_running()
            self._require(name)
            if self._targets[name] != STOPPED or self._tasks.get(name):
                raise BadRequestError("Connectors must be in the STOPPED state before their offsets can be modified. "
                                      "This can be done for the specified connector by issuing a 'PUT' request to "
                                      "the '/connectors/%s/stop' endpoint" % name)
            config = dict(self._configs[name])
            kind = "altered" if offsets is not None else "reset"
            if self._type(config) == "sink":
                self._modify_sink_offsets(name, offsets)
            else:
                self._modify_source_offsets(name, offsets)
        hook = getattr(self._plugins.connector_class(config["connector.class"]), "alter_offsets", None)
        if hook is not None and hook(self._plugins.connector_class(config["connector.class"])(), config,
                                     {} if offsets is None else
                                     {_freeze(o["partition"]): o["offset"] for o in offsets}):
            return {"message": "The offsets for this connector have been %s successfully" % kind}
        return {"message": "The Connect framework-managed offsets for this connector have been %s successfully. "
                           "However, if this connector manages offsets externally, they will need to be manually %s "
                           "in the system that the connector uses." % (kind, kind)}

    def connector_plugin_config(self, plugin):
        from kbroker.connect.configdef import key_info_json
        try:
            cls = self._plugins.connector_class(plugin)
        except ConfigError:
            raise NotFoundError("Unknown plugin %s." % plugin) from None
        return [key_info_json(key) for key in cls().config_def().keys().values()]

    def validate_connector_config(self, plugin, config):
        return connector_config.validate(self._plugins, config, getattr(self._worker, "config", None))

    # ------------------------------------------------------------------------------------------------ writes
    def put_connector_config(self, name, config, allow_replace, target_state=None):
        config = dict(config)
        errors = connector_config.connector_config_errors(self._plugins, config,
                                                          getattr(self._worker, "config", None))
        if errors:
            raise BadRequestError(connector_config.invalid_config_message(errors))
        with self._lock:
            self._check_running()
            if name in self._configs:
                if not allow_replace:
                    raise AlreadyExistsError("Connector %s already exists" % name)
                created = False
                self._remove_tasks(name)
                self._worker.stop_connector(name)
                state = target_state or self._targets[name]
            else:
                created = True
                state = target_state or STARTED
            self._configs[name] = config
            self._targets[name] = state
            self._tasks[name] = []
            log.info("%s connector %s (target state %s)", "Creating" if created else "Reconfiguring", name, state)
            self._start_connector(name)
            return created, self._info(name)

    def delete_connector(self, name):
        with self._lock:
            self._check_running()
            self._require(name)
            self._remove_tasks(name)
            self._worker.stop_connector(name)
            del self._configs[name], self._targets[name], self._tasks[name]
            self._status.delete_connector(name)
            log.info("Deleted connector %s", name)

    def pause_connector(self, name):
        self._set_target(name, PAUSED)

    def resume_connector(self, name):
        self._set_target(name, STARTED)

    def _set_target(self, name, state):
        with self._lock:
            self._check_running()
            self._require(name, "Unknown connector %s")
            previous = self._targets[name]
            self._targets[name] = state
            if previous == STOPPED:
                self._start_connector(name)
                return
            self._worker.set_target_state(name, state)
            if state == STARTED:
                self._update_tasks(name)

    def stop_connector(self, name):
        with self._lock:
            self._check_running()
            self._require(name, "Unknown connector %s")
            self._remove_tasks(name)
            self._worker.stop_connector(name)
            self._targets[name] = STOPPED
            self._status.put(ConnectorStatus(name, STOPPED, None, self._worker_id, 0))

    def restart_connector(self, name):
        with self._lock:
            self._check_running()
            self._require(name)
            if self._targets[name] == STOPPED:
                return       # a stopped connector has no running instance to restart
            self._worker.stop_connector(name)
            self._start_connector(name)

    def restart_task(self, name, task):
        with self._lock:
            self._check_running()
            self._require(name)
            task = int(task)
            tasks = self._tasks.get(name, [])
            task_id = ConnectorTaskId(name, task)
            if not 0 <= task < len(tasks):
                raise NotFoundError("Task %s not found" % task_id)
            self._worker.stop_tasks([task_id])
            if not self._worker.start_task(task_id, self._configs[name], tasks[task], self._targets[name]):
                raise ConnectError("Failed to start task: %s" % task_id)

    # ------------------------------------------------------------------------------------------------ internals
    def _start_connector(self, name):
        """Start ``name``'s instance in its target state, then its tasks (STARTED only). Lock held."""
        state = self._targets[name]
        if state == STOPPED:
            self._status.put(ConnectorStatus(name, STOPPED, None, self._worker_id, 0))
            return
        started = self._worker.start_connector(name, self._configs[name], self._on_reconfigure, state)
        if started:
            self._update_tasks(name)
        else:
            log.error("Connector %s failed to start (its status has the trace)", name)

    def _update_tasks(self, name):
        """Regenerate ``name``'s task configs; restart its tasks when they changed. Lock held."""
        if self._targets.get(name) != STARTED or not self._connector_running(name):
            return
        try:
            new = self._worker.connector_task_configs(name, self._configs[name])
        except Exception:
            # The connector's task_configs threw: no tasks, and the connector is FAILED with the trace.
            import traceback
            log.exception("Connector %s failed to generate task configs", name)
            self._status.put(ConnectorStatus(name, "FAILED", traceback.format_exc(), self._worker_id, 0))
            return
        if new == self._tasks.get(name):
            return
        self._remove_tasks(name)
        self._tasks[name] = [dict(c) for c in new]
        for i, task_config in enumerate(self._tasks[name]):
            self._worker.start_task(ConnectorTaskId(name, i), self._configs[name], task_config, STARTED)

    def _connector_running(self, name):
        is_running = getattr(self._worker, "is_running", None)
        return is_running(name) if is_running is not None else name in self._worker.connector_names()

    def _remove_tasks(self, name, forget_status=True):
        """Stop every task of ``name`` (offsets committed first, bounded by the worker) and drop their configs."""
        ids = [ConnectorTaskId(name, i) for i in range(len(self._tasks.get(name, ())))]
        if not ids:
            return
        self._worker.stop_tasks(ids)
        self._tasks[name] = []
        if forget_status:
            for task_id in ids:
                self._status.delete_task(task_id)

    def _on_reconfigure(self, name):
        """A connector asked for new task configs (any thread): queued to the herder's thread."""
        executor = self._executor
        if executor is None:
            return
        try:
            executor.submit(self._reconfigure, name)
        except RuntimeError:   # shutting down
            pass

    def _reconfigure(self, name):
        with self._lock:
            if not self._running or name not in self._configs:
                return
            try:
                self._update_tasks(name)
            except Exception:
                log.exception("Task reconfiguration of connector %s failed", name)
