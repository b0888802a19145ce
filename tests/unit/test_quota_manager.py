"""kbroker/quota/manager.py: per-entity accounting and Kafka's throttle times, exact, on a fake clock; a fake
QuotaLimits (the interface of kbroker/quota/store.py)."""
from kbroker.quota import manager as M
from kbroker.quota.manager import ClientQuotaManager, ClientQuotas, throttle_time, user_of
from kbroker.server.context import ANONYMOUS, ClientIdentity

ALICE = ClientIdentity("PLAINTEXT", "SASL_PLAINTEXT", "User:alice", "127.0.0.1", 1)
ANON = ClientIdentity("PLAINTEXT", "PLAINTEXT", ANONYMOUS, "127.0.0.1", 2)


class Limits:
    """{kind: {(user, client): (entity_key, bound)}}; a client not listed has no quota."""

    def __init__(self, table=None):
        self.table = table or {}
        self.asked = []

    def has_quotas(self, kind):
        return bool(self.table.get(kind))

    def limit_for(self, kind, user, client_id):
        self.asked.append((kind, user, client_id))
        return self.table.get(kind, {}).get((user, client_id), (("", client_id), None))


def _producer(bound, key=("", "slow"), user="ANONYMOUS", client="slow", samples=11, size_s=1):
    limits = Limits({M.PRODUCE: {(user, client): (key, bound)}})
    return ClientQuotaManager(M.PRODUCE, samples, size_s, limits, clock=lambda: 0), limits


def test_user_of_takes_the_principal_name():
    assert user_of(ALICE) == "alice" and user_of(ANON) == "ANONYMOUS"


def test_throttle_time_is_kafkas_formula_rounded_half_up():
    assert throttle_time(1200.0, 1000.0, 10000) == 2000
    assert throttle_time(1000.5, 1000.0, 1000) == 1       # 0.5 ms rounds up (Java Math.round)
    assert throttle_time(1000.4, 1000.0, 1000) == 0


def test_within_the_quota_nothing_is_throttled():
    m, _ = _producer(1000.0)
    assert m.record(ANON, "slow", 10000, now_ms=0) == 0    # 10000 B over 10 s (the padded window) = 1000 B/s
    assert m.stats() == {"throttled": 0, "throttle_ms": 0, "entities": {}}


def test_over_the_quota_the_throttle_brings_the_rate_back_to_the_bound():
    m, _ = _producer(1000.0)
    assert m.record(ANON, "slow", 12000, now_ms=0) == 2000  # 1200 B/s over 10 s: (200 / 1000) x 10 s
    # under 10 whole windows the rate is still taken over 10 s (Kafka's padding); 13000 B -> 1300 B/s
    assert m.rate(("", "slow"), now_ms=2000) == 1200.0
    assert m.record(ANON, "slow", 1000, now_ms=2000) == 3000
    # once whole windows have passed the elapsed time is real: 13000 B over 10.5 s
    assert m.record(ANON, "slow", 0, now_ms=10500) == 2500    # (1238.095 - 1000) / 1000 x 10500 ms
    st = m.stats()
    assert (st["throttled"], st["throttle_ms"]) == (3, 7500)
    assert st["entities"] == {("", "slow"): {"throttled": 3, "throttle_ms": 7500}}


def test_no_quota_of_the_kind_anywhere_costs_no_lookup():
    limits = Limits()
    m = ClientQuotaManager(M.PRODUCE, 11, 1, limits, clock=lambda: 0)
    assert not m.enabled()
    assert m.record(ANON, "x", 10 ** 9) == 0
    assert limits.asked == [] and m.stats()["entities"] == {}
    limits.table[M.PRODUCE] = {("ANONYMOUS", "y"): (("", "y"), 1.0)}
    assert m.enabled()


def test_a_client_without_a_quota_is_not_recorded():
    m, limits = _producer(1000.0)
    assert m.record(ANON, "other", 10 ** 9, now_ms=0) == 0
    assert limits.asked == [(M.PRODUCE, "ANONYMOUS", "other")]
    assert m.rate(("", "other"), 0) is None


def test_clients_of_one_entity_share_its_rate():
    limits = Limits({M.PRODUCE: {("alice", "a"): (("alice", ""), 1000.0), ("alice", "b"): (("alice", ""), 1000.0)}})
    m = ClientQuotaManager(M.PRODUCE, 11, 1, limits)
    assert m.record(ALICE, "a", 6000, now_ms=0) == 0
    assert m.record(ALICE, "b", 6000, now_ms=0) == 2000      # 12000 B together
    assert m.stats()["entities"] == {("alice", ""): {"throttled": 1, "throttle_ms": 2000}}


def test_the_request_quota_is_capped_at_one_window():
    limits = Limits({M.REQUEST: {("ANONYMOUS", "busy"): (("", "busy"), 1.0)}})
    q = ClientQuotas(limits, window_num=11, window_size_s=2)
    # 0.5 s of handler time = 50 percent-seconds; over the padded 20 s window: 2.5 % > 1 %: (1.5 / 1) x 20 s -> 2 s
    assert q.request.record(ANON, "busy", 50.0, now_ms=0) == 2000
    assert q.request.record(ANON, "busy", 0.1, now_ms=0) == 2000
    limits.table[M.PRODUCE] = {("ANONYMOUS", "busy"): (("", "busy"), 1.0)}
    assert q.produce.record(ANON, "busy", 50, now_ms=0) == 30000   # byte rates are not capped: (2.5-1)/1 x 20 s
    st = q.stats()
    assert st[M.REQUEST]["throttled"] == 2 and st[M.REQUEST]["throttle_ms"] == 4000
    assert st[M.FETCH] == {"throttled": 0, "throttle_ms": 0, "entities": {}}


def test_a_throttle_fits_the_wire_int32():
    m, _ = _producer(0.001)
    assert m.record(ANON, "slow", 10 ** 9, now_ms=0) == 2 ** 31 - 1


def test_max_in_window_is_bound_times_the_full_span():
    m, _ = _producer(1000.0, samples=11, size_s=2)
    assert m.max_in_window(ANON, "slow") == 20000.0
    assert m.max_in_window(ANON, "other") is None


def test_idle_entities_are_dropped_after_an_hour():
    limits = Limits({M.PRODUCE: {("ANONYMOUS", c): (("", c), 1e9) for c in ("a", "b")}})
    m = ClientQuotaManager(M.PRODUCE, 11, 1, limits)
    m.record(ANON, "a", 1, now_ms=0)
    m.record(ANON, "b", 1, now_ms=M.INACTIVE_S * 1000 + M.SWEEP_EVERY_S * 1000)   # creates b, sweeps a
    assert m.rate(("", "a"), 0) is None and m.rate(("", "b"), M.INACTIVE_S * 1000) is not None
