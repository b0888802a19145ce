"""The controller's in-memory view of the cluster (rebuilt from ZooKeeper on every election).

Partition states (Kafka's PartitionStateMachine): NonExistent -> New (assignment known, no leader yet) -> Online
(leader elected) <-> Offline (leader gone) -> NonExistent (deleted).
Replica states (ReplicaStateMachine): NewReplica (just assigned), OnlineReplica (broker live, told its role),
OfflineReplica (broker gone or shut down; out of the ISR), ReplicaDeletionStarted (StopReplica delete sent),
ReplicaDeletionSuccessful, ReplicaDeletionIneligible (broker down or delete failed; retried when it returns),
NonExistentReplica (dropped from the context).
"""
from kbroker.cluster_state import LeaderAndIsr  # noqa: F401 -- the value ``leadership`` holds

NON_EXISTENT, NEW, ONLINE, OFFLINE = "NonExistentPartition", "NewPartition", "OnlinePartition", "OfflinePartition"
R_NEW, R_ONLINE, R_OFFLINE = "NewReplica", "OnlineReplica", "OfflineReplica"
R_DELETION_STARTED, R_DELETION_SUCCESSFUL, R_DELETION_INELIGIBLE = (
    "ReplicaDeletionStarted", "ReplicaDeletionSuccessful", "ReplicaDeletionIneligible")



class Reassignment:
    """One partition moving from ``original`` (OAR) to ``target`` (RAR); ``started`` once AR = RAR + OAR."""
    __slots__ = ("target", "original", "started")

    def __init__(self, target, original):
        self.target, self.original, self.started = target, original, False


class ControllerContext:
    def __init__(self):
        self.live_brokers = {}       # id -> BrokerRegistration
        self.broker_epochs = {}      # id -> broker epoch (czxid of /brokers/ids/<id>) of the live registration
        self.shutting_down = set()   # ids in controlled shutdown (still live, may not lead)
        self.assignments = {}        # (topic, p) -> [replica ids] (first = preferred leader)
        self.leadership = {}         # (topic, p) -> LeaderAndIsr: the state znode as last read/written
        self.partition_states = {}   # (topic, p) -> NEW/ONLINE/OFFLINE
        self.replica_states = {}     # ((topic, p), broker id) -> R_*
        self.topics_to_delete = set()
        self.reassignments = {}      # (topic, p) -> Reassignment

    def topics(self):
        return {tp[0] for tp in self.assignments}

    @staticmethod
    def new_reassignment(target, original):
        return Reassignment(target, original)


class ControllerMoved(Exception):
    """Another controller took over (higher epoch / other /controller owner): resign."""
