"""The leader's assignment of connectors and tasks to the workers of a generation (Kafka's EagerAssignor).

Inputs: each member's ``WorkerState`` (url, config offset) and the leader's config snapshot (connector names and
their committed task counts). Rules, as Kafka's:

1. The leader must have read the config topic at least as far as the furthest member (``max offset``); if it cannot
   catch up (``catch_up(max_offset)`` returns False), every member gets an empty assignment with error
   CONFIG_MISMATCH and the offset, so all of them read the config topic further and rejoin.
2. Members sorted by member id form a ring; connectors, sorted by name, go round it one each; then every task --
   connectors sorted by name, tasks by number -- continues round the same ring from where the connectors stopped.
   So with members [a, b, c], connectors [src, snk] and tasks src-0, snk-0..2: src->a, snk->b, src-0->c, snk-0->a,
   snk-1->b, snk-2->c.
3. Every assignment names the leader (member id and URL) and the config offset it was computed at.

Eager means every member has stopped everything before joining, so nothing is revoked in an assignment.
"""
from .protocol import Assignment, CONFIG_MISMATCH, NO_ERROR


def eager_assign(leader_id, members, snapshot_offset, connectors, task_counts, catch_up=None):
    """``members``: {member_id: WorkerState}; ``connectors``: names; ``task_counts``: {connector: n}.
    ``catch_up(offset) -> (ok, snapshot_offset, connectors, task_counts)`` refreshes the leader's view when a member
    is ahead of it. Returns {member_id: Assignment}."""
    max_offset = max(s.offset for s in members.values())
    leader_url = members[leader_id].url
    if snapshot_offset < max_offset:
        ok = False
        if catch_up is not None:
            ok, snapshot_offset, connectors, task_counts = catch_up(max_offset)
        if not ok or snapshot_offset < max_offset:
            return {m: Assignment(CONFIG_MISMATCH, leader_id, leader_url, max_offset) for m in members}
    ring = sorted(members)
    out = {m: Assignment(NO_ERROR, leader_id, leader_url, snapshot_offset) for m in ring}
    i = 0
    for name in sorted(connectors):
        out[ring[i % len(ring)]].connectors.append(name)
        i += 1
    for name in sorted(connectors):
        for task in range(task_counts.get(name, 0)):
            out[ring[i % len(ring)]].tasks.append((name, task))
            i += 1
    return out
