"""State metrics collectors (kbroker/metrics/cluster.py) read from real owners: Partitions over real Logs, the
delayed produce, three Controllers over the embedded backend, the log flush timer, the client quota managers."""
import os
import types

import gevent
from gevent.event import Event
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kbroker.log.config import LogConfig
from kbroker.log.log import FLUSH_STATS, Log, LogFlushStats
from kbroker.metrics.cluster import (ControllerCollector, LogFlushCollector, QuotaCollector, ReplicaManagerCollector,
                                     declared_names, quantile)
from kbroker.quota.manager import ClientQuotas
from kbroker.record import build_batch
from kbroker.replica.delayed_produce import DelayedProduce
from kbroker.replica.partition import IsrStats, Partition

from .test_controller_support import backend, make_cluster, register, unregister  # noqa: F401 -- fixture


def scrape(*collectors):
    """{(sample name, frozenset(labels)): value} of one exposition, through prometheus_client's own parser."""
    reg = CollectorRegistry()
    for c in collectors:
        reg.register(c)
    out = {}
    for fam in text_string_to_metric_families(generate_latest(reg).decode()):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def one(samples, name, **labels):
    return samples[(name, frozenset(labels.items()))]


class FakeReplicas:
    """The two things the collector reads of a ReplicaManager besides its partitions."""

    def __init__(self, parts, fetchers=()):
        self._parts = {(p.topic, p.index): p for p in parts}
        self._fetchers = {i: types.SimpleNamespace(states=states) for i, states in enumerate(fetchers)}
        self.isr_stats = parts[0].isr_stats if parts else IsrStats()

    def partitions(self):
        return dict(self._parts)

    def fetchers(self):
        return dict(self._fetchers)


def make_partition(tmp_path, name, index, stats, min_isr=1):
    cfg = LogConfig(min_insync_replicas=min_isr)
    lg = Log(str(tmp_path / ("%s-%d" % (name, index))), cfg)
    return Partition(name, index, lg, cfg, broker_id=0, isr_stats=stats, replica_lag_time_max_ms=1000)


def records(n):
    return build_batch([(i, 1000, None, b"v%d" % i) for i in range(n)])


