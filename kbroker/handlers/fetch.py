"""Fetch (1), served v0-v12: consumers, and follower replicas (replica_id >= 0; v15+ would carry it in
replica_state).

Consumers: for each requested partition, return record batches from ``fetch_offset`` up to the high watermark.
If fewer than ``min_bytes`` are ready the request waits up to ``max_wait_ms`` and returns the moment the high
watermark of a requested partition advances (each Partition wakes its waiters; no polling), or at once with what
it has when the broker shuts down (the connection is then closing).
Followers: the same long poll, but they read up to the leader's LEO and are woken by every append; the first pass
of the request reports the follower's LEO (= its fetch_offset) to the leader Partition (caught-up time, ISR
expansion, HW advance -- which completes delayed produces), for every partition, whatever the size budget left.
Only the leader answers (NOT_LEADER_OR_FOLLOWER 6). current_leader_epoch (v9+, -1 = unknown) is checked for
everybody: older than the partition's -> FENCED_LEADER_EPOCH (74), newer -> UNKNOWN_LEADER_EPOCH (75).

Sizes (Kafka's ReplicaManager.readFromLog, KIP-74). The response budget is ``min(max_bytes, fetch.max.bytes)``
(the broker key, Kafka >= 2.5; v0-v2 carry no max_bytes, so only the broker key bounds them) and ``min_bytes`` is
capped by it. Partitions are read in request order; each gets at most ``min(partition_max_bytes, what is left of
the budget)`` and every byte sent -- stored or down-converted -- is taken from the budget.
* v3+: the first partition with data gets at least its whole first batch, however large (the progress
  guarantee); every later partition whose first batch does not fit what it may have gets NO records (empty,
  error NONE, high watermark set), never a cut batch (kafka-python: "no complete records were found", aiokafka:
  RecordTooLargeError). A whole first batch may be followed by a cut one, as in Kafka; clients drop it.
* v0-v2 (Kafka's ``hardMaxBytesLimit``): no progress guarantee. A first message larger than the partition's
  ``partition_max_bytes`` arrives cut at that limit, which is how 0.10-era clients learn to raise
  RecordTooLargeException or to grow their fetch size (the cut is taken from the down-converted form of the
  whole first batch). When it is the response budget (fetch.max.bytes) that leaves too little room, the
  partition gets no records instead: growing the client's fetch size would not help (Kafka 0.10 had no
  response budget for these versions; Kafka >= 2.5 sends the cut and the old client fails).
A request naming one partition several times is served like Kafka's LinkedHashMap of partitions: once, at the
position of its first mention, with the values of its last (so the budget bounds the response whatever it names).

Stored bytes leave through ``sendfile`` for v4+; v0-v3 clients can't read v2 batches, so the batches are
down-converted (magic 0 for v0/v1, magic 1 for v2/v3; headers are dropped, as in Kafka) batch by batch in a
worker thread, stopping as soon as the budget is spent, with what does not fit 1 MiB of memory per response
spilled to a temporary file and a broker-wide bound on spilled bytes (``down_conversion.py``). The converted form
is usually larger than the stored one (a magic 1 message has 34 bytes of overhead, a v2 record ~8), so the limits
apply to converted sizes, in whole converted batches (the first one excepted, as above).
Errors per partition: OFFSET_OUT_OF_RANGE (1), UNKNOWN_TOPIC_OR_PARTITION (3), NOT_LEADER_OR_FOLLOWER (6),
FENCED_LEADER_EPOCH (74), UNKNOWN_LEADER_EPOCH (75); for v0-v3 clients, when the batch first in line cannot be
down-converted (a later one just ends that partition's data): UNSUPPORTED_COMPRESSION_TYPE (76) for zstd,
UNSUPPORTED_VERSION (35, Kafka's answer when it will not down-convert) for a batch of more than
``workers.DECODE_MAX_RECORDS`` (100 000) records.
Authorization (Kafka's KafkaApis.handleFetchRequest, ``kbroker/handlers/auth.py``), asked once per request
before anything is read: a follower (replica_id >= 0) needs ClusterAction on the Cluster, else every partition
answers TOPIC_AUTHORIZATION_FAILED (29) (Kafka's answer; nothing is read and no follower LEO is recorded); a
consumer needs Read on each topic, asked once per topic, and the partitions of a denied topic answer 29 whether
or not they exist. Denied partitions take no part in the wait (they neither end it early nor keep it going: a
request with nothing else waits for nothing).
Transactions (v4+, KIP-98; Kafka's LocalLog.read with FetchIsolation): ``isolation_level`` 1 (read_committed) reads
below the partition's last stable offset only and answers ``aborted_transactions``: the (producer id, first offset)
of every aborted transaction overlapping the records returned, from the ``.txnindex`` files (an empty list when
nothing is returned), which clients use to drop aborted records; level 0 answers ``aborted_transactions`` null.
``last_stable_offset`` is the partition's LSO for every fetcher (= HW when no transaction is open). A parked
read_committed fetch re-reads when the HW moves or a marker is appended, the only two events that move the LSO.
Any other isolation level closes the connection (Kafka fails the whole request: IsolationLevel.forId throws).
Replication quota (KIP-73; kbroker/quota/replication.py, ``services.replication``): a follower not in the ISR gets
no records for a partition throttled on this leader while the leader quota is exceeded (its fetch offset is still
recorded; it does not end the long poll), and the bytes of throttled partitions in each follower response are
recorded (Kafka's shouldLeaderThrottle / sizeOfThrottledPartitions).
Quotas (``ctx.services.quotas``, kbroker/quota; Kafka's handleFetchRequest): a consumer's response budget is at
most what its ``consumer_byte_rate`` allows over the full quota span (bound x (quota.window.num - 1) x
quota.window.size.seconds); the record bytes of the answer are recorded once it is read, and when that puts the
client over its quota the answer (records included: Kafka 0.10.1's rule, not Kafka >= 2.0's empty answer, which
holds consumers well below their quota) carries the throttle time and the connection then mutes it (KIP-219). Follower fetches are exempt from the client quotas (the replication
throttles govern them), and the long-poll wait is not charged to the request quota.
Fetch sessions (v7+, KIP-227; the rules in kbroker/server/fetch_sessions.py, ``ctx.services.fetch_sessions``, None
or 0 slots = every request sessionless): session_epoch -1 is sessionless (closing a given session id), 0 a full fetch
that opens a session once answered (its id in the answer, 0 when the cache has no room), > 0 an incremental fetch:
the request's partitions are added to or updated in the session, its forgotten_topics_data removed, and only the
session's dirty partitions (woken by an append, HW / role / log-start change since they were last answered, or with
data or an error pending) are read, in session order; the answer names only those with records, an error or a HW /
log start / LSO change, and its long poll waits on the session's one Event. A session error answers at once with
error_code 70 or 71, no partitions and session id 0.
Metrics (``ctx.services.stats.topics``, kbroker/server/stats.py; None = not counted): once the answer is final,
each partition of an authorized topic counts one total fetch request, and its record bytes as bytes out (a
consumer) or replication bytes out (a follower), or a failed fetch for an error outside
``stats.ROUTINE_FETCH_ERRORS``; an unknown topic counts in the totals only. One pass over the partitions, none
over records.
Deviations: a batch of more than 100 000 records is not down-converted (above; Kafka converts anything, at
~360 bytes of memory per record here). zstd batches are not withheld from v4-v9 fetchers (Kafka answers
UNSUPPORTED_COMPRESSION_TYPE); clients that cannot read zstd do not produce it either.
"""
import time

