"""One transactional id's state machine (Kafka's TransactionMetadata, KIP-98).

States (the id is what ``__transaction_state`` stores, the name what DescribeTransactions / ListTransactions show):

    id  name               entered from                              meaning
    0   Empty              Empty, CompleteCommit, CompleteAbort      no transaction (after InitProducerId)
    1   Ongoing            Ongoing, Empty, CompleteCommit/Abort      partitions added (AddPartitions/AddOffsets)
    2   PrepareCommit      Ongoing                                   EndTxn(commit) logged; markers being written
    3   PrepareAbort       Ongoing, PrepareEpochFence                EndTxn(abort), a timeout or a fence logged
    4   CompleteCommit     PrepareCommit                             every COMMIT marker written
    5   CompleteAbort      PrepareAbort                              every ABORT marker written
    6   Dead               Empty, CompleteCommit, CompleteAbort      expired (the tombstone is being written)
    7   PrepareEpochFence  Ongoing                                   bumping the epoch to fence the producer, never
                                                                     logged: it becomes PrepareAbort at once

Two-phase changes: ``prepare_*`` checks the transition is legal, sets ``pending_state`` and returns a ``TxnTransit``
(the whole target value) without changing anything else; the caller logs the transit to ``__transaction_state``
and, once that is replicated, ``complete_transition(transit)`` applies it (``abort_transition`` drops it when the
write failed). While ``pending_state`` is set no other transition may be prepared: the coordinator answers
CONCURRENT_TRANSACTIONS (51). An illegal transition or a transit that does not match the pending state is a bug
and raises ``IllegalTransition``: nothing is changed then.

Epochs: ``producer_epoch`` -1 only before the first InitProducerId completes; an epoch >= 32766 is "exhausted"
(``is_epoch_exhausted``): the next InitProducerId rotates to a new producer id at epoch 0, so the coordinator can
always fence with epoch + 1 <= 32767. ``last_producer_id`` / ``last_producer_epoch`` let a producer retrying
InitProducerId with its old id/epoch (KIP-360) get the answer it missed; they are not persisted (value v0 has no
field for them), so after a coordinator move such a retry is fenced, as in Kafka 3.x.
"""
from collections import namedtuple

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767


class State:
    __slots__ = ("id", "name", "previous", "expirable")

    def __init__(self, id_, name, expirable=False):
        self.id = id_
        self.name = name
        self.previous = frozenset()
        self.expirable = expirable

    def __repr__(self):
        return self.name


EMPTY = State(0, "Empty", expirable=True)
ONGOING = State(1, "Ongoing")
PREPARE_COMMIT = State(2, "PrepareCommit")
PREPARE_ABORT = State(3, "PrepareAbort")
COMPLETE_COMMIT = State(4, "CompleteCommit", expirable=True)
COMPLETE_ABORT = State(5, "CompleteAbort", expirable=True)
DEAD = State(6, "Dead")
PREPARE_EPOCH_FENCE = State(7, "PrepareEpochFence")

ALL_STATES = (EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT, DEAD,
              PREPARE_EPOCH_FENCE)
BY_ID = {s.id: s for s in ALL_STATES}
BY_NAME = {s.name: s for s in ALL_STATES}

EMPTY.previous = frozenset([EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT])
ONGOING.previous = frozenset([ONGOING, EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT])
PREPARE_COMMIT.previous = frozenset([ONGOING])
PREPARE_ABORT.previous = frozenset([ONGOING, PREPARE_EPOCH_FENCE])
COMPLETE_COMMIT.previous = frozenset([PREPARE_COMMIT])
COMPLETE_ABORT.previous = frozenset([PREPARE_ABORT])
DEAD.previous = frozenset([EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT])
PREPARE_EPOCH_FENCE.previous = frozenset([ONGOING])

# The target of one transition, logged before it is applied. ``partitions``: frozenset of (topic, partition).
TxnTransit = namedtuple("TxnTransit", "producer_id last_producer_id producer_epoch last_producer_epoch timeout_ms "
                                      "state partitions start_ms last_update_ms")


class IllegalTransition(Exception):
    """A transition the state machine does not allow (a coordinator bug, never a client's doing)."""


def is_epoch_exhausted(epoch):
    return epoch >= MAX_EPOCH - 1