def test_replica_counts_isr_changes_lag_and_purgatory(tmp_path):
    stats = IsrStats()
    led = make_partition(tmp_path, "t", 0, stats, min_isr=2)
    led.make_leader(1, [0], [0, 1, 2], 0)                      # ISR 1 of 3: under-replicated, under min ISR
    full = make_partition(tmp_path, "t", 1, stats)
    full.make_leader(1, [0, 1], [0, 1], 0)
    follower = make_partition(tmp_path, "t", 2, stats)
    follower.make_follower(1, 1, [1, 0], [1, 0], 0)
    lags = [{("t", 2): types.SimpleNamespace(lag=7)}, {("u", 0): types.SimpleNamespace(lag=42)}]
    rm = FakeReplicas([led, full, follower], lags)
    s = scrape(ReplicaManagerCollector(rm))
    assert one(s, "kafka_server_replicamanager_partitioncount") == 3
    assert one(s, "kafka_server_replicamanager_leadercount") == 2
    assert one(s, "kafka_server_replicamanager_underreplicatedpartitions") == 1
    assert one(s, "kafka_server_replicamanager_underminisrpartitioncount") == 1
    assert one(s, "kafka_server_replicafetchermanager_maxlag", clientId="Replica") == 42
    assert one(s, "kafka_server_replicamanager_isrshrinks_total") == 0
    assert one(s, "kafka_server_replicamanager_isrexpands_total") == 0

    # ISR changes, counted by the shared IsrStats: follower 1 catches up on t-0 (expand), then 1 falls behind on
    # t-1 past replica.lag.time.max.ms (shrink).
    led.append(records(3), 9, 1)
    led.update_follower(1, 3)
    assert led.isr == [0, 1]
    full.followers[1].last_caught_up_ms = 0
    assert full.maybe_shrink_isr(now=10 ** 13)
    s = scrape(ReplicaManagerCollector(rm))
    assert one(s, "kafka_server_replicamanager_isrexpands_total") == 1
    assert one(s, "kafka_server_replicamanager_isrshrinks_total") == 1
    assert one(s, "kafka_server_replicamanager_underreplicatedpartitions") == 2    # t-0 [0,1] of 3, t-1 [0] of 2

    # Purgatories: one acks=all produce waiting on t-0 and t-1 (ISR [0, 1] and [0]... t-1's completes at once, so
    # it waits on t-0 only), one consumer fetch parked on t-0 and t-1, one follower fetch on t-0.
    full.make_leader(2, [0, 1], [0, 1], 1)
    delayed = DelayedProduce()
    delayed.append(led, records(1), 9)
    delayed.append(full, records(1), 9)
    waiter = gevent.spawn(delayed.wait, 5000)
    gevent.sleep(0.01)
    fetch_ev, follower_ev = Event(), Event()
    led.add_waiter(fetch_ev)
    full.add_waiter(fetch_ev)
    led.add_waiter(follower_ev, follower=True)
    s = scrape(ReplicaManagerCollector(rm))
    assert one(s, "kafka_server_delayedoperationpurgatory_purgatorysize", delayedOperation="Produce") == 2
    assert one(s, "kafka_server_delayedoperationpurgatory_numdelayedoperations", delayedOperation="Produce") == 1
    assert one(s, "kafka_server_delayedoperationpurgatory_purgatorysize", delayedOperation="Fetch") == 3
    assert one(s, "kafka_server_delayedoperationpurgatory_numdelayedoperations", delayedOperation="Fetch") == 2
    led.update_follower(1, led.log_end_offset)                 # replicated: the produce completes
    full.update_follower(1, full.log_end_offset)
    waiter.join(2)
    assert waiter.ready()
    led.remove_waiter(fetch_ev)
    full.remove_waiter(fetch_ev)
    led.remove_waiter(follower_ev, follower=True)
    s = scrape(ReplicaManagerCollector(rm))
    assert one(s, "kafka_server_delayedoperationpurgatory_purgatorysize", delayedOperation="Produce") == 0
    assert one(s, "kafka_server_delayedoperationpurgatory_purgatorysize", delayedOperation="Fetch") == 0
    for p in (led, full, follower):
        p.log.close()


def test_controller_metrics_over_three_controllers(backend):  # noqa: F811 -- fixture
    c = make_cluster(backend, **{"unclean.leader.election.enable": True})
    try:
        collectors = {bid: ControllerCollector(ctrl) for bid, ctrl in c.ctrls.items()}

        def total(name):
            return sum(one(scrape(col), name) for col in collectors.values())
        assert total("kafka_controller_kafkacontroller_activecontrollercount") == 1
        c.store.create_topic("t", {0: [1, 2], 1: [2, 3]})
        c.store.create_topic("one", {0: [2]})
        c.settle()
        active = c.active()
        victim = 2 if active.broker_id != 2 else 3
        assert total("kafka_controller_kafkacontroller_offlinepartitionscount") == 0
        before = one(scrape(collectors[active.broker_id]),
                     "kafka_controller_controllerstats_leaderelectionrateandtimems_count")
        unregister(backend, victim)
        c.settle()
        s = scrape(collectors[active.broker_id])
        assert one(s, "kafka_controller_controllerstats_leaderelectionrateandtimems_count") == before + 1
        assert one(s, "kafka_controller_controllerstats_leaderelectionrateandtimems", quantile="0.99") > 0
        if victim == 2:
            # "one" (RF 1) has no replica left: offline; t-0 and t-1 lost their leader 2: elected cleanly.
            assert one(s, "kafka_controller_kafkacontroller_offlinepartitionscount") == 1
        assert total("kafka_controller_kafkacontroller_activecontrollercount") == 1
        assert total("kafka_controller_controllerstats_uncleanleaderelections_total") == 0
    finally:
        c.stop()


