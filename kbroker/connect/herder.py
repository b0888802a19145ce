"""The herder: what the REST API drives (Kafka's Herder interface). ``standalone.StandaloneHerder`` and
``distributed.herder.DistributedHerder`` implement it; ``rest.RestServer`` only translates HTTP to these calls.

Contract (every implementation):

- Methods are called from REST threads, concurrently; an implementation serialises what must be serialised.
- Answers are JSON-able values in Kafka Connect's REST shapes (documented per method), so the REST layer renders
  them as they are.
- Failures are ``kbroker.connect.exceptions`` errors: NotFoundError (404) for an unknown connector or task,
  AlreadyExistsError (409), BadRequestError / ConfigError (400), RebalanceNeededError (409) while the worker's view
  is stale or a rebalance runs, NotLeaderError(leader_url) for a request only the leader may serve (the REST layer
  forwards it there, as Kafka's does), ServiceUnavailableError (503) while starting or stopping.
- Config writes are durable when the call returns (standalone: in memory, as Kafka's; distributed: written to the
  config topic and read back).
"""
from kbroker.connect.exceptions import BadRequestError, ConnectError


class Herder:
    """Abstract; see the module docstring."""

    def start(self):
        raise NotImplementedError

    def stop(self):
        raise NotImplementedError

    def kafka_cluster_id(self) -> str:
        """The cluster id of the Kafka cluster the worker uses (``GET /``'s ``kafka_cluster_id``)."""
        raise NotImplementedError

    def worker_id(self) -> str:
        """``host:port`` of this worker's REST listener (what statuses name as ``worker_id``)."""
        raise NotImplementedError

    # ------------------------------------------------------------------------------------------------ connectors
    def connectors(self) -> list:
        """Connector names, sorted."""
        raise NotImplementedError

    def connector_info(self, name) -> dict:
        """``{"name": name, "config": {...}, "tasks": [{"connector": name, "task": 0}, ...], "type": "source"|"sink"}``
        (type "unknown" when the plugin cannot be loaded)."""
        raise NotImplementedError

    def connector_config(self, name) -> dict:
        raise NotImplementedError

    def put_connector_config(self, name, config, allow_replace, target_state=None) -> tuple:
        """Create or (``allow_replace``) update; ``(created, connector_info)``. The config is validated first
        (ConfigError / BadRequestError naming the errors when it is invalid: Kafka's message is "Connector
        configuration is invalid and contains the following N error(s): ..."). AlreadyExistsError when it exists
        and not ``allow_replace``. ``target_state`` (KIP-980 ``initial_state``: "STARTED", "PAUSED", "STOPPED") applies
        to a new connector; None keeps an existing connector's state (STARTED for a new one)."""
        raise NotImplementedError

    def delete_connector(self, name) -> None:
        raise NotImplementedError

    def task_configs(self, name) -> list:
        """``[{"id": {"connector": name, "task": 0}, "config": {...}}, ...]``."""
        raise NotImplementedError

    def connector_status(self, name) -> dict:
        """``{"name": name, "connector": {"state": "RUNNING", "worker_id": "host:8083"[, "trace": "..."]},
        "tasks": [{"id": 0, "state": "RUNNING", "worker_id": "host:8083"[, "trace": "..."]}, ...],
        "type": "source"|"sink"}``; states UNASSIGNED, RUNNING, PAUSED, FAILED, RESTARTING (and STOPPED)."""
        raise NotImplementedError

    def task_status(self, name, task) -> dict:
        """``{"id": task, "state": ..., "worker_id": ...[, "trace": ...]}``."""
        raise NotImplementedError

    def pause_connector(self, name) -> None:
        raise NotImplementedError

    def resume_connector(self, name) -> None:
        raise NotImplementedError

    def restart_connector(self, name) -> None:
        raise NotImplementedError

    def restart_task(self, name, task) -> None:
        raise NotImplementedError

    def stop_connector(self, name) -> None:
        """KIP-875 ``PUT /connectors/{name}/stop``: tasks stopped and their configs dropped, state STOPPED."""
        raise NotImplementedError

    def restart_connector_and_tasks(self, name, include_tasks, only_failed) -> dict:
        """KIP-745 ``POST /connectors/{name}/restart?includeTasks=&onlyFailed=``: restart the connector (unless
        ``only_failed`` and it is not FAILED) and, with ``include_tasks``, its tasks (only the FAILED ones with
        ``only_failed``); the answer is the status before the restarts with RESTARTING for each one restarted.
        This default drives restart_connector / restart_task; an implementation may do better."""
        from kbroker.connect.exceptions import NotFoundError
        try:
            self.connector_config(name)
        except NotFoundError:
            raise NotFoundError("Unknown connector: %s" % name) from None
        status = self.connector_status(name)
        restart_connector = not only_failed or status["connector"]["state"] == "FAILED"
        tasks = [t for t in status["tasks"]
                 if include_tasks and (not only_failed or t["state"] == "FAILED")]
        if restart_connector:
            self.restart_connector(name)
            status["connector"] = dict(status["connector"], state="RESTARTING")
            status["connector"].pop("trace", None)
        for t in tasks:
            self.restart_task(name, t["id"])
        restarted = {t["id"] for t in tasks}
        status["tasks"] = [{k: v for k, v in dict(t, state="RESTARTING").items() if k != "trace"}
                           if t["id"] in restarted else t for t in status["tasks"]]
        return status

    def connector_offsets(self, name) -> dict:
        """KIP-875 ``GET /connectors/{name}/offsets``: ``{"offsets": [{"partition": {...}, "offset": {...}}]}``."""
        raise NotImplementedError

    def alter_connector_offsets(self, name, offsets) -> dict:
        """KIP-875 ``PATCH /connectors/{name}/offsets`` (connector STOPPED): ``{"message": ...}``."""
        raise NotImplementedError

    def reset_connector_offsets(self, name) -> dict:
        """KIP-875 ``DELETE /connectors/{name}/offsets`` (connector STOPPED): ``{"message": ...}``."""
        raise NotImplementedError

    def connector_plugin_config(self, plugin) -> list:
        """KIP-769 ``GET /connector-plugins/{plugin}/config``: the plugin's ConfigKeyInfo list; NotFoundError
        "Unknown plugin <name>." when no plugin has that name."""
        raise NotImplementedError

    def connector_active_topics(self, name) -> list:
        """KIP-558: the topics the connector's tasks produced to or consumed from since the last reset, sorted."""
        raise NotImplementedError

    def reset_connector_active_topics(self, name) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------------------------------------ plugins
    def connector_plugins(self) -> list:
        """``[{"class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "type": "sink", "version": "..."},
        ...]`` (connectors only, as Kafka's ``GET /connector-plugins`` without ``connectorsOnly=false``)."""
        raise NotImplementedError

    def validate_connector_config(self, plugin, config) -> dict:
        """Kafka's ConfigInfos: ``{"name": class, "error_count": n, "groups": [...], "configs": [{"definition":
        {...}, "value": {"name", "value", "recommended_values", "errors", "visible"}}, ...]}``."""
        raise NotImplementedError


