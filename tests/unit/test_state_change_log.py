"""The controller's state tables log every change to Kafka's state.change.logger (kbroker/controller/state.py).

A partition becoming New or Online at INFO; a partition going Offline or NonExistent, and replica state changes, at
TRACE (Kafka >= 2's levels: ZkPartitionStateMachine logs those two partition moves at trace); an unchanged
assignment and a level that is off log nothing, a pop logs the move to NonExistent*.
"""
import logging

from kbroker.controller.state import (NEW, OFFLINE, ONLINE, R_OFFLINE, R_ONLINE, TRACE, ControllerContext,
                                      state_change_log)


def _lines(caplog):
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "state.change.logger"]


def test_partition_changes_at_info_replica_changes_at_trace(caplog):
    ctx = ControllerContext("Controller 2 epoch 7")
    with caplog.at_level(TRACE, logger="state.change.logger"):
        ctx.partition_states[("t", 0)] = NEW
        ctx.partition_states[("t", 0)] = ONLINE
        ctx.partition_states[("t", 0)] = ONLINE          # unchanged: no line
        ctx.replica_states[(("t", 0), 3)] = R_ONLINE
        ctx.replica_states[(("t", 0), 3)] = R_OFFLINE
        ctx.partition_states[("t", 0)] = OFFLINE
        ctx.replica_states.pop((("t", 0), 3))
        ctx.partition_states.pop(("t", 0))
        ctx.partition_states.pop(("t", 1), None)         # absent: no line
    assert _lines(caplog) == [
        (logging.INFO, "Controller 2 epoch 7 changed partition [t,0] state from NonExistentPartition to NewPartition"),
        (logging.INFO, "Controller 2 epoch 7 changed partition [t,0] state from NewPartition to OnlinePartition"),
        (TRACE, "Controller 2 epoch 7 changed state of replica 3 for partition [t,0] from NonExistentReplica to "
                "OnlineReplica"),
        (TRACE, "Controller 2 epoch 7 changed state of replica 3 for partition [t,0] from OnlineReplica to "
                "OfflineReplica"),
        (TRACE, "Controller 2 epoch 7 changed partition [t,0] state from OnlinePartition to OfflinePartition"),
        (TRACE, "Controller 2 epoch 7 changed state of replica 3 for partition [t,0] from OfflineReplica to "
                "NonExistentReplica"),
        (TRACE, "Controller 2 epoch 7 changed partition [t,0] state from OfflinePartition to "
                "NonExistentPartition"),
    ]
    assert dict(ctx.partition_states) == {} and dict(ctx.replica_states) == {}


def test_at_info_a_partition_going_offline_is_not_a_line(caplog):
    """A failed broker's 13,500 partitions going Offline were 13,500 INFO lines before its first election."""
    ctx = ControllerContext("Controller 2 epoch 7")
    with caplog.at_level(logging.INFO, logger="state.change.logger"):
        ctx.partition_states[("t", 0)] = ONLINE
        ctx.partition_states[("t", 0)] = OFFLINE
        ctx.partition_states[("t", 0)] = ONLINE
        ctx.partition_states.pop(("t", 0))
    assert _lines(caplog) == [
        (logging.INFO, "Controller 2 epoch 7 changed partition [t,0] state from NonExistentPartition to OnlinePartition"),
        (logging.INFO, "Controller 2 epoch 7 changed partition [t,0] state from OfflinePartition to OnlinePartition"),
    ]


def test_levels_off_log_nothing_and_the_table_still_works(caplog):
    ctx = ControllerContext("Controller 0 epoch 1")
    with caplog.at_level(logging.WARNING, logger="state.change.logger"):
        ctx.partition_states[("t", 0)] = NEW
        ctx.replica_states[(("t", 0), 1)] = R_ONLINE
    assert _lines(caplog) == []
    assert not state_change_log.isEnabledFor(logging.INFO)
    assert ctx.partition_states == {("t", 0): NEW} and ctx.replica_states == {(("t", 0), 1): R_ONLINE}
