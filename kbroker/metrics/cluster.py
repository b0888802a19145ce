"""State metrics: replication, the controller, log flushes and client quotas, read from their owners at scrape time.

Each class is a prometheus_client custom collector (``collect()`` yields metric families, ``describe()`` the same
families without samples, so a registry and the docs test know the names without a scrape). Nothing here counts:
the owners do (docs/architecture.md, "metrics") and these classes read them. A scrape runs in a greenlet of the
broker's event loop (kbroker/metrics/http.py), so every read sees a state between two greenlet switches; the loops
over partitions tick a ``TimeSlice`` so a scrape of 10,000 partitions never holds the loop more than 20 ms at once.

Names are those the jmx_exporter rules for Kafka (``example_configs/kafka-2_0_0.yml``, ``lowercaseOutputName:
true``) make of Kafka's MBeans, labels keep the MBean's key spelling (``clientId``, ``delayedOperation``); the
MBean -> name table is in docs/monitoring.md. What Kafka has no MBean for is named ``kbroker_*``.

=====================================================  =========================================================
family                                                 read from
=====================================================  =========================================================
kafka_server_replicamanager_partitioncount             ReplicaManager.partitions(): every hosted partition
kafka_server_replicamanager_leadercount                ... those this broker leads
kafka_server_replicamanager_underreplicatedpartitions  ... led here with ISR smaller than the replica list
kafka_server_replicamanager_underminisrpartitioncount  ... led here with ISR below min.insync.replicas
kafka_server_replicamanager_isrshrinks_total           ReplicaManager.isr_stats (partition.IsrStats)
kafka_server_replicamanager_isrexpands_total           ... (monotonic: kept by the manager, not the partitions)
kafka_server_replicafetchermanager_maxlag              max FetchState.lag over the follower fetchers
kafka_server_delayedoperationpurgatory_purgatorysize   registrations in the partitions' waiter sets: an acks=all
                                                       produce (ProduceWaiter) counts once per partition it waits
                                                       on, as Kafka's watched(); Fetch = consumer + follower
kafka_server_delayedoperationpurgatory_numdelayedoperations  the same operations counted once each
kafka_controller_kafkacontroller_activecontrollercount  Controller.is_active(): 1 on exactly one broker
kafka_controller_kafkacontroller_offlinepartitionscount the active controller's OfflinePartition states (topics
                                                       being deleted left out, as Kafka); 0 elsewhere
kafka_controller_controllerstats_leaderelectionrateandtimems  controller/stats.py (broker-change events)
kafka_controller_controllerstats_uncleanleaderelections_total ...
kbroker_controller_leader_elections_total               ... partition leaders the controller changed
kafka_log_logflushstats_logflushrateandtimems           log/log.py FLUSH_STATS
kbroker_log_open_segment_files                          log/descriptors.py POOL: .log descriptors held, the bound
kbroker_log_open_segment_files_max                      (log.open.segment.files.max), opens and evictions
kbroker_log_segment_file_opens_total                    (process-wide, as the descriptor limit)
kbroker_log_segment_file_evictions_total
kafka_server_quota_throttle_time                        Services.quotas: throttle_averages() (ms, over the quota
kbroker_quota_throttled_responses_total                 windows) and stats() (throttled responses, their total
kbroker_quota_throttle_time_ms_total                    ms) per quota type (resource) and (user, clientId)
kafka_server_fetchsessioncache_numincrementalfetchsessions  Services.fetch_sessions (server/fetch_sessions.py):
kafka_server_fetchsessioncache_numincrementalfetchpartitionscached  sessions, their partitions, evictions
kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total  (KIP-227 cache)
kbroker_fetch_session_incremental_fetches_total          ... incremental Fetch requests served
kbroker_fetch_session_errors_total                       ... answered 70 or 71
=====================================================  =========================================================

Timers (Kafka's Yammer ``...RateAndTimeMs``) are exported as jmx_exporter exports them: a gauge per quantile
(0.50 0.75 0.95 0.98 0.99 0.999) over the owner's last 1,024 samples, and ``<name>_count`` (every sample; the
rules give no ``_sum``), in one family typed summary.
"""
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from kbroker.controller.state import OFFLINE
from kbroker.log import descriptors
from kbroker.log.log import FLUSH_STATS
from kbroker.replica.delayed_produce import ProduceWaiter
from kbroker.server.fetch_sessions import CachedPartition
from kbroker.timeslice import TimeSlice

# Yammer's snapshot percentiles, as jmx_exporter labels them ("50thPercentile" -> "0.50", "999thPercentile" -> "0.999").
QUANTILES = (("0.50", 0.50), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98), ("0.99", 0.99), ("0.999", 0.999))

