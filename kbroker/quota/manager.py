"""Client quota accounting: how much a client did, whether that is over its quota, and for how long to throttle
it (Kafka's ClientQuotaManager and ClientRequestQuotaManager; KIP-55, KIP-124, KIP-219).

``ClientQuotaManager(kind, window_num, window_size_s, limits)`` serves one quota type, ``kind``:
``producer_byte_rate`` (Produce: bytes appended), ``consumer_byte_rate`` (Fetch: record bytes answered) or
``request_percentage`` (handler time; the value recorded is seconds x 100, so the rate is the percentage of one
thread's time). ``limits`` is ``kbroker/quota/store.py``'s ``QuotaLimits``: ``has_quotas(kind)`` and
``limit_for(kind, user, client_id) -> (entity_key, bound | None)``.

``record(identity, client_id, value, now_ms=None) -> throttle ms``:

* no quota of this kind anywhere (``has_quotas`` False) or none for this client (bound None): 0, nothing recorded
  -- the unthrottled path is two calls and a dict read or three;
* else ``value`` goes into the entity's ``Rate`` (``sensor.py``; one per ``entity_key``, so the clients a user
  quota covers share one rate) and, when the rate now exceeds the bound, the throttle is Kafka's
  ``QuotaUtils.throttleTime``: ``round((rate - bound) / bound x window_size)`` ms (Java's Math.round: half up),
  ``window_size`` the elapsed time the rate was computed over -- the delay that brings the rate back to the bound
  if nothing else is recorded meanwhile. The request quota caps it at one window
  (``quota.window.size.seconds``), as Kafka's ClientRequestQuotaManager; the byte-rate quotas do not cap it.

A rate (with its counters) idle for ``INACTIVE_S`` (an hour, Kafka's InactiveSensorExpirationTimeSeconds) is
dropped, so a stream of one-off client ids cannot grow memory without bound (the sweep runs at most once a minute).

``ClientQuotas(limits, window_num, window_size_s)`` is ``Services.quotas`` (``kbroker/server/context.py``
QuotaEnforcement): ``produce``, ``fetch``, ``request`` and ``stats()`` -- the throttle counters: per quota type
and per entity ``(user, client-id)`` (the entity key), ``throttled`` (responses throttled) and ``throttle_ms``
(their total throttle time); ``throttle_averages()`` -- per entity the average throttle over the quota windows
(Kafka's ``throttle-time``). kbroker/metrics/cluster.py reads both.
"""
import math
import time

from kbroker.quota.sensor import Rate

PRODUCE = "producer_byte_rate"
FETCH = "consumer_byte_rate"
REQUEST = "request_percentage"
# A rate not recorded into for this long is dropped (Kafka's InactiveSensorExpirationTimeSeconds)...
INACTIVE_S = 3600
# ... looked for at most this often.
SWEEP_EVERY_S = 60
# throttle_time_ms is an int32 on the wire: a byte-rate throttle (uncapped, as Kafka's) never exceeds it (24.8 days).
MAX_THROTTLE_MS = 2 ** 31 - 1


def _now_ms():
    return int(time.monotonic() * 1000)


def user_of(identity):
    """The quota user of a connection: its principal's name (``User:alice`` -> ``alice``; Kafka's
    ``KafkaPrincipal.getName``, so an unauthenticated client is ``ANONYMOUS``)."""
    principal = identity.principal
    i = principal.find(":")
    return principal[i + 1:] if i >= 0 else principal


def throttle_time(observed, bound, window_ms):
    """Kafka's QuotaUtils.throttleTime: ms that bring ``observed`` back to ``bound`` over ``window_ms``."""
    return int(math.floor((observed - bound) / bound * window_ms + 0.5))


class _Entity:
    __slots__ = ("rate", "throttled", "throttle_ms", "recent_ms", "recent_count")

    def __init__(self, rate):
        self.rate = rate
        self.throttled = 0
        self.throttle_ms = 0
        # Throttle ms and throttled responses in the quota windows (Kafka's throttle-time sensor, an Avg over the
        # same samples): made at the first throttle, so an entity never throttled costs nothing more.
        self.recent_ms = None
        self.recent_count = None


