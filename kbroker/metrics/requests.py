"""Collectors over the server layer's counters (``kbroker/server/stats.py``): topics, requests, the event loop,
connections. Read at scrape time; names are what jmx_exporter's Kafka rules (``example_configs/kafka-2_0_0.yml``,
``lowercaseOutputName: true``) make of Kafka's MBeans, so Kafka dashboards and alerts work unchanged
(docs/monitoring.md has the MBean -> name table):

=====================================================================  =============================================
MBean (Kafka)                                                          Prometheus samples (here)
=====================================================================  =============================================
kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec[,topic=t]   kafka_server_brokertopicmetrics_messagesin_total
  ... BytesInPerSec, BytesOutPerSec, BytesRejectedPerSec,                {topic="t"} (and without the label: all
  FailedProduceRequestsPerSec, FailedFetchRequestsPerSec,                topics); ..._bytesin_total, _bytesout_total,
  TotalProduceRequestsPerSec, TotalFetchRequestsPerSec                   _bytesrejected_total, ...
  ReplicationBytesOutPerSec (all topics only)                          ..._replicationbytesout_total
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=R,       kafka_network_requestmetrics_requests_total
  version=V                                                              {request="R",version="V"}
kafka.network:type=RequestMetrics,name=TotalTimeMs,request=R           kafka_network_requestmetrics_totaltimems
  (RequestQueueTimeMs, LocalTimeMs, RemoteTimeMs, ThrottleTimeMs,        {request="R",quantile="0.50"...} and _count
  ResponseQueueTimeMs, ResponseSendTimeMs: the same)                     (and _sum, which jmx_exporter lacks)
kafka.network:type=SocketServer,name=NetworkProcessorAvgIdlePercent    kafka_network_socketserver_
                                                                         networkprocessoravgidlepercent
kafka.server:type=KafkaRequestHandlerPool,                             kafka_server_kafkarequesthandlerpool_
  name=RequestHandlerAvgIdlePercent                                      requesthandleravgidlepercent
kafka.server:type=socket-server-metrics,listener=L,networkProcessor=0  kafka_server_socket_server_metrics_
  connection-count                                                       connection_count{listener="L",networkprocessor="0"}
kafka.server:type=KafkaServer,name=BrokerState                         kafka_server_kafkaserver_brokerstate
=====================================================================  =============================================

Beyond Kafka, real Prometheus histograms (aggregatable across brokers with ``histogram_quantile(sum by (le)
(rate(...)))``, which Yammer's quantiles are not): ``kbroker_request_{total,queue,local,remote,throttle,
response_queue,response_send}_time_seconds{request}`` (cumulative since start, power-of-two buckets 15.6 us .. 65.5 s),
``kbroker_event_loop_busy_ratio`` and ``kbroker_build_info{version,kernels}``.
"""
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, SummaryMetricFamily
from prometheus_client.utils import floatToGoString

from kbroker.server.stats import TIMES
from kbroker.timeslice import TimeSlice

# BrokerTopicStats field -> (metric name, Kafka's MBean name) of the per-second meters; per topic and all topics.
TOPIC_METERS = (
    ("messages_in", "kafka_server_brokertopicmetrics_messagesin", "MessagesInPerSec"),
    ("bytes_in", "kafka_server_brokertopicmetrics_bytesin", "BytesInPerSec"),
    ("bytes_out", "kafka_server_brokertopicmetrics_bytesout", "BytesOutPerSec"),
    ("bytes_rejected", "kafka_server_brokertopicmetrics_bytesrejected", "BytesRejectedPerSec"),
    ("failed_produce", "kafka_server_brokertopicmetrics_failedproducerequests", "FailedProduceRequestsPerSec"),
    ("failed_fetch", "kafka_server_brokertopicmetrics_failedfetchrequests", "FailedFetchRequestsPerSec"),
    ("total_produce", "kafka_server_brokertopicmetrics_totalproducerequests", "TotalProduceRequestsPerSec"),
    ("total_fetch", "kafka_server_brokertopicmetrics_totalfetchrequests", "TotalFetchRequestsPerSec"),
)
# All topics only (Kafka has no per-topic replication meters).
ALL_TOPICS_METERS = (
    ("replication_bytes_out", "kafka_server_brokertopicmetrics_replicationbytesout", "ReplicationBytesOutPerSec"),
)

