"""Replica assignment for new topics and new partitions: Kafka's ``AdminUtils.assignReplicasToBrokers``.

A pure function (no I/O) shared by ``kbroker-admin topics --zookeeper`` and the controller, so a topic gets the
same layout whichever path created it. Result: ``{partition id: [broker ids]}``, the first replica being the
preferred leader.

Rack-unaware (kafka-digest E.4). Brokers sorted by id, ``n`` of them. ``start_index`` and ``replica_shift`` are
random in ``[0, n)`` unless fixed (Kafka fixes both to the same value when a start index is given). For partition
``p`` (counting from ``start_partition_id``): ``shift`` grows by one each time ``p`` wraps (``p > 0 and p % n ==
0``); first replica = ``brokers[(p + start_index) % n]``; replica ``j >= 1`` = ``brokers[(first + 1 + (shift + j -
1) % (n - 1)) % n]``. The shift spreads the followers of consecutive "rounds" differently, so losing one broker
does not put all of its followers' load on a single other broker.

Rack-aware (every broker has a rack): the broker list is first interleaved by rack (racks sorted by name, brokers
of a rack sorted by id, taking one broker per rack in turn: racks r1:{0,5}, r2:{3,4}, r3:{1,2} give
``0,3,1,5,4,2``), first replicas walk that list like above, and each further replica is the next candidate
(``shift * n_racks`` based walk) skipping brokers whose rack already holds a replica while some rack has none, and
brokers already chosen while some broker has none. So with RF >= #racks every rack gets a replica.

``rack_aware_mode`` (Kafka's RackAwareMode): ``"enforced"`` (default; brokers with and without racks mixed is an
error), ``"safe"`` (use racks only when every broker has one: auto-creation), ``"disabled"`` (ignore racks).

Host-aware (kbroker's addition, issue 15 target 8: several broker processes per host). ``hosts`` = {broker id:
host name}, the host of each broker's first registered endpoint (``live_broker_hosts``). It takes effect only when
it can change something: at least two hosts AND some host running more than one broker; otherwise the layouts above
are Kafka's, unchanged. Then a host is one more fault domain below the rack (keyed ``(rack, host)`` so a host is
inside one rack by construction): the rack-alternated list interleaves, inside each rack, brokers by host (hosts in
order of their lowest broker id), first replicas walk it as above, and each further replica skips, in this order,
a broker whose rack holds a replica while some rack has none, whose host holds one while some host has none, and a
broker already chosen. So with RF <= #hosts no two replicas of a partition share a host, and with RF >= #racks
every rack still gets one. Brokers that share a machine must advertise the same host name for it to be seen.

Errors (kbroker.errors): partitions <= 0 -> InvalidPartitions (37); replication factor <= 0 or > #brokers ->
InvalidReplicationFactor (38); mixed racks in enforced mode -> InvalidReplicaAssignment (39).
"""

import random

from kbroker import errors

ENFORCED, SAFE, DISABLED = "enforced", "safe", "disabled"


def _normalise(brokers):
    """dict {id: rack}, or iterable of ids, or of (id, rack) pairs -> sorted [(id, rack or None)]."""
    if isinstance(brokers, dict):
        items = brokers.items()
    else:
        items = [(b, None) if isinstance(b, int) else (b[0], b[1]) for b in brokers]
    return sorted((int(b), r) for b, r in items)


def rack_alternated_brokers(broker_racks):
    """{id: rack} -> broker ids interleaved by rack (racks by name, ids ascending within a rack)."""
    by_rack = {}
    for b in sorted(broker_racks):
        by_rack.setdefault(broker_racks[b], []).append(b)
    racks = sorted(by_rack)
    iters = {r: iter(by_rack[r]) for r in racks}
    out, i = [], 0
    while len(out) < len(broker_racks):
        nxt = next(iters[racks[i]], None)
        if nxt is not None:
            out.append(nxt)
        i = (i + 1) % len(racks)
    return out


def _replica_index(first, shift, j, n):
    return (first + 1 + (shift + j) % (n - 1)) % n


