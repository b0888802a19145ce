"""Prometheus metrics and the health endpoints (issue 13): the only package that imports ``prometheus_client``.

The rule (docs/monitoring.md): owners count, the exporter reads. Every counter lives with the object that owns
the state it counts -- plain ints and floats or a small stats object with one writer (``kbroker/server/stats.py``
for requests, topics, the event loop and connections; the replica manager, controller and log manager for
theirs). The hot paths never call into this package. Its collectors (``prometheus_client``'s ``Collector``:
``collect()`` yields ``*MetricFamily``) read those counters when ``/metrics`` is scraped, in a greenlet of the
broker's own event loop, so what they read is consistent without locks.

* ``exporter.py`` -- ``MetricsExporter``: the registry, the collectors, the HTTP endpoint's lifecycle.
* ``http.py`` -- the gevent WSGI server: ``/metrics``, ``/healthz``, ``/readyz``.
* ``requests.py`` -- collectors for the request, topic, event-loop and connection stats (Kafka's RequestMetrics,
  BrokerTopicMetrics, SocketServer and KafkaRequestHandlerPool MBeans, named as jmx_exporter names them).
* ``cluster.py`` -- state collectors: ReplicaManager (partitions, leaders, under-replicated, ISR changes, follower
  lag, purgatories), controller (active count, offline partitions, elections), log flushes, client quota throttles.
* ``groups.py`` -- consumer-group lag on the group's coordinator, with a background cache of other leaders' HWs.
"""
