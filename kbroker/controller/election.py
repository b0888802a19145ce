"""Leader selectors: pure functions choosing a partition's new leader and ISR (Kafka's PartitionLeaderSelectors).

Every selector gets the assignment (ordered replica list, first = preferred leader), the current ISR and the set of
brokers that may lead (live and not shutting down), and returns ``(leader, isr)`` or ``None`` when no leader can
be chosen. Candidates are always taken in assignment order, so the choice is deterministic.

=======================  ============================================================================================
new partition            leader = first live assigned replica; ISR = all live assigned replicas
offline partition        leader = first assigned replica that is live and in the ISR; ISR = ISR members still live;
                         none -> with ``unclean`` the first live assigned replica, ISR = [it]; else None (offline)
controlled shutdown      ISR minus shutting-down brokers; leader = first assigned replica in that ISR and live
preferred replica        leader = assignment[0] if live and in the ISR; ISR unchanged
reassigned partition     leader = first replica of the target list that is live and in the ISR; ISR unchanged
=======================  ============================================================================================
"""


def new_partition_leader(assignment, live):
    alive = [r for r in assignment if r in live]
    if not alive:
        return None
    return alive[0], alive


def offline_partition_leader(assignment, isr, live, unclean=False):
    live_isr = [r for r in isr if r in live]
    for r in assignment:
        if r in live_isr:
            return r, live_isr
    if unclean:
        for r in assignment:
            if r in live:
                return r, [r]
    return None


def controlled_shutdown_leader(assignment, isr, live, shutting_down):
    new_isr = [r for r in isr if r not in shutting_down]
    for r in assignment:
        if r in new_isr and r in live and r not in shutting_down:
            return r, new_isr
    return None


def preferred_replica_leader(assignment, isr, live):
    preferred = assignment[0]
    if preferred in live and preferred in isr:
        return preferred, list(isr)
    return None


def reassigned_partition_leader(target_replicas, isr, live):
    for r in target_replicas:
        if r in live and r in isr:
            return r, list(isr)
    return None
