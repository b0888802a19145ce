"""kbroker/metrics: the exporter's HTTP endpoint (/metrics, /healthz, /readyz on the gevent loop), its lifecycle
and key handling, and the request/topic collectors' exact names (jmx_exporter's Kafka rules) and values."""
from types import SimpleNamespace

import gevent
import pytest
from gevent import socket
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.parser import text_string_to_metric_families

from kbroker.config import ConfigError
from kbroker.metrics.exporter import MetricsExporter
from kbroker.metrics.requests import ConnectionCollector, metric_names, server_collectors
from kbroker.server.stats import BrokerStats


def get(port, path):
    """(status, body) of an HTTP/1.0 GET through gevent's socket (the server runs on this loop)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        s.sendall(b"GET %s HTTP/1.0\r\nHost: x\r\n\r\n" % path.encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode()


def samples(text):
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


class Fixed:
    def __init__(self, value):
        self.value = value

    def collect(self):
        yield GaugeMetricFamily("test_fixed", "a test gauge", value=self.value)


def test_endpoint_health_readiness_and_collectors_added_later():
    reasons = ["starting", "not registered"]
    e = MetricsExporter({"metrics.http.port": 0, "metrics.http.host": "127.0.0.1"},
                        readiness=lambda: list(reasons)).start()
    try:
        port = e.port
        assert get(port, "/healthz") == (200, "ok\n")
        assert get(port, "/readyz") == (503, "starting\nnot registered\n")
        reasons.clear()
        assert get(port, "/readyz") == (200, "ready\n")
        e.add_collector(Fixed(7))
        status, text = get(port, "/metrics")
        assert status == 200 and samples(text)[("test_fixed", ())] == 7
        assert ("process_open_fds", ()) in samples(text)
        assert get(port, "/other")[0] == 404
    finally:
        e.stop()
    with pytest.raises(OSError):
        get(port, "/healthz")


def test_a_failing_readiness_check_is_not_ready():
    def broken():
        raise RuntimeError("boom")

    e = MetricsExporter({"metrics.http.port": 0, "metrics.http.host": "127.0.0.1"}, readiness=broken).start()
    try:
        status, body = get(e.port, "/readyz")
        assert status == 503 and body.startswith("readiness check failed: RuntimeError('boom')")
        assert get(e.port, "/healthz") == (200, "ok\n")
    finally:
        e.stop()


def test_disabled_by_default_and_a_busy_port_names_the_key():
    e = MetricsExporter({}).start()
    assert not e.enabled and e.port is None
    e.stop()
    first = MetricsExporter({"metrics.http.port": 0, "metrics.http.host": "127.0.0.1"}).start()
    try:
        with pytest.raises(ConfigError, match="metrics.http.port=%d: cannot listen" % first.port):
            MetricsExporter({"metrics.http.port": first.port, "metrics.http.host": "127.0.0.1"}).start()
    finally:
        first.stop()


def _stats():
    stats = BrokerStats()
    t = stats.topics.topic("orders")
    t.appended(5, 500)
    t.append_failed(10, 2000)
    t.fetched(400, follower=False)
    t.fetched(300, follower=True)
    stats.topics.all.append_failed(3, 0)            # an unknown topic: totals only
    produce = stats.requests.api(0)
    for ms in (1.0, 2.0, 4.0):
        produce.record(9, 0.0, ms, 0.1, ms / 2, 0.0, 0.0, 0.05, 0.2)
    produce.record(7, 0.0, 8.0, 0.1, 4.0, 0.0, 0.0, 0.05, 0.2)
    stats.requests.named("FetchConsumer").record(12, 0.0, 500.0, 0.1, 1.0, 498.0, 0.0, 0.1, 0.5)
    return stats


def test_collectors_exact_names_labels_and_values():
    server = SimpleNamespace(listeners=[("PLAINTEXT", "127.0.0.1", 9092), ("REPLICATION", "127.0.0.1", 9093)],
                             connections=[SimpleNamespace(listener="PLAINTEXT"), SimpleNamespace(listener="PLAINTEXT")])
    e = MetricsExporter({}, server_collectors(_stats(), lambda: server, lambda: 1.0))
    s = samples(e.scrape().decode())
    assert s[("kafka_server_brokertopicmetrics_messagesin_total", ())] == 5
    assert s[("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "orders"),))] == 5
    assert s[("kafka_server_brokertopicmetrics_bytesin_total", (("topic", "orders"),))] == 500
    assert s[("kafka_server_brokertopicmetrics_bytesrejected_total", (("topic", "orders"),))] == 2000
    assert s[("kafka_server_brokertopicmetrics_bytesout_total", (("topic", "orders"),))] == 400
    assert s[("kafka_server_brokertopicmetrics_replicationbytesout_total", ())] == 300
    assert s[("kafka_server_brokertopicmetrics_totalproducerequests_total", ())] == 3
    assert s[("kafka_server_brokertopicmetrics_totalproducerequests_total", (("topic", "orders"),))] == 2
    assert s[("kafka_server_brokertopicmetrics_totalfetchrequests_total", (("topic", "orders"),))] == 2
    assert s[("kafka_server_brokertopicmetrics_failedproducerequests_total", ())] == 0
    assert s[("kafka_network_requestmetrics_requests_total", (("request", "Produce"), ("version", "9")))] == 3
    assert s[("kafka_network_requestmetrics_requests_total", (("request", "Produce"), ("version", "7")))] == 1
    assert ("kafka_network_requestmetrics_requests_total", (("request", "Produce"), ("version", "8"))) not in s
    assert s[("kafka_network_requestmetrics_totaltimems_count", (("request", "Produce"),))] == 4
    assert s[("kafka_network_requestmetrics_totaltimems_sum", (("request", "Produce"),))] == 15.0
    p50 = s[("kafka_network_requestmetrics_totaltimems", (("quantile", "0.50"), ("request", "Produce")))]
    assert 1.6 < p50 <= 2.0           # the 2nd of 4 samples, inside the bucket (1.68, 2.0]
    assert s[("kafka_network_requestmetrics_remotetimems_sum", (("request", "FetchConsumer"),))] == 498.0
    assert s[("kafka_network_requestmetrics_responsequeuetimems_sum", (("request", "Produce"),))] == 0.2
    assert s[("kafka_network_requestmetrics_responsesendtimems_count", (("request", "FetchConsumer"),))] == 1
    assert s[("kbroker_request_total_time_seconds_bucket", (("le", "0.001"), ("request", "Produce")))] == 1
    assert s[("kbroker_request_total_time_seconds_bucket", (("le", "0.004"), ("request", "Produce")))] == 3
    assert s[("kbroker_request_total_time_seconds_bucket", (("le", "+Inf"), ("request", "Produce")))] == 4
    assert s[("kbroker_request_total_time_seconds_sum", (("request", "Produce"),))] == pytest.approx(0.015)
    conn = "kafka_server_socket_server_metrics_connection_count"
    assert s[(conn, (("listener", "PLAINTEXT"), ("networkprocessor", "0")))] == 2
    assert s[(conn, (("listener", "REPLICATION"), ("networkprocessor", "0")))] == 0
    idle = s[("kafka_network_socketserver_networkprocessoravgidlepercent", ())]
    assert 0.0 <= idle <= 1.0
    assert idle == s[("kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent", ())]
    assert idle + s[("kbroker_event_loop_busy_ratio", ())] == pytest.approx(1.0)
    # metric_names() declares every kafka_/kbroker_ sample name the collectors produce (the docs' checks use it).
    produced = {name for name, _ in s if name.startswith(("kafka_", "kbroker_"))}
    assert produced <= set(metric_names())


def test_broker_state_and_build_info():
    state = [1]
    e = MetricsExporter({}, server_collectors(_stats(), lambda: None, lambda: 1.0, lambda: state[0]))
    s = samples(e.scrape().decode())
    assert s[("kafka_server_kafkaserver_brokerstate", ())] == 1
    state[0] = 3
    s = samples(e.scrape().decode())
    assert s[("kafka_server_kafkaserver_brokerstate", ())] == 3
    import kbroker._native as native
    [(labels, value)] = [(dict(labels), v) for (n, labels), v in s.items() if n == "kbroker_build_info"]
    assert value == 1 and labels["kernels"] == native.IMPL and labels["version"]
    assert {"kafka_server_kafkaserver_brokerstate", "kbroker_build_info"} <= set(metric_names())


def test_connection_collector_before_the_server_exists():
    assert list(ConnectionCollector(lambda: None).collect()) == []


def test_a_scrape_runs_on_the_loop_without_blocking_it():
    """The endpoint is served by a greenlet: other greenlets keep running while a client holds a scrape open."""
    e = MetricsExporter({"metrics.http.port": 0, "metrics.http.host": "127.0.0.1"},
                        server_collectors(_stats(), lambda: None, lambda: 1.0)).start()
    try:
        s = socket.create_connection(("127.0.0.1", e.port))
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")      # headers never finished
        ticks = []
        g = gevent.spawn(lambda: [ticks.append(gevent.sleep(0.01)) for _ in range(5)])
        g.join(2)
        assert len(ticks) == 5
        s.close()
    finally:
        e.stop()


def test_a_silent_http_client_is_dropped_and_cannot_starve_the_endpoint(monkeypatch):
    from kbroker.metrics import http
    monkeypatch.setattr(http, "IDLE_S", 0.3)
    monkeypatch.setattr(http, "MAX_CONNECTIONS", 2)
    e = MetricsExporter({"metrics.http.port": 0, "metrics.http.host": "127.0.0.1"}).start()
    try:
        idle = [socket.create_connection(("127.0.0.1", e.port)) for _ in range(2)]   # the whole pool, silent
        for s in idle:
            s.sendall(b"GET /healthz HTTP/1.1\r\n")
        with gevent.Timeout(3):
            assert get(e.port, "/healthz") == (200, "ok\n")     # served once the silent ones time out
            for s in idle:
                assert s.recv(100).startswith(b"HTTP/1.1 40")    # 400 or 408: timed out, closed
        for s in idle:
            s.close()
    finally:
        e.stop()
