"""The controller's in-memory view of the cluster (rebuilt from ZooKeeper on every election).

Partition states (Kafka's PartitionStateMachine): NonExistent -> New (assignment known, no leader yet) -> Online
(leader elected) <-> Offline (leader gone) -> NonExistent (deleted).
Replica states (ReplicaStateMachine): NewReplica (just assigned), OnlineReplica (broker live, told its role),
OfflineReplica (broker gone or shut down; out of the ISR), ReplicaDeletionStarted (StopReplica delete sent),
ReplicaDeletionSuccessful, ReplicaDeletionIneligible (broker down or delete failed; retried when it returns),
NonExistentReplica (dropped from the context).

Every change of a partition or replica state is a line of Kafka's ``state.change.logger`` (config/logging.properties
sends it to state-change.log), at Kafka >= 2's levels: ``Controller 0 epoch 3 changed partition [t,0] state from
OfflinePartition to OnlinePartition`` at INFO (to New or Online), a partition going Offline or NonExistent and
``... changed state of replica 2 for partition [t,0] from OnlineReplica to OfflineReplica`` at TRACE (the volume: a
failed broker's 13,500 partitions going offline were 13,500 INFO lines, ~0.3 s, before the first election was
written) (``StateTable``).
"""
import logging

NON_EXISTENT, NEW, ONLINE, OFFLINE = "NonExistentPartition", "NewPartition", "OnlinePartition", "OfflinePartition"
R_NEW, R_ONLINE, R_OFFLINE = "NewReplica", "OnlineReplica", "OfflineReplica"
R_DELETION_STARTED, R_DELETION_SUCCESSFUL, R_DELETION_INELIGIBLE = (
    "ReplicaDeletionStarted", "ReplicaDeletionSuccessful", "ReplicaDeletionIneligible")


R_NON_EXISTENT = "NonExistentReplica"
TRACE = 5                                     # log4j's TRACE (kbroker/cli/logging_config.py's too)
logging.addLevelName(TRACE, "TRACE")
state_change_log = logging.getLogger("state.change.logger")


class StateTable(dict):
    """``partition_states`` / ``replica_states``: a dict whose every change (set to a different state, or pop) is
    logged to ``state.change.logger`` -- partitions becoming New or Online at INFO, the rest (partitions going
    Offline or NonExistent, every replica change) at TRACE, as Kafka's state machines log them -- prefixed by
    ``owner`` ("Controller <id> epoch <n>"). With the level off a change costs one cached level check."""

    def __init__(self, owner, replicas):
        super().__init__()
        self.owner, self.replicas = owner, replicas

    def _level(self, value):
        return TRACE if self.replicas or value in (OFFLINE, NON_EXISTENT) else logging.INFO

    def _describe(self, key):
        if self.replicas:
            (topic, p), broker = key
            return "state of replica %d for partition [%s,%d]" % (broker, topic, p), R_NON_EXISTENT
        return "partition [%s,%d] state" % key, NON_EXISTENT

    def __setitem__(self, key, value):
        level = self._level(value)
        if state_change_log.isEnabledFor(level):
            what, absent = self._describe(key)
            old = self.get(key, absent)
            if old != value:
                state_change_log.log(level, "%s changed %s from %s to %s", self.owner, what, old, value)
        dict.__setitem__(self, key, value)

    def pop(self, key, *default):
        if key in self and state_change_log.isEnabledFor(TRACE):
            what, absent = self._describe(key)
            state_change_log.log(TRACE, "%s changed %s from %s to %s", self.owner, what, self[key], absent)
        return dict.pop(self, key, *default)


class Reassignment:
    """One partition moving from ``original`` (OAR) to ``target`` (RAR); ``started`` once AR = RAR + OAR."""
    __slots__ = ("target", "original", "started")

    def __init__(self, target, original):
        self.target, self.original, self.started = target, original, False


class ControllerContext:
    """One term's state; the comments name who writes each field (docs/architecture.md, "controller")."""

    def __init__(self, owner="Controller"):
        self.live_brokers = {}       # id -> BrokerRegistration                                       (Brokers)
        self.broker_epochs = {}      # id -> broker epoch (czxid of /brokers/ids/<id>)                (Brokers)
        self.shutting_down = set()   # ids in controlled shutdown: live, may not lead
                                     #                 (ControlledShutdown adds, Brokers drops a failed broker)
        self.assignments = {}        # (topic, p) -> [replica ids], first = preferred  (TopicChanges, Reassignments)
        self.leadership = {}         # (topic, p) -> cluster_state.LeaderAndIsr, the state znode as last read or
                                     # written              (PartitionStateMachine; TopicChanges.forget drops)
        # (topic, p) -> NEW/ONLINE/OFFLINE; ((topic, p), broker id) -> R_*  (every collaborator's transitions;
        # each change a state-change.log line, StateTable)
        self.partition_states = StateTable(owner, False)
        self.replica_states = StateTable(owner, True)
        self.topics_to_delete = set()  # topics marked and queued                                  (TopicDeletion)
        self.reassignments = {}      # (topic, p) -> Reassignment                                 (Reassignments)
        self.offline_replicas = {}   # (topic, p) -> {broker ids}: replicas in a failed log dir  (LogDirs, KIP-112)

    def topics(self):
        return {tp[0] for tp in self.assignments}

    @staticmethod
    def new_reassignment(target, original):
        return Reassignment(target, original)


class ControllerMoved(Exception):
    """Another controller took over (higher epoch / other /controller owner): resign."""
