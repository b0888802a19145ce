"""The distributed worker's state in three compacted topics (Kafka's KafkaConfigBackingStore,
KafkaOffsetBackingStore, KafkaStatusBackingStore on a KafkaBasedLog), in Kafka Connect's key and value formats so
Kafka's own workers and tools read ours and we read theirs.

Every value is JSON as Kafka's internal JsonConverter (schemas disabled) writes it: compact separators, fields in
Kafka's schema order; keys are UTF-8 strings (the offset store's keys are JSON arrays, kbroker/connect/offsets.py).
A null value is a tombstone.

Config topic (``config.storage.topic``, 1 partition: its order is the order of config changes):

- ``connector-<name>``     ``{"properties":{...}}``          the connector's config; tombstone = deleted
- ``task-<name>-<n>``      ``{"properties":{...}}``          task n's config, applied only at the next commit
- ``commit-<name>``        ``{"tasks":N}``                   tasks 0..N-1 written since the last commit are the set
- ``target-state-<name>``  ``{"state":"PAUSED","state.v2":"PAUSED"}``  STARTED / PAUSED / STOPPED (v2 only:
                           ``state`` then says PAUSED, what pre-3.5 workers understand); tombstone = STARTED
- ``session-key``, ``restart-connector-<name>``, ...       read and ignored

Offset topic (``offset.storage.topic``, 25 partitions by default): key ``["<connector>",{partition}]``, value
``{offset}`` (bytes made by kbroker/connect/offsets.py); the producer's murmur2 partitioner spreads keys.

Status topic (``status.storage.topic``, 5 partitions):

- ``status-connector-<name>``   ``{"state":"RUNNING","trace":null,"worker_id":"host:8083","generation":3}``
- ``status-task-<name>-<n>``    the same fields
- ``status-topic-<topic>:connector-<name>``  ``{"topic":{"name":..,"connector":..,"task":n,"discoverTimestamp":ms}}``

Topics are created when missing (``cleanup.policy=compact``, the ``*.partitions`` / ``*.replication.factor`` keys;
-1 = the broker's default), as Kafka's TopicAdmin does; an existing topic is used as it is.

``KafkaBasedLog`` is the shared engine: a producer (acks=all, idempotent) and an unsubscribed consumer that
``assign``s every partition from the beginning, a thread that consumes forever and hands each record to a callback,
and ``read_to_end()``: block until every record written before the call has been consumed (the end offsets are
taken by the consuming thread, then it consumes up to them).
"""
import json
import logging
import threading
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, OffsetSpec

from kbroker.connect.exceptions import ConfigError, ConnectError
from kbroker.connect.offsets import OffsetBackingStore
from kbroker.connect.records import ConnectorTaskId
from kbroker.connect.status import ConnectorStatus, StatusBackingStore, TaskStatus

log = logging.getLogger("kbroker.connect.kafka_stores")

# How long start() waits for the topic to exist and be readable, and read_to_end() by default.
READ_TIMEOUT_S = 30.0


