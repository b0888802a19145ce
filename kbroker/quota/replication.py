"""Replication quotas (KIP-73): a bytes-per-second bound on the replication traffic of throttled replicas.

Two quotas per broker, each a ``ReplicationQuota``:

* ``leader`` -- bounds the bytes this broker, as leader, sends to followers of throttled partitions. The Fetch
  handler reads nothing for a partition that is throttled here while the quota is exceeded and the asking follower
  is not in the ISR (Kafka's ReplicaManager.shouldLeaderThrottle: the partition answers no records, and its bytes
  do not count towards the request's min_bytes, so the follower's long poll waits instead of spinning); the bytes
  of throttled partitions in every follower response are recorded.
* ``follower`` -- bounds what this broker, as follower, fetches for throttled partitions: the fetcher leaves a
  throttled partition out of its Fetch request while the quota is exceeded and the partition is not caught up to
  the leader's high watermark (Kafka's ReplicaFetcherThread.shouldFollowerThrottle), and records the bytes it
  appends for throttled partitions.

The bound is the broker config ``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate``
(bytes/s; Long.MAX = unbounded, the default), dynamic: ``/config/brokers/<id>`` overrides ``/config/brokers/<default>``,
which overrides the static server.properties value (Kafka's DynamicConfig.Broker precedence), re-read on every
``/config/changes`` notification by the dynamic broker configs' watcher (kbroker/config/dynamic.py, which calls
``ReplicationQuotas.apply_dynamic``).
Which partitions are throttled is the topic config ``leader.replication.throttled.replicas`` /
``follower.replication.throttled.replicas``: ``*`` (every partition of the topic) or ``partition:broker,...``,
of which this broker keeps the partitions listed with its own id (Kafka's parseThrottledPartitions).

The rate is Kafka's SimpleRate over a SampledStat: ``window_num`` samples of ``window_size_s`` seconds
(``replication.quota.window.num`` 11 x ``replication.quota.window.size.seconds`` 1); a sample older than
``window_num x window_size`` is forgotten; rate = bytes in the live samples / (now - start of the oldest), where
the elapsed time is never less than one window -- so the first bytes after an idle period may burst up to one
window's worth (1 s at the bound), never the whole span (Kafka's Rate for client quotas would allow 10 s).
Exceeded means rate > bound. A check and the record that follows it are not atomic: one fetch (at most
``replica.fetch.max.bytes`` per partition) may overshoot the bound, which the following windows pay back.
"""
import logging
import re
import time

log = logging.getLogger(__name__)

LONG_MAX = (1 << 63) - 1
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
RATE_KEYS = (LEADER_RATE, FOLLOWER_RATE)
DEFAULT_ENTITY = "<default>"
ALL_PARTITIONS = "*"

_REPLICA = re.compile(r"[0-9]+:[0-9]+")


def _items(value):
    """A list config's items: a list (typed) or its comma-separated string (as stored in a znode)."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value]
    s = str(value).strip()
    return [p.strip() for p in s.split(",")] if s else []


def valid_throttled_replicas(value):
    """Kafka's ThrottledReplicaListValidator: the literal ``*`` first, or every item ``partition:broker``."""
    items = _items(value)
    if items and items[0] == ALL_PARTITIONS:
        return True
    return all(_REPLICA.fullmatch(i) for i in items)


def parse_throttled_replicas(value, broker_id):
    """``*`` -> ALL_PARTITIONS; ``"0:1,1:2"`` -> frozenset of the partitions listed with ``broker_id``; an empty
    or invalid value (never accepted by validation, but a znode can hold anything) -> the empty set."""
    items = _items(value)
    if not items:
        return frozenset()
    if items[0] == ALL_PARTITIONS:
        return ALL_PARTITIONS
    if not valid_throttled_replicas(items):
        log.warning("ignoring invalid throttled replica list %r", value)
        return frozenset()
    out = set()
    for item in items:
        p, b = item.split(":")
        if int(b) == broker_id:
            out.add(int(p))
    return frozenset(out)