def test_unclean_election_counted(backend):  # noqa: F811 -- fixture
    c = make_cluster(backend, **{"unclean.leader.election.enable": True})
    try:
        c.store.create_topic("t", {0: [1, 2]})
        c.settle()
        unregister(backend, 2)
        c.settle()
        unregister(backend, 1)           # the last ISR member [1] goes: offline
        c.settle()
        col = ControllerCollector(c.active())
        s = scrape(col)
        assert one(s, "kafka_controller_kafkacontroller_offlinepartitionscount") == 1
        elections = one(s, "kbroker_controller_leader_elections_total")
        register(backend, 2)             # not in the ISR: only an unclean election brings it back
        c.settle()
        col = ControllerCollector(c.active())
        s = scrape(col)
        assert one(s, "kafka_controller_controllerstats_uncleanleaderelections_total") == 1
        assert one(s, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
        assert one(s, "kbroker_controller_leader_elections_total") == elections + (c.active() is col.controller)
    finally:
        c.stop()


def test_no_controller_exports_zeros():
    s = scrape(ControllerCollector(None))
    assert one(s, "kafka_controller_kafkacontroller_activecontrollercount") == 0
    assert one(s, "kafka_controller_controllerstats_leaderelectionrateandtimems_count") == 0


def test_quantiles_are_yammers():
    xs = list(range(1, 101))
    assert quantile(xs, 0.5) == 50.5
    assert quantile(xs, 0.99) == 99.99
    assert quantile(xs, 0.999) == 100
    assert quantile([], 0.5) == 0.0
    assert quantile([7], 0.75) == 7


def test_log_flush_timer(tmp_path):
    before, _ = FLUSH_STATS.snapshot()
    lg = Log(str(tmp_path / "f-0"), LogConfig())
    from kbroker.record import validate_for_append
    lg.append(validate_for_append(records(5), lg.log_end_offset, 1000))
    lg.flush()
    lg.flush()                                           # nothing new to make durable: not a flush
    s = scrape(LogFlushCollector())
    assert one(s, "kafka_log_logflushstats_logflushrateandtimems_count") == before + 1
    lg.close()
    own = LogFlushStats()
    for ms in (1.0, 2.0, 3.0, 4.0):
        own.record(ms)
    s = scrape(LogFlushCollector(own))
    assert one(s, "kafka_log_logflushstats_logflushrateandtimems_count") == 4
    assert one(s, "kafka_log_logflushstats_logflushrateandtimems", quantile="0.50") == 2.5
    assert one(s, "kafka_log_logflushstats_logflushrateandtimems", quantile="0.999") == 4.0


def test_segment_files_collector_reads_the_pool(tmp_path):
    from kbroker.log.descriptors import DescriptorPool
    from kbroker.metrics.cluster import SegmentFilesCollector
    pool = DescriptorPool(2)

    class Seg:
        _touched = False

        def __init__(self, key):
            self.key = key

        def _evict(self):
            pass
    path = tmp_path / "x.log"
    path.write_bytes(b"")
    segs = [Seg(k) for k in range(3)]
    handles = [pool.open(s, str(path), os.O_RDONLY, s.key) for s in segs]
    s = scrape(SegmentFilesCollector(pool))
    assert one(s, "kbroker_log_open_segment_files") == 2
    assert one(s, "kbroker_log_open_segment_files_max") == 2
    assert one(s, "kbroker_log_segment_file_opens_total") == 3
    assert one(s, "kbroker_log_segment_file_evictions_total") == 1
    del handles


class Limits:
    """QuotaLimits' two questions: client "slow" has a 1000 B/s produce quota, everyone else none."""

    def has_quotas(self, kind):
        return kind == "producer_byte_rate"

    def limit_for(self, kind, user, client_id):
        return ((user, client_id), 1000.0 if client_id == "slow" else None)


def test_quota_throttles_per_entity():
    identity = types.SimpleNamespace(principal="User:alice")
    now = [10_000]
    q = ClientQuotas(Limits(), window_num=11, window_size_s=1, clock=lambda: now[0])
    assert scrape(QuotaCollector(q)) == {}
    throttles = [q.produce.record(identity, "slow", 50_000, now_ms=10_000) for _ in range(2)]
    assert q.produce.record(identity, "fast", 10 ** 9, now_ms=10_000) == 0
    assert all(t > 0 for t in throttles)
    s = scrape(QuotaCollector(q))
    key = dict(resource="Produce", user="alice", clientId="slow")
    assert one(s, "kbroker_quota_throttled_responses_total", **key) == 2
    assert one(s, "kbroker_quota_throttle_time_ms_total", **key) == sum(throttles)
    assert one(s, "kafka_server_quota_throttle_time", **key) == sum(throttles) / 2
    assert len(s) == 3                                   # "fast" has no quota, the other types no throttle
    # Kafka's throttle-time averages over the quota windows (11 x 1 s): 12 s later none is left in them, while
    # the counters keep everything.
    now[0] += 12_000
    s = scrape(QuotaCollector(q))
    assert one(s, "kafka_server_quota_throttle_time", **key) == 0.0
    assert one(s, "kbroker_quota_throttled_responses_total", **key) == 2
    third = q.produce.record(identity, "slow", 50_000, now_ms=now[0])
    s = scrape(QuotaCollector(q))
    assert third > 0 and one(s, "kafka_server_quota_throttle_time", **key) == third


def test_declared_names_cover_every_scraped_sample(tmp_path):
    """describe() names what collect() exports: the docs test relies on it."""
    stats = IsrStats()
    part = make_partition(tmp_path, "d", 0, stats)
    collectors = [ReplicaManagerCollector(FakeReplicas([part])), ControllerCollector(None), LogFlushCollector(),
                  QuotaCollector(None)]
    names = {name for name, _ in scrape(*collectors)}
    assert names <= declared_names(collectors)
    assert "kafka_server_replicamanager_underreplicatedpartitions" in names
    part.log.close()


def test_a_scrape_of_many_partitions_yields_to_the_loop(monkeypatch):
    """100,000 partitions (and 50,000 committed offsets): both collectors tick a TimeSlice, so other greenlets run
    during the scrape (without the slices a greenlet waiting for 1 ms would not run at all until it ends).

    The slice is 0.5 ms here, not 20 ms: with 20 ms slices the count of yields depends on how fast the machine
    scrapes (CI once saw one yield in a scrape that took 20-40 ms), with 0.5 ms any scrape of 100,000 partitions
    yields dozens of times, and one that never ticks still yields none."""
    from kbroker.metrics.groups import GroupLagCollector
    from kbroker.timeslice import TimeSlice
    monkeypatch.setattr(TimeSlice.__init__, "__defaults__", (0.0005,))
    cfg = types.SimpleNamespace(min_insync_replicas=2)
    parts = [types.SimpleNamespace(topic="t", index=i, is_leader=i % 2 == 0, isr=[0], replicas=[0, 1],
                                   log_config=cfg, waiters=set(), replica_waiters=set(), high_watermark=10)
             for i in range(100_000)]
    rm = FakeReplicas([])
    rm._parts = {(p.topic, p.index): p for p in parts}
    rm.get_partition = lambda t, p: parts[p]
    group = types.SimpleNamespace(offsets={("t", i): types.SimpleNamespace(offset=4) for i in range(0, 100_000, 2)})
    groups = types.SimpleNamespace(metadata=types.SimpleNamespace(groups={"g": group}))
    runs = [0]

    def ticker():
        while True:
            gevent.sleep(0.001)
            runs[0] += 1
    t = gevent.spawn(ticker)
    gevent.sleep(0.01)
    try:
        for collector, name, expected in ((ReplicaManagerCollector(rm),
                                           "kafka_server_replicamanager_underreplicatedpartitions", 50_000),
                                          (GroupLagCollector(groups, rm), "kbroker_consumergroup_lag", 6 * 50_000)):
            before = runs[0]
            families = {f.name: f for f in collector.collect()}
            assert runs[0] - before >= 2, type(collector).__name__
            assert sum(x.value for x in families[name].samples) == expected
    finally:
        t.kill()