class WorkerHerder(Herder):
    """What both herders (standalone.StandaloneHerder, distributed.herder.DistributedHerder) do the same way on
    top of their ``self._worker`` (kbroker.connect.worker.Worker) and ``self._plugins``: plugin versions in
    statuses, the plugin listing, and KIP-875 offsets (a source's in the offset store, a sink's as its consumer
    group's, ``connect-<name>``)."""

    def _plugin_version(self, config):
        """The connector's version (Kafka 4 reports it in every connector and task state), None when it cannot
        be loaded."""
        try:
            return str(self._plugins.connector_class(config["connector.class"])().version())
        except Exception:
            return None

    def _with_version(self, state, version):
        if "version" not in state:
            state = dict(state, version=version if state.get("state") != "FAILED" else state.get("version"))
        return state

    def _modify_source_offsets(self, name, offsets):
        from kbroker.connect.offsets import offset_key, offset_value, parse_key
        store = self._worker.offset_store
        if offsets is None:
            writes = {k: None for k, v in store.snapshot().items() if v is not None and parse_key(k)[0] == name}
        else:
            writes = {}
            for entry in offsets:
                if not isinstance(entry.get("partition"), dict):
                    raise BadRequestError("Source partitions may not be null")
                offset = entry.get("offset")
                if offset is not None and not isinstance(offset, dict):
                    raise BadRequestError("Source offsets must be JSON objects or null")
                writes[offset_key(name, entry["partition"])] = offset_value(offset)
        if writes:
            store.set(writes)

    def _modify_sink_offsets(self, name, offsets):
        from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
        from confluent_kafka.admin import AdminClient
        admin = AdminClient(self._worker.config.client_config("admin"))
        group = "connect-%s" % name
        try:
            if offsets is None:
                futures = admin.delete_consumer_groups([group], request_timeout=30)
                try:
                    futures[group].result(timeout=30)
                except KafkaException as e:
                    if "GROUP_ID_NOT_FOUND" not in str(e):   # nothing committed yet: nothing to reset
                        raise
                return
            tps = []
            for entry in offsets:
                partition, offset = entry.get("partition"), entry.get("offset")
                if not isinstance(partition, dict) or "kafka_topic" not in partition \
                        or "kafka_partition" not in partition:
                    raise BadRequestError("The partition for a sink connector offset must contain the keys "
                                          "'kafka_topic' and 'kafka_partition'")
                if not isinstance(offset, dict) or "kafka_offset" not in offset:
                    raise BadRequestError("The offset for a sink connector must contain the key 'kafka_offset' "
                                          "(removing one partition's offset is not supported here)")
                try:
                    tps.append(TopicPartition(str(partition["kafka_topic"]), int(partition["kafka_partition"]),
                                              int(offset["kafka_offset"])))
                except (TypeError, ValueError):
                    raise BadRequestError("Kafka partitions and offsets must be valid integers") from None
            if tps:
                futures = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, tps)],
                                                             request_timeout=30)
                result = next(iter(futures.values())).result(timeout=30)
                failed = [tp for tp in result.topic_partitions or () if tp.error is not None]
                if failed:
                    raise KafkaException(failed[0].error)
        except KafkaException as e:
            raise ConnectError("Failed to %s consumer group offsets for connector %s either because its tasks "
                               "haven't stopped completely yet or the connector was resumed before the request "
                               "could be completed: %s" % ("reset" if offsets is None else "alter", name, e)) from None

    def _sink_offsets(self, name):
        from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
        from confluent_kafka.admin import AdminClient
        admin = AdminClient(self._worker.config.client_config("admin"))
        request = [ConsumerGroupTopicPartitions("connect-%s" % name)]
        try:
            result = admin.list_consumer_group_offsets(request, request_timeout=30)
            partitions = next(iter(result.values())).result(timeout=30).topic_partitions or []
        except KafkaException as e:
            raise ConnectError("Failed to retrieve consumer group offsets for sink connector %s: %s"
                               % (name, e)) from None
        return [{"partition": {"kafka_topic": tp.topic, "kafka_partition": tp.partition},
                 "offset": {"kafka_offset": tp.offset}}
                for tp in sorted(partitions, key=lambda tp: (tp.topic, tp.partition)) if tp.offset >= 0]

    def all_plugins(self):
        """``GET /connector-plugins?connectorsOnly=false``: connectors, then transformations, predicates,
        converters and header converters, as Kafka lists them ({"class", "type", "version"})."""
        from kbroker.connect.rest import kafka_version
        out = list(self._plugins.connector_plugins())
        version = kafka_version()
        for kind in ("transformation", "predicate", "converter", "header_converter"):
            out += [{"class": name, "type": kind, "version": version} for name in self._plugins.plugin_names(kind)]
        return out
