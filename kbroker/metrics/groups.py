"""Consumer-group lag computed by the broker (kbroker's own metric; Kafka needs a separate lag exporter for it).

``kbroker_consumergroup_lag{group, topic, partition}`` = the partition's high watermark - the group's committed
offset (never below 0), exported by the broker that coordinates the group (the leader of its ``__consumer_offsets``
partition): only it holds the group's committed offsets, so summing the series over every broker counts each group
once. ``kbroker_consumergroup_committed_offset`` is the committed offset itself. A group whose offsets have not
been loaded yet (its coordinator partition is loading) has no series; nor has a partition whose high watermark is
not known yet (below).

High watermarks: of a partition this broker leads, read from its Partition at scrape time (exact); of one led
elsewhere, from ``RemoteHighWatermarks``, a cache filled by a background greenlet with ListOffsets (latest offset,
read_uncommitted: the HW, as a consumer sees it) sent to each leader over the inter-broker listener, at most every
``REFRESH_S`` (10 s) -- never inside a scrape, which only reads the cache and names the partitions it lacked. A
partition first named by a scrape is fetched at once (the refresher is woken), so a new group has its lag from the
second scrape on; later its lag may be up to ``REFRESH_S`` old. Cache entries no scrape asked for in
``FORGET_S`` (10 min) are dropped (committed offsets of deleted groups or topics).

The collector walks the groups in time slices (``kbroker.timeslice``), so 100,000 committed offsets never hold the
event loop more than 20 ms at once.
"""
import logging
import time

import gevent
from gevent.event import Event
from prometheus_client.core import GaugeMetricFamily

from kbroker.timeslice import TimeSlice

log = logging.getLogger(__name__)

REFRESH_S = 10.0
FORGET_S = 600.0
LIST_OFFSETS, LIST_OFFSETS_VERSION = 2, 1     # v1: one (timestamp, offset) per partition; latest = the HW
LATEST = -1
CLIENT_ID = "kbroker-group-lag"


