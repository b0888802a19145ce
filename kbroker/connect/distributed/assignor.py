"""The leader's assignment of connectors and tasks to the workers of a generation: ``eager_assign`` (Kafka's
EagerAssignor, for ``connect.protocol=eager``) and ``incremental_assign`` (KIP-415, see its docstring).

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


# ====================================================================================================== KIP-415

class CooperativeMemory:
    """What the leader remembers between rebalances (Kafka's IncrementalCooperativeAssignor state): ``owner``
    {item: member_id} of the last assignment -- items are connector names (str) and (connector, task) tuples --
    and ``deadline_ms``: when work lost with a departed member is given to others (None: nothing is waiting)."""

    def __init__(self):
        self.owner = {}
        self.deadline_ms = None

    def forget_tasks_of(self, connector):
        """Task configs of ``connector`` were rewritten: its workers stop its tasks, which are new work now."""
        self.owner = {k: v for k, v in self.owner.items() if not (isinstance(k, tuple) and k[0] == connector)}


def _targets(loads, total):
    """{member: target count}: the (total mod n) most loaded members (ties by id) may keep ceil, the rest floor."""
    n = len(loads)
    floor, extra = divmod(total, n)
    order = sorted(loads, key=lambda m: (-loads[m], m))
    return {m: floor + (1 if i < extra else 0) for i, m in enumerate(order)}


def incremental_assign(leader_id, members, snapshot_offset, connectors, task_counts, memory, now_ms,
                       max_delay_ms, catch_up=None):
    """Incremental cooperative assignment (KIP-415). ``members``: {member_id: WorkerState} whose ``assignment``
    is what each member runs now; ``memory``: the leader's CooperativeMemory (updated in place). Returns
    {member_id: Assignment} where ``connectors``/``tasks`` are what each member must START and ``revoked_*`` what
    it must STOP; ``delay`` > 0 asks every member to rejoin after that many ms.

    Rules (Kafka's, simplified to one pass per rebalance):

    1. An item a member runs that is no longer configured is revoked from it (deleted connectors, fewer tasks).
    2. Configured items that no member runs: those the leader remembers giving to a member that has left are
       *lost* -- with ``scheduled.rebalance.max.delay.ms`` > 0 they wait for the departed member until that delay
       has passed since the loss was first seen (the member may come back), then go to the least loaded members;
       the others are *new* and go to the least loaded members at once.
    3. When nothing is waiting, members above their fair share (floor/ceil of items per member, connectors and
       tasks balanced separately) give up the excess: revoked now, assigned to others at the next rebalance (which
       the revoking members start as soon as they have stopped it).
    """
    max_offset = max(s.offset for s in members.values())
    leader_url = members[leader_id].url
    if snapshot_offset < max_offset:
        ok = False
        if catch_up is not None:
            ok, snapshot_offset, connectors, task_counts = catch_up(max_offset)
        if not ok or snapshot_offset < max_offset:
            return {m: Assignment(CONFIG_MISMATCH, leader_id, leader_url, max_offset) for m in members}
    out = {m: Assignment(NO_ERROR, leader_id, leader_url, snapshot_offset) for m in members}
    configured_connectors = set(connectors)
    configured_tasks = {(c, i) for c in connectors for i in range(task_counts.get(c, 0))}
    running = {}
    for m, s in members.items():
        a = s.assignment
        running[m] = (set(a.connectors) if a else set(), {tuple(t) for t in a.tasks} if a else set())
    delay = 0
    waiting = False
    new_owner = {}
    for kind in (0, 1):
        configured = configured_connectors if kind == 0 else configured_tasks
        held = {}
        for m in sorted(members):
            for item in running[m][kind]:
                if item not in configured or item in held:     # rule 1 (and a duplicate: keep the first)
                    (out[m].revoked_connectors if kind == 0 else out[m].revoked_tasks).append(item)
                else:
                    held[item] = m
        unheld = configured - set(held)
        lost = {i for i in unheld if i in memory.owner and memory.owner[i] not in members}
        new = unheld - lost
        if lost and max_delay_ms > 0:
            if memory.deadline_ms is None:
                memory.deadline_ms = now_ms + max_delay_ms
            if now_ms < memory.deadline_ms:
                waiting = True
                delay = max(delay, memory.deadline_ms - now_ms)
                for i in lost:                   # still the departed member's, until the deadline
                    new_owner[i] = memory.owner[i]
                lost = set()
        loads = {m: sum(1 for v in held.values() if v == m) for m in members}
        for item in sorted(new | lost, key=str):
            m = min(sorted(members), key=lambda x: loads[x])
            loads[m] += 1
            held[item] = m
            (out[m].connectors if kind == 0 else out[m].tasks).append(item)
        new_owner.update(held)
        if not waiting and not (new | lost):
            targets = _targets(loads, sum(loads.values()))
            for m in sorted(members):
                excess = loads[m] - targets[m]
                if excess <= 0:
                    continue
                mine = sorted((i for i, o in held.items() if o == m), key=str, reverse=True)[:excess]
                for item in mine:
                    del new_owner[item]
                    (out[m].revoked_connectors if kind == 0 else out[m].revoked_tasks).append(item)
    if not waiting:
        memory.deadline_ms = None
    memory.owner = new_owner
    for a in out.values():
        a.delay = int(delay)
        a.tasks.sort()
        a.revoked_tasks.sort()
    return out
