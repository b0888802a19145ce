"""Codecs for the admin request znodes the controller consumes (Kafka's JSON, kafka-digest.md E.1).

``/admin/reassign_partitions``        ``{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[5,6]}]}``
                                      written by the reassignment tool; the controller rewrites it without the
                                      partitions it finished (or refused) and deletes it when none are left.
                                      Later Kafka adds ``log_dirs`` per partition: read and ignored.
``/admin/preferred_replica_election`` ``{"version":1,"partitions":[{"topic":"t","partition":1}]}``; deleted by the
                                      controller after the election.
"""
import json


def _json(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _load(data):
    return json.loads(bytes(data).decode("utf-8"))


class ReassignPartitionsZNode:
    @staticmethod
    def path():
        return "/admin/reassign_partitions"

    @staticmethod
    def encode(reassignments):
        """{(topic, partition): [replicas]} -> JSON, partitions in (topic, partition) order."""
        return _json({"version": 1, "partitions": [
            {"topic": t, "partition": p, "replicas": [int(r) for r in reps]}
            for (t, p), reps in sorted(reassignments.items())]})

    @staticmethod
    def decode(data):
        """-> {(topic, partition): [replicas]} in file order (a partition named twice: the last entry wins)."""
        out = {}
        for e in _load(data)["partitions"]:
            out[(e["topic"], int(e["partition"]))] = [int(r) for r in e["replicas"]]
        return out


class PreferredReplicaElectionZNode:
    @staticmethod
    def path():
        return "/admin/preferred_replica_election"

    @staticmethod
    def encode(partitions):
        return _json({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})

    @staticmethod
    def decode(data):
        return [(e["topic"], int(e["partition"])) for e in _load(data)["partitions"]]
