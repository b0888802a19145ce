"""DescribeProducers (61), served v0 (KIP-664): the active producers of partitions, from the answering replica's
own producer state -- what ``kafka-transactions.sh describe-producers`` and ``find-hanging`` read.

Behaviour (Kafka's KafkaApis.handleDescribeProducersRequest + ReplicaManager.activeProducerState), per topic:
an illegal name -> INVALID_TOPIC_EXCEPTION (17); no Read on the topic -> TOPIC_AUTHORIZATION_FAILED (29); a topic
the metadata cache does not know -> UNKNOWN_TOPIC_OR_PARTITION (3); all three for every partition asked, with
Kafka's message. Otherwise per partition: a partition this broker hosts answers, **leader or follower** (the
tool's ``--broker-id`` asks one replica on purpose); one it does not host answers NOT_LEADER_OR_FOLLOWER (6) when
the partition exists, else UNKNOWN_TOPIC_OR_PARTITION (3).

Each producer is ``Partition.producers.active()``'s ``ProducerInfo(producer_id, producer_epoch, last_sequence,
last_timestamp, coordinator_epoch, current_txn_start_offset)`` (-1 for "none": no open transaction, no marker
yet), listed in producer id order (Kafka lists its hash map's order; sorted is the same for small ids and
deterministic).
"""
from kbroker import errors
from kbroker.coord import validate_topic_name
from kbroker.handlers import auth
from kbroker.handlers.common import sliced
from kbroker.security.acl import READ, TOPIC
from kbroker.server.router import handler
from kbroker.timeslice import TimeSlice


def _producers(part, slice_):
    out = []
    for info in sorted(part.producers.active(), key=lambda i: i.producer_id):
        slice_.tick()
        out.append({"producer_id": info.producer_id, "producer_epoch": info.producer_epoch,
                    "last_sequence": info.last_sequence, "last_timestamp": info.last_timestamp,
                    "coordinator_epoch": info.coordinator_epoch,
                    "current_txn_start_offset": info.current_txn_start_offset})
    return out


def _topic_error(ctx, name, denied):
    """(code, message) for the whole topic, or None when its partitions are looked at one by one."""
    try:
        validate_topic_name(name)
    except errors.KafkaError as e:
        return errors.INVALID_TOPIC_EXCEPTION, getattr(e, "message", None) or str(e)
    if name in denied:
        return errors.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."
    if not ctx.services.metadata.contains_topic(name):
        return errors.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
    return None


def _partition(ctx, topic, index, slice_):
    r = {"partition_index": index, "error_code": 0, "error_message": None, "active_producers": []}
    part = ctx.services.replicas.get_partition(topic, index)
    if part is None:
        exists = ctx.services.metadata.partition(topic, index) is not None
        r["error_code"] = errors.NOT_LEADER_OR_FOLLOWER if exists else errors.UNKNOWN_TOPIC_OR_PARTITION
        return r
    r["active_producers"] = _producers(part, slice_)
    return r


@handler(61, (0, 0))
def describe_producers(ctx, req):
    denied = auth.denied_names(ctx, READ, TOPIC, (t["name"] for t in req["topics"]))
    slice_ = TimeSlice()
    topics = []
    for t in req["topics"]:
        name = t["name"]
        failed = _topic_error(ctx, name, denied)
        parts = []
        for index in sliced(t["partition_indexes"]):
            if failed is not None:
                parts.append({"partition_index": index, "error_code": failed[0], "error_message": failed[1],
                              "active_producers": []})
            else:
                parts.append(_partition(ctx, name, index, slice_))
        topics.append({"name": name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