def _dumps(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _loads(data):
    """JSON value -> object; None for a tombstone or bytes that are not JSON (logged: a foreign record must not
    stop the worker, Kafka logs and skips those too)."""
    if data is None:
        return None
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        log.error("skipping a record that is not JSON: %s", e)
        return None


def ensure_topic(admin_config, topic, partitions, replication_factor, timeout_s=READ_TIMEOUT_S, key=None):
    """Create ``topic`` compacted unless it exists (TOPIC_ALREADY_EXISTS is fine: it exists, or another worker
    won the race). True when this call created it. An existing topic must be compacted only, as Kafka's worker
    checks: ``cleanup.policy`` with ``delete`` in it would lose configs or offsets -> ConfigError naming ``key``
    (the worker key that named the topic) and the policy found.

    CreateTopics is sent without looking first: a Metadata request naming the topic would make a broker with
    ``auto.create.topics.enable=true`` create it with its default partition count and no compaction."""
    admin = AdminClient(dict(admin_config))
    fut = admin.create_topics([NewTopic(topic, num_partitions=int(partitions),
                                        replication_factor=int(replication_factor),
                                        config={"cleanup.policy": "compact"})],
                              operation_timeout=timeout_s, request_timeout=timeout_s)[topic]
    try:
        fut.result(timeout=timeout_s)
    except KafkaException as e:
        if e.args and e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
            _check_compacted(admin, topic, key, timeout_s)
            return False
        raise ConnectError("cannot create topic %s: %s" % (topic, e)) from None
    log.info("created topic %s (%s partitions, replication factor %s, compacted)", topic, partitions,
             replication_factor)
    return True


def _check_compacted(admin, topic, key, timeout_s):
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    try:
        entries = admin.describe_configs([resource], request_timeout=timeout_s)[resource].result(timeout=timeout_s)
    except KafkaException as e:
        # A broker that refuses DescribeConfigs (ACLs) does not stop the worker; Kafka logs and goes on too.
        log.warning("cannot check the cleanup.policy of %s: %s", topic, e)
        return
    entry = entries.get("cleanup.policy")
    policy = entry.value if entry is not None else None
    policies = {p.strip().lower() for p in (policy or "").split(",") if p.strip()}
    if policies != {"compact"}:
        raise ConfigError(key or "cleanup.policy", topic,
                          "topic %s must have cleanup.policy=compact (it has %s): with deletion the worker would "
                          "eventually lose what it keeps there; change the topic's cleanup.policy or name "
                          "another topic" % (topic, policy))


class KafkaBasedLog:
    """A topic read from the beginning into a callback, plus a producer to append to it (module docstring).

    ``consumed(key: bytes|None, value: bytes|None, partition, offset)`` runs on the consuming thread, in offset
    order per partition."""

    def __init__(self, topic, producer_config, consumer_config, consumed, name=None, admin_config=None):
        self.topic = topic
        self._admin_config = dict(admin_config if admin_config is not None else
                                  {k: v for k, v in consumer_config.items()
                                   if k.startswith(("bootstrap.", "security.", "ssl.", "sasl.", "client.id"))})
        self._admin = None
        self._consumed = consumed
        self._producer_config = dict(producer_config)
        self._producer_config.update({"acks": "all", "enable.idempotence": True, "linger.ms": 0})
        self._consumer_config = dict(consumer_config)
        # Assign-only consumer: the group id is never joined (no subscribe), librdkafka just wants one set.
        self._consumer_config.update({"group.id": "kbroker-connect-log-" + topic, "enable.auto.commit": False,
                                      "enable.partition.eof": False, "auto.offset.reset": "earliest"})
        self.name = name or topic
        self._producer = None
        self._consumer = None
        self._thread = None
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._waiters = []              # [ends dict | None, Event, error list]
        self._positions = {}            # partition -> next offset to consume
        self._partitions = []
        self.error = None

    def start(self, timeout_s=READ_TIMEOUT_S):
        self._producer = Producer(self._producer_config)
        self._consumer = Consumer(self._consumer_config)
        self._admin = AdminClient(self._admin_config)
        deadline = time.monotonic() + timeout_s
        while True:
            md = self._consumer.list_topics(self.topic, timeout=max(1.0, deadline - time.monotonic()))
            t = md.topics.get(self.topic)
            if t is not None and t.error is None and t.partitions:
                break
            if time.monotonic() > deadline:
                raise ConnectError("topic %s does not exist or has no partitions" % self.topic)
            time.sleep(0.1)
        self._partitions = sorted(t.partitions)
        self._positions = {p: 0 for p in self._partitions}
        self._consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in self._partitions])
        self._thread = threading.Thread(target=self._run, name="connect-log-" + self.name, daemon=True)
        self._thread.start()
        self.read_to_end(timeout_s)

    def stop(self):
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._producer is not None:
            self._producer.flush(5)
        if self._consumer is not None:
            self._consumer.close()

    # ------------------------------------------------------------------------------------------ writes

    def send(self, key, value, callback=None):
        """Append asynchronously; ``callback(err)`` once acknowledged (err None) or failed."""
        def report(err, _msg):
            if callback is not None:
                callback(err)
        while True:
            try:
                self._producer.produce(self.topic, key=key, value=value, on_delivery=report)
                break
            except BufferError:
                self._producer.poll(0.05)
        self._producer.poll(0)

    def send_all(self, items, timeout_s=READ_TIMEOUT_S):
        """Append ``[(key, value)]`` in order and wait for every acknowledgement; ConnectError on failure."""
        errs = []
        for key, value in items:
            self.send(key, value, lambda err: err is not None and errs.append(err))
        remaining = self._producer.flush(timeout_s)
        if errs:
            raise ConnectError("writing to %s failed: %s" % (self.topic, errs[0]))
        if remaining:
            raise ConnectError("writing to %s timed out after %.0f s (%d records unacknowledged)"
                               % (self.topic, timeout_s, remaining))

    # ------------------------------------------------------------------------------------------ reads

    def read_to_end(self, timeout_s=READ_TIMEOUT_S):
        """Block until everything written to the topic before this call has been consumed; ConnectError when
        ``timeout_s`` passes first."""
        waiter = [None, threading.Event(), []]
        with self._lock:
            self._waiters.append(waiter)
        if not waiter[1].wait(timeout_s):
            with self._lock:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
            raise ConnectError("reading %s to its end timed out after %.0f s" % (self.topic, timeout_s))
        if waiter[2]:
            raise ConnectError("reading %s to its end failed: %s" % (self.topic, waiter[2][0]))

    def _end_offsets(self):
        """{partition: end offset}, one ListOffsets per leader through the admin client: its own connections,
        because the consumer's connection is busy with a Fetch parked up to fetch.wait.max.ms (500 ms) at the
        broker, and a request queued behind it would wait that long per partition."""
        futures = self._admin.list_offsets({TopicPartition(self.topic, p): OffsetSpec.latest()
                                            for p in self._partitions}, request_timeout=10)
        return {tp.partition: f.result(timeout=10).offset for tp, f in futures.items()}

    def _serve_waiters(self):
        with self._lock:
            waiters = list(self._waiters)
        if not waiters:
            return
        for w in waiters:
            if w[0] is None:
                try:
                    w[0] = self._end_offsets()
                except Exception as e:     # KafkaException, or a future's timeout: retried next round
                    log.debug("end offsets of %s: %s", self.topic, e)
                    return      # retried on the next round
        for tp in self._consumer.position([TopicPartition(self.topic, p) for p in self._partitions]):
            if tp.offset >= 0:
                self._positions[tp.partition] = max(self._positions[tp.partition], tp.offset)
        done = [w for w in waiters if all(self._positions[p] >= end for p, end in w[0].items())]
        if done:
            with self._lock:
                for w in done:
                    if w in self._waiters:
                        self._waiters.remove(w)
            for w in done:
                w[1].set()

    def _run(self):
        while not self._stopped.is_set():
            try:
                msgs = self._consumer.consume(num_messages=1000, timeout=0.05)
            except KafkaException as e:
                log.warning("consuming %s: %s", self.topic, e)
                time.sleep(0.1)
                continue
            for m in msgs:
                if m.error() is not None:
                    if m.error().code() != KafkaError._PARTITION_EOF:
                        log.warning("consuming %s: %s", self.topic, m.error())
                    continue
                self._positions[m.partition()] = m.offset() + 1
                try:
                    self._consumed(m.key(), m.value(), m.partition(), m.offset())
                except Exception:       # a bad record must not stop the log; Kafka logs and goes on too
                    log.exception("handling record %s-%d@%d", self.topic, m.partition(), m.offset())
            try:
                self._serve_waiters()
            except Exception as e:
                log.debug("serving read_to_end of %s: %s", self.topic, e)


