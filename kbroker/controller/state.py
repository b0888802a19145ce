"""The controller's in-memory view of the cluster (rebuilt from ZooKeeper on every election).

Partition states (Kafka's PartitionStateMachine): NonExistent -> New (assignment known, no leader yet) -> Online
(leader elected) <-> Offline (leader gone) -> NonExistent (deleted).
Replica states (ReplicaStateMachine): NewReplica (just assigned), OnlineReplica (broker live, told its role),
OfflineReplica (broker gone or shut down; out of the ISR), ReplicaDeletionStarted (StopReplica delete sent),
ReplicaDeletionSuccessful, ReplicaDeletionIneligible (broker down or delete failed; retried when it returns),
NonExistentReplica (dropped from the context).
"""
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
    """One term's state; the comments name who writes each field (docs/architecture.md, "controller")."""

    def __init__(self):
        self.live_brokers = {}       # id -> BrokerRegistration                                       (Brokers)
        self.broker_epochs = {}      # id -> broker epoch (czxid of /brokers/ids/<id>)                (Brokers)
        self.shutting_down = set()   # ids in controlled shutdown: live, may not lead
                                     #                 (ControlledShutdown adds, Brokers drops a failed broker)
        self.assignments = {}        # (topic, p) -> [replica ids], first = preferred  (TopicChanges, Reassignments)
        self.leadership = {}         # (topic, p) -> cluster_state.LeaderAndIsr, the state znode as last read or
                                     # written              (PartitionStateMachine; TopicChanges.forget drops)
        self.partition_states = {}   # (topic, p) -> NEW/ONLINE/OFFLINE      (every collaborator's transitions)
        self.replica_states = {}     # ((topic, p), broker id) -> R_*        (every collaborator's transitions)
        self.topics_to_delete = set()  # topics marked and queued                                  (TopicDeletion)
        self.reassignments = {}      # (topic, p) -> Reassignment                                 (Reassignments)

    def topics(self):
        return {tp[0] for tp in self.assignments}

    @staticmethod
    def new_reassignment(target, original):
        return Reassignment(target, original)


class ControllerMoved(Exception):
    """Another controller took over (higher epoch / other /controller owner): resign."""