def assign_replicas_to_brokers(brokers, n_partitions, replication_factor, start_index=-1, start_partition_id=-1,
                               replica_shift=None, rack_aware_mode=ENFORCED, rng=None, hosts=None):
    """Kafka's assignment. ``brokers``: {id: rack|None}, [id], or [(id, rack|None)]; ``hosts``: {id: host} or
    None (host-aware placement, module docstring; a broker missing from it counts as a host of its own).

    ``start_index >= 0`` fixes the start index (and, unless ``replica_shift`` is given, the shift too, as Kafka
    does); ``start_partition_id`` numbers the first assigned partition (adding partitions to a topic).
    """
    rng = rng or random
    metas = _normalise(brokers)
    if n_partitions <= 0:
        raise errors.InvalidPartitions("number of partitions must be larger than 0")
    if replication_factor <= 0:
        raise errors.InvalidReplicationFactor("replication factor must be larger than 0")
    if replication_factor > len(metas):
        raise errors.InvalidReplicationFactor(
            "replication factor: %d larger than available brokers: %d" % (replication_factor, len(metas)))
    with_rack = {b: r for b, r in metas if r is not None}
    if rack_aware_mode == DISABLED or not with_rack:
        rack_aware = False
    elif len(with_rack) == len(metas):
        rack_aware = True
    elif rack_aware_mode == SAFE:
        rack_aware = False
    else:
        raise errors.InvalidReplicaAssignment("Not all brokers have rack information for replica rack aware "
                                              "assignment (brokers without a rack: %s)"
                                              % sorted(b for b, r in metas if r is None))
    if _host_aware(metas, hosts):
        racks = {b: (r if rack_aware else None) for b, r in metas}
        domains = {b: (racks[b], hosts.get(b) or ("broker", b)) for b, _ in metas}
        return _assign_domain_aware(racks, domains, n_partitions, replication_factor, start_index,
                                    start_partition_id, replica_shift, rng)
    if rack_aware:
        return _assign_rack_aware(with_rack, n_partitions, replication_factor, start_index, start_partition_id,
                                  replica_shift, rng)
    ids = [b for b, _ in metas]
    n = len(ids)
    start = start_index if start_index >= 0 else rng.randrange(n)
    shift = replica_shift if replica_shift is not None else (start_index if start_index >= 0 else rng.randrange(n))
    p = max(0, start_partition_id)
    out = {}
    for _ in range(n_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [ids[first]]
        for j in range(replication_factor - 1):
            replicas.append(ids[_replica_index(first, shift, j, n)])
        out[p] = replicas
        p += 1
    return out


def _assign_rack_aware(broker_racks, n_partitions, rf, start_index, start_partition_id, replica_shift, rng):
    arranged = rack_alternated_brokers(broker_racks)
    n = len(arranged)
    n_racks = len(set(broker_racks.values()))
    start = start_index if start_index >= 0 else rng.randrange(n)
    shift = replica_shift if replica_shift is not None else (start_index if start_index >= 0 else rng.randrange(n))
    p = max(0, start_partition_id)
    out = {}
    for _ in range(n_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used = {broker_racks[leader]}
        brokers_used = {leader}
        k = 0
        for _ in range(rf - 1):
            while True:
                b = arranged[_replica_index(first, shift * n_racks, k, n)]
                k += 1
                rack = broker_racks[b]
                # Skip a broker whose rack already has a replica while some rack has none, and a broker already
                # holding one while some broker holds none.
                if (rack not in racks_used or len(racks_used) == n_racks) and \
                        (b not in brokers_used or len(brokers_used) == n):
                    replicas.append(b)
                    racks_used.add(rack)
                    brokers_used.add(b)
                    break
        out[p] = replicas
        p += 1
    return out


def _host_aware(metas, hosts):
    """True when host-aware placement can matter: >= 2 hosts and some host with more than one broker."""
    if not hosts:
        return False
    per_host = {}
    for b, _ in metas:
        h = hosts.get(b) or ("broker", b)
        per_host[h] = per_host.get(h, 0) + 1
    return len(per_host) >= 2 and max(per_host.values()) > 1


def host_alternated_brokers(racks, domains):
    """Rack-alternated list (racks by name, ``None`` = no racks) in which each rack's brokers are interleaved by
    host: hosts in order of their lowest broker id, ids ascending within a host. {0: A, 1: A, 2: B, 3: B} ->
    ``0,2,1,3``, so consecutive partitions' leaders alternate hosts as they alternate racks."""
    by_rack = {}
    for b in sorted(racks):
        by_rack.setdefault(racks[b], []).append(b)
    interleaved = {}
    for r, ids in by_rack.items():
        by_host = {}
        for b in ids:
            by_host.setdefault(domains[b], []).append(b)
        queues = [iter(v) for v in by_host.values()]  # dict order = order of each host's lowest id
        out = []
        while len(out) < len(ids):
            for q in queues:
                b = next(q, None)
                if b is not None:
                    out.append(b)
        interleaved[r] = out
    order = sorted(by_rack, key=lambda r: (r is not None, r or ""))
    iters = {r: iter(interleaved[r]) for r in order}
    out, i = [], 0
    while len(out) < len(racks):
        nxt = next(iters[order[i]], None)
        if nxt is not None:
            out.append(nxt)
        i = (i + 1) % len(order)
    return out


def _assign_domain_aware(racks, domains, n_partitions, rf, start_index, start_partition_id, replica_shift, rng):
    """The rack-aware walk with hosts as a second fault domain (module docstring). ``racks``: {id: rack|None};
    ``domains``: {id: (rack, host)}. Terminates: a broker of an unused rack sits on an unused host (hosts are
    keyed by rack) and is unused; once every rack is used, a broker of an unused host is unused; the candidate walk
    visits every broker but the first within n - 1 steps."""
    arranged = host_alternated_brokers(racks, domains)
    n = len(arranged)
    n_racks = len(set(racks.values()))
    n_hosts = len(set(domains.values()))
    stride = n_racks if n_racks > 1 else n_hosts
    start = start_index if start_index >= 0 else rng.randrange(n)
    shift = replica_shift if replica_shift is not None else (start_index if start_index >= 0 else rng.randrange(n))
    p = max(0, start_partition_id)
    out = {}
    for _ in range(n_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used, hosts_used, brokers_used = {racks[leader]}, {domains[leader]}, {leader}
        k = 0
        for _ in range(rf - 1):
            while True:
                b = arranged[_replica_index(first, shift * stride, k, n)]
                k += 1
                if (racks[b] not in racks_used or len(racks_used) == n_racks) and \
                        (domains[b] not in hosts_used or len(hosts_used) == n_hosts) and \
                        (b not in brokers_used or len(brokers_used) == n):
                    replicas.append(b)
                    racks_used.add(racks[b])
                    hosts_used.add(domains[b])
                    brokers_used.add(b)
                    break
        out[p] = replicas
        p += 1
    return out


def start_index_for_new_partitions(existing_assignment, brokers):
    """Kafka's addPartitions: new partitions continue from the position, in the sorted broker list, of the first
    broker whose id >= partition 0's first replica (0 when there is none), so the layout extends the old one."""
    ids = [b for b, _ in _normalise(brokers)]
    first = existing_assignment[min(existing_assignment)][0]
    return next((i for i, b in enumerate(ids) if b >= first), 0)