# Quota types as Kafka's QuotaType names them (the MBean's ``type``, jmx_exporter's ``resource`` label).
QUOTA_RESOURCES = (("producer_byte_rate", "Produce"), ("consumer_byte_rate", "Fetch"), ("request_percentage", "Request"))


def quantile(sorted_samples, q):
    """Yammer's Snapshot.getValue: the sample at position q x (n + 1), interpolated between neighbours (0.0 when
    there is no sample)."""
    n = len(sorted_samples)
    if n == 0:
        return 0.0
    pos = q * (n + 1)
    if pos < 1:
        return float(sorted_samples[0])
    if pos >= n:
        return float(sorted_samples[-1])
    lower = sorted_samples[int(pos) - 1]
    upper = sorted_samples[int(pos)]
    return float(lower + (pos - int(pos)) * (upper - lower))


def timer_families(name, doc, count, samples):
    """A Yammer timer as jmx_exporter exports it: ``name{quantile="0.50"..}`` and ``name_count`` (no ``_sum``),
    typed summary (the shape it has; jmx_exporter types the parts gauge and counter)."""
    m = Metric(name, doc + " (ms; quantiles over the last 1,024 samples)", "summary")
    ordered = sorted(samples)
    for label, q in QUANTILES:
        m.add_sample(name, {"quantile": label}, quantile(ordered, q))
    m.add_sample(name + "_count", {}, count)
    return [m]


def _describe(families):
    """Families without samples: what ``describe()`` yields (the names and types a registry checks)."""
    for f in families:
        f.samples = []
        yield f


class ReplicaManagerCollector:
    """Partition/leader counts, under-replicated and under-min-ISR partitions, ISR changes, follower lag and the
    purgatories of one ReplicaManager (module docstring)."""

    def __init__(self, replica_manager):
        self.rm = replica_manager

    def _families(self, values):
        (parts, leaders, under, under_min, shrinks, expands, max_lag, watched, distinct) = values
        out = []
        for name, doc, v in (
                ("kafka_server_replicamanager_partitioncount", "Partitions hosted by this broker", parts),
                ("kafka_server_replicamanager_leadercount", "Partitions this broker leads", leaders),
                ("kafka_server_replicamanager_underreplicatedpartitions",
                 "Partitions led here whose ISR is smaller than their replica list", under),
                ("kafka_server_replicamanager_underminisrpartitioncount",
                 "Partitions led here whose ISR is below min.insync.replicas", under_min)):
            g = GaugeMetricFamily(name, doc)
            g.add_metric([], v)
            out.append(g)
        for name, doc, v in (("kafka_server_replicamanager_isrshrinks", "ISR shrinks made by this broker as leader",
                              shrinks),
                             ("kafka_server_replicamanager_isrexpands", "ISR expansions made by this broker as leader",
                              expands)):
            c = CounterMetricFamily(name, doc)
            c.add_metric([], v)
            out.append(c)
        g = GaugeMetricFamily("kafka_server_replicafetchermanager_maxlag",
                              "Largest lag (messages behind the leader's high watermark) of a partition this broker "
                              "follows", labels=["clientId"])
        g.add_metric(["Replica"], max_lag)
        out.append(g)
        for name, doc, counts in (
                ("kafka_server_delayedoperationpurgatory_purgatorysize",
                 "Parked requests per partition they wait on (acks=all produces, long-poll fetches)", watched),
                ("kafka_server_delayedoperationpurgatory_numdelayedoperations",
                 "Parked requests (acks=all produces, long-poll fetches)", distinct)):
            g = GaugeMetricFamily(name, doc, labels=["delayedOperation"])
            g.add_metric(["Produce"], counts[0])
            g.add_metric(["Fetch"], counts[1])
            out.append(g)
        return out

    def describe(self):
        return _describe(self._families((0, 0, 0, 0, 0, 0, 0, (0, 0), (0, 0))))

    def collect(self):
        rm = self.rm
        slice_ = TimeSlice()
        parts = leaders = under = under_min = 0
        watched_produce = watched_fetch = 0
        produce_ops, fetch_ops = set(), set()
        for part in rm.partitions().values():
            parts += 1
            if part.is_leader:
                leaders += 1
                isr = len(part.isr)
                if isr < len(part.replicas):
                    under += 1
                if isr < part.log_config.min_insync_replicas:
                    under_min += 1
            for ev in part.waiters:
                if isinstance(ev, ProduceWaiter):
                    watched_produce += 1
                    produce_ops.add(id(ev))
                elif not isinstance(ev, CachedPartition):     # a fetch session's watch, not a parked request
                    watched_fetch += 1
                    fetch_ops.add(id(ev))
            for ev in part.replica_waiters:
                if not isinstance(ev, CachedPartition):
                    watched_fetch += 1
                    fetch_ops.add(id(ev))
            slice_.tick()
        max_lag = 0
        for fetcher in rm.fetchers().values():
            for st in list(fetcher.states.values()):
                if st.lag > max_lag:
                    max_lag = st.lag
            slice_.tick()
        stats = rm.isr_stats
        return iter(self._families((parts, leaders, under, under_min, stats.shrinks, stats.expands, max_lag,
                                    (watched_produce, watched_fetch), (len(produce_ops), len(fetch_ops)))))


