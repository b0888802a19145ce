"""``MetricsExporter``: the broker's Prometheus registry and its HTTP endpoint.

Built by the broker before anything else starts (so ``/healthz`` answers and ``/readyz`` says "starting" while the
coordination backend connects and the logs load); collectors are added as their owners come to exist
(``add_collector``); ``stop()`` is the last step of shutdown, so ``/readyz`` answers 503 for the whole of it while
``/healthz`` still answers 200.

Keys: ``metrics.http.port`` (-1, Kafka's JMX-off default: no endpoint; the shipped config/server.properties sets
9404, the port jmx_exporter's Java agent is usually given) and ``metrics.http.host`` ("" = every interface, as
Kafka's JMX port and jmx_exporter's agent bind; set 127.0.0.1 to keep it on the machine). A port that cannot be
bound stops startup with an error naming the key.

Besides the collectors added, the registry carries prometheus_client's process collector (``process_cpu_seconds_
total``, ``process_resident_memory_bytes``, ``process_open_fds``...), its platform and gc collectors: what the JVM's
own MBeans give Kafka operators.
"""
import logging

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

log = logging.getLogger(__name__)

PORT_KEY = "metrics.http.port"
HOST_KEY = "metrics.http.host"


def _not_ready():
    return ["starting"]


class MetricsExporter:
    """The registry and the endpoint. ``cfg``: the BrokerConfig (or any mapping with ``get``); ``collectors``:
    prometheus_client collectors (objects with ``collect()``); ``readiness()``: the list of reasons the broker is
    not ready (empty = ready) -- ``/readyz`` answers 200 for an empty list, else 503 naming them."""

    def __init__(self, cfg, collectors=(), readiness=None):
        self.host = cfg.get(HOST_KEY, "") or ""
        self.requested_port = cfg.get(PORT_KEY, -1)
        self.readiness = readiness or _not_ready
        # auto_describe=False: registering never calls collect() -- a collector may be added before the state it
        # reads exists (and names are not checked twice: the collectors' names are fixed in code).
        self.registry = CollectorRegistry(auto_describe=False)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self._collectors = []
        self._server = None
        for c in collectors:
            self.add_collector(c)

    @property
    def enabled(self):
        """The endpoint is configured (metrics.http.port >= 0; 0 picks a free port, for tests)."""
        return self.requested_port is not None and self.requested_port >= 0

    @property
    def port(self):
        """The bound port once started (None before, and when disabled)."""
        return self._server.port if self._server is not None else None

    def add_collector(self, collector):
        """Add a collector (``collect()`` yielding ``*MetricFamily``); it is read at every scrape from then on."""
        self.registry.register(collector)
        self._collectors.append(collector)
        return collector

    def remove_collector(self, collector):
        if collector in self._collectors:
            self._collectors.remove(collector)
            self.registry.unregister(collector)

    def scrape(self):
        """The exposition text of every collector, as ``/metrics`` serves it (bytes)."""
        return generate_latest(self.registry)

    def start(self):
        """Open the endpoint when configured; raises ConfigError naming metrics.http.port if it cannot bind."""
        if not self.enabled or self._server is not None:
            return self
        from kbroker.metrics.http import MetricsHttpServer
        from kbroker.config import ConfigError
        try:
            self._server = MetricsHttpServer(self.host, self.requested_port, self.registry,
                                             lambda: self.readiness()).start()
        except OSError as e:
            raise ConfigError("%s=%d: cannot listen on %s:%d: %s" % (
                PORT_KEY, self.requested_port, self.host or "0.0.0.0", self.requested_port, e)) from e
        log.info("metrics endpoint on http://%s:%d/metrics (/healthz, /readyz)", self.host or "0.0.0.0",
                 self._server.port)
        return self

    def stop(self):
        if self._server is not None:
            self._server.stop()
            self._server = None
