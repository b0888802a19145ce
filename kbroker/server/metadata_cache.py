"""The broker's view of the cluster, fed by the controller's UpdateMetadata requests (ZooKeeper mode).

Contents (all replaced or patched only by ``update``):

* live brokers: ``{id: CachedBroker(id, endpoints {listener name: (host, port, security protocol name)}, rack)}``;
  every UpdateMetadata carries the complete live-broker list, so each update replaces it;
* partition states: ``{topic: {partition: CachedPartition(leader, leader_epoch, isr, replicas, offline_replicas,
  zk_version, controller_epoch)}}``; an UpdateMetadata lists only the partitions that changed, so states are
  merged in; a state whose leader is -2 (Kafka's ``LeaderDuringDelete``) removes the partition, and a topic left
  without partitions disappears;
* answers memoized per topic for the Metadata handler (``memo``): a full Metadata of 10,000 partitions built every
  topic's answer from its states each time (~25 ms of the loop for v1, ~55 ms for v9 on this 2-core machine), so the
  built answer is kept until that topic's states change (``_apply`` drops it) or the set of live brokers changes
  (``update`` drops all); the handler must not mutate a memoized answer;
* ``controller_id`` (-1 until the first update) and ``controller_epoch`` = the highest controller epoch of any
  *applied* controller request (UpdateMetadata, LeaderAndIsr, StopReplica). Requests from a lower epoch are stale and
  must be refused with STALE_CONTROLLER_EPOCH (11) -- ``accept_controller(id, epoch)`` is that check, and it records
  the epoch, so the handlers call it last, after the request proved it comes from the current controller
  (kbroker/handlers/cluster.py): an unchecked request with a made-up epoch once raised it and locked the real
  controller out (issue 8).

Request versions (kbroker/protocol/apis/update_metadata.py): v0 gives one host/port per broker (listener
PLAINTEXT); v1-v2 list endpoints by security protocol id (the listener name is the protocol name); v3+ name the
listener; v2+ carry the rack; v4+ the offline replicas; v5+ group partition states by topic. ``update`` takes the
decoded dict of any of v0-v8 (pass ``version`` so v0/v1 racks are read as absent).

Threading: used only from the broker's event loop (gevent greenlets, no blocking inside), so no locks.
"""
from collections import namedtuple

# Kafka's LeaderAndIsr.LeaderDuringDelete: the partition is being deleted; brokers drop it from their cache.
LEADER_DURING_DELETE = -2

# SecurityProtocol ids on the wire (UpdateMetadata v1+ endpoints).
SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}
SECURITY_PROTOCOL_IDS = {v: k for k, v in SECURITY_PROTOCOLS.items()}

CachedBroker = namedtuple("CachedBroker", "id endpoints rack")
CachedPartition = namedtuple(
    "CachedPartition", "leader leader_epoch isr replicas offline_replicas zk_version controller_epoch")
BrokerEndpoint = namedtuple("BrokerEndpoint", "id host port rack")
BrokerEndpoint.__doc__ = "One broker as the Metadata handler lists it (the endpoint on the asking listener)."


