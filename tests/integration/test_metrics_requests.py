"""The metrics endpoint of one broker (issue 13): /healthz and /readyz through starting, ready and shutting down;
exact BrokerTopicMetrics after a known produce and consume with real clients (librdkafka) and with raw requests
for the failure cases; RequestMetrics per API and version; request times; connections per listener.

One broker on a one-node ZooKeeper ensemble, shared by the module (the tests run in file order). The ensemble is
started only after the broker: while the broker waits for ZooKeeper it is "starting" -- /healthz answers 200,
/readyz 503 -- a state that lasts as long as the test wants, which is what makes the transition observable.

Exact bytes: the broker stores a producer's v2 batches as they arrived (no compression, no conversion), so the
bytes in of a topic equal the size of its partitions' .log files, and a consumer that reads every record once
(one fetch per partition: a few KiB against librdkafka's 1 MiB partition limit) is sent those bytes again.
"""
import gc
import http.client
import os
import signal
import socket
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from kbroker.client.connection import BrokerConnection
from kbroker.protocol.apis import APIS
from kbroker.record.batch import Record, build_batch

from . import harness
from .harness import BrokerProcess, ZkEnsemble, free_port, wait_until

N = 300
VALUE = b"v" * 100


def http_get(port, path):
    """(status, body text) of GET ``path``; raises OSError when nothing listens."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


def scrape(port):
    """{(sample name, sorted label items): value} of one /metrics scrape."""
    status, text = http_get(port, "/metrics")
    assert status == 200
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def val(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def quiet(broker):
    """Wait until no Kafka connection is open: a closed client's last request (a long-poll Fetch librdkafka
    left behind) has been answered and counted, so the deltas that follow are this test's alone."""
    wait_until(lambda: val(scrape(broker.metrics_port), "kafka_server_socket_server_metrics_connection_count",
                           listener="PLAINTEXT", networkprocessor="0") == 0, 10, 0.05, "no open connections")


def topic(samples, meter, name=None):
    """A BrokerTopicMetrics counter: for topic ``name``, or all topics."""
    full = "kafka_server_brokertopicmetrics_%s_total" % meter
    return val(samples, full, topic=name) if name is not None else val(samples, full)


def log_bytes(broker, name):
    """Bytes in the .log segments of topic ``name``'s partitions on ``broker``."""
    total = 0
    for d in os.listdir(broker.log_dir):
        if d.rsplit("-", 1)[0] == name:
            total += sum(os.path.getsize(os.path.join(broker.log_dir, d, f))
                         for f in os.listdir(os.path.join(broker.log_dir, d)) if f.endswith(".log"))
    return total


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    if harness.zookeeper_classpath() is None or not harness.shutil.which("java"):
        harness.skip_or_fail("Debian's zookeeper package / java not installed (run scripts/setup.sh)")
    zk = ZkEnsemble(tmp_path_factory.mktemp("zk"), n=1)
    port = free_port()
    b = BrokerProcess(tmp_path_factory.mktemp("metrics_broker"), zk=zk, overrides={
        "metrics.http.port": port, "metrics.http.host": "127.0.0.1",
        "zookeeper.connection.timeout.ms": 60000, "offsets.topic.replication.factor": 1,
        "offsets.topic.num.partitions": 2, "group.initial.rebalance.delay.ms": 0,
        # One attempt, then the drain: a shutdown /readyz must answer 503 through from its first moment.
        "controlled.shutdown.max.retries": 1, "controlled.shutdown.retry.backoff.ms": 2000})
    b.metrics_port = port
    b.starting = None
    try:
        b.start(wait=False)
        # Starting: the process serves /healthz while it waits for ZooKeeper; /readyz says why it is not ready.
        wait_until(lambda: http_get(port, "/healthz") == (200, "ok\n"), 30, 0.1, "/healthz while starting",
                   ignore=(OSError,))
        b.starting = http_get(port, "/readyz")
        b.starting_state = val(scrape(port), "kafka_server_kafkaserver_brokerstate")
        zk.start()
        b.wait_ready(60)
        wait_until(lambda: http_get(port, "/readyz")[0] == 200, 30, 0.1, "/readyz 200 once started")
        yield b
    finally:
        b.close()
        zk.close()