from gevent.event import Event

from kbroker import errors
from kbroker.handlers import auth
from kbroker.handlers.common import error_code, sliced
from kbroker.handlers.down_conversion import FetchConversion
from kbroker.security.acl import CLUSTER_ACTION, READ, TOPIC
from kbroker.server import fetch_sessions
from kbroker.server.connection import CloseConnection
from kbroker.server.router import handler

INT32_MAX = 0x7FFFFFFF
FETCH_MAX_BYTES = "fetch.max.bytes"
DEFAULT_FETCH_MAX_BYTES = 57671680  # Kafka's default for the broker key (55 MiB)


def replica_id_of(req):
    state = req.get("replica_state")
    if state is not None and state.get("replica_id", -1) >= 0:
        return state["replica_id"]
    return req.get("replica_id", -1)


def unique_partitions(req):
    """``[(topic, partition request)]`` in request order, one per (topic, partition): a repeated partition keeps
    the position of its first mention and the fields of its last (Java's LinkedHashMap.put)."""
    seen = {}
    for t in req["topics"]:
        topic = t["topic"]
        for p in t["partitions"]:
            seen[(topic, p["partition"])] = (topic, p)  # a dict re-put keeps the first position, like Java's
    return list(seen.values())


def response_budget(config, version, req):
    """``min(request max_bytes (v3+), fetch.max.bytes)``, never negative."""
    ceiling = config.get(FETCH_MAX_BYTES, DEFAULT_FETCH_MAX_BYTES)
    asked = req["max_bytes"] if version >= 3 else INT32_MAX
    return max(0, min(asked, ceiling))


