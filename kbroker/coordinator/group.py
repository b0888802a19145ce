"""One consumer group's state: members, generation, chosen protocol, committed offsets.

States and their legal transitions (Kafka's GroupState, 1.1+ names; 0.10.1 called CompletingRebalance
"AwaitingSync"):

    Empty               -> PreparingRebalance, Dead
    PreparingRebalance  -> CompletingRebalance (everyone rejoined), Empty (nobody left), Dead
    CompletingRebalance -> Stable (leader's assignment stored), PreparingRebalance (membership changed), Dead
    Stable              -> PreparingRebalance, Dead
    Dead                -> (terminal: the group is being removed or its partition unloaded)

``Group.transition`` raises ``IllegalStateTransition`` for anything else, so a coordinator bug fails loudly.
Members keep insertion order; the leader is the first member to join (re-picked from the rejoined members when
the leader goes away). This module holds data and pure decisions only: no clock, no I/O, no callbacks fired.
"""
import uuid

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"

_VALID_PREVIOUS = {
    PREPARING_REBALANCE: {STABLE, COMPLETING_REBALANCE, EMPTY},
    COMPLETING_REBALANCE: {PREPARING_REBALANCE},
    STABLE: {COMPLETING_REBALANCE},
    EMPTY: {PREPARING_REBALANCE},
    DEAD: {EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE, DEAD},
}


class IllegalStateTransition(RuntimeError):
    pass


def java_string_hash(s):
    """Java's ``String.hashCode``: s[0]*31^(n-1) + ... over UTF-16 code units, int32 overflow, signed."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n):
    """Kafka's ``Utils.abs``: ``Math.abs`` except that Integer.MIN_VALUE maps to 0 (not to itself)."""
    return 0 if n == -(1 << 31) else abs(n)


def partition_for(group_id, num_partitions):
    """The ``__consumer_offsets`` partition (and so the coordinator) of a group: GroupMetadataManager.partitionFor."""
    return kafka_abs(java_string_hash(group_id)) % num_partitions


def new_member_id(client_id):
    return "%s-%s" % (client_id or "", uuid.uuid4())


class OffsetAndMetadata:
    """One committed (or pending transactional) position. ``record_offset``: the ``__consumer_offsets`` offset of
    the batch that holds its record (-1 unknown, None while its append is in flight): when a transactional commit
    completes it replaces the committed offset only if its record is newer (Kafka's ``olderThan`` rule), so a
    plain OffsetCommit written after the transactional one wins, in memory and on replay alike."""
    __slots__ = ("offset", "leader_epoch", "metadata", "commit_timestamp", "expire_timestamp", "record_offset")

    def __init__(self, offset, metadata, commit_timestamp, expire_timestamp=-1, leader_epoch=-1, record_offset=-1):
        self.offset = offset
        self.leader_epoch = leader_epoch
        self.metadata = metadata
        self.commit_timestamp = commit_timestamp
        self.expire_timestamp = expire_timestamp
        self.record_offset = record_offset

    def __repr__(self):
        return "OffsetAndMetadata(%d, %r)" % (self.offset, self.metadata)


class Member:
    __slots__ = ("member_id", "group_instance_id", "client_id", "client_host", "session_timeout",
                 "rebalance_timeout", "protocol_type", "protocols", "assignment", "join_callback",
                 "sync_callback", "last_seen", "session_timer", "is_new")

    def __init__(self, member_id, group_instance_id, client_id, client_host, rebalance_timeout, session_timeout,
                 protocol_type, protocols):
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout = rebalance_timeout
        self.session_timeout = session_timeout
        self.protocol_type = protocol_type
        self.protocols = list(protocols)       # [(name, metadata bytes)] in the member's preference order
        self.assignment = b""
        self.join_callback = None              # set while the member's JoinGroup is parked
        self.sync_callback = None              # set while the member's SyncGroup is parked
        self.last_seen = 0
        self.session_timer = None
        self.is_new = True

    @property
    def awaiting_join(self):
        return self.join_callback is not None

    def protocol_names(self):
        return [p[0] for p in self.protocols]

    def metadata(self, protocol):
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return None

    def matches(self, protocols):
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]

    def vote(self, candidates):
        for name, _ in self.protocols:
            if name in candidates:
                return name
        return None


class Group:
    def __init__(self, group_id, state=EMPTY, now=0):
        self.group_id = group_id
        self.state = state
        self.state_timestamp = now
        self.protocol_type = None
        self.protocol = None
        self.generation = 0
        self.leader_id = None
        self.members = {}
        self.static_members = {}               # group_instance_id -> member_id
        self.pending_members = {}              # member ids handed out with MEMBER_ID_REQUIRED -> expiry handle
        self.offsets = {}                      # (topic, partition) -> OffsetAndMetadata
        # Transactional commits not yet completed by their producer's marker (KIP-98/447):
        # producer id -> {(topic, partition): OffsetAndMetadata}. Invisible to OffsetFetch until committed.
        self.pending_txn = {}
        self.join_timer = None
        self.initial_delay_pending = False
        self.new_member_added = False

    def __repr__(self):
        return "Group(%s, %s, gen=%d, members=%d)" % (self.group_id, self.state, self.generation,
                                                      len(self.members))

    def is_(self, state):
        return self.state == state

    def transition(self, state, now=0):
        if self.state not in _VALID_PREVIOUS[state]:
            raise IllegalStateTransition("group %s: %s -> %s" % (self.group_id, self.state, state))
        self.state = state
        self.state_timestamp = now

    def has_pending_txn(self, tp):
        """Does any producer hold a transactional commit of ``tp`` not yet committed or aborted?"""
        return any(tp in offsets for offsets in self.pending_txn.values())

    def pending_txn_partitions(self):
        return {tp for offsets in self.pending_txn.values() for tp in offsets}

    # ------------------------------------------------------------------------------------------ members
    def add_member(self, member):
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove_member(self, member_id):
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and \
                self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def awaiting_join_count(self):
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def all_members_joined(self):
        return len(self.members) == self.awaiting_join_count() and not self.pending_members

    def max_rebalance_timeout(self):
        return max((m.rebalance_timeout for m in self.members.values()), default=0)

    def candidate_protocols(self):
        """Protocol names every member supports, in the leader's (else first member's) preference order."""
        members = list(self.members.values())
        if not members:
            return []
        first = self.members.get(self.leader_id) or members[0]
        common = set(first.protocol_names())
        for m in members:
            common &= set(m.protocol_names())
        return [n for n in first.protocol_names() if n in common]

    def supports(self, protocol_type, protocols):
        """Kafka's supportsProtocols: an empty group takes any non-empty type and list; else the type must match
        and the joining member must share at least one protocol with every current member."""
        names = [p[0] for p in protocols]
        if not self.members:
            return bool(protocol_type) and bool(names)
        if protocol_type != self.protocol_type:
            return False
        common = set(names)
        for m in self.members.values():
            common &= set(m.protocol_names())
        return bool(common)

    def select_protocol(self):
        """Each member votes for its first supported candidate; most votes wins, ties by candidate order."""
        candidates = self.candidate_protocols()
        if not candidates:
            return None
        votes = {c: 0 for c in candidates}
        for m in self.members.values():
            votes[m.vote(candidates)] += 1
        best = max(votes.values())
        return next(c for c in candidates if votes[c] == best)
