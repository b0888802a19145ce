"""Incremental fetch sessions (KIP-227), the broker's side: Kafka's FetchSessionCache / FetchSession / FetchContext.

Request metadata (Fetch v7+: ``session_id``, ``session_epoch``) -> what the request is (``FetchSessionCache.
new_context``, Kafka's FetchManager.newContext):
* epoch -1 (FINAL): sessionless; a ``session_id`` > 0 is closed first. Answered with session id 0, every partition.
* epoch 0 (INITIAL): a full fetch; a ``session_id`` > 0 is closed first, then once the fetch is answered a new
  session holding every requested partition is created (``create``) when a slot is free or one can be evicted
  (below); the answer carries its id (> 0, random, unique in the cache), else 0 (sessionless: the client keeps
  sending full requests). The session's next expected epoch is 1.
* epoch > 0: incremental. No such session -> FETCH_SESSION_ID_NOT_FOUND (70); an epoch other than the session's
  next one -> INVALID_FETCH_SESSION_EPOCH (71); both answer at once with no partitions and session id 0 and change
  nothing. Otherwise the request's partitions are added (new) or updated (request fields replaced), then its
  ``forgotten_topics_data`` removed (Kafka's order), the session is touched and its epoch advances (after 2^31-1
  comes 1). A session left with no partition is closed and the request answered sessionless (id 0).
  v13+ (topic ids, FETCH_SESSION_TOPIC_ID_ERROR 106) is not served.

O(changed), not O(session): every cached partition is registered as a waiter of its ``Partition`` (consumer
sessions in ``waiters``, which wake on high-watermark moves, role/ISR changes and DeleteRecords; follower sessions in
both sets, so every append counts too) for the life of the session, and a wake marks it *dirty*. An incremental fetch
reads only dirty partitions (``take_dirty``), waits on the session's one Event (nothing to register per request),
and answers the partitions Kafka's CachedPartition.maybeUpdateResponseData would: records, an error, or a high
watermark / log start offset / last stable offset different from the last one answered (``settle``). After the
final pass a partition stays dirty while it has an error or data readable at its fetch offset (the client may not
move it; Kafka would read it again), so an idle partition costs nothing per poll. Partitions answered with data move
to the end of the session's order (Kafka's rotation: the response budget is shared fairly across polls).
Deviation: Kafka re-reads every session partition on every fetch, so a log start offset moved by retention alone
(which wakes nobody here) reaches the client with that partition's next change, not at once.

Followers: Kafka's leader updates each follower's fetch state for every session partition on every fetch. Here the
idle partitions of a follower session report the follower's cached fetch offset to their Partition (caught-up time)
at most every ``follower_refresh_ms`` (a quarter of replica.lag.time.max.ms), which keeps an idle in-sync follower in
the ISR at O(partitions) per that interval instead of per fetch. When a broker (re)joins this broker's metadata
(``refresh_followers_soon``, from the metadata cache), every follower session reports its idle partitions on its
next fetch: a broker that was taken out of ISRs while not registered (the controller keeps the leader epoch there,
so nothing else re-adds its partitions to a fetch) can rejoin idle ISRs at once, not a quarter of the lag time
later (150 s with a lag time of 600 s).

Bound (kbroker): at most ``MAX_CACHED_PARTITIONS`` partitions over all sessions (the constant's comment).
Eviction (Kafka's FetchSessionCache.tryEvict; ``EVICTION_MS`` is Kafka's fixed MIN_INCREMENTAL_FETCH_SESSION_
EVICTION_MS, 120 s): with every slot of ``max.incremental.fetch.session.cache.slots`` taken, a new session first
evicts the least recently used session if it was last used more than EVICTION_MS ago; otherwise the smallest of the
evictable sessions by (privileged, partition count, id) if the new one's (privileged, count, 0) is not smaller. A
session is evictable by a privileged (follower) session if it is not privileged or was created more than
EVICTION_MS ago, by an unprivileged one only in the latter case. So consumers cannot push followers out, a larger
session may replace a smaller one, and young sessions are safe from their peers. 0 slots = no sessions ever.
Event-loop only (no locks): the handler and the partitions' wakes run on the broker's gevent loop.
"""
import random
import time
from gevent.event import Event

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT32_MAX = 0x7FFFFFFF
EVICTION_MS = 120000              # Kafka's KafkaServer.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS
# kbroker: most partitions all sessions together may hold (0.67 KB each with the request fields they keep, measured
# with tracemalloc: ~340 MB).
# Kafka bounds only the session count, so 1,000 sessions naming request.max.elements partitions each (or one session
# growing by incremental adds) could hold gigabytes. A full fetch that would pass it gets no session, an incremental
# one closes its session and is answered sessionless (the client's next fetch is full, as after any closed session).
MAX_CACHED_PARTITIONS = 500000
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71