def test_readyz_is_503_while_starting_then_200(broker):
    status, body = broker.starting
    assert status == 503
    assert body.splitlines()[:4] == ["starting", "not registered", "controller unknown",
                                     "no metadata from the controller yet"]
    assert http_get(broker.metrics_port, "/readyz") == (200, "ready\n")
    assert http_get(broker.metrics_port, "/healthz") == (200, "ok\n")
    assert http_get(broker.metrics_port, "/nothing")[0] == 404
    # Kafka's BrokerState: 1 = Starting, 3 = RunningAsBroker
    assert broker.starting_state == 1
    assert val(scrape(broker.metrics_port), "kafka_server_kafkaserver_brokerstate") == 3


def test_messages_and_bytes_exact_after_produce_and_consume(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("m1", 2, 1)])["m1"].result(30)
    before = scrape(broker.metrics_port)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "compression.type": "none"})
    failed = []
    for i in range(N):
        p.produce("m1", VALUE, key=b"k%d" % i, partition=i % 2,
                  on_delivery=lambda err, _msg: err is not None and failed.append(err))
    assert p.flush(30) == 0 and failed == []
    del p, admin            # librdkafka closes a client's connections when it is destroyed
    gc.collect()
    stored = log_bytes(broker, "m1")
    after_produce = scrape(broker.metrics_port)
    assert topic(after_produce, "messagesin", "m1") == N
    assert topic(after_produce, "bytesin", "m1") == stored
    assert topic(after_produce, "messagesin") - topic(before, "messagesin") == N
    assert topic(after_produce, "bytesin") - topic(before, "bytesin") == stored
    assert topic(after_produce, "failedproducerequests", "m1") == 0
    assert topic(after_produce, "totalproducerequests", "m1") >= 2        # one entry per partition at least
    assert topic(after_produce, "bytesout", "m1") == 0

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "metrics-g", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe(["m1"])
    got, deadline = 0, time.monotonic() + 30
    while got < N and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got += 1
    c.close()
    assert got == N
    after = scrape(broker.metrics_port)
    assert topic(after, "bytesout", "m1") == stored
    assert topic(after, "bytesout") - topic(before, "bytesout") == stored
    assert topic(after, "failedfetchrequests", "m1") == 0
    assert topic(after, "totalfetchrequests", "m1") >= 2
    assert topic(after, "replicationbytesout") == 0         # no followers
    # A Fetch counts under Fetch and FetchConsumer, both per version.
    fetch = sum(v for (n, labels), v in after.items()
                if n == "kafka_network_requestmetrics_requests_total" and ("request", "Fetch") in labels)
    consumer = sum(v for (n, labels), v in after.items()
                   if n == "kafka_network_requestmetrics_requests_total" and ("request", "FetchConsumer") in labels)
    assert fetch == consumer >= 1


