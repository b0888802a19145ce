"""The server layer's counters (issue 13): what the handlers and connections count, read by kbroker/metrics.

Owners count, the exporter reads (docs/monitoring.md). Each object here has one writer -- the event loop's
greenlets, which never run at the same time -- and is read at scrape time, in a greenlet of the same loop, by
``kbroker/metrics/requests.py``. Nothing here imports prometheus_client; every update is a few integer additions.

* ``BrokerTopicStats`` -- Kafka's BrokerTopicMetrics, per topic and for all topics (``all``): messages in, bytes
  in, bytes out (consumers), replication bytes out (followers), bytes rejected, failed and total produce and fetch
  requests. As in Kafka, "requests" here are partition entries: a Produce naming 3 partitions adds 3 to
  ``total_produce`` (Kafka marks totalProduceRequestRate once per partition in ReplicaManager.appendToLocalLog).
  Counted by handlers/produce.py and handlers/fetch.py through ``TopicStats``' methods; the rules (which errors
  are "failed", which bytes are "rejected") are the methods' docstrings. A deleted topic's entry is dropped
  (Kafka removes its MBeans), the totals keep what it added. Deviations: only clients' Produce requests count as
  messages/bytes in (Kafka also counts its group and transaction coordinators' own appends to
  ``__consumer_offsets`` / ``__transaction_state``, which go through ReplicaManager.appendRecords there); an unknown
  topic counts in the totals only (Kafka makes MBeans for any name a client sends); there is no
  ReplicationBytesInPerSec yet (the follower's fetcher does not count).
* ``RequestStats`` -- Kafka's RequestMetrics per API name (``Produce``, ``Fetch``, and ``FetchConsumer`` /
  ``FetchFollower`` for a Fetch as well): requests per version, and seven time distributions (``Histogram``):
  total, request queue, local, remote, throttle, response queue, response send. Recorded by the Connection when a response has
  been written to the socket (``kbroker/server/connection.py`` says what each interval is here).
* ``LoopLoad`` -- the event loop's busy fraction from the loop thread's CPU time (``time.thread_time``), sampled
  when read: no cost per request or per loop iteration. The quantiles and the busy fraction describe the last
  ``metrics.num.samples`` x ``metrics.sample.window.ms`` (2 x 30 s), as Kafka's sampled metrics do. Kafka's NetworkProcessorAvgIdlePercent and
  RequestHandlerAvgIdlePercent both become ``1 - busy`` (one loop does both jobs).
* ``BrokerStats`` -- the three together: ``Services.stats``.
"""
import math
import time
from bisect import bisect_left
from collections import deque

from kbroker import errors
from kbroker.protocol.apis import APIS

# ---------------------------------------------------------------------------------------------- topic stats

# Produce errors that are not "failed produce requests" (Kafka's ReplicaManager.appendToLocalLog: the exceptions
# it expects in normal operation -- unknown partition, not the leader, too large, corrupt, storage -- and the
# internal-topic refusal made before the append). Everything else counts: validation failures (INVALID_RECORD,
# INVALID_TIMESTAMP), NOT_ENOUGH_REPLICAS, sequence and epoch errors, anything unexpected.
ROUTINE_PRODUCE_ERRORS = frozenset((
    errors.UNKNOWN_TOPIC_OR_PARTITION, errors.NOT_LEADER_OR_FOLLOWER, errors.MESSAGE_TOO_LARGE,
    errors.RECORD_LIST_TOO_LARGE, errors.CORRUPT_MESSAGE, errors.KAFKA_STORAGE_ERROR, errors.INVALID_TOPIC_EXCEPTION))
# Fetch errors that are not "failed fetch requests" (Kafka's ReplicaManager.readFromLocalLog likewise).
ROUTINE_FETCH_ERRORS = frozenset((
    errors.UNKNOWN_TOPIC_OR_PARTITION, errors.NOT_LEADER_OR_FOLLOWER, errors.OFFSET_OUT_OF_RANGE,
    errors.FENCED_LEADER_EPOCH, errors.UNKNOWN_LEADER_EPOCH, errors.REPLICA_NOT_AVAILABLE,
    errors.KAFKA_STORAGE_ERROR))