def next_epoch(epoch):
    """Kafka's FetchMetadata.nextEpoch: -1 stays -1, 2^31-1 wraps to 1 (0 is reserved for full requests)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == INT32_MAX else epoch + 1


def _wall_ms():
    return int(time.time() * 1000)


class CachedPartition:
    """One partition of a session: the last request fields the client sent (``req``, the decoded partition dict:
    fetch_offset, partition_max_bytes, current_leader_epoch, log_start_offset, ...) and the last values answered.
    Doubles as a Partition waiter: ``set()`` marks it dirty in its session."""
    __slots__ = ("session", "tp", "req", "high_watermark", "log_start_offset", "last_stable_offset", "watched",
                 "order")

    def __init__(self, session, tp, req, order):
        self.session = session
        self.tp = tp
        self.req = req
        self.high_watermark = -1
        self.log_start_offset = -1
        self.last_stable_offset = -1
        self.watched = None            # the Partition this is a waiter of, or None
        self.order = order

    def set(self):
        """Partition waiter protocol (``Partition._wake`` and friends call it): something changed."""
        s = self.session
        s.dirty[self.tp] = self
        s.event.set()

    def must_respond(self, r):
        """Kafka's maybeUpdateResponseData test (plus the LSO): does partition answer ``r`` go to the client?"""
        return bool(r["records"] or r["error_code"] or r["high_watermark"] != self.high_watermark
                    or r["log_start_offset"] != self.log_start_offset
                    or r["last_stable_offset"] != self.last_stable_offset)

    def answered(self, r):
        # An error leaves the cached HW at -1, so the partition is answered again once the error is gone (Kafka).
        self.high_watermark = -1 if r["error_code"] else r["high_watermark"]
        self.log_start_offset = r["log_start_offset"]
        self.last_stable_offset = r["last_stable_offset"]


