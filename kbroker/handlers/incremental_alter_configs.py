"""IncrementalAlterConfigs (44) v0-v1 (KIP-339): SET / DELETE / APPEND / SUBTRACT single topic config keys.

Kafka's Java Admin client (>= 4.0) has no other way to change a config, so ``Admin.incrementalAlterConfigs`` (and
``kafka-configs.sh --alter``) need this API.

Per resource, checked in Kafka's order (``ConfigAdminManager.preprocess``), first failure wins:

* the same (resource_type, resource_name) twice in one request -> INVALID_REQUEST (42) for each of them;
* the same config key twice in one resource -> INVALID_REQUEST;
* a null ``value`` with an operation other than DELETE -> INVALID_REQUEST naming the keys;
* an operation id other than 0-3 -> INVALID_REQUEST;
* resource type 2 (topic): an illegal topic name (empty, with '/', ...) -> INVALID_TOPIC_EXCEPTION (17); a
  missing topic -> UNKNOWN_TOPIC_OR_PARTITION (3); APPEND/SUBTRACT on a key that is not list-typed (only
  ``cleanup.policy`` and the two ``*.replication.throttled.replicas`` are) or on an unknown key ->
  INVALID_CONFIG (40); the resulting override set is validated like AlterConfigs' (an unknown key or bad value ->
  INVALID_CONFIG naming it) and, unless ``validate_only``, replaces the topic's overrides (live partitions switch at
  once; other brokers follow through /config/changes);
* resource type 4 (broker, KIP-226 dynamic broker configs, kbroker/config/dynamic.py): name "" (the cluster
  default, ``/config/brokers/<default>``) or this broker's id, else INVALID_REQUEST; the ops apply to the stored
  dynamic config (APPEND/SUBTRACT only on list-typed keys, INVALID_CONFIG otherwise, based on the stored value or
  else the effective one); the result is validated (a read-only key, a key kbroker cannot change without restart,
  an unknown key or a bad value -> INVALID_REQUEST with Kafka's "Invalid config value for resource ..." message)
  and, unless ``validate_only``, written with its /config/changes notification and applied here at once;
* any other resource type (8 broker logger, 16 client metrics, 32 group, unknown) -> INVALID_REQUEST.

Authorization (Kafka's ``ConfigAdminManager.preprocess``), after the duplicate and request-shape checks above and
before anything is read or validated: AlterConfigs on the topic, else TOPIC_AUTHORIZATION_FAILED (29); on the
Cluster for a broker (4) or broker-logger (8) resource, else CLUSTER_AUTHORIZATION_FAILED (31).

Operation semantics (Kafka's ``prepareIncrementalConfigs``), applied in request order to the topic's overrides:
SET puts the value; DELETE removes the override (the key falls back to its default; deleting an unset key is a
no-op); APPEND adds the comma-separated items not already in the current list; SUBTRACT removes each listed item
once. The "current list" of APPEND/SUBTRACT is the override when set, else the value DescribeConfigs reports for
the key. Deviation from Kafka: Kafka takes the key's built-in default there (``delete`` for cleanup.policy) even
when the broker sets another one (``log.cleanup.policy=compact``), so APPEND could silently turn a compacted topic
into a deleting one; kbroker appends to what the topic actually runs with.

Like Kafka's ZooKeeper mode this is read-modify-write of the topic's config znode: two concurrent requests
changing the same topic may lose one of the updates.
"""
from collections import Counter

from kbroker import errors
from kbroker.config import CONFIG_KEYS, TOPIC_CONFIGS, format_value
from kbroker.coord.metadata_store import validate_topic_name
from kbroker.handlers.common import record_failure
from kbroker.handlers.configs import check_config_access
from kbroker.security.acl import ALTER_CONFIGS
from kbroker.server.router import handler

TOPIC = 2
BROKER = 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}
# DescribeConfigs' config_source id of a topic-level override (Kafka's DYNAMIC_TOPIC_CONFIG).
_TOPIC_OVERRIDE_SOURCE = 1


def check_ops(configs):
    """The resource's ``configs`` as [(name, op, value)]; raises InvalidRequest like Kafka's preprocessing."""
    counts = Counter(c["name"] for c in configs)
    if any(n > 1 for n in counts.values()):
        raise errors.InvalidRequest("Error due to duplicate config keys")
    nulls = [c["name"] for c in configs if c["config_operation"] != DELETE and c["value"] is None]
    if nulls:
        raise errors.InvalidRequest("Null value not supported for : " + ", ".join(nulls))
    for c in configs:
        if c["config_operation"] not in _OP_NAMES:
            raise errors.InvalidRequest("Unknown operations type %d" % c["config_operation"])
    return [(c["name"], c["config_operation"], c["value"]) for c in configs]


