"""Controller events: one frozen class for each thing that can happen to the controller, each handled by one method.

Sources only enqueue (``Controller.enqueue``): coordination watches (their callbacks run in the backend's greenlet;
the term's watches are dropped when it ends), the public entry points and session hooks (any greenlet), the
channel's StopReplica callbacks (sender greenlets) and the rebalance timer. The controller's one event greenlet
takes them in queue order and calls the handler its dispatch table names for the event's class
(``Controller._handlers``, built in ``Controller.__init__``; a class without a handler fails there, not at run time).

Guarded events (``guarded = True``: all but five) are handled only while this broker is the active controller and
after the still-controller check (``/controller_epoch`` and ``/controller`` re-read; a failed check resigns).
``Elect``, ``Resign`` and ``Rewatch`` change who is active, so they run in any state; ``ControlledShutdownRequest``
and ``ElectLeadersRequest`` run in any state because their callers wait for an answer (NOT_CONTROLLER when not
active, the check made by the handler itself).

Events carry names, never state: handlers re-read ZooKeeper where it is the source of truth, so a duplicated or
coalesced event is harmless, and one instance may be enqueued many times (a watch holds one).

=========================  =============================================  ==========================================
event                      source                                         handled by
=========================  =============================================  ==========================================
Elect                      ``/controller`` data watch                     Controller (election)
Resign                     session expired hook                           Controller
Rewatch                    session renewed hook                           Controller
ControlledShutdownRequest  ``Controller.controlled_shutdown``             ControlledShutdown (``shutdown.py``)
BrokerChange               ``/brokers/ids`` children                      Brokers (``brokers.py``)
TopicChange                ``/brokers/topics`` children                   TopicChanges (``topic_changes.py``)
PartitionModification      ``/brokers/topics/<t>`` data                   TopicChanges
IsrChange                  ``/isr_change_notification`` children          PartitionStateMachine (``partitions.py``)
DeleteTopics               ``/admin/delete_topics`` children              TopicDeletion (``deletion.py``)
StopReplicaResponse        a deletion StopReplica's answer (channel)      TopicDeletion
Reassign                   ``/admin/reassign_partitions`` data            Reassignments (``reassignment.py``)
ReassignedIsrChange        the state znode of a partition being moved     Reassignments
ReassignmentsRequest       AlterPartitionReassignments / List... (KIP-455) Reassignments
UncleanElectionEnabled     a dynamic unclean.leader.election.enable=true  Controller (PartitionStateMachine)
LogDirEvent                ``/log_dir_event_notification`` children      LogDirs (``log_dirs.py``, KIP-112)
OfflineReplicas            a LeaderAndIsr answer with error 56 (channel)  LogDirs
PreferredElection          ``/admin/preferred_replica_election`` data     PreferredLeaders (``leader_balance.py``)
ElectLeadersRequest        ``Controller.elect_leaders`` (ElectLeaders)    PreferredLeaders
AutoRebalance              every ``leader.imbalance.check.interval.s``    PreferredLeaders
=========================  =============================================  ==========================================
"""
from dataclasses import dataclass, field

from gevent.event import AsyncResult


@dataclass(frozen=True)
class Event:
    guarded = True   # a class attribute (no annotation): not a field


@dataclass(frozen=True)
class Elect(Event):
    guarded = False


@dataclass(frozen=True)
class Resign(Event):
    guarded = False


@dataclass(frozen=True)
class Rewatch(Event):
    guarded = False


@dataclass(frozen=True)
class ControlledShutdownRequest(Event):
    """``result`` gets the [(topic, p)] still led, or the exception the caller should see."""
    guarded = False
    broker_id: int
    broker_epoch: int
    result: AsyncResult = field(compare=False)


@dataclass(frozen=True)
class BrokerChange(Event):
    pass


@dataclass(frozen=True)
class TopicChange(Event):
    pass


@dataclass(frozen=True)
class PartitionModification(Event):
    topic: str


@dataclass(frozen=True)
class IsrChange(Event):
    pass


@dataclass(frozen=True)
class DeleteTopics(Event):
    pass


@dataclass(frozen=True)
class StopReplicaResponse(Event):
    broker_id: int
    response: dict = field(compare=False)


@dataclass(frozen=True)
class Reassign(Event):
    pass


@dataclass(frozen=True)
class ReassignedIsrChange(Event):
    tp: tuple


@dataclass(frozen=True)
class PreferredElection(Event):
    pass


@dataclass(frozen=True)
class AutoRebalance(Event):
    pass


@dataclass(frozen=True)
class ElectLeadersRequest(Event):
    """ElectLeaders (KIP-460): ``result`` gets {(topic, p): (error code, message, leader)} or the exception the caller
    should see. Not guarded, like ControlledShutdownRequest: its caller waits for an answer."""
    guarded = False
    election_type: int
    partitions: tuple = None        # ((topic, p), ...) or None = every partition
    result: AsyncResult = field(default=None, compare=False)


@dataclass(frozen=True)
class ReassignmentsRequest(Event):
    """AlterPartitionReassignments (``changes`` = ((tp, target replicas or None = cancel), ...)) or, with
    ``changes`` None, ListPartitionReassignments of ``partitions`` (None = all) -- KIP-455. ``result`` gets the
    answer (reassignment.py) or the exception the caller should see. Not guarded: its caller waits."""
    guarded = False
    changes: tuple = None
    partitions: tuple = None
    result: AsyncResult = field(default=None, compare=False)


@dataclass(frozen=True)
class UncleanElectionEnabled(Event):
    """unclean.leader.election.enable became true on this broker (a dynamic broker config, KIP-226): offline
    partitions get a leader now, not at the next broker change (Kafka's controller does the same)."""
    pass


@dataclass(frozen=True)
class LogDirEvent(Event):
    pass


@dataclass(frozen=True)
class OfflineReplicas(Event):
    """Broker ``broker_id`` answered KAFKA_STORAGE_ERROR for ``partitions`` ((topic, p), ...): a failed log dir."""
    broker_id: int
    partitions: tuple = ()


ALL = (Elect, Resign, Rewatch, ControlledShutdownRequest, BrokerChange, TopicChange, PartitionModification,
       IsrChange, DeleteTopics, StopReplicaResponse, Reassign, ReassignedIsrChange, PreferredElection, AutoRebalance,
       ElectLeadersRequest, ReassignmentsRequest, UncleanElectionEnabled, LogDirEvent, OfflineReplicas)