class TopicStats:
    """One topic's counters (or, with ``parent`` None, the all-topics totals). The methods add to this object and
    to ``parent``, so the totals are always the sum of what every topic (alive or deleted) added."""

    __slots__ = ("messages_in", "bytes_in", "bytes_out", "replication_bytes_out", "bytes_rejected",
                 "failed_produce", "failed_fetch", "total_produce", "total_fetch", "parent")

    FIELDS = ("messages_in", "bytes_in", "bytes_out", "replication_bytes_out", "bytes_rejected", "failed_produce",
              "failed_fetch", "total_produce", "total_fetch")

    def __init__(self, parent=None):
        self.messages_in = self.bytes_in = self.bytes_out = self.replication_bytes_out = 0
        self.bytes_rejected = self.failed_produce = self.failed_fetch = 0
        self.total_produce = self.total_fetch = 0
        self.parent = parent

    def appended(self, messages, nbytes):
        """A partition entry of a client's Produce appended (or found a duplicate of an appended idempotent batch,
        which Kafka counts the same): ``messages`` records, ``nbytes`` bytes as the request carried them."""
        self.total_produce += 1
        self.messages_in += messages
        self.bytes_in += nbytes
        p = self.parent
        if p is not None:
            p.total_produce += 1
            p.messages_in += messages
            p.bytes_in += nbytes

    def append_failed(self, code, nbytes):
        """A partition entry answered ``code`` (nothing appended). MESSAGE_TOO_LARGE adds the entry's bytes to
        bytes rejected (Kafka's Log marks bytesRejectedRate there and nowhere else); a code outside
        ROUTINE_PRODUCE_ERRORS is a failed produce request."""
        self.total_produce += 1
        rejected = nbytes if code == errors.MESSAGE_TOO_LARGE else 0
        failed = 0 if code in ROUTINE_PRODUCE_ERRORS else 1
        self.bytes_rejected += rejected
        self.failed_produce += failed
        p = self.parent
        if p is not None:
            p.total_produce += 1
            p.bytes_rejected += rejected
            p.failed_produce += failed

    def fetched(self, nbytes, follower):
        """A partition of a Fetch answered without error with ``nbytes`` record bytes: bytes out for a consumer,
        replication bytes out for a follower (Kafka >= 1.0 keeps them apart: BytesOutPerSec is what clients read)."""
        self.total_fetch += 1
        p = self.parent
        if follower:
            self.replication_bytes_out += nbytes
            if p is not None:
                p.total_fetch += 1
                p.replication_bytes_out += nbytes
        else:
            self.bytes_out += nbytes
            if p is not None:
                p.total_fetch += 1
                p.bytes_out += nbytes

    def fetch_failed(self, code):
        """A partition of a Fetch answered ``code``: a failed fetch request unless in ROUTINE_FETCH_ERRORS."""
        self.total_fetch += 1
        failed = 0 if code in ROUTINE_FETCH_ERRORS else 1
        self.failed_fetch += failed
        p = self.parent
        if p is not None:
            p.total_fetch += 1
            p.failed_fetch += failed

    def snapshot(self):
        return {f: getattr(self, f) for f in self.FIELDS}


class BrokerTopicStats:
    """``all`` (the totals) and one TopicStats per topic seen, created on first use (``topic(name)``)."""

    def __init__(self):
        self.all = TopicStats()
        self.topics = {}

    def topic(self, name):
        ts = self.topics.get(name)
        if ts is None:
            ts = self.topics[name] = TopicStats(self.all)
        return ts

    def remove(self, name):
        """The topic was deleted: its per-topic counters go (the totals keep what it added)."""
        self.topics.pop(name, None)


# --------------------------------------------------------------------------------------------- histograms