def test_rejected_failed_and_request_counts_exact(broker):
    """Raw requests whose answers are known: MESSAGE_TOO_LARGE (bytes rejected, not a failed request),
    NOT_ENOUGH_REPLICAS (a failed produce request), an append, an unknown topic (totals only); each Produce v9
    and the connection's ApiVersions v0 counted once."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("m2", 1, 1, config={"max.message.bytes": "1000",
                                                       "min.insync.replicas": "2"})])["m2"].result(30)
    del admin
    gc.collect()
    ts = int(time.time() * 1000)
    big = build_batch([Record(0, ts, None, b"b" * 1500)])
    small = build_batch([Record(i, ts, None, b"s%d" % i) for i in range(3)])
    quiet(broker)
    before = scrape(broker.metrics_port)

    def produce(conn, name, batch, acks):
        resp = conn.request(0, {"transactional_id": None, "acks": acks, "timeout_ms": 5000, "topic_data": [
            {"name": name, "partition_data": [{"index": 0, "records": batch}]}]}, version=9)
        return resp["responses"][0]["partition_responses"][0]["error_code"]

    with BrokerConnection(broker.host, broker.port) as conn:
        assert produce(conn, "m2", big, 1) == 10          # MESSAGE_TOO_LARGE
        assert produce(conn, "m2", small, -1) == 19       # NOT_ENOUGH_REPLICAS (ISR 1 < min.insync.replicas 2)
        assert produce(conn, "m2", small, 1) == 0
        assert produce(conn, "no-such-topic-m9", small, 1) == 3
    after = scrape(broker.metrics_port)
    assert topic(after, "bytesrejected", "m2") == len(big)
    assert topic(after, "bytesrejected") - topic(before, "bytesrejected") == len(big)
    assert topic(after, "failedproducerequests", "m2") == 1
    assert topic(after, "failedproducerequests") - topic(before, "failedproducerequests") == 1
    assert topic(after, "totalproducerequests", "m2") == 3
    assert topic(after, "totalproducerequests") - topic(before, "totalproducerequests") == 4
    assert topic(after, "messagesin", "m2") == 3 and topic(after, "bytesin", "m2") == len(small)
    assert not any(("topic", "no-such-topic-m9") in labels for _, labels in after)   # no per-topic entry
    req = "kafka_network_requestmetrics_requests_total"
    assert val(after, req, request="Produce", version="9") - val(before, req, request="Produce", version="9") == 4
    assert val(after, req, request="ApiVersions", version="0") - \
        val(before, req, request="ApiVersions", version="0") == 1
    # Every counted request has its times: the summaries' and histograms' counts follow the request count.
    produced = sum(v for (n, labels), v in after.items() if n == req and ("request", "Produce") in labels)
    for name in ("totaltimems", "requestqueuetimems", "localtimems", "remotetimems", "throttletimems",
                 "responsequeuetimems", "responsesendtimems"):
        assert val(after, "kafka_network_requestmetrics_%s_count" % name, request="Produce") == produced
        quantiles = {dict(labels)["quantile"] for (n, labels), _ in after.items()
                     if n == "kafka_network_requestmetrics_" + name and ("request", "Produce") in labels}
        assert quantiles == {"0.50", "0.75", "0.95", "0.98", "0.99", "0.999"}
    assert val(after, "kbroker_request_total_time_seconds_count", request="Produce") == produced
    assert val(after, "kbroker_request_total_time_seconds_bucket", request="Produce", le="+Inf") == produced


def test_long_poll_fetch_is_remote_time(broker):
    """A Fetch parked for its max_wait_ms: the wait is remote time (Kafka's purgatory), not local time."""
    quiet(broker)
    before = scrape(broker.metrics_port)
    with BrokerConnection(broker.host, broker.port) as conn:
        hw = conn.request(2, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "m2", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]},
            version=5)["topics"][0]["partitions"][0]["offset"]
        started = time.monotonic()
        resp = conn.request(1, {"replica_id": -1, "max_wait_ms": 400, "min_bytes": 1, "max_bytes": 1 << 20,
                                "isolation_level": 0, "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [],
                                "rack_id": "", "topics": [{"topic": "m2", "partitions": [
                                    {"partition": 0, "current_leader_epoch": -1, "fetch_offset": hw,
                                     "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}, version=11)
        waited = time.monotonic() - started
    assert resp["responses"][0]["partitions"][0]["error_code"] == 0 and waited >= 0.38
    after = scrape(broker.metrics_port)

    def delta(name, **labels):
        return val(after, name, **labels) - val(before, name, **labels)

    assert delta("kafka_network_requestmetrics_requests_total", request="FetchConsumer", version="11") == 1
    assert delta("kafka_network_requestmetrics_remotetimems_count", request="FetchConsumer") == 1
    assert 380 <= delta("kafka_network_requestmetrics_remotetimems_sum", request="FetchConsumer") <= waited * 1000
    assert delta("kafka_network_requestmetrics_localtimems_sum", request="FetchConsumer") < 100
    assert 0.38 <= delta("kbroker_request_remote_time_seconds_sum", request="FetchConsumer") <= waited
    assert delta("kafka_network_requestmetrics_totaltimems_sum", request="FetchConsumer") >= 380
    assert topic(after, "failedfetchrequests", "m2") == 0


def test_connections_per_listener_and_loop_idle(broker):
    name = "kafka_server_socket_server_metrics_connection_count"

    def count():
        return val(scrape(broker.metrics_port), name, listener="PLAINTEXT", networkprocessor="0")

    quiet(broker)
    base = count()
    assert base == 0
    conns = [BrokerConnection(broker.host, broker.port) for _ in range(3)]
    try:
        assert count() == base + 3     # each answered its ApiVersions: registered with the server
    finally:
        for c in conns:
            c.close()
    wait_until(lambda: count() == base, 10, 0.05, "connection count back to %d" % base)
    samples = scrape(broker.metrics_port)
    idle = val(samples, "kafka_network_socketserver_networkprocessoravgidlepercent")
    busy = val(samples, "kbroker_event_loop_busy_ratio")
    assert 0.0 < idle <= 1.0 and abs(idle + busy - 1.0) < 1e-9
    assert val(samples, "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent") == idle
    assert val(samples, "process_open_fds") > 0       # prometheus_client's process collector


def test_shutting_down_readyz_503_while_healthz_200(broker):
    """SIGTERM with a client that asked for 12 MB and reads nothing: the broker's shutdown waits (up to its 10 s
    grace) for that response to be written, a window in which /readyz must answer 503 "shutting down", /healthz 200
    and BrokerState 7; once the client goes, the broker exits and the endpoint with it."""
    port = broker.metrics_port
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("big", 1, 1)])["big"].result(30)
    del admin
    gc.collect()
    ts = int(time.time() * 1000)
    with BrokerConnection(broker.host, broker.port) as conn:
        for _ in range(12):
            resp = conn.request(0, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
                {"name": "big", "partition_data": [{"index": 0, "records": build_batch(
                    [Record(0, ts, None, b"x" * 1000000)])}]}]}, version=9)
            assert resp["responses"][0]["partition_responses"][0]["error_code"] == 0
    # more than the broker's send buffer (net.ipv4.tcp_wmem max, 4 MiB) and this 4 KiB receive buffer hold
    fetch = APIS[1].encode_request(11, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 64 << 20,
                                        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                                        "forgotten_topics_data": [], "rack_id": "", "topics": [
                                            {"topic": "big", "partitions": [
                                                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                                 "log_start_offset": -1, "partition_max_bytes": 64 << 20}]}]})
    stuck = socket.socket()
    stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stuck.connect((broker.host, broker.port))
    try:
        stuck.sendall(harness.encode_request(1, 11, 1, fetch.getvalue()))
        # the handler has counted it (before its answer is written, which never completes)
        wait_until(lambda: topic(scrape(port), "totalfetchrequests", "big") == 1, 5, 0.05, "the 12 MB fetch read")
        broker.proc.send_signal(signal.SIGTERM)

        def shutting_down():
            return (http_get(port, "/readyz") == (503, "shutting down\n")
                    and http_get(port, "/healthz") == (200, "ok\n"))

        wait_until(shutting_down, 10, 0.02, "/readyz 503 'shutting down' while /healthz 200", ignore=(OSError,))
        # Kafka's BrokerShuttingDown (7) once the controlled shutdown and the drain are over; still serving
        wait_until(lambda: val(scrape(port), "kafka_server_kafkaserver_brokerstate") == 7, 8, 0.05,
                   "BrokerState 7 while the shutdown waits for the stuck response")
        assert http_get(port, "/healthz") == (200, "ok\n") and broker.running
    finally:
        stuck.close()
    assert broker.proc.wait(30) == 0
    with pytest.raises(OSError):          # the endpoint is gone with the process
        http_get(port, "/healthz")