# ====================================================================================================== offsets

class KafkaOffsetBackingStore(OffsetBackingStore):
    """Source offsets in ``offset.storage.topic`` (module docstring). ``get`` reads the topic to its end first
    (another worker may have committed since); ``set`` returns after the acknowledgement (acks=all)."""

    def __init__(self, worker_config):
        self.config = worker_config
        self.topic = worker_config["offset.storage.topic"]
        self._data = {}
        self._lock = threading.Lock()
        self._log = KafkaBasedLog(self.topic, worker_config.client_config("producer"),
                                  worker_config.client_config("consumer"), self._consumed, "offsets")

    def _consumed(self, key, value, _partition, _offset):
        if key is None:
            return
        with self._lock:
            if value is None:
                self._data.pop(key, None)
            else:
                self._data[key] = value

    def start(self):
        ensure_topic(self.config.client_config("admin"), self.topic, self.config["offset.storage.partitions"],
                     self.config["offset.storage.replication.factor"], key="offset.storage.topic")
        self._log.start()

    def stop(self):
        self._log.stop()

    def get(self, keys):
        self._log.read_to_end()
        with self._lock:
            return {k: self._data.get(k) for k in keys}

    def snapshot(self):
        """{key: value bytes} of every offset in the topic (read to its end first: KIP-875's endpoints)."""
        self._log.read_to_end()
        with self._lock:
            return dict(self._data)

    def set(self, values):
        self._log.send_all(list(values.items()))
        with self._lock:
            for k, v in values.items():
                if v is None:
                    self._data.pop(k, None)
                else:
                    self._data[k] = v


