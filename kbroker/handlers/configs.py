"""DescribeConfigs (32) v0-v4 and AlterConfigs (33) v0-v2.

Resource types: 2 = topic, 4 = broker. Topic configs report every topic-level key with its effective value and
source (TOPIC_CONFIG 1, DYNAMIC_BROKER_CONFIG 2, DYNAMIC_DEFAULT_BROKER_CONFIG 3, STATIC_BROKER_CONFIG 4,
DEFAULT_CONFIG 5); ``configuration_keys`` filters; with ``include_synonyms`` (v1+) each entry lists Kafka's
synonyms (the topic override, then the broker key's values by source, kbroker/config/dynamic.py). A broker resource
named by this broker's id reports every broker key with its effective value, source and ``read_only`` (false for
the dynamic keys); the name "" is the cluster default (``/config/brokers/<default>``: only the keys it sets); any
other id answers INVALID_REQUEST (the client sends a broker's resource to that broker). AlterConfigs on a broker
replaces its dynamic config (KIP-226: ``/config/brokers/<id>`` or ``<default>``; kbroker/config/dynamic.py validates
and refuses with INVALID_REQUEST as Kafka does). AlterConfigs on a topic *replaces* its whole override set (Kafka's
non-incremental semantics); values are validated first and a bad one answers INVALID_CONFIG (40) naming the key. New values take effect on the live partitions at once. An
illegal topic name (empty, with '/', ...) answers INVALID_TOPIC_EXCEPTION (17), as Kafka's Topic.validate does.

Authorization (Kafka's ConfigHelper / KafkaApis.processLegacyAlterConfigsRequest), per resource and before its name
is validated or looked up: DescribeConfigs (resp. AlterConfigs) on the topic, else TOPIC_AUTHORIZATION_FAILED
(29); on the Cluster for a broker (4) or broker-logger (8) resource, else CLUSTER_AUTHORIZATION_FAILED (31).
Other resource types answer INVALID_REQUEST (42) unasked.
"""
from kbroker import errors
from kbroker.config import TOPIC_CONFIGS
from kbroker.coord.metadata_store import validate_topic_name
from kbroker.handlers import auth
from kbroker.handlers.common import record_failure
from kbroker.security.acl import ALTER_CONFIGS, DESCRIBE_CONFIGS, TOPIC as TOPIC_RESOURCE
from kbroker.server.router import handler

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8


def _entry(e, synonyms):
    return {"name": e.name, "value": e.value, "read_only": e.read_only, "is_default": e.source_id == 5,
            "config_source": e.source_id, "is_sensitive": e.sensitive,
            "synonyms": [{"name": n, "value": v, "source": src} for n, v, src in synonyms],
            "config_type": 0, "documentation": None}


def _topic_synonyms(broker_configs, e):
    """Kafka's topic entry synonyms: the override (DYNAMIC_TOPIC_CONFIG 1), then its broker key's synonyms."""
    out = [(e.name, e.value, 1)] if e.source_id == 1 else []
    tkey = TOPIC_CONFIGS.get(e.name)
    if broker_configs is not None and tkey is not None and tkey.broker_key:
        out += broker_configs.synonyms(tkey.broker_key)
    return out


def describe_broker(services, name):
    """[(entry, synonyms)] of a broker resource: '' = the cluster default, this broker's id = every key."""
    if services.broker_configs is None:   # a broker built without dynamic configs (unit tests)
        if name not in ("", str(services.broker_id)):
            raise errors.InvalidRequest("Unexpected broker id, expected %d, but received %s"
                                        % (services.broker_id, name))
        return [(e, []) for e in services.topics.describe_broker_config()]
    return [(e, e.synonyms) for e in services.broker_configs.describe(name)]


def check_config_access(ctx, operation, resource_type, name):
    """Raise Kafka's authorization error when the principal may not perform ``operation`` (DescribeConfigs or
    AlterConfigs) on the config resource: the topic for a topic resource, the Cluster for a broker or
    broker-logger one. Other resource types are not asked about (the caller refuses them)."""
    if resource_type == TOPIC:
        if not ctx.authorize(operation, TOPIC_RESOURCE, name):
            raise errors.TopicAuthorizationFailed("Topic authorization failed.")
    elif resource_type in (BROKER, BROKER_LOGGER):
        if not auth.cluster(ctx, operation):
            raise errors.ClusterAuthorizationFailed("Cluster authorization failed.")


@handler(32, (0, 4))
def describe_configs(ctx, req):
    services = ctx.services
    results = []
    for res in req["resources"]:
        r = {"error_code": 0, "error_message": None, "resource_type": res["resource_type"],
             "resource_name": res["resource_name"], "configs": []}
        try:
            check_config_access(ctx, DESCRIBE_CONFIGS, res["resource_type"], res["resource_name"])
            if res["resource_type"] == TOPIC:
                validate_topic_name(res["resource_name"])  # Kafka's Topic.validate: 17 before existence
                entries = [(e, _topic_synonyms(services.broker_configs, e))
                           for e in services.topics.describe_topic_config(res["resource_name"])]
            elif res["resource_type"] == BROKER:
                entries = describe_broker(services, res["resource_name"])
            else:
                raise errors.InvalidRequest("unsupported resource type %d" % res["resource_type"])
            keys = res["configuration_keys"]
            if keys is not None:
                wanted = set(keys)
                entries = [(e, syn) for e, syn in entries if e.name in wanted]
            with_synonyms = req.get("include_synonyms", False)
            r["configs"] = [_entry(e, syn if with_synonyms else []) for e, syn in entries]
        except Exception as e:  # noqa: BLE001
            record_failure(r, e)
        results.append(r)
    return {"throttle_time_ms": 0, "results": results}


@handler(33, (0, 2))
def alter_configs(ctx, req):
    topics = ctx.services.topics
    out = []
    for res in req["resources"]:
        r = {"error_code": 0, "error_message": None, "resource_type": res["resource_type"],
             "resource_name": res["resource_name"]}
        try:
            check_config_access(ctx, ALTER_CONFIGS, res["resource_type"], res["resource_name"])
            new = {c["name"]: c["value"] for c in res["configs"]}
            if res["resource_type"] == BROKER and ctx.services.broker_configs is not None:
                ctx.services.broker_configs.alter(res["resource_name"], new, validate_only=req["validate_only"])
            elif res["resource_type"] != TOPIC:
                raise errors.InvalidRequest("Unsupported resource type %d: kbroker alters topic and broker configs"
                                            % res["resource_type"])
            else:
                validate_topic_name(res["resource_name"])
                topics.alter_topic_config(res["resource_name"], new, validate_only=req["validate_only"])
        except Exception as e:  # noqa: BLE001
            record_failure(r, e)
        out.append(r)
    return {"throttle_time_ms": 0, "responses": out}