# RequestStats interval -> (jmx_exporter name, Kafka MBean name, kbroker histogram name).
TIME_METRICS = {
    "total": ("kafka_network_requestmetrics_totaltimems", "TotalTimeMs", "kbroker_request_total_time_seconds"),
    "queue": ("kafka_network_requestmetrics_requestqueuetimems", "RequestQueueTimeMs",
              "kbroker_request_queue_time_seconds"),
    "local": ("kafka_network_requestmetrics_localtimems", "LocalTimeMs", "kbroker_request_local_time_seconds"),
    "remote": ("kafka_network_requestmetrics_remotetimems", "RemoteTimeMs", "kbroker_request_remote_time_seconds"),
    "throttle": ("kafka_network_requestmetrics_throttletimems", "ThrottleTimeMs",
                 "kbroker_request_throttle_time_seconds"),
    "response_queue": ("kafka_network_requestmetrics_responsequeuetimems", "ResponseQueueTimeMs",
                       "kbroker_request_response_queue_time_seconds"),
    "send": ("kafka_network_requestmetrics_responsesendtimems", "ResponseSendTimeMs",
             "kbroker_request_response_send_time_seconds"),
}
REQUESTS_TOTAL = "kafka_network_requestmetrics_requests"


def metric_names():
    """Every family name these collectors can produce (as exposed: counters with ``_total``; summaries and
    histograms by their base name) -- for the monitoring docs' checks."""
    names = [name + "_total" for _, name, _ in TOPIC_METERS + ALL_TOPICS_METERS]
    names.append(REQUESTS_TOTAL + "_total")
    for summary, _, histogram in TIME_METRICS.values():
        names += [summary, summary + "_count", summary + "_sum", histogram + "_bucket", histogram + "_count",
                  histogram + "_sum"]
    names += [n for n, _ in LoopCollector.GAUGES] + [ConnectionCollector.NAME, BrokerStateCollector.STATE,
                                                     BrokerStateCollector.INFO]
    return names


class TopicCollector:
    """Kafka's BrokerTopicMetrics from a BrokerTopicStats (counters: jmx_exporter exposes the meters' Count)."""

    def __init__(self, topic_stats):
        self.stats = topic_stats

    def collect(self):
        stats = self.stats
        topics = sorted(stats.topics.items())
        tick = TimeSlice().tick       # thousands of topics: the loop serves others every 20 ms meanwhile
        for field, name, mbean in TOPIC_METERS:
            fam = CounterMetricFamily(name, "kafka.server:type=BrokerTopicMetrics,name=%s (count)" % mbean,
                                      labels=["topic"])
            fam.add_metric([], getattr(stats.all, field))
            for topic, ts in topics:
                fam.add_metric([topic], getattr(ts, field))
                tick()
            yield fam
        for field, name, mbean in ALL_TOPICS_METERS:
            yield CounterMetricFamily(name, "kafka.server:type=BrokerTopicMetrics,name=%s (count)" % mbean,
                                      value=getattr(stats.all, field))


class RequestCollector:
    """Kafka's RequestMetrics from a RequestStats: requests per (request, version); each interval as a
    summary (Yammer's quantiles, here over the last metrics.num.samples x metrics.sample.window.ms -- 30 to 60 s
    by default --, _count, _sum in ms) and as a kbroker histogram."""

    def __init__(self, request_stats, clock):
        self.stats = request_stats
        self.clock = clock

    def collect(self):
        apis = sorted(self.stats.by_name.items())
        now = self.clock()
        tick = TimeSlice().tick
        fam = CounterMetricFamily(REQUESTS_TOTAL, "kafka.network:type=RequestMetrics,name=RequestsPerSec (count)",
                                  labels=["request", "version"])
        for name, a in apis:
            for version, n in enumerate(a.versions):
                if n:
                    fam.add_metric([name, str(version)], n)
        yield fam
        for t in TIMES:
            summary_name, mbean, histogram_name = TIME_METRICS[t]
            summary = SummaryMetricFamily(summary_name, "kafka.network:type=RequestMetrics,name=%s (ms)" % mbean,
                                          labels=["request"])
            histogram = HistogramMetricFamily(histogram_name, "%s as a Prometheus histogram (seconds)" % mbean,
                                              labels=["request"])
            for name, a in apis:
                tick()
                h = getattr(a, t)
                summary.add_metric([name], h.count, h.sum_ms)
                for label, value in h.quantiles(now):
                    summary.add_sample(summary_name, {"request": name, "quantile": label}, value)
                histogram.add_metric([name], [(floatToGoString(le), n) for le, n in h.cumulative_buckets()],
                                     h.sum_ms / 1000.0)
            yield summary
            yield histogram


