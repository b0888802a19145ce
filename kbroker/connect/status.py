"""Connector and task statuses, and the active topics of KIP-558 (Kafka's StatusBackingStore).

States (Kafka's AbstractStatus.State): UNASSIGNED, RUNNING, PAUSED, FAILED, RESTARTING, STOPPED, DESTROYED.
``trace`` is the failure's stack trace (FAILED only, else None). ``generation`` is the group generation of the
worker that wrote the status (standalone: 0); the distributed store ignores a status of an older generation from
another worker, as Kafka's does.

Active topics: ``put_topic`` records that a task of ``connector`` produced to / consumed from ``topic``; they are
kept until ``reset_topics`` (REST ``PUT /connectors/{name}/topics/reset``) or the connector's deletion.
"""
import threading
from dataclasses import dataclass

from kbroker.connect.records import ConnectorTaskId

UNASSIGNED = "UNASSIGNED"
RUNNING = "RUNNING"
PAUSED = "PAUSED"
FAILED = "FAILED"
RESTARTING = "RESTARTING"
STOPPED = "STOPPED"
DESTROYED = "DESTROYED"
STATES = (UNASSIGNED, RUNNING, PAUSED, FAILED, RESTARTING, STOPPED, DESTROYED)


@dataclass
class ConnectorStatus:
    connector: str
    state: str
    trace: str | None = None
    worker_id: str = ""
    generation: int = 0

    def to_json(self):
        """The REST shape of ``connector`` in ``GET /connectors/{name}/status``."""
        out = {"state": self.state, "worker_id": self.worker_id}
        if self.trace is not None:
            out["trace"] = self.trace
        return out


@dataclass
class TaskStatus:
    id: ConnectorTaskId
    state: str
    trace: str | None = None
    worker_id: str = ""
    generation: int = 0

    def to_json(self):
        """The REST shape of one entry of ``tasks`` in ``GET /connectors/{name}/status``."""
        out = {"id": self.id.task, "state": self.state, "worker_id": self.worker_id}
        if self.trace is not None:
            out["trace"] = self.trace
        return out


class StatusBackingStore:
    def start(self):
        pass

    def stop(self):
        pass

    def put(self, status):
        """Record a ConnectorStatus or TaskStatus (the newest wins)."""
        raise NotImplementedError

    def get_connector(self, name):
        raise NotImplementedError

    def get_task(self, task_id):
        raise NotImplementedError

    def tasks_of(self, name):
        """TaskStatus of every task of ``name`` known, sorted by task number."""
        raise NotImplementedError

    def connectors(self):
        raise NotImplementedError

    def delete_connector(self, name):
        """Forget ``name``: its status, its tasks' statuses and its active topics."""
        raise NotImplementedError

    def delete_task(self, task_id):
        raise NotImplementedError

    def put_topic(self, connector, topic, task_id):
        raise NotImplementedError

    def topics_of(self, connector):
        raise NotImplementedError

    def reset_topics(self, connector):
        raise NotImplementedError


class MemoryStatusBackingStore(StatusBackingStore):
    """Statuses in memory (standalone mode, as Kafka's MemoryStatusBackingStore). Thread-safe."""

    def __init__(self):
        self._lock = threading.Lock()
        self._connectors = {}
        self._tasks = {}      # connector -> {task number: TaskStatus}
        self._topics = {}     # connector -> {topic: ConnectorTaskId of the first task that used it}

    def put(self, status):
        with self._lock:
            if isinstance(status, ConnectorStatus):
                self._connectors[status.connector] = status
            elif isinstance(status, TaskStatus):
                self._tasks.setdefault(status.id.connector, {})[status.id.task] = status
            else:
                raise TypeError("not a status: %r" % (status,))

    def get_connector(self, name):
        with self._lock:
            return self._connectors.get(name)

    def get_task(self, task_id):
        with self._lock:
            return self._tasks.get(task_id.connector, {}).get(task_id.task)

    def tasks_of(self, name):
        with self._lock:
            tasks = self._tasks.get(name, {})
            return [tasks[n] for n in sorted(tasks)]

    def connectors(self):
        with self._lock:
            return set(self._connectors) | {c for c, t in self._tasks.items() if t}

    def delete_connector(self, name):
        with self._lock:
            self._connectors.pop(name, None)
            self._tasks.pop(name, None)
            self._topics.pop(name, None)

    def delete_task(self, task_id):
        with self._lock:
            self._tasks.get(task_id.connector, {}).pop(task_id.task, None)

    def put_topic(self, connector, topic, task_id):
        with self._lock:
            self._topics.setdefault(connector, {}).setdefault(topic, task_id)

    def topics_of(self, connector):
        with self._lock:
            return set(self._topics.get(connector, ()))

    def reset_topics(self, connector):
        with self._lock:
            self._topics.pop(connector, None)