def _items(text):
    return [s.strip() for s in (text or "").split(",") if s.strip()]


def _apply(stored, base, ops, check_list_key):
    """``stored`` ({key: string}) after ``ops`` ([(name, op, value)]): SET and DELETE as given; APPEND/SUBTRACT
    edit the comma-separated items of the stored value, else of ``base(name)`` (the value the key runs with, a
    string or None), once ``check_list_key(name, verb)`` has passed (it raises InvalidConfig)."""
    out = dict(stored)
    for name, op, value in ops:
        if op == SET:
            out[name] = value
        elif op == DELETE:
            out.pop(name, None)
        else:
            check_list_key(name, "append" if op == APPEND else "subtract")
            items = _items(out[name] if name in out else base(name))
            if op == APPEND:
                items += [v for v in _items(value) if v not in items]
            else:
                for v in _items(value):
                    if v in items:
                        items.remove(v)
            out[name] = ",".join(items)
    return out


def apply_ops(overrides, effective, ops):
    """The new override dict after ``ops`` ([(name, op, value)]) on ``overrides`` ({key: string}).

    ``effective`` ({key: string or None}) is what each key currently runs with, the base of APPEND/SUBTRACT on a
    key without an override. Raises InvalidConfig for APPEND/SUBTRACT on an unknown or non-list key. Values are
    not validated here (the caller validates the whole result)."""
    def check_list_key(name, verb):
        key = TOPIC_CONFIGS.get(name)
        if key is None:
            raise errors.InvalidConfig("Unknown topic config name: %s" % name)
        if key.type != "list":
            raise errors.InvalidConfig("Config value %s is not allowed for config key: %s" % (verb, name))
    return _apply(overrides, effective.get, ops, check_list_key)


def _alter_topic(topics, name, ops, validate_only):
    validate_topic_name(name)  # Kafka's Topic.validate: INVALID_TOPIC_EXCEPTION (17) before existence
    entries = topics.describe_topic_config(name)  # UnknownTopicOrPartition for a missing topic
    overrides = {e.name: e.value for e in entries if e.source_id == _TOPIC_OVERRIDE_SOURCE}
    effective = {e.name: e.value for e in entries}
    topics.alter_topic_config(name, apply_ops(overrides, effective, ops), validate_only=validate_only)


def apply_broker_ops(current, effective, ops):
    """The new dynamic config of a broker resource after ``ops`` on ``current`` ({key: string}, as stored).
    APPEND/SUBTRACT need a list-typed broker key (INVALID_CONFIG otherwise, Kafka's message); their base is the
    stored value, else the key's effective value here (``effective(key)`` -> string or None)."""
    def check_list_key(name, verb):
        key = CONFIG_KEYS.get(name)
        if key is None or key.type != "list":
            raise errors.InvalidConfig("Config value %s is not allowed for config key: %s" % (verb, name))
    return _apply(current, effective, ops, check_list_key)


def _alter_broker(services, name, ops, validate_only):
    dynamic = services.broker_configs
    if dynamic is None:
        raise errors.InvalidRequest("kbroker's broker configs are static here")

    def effective(key):
        v = services.config.get(key)
        return None if v is None else format_value(v)
    new = apply_broker_ops(dynamic.current(name), effective, ops)
    dynamic.alter(name, new, validate_only=validate_only)


@handler(44, (0, 1))
def incremental_alter_configs(ctx, req):
    services = ctx.services
    seen = Counter((r["resource_type"], r["resource_name"]) for r in req["resources"])
    out = []
    for res in req["resources"]:
        rtype, name = res["resource_type"], res["resource_name"]
        r = {"error_code": 0, "error_message": None, "resource_type": rtype, "resource_name": name}
        try:
            if seen[(rtype, name)] > 1:
                raise errors.InvalidRequest("Each resource must appear at most once.")
            ops = check_ops(res["configs"])
            check_config_access(ctx, ALTER_CONFIGS, rtype, name)
            if rtype == TOPIC:
                _alter_topic(services.topics, name, ops, req["validate_only"])
            elif rtype == BROKER:
                _alter_broker(services, name, ops, req["validate_only"])
            else:
                raise errors.InvalidRequest("Unsupported resource type %d: kbroker alters topic configs only"
                                            % rtype)
        except Exception as e:  # noqa: BLE001 - one resource's failure must not fail the others
            record_failure(r, e)
        out.append(r)
    return {"throttle_time_ms": 0, "responses": out}