class MetadataCache:
    def __init__(self):
        self.brokers = {}
        self.states = {}
        self.controller_id = -1
        self.controller_epoch = -1
        self._memo = {}       # {topic: {key: answer}} (module docstring)
        # fn([(topic, p) deleted]) after each update that removed partitions (the broker forgets their topics'
        # configs); a listener's exception fails the update's answer, not the cache.
        self.deletion_listeners = []
        # fn(frozenset of broker ids) after each update whose live brokers include ids the previous one did not
        # (a broker started or registered again); the fetch sessions refresh their followers then.
        self.broker_listeners = []

    # -- fencing --------------------------------------------------------------------------------------------------

    def accept_controller(self, controller_id, controller_epoch):
        """False for a request from an older controller epoch (answer STALE_CONTROLLER_EPOCH); else record it.
        Call only for a request already authenticated as the current controller's."""
        if controller_epoch < self.controller_epoch:
            return False
        self.controller_epoch = controller_epoch
        self.controller_id = controller_id
        return True

    # -- updates --------------------------------------------------------------------------------------------------

    def update(self, req, version=None):
        """Apply a decoded UpdateMetadata request; returns the [(topic, partition)] it deleted.

        The caller (the handler) has already checked the controller epoch with ``accept_controller``.
        """
        self.controller_id = req["controller_id"]
        self.controller_epoch = max(self.controller_epoch, req["controller_epoch"])
        brokers = {}
        for b in req.get("live_brokers") or ():
            eps = {}
            for ep in b.get("endpoints") or ():
                proto = SECURITY_PROTOCOLS.get(ep.get("security_protocol", 0), "PLAINTEXT")
                eps[ep.get("listener") or proto] = (ep["host"], ep["port"], proto)
            if not eps and b.get("v0_host"):
                eps["PLAINTEXT"] = (b["v0_host"], b["v0_port"], "PLAINTEXT")
            rack = b.get("rack")
            if version is not None and version < 2:
                rack = None
            brokers[b["id"]] = CachedBroker(b["id"], eps, rack)
        joined = frozenset(brokers.keys() - self.brokers.keys())
        if brokers.keys() != self.brokers.keys():
            self._memo.clear()      # leaders and offline replicas are answered against the live set
        self.brokers = brokers
        deleted = []
        for ps in req.get("ungrouped_partition_states") or ():
            self._apply(ps["topic_name"], ps, deleted)
        for ts in req.get("topic_states") or ():
            for ps in ts.get("partition_states") or ():
                self._apply(ts["topic_name"], ps, deleted)
        if deleted:
            for fn in list(self.deletion_listeners):
                fn(deleted)
        if joined:
            for fn in list(self.broker_listeners):
                fn(joined)
        return deleted

    def _apply(self, topic, ps, deleted):
        p = ps["partition_index"]
        self._memo.pop(topic, None)
        if ps["leader"] == LEADER_DURING_DELETE:
            parts = self.states.get(topic)
            if parts is not None and parts.pop(p, None) is not None:
                deleted.append((topic, p))
            if parts is not None and not parts:
                del self.states[topic]
            return
        self.states.setdefault(topic, {})[p] = CachedPartition(
            ps["leader"], ps["leader_epoch"], list(ps["isr"]), list(ps["replicas"]),
            list(ps.get("offline_replicas") or ()), ps["zk_version"], ps["controller_epoch"])

    # -- queries (the Metadata handler) ---------------------------------------------------------------------------

    def alive_brokers(self, listener=None):
        """[BrokerEndpoint] sorted by id: brokers with an endpoint on ``listener`` (any endpoint when None)."""
        out = []
        for bid in sorted(self.brokers):
            b = self.brokers[bid]
            if listener is None:
                ep = next(iter(b.endpoints.values()), None)
            else:
                ep = b.endpoints.get(listener)
            if ep is not None:
                out.append(BrokerEndpoint(bid, ep[0], ep[1], b.rack))
        return out

    def alive_broker_ids(self):
        return set(self.brokers)

    def broker(self, broker_id):
        return self.brokers.get(broker_id)

    def topics(self):
        return sorted(self.states)

    def contains_topic(self, topic):
        return topic in self.states

    def partitions(self, topic):
        """{partition: CachedPartition} (a copy; empty for an unknown topic)."""
        return dict(self.states.get(topic, {}))

    def memo(self, topic, key, build):
        """``build(states)`` for a known ``topic`` (its ``{partition: CachedPartition}``, not to be kept), memoized per
        ``key`` until the topic's states or the live brokers change; None for an unknown topic."""
        parts = self.states.get(topic)
        if parts is None:
            return None
        memo = self._memo.setdefault(topic, {})
        answer = memo.get(key)
        if answer is None:
            answer = memo[key] = build(parts)
        return answer

    def topic(self, topic):
        """{partition: CachedPartition} (a copy), or None for a topic the cache does not know."""
        parts = self.states.get(topic)
        return None if parts is None else dict(parts)

    def partition(self, topic, p):
        return self.states.get(topic, {}).get(p)

    def leader(self, topic, p):
        """The leader's broker id, -1 when offline; None for an unknown partition."""
        st = self.partition(topic, p)
        return None if st is None else st.leader