class FetchSession:
    """A session: ``partitions`` {(topic, p): CachedPartition} in session order, ``epoch`` (the next one the client
    must send), ``dirty`` {tp: CachedPartition} (to read on the next pass), ``event`` (set by every mark)."""

    def __init__(self, session_id, privileged, now):
        self.id = session_id
        self.privileged = privileged
        self.partitions = {}
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.creation_ms = now
        self.last_used_ms = now
        self.dirty = {}
        self.event = Event()
        self.cached_size = 0            # the partition count the cache's eviction keys were made with
        self.follower_refreshed_ms = now
        self._order = 0
        self.closed = False

    def __len__(self):
        return len(self.partitions)

    def _next_order(self):
        self._order += 1
        return self._order

    def evictable_key(self):
        return (self.privileged, self.cached_size, self.id)

    # ------------------------------------------------------------------------------------------ partitions
    def add(self, tp, req):
        cp = CachedPartition(self, tp, req, self._next_order())
        self.partitions[tp] = cp
        return cp

    def update(self, wanted, forgotten, resolve, follower):
        """An incremental request: ``wanted`` [(topic, req)] added or updated (and dirty), then ``forgotten``
        [(topic, p)] removed. ``resolve(topic, p)`` -> the hosted Partition or None (what a new one watches).
        Returns (added, updated, removed) counts."""
        added = updated = removed = 0
        for topic, req in wanted:
            tp = (topic, req["partition"])
            cp = self.partitions.get(tp)
            if cp is None:
                cp = self.add(tp, req)
                self.watch(cp, resolve(topic, req["partition"]), follower)
                added += 1
            else:
                cp.req = req
                updated += 1
            self.dirty[tp] = cp
        for tp in forgotten:
            cp = self.partitions.pop(tp, None)
            if cp is not None:
                self.unwatch(cp, follower)
                self.dirty.pop(tp, None)
                removed += 1
        return added, updated, removed

    def watch(self, cp, part, follower):
        """Register ``cp`` as a waiter of Partition ``part`` (None: nothing hosted yet), replacing its old one."""
        if cp.watched is part:
            return
        if cp.watched is not None:
            self.unwatch(cp, follower)
        cp.watched = part
        if part is not None:
            part.add_waiter(cp, False)
            if follower:
                part.add_waiter(cp, True)

    @staticmethod
    def unwatch(cp, follower):
        part = cp.watched
        if part is not None:
            part.remove_waiter(cp, False)
            if follower:
                part.remove_waiter(cp, True)
            cp.watched = None

    def close(self):
        """Drop every waiter registration (the session leaves the cache)."""
        self.closed = True
        for cp in self.partitions.values():
            self.unwatch(cp, self.privileged)
        self.dirty.clear()
        self.event.set()                  # a request parked on it answers now

    # -------------------------------------------------------------------------------------------- one poll
    def take_dirty(self):
        """The dirty partitions in session order, and the dirty set emptied: marks after this land in a new one
        and set the event, so a pass never misses a change that happens while it reads."""
        dirty = self.dirty
        self.dirty = {}
        self.event.clear()
        if len(dirty) > 1:
            return sorted(dirty.values(), key=_order_of)
        return list(dirty.values())

    def settle(self, read, final):
        """After a pass over ``read`` [(CachedPartition, r, pending)] (``pending``: data readable at its fetch
        offset): which partitions to answer -- [(topic, r)] in pass order -- and which stay dirty. A non-final
        pass keeps every partition that would be answered dirty (the final pass answers it); the final pass
        updates the cached values and keeps only errors and pending data dirty."""
        answer = []
        for cp, r, pending in read:
            if cp.session is not self or self.partitions.get(cp.tp) is not cp:
                continue                    # forgotten by a concurrent request of the same session
            respond = cp.must_respond(r)
            if final:
                if respond:
                    cp.answered(r)
                    answer.append((cp.tp[0], r))
                    if r["records"]:
                        cp.order = self._next_order()    # Kafka's rotation: answered data goes to the back
                if pending or r["error_code"]:
                    self.dirty[cp.tp] = cp
            elif respond or pending:
                self.dirty[cp.tp] = cp
        return answer

    def refresh_followers(self, replica_id, now, every_ms):
        """Follower session: report the cached fetch offsets of the partitions not read this pass (idle, so the
        follower is as caught up as it was) to their Partitions, at most every ``every_ms``."""
        if now - self.follower_refreshed_ms < every_ms:
            return 0
        self.follower_refreshed_ms = now
        n = 0
        for tp, cp in self.partitions.items():
            part = cp.watched
            if part is not None and tp not in self.dirty and part.is_leader:
                part.update_follower(replica_id, cp.req["fetch_offset"])
                n += 1
        return n


def _order_of(cp):
    return cp.order


class SessionContext:
    """What ``new_context`` decided for one request: ``kind`` one of "sessionless", "full", "incremental",
    "error"; ``error`` (70/71 for "error"); ``session`` (incremental)."""
    __slots__ = ("kind", "error", "session")

    def __init__(self, kind, error=0, session=None):
        self.kind = kind
        self.error = error
        self.session = session


SESSIONLESS = SessionContext("sessionless")
FULL = SessionContext("full")