# Bucket upper bounds in ms: 2^(k/4) for k = -24..64, i.e. 15.6 us to 65.5 s in steps of 19 % (a quantile read
# from them is within ~10 % of the true value); one overflow bucket above.
BOUNDS_MS = tuple(2.0 ** (k / 4.0) for k in range(-24, 65))
# The Prometheus histograms (kbroker_*_seconds) use every 4th bound: powers of two, 15.6 us .. 65.5 s (23 + Inf).
EXPORT_EVERY = 4
# Quantiles describe the last ``samples`` windows of ``window_s`` seconds: Kafka's ``metrics.num.samples`` (2) x
# ``metrics.sample.window.ms`` (30 s), the windows Kafka's own sampled metrics keep (Yammer's reservoir favours the
# last ~5 minutes; a minute answers "what is latency now" sooner). These are the defaults when none are given.
WINDOW_S = 30.0
SAMPLES = 2
# Kafka's Yammer histograms as jmx_exporter shows them: 50th, 75th, 95th, 98th, 99th, 999th percentile.
QUANTILES = (("0.50", 0.50), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98), ("0.99", 0.99), ("0.999", 0.999))


class Histogram:
    """Fixed-bucket time distribution: ``record(ms, now)`` is O(1) (one bisect in C, a few list/int updates).

    ``counts``/``count``/``sum_ms`` are cumulative since start (the Prometheus histogram, the ``_count``);
    ``current`` counts the window under way and ``older`` the ``samples - 1`` windows before it (``window_s``
    seconds each), from which ``quantiles`` estimates recent percentiles (linear interpolation inside the bucket;
    0 when the windows are empty, as a Yammer histogram with an empty reservoir answers). A window is closed when
    a record or a read sees its end has passed; windows nothing was recorded in are empty ones."""

    __slots__ = ("counts", "count", "sum_ms", "current", "older", "window_s", "window_end")

    def __init__(self, now=None, window_s=WINDOW_S, samples=SAMPLES):
        n = len(BOUNDS_MS) + 1
        self.counts = [0] * n
        self.current = [0] * n
        self.older = deque(maxlen=max(0, samples - 1))
        self.count = 0
        self.sum_ms = 0.0
        self.window_s = window_s
        self.window_end = (time.monotonic() if now is None else now) + window_s

    def record(self, ms, now):
        if now >= self.window_end:
            self._advance(now)
        i = bisect_left(BOUNDS_MS, ms)
        self.counts[i] += 1
        self.current[i] += 1
        self.count += 1
        self.sum_ms += ms

    def _advance(self, now):
        n = len(self.counts)
        passed = int((now - self.window_end) // self.window_s) + 1      # windows that have ended
        older = self.older
        if passed > older.maxlen:          # idle for every window kept: all are stale
            older.clear()
            self.window_end = now + self.window_s
        else:
            if older.maxlen:
                older.append(self.current)
                for _ in range(passed - 1):
                    older.append([0] * n)
            self.window_end += passed * self.window_s
        self.current = [0] * n

    def quantiles(self, now, qs=QUANTILES):
        """[(label, value in ms)] for each (label, q) of ``qs`` over the recent windows."""
        if now >= self.window_end:
            self._advance(now)
        window = list(self.current)
        for w in self.older:
            window = [a + b for a, b in zip(window, w)]
        n = sum(window)
        return [(label, _quantile(window, n, q)) for label, q in qs]

    def cumulative_buckets(self):
        """[(upper bound in seconds or inf, cumulative count)] at every EXPORT_EVERY-th bound, then +Inf."""
        out = []
        acc = 0
        counts = self.counts
        for i, bound in enumerate(BOUNDS_MS):
            acc += counts[i]
            if i % EXPORT_EVERY == 0:
                out.append((bound / 1000.0, acc))
        out.append((math.inf, self.count))
        return out


def _quantile(window, n, q):
    if n == 0:
        return 0.0
    rank = q * n          # the smallest value with at least q of the samples at or below it
    acc = 0
    for i, c in enumerate(window):
        if c and acc + c >= rank:
            lo = BOUNDS_MS[i - 1] if i > 0 else 0.0
            if i >= len(BOUNDS_MS):
                return lo           # overflow bucket: its lower bound (65.5 s) is all we know
            hi = BOUNDS_MS[i]
            return lo + (hi - lo) * max(0.0, min(1.0, (rank - acc) / c))
        acc += c
    return BOUNDS_MS[-1]


# ----------------------------------------------------------------------------------------------- requests

# The seven intervals of a request (Kafka's RequestChannel.updateRequestMetrics), in ApiRequestStats.record's order.
TIMES = ("total", "queue", "local", "remote", "throttle", "response_queue", "send")


class ApiRequestStats:
    """One API name's RequestMetrics: ``versions[v]`` requests of version v, and a Histogram per interval."""

    __slots__ = ("name", "versions", "total", "queue", "local", "remote", "throttle", "response_queue", "send")

    def __init__(self, name, now=None, window_s=WINDOW_S, samples=SAMPLES):
        self.name = name
        self.versions = []
        for t in TIMES:
            setattr(self, t, Histogram(now, window_s, samples))

    def record(self, version, now, total_ms, queue_ms, local_ms, remote_ms, throttle_ms, response_queue_ms, send_ms):
        """One request done (its response written, or handled when it has none); times in ms, ``now``
        monotonic seconds."""
        versions = self.versions
        if version >= len(versions):
            versions.extend([0] * (version + 1 - len(versions)))
        versions[version] += 1
        self.total.record(total_ms, now)
        self.queue.record(queue_ms, now)
        self.local.record(local_ms, now)
        self.remote.record(remote_ms, now)
        self.throttle.record(throttle_ms, now)
        self.response_queue.record(response_queue_ms, now)
        self.send.record(send_ms, now)

    @property
    def requests(self):
        return sum(self.versions)


class RequestStats:
    """RequestMetrics by API name. ``api(key)`` is the stats of an API key (Kafka's ApiKeys name: the JSON
    message name, e.g. ``Produce``, ``ListOffsets``); ``named(name)`` any other (``FetchConsumer``,
    ``FetchFollower``)."""

    def __init__(self, window_s=WINDOW_S, samples=SAMPLES):
        self.by_key = {}
        self.by_name = {}
        self.window_s = window_s
        self.samples = samples

    def api(self, key):
        s = self.by_key.get(key)
        if s is None:
            api = APIS.get(key)
            s = self.by_key[key] = self.named(api.name if api is not None else "Unknown%d" % key)
        return s

    def named(self, name):
        s = self.by_name.get(name)
        if s is None:
            s = self.by_name[name] = ApiRequestStats(name, None, self.window_s, self.samples)
        return s


# -------------------------------------------------------------------------------------------- event loop

class LoopLoad:
    """The event loop's busy fraction: CPU time of the loop's thread (``time.thread_time``: user + system, which
    includes the loop's own syscalls -- sendfile, writes) over wall time. Sampled when read (``busy_fraction``),
    from the loop's thread: samples older than ``span_s`` are dropped, so the fraction covers the last ``span_s``
    to ``2 x span_s`` seconds (from start until then)."""

    def __init__(self, span_s=60.0, clock=time.monotonic, cpu=time.thread_time):
        self.span_s = span_s
        self._clock = clock
        self._cpu = cpu
        self._samples = deque([(clock(), cpu())])

    def busy_fraction(self):
        now, cpu = self._clock(), self._cpu()
        samples = self._samples
        while len(samples) > 1 and now - samples[1][0] >= self.span_s:
            samples.popleft()
        t0, c0 = samples[0]
        if not samples or now - samples[-1][0] >= 1.0:
            samples.append((now, cpu))
        wall = now - t0
        if wall <= 0:
            return 0.0
        return max(0.0, min(1.0, (cpu - c0) / wall))


# Kafka's BrokerState values (kafka.server:type=KafkaServer,name=BrokerState), which alerts compare with 3.
NOT_RUNNING, STARTING, RUNNING_AS_BROKER, PENDING_CONTROLLED_SHUTDOWN, BROKER_SHUTTING_DOWN = 0, 1, 3, 6, 7


class BrokerStats:
    """``Services.stats``: the topic, request and event-loop counters of one broker. ``window_s`` x ``samples``
    (metrics.sample.window.ms x metrics.num.samples) is what the request-time quantiles and the loop's busy
    fraction describe."""

    def __init__(self, window_s=WINDOW_S, samples=SAMPLES):
        self.topics = BrokerTopicStats()
        self.requests = RequestStats(window_s, samples)
        self.loop = LoopLoad(span_s=window_s * samples)

    @classmethod
    def from_config(cls, cfg):
        return cls(cfg["metrics.sample.window.ms"] / 1000.0, cfg["metrics.num.samples"])
