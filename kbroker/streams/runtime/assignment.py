"""How tasks are placed on instances without a Python partition assignor (confluent-kafka/librdkafka cannot run
one), and what that gives up versus Kafka's StreamsPartitionAssignor.

Design: every StreamThread is a plain consumer-group member of group ``application.id``, subscribed to every
source and repartition topic of the topology, with ``partition.assignment.strategy=range`` and the eager protocol.
The range assignor hands each topic's partitions out in contiguous ranges over the members sorted by member id;
all members subscribe to the same topics, so for topics with the same partition count the SAME partition numbers
go to the same member. A task is (sub-topology, partition) and owns partition p of every source topic of its
sub-topology; co-partitioned topics (joins) are checked to have equal counts at start (internal_topics.py), so a
member always receives every partition of the tasks it gets, and ``tasks_of`` below groups an assignment into
tasks. Repartition topics of a sub-topology get the partition count of their writer's sources, so they line up the
same way.

Eager rebalancing: on every membership change each thread commits and closes all its tasks (checkpoints written)
and the new assignment creates and restores them again (from the checkpoint: usually nothing or a small gap).

Given up versus Kafka's StreamsPartitionAssignor (KIP-441 / KIP-429):
  * no sticky placement: range follows member-id order, so a rebalance may move a task between instances even
    when its owner stayed (its state is then restored on the new owner, or from a standby);
  * no warm-up tasks / probing rebalances (max.warmup.replicas, probing.rebalance.interval.ms and
    acceptable.recovery.lag are accepted at their defaults only);
  * no cooperative rebalancing: every task pauses during a rebalance;
  * standby placement is computed by each instance from DescribeGroups (standby.py), not by the group leader;
  * the assignment's userdata (host info, SHUTDOWN_APPLICATION requests, version probing) cannot be carried:
    application.server travels in the consumers' client ids (metadata.py) instead, and SHUTDOWN_APPLICATION
    through a signal member joining the group (kafka_streams.py); version probing has no equivalent;
  * a sub-topology whose source topics have different partition counts (not co-partitioned) gets max(count)
    tasks, but the range assignor may give partition p of the two topics to different members, each then running
    a task (s, p) with part of its input -- correct for stateless sub-topologies, not for stateful ones with
    non-co-partitioned sources (Kafka would refuse such a join anyway).
"""
from collections import defaultdict


def tasks_of(partitions, topic_subtopology: dict, task_id) -> dict:
    """{TaskId: [(topic, partition)]} of an assignment: partition p of a source topic of sub-topology s belongs to
    task (s, p); topics no sub-topology reads are ignored."""
    out = defaultdict(list)
    for topic, partition in partitions:
        sid = topic_subtopology.get(topic)
        if sid is not None:
            out[task_id(sid, partition)].append((topic, partition))
    return dict(out)