class LoopCollector:
    """The event loop's load as Kafka's two idle gauges (one loop does the network and the handlers' work, so
    both are ``1 - busy``) and as ``kbroker_event_loop_busy_ratio``."""

    GAUGES = (("kafka_network_socketserver_networkprocessoravgidlepercent",
               "kafka.network:type=SocketServer,name=NetworkProcessorAvgIdlePercent: 1 - event loop busy fraction"),
              ("kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent",
               "kafka.server:type=KafkaRequestHandlerPool,name=RequestHandlerAvgIdlePercent: 1 - event loop busy "
               "fraction"),
              ("kbroker_event_loop_busy_ratio",
               "CPU time of the event loop's thread over wall time, last metrics.num.samples x "
               "metrics.sample.window.ms (0..1)"))

    def __init__(self, loop_load):
        self.load = loop_load

    def collect(self):
        busy = self.load.busy_fraction()
        for i, (name, doc) in enumerate(self.GAUGES):
            yield GaugeMetricFamily(name, doc, value=busy if i == 2 else 1.0 - busy)


class ConnectionCollector:
    """Open connections per listener (Kafka's socket-server-metrics connection-count; one "network processor",
    the event loop, so networkprocessor="0")."""

    NAME = "kafka_server_socket_server_metrics_connection_count"

    def __init__(self, server):
        """``server``: the KafkaServer, or a callable returning it (None before it exists: no samples)."""
        self.server = server if callable(server) else (lambda: server)

    def collect(self):
        server = self.server()
        if server is None:
            return
        counts = {name: 0 for name, _host, _port in server.listeners}
        for conn in list(server.connections):
            counts[conn.listener] = counts.get(conn.listener, 0) + 1
        fam = GaugeMetricFamily(self.NAME, "kafka.server:type=socket-server-metrics,listener=L,networkProcessor=0 "
                                "connection-count", labels=["listener", "networkprocessor"])
        for listener, n in sorted(counts.items()):
            fam.add_metric([listener, "0"], n)
        yield fam


class BrokerStateCollector:
    """Kafka's BrokerState gauge (``state()``: 1 starting, 3 running, 6 pending controlled shutdown, 7 shutting
    down; kbroker/server/stats.py) and ``kbroker_build_info{version,kernels}`` (1): which build and which byte
    kernels (cython or python) this broker runs."""

    STATE = "kafka_server_kafkaserver_brokerstate"
    INFO = "kbroker_build_info"

    def __init__(self, state):
        self.state = state
        self.labels = [_version(), _kernels()]

    def collect(self):
        yield GaugeMetricFamily(self.STATE, "kafka.server:type=KafkaServer,name=BrokerState (3 = running)",
                                value=self.state())
        info = GaugeMetricFamily(self.INFO, "kbroker version and byte kernels (always 1)",
                                 labels=["version", "kernels"])
        info.add_metric(self.labels, 1)
        yield info


def _version():
    from importlib import metadata
    try:
        return metadata.version("kbroker")
    except metadata.PackageNotFoundError:   # a source tree never installed
        return "unknown"


def _kernels():
    import kbroker._native as native
    return native.IMPL


def server_collectors(stats, server, clock, state=None):
    """The collectors of this module for a broker's BrokerStats and KafkaServer (or a callable returning it);
    ``clock``: monotonic seconds (the histograms' windows); ``state()``: the broker's BrokerState value."""
    out = [TopicCollector(stats.topics), RequestCollector(stats.requests, clock), LoopCollector(stats.loop),
           ConnectionCollector(server)]
    if state is not None:
        out.append(BrokerStateCollector(state))
    return out