class FetchSessionCache:
    """Every session on this broker, by id (global: a client may continue a session on another connection, as in
    Kafka). ``slots``: max.incremental.fetch.session.cache.slots. Counters (read by the metrics collector and the
    tests): ``created``, ``evictions``, ``incremental_fetches`` (incremental requests served), ``errors``
    (requests answered 70 or 71), and ``partitions_cached`` (Kafka's NumIncrementalFetchPartitionsCached)."""

    def __init__(self, slots, follower_refresh_ms=2500, eviction_ms=EVICTION_MS, clock=_wall_ms, rng=None,
                 max_partitions=MAX_CACHED_PARTITIONS):
        self.slots = slots
        self.max_partitions = max_partitions
        self.follower_refresh_ms = follower_refresh_ms
        self.eviction_ms = eviction_ms
        self.clock = clock
        self.rng = rng or random.Random()
        self.sessions = {}
        self.created = 0
        self.evictions = 0
        self.incremental_fetches = 0
        self.errors = 0
        self.partitions_cached = 0

    def __len__(self):
        return len(self.sessions)

    def refresh_followers_soon(self):
        """Every follower session reports its idle partitions on its next fetch (module docstring): one pass
        over the sessions, O(partitions) once per session after it."""
        for session in self.sessions.values():
            session.follower_refreshed_ms = float("-inf")       # due at any clock

    def get(self, session_id):
        return self.sessions.get(session_id)

    # --------------------------------------------------------------------------------------------- context
    def new_context(self, session_id, epoch, follower, wanted, forgotten, resolve):
        """Module docstring. ``wanted`` [(topic, partition request)] (unique), ``forgotten`` [(topic, p)],
        ``resolve(topic, p)`` -> Partition or None."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)
            return SESSIONLESS if epoch == FINAL_EPOCH else FULL
        session = self.sessions.get(session_id)
        if session is None:
            self.errors += 1
            return SessionContext("error", FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            self.errors += 1
            return SessionContext("error", INVALID_FETCH_SESSION_EPOCH)
        session.update(wanted, forgotten, resolve, session.privileged)
        if not session.partitions:
            self.remove(session_id)
            return SESSIONLESS
        self.touch(session, self.clock())
        if self.partitions_cached > self.max_partitions:
            self.remove(session_id)
            return SESSIONLESS
        session.epoch = next_epoch(session.epoch)
        self.incremental_fetches += 1
        return SessionContext("incremental", session=session)

    def create(self, privileged, answered, resolve):
        """After a full fetch: a new session of ``answered`` [(topic, partition request, answer r, pending)] when
        a slot is free or one is evicted -> its id, else 0. Partitions answered with data or an error, or with
        data pending, start dirty."""
        now = self.clock()
        if self.partitions_cached + len(answered) > self.max_partitions:
            return INVALID_SESSION_ID
        if not (len(self.sessions) < self.slots or self._try_evict(privileged, len(answered), now)):
            return INVALID_SESSION_ID
        session = FetchSession(self._new_id(), privileged, now)
        for topic, req, r, pending in answered:
            cp = session.add((topic, req["partition"]), req)
            cp.answered(r)
            session.watch(cp, resolve(topic, req["partition"]), privileged)
            if pending or r["error_code"]:
                session.dirty[cp.tp] = cp
        self.sessions[session.id] = session
        self.touch(session, now)
        self.created += 1
        return session.id

    def remove(self, session_id):
        session = self.sessions.pop(session_id, None)
        if session is not None:
            self.partitions_cached -= session.cached_size
            session.close()
        return session

    def touch(self, session, now):
        session.last_used_ms = now
        self.partitions_cached += len(session.partitions) - session.cached_size
        session.cached_size = len(session.partitions)

    # -------------------------------------------------------------------------------------------- eviction
    def _try_evict(self, privileged, size, now):
        """Kafka's tryEvict (module docstring): True when a session was removed to make room."""
        if not self.sessions:
            return False
        lru = min(self.sessions.values(), key=_last_used_key)
        if now - lru.last_used_ms > self.eviction_ms:
            self.remove(lru.id)
            self.evictions += 1
            return True
        candidates = [s for s in self.sessions.values()
                      if now - s.creation_ms > self.eviction_ms or (privileged and not s.privileged)]
        if not candidates:
            return False
        victim = min(candidates, key=FetchSession.evictable_key)
        if (privileged, size, 0) < victim.evictable_key():
            return False
        self.remove(victim.id)
        self.evictions += 1
        return True

    def _new_id(self):
        while True:
            sid = self.rng.randint(1, INT32_MAX)
            if sid not in self.sessions:
                return sid


def _last_used_key(session):
    return (session.last_used_ms, session.id)
