"""The partition-state values the controller hands to the replicas: frozen, one shape from end to end.

Leadership travels controller -> LeaderAndIsr request -> broker -> ReplicaManager -> Partition. Two frozen types
carry it; dicts exist only where bytes are made or read (the request codec, the state znode's JSON):

* ``LeaderAndIsr(leader, leader_epoch, isr, controller_epoch, zk_version)`` -- one partition's state znode
  ``/brokers/topics/<t>/partitions/<p>/state`` as its last writer left it: the leader (-1: none), the leader epoch
  (+1 on every controller write), the ISR, the epoch of the controller that wrote it, and ``zk_version``, the
  znode's data version (Kafka's ``partition_epoch`` on the wire), which every conditional write must name. The
  controller keeps one per partition (``ControllerContext.leadership``).
* ``PartitionLeadership(topic, partition, leader_and_isr, replicas, adding_replicas, removing_replicas, is_new)``
  -- what one LeaderAndIsr entry tells a replica: that state plus the partition's assignment (ordered, first =
  preferred leader) and the replicas a reassignment is adding or removing (Kafka's LeaderAndIsrPartitionState).
  ``to_wire()`` / ``from_wire(topic, ps)`` are the only conversions to and from the codec's dicts, so a field is
  added in one place and the round trip is tested (tests/unit/test_cluster_state.py).

Invariant (enforced at construction): ``isr`` and the replica lists are tuples of ints -- a list given is copied
into one -- so a value is hashable and nobody can change it behind its holder's back; a new state is a new value.

Layering: this module imports nothing from kbroker. It sits below ``coord`` (whose znode codec stays the JSON
boundary), ``controller`` (which writes and keeps these values), ``handlers/cluster.py`` (which decodes requests
into them) and ``replica`` (which applies them), so none of those layers depends on another to share the type.
"""
from dataclasses import dataclass


def _ints(values):
    return tuple(int(v) for v in values)


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    leader: int
    leader_epoch: int
    isr: tuple
    controller_epoch: int
    zk_version: int = -1

    def __post_init__(self):
        if type(self.isr) is not tuple:
            object.__setattr__(self, "isr", _ints(self.isr))

    @classmethod
    def of(cls, state):
        """From anything with the five attributes (the state znode codec's decoded value)."""
        return cls(state.leader, state.leader_epoch, state.isr, state.controller_epoch, state.zk_version)


@dataclass(frozen=True, slots=True)
class PartitionLeadership:
    topic: str
    partition: int
    leader_and_isr: LeaderAndIsr
    replicas: tuple
    adding_replicas: tuple = ()
    removing_replicas: tuple = ()
    is_new: bool = False

    def __post_init__(self):
        for name in ("replicas", "adding_replicas", "removing_replicas"):
            v = getattr(self, name)
            if type(v) is not tuple:
                object.__setattr__(self, name, _ints(v))

    @property
    def tp(self):
        return self.topic, self.partition

    def to_wire(self):
        """The LeaderAndIsr v2+ partition-state dict (no topic: v2+ group states by topic)."""
        la = self.leader_and_isr
        return {"partition_index": self.partition, "controller_epoch": la.controller_epoch, "leader": la.leader,
                "leader_epoch": la.leader_epoch, "isr": list(la.isr), "partition_epoch": la.zk_version,
                "replicas": list(self.replicas), "adding_replicas": list(self.adding_replicas),
                "removing_replicas": list(self.removing_replicas), "is_new": bool(self.is_new)}

    def wire_weight(self):
        """``kbroker/controller/batch.py``'s ``_weight`` of ``to_wire()``: the dict itself, its 10 fields and its four
        lists' entries (a failover weighs 20,000 of these: walking each dict was ~6 % of the controller's CPU)."""
        la = self.leader_and_isr
        return 11 + len(la.isr) + len(self.replicas) + len(self.adding_replicas) + len(self.removing_replicas)

    @classmethod
    def from_wire(cls, topic, ps):
        """From a decoded partition state of any LeaderAndIsr version (fields a version lacks: empty / False)."""
        return cls(topic, ps["partition_index"],
                   LeaderAndIsr(ps["leader"], ps["leader_epoch"], ps["isr"], ps["controller_epoch"],
                                ps["partition_epoch"]),
                   ps["replicas"], ps.get("adding_replicas") or (), ps.get("removing_replicas") or (),
                   bool(ps.get("is_new")))