class SimpleRate:
    """Bytes/s over ``window_num`` samples of ``window_size_s`` seconds (module docstring). ``clock`` -> seconds."""

    def __init__(self, window_num=11, window_size_s=1, clock=time.monotonic):
        self.window_num = int(window_num)
        self.window_s = float(window_size_s)
        self.clock = clock
        self._samples = []          # [start_s, bytes], at most window_num, the current one last

    def record(self, value, now=None):
        now = self.clock() if now is None else now
        self._purge(now)
        if not self._samples or now >= self._samples[-1][0] + self.window_s:
            self._samples.append([now, 0])
            if len(self._samples) > self.window_num:
                del self._samples[0]
        self._samples[-1][1] += value

    def measure(self, now=None):
        now = self.clock() if now is None else now
        self._purge(now)
        if not self._samples:
            return 0.0
        elapsed = max(now - self._samples[0][0], self.window_s)
        return sum(v for _, v in self._samples) / elapsed

    def _purge(self, now):
        expire = self.window_num * self.window_s
        while self._samples and now - self._samples[0][0] >= expire:
            del self._samples[0]


class ReplicationQuota:
    """One side's quota on broker ``broker_id``. ``kind``: "leader" or "follower" (which topic list it reads);
    ``overrides_for(topic)`` -> the topic's config overrides (raw strings or typed lists; None: no topic throttled)."""

    def __init__(self, kind, broker_id, window_num=11, window_size_s=1, bound=LONG_MAX, overrides_for=None,
                 clock=time.monotonic):
        assert kind in ("leader", "follower")
        self.kind = kind
        self.key = LEADER_REPLICAS if kind == "leader" else FOLLOWER_REPLICAS
        self.broker_id = broker_id
        self.rate = SimpleRate(window_num, window_size_s, clock)
        self.bound = bound
        self.overrides_for = overrides_for
        self._parsed = {}           # topic -> (raw value, parsed): re-parsed only when the raw value changes
        self.bytes_recorded = 0     # total, for tests and metrics

    def set_bound(self, bound):
        """Bytes/s; None or Long.MAX = unbounded."""
        bound = LONG_MAX if bound is None else int(bound)
        if bound != self.bound:
            log.info("%s.replication.throttled.rate on broker %d: %s", self.kind, self.broker_id,
                     "unbounded" if bound >= LONG_MAX else bound)
        self.bound = bound

    @property
    def bounded(self):
        return self.bound < LONG_MAX

    def is_throttled(self, tp):
        """Whether partition ``tp`` = (topic, p) is throttled on this side of this broker."""
        if self.overrides_for is None:
            return False
        topic, p = tp
        raw = (self.overrides_for(topic) or {}).get(self.key)
        if raw is None:
            return False
        cached = self._parsed.get(topic)
        if cached is None or cached[0] != raw:
            cached = self._parsed[topic] = (raw, parse_throttled_replicas(raw, self.broker_id))
        parsed = cached[1]
        return parsed == ALL_PARTITIONS or p in parsed

    def is_quota_exceeded(self, now=None):
        return self.bounded and self.rate.measure(now) > self.bound

    def record(self, nbytes, now=None):
        if nbytes > 0:
            self.rate.record(nbytes, now)
            self.bytes_recorded += nbytes


class ReplicationQuotas:
    """This broker's two quotas (``leader``, ``follower``) and where their bounds come from: ``static`` =
    {rate key: bytes/s} from server.properties, overridden by the dynamic broker configs ``apply_dynamic`` gets."""

    def __init__(self, broker_id, window_num=11, window_size_s=1, static=None, overrides_for=None,
                 clock=time.monotonic):
        self.broker_id = broker_id
        self.static = dict(static or {})
        self.leader = ReplicationQuota("leader", broker_id, window_num, window_size_s,
                                       self.static.get(LEADER_RATE, LONG_MAX), overrides_for, clock)
        self.follower = ReplicationQuota("follower", broker_id, window_num, window_size_s,
                                         self.static.get(FOLLOWER_RATE, LONG_MAX), overrides_for, clock)

    def apply_dynamic(self, per_broker, default):
        """``per_broker`` / ``default``: the config dicts of /config/brokers/<id> and /config/brokers/<default>."""
        for key, quota in ((LEADER_RATE, self.leader), (FOLLOWER_RATE, self.follower)):
            raw = per_broker.get(key, default.get(key))
            bound = self.static.get(key, LONG_MAX)
            if raw is not None:
                try:
                    bound = int(str(raw).strip())
                    if bound < 0:
                        raise ValueError(raw)
                except ValueError:
                    log.warning("ignoring invalid dynamic broker config %s=%r", key, raw)
                    bound = self.static.get(key, LONG_MAX)
            quota.set_bound(bound)