class RemoteHighWatermarks:
    """HWs of partitions led by other brokers: ``get(tp) -> hw | None`` (cache only), ``want(tps)`` names partitions
    a scrape needed; ``start()`` / ``stop()`` the refresher greenlet.

    ``leader_of(topic, p) -> broker id | None | -1`` (the metadata cache), ``address_of(broker_id) -> (host, port) |
    None`` (the broker's inter-broker endpoints), ``connect(host, port) -> conn`` with ``conn.request(api_key,
    version, body) -> response dict`` and ``conn.close()`` (default: the replica fetcher's LeaderConnection secured
    as the inter-broker channel is)."""

    def __init__(self, leader_of, address_of, connect, refresh_s=REFRESH_S, clock=time.monotonic):
        self.leader_of = leader_of
        self.address_of = address_of
        self.connect = connect
        self.refresh_s = refresh_s
        self.clock = clock
        self._hw = {}             # tp -> high watermark
        self._wanted = {}         # tp -> last time a scrape asked for it
        self._conns = {}          # broker id -> connection
        self._wake = Event()
        self._task = None
        self.refreshes = 0        # rounds done (tests)

    def get(self, tp):
        return self._hw.get(tp)

    def want(self, tps, now=None):
        """Partitions a scrape needed (led elsewhere); any not cached yet wakes the refresher."""
        now = self.clock() if now is None else now
        new = False
        for tp in tps:
            if tp not in self._wanted and tp not in self._hw:
                new = True
            self._wanted[tp] = now
        if new:
            self._wake.set()

    def start(self):
        self._task = gevent.spawn(self._run)
        return self

    def stop(self):
        if self._task is not None:
            self._task.kill()
            self._task = None
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def _run(self):
        last = None
        while True:
            self._wake.wait(self.refresh_s)
            if last is not None:
                wait = last + self.refresh_s - self.clock()
                if wait > 0 and not self._has_unknown():
                    gevent.sleep(wait)        # at most one full round every refresh_s
            self._wake.clear()
            last = self.clock()
            try:
                self.refresh()
            except Exception:  # noqa: BLE001 - the metrics must not stop the broker; next round retries
                log.exception("refreshing consumer-group lag high watermarks")

    def _has_unknown(self):
        return any(tp not in self._hw for tp in self._wanted)

    def refresh(self, now=None):
        """One round: forget what no scrape wanted for FORGET_S, then one ListOffsets per leader for the rest."""
        now = self.clock() if now is None else now
        for tp in [tp for tp, t in self._wanted.items() if now - t > FORGET_S]:
            del self._wanted[tp]
            self._hw.pop(tp, None)
        by_leader = {}
        for tp in sorted(self._wanted):
            leader = self.leader_of(*tp)
            if leader is None or leader < 0:
                self._hw.pop(tp, None)        # unknown or offline: no lag rather than a stale one
                continue
            by_leader.setdefault(leader, []).append(tp)
        for leader, tps in by_leader.items():
            self._ask(leader, tps)
        self.refreshes += 1

    def _ask(self, leader, tps):
        topics = {}
        for t, p in tps:
            topics.setdefault(t, []).append({"partition_index": p, "timestamp": LATEST})
        body = {"replica_id": -1, "isolation_level": 0,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        try:
            conn = self._conns.get(leader)
            if conn is None:
                addr = self.address_of(leader)
                if addr is None:
                    return
                conn = self._conns[leader] = self.connect(*addr)
            resp = conn.request(LIST_OFFSETS, LIST_OFFSETS_VERSION, body)
        except Exception as e:  # noqa: BLE001 - a broker down or moving: its partitions wait for the next round
            log.debug("ListOffsets to broker %d for group lag: %r", leader, e)
            conn = self._conns.pop(leader, None)
            if conn is not None:
                conn.close()
            return
        for t in resp["topics"]:
            for pd in t["partitions"]:
                tp = (t["name"], pd["partition_index"])
                if pd["error_code"] == 0 and pd["offset"] >= 0:
                    self._hw[tp] = pd["offset"]
                else:
                    self._hw.pop(tp, None)    # not the leader any more, deleted...: asked again next round


def inter_broker_connect(security, timeout_s=10.0):
    """``connect(host, port)`` for RemoteHighWatermarks: the replica fetcher's connection class (our codec, one
    request at a time) secured with the inter-broker ChannelSecurity."""
    from kbroker.replica.fetcher import LeaderConnection

    def connect(host, port):
        return LeaderConnection(host, port, CLIENT_ID, timeout_s, security=security)
    return connect


class GroupLagCollector:
    """``kbroker_consumergroup_lag`` and ``kbroker_consumergroup_committed_offset`` of the groups this broker
    coordinates (module docstring). ``groups``: the GroupCoordinator (its ``metadata.groups``: {group id: Group}
    with ``offsets`` {(topic, p): OffsetAndMetadata}); ``replicas``: the ReplicaManager; ``remote``:
    RemoteHighWatermarks (None: partitions led elsewhere get no series)."""

    def __init__(self, groups, replicas, remote=None):
        self.groups = groups
        self.replicas = replicas
        self.remote = remote

    @staticmethod
    def _families():
        labels = ["group", "topic", "partition"]
        return (GaugeMetricFamily("kbroker_consumergroup_lag",
                                  "Messages of the partition the group has not committed: high watermark - committed "
                                  "offset (on the group's coordinator)", labels=labels),
                GaugeMetricFamily("kbroker_consumergroup_committed_offset",
                                  "The group's committed offset of the partition (on the group's coordinator)",
                                  labels=labels))

    def describe(self):
        return iter(self._families())

    def collect(self):
        lag, committed = self._families()
        md = getattr(self.groups, "metadata", None) if self.groups is not None else None
        if md is None:
            return iter((lag, committed))
        slice_ = TimeSlice()
        replicas = self.replicas
        remote = self.remote
        missing = []
        for gid, group in list(md.groups.items()):
            for (topic, p), om in list(group.offsets.items()):
                slice_.tick()
                if om.offset < 0:
                    continue
                part = replicas.get_partition(topic, p)
                if part is not None and part.is_leader:
                    hw = part.high_watermark
                else:
                    hw = remote.get((topic, p)) if remote is not None else None
                    if hw is None:
                        missing.append((topic, p))
                        continue
                    if remote is not None:
                        missing.append((topic, p))      # still wanted: keeps it fresh in the cache
                key = [gid, topic, str(p)]
                lag.add_metric(key, max(0, hw - om.offset))
                committed.add_metric(key, om.offset)
        if remote is not None and missing:
            remote.want(missing)
        return iter((lag, committed))