class ClientQuotaManager:
    """One quota type (module docstring)."""

    def __init__(self, kind, window_num, window_size_s, limits, max_throttle_ms=None, clock=_now_ms):
        self.kind = kind
        self.samples = window_num
        self.window_ms = int(window_size_s * 1000)
        self.limits = limits
        self.max_throttle_ms = max_throttle_ms
        self.clock = clock
        self._entities = {}        # entity_key -> _Entity
        self._next_sweep = None
        self.throttled = 0         # over every entity, never expired
        self.throttle_ms = 0

    def enabled(self):
        """Whether any client has a quota of this kind (else ``record`` is 0 whatever it is given: callers skip
        measuring what they would record)."""
        return self.limits.has_quotas(self.kind)

    def record(self, identity, client_id, value, now_ms=None):
        """Record ``value`` for the client -> throttle ms, 0 within its quota (module docstring)."""
        limits = self.limits
        kind = self.kind
        if not limits.has_quotas(kind):
            return 0
        key, bound = limits.limit_for(kind, user_of(identity), client_id)
        if bound is None:
            return 0
        if now_ms is None:
            now_ms = self.clock()
        entity = self._entities.get(key)
        if entity is None:
            entity = self._entities[key] = _Entity(Rate(self.samples, self.window_ms))
            self._maybe_sweep(now_ms)
        rate = entity.rate
        rate.record(value, now_ms)
        observed, window_ms = rate.measure_with_window(now_ms)
        if observed <= bound:       # Kafka's Quota.acceptable: an upper bound is inclusive
            return 0
        ms = min(throttle_time(observed, bound, window_ms), MAX_THROTTLE_MS)
        if self.max_throttle_ms is not None and ms > self.max_throttle_ms:
            ms = self.max_throttle_ms
        if ms > 0:
            entity.throttled += 1
            entity.throttle_ms += ms
            if entity.recent_ms is None:
                entity.recent_ms = Rate(self.samples, self.window_ms)
                entity.recent_count = Rate(self.samples, self.window_ms)
            entity.recent_ms.record(ms, now_ms)
            entity.recent_count.record(1, now_ms)
            self.throttled += 1
            self.throttle_ms += ms
        return ms

    def max_in_window(self, identity, client_id):
        """The most this client may take in one full quota span, ``bound x (window_num - 1) x window size`` (Kafka's
        getMaxValueInQuotaWindow: a Fetch asks for no more), or None without a quota."""
        if not self.limits.has_quotas(self.kind):
            return None
        bound = self.limits.limit_for(self.kind, user_of(identity), client_id)[1]
        return None if bound is None else bound * (self.samples - 1) * self.window_ms / 1000.0

    def rate(self, key, now_ms=None):
        """The entity's current rate (per second), or None when it has none."""
        entity = self._entities.get(key)
        return None if entity is None else entity.rate.measure(self.clock() if now_ms is None else now_ms)

    def _maybe_sweep(self, now_ms):
        if self._next_sweep is not None and now_ms < self._next_sweep:
            return
        self._next_sweep = now_ms + SWEEP_EVERY_S * 1000
        idle = now_ms - INACTIVE_S * 1000
        for key in [k for k, e in self._entities.items() if e.rate.last_record_ms is not None
                    and e.rate.last_record_ms < idle]:
            del self._entities[key]

    def stats(self):
        """{"throttled", "throttle_ms", "entities": {(user, client-id): {"throttled", "throttle_ms"}}}."""
        return {"throttled": self.throttled, "throttle_ms": self.throttle_ms,
                "entities": {key: {"throttled": e.throttled, "throttle_ms": e.throttle_ms}
                             for key, e in self._entities.items() if e.throttled}}

    def throttle_averages(self, now_ms=None):
        """{(user, client-id): average throttle ms over the quota windows} of the entities ever throttled (Kafka's
        ``throttle-time`` metric; 0.0 when none was given in the windows)."""
        now_ms = self.clock() if now_ms is None else now_ms
        out = {}
        for key, e in self._entities.items():
            if e.throttled:
                count = e.recent_count.total(now_ms)
                out[key] = e.recent_ms.total(now_ms) / count if count else 0.0
        return out


class ClientQuotas:
    """``Services.quotas``: the three quota types over one ``QuotaLimits`` (module docstring)."""

    def __init__(self, limits, window_num=11, window_size_s=1, clock=_now_ms):
        self.limits = limits
        self.produce = ClientQuotaManager(PRODUCE, window_num, window_size_s, limits, clock=clock)
        self.fetch = ClientQuotaManager(FETCH, window_num, window_size_s, limits, clock=clock)
        # Kafka's ClientRequestQuotaManager: a request is never throttled for more than one window.
        self.request = ClientQuotaManager(REQUEST, window_num, window_size_s, limits,
                                          max_throttle_ms=int(window_size_s * 1000), clock=clock)

    def stats(self):
        """{kind: ClientQuotaManager.stats()} for the three quota types."""
        return {m.kind: m.stats() for m in (self.produce, self.fetch, self.request)}

    def throttle_averages(self):
        """{kind: ClientQuotaManager.throttle_averages()} for the three quota types."""
        return {m.kind: m.throttle_averages() for m in (self.produce, self.fetch, self.request)}