class TransactionMetadata:
    """The coordinator's view of one transactional id (module docstring). Mutated only by ``complete_transition``
    and the few fields the coordinator sets directly (``pending_state`` on a failed write, ``has_failed_fence``,
    and the epoch-fence takeover in EndTxn)."""

    __slots__ = ("transactional_id", "producer_id", "last_producer_id", "producer_epoch", "last_producer_epoch",
                 "timeout_ms", "state", "partitions", "start_ms", "last_update_ms", "pending_state",
                 "has_failed_fence")

    def __init__(self, transactional_id, producer_id, producer_epoch, timeout_ms, state=EMPTY, partitions=(),
                 start_ms=-1, last_update_ms=-1, last_producer_id=NO_PRODUCER_ID,
                 last_producer_epoch=NO_PRODUCER_EPOCH):
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.last_producer_id = last_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.timeout_ms = timeout_ms
        self.state = state
        self.partitions = set(partitions)
        self.start_ms = start_ms
        self.last_update_ms = last_update_ms
        self.pending_state = None
        # A fence whose log write failed already bumped the epoch in memory (never returned to anyone): the next
        # fence reuses it instead of bumping again (Kafka's hasFailedEpochFence).
        self.has_failed_fence = False

    def __repr__(self):
        return ("TransactionMetadata(%r, pid=%d, epoch=%d, %s%s, timeout=%d, partitions=%d)"
                % (self.transactional_id, self.producer_id, self.producer_epoch, self.state.name,
                   "" if self.pending_state is None else " -> %s" % self.pending_state.name, self.timeout_ms,
                   len(self.partitions)))

    @property
    def pending(self):
        return self.pending_state is not None

    @property
    def epoch_exhausted(self):
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self):
        return self.state in (ONGOING, PREPARE_ABORT, PREPARE_COMMIT)

    def current(self):
        """The present value as a transit (what the log holds for it; used to re-log a loaded Prepare state)."""
        return TxnTransit(self.producer_id, self.last_producer_id, self.producer_epoch, self.last_producer_epoch,
                          self.timeout_ms, self.state, frozenset(self.partitions), self.start_ms,
                          self.last_update_ms)

    # ---------------------------------------------------------------------------------------------- prepare
    def _prepare(self, state, producer_id, epoch, last_epoch, timeout_ms, partitions, start_ms, now):
        if self.pending_state is not None:
            raise IllegalTransition("%r: preparing %s while %s is pending" % (self, state.name,
                                                                            self.pending_state.name))
        if producer_id < 0:
            raise IllegalTransition("%r: illegal producer id %d" % (self, producer_id))
        if state is not DEAD and epoch < 0:
            raise IllegalTransition("%r: illegal producer epoch %d" % (self, epoch))
        if self.state not in state.previous:
            raise IllegalTransition("%r: %s cannot follow %s" % (self, state.name, self.state.name))
        self.pending_state = state
        return TxnTransit(producer_id, self.producer_id, epoch, last_epoch, timeout_ms, state, frozenset(partitions),
                          start_ms, now)

    def prepare_fence_epoch(self):
        """Ongoing -> PrepareEpochFence with epoch + 1 (a failed earlier fence's epoch is reused)."""
        if self.producer_epoch >= MAX_EPOCH:
            raise IllegalTransition("%r: cannot fence at epoch %d" % (self, self.producer_epoch))
        epoch = self.producer_epoch if self.has_failed_fence else self.producer_epoch + 1
        return self._prepare(PREPARE_EPOCH_FENCE, self.producer_id, epoch, NO_PRODUCER_EPOCH, self.timeout_ms,
                             self.partitions, self.start_ms, self.last_update_ms)

    def prepare_increment_epoch(self, timeout_ms, expected_epoch, now):
        """InitProducerId on an idle id -> (error code 0 | PRODUCER_FENCED 90, transit to Empty or None).
        ``expected_epoch`` None: a new producer instance (bump, forget the last epoch); else KIP-360's retry or
        recovery: the current epoch bumps, the last epoch answers again without a bump, anything else is fenced."""
        if self.epoch_exhausted:
            raise IllegalTransition("%r: epochs exhausted" % self)
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return 90, None
        return 0, self._prepare(EMPTY, self.producer_id, epoch, last, timeout_ms, (), -1, now)

    def prepare_rotate_producer_id(self, new_producer_id, timeout_ms, now, record_last_epoch):
        """InitProducerId once the epoch is exhausted: a new producer id at epoch 0."""
        if self.has_pending_transaction:
            raise IllegalTransition("%r: rotating the producer id with a transaction pending" % self)
        return self._prepare(EMPTY, new_producer_id, 0, self.producer_epoch if record_last_epoch else
                             NO_PRODUCER_EPOCH, timeout_ms, (), -1, now)

    def prepare_add_partitions(self, added, now):
        """AddPartitions / AddOffsets -> Ongoing with the union; a transaction starting now gets start time now."""
        start = now if self.state in (EMPTY, COMPLETE_ABORT, COMPLETE_COMMIT) else self.start_ms
        return self._prepare(ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, self.partitions | set(added), start, now)

    def prepare_abort_or_commit(self, state, now):
        return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch, self.timeout_ms,
                             self.partitions, self.start_ms, now)

    def prepare_complete(self, now):
        """PrepareCommit -> CompleteCommit, PrepareAbort -> CompleteAbort (every marker written)."""
        state = COMPLETE_COMMIT if self.state is PREPARE_COMMIT else COMPLETE_ABORT
        self.has_failed_fence = False
        return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch, self.timeout_ms,
                             (), self.start_ms, now)

    def prepare_dead(self):
        return self._prepare(DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch, self.timeout_ms,
                             (), self.start_ms, self.last_update_ms)

    # --------------------------------------------------------------------------------------------- complete
    def complete_transition(self, t):
        """Apply a logged transit: it must be the pending state and keep Kafka's invariants (epoch the same, + 1 or
        a new producer id at 0 for Empty; partitions only grow while Ongoing; the same set for Prepare*)."""
        to = self.pending_state
        if to is None or to is not t.state:
            raise IllegalTransition("%r: completing %s, pending %s" % (self, t.state.name, to))
        same_producer = t.producer_epoch == self.producer_epoch and t.producer_id == self.producer_id
        if to is EMPTY:
            bump = t.producer_epoch == self.producer_epoch + 1 or (t.producer_epoch == 0 and
                                                                   t.producer_id != self.producer_id)
            if (t.producer_epoch != self.producer_epoch and not bump) or t.partitions or t.start_ms != -1:
                raise IllegalTransition("%r: bad transit %r" % (self, t))
            self.timeout_ms = t.timeout_ms
            self.producer_epoch = t.producer_epoch
            self.last_producer_epoch = t.last_producer_epoch
            self.last_producer_id = t.last_producer_id
            self.producer_id = t.producer_id
        elif to is ONGOING:
            if not same_producer or not self.partitions <= t.partitions or self.timeout_ms != t.timeout_ms:
                raise IllegalTransition("%r: bad transit %r" % (self, t))
            self.start_ms = t.start_ms
            self.partitions |= t.partitions
        elif to in (PREPARE_COMMIT, PREPARE_ABORT):
            if (not same_producer or set(self.partitions) != set(t.partitions) or self.timeout_ms != t.timeout_ms
                    or self.start_ms != t.start_ms):
                raise IllegalTransition("%r: bad transit %r" % (self, t))
        elif to in (COMPLETE_COMMIT, COMPLETE_ABORT):
            if not same_producer or self.timeout_ms != t.timeout_ms or t.start_ms == -1:
                raise IllegalTransition("%r: bad transit %r" % (self, t))
            self.start_ms = t.start_ms
            self.partitions.clear()
        else:
            # PrepareEpochFence becomes PrepareAbort before anything is logged; Dead ends in removal from the cache.
            raise IllegalTransition("%r: %s is never completed" % (self, to.name))
        self.last_update_ms = t.last_update_ms
        self.pending_state = None
        self.state = to

    def abort_transition(self):
        """The log write of the pending transit failed: nothing changes, the next transition may be prepared."""
        self.pending_state = None


def from_record(transactional_id, rec):
    """The metadata a loaded ``txn_log.TxnRecord`` describes (last producer id/epoch unknown: not logged)."""
    state = BY_ID.get(rec.state_id)
    if state is None:
        raise ValueError("unknown transaction state id %d for %r" % (rec.state_id, transactional_id))
    parts = () if state is EMPTY else rec.partitions
    return TransactionMetadata(transactional_id, rec.producer_id, rec.producer_epoch, rec.timeout_ms, state, parts,
                               rec.start_ms, rec.last_update_ms)