class ControllerCollector:
    """Active controller count, offline partitions and the ControllerStats of one Controller (module docstring)."""

    def __init__(self, controller):
        self.controller = controller

    def _families(self, active, offline, stats):
        out = []
        for name, doc, v in (("kafka_controller_kafkacontroller_activecontrollercount",
                              "1 on the active controller, 0 on every other broker", active),
                             ("kafka_controller_kafkacontroller_offlinepartitionscount",
                              "Partitions without a live leader (the active controller's count; 0 elsewhere)",
                              offline)):
            g = GaugeMetricFamily(name, doc)
            g.add_metric([], v)
            out.append(g)
        count, samples = (stats.broker_changes, list(stats.broker_change_ms)) if stats is not None else (0, [])
        out += timer_families("kafka_controller_controllerstats_leaderelectionrateandtimems",
                              "Broker-change events handled by the active controller (when leaders are elected)",
                              count, samples)
        for name, doc, v in (("kafka_controller_controllerstats_uncleanleaderelections",
                              "Leaders elected outside the ISR", stats.unclean_elections if stats else 0),
                             ("kbroker_controller_leader_elections",
                              "Partition leaders the controller changed to a live broker",
                              stats.leader_elections if stats else 0)):
            c = CounterMetricFamily(name, doc)
            c.add_metric([], v)
            out.append(c)
        return out

    def describe(self):
        return _describe(self._families(0, 0, None))

    def collect(self):
        c = self.controller
        active = 1 if c is not None and c.is_active() else 0
        offline = 0
        ctx = c.ctx if active else None
        if ctx is not None:
            slice_ = TimeSlice()
            deleting = ctx.topics_to_delete
            for tp, state in list(ctx.partition_states.items()):
                if state == OFFLINE and tp[0] not in deleting:
                    offline += 1
                slice_.tick()
        return iter(self._families(active, offline, c.stats if c is not None else None))


class LogFlushCollector:
    """Kafka's LogFlushRateAndTimeMs from ``kbroker.log.log.FLUSH_STATS`` (process-wide, as Kafka's)."""

    def __init__(self, stats=FLUSH_STATS):
        self.stats = stats

    def describe(self):
        return _describe(timer_families("kafka_log_logflushstats_logflushrateandtimems", "Log flushes (fsync)", 0, []))

    def collect(self):
        count, samples = self.stats.snapshot()
        return iter(timer_families("kafka_log_logflushstats_logflushrateandtimems", "Log flushes (fsync)", count,
                                   samples))


class SegmentFilesCollector:
    """The segment descriptor pool (``kbroker.log.descriptors.POOL``; process-wide, as the descriptor limit). Opens
    growing with evictions means the segments in use do not fit the bound: raise ``ulimit -n`` or the key."""

    def __init__(self, pool=None):
        self.pool = pool

    def _families(self, pool):
        held = GaugeMetricFamily("kbroker_log_open_segment_files", "Segment .log descriptors the broker holds")
        limit = GaugeMetricFamily("kbroker_log_open_segment_files_max",
                                  "The most it holds (log.open.segment.files.max, or half the soft ulimit -n)")
        opens = CounterMetricFamily("kbroker_log_segment_file_opens", "Segment .log files opened (first and reopens)")
        evictions = CounterMetricFamily("kbroker_log_segment_file_evictions",
                                        "Segment .log descriptors closed to stay within the bound")
        if pool is not None:
            held.add_metric([], len(pool))
            limit.add_metric([], pool.limit)
            opens.add_metric([], pool.opens)
            evictions.add_metric([], pool.evictions)
        return [held, limit, opens, evictions]

    def describe(self):
        return _describe(self._families(None))

    def collect(self):
        return iter(self._families(self.pool if self.pool is not None else descriptors.POOL))