@handler(1, (0, 12))
def fetch(ctx, req):
    replicas = ctx.services.replicas
    version = ctx.api_version
    replica_id = replica_id_of(req)
    follower = replica_id >= 0
    isolation = req.get("isolation_level", 0) if version >= 4 else 0
    if isolation not in (0, 1):
        raise CloseConnection("Fetch with unknown isolation level %d" % isolation)
    if follower:
        isolation = 0
    max_wait = max(0, req["max_wait_ms"]) / 1000.0
    budget = response_budget(ctx.services.config, version, req)
    quotas = ctx.services.quotas
    if quotas is not None:
        if follower or ctx.identity.in_process:
            ctx.quota_exempt = True
            quotas = None
        else:
            most = quotas.fetch.max_in_window(ctx.identity, ctx.client_id)
            if most is not None and most < budget:
                budget = int(most)
    poll = _Poll(ctx, version, replica_id, budget, min(req["min_bytes"], budget), time.monotonic() + max_wait,
                 isolation, ctx.services.replication if follower else None)
    wanted = unique_partitions(req)
    sessions = ctx.services.fetch_sessions if version >= 7 else None
    context = fetch_sessions.SESSIONLESS
    if sessions is not None:
        context = sessions.new_context(req["session_id"], req["session_epoch"], follower, wanted,
                                       _forgotten(req), replicas.get_partition)
    session_id = 0
    if context.kind == "error":
        return {"throttle_time_ms": 0, "error_code": context.error, "session_id": 0, "responses": []}
    if context.kind == "incremental":
        session = context.session
        flat, total = poll.run_session(session)
        session_id = session.id
    else:
        read, total = poll.run(wanted)
        flat = [(topic, r) for topic, _p, r, _pending in read]
        if context.kind == "full":
            session_id = sessions.create(follower, read, replicas.get_partition)
    responses = _group(flat)
    if poll.throttle is not None:
        _record_throttled(poll.throttle, responses)
    if quotas is not None:
        # Over the quota, the answer still carries its records and the throttle that pays for them (Kafka
        # 0.10.1's delayed fetch response, with KIP-219's mute instead of the delay): the consumer is held at its
        # quota. Kafka >= 2.0 answers no partitions and drops the bytes from the rate, yet throttles for them:
        # its consumers are held at ~2/3 of the quota (0.66 MiB/s under 1 MiB/s measured on Kafka 4.4.0, the same
        # test here gave 0.62-0.71 with that rule). The overshoot is one answer, which the budget above bounds.
        ctx.throttle(quotas.fetch.record(ctx.identity, ctx.client_id, total))
    stats = ctx.services.stats
    if stats is not None:
        _count(stats.topics, responses, follower)
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": session_id, "responses": responses}


def _forgotten(req):
    """The request's forgotten_topics_data as [(topic, p)] (v7+)."""
    return [(t["topic"], p) for t in req.get("forgotten_topics_data") or () for p in t["partitions"]]