# ====================================================================================================== config

STARTED, PAUSED, STOPPED = "STARTED", "PAUSED", "STOPPED"


class ConfigSnapshot:
    """An immutable view of the config topic up to ``offset`` (Kafka's ClusterConfigState): ``connectors``
    {name: props}, ``task_counts`` {name: n committed}, ``task_configs`` {(name, n): props}, ``target_states``
    {name: state}, ``inconsistent`` (names whose last commit lacked some task configs)."""

    def __init__(self, offset, connectors, task_counts, task_configs, target_states, inconsistent):
        self.offset = offset
        self.connectors = connectors
        self.task_counts = task_counts
        self.task_configs = task_configs
        self.target_states = target_states
        self.inconsistent = inconsistent

    def target_state(self, name):
        return self.target_states.get(name, STARTED)

    def tasks(self, name):
        """Committed ConnectorTaskIds of ``name`` (none while it is inconsistent)."""
        if name in self.inconsistent:
            return []
        return [ConnectorTaskId(name, i) for i in range(self.task_counts.get(name, 0))]

    def task_config_list(self, name):
        return [self.task_configs[(name, i)] for i in range(self.task_counts.get(name, 0))
                if (name, i) in self.task_configs]


class KafkaConfigBackingStore:
    """Connector configs, task configs and target states in ``config.storage.topic`` (module docstring).

    ``listener`` receives ``on_connector_config(name)`` (added, changed or removed),
    ``on_task_configs(name)`` (a commit) and ``on_target_state(name)``, on the consuming thread; it should only
    note the change and wake its own thread."""

    def __init__(self, worker_config, listener=None):
        self.config = worker_config
        self.topic = worker_config["config.storage.topic"]
        self.listener = listener
        self._lock = threading.Lock()
        self._offset = -1
        self._connectors = {}
        self._task_counts = {}
        self._task_configs = {}
        self._deferred = {}               # name -> {n: props} written since the last commit
        self._target_states = {}
        self._inconsistent = set()
        self._log = KafkaBasedLog(self.topic, worker_config.client_config("producer"),
                                  worker_config.client_config("consumer"), self._consumed, "config")

    def start(self):
        ensure_topic(self.config.client_config("admin"), self.topic, 1,
                     self.config["config.storage.replication.factor"], key="config.storage.topic")
        self._log.start()

    def stop(self):
        self._log.stop()

    def snapshot(self):
        with self._lock:
            return ConfigSnapshot(self._offset, dict(self._connectors), dict(self._task_counts),
                                  dict(self._task_configs), dict(self._target_states), set(self._inconsistent))

    def refresh(self, timeout_s=READ_TIMEOUT_S):
        """Read the topic to its end (``worker.sync.timeout.ms`` bounds it in the herder)."""
        self._log.read_to_end(timeout_s)

    # ------------------------------------------------------------------------------------------ writes
    # Each returns once the record is acknowledged AND read back, so the caller's next snapshot() includes it.

    def put_connector_config(self, name, props, target_state=None):
        items = []
        if target_state is not None:
            items.append(self._target_state_record(name, target_state))
        items.append((("connector-" + name).encode(), _dumps({"properties": dict(props)})))
        self._log.send_all(items)
        self.refresh()

    def remove_connector_config(self, name):
        self._log.send_all([(("connector-" + name).encode(), None), (("target-state-" + name).encode(), None)])
        self.refresh()

    def put_task_configs(self, name, configs):
        items = [(("task-%s-%d" % (name, i)).encode(), _dumps({"properties": dict(c)}))
                 for i, c in enumerate(configs)]
        items.append((("commit-" + name).encode(), _dumps({"tasks": len(configs)})))
        self._log.send_all(items)
        self.refresh()

    def put_target_state(self, name, state):
        self._log.send_all([self._target_state_record(name, state)])
        self.refresh()

    @staticmethod
    def _target_state_record(name, state):
        v1 = PAUSED if state == STOPPED else state     # pre-3.5 workers know STARTED and PAUSED only
        return ("target-state-" + name).encode(), _dumps({"state": v1, "state.v2": state})

    # ------------------------------------------------------------------------------------------ reads

    def _consumed(self, key, value, _partition, offset):
        key = (key or b"").decode("utf-8", "replace")
        event = None
        with self._lock:
            self._offset = offset + 1
            if key.startswith("connector-"):
                event = self._connector_record(key[len("connector-"):], value)
            elif key.startswith("task-"):
                self._task_record(key[len("task-"):], value)
            elif key.startswith("commit-"):
                event = self._commit_record(key[len("commit-"):], value)
            elif key.startswith("target-state-"):
                event = self._target_state_read(key[len("target-state-"):], value)
        if event is not None and self.listener is not None:
            getattr(self.listener, event[0])(event[1])

    def _connector_record(self, name, value):
        doc = _loads(value)
        if doc is None:
            self._connectors.pop(name, None)
            self._target_states.pop(name, None)
            self._task_counts.pop(name, None)
            self._deferred.pop(name, None)
            self._inconsistent.discard(name)
            for k in [k for k in self._task_configs if k[0] == name]:
                del self._task_configs[k]
        else:
            props = doc.get("properties") if isinstance(doc, dict) else None
            if not isinstance(props, dict):
                log.error("config record connector-%s has no properties; ignored", name)
                return None
            self._connectors[name] = {str(k): str(v) for k, v in props.items()}
        return ("on_connector_config", name)

    def _task_record(self, rest, value):
        name, _, number = rest.rpartition("-")
        if not name or not number.isdigit():
            log.error("config record task-%s: bad task id; ignored", rest)
            return
        doc = _loads(value)
        props = doc.get("properties") if isinstance(doc, dict) else None
        if not isinstance(props, dict):
            log.error("config record task-%s has no properties; ignored", rest)
            return
        self._deferred.setdefault(name, {})[int(number)] = {str(k): str(v) for k, v in props.items()}

    def _commit_record(self, name, value):
        doc = _loads(value)
        n = doc.get("tasks") if isinstance(doc, dict) else None
        if not isinstance(n, int) or n < 0:
            log.error("config record commit-%s has no task count; ignored", name)
            return None
        deferred = self._deferred.pop(name, {})
        if any(i not in deferred for i in range(n)):
            # Kafka marks the connector inconsistent: its tasks are not run until a complete set is committed.
            log.error("commit-%s names %d tasks but not all their configs were written; connector inconsistent",
                      name, n)
            self._inconsistent.add(name)
        else:
            self._inconsistent.discard(name)
            for k in [k for k in self._task_configs if k[0] == name]:
                del self._task_configs[k]
            for i in range(n):
                self._task_configs[(name, i)] = deferred[i]
        self._task_counts[name] = n
        return ("on_task_configs", name)

    def _target_state_read(self, name, value):
        doc = _loads(value)
        if doc is None:
            self._target_states.pop(name, None)
        else:
            state = doc.get("state.v2") or doc.get("state") if isinstance(doc, dict) else None
            if state not in (STARTED, PAUSED, STOPPED):
                log.error("config record target-state-%s: unknown state %r; ignored", name, state)
                return None
            self._target_states[name] = state
        return ("on_target_state", name)