class QuotaCollector:
    """Throttles per quota type and client entity from ``Services.quotas.stats()`` (kbroker/quota/manager.py).

    ``kafka_server_quota_throttle_time`` is what jmx_exporter names Kafka's ``kafka.server:type=<Produce|Fetch|
    Request>,user=<u>,client-id=<c>`` ``throttle-time`` attribute: the average throttle (ms) of the entity's
    throttled responses over the quota windows (``quota.window.num`` x ``quota.window.size.seconds``, 11 s), 0
    once none is left in them. The two counters beside it count since the broker started (``rate()`` of both
    gives the average over any range). Entities never throttled are not listed; an entity idle for an hour is
    dropped by the quota manager, and its series with it."""

    def __init__(self, quotas):
        self.quotas = quotas

    @staticmethod
    def _families(stats, averages):
        labels = ["resource", "user", "clientId"]
        avg = GaugeMetricFamily("kafka_server_quota_throttle_time",
                                "Average throttle time (ms) of the entity's throttled responses in the quota "
                                "windows", labels=labels)
        count = CounterMetricFamily("kbroker_quota_throttled_responses",
                                    "Responses throttled by a client quota", labels=labels)
        total = CounterMetricFamily("kbroker_quota_throttle_time_ms",
                                    "Throttle time (ms) given by a client quota", labels=labels)
        for kind, resource in QUOTA_RESOURCES:
            for (user, client_id), e in sorted((stats.get(kind) or {}).get("entities", {}).items()):
                key = [resource, user or "", client_id or ""]
                avg.add_metric(key, averages.get(kind, {}).get((user, client_id), 0.0))
                count.add_metric(key, e["throttled"])
                total.add_metric(key, e["throttle_ms"])
        return [avg, count, total]

    def describe(self):
        return _describe(self._families({}, {}))

    def collect(self):
        q = self.quotas
        return iter(self._families(q.stats(), q.throttle_averages()) if q is not None else self._families({}, {}))


class FetchSessionCollector:
    """The incremental fetch session cache (KIP-227, ``Services.fetch_sessions``): Kafka's FetchSessionCache gauges
    and evictions, and kbroker's counts of incremental requests and session errors (what shows clients using
    sessions)."""

    def __init__(self, cache):
        self.cache = cache

    @staticmethod
    def _families(values):
        sessions, partitions, evictions, incremental, errors_ = values
        out = []
        for name, doc, v in (
                ("kafka_server_fetchsessioncache_numincrementalfetchsessions", "Incremental fetch sessions cached",
                 sessions),
                ("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
                 "Partitions in the cached incremental fetch sessions", partitions)):
            g = GaugeMetricFamily(name, doc)
            g.add_metric([], v)
            out.append(g)
        for name, doc, v in (
                ("kafka_server_fetchsessioncache_incrementalfetchsessionevictions",
                 "Fetch sessions evicted to make room for a new one", evictions),
                ("kbroker_fetch_session_incremental_fetches", "Incremental Fetch requests served (epoch > 0)",
                 incremental),
                ("kbroker_fetch_session_errors",
                 "Fetch requests answered FETCH_SESSION_ID_NOT_FOUND or INVALID_FETCH_SESSION_EPOCH", errors_)):
            c = CounterMetricFamily(name, doc)
            c.add_metric([], v)
            out.append(c)
        return out

    def describe(self):
        return _describe(self._families((0, 0, 0, 0, 0)))

    def collect(self):
        c = self.cache
        if c is None:
            return iter(self._families((0, 0, 0, 0, 0)))
        return iter(self._families((len(c), c.partitions_cached, c.evictions, c.incremental_fetches, c.errors)))


def declared_names(collectors):
    """Every sample name the collectors can export (a counter's ``_total``, a timer's ``_count``): what the docs test
    checks the dashboard and the alert rules against."""
    names = set()
    for c in collectors:
        for fam in c.describe():
            if fam.type == "counter":
                names.add(fam.name + "_total")
            elif fam.type == "summary":
                names.update((fam.name, fam.name + "_count"))
            else:
                names.add(fam.name)
    return names


def state_collectors(replica_manager, controller, quotas, fetch_sessions=None):
    """The collectors of this module for one broker (its ReplicaManager, Controller or None, Services.quotas,
    Services.fetch_sessions)."""
    return [ReplicaManagerCollector(replica_manager), ControllerCollector(controller), LogFlushCollector(),
            SegmentFilesCollector(), QuotaCollector(quotas), FetchSessionCollector(fetch_sessions)]