class _Poll:
    """One request's long poll (module docstring): read passes until ``min_bytes``, an error, the deadline or a
    closing connection. ``run`` over a fixed list of partitions (sessionless and full fetches: a fresh Event
    registered on each partition per wait), ``run_session`` over an incremental session's dirty partitions (its
    one persistent Event)."""

    def __init__(self, ctx, version, replica_id, budget, min_bytes, deadline, isolation, throttle):
        self.ctx = ctx
        self.replicas = ctx.services.replicas
        self.version = version
        self.replica_id = replica_id
        self.follower = replica_id >= 0
        self.budget = budget
        self.min_bytes = min_bytes
        self.deadline = deadline
        self.isolation = isolation
        self.throttle = throttle

    def _pass(self, wanted, first, denied):
        return _read_all(self.replicas, self.version, wanted, self.replica_id, first, self.budget, denied,
                         self.isolation, self.throttle)

    def _done(self, total, had_error):
        return (total >= self.min_bytes or had_error or self.deadline - time.monotonic() <= 0
                or self.ctx.connection.closing)

    def _park(self, ev):
        remaining = self.deadline - time.monotonic()
        if remaining > 0 and not ev.is_set():
            parked = time.monotonic()
            ev.wait(remaining)
            self.ctx.parked_s += time.monotonic() - parked

    def run(self, wanted):
        """-> ([(topic, partition request, r, pending)] in request order, record bytes)."""
        follower = self.follower
        denied = _denied_topics(self.ctx, follower, wanted)
        allowed = [(topic, p) for topic, p in wanted if topic not in denied] if denied else wanted
        read, total, had_error = self._pass(wanted, True, denied)
        while not (self._done(total, had_error) or not allowed):
            ev = Event()
            parts = [self.replicas.get_partition(topic, p["partition"]) for topic, p in allowed]
            parts = [p for p in parts if p is not None]
            for p in parts:
                p.add_waiter(ev, follower)
            try:
                # Re-check after registering: an append between the read and now would otherwise be missed.
                self._park(ev)
            finally:
                for p in parts:
                    p.remove_waiter(ev, follower)
            woken = ev.is_set()
            read, total, had_error = self._pass(wanted, False, denied)
            if not woken:
                break
        return read, total

    def run_session(self, session):
        """-> ([(topic, r)] of the partitions to answer, record bytes): passes over the dirty partitions only."""
        ctx = self.ctx
        first = True
        sessions = ctx.services.fetch_sessions
        while True:
            dirty = session.take_dirty()
            for cp in dirty:
                part = self.replicas.get_partition(*cp.tp)
                if cp.watched is not part:
                    # Hosted since, or deleted and re-created: watch the Partition there is now.
                    session.watch(cp, part, self.follower)
            wanted = [(cp.tp[0], cp.req) for cp in dirty]
            denied = _denied_topics(ctx, self.follower, wanted) if wanted else frozenset()
            read, total, had_error = self._pass(wanted, first, denied)
            if first and self.follower:
                session.refresh_followers(self.replica_id, sessions.clock(), sessions.follower_refresh_ms)
            first = False
            final = self._done(total, had_error) or session.closed
            answer = session.settle([(cp, r, pending) for cp, (_t, _p, r, pending) in zip(dirty, read)], final)
            if final:
                return answer, sum(len(r["records"]) for _t, r in answer if r["records"])
            self._park(session.event)


def _group(flat):
    """[(topic, r)] -> the responses array: one entry per topic at its first mention, partitions in order."""
    out = []
    by_topic = {}
    for topic, r in flat:
        _add(out, by_topic, topic, r)
    return out


def _count(stats, responses, follower):
    """The answer's partitions into BrokerTopicStats ``stats`` (module docstring: Metrics)."""
    for t in responses:
        topic = t["topic"]
        ts = None
        for r in t["partitions"]:
            code = r["error_code"]
            if code == errors.TOPIC_AUTHORIZATION_FAILED:
                continue
            if code == errors.UNKNOWN_TOPIC_OR_PARTITION:
                stats.all.fetch_failed(code)
                continue
            if ts is None:
                ts = stats.topic(topic)
            if code:
                ts.fetch_failed(code)
            else:
                records = r["records"]
                ts.fetched(len(records) if records else 0, follower)


def _record_throttled(quota, responses):
    """Leader replication quota: record the bytes sent for throttled partitions."""
    sent = sum(len(r["records"]) for t in responses for r in t["partitions"]
               if r["records"] and quota.is_throttled((t["topic"], r["partition_index"])))
    quota.record(sent)


def _leader_throttled(quota, part, tp, replica_id):
    """Kafka's shouldLeaderThrottle: a throttled partition, an out-of-ISR follower, the leader quota exceeded."""
    return (quota is not None and quota.bounded and replica_id not in part.isr and quota.is_throttled(tp)
            and quota.is_quota_exceeded())


def _denied_topics(ctx, follower, wanted):
    """The topics of ``wanted`` this request may not read (module docstring: Authorization)."""
    if not auth.enforcing(ctx):
        return frozenset()
    if follower:
        return frozenset() if auth.cluster(ctx, CLUSTER_ACTION) else {topic for topic, _ in wanted}
    return auth.denied_names(ctx, READ, TOPIC, (topic for topic, _ in wanted))


def _read_all(replicas, version, wanted, replica_id, first, budget, denied=frozenset(), isolation=0, throttle=None):
    """One pass over ``wanted`` in order -> ([(topic, partition request, r, pending)], bytes in them, whether a
    partition failed); ``pending``: records are readable at the partition's fetch offset (sent or not);
    partitions of ``denied`` topics answer TOPIC_AUTHORIZATION_FAILED unread; ``throttle``: the leader replication
    quota for a follower's request."""
    conversion = FetchConversion(budget) if version < 4 else None
    try:
        return _read_pass(replicas, version, wanted, replica_id, first,
                          budget if conversion is None else conversion.budget, conversion, denied, isolation, throttle)
    finally:
        if conversion is not None:
            conversion.finish()


