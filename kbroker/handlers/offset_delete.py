"""OffsetDelete (47), served v0 (KIP-496): delete a consumer group's committed offsets for some partitions.

Kafka's KafkaApis.handleOffsetDeleteRequest + GroupCoordinator.handleDeleteOffsets:
- Delete on the group, else GROUP_AUTHORIZATION_FAILED (30) for the whole request (no topics answered);
- per topic: Read on it, else TOPIC_AUTHORIZATION_FAILED (29) for its partitions; a partition this broker's metadata
  does not know: UNKNOWN_TOPIC_OR_PARTITION (3);
- the rest go to the coordinator (``GroupCoordinator.delete_offsets``): a group error (INVALID_GROUP_ID 24,
  COORDINATOR_NOT_AVAILABLE 15, COORDINATOR_LOAD_IN_PROGRESS 14, NOT_COORDINATOR 16, GROUP_ID_NOT_FOUND 69,
  NON_EMPTY_GROUP 68) answers the request with that top-level code and no topics, as Kafka; otherwise each
  partition answers 0 (its offset tombstoned, or it had none) or GROUP_SUBSCRIBED_TO_TOPIC (86) when an active
  member of the consumer group subscribes to its topic.
"""
from kbroker import errors
from kbroker.handlers import auth
from kbroker.handlers.common import sliced
from kbroker.security.acl import DELETE, GROUP, READ, TOPIC
from kbroker.server.router import handler


@handler(47, (0, 0))
def offset_delete(ctx, req):
    group_id = req["group_id"]
    if not ctx.authorize(DELETE, GROUP, group_id):
        return {"error_code": errors.GROUP_AUTHORIZATION_FAILED, "throttle_time_ms": 0, "topics": []}
    denied = auth.denied_names(ctx, READ, TOPIC, (t["name"] for t in req["topics"]))
    metadata = ctx.services.metadata
    answers = []                         # [(topic, [(partition, code or None = the coordinator's)])]
    asked = []
    for t in sliced(req["topics"]):
        name = t["name"]
        parts = []
        for p in t["partitions"]:
            index = p["partition_index"]
            if name in denied:
                parts.append((index, errors.TOPIC_AUTHORIZATION_FAILED))
            elif metadata.partition(name, index) is None:
                parts.append((index, errors.UNKNOWN_TOPIC_OR_PARTITION))
            else:
                parts.append((index, None))
                asked.append((name, index))
        answers.append((name, parts))
    coord = ctx.services.groups
    if coord is None:
        return {"error_code": errors.COORDINATOR_NOT_AVAILABLE, "throttle_time_ms": 0, "topics": []}
    group_error, codes = coord.delete_offsets(group_id, asked)
    if group_error:
        return {"error_code": group_error, "throttle_time_ms": 0, "topics": []}
    topics = [{"name": name,
               "partitions": [{"partition_index": index, "error_code": codes[(name, index)] if code is None else code}
                              for index, code in parts]}
              for name, parts in answers]
    return {"error_code": 0, "throttle_time_ms": 0, "topics": topics}
