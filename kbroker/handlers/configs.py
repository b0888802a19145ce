"""DescribeConfigs (32) v0-v4 and AlterConfigs (33) v0-v2.

Resource types: 2 = topic, 4 = broker. Topic configs report every topic-level key with its effective value and
source (TOPIC_CONFIG 1, STATIC_BROKER_CONFIG 4, DEFAULT_CONFIG 5); ``configuration_keys`` filters. Broker configs are
read-only here (static, from server.properties): AlterConfigs on a broker answers INVALID_REQUEST (42). AlterConfigs
on a topic *replaces* its whole override set (Kafka's non-incremental semantics); values are validated first and a
bad one answers INVALID_CONFIG (40) naming the key. New values take effect on the live partitions at once. An
illegal topic name (empty, with '/', ...) answers INVALID_TOPIC_EXCEPTION (17), as Kafka's Topic.validate does.

Authorization (Kafka's ConfigHelper / KafkaApis.processLegacyAlterConfigsRequest), per resource and before its name
is validated or looked up: DescribeConfigs (resp. AlterConfigs) on the topic, else TOPIC_AUTHORIZATION_FAILED
(29); on the Cluster for a broker (4) or broker-logger (8) resource, else CLUSTER_AUTHORIZATION_FAILED (31).
Other resource types answer INVALID_REQUEST (42) unasked.
"""
from kbroker import errors
from kbroker.coord.metadata_store import validate_topic_name
from kbroker.handlers import auth
from kbroker.handlers.common import record_failure
from kbroker.security.acl import ALTER_CONFIGS, DESCRIBE_CONFIGS, TOPIC as TOPIC_RESOURCE
from kbroker.server.router import handler

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8


def _entry(e, version):
    return {"name": e.name, "value": e.value, "read_only": e.read_only, "is_default": e.source_id == 5,
            "config_source": e.source_id, "is_sensitive": e.sensitive, "synonyms": [],
            "config_type": 0, "documentation": None}


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
                entries = services.topics.describe_topic_config(res["resource_name"])
            elif res["resource_type"] == BROKER:
                if res["resource_name"] not in ("", str(services.broker_id)):
                    raise errors.InvalidRequest("unknown broker %s" % res["resource_name"])
                entries = services.topics.describe_broker_config()
            else:
                raise errors.InvalidRequest("unsupported resource type %d" % res["resource_type"])
            keys = res["configuration_keys"]
            if keys is not None:
                wanted = set(keys)
                entries = [e for e in entries if e.name in wanted]
            r["configs"] = [_entry(e, ctx.api_version) for e in entries]
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
            if res["resource_type"] != TOPIC:
                raise errors.InvalidRequest("only topic configs can be altered; broker configs are static")
            validate_topic_name(res["resource_name"])
            topics.alter_topic_config(res["resource_name"], {c["name"]: c["value"] for c in res["configs"]},
                                      validate_only=req["validate_only"])
        except Exception as e:  # noqa: BLE001
            record_failure(r, e)
        out.append(r)
    return {"throttle_time_ms": 0, "responses": out}