def _read_pass(replicas, version, wanted, replica_id, first, budget, conversion, denied, isolation=0, throttle=None):
    follower = replica_id >= 0
    hard = version <= 2          # Kafka's hardMaxBytesLimit: no progress guarantee
    min_one = not hard           # until a partition returns data
    total = 0
    had_error = False
    out = []
    # sliced: a request naming tens of thousands of partitions (each ~10 us here, more for the unknown ones, which
    # raise) hands the loop back every 20 ms instead of holding it ~0.3 s; each partition's read is self-contained
    for topic, p in sliced(wanted):
        pending = False
        r = {"partition_index": p["partition"], "error_code": 0, "high_watermark": -1, "last_stable_offset": -1,
             "log_start_offset": -1, "aborted_transactions": None if version >= 4 else [],
             "preferred_read_replica": -1, "records": b""}
        if topic in denied:
            r["error_code"] = errors.TOPIC_AUTHORIZATION_FAILED
            out.append((topic, p, r, False))
            continue
        try:
            part = replicas.leader_partition(topic, p["partition"])
            part.check_leader_epoch(p.get("current_leader_epoch", -1))
            r["high_watermark"] = hw = part.high_watermark
            r["last_stable_offset"] = part.last_stable_offset
            r["log_start_offset"] = part.log_start_offset
            if not follower and isolation != 1 and p["fetch_offset"] == hw >= r["log_start_offset"]:
                # A consumer at the high watermark: nothing to read, no error (Log.read's empty slice, without
                # building it). The common case of an idle partition: a sessionless Fetch of 1,000 idle partitions
                # (librdkafka's every poll) cost 5.8 ms of broker CPU against Kafka's 1.3-1.5 (performance.md,
                # session 22); reading it was ~1 us of a partition's ~3.4 us in the handler.
                out.append((topic, p, r, False))
                continue
            left = budget - total
            limit = max(0, min(p["partition_max_bytes"], left))
            # v0-v2 may send a cut first message only when the client's own partition limit is what cuts it.
            cut_first = hard and p["partition_max_bytes"] <= left
            if follower:
                if _leader_throttled(throttle, part, (topic, p["partition"]), replica_id):
                    limit = 0
                sl = part.read_for_follower(replica_id, p["fetch_offset"], limit, min_one=min_one and limit > 0,
                                            record=first, log_start_offset=p.get("log_start_offset", -1))
                r["high_watermark"] = part.high_watermark
                r["last_stable_offset"] = part.last_stable_offset
                pending = part.log_end_offset > p["fetch_offset"]
            elif isolation == 1:
                sl, r["last_stable_offset"], aborted = part.read_committed(p["fetch_offset"], limit, min_one=min_one)
                r["aborted_transactions"] = [{"producer_id": pid, "first_offset": first_offset}
                                             for pid, first_offset in aborted]
                pending = r["last_stable_offset"] > p["fetch_offset"]
            else:
                sl = part.read(p["fetch_offset"], limit, min_one=min_one)
                pending = r["high_watermark"] > p["fetch_offset"]
            records = _records(sl, version, limit, min_one, cut_first, conversion)
            size = len(records)
            if size:
                r["records"] = records
                total += size
                min_one = False
        except Exception as e:  # noqa: BLE001
            r["error_code"] = error_code(e, version >= 6, errors.NOT_LEADER_OR_FOLLOWER)
            had_error = True
        out.append((topic, p, r, pending))
    return out, total, had_error


def _add(out, by_topic, topic, r):
    """Append partition response ``r`` to its topic's entry in ``out`` (created at the topic's first mention)."""
    lst = by_topic.get(topic)
    if lst is None:
        lst = by_topic[topic] = []
        out.append({"topic": topic, "partitions": lst})
    lst.append(r)


def _records(sl, version, limit, min_one, cut_first, conversion):
    """What one partition sends: a FileRegion (v4+, or spilled converted records), bytes, or b"" (nothing)."""
    if sl.size == 0:
        return b""
    if sl.first_entry_incomplete and not cut_first:
        return b""  # KIP-74: a cut first batch is never sent to v3+ clients (nor to v0-v2 when the budget cut it)
    if version >= 4:
        return sl.region
    return conversion.convert(sl, 0 if version < 2 else 1, limit, min_one, cut_first)