# ====================================================================================================== status

def _status_value(status):
    return _dumps({"state": status.state, "trace": status.trace, "worker_id": status.worker_id,
                   "generation": int(status.generation)})


class KafkaStatusBackingStore(StatusBackingStore):
    """Statuses and KIP-558 active topics in ``status.storage.topic`` (module docstring).

    The cache is filled by reading the topic (every worker's writes); ``put`` also updates it at once so this
    worker's REST answers see its own writes. A status is not written over a newer one: when the cached status of
    that connector/task comes from another worker with a higher ``generation``, ``put`` drops it (Kafka's putSafe:
    a worker stopping late must not overwrite the new owner's RUNNING). ``generation`` (set by the herder after
    each rebalance) stamps statuses written with generation 0."""

    def __init__(self, worker_config, worker_id=""):
        self.config = worker_config
        self.topic = worker_config["status.storage.topic"]
        self.worker_id = worker_id
        self.generation = 0
        self._lock = threading.Lock()
        self._connectors = {}
        self._tasks = {}          # name -> {n: TaskStatus}
        self._topics = {}         # name -> {topic: ConnectorTaskId}
        self._log = KafkaBasedLog(self.topic, worker_config.client_config("producer"),
                                  worker_config.client_config("consumer"), self._consumed, "status")

    def start(self):
        ensure_topic(self.config.client_config("admin"), self.topic, self.config["status.storage.partitions"],
                     self.config["status.storage.replication.factor"], key="status.storage.topic")
        self._log.start()

    def stop(self):
        self._log.stop()

    def refresh(self, timeout_s=READ_TIMEOUT_S):
        self._log.read_to_end(timeout_s)

    # ------------------------------------------------------------------------------------------ writes

    def put(self, status):
        if not status.generation:
            status.generation = self.generation
        with self._lock:
            if isinstance(status, ConnectorStatus):
                old = self._connectors.get(status.connector)
                key = "status-connector-" + status.connector
            elif isinstance(status, TaskStatus):
                old = self._tasks.get(status.id.connector, {}).get(status.id.task)
                key = "status-task-%s-%d" % (status.id.connector, status.id.task)
            else:
                raise TypeError("not a status: %r" % (status,))
            if old is not None and old.worker_id != status.worker_id and old.generation > status.generation:
                log.debug("not writing %s of generation %d over generation %d of %s", key, status.generation,
                          old.generation, old.worker_id)
                return
            self._cache(status)
        self._log.send(key.encode(), _status_value(status))

    def delete_connector(self, name):
        with self._lock:
            tasks = sorted(self._tasks.pop(name, {}))
            topics = sorted(self._topics.pop(name, {}))
            self._connectors.pop(name, None)
        items = [(("status-connector-" + name).encode(), None)]
        items += [(("status-task-%s-%d" % (name, n)).encode(), None) for n in tasks]
        items += [(("status-topic-%s:connector-%s" % (t, name)).encode(), None) for t in topics]
        self._log.send_all(items)

    def delete_task(self, task_id):
        with self._lock:
            self._tasks.get(task_id.connector, {}).pop(task_id.task, None)
        self._log.send_all([(("status-task-%s-%d" % (task_id.connector, task_id.task)).encode(), None)])

    def put_topic(self, connector, topic, task_id):
        with self._lock:
            known = self._topics.setdefault(connector, {})
            if topic in known:
                return
            known[topic] = task_id
        value = _dumps({"topic": {"name": topic, "connector": connector, "task": task_id.task,
                                  "discoverTimestamp": int(time.time() * 1000)}})
        self._log.send(("status-topic-%s:connector-%s" % (topic, connector)).encode(), value)

    def reset_topics(self, connector):
        with self._lock:
            topics = sorted(self._topics.pop(connector, {}))
        self._log.send_all([(("status-topic-%s:connector-%s" % (t, connector)).encode(), None) for t in topics])

    # ------------------------------------------------------------------------------------------ reads

    def get_connector(self, name):
        with self._lock:
            return self._connectors.get(name)

    def get_task(self, task_id):
        with self._lock:
            return self._tasks.get(task_id.connector, {}).get(task_id.task)

    def tasks_of(self, name):
        with self._lock:
            return [s for _, s in sorted(self._tasks.get(name, {}).items())]

    def connectors(self):
        with self._lock:
            return set(self._connectors)

    def topics_of(self, connector):
        with self._lock:
            return set(self._topics.get(connector, {}))

    def _cache(self, status):
        if isinstance(status, ConnectorStatus):
            self._connectors[status.connector] = status
        else:
            self._tasks.setdefault(status.id.connector, {})[status.id.task] = status

    def _consumed(self, key, value, _partition, _offset):
        key = (key or b"").decode("utf-8", "replace")
        if key.startswith("status-topic-"):
            topic, sep, name = key[len("status-topic-"):].rpartition(":connector-")
            if not sep:
                return
            doc = _loads(value)
            with self._lock:
                if doc is None:
                    self._topics.get(name, {}).pop(topic, None)
                else:
                    task = (doc.get("topic") or {}).get("task", 0) if isinstance(doc, dict) else 0
                    self._topics.setdefault(name, {})[topic] = ConnectorTaskId(name, int(task or 0))
            return
        doc = _loads(value)
        if key.startswith("status-connector-"):
            name = key[len("status-connector-"):]
            with self._lock:
                if doc is None:
                    self._connectors.pop(name, None)
                elif isinstance(doc, dict):
                    self._connectors[name] = ConnectorStatus(name, doc.get("state"), doc.get("trace"),
                                                             doc.get("worker_id") or "", doc.get("generation") or 0)
        elif key.startswith("status-task-"):
            name, _, number = key[len("status-task-"):].rpartition("-")
            if not name or not number.isdigit():
                return
            tid = ConnectorTaskId(name, int(number))
            with self._lock:
                if doc is None:
                    self._tasks.get(name, {}).pop(tid.task, None)
                elif isinstance(doc, dict):
                    self._tasks.setdefault(name, {})[tid.task] = TaskStatus(
                        tid, doc.get("state"), doc.get("trace"), doc.get("worker_id") or "",
                        doc.get("generation") or 0)
