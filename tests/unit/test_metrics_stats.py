"""kbroker/server/stats.py: the topic counters' rules, the fixed-bucket histograms and their windows, the event
loop's busy fraction, and what the Connection records per request (a real KafkaServer on a socket)."""
import socket
import struct
from types import SimpleNamespace

import gevent
import pytest
from gevent import monkey

from kbroker import errors
from kbroker.protocol.apis import APIS
from kbroker.protocol.headers import encode_request_header
from kbroker.server.router import Handler, Router
from kbroker.server.server import KafkaServer
from kbroker.server.stats import (BOUNDS_MS, WINDOW_S, BrokerStats, BrokerTopicStats, Histogram, LoopLoad,
                                  TopicStats)

_real_socket = monkey.get_original("socket", "socket")


# ------------------------------------------------------------------------------------------------ topic stats

def test_topic_counts_add_to_the_totals_and_deleted_topics_keep_them():
    stats = BrokerTopicStats()
    a, b = stats.topic("a"), stats.topic("b")
    assert stats.topic("a") is a
    a.appended(10, 1000)
    b.appended(3, 300)
    a.fetched(700, follower=False)
    a.fetched(500, follower=True)
    assert (a.messages_in, a.bytes_in, a.total_produce, a.bytes_out, a.replication_bytes_out, a.total_fetch) == \
        (10, 1000, 1, 700, 500, 2)
    assert (stats.all.messages_in, stats.all.bytes_in, stats.all.total_produce) == (13, 1300, 2)
    assert (stats.all.bytes_out, stats.all.replication_bytes_out, stats.all.total_fetch) == (700, 500, 2)
    stats.remove("a")
    assert "a" not in stats.topics and stats.all.messages_in == 13
    assert stats.topic("a").messages_in == 0      # a topic made again starts from zero


@pytest.mark.parametrize("code,failed,rejected", [
    (errors.MESSAGE_TOO_LARGE, 0, 123),            # Kafka's Log marks bytes rejected; an expected error
    (errors.NOT_LEADER_OR_FOLLOWER, 0, 0),
    (errors.UNKNOWN_TOPIC_OR_PARTITION, 0, 0),
    (errors.CORRUPT_MESSAGE, 0, 0),
    (errors.RECORD_LIST_TOO_LARGE, 0, 0),
    (errors.INVALID_TOPIC_EXCEPTION, 0, 0),
    (errors.NOT_ENOUGH_REPLICAS, 1, 0),            # not in Kafka's list of expected append errors
    (errors.INVALID_RECORD, 1, 0),
    (errors.INVALID_TIMESTAMP, 1, 0),
    (errors.OUT_OF_ORDER_SEQUENCE_NUMBER, 1, 0),
    (errors.INVALID_PRODUCER_EPOCH, 1, 0),
])
def test_failed_produce_and_bytes_rejected_rules(code, failed, rejected):
    stats = BrokerTopicStats()
    t = stats.topic("t")
    t.append_failed(code, 123)
    assert (t.total_produce, t.failed_produce, t.bytes_rejected, t.messages_in, t.bytes_in) == \
        (1, failed, rejected, 0, 0)
    assert (stats.all.total_produce, stats.all.failed_produce, stats.all.bytes_rejected) == (1, failed, rejected)


@pytest.mark.parametrize("code,failed", [
    (errors.OFFSET_OUT_OF_RANGE, 0), (errors.NOT_LEADER_OR_FOLLOWER, 0), (errors.FENCED_LEADER_EPOCH, 0),
    (errors.UNKNOWN_LEADER_EPOCH, 0), (errors.UNKNOWN_TOPIC_OR_PARTITION, 0),
    (errors.UNSUPPORTED_COMPRESSION_TYPE, 1), (errors.UNSUPPORTED_VERSION, 1), (errors.UNKNOWN_SERVER_ERROR, 1),
])
def test_failed_fetch_rules(code, failed):
    t = TopicStats(TopicStats())
    t.fetch_failed(code)
    assert (t.total_fetch, t.failed_fetch, t.parent.total_fetch, t.parent.failed_fetch) == (1, failed, 1, failed)


# ------------------------------------------------------------------------------------------------- histograms

def test_histogram_quantiles_within_a_bucket_of_the_truth():
    h = Histogram(now=0.0)
    for ms in range(1, 1001):
        h.record(float(ms), 1.0)
    assert h.count == 1000 and h.sum_ms == 500500.0
    q = dict(h.quantiles(1.0))
    assert set(q) == {"0.50", "0.75", "0.95", "0.98", "0.99", "0.999"}
    for label, true in (("0.50", 500), ("0.75", 750), ("0.95", 950), ("0.99", 990), ("0.999", 999)):
        assert abs(q[label] - true) / true < 0.19, (label, q[label])    # one bucket is 2^(1/4): 19 %


def test_histogram_cumulative_buckets_are_powers_of_two_in_seconds():
    h = Histogram(now=0.0)
    for ms in (0.001, 0.5, 0.5, 3.0, 100000.0):
        h.record(ms, 0.0)
    buckets = h.cumulative_buckets()
    bounds = [le for le, _ in buckets]
    assert bounds[0] == pytest.approx(2 ** -6 / 1000) and bounds[-2] == pytest.approx(65.536)
    assert bounds[-1] == float("inf") and len(buckets) == 24
    counts = dict(buckets)
    assert counts[2 ** -6 / 1000] == 1          # 1 us
    assert counts[0.0005] == 3                  # <= 0.5 ms
    assert counts[0.004] == 4                   # <= 4 ms
    assert counts[65.536] == 4 and counts[float("inf")] == 5       # 100 s overflows
    assert [c for _, c in buckets] == sorted(c for _, c in buckets)


def test_quantiles_describe_the_last_one_or_two_windows():
    h = Histogram(now=0.0)
    h.record(1.0, 0.0)
    h.record(1000.0, WINDOW_S + 1)          # the first window becomes the previous one
    q = dict(h.quantiles(WINDOW_S + 1))
    assert q["0.50"] <= 1.0 and q["0.999"] > 800
    q = dict(h.quantiles(2 * WINDOW_S + 1))  # the 1 ms sample's window is gone
    assert q["0.50"] > 800
    assert dict(h.quantiles(10 * WINDOW_S))["0.99"] == 0.0       # idle: nothing recent
    assert h.count == 2                                           # the cumulative counts keep everything


def test_more_samples_keep_more_windows_and_the_keys_set_them():
    h = Histogram(now=0.0, window_s=10.0, samples=3)
    h.record(1.0, 0.0)
    h.record(2.0, 15.0)
    h.record(3.0, 25.0)
    assert sum(c for c in h.current) == 1 and len(h.older) == 2
    assert dict(h.quantiles(29.0))["0.50"] <= 2.0          # all three windows still count
    assert dict(h.quantiles(31.0))["0.50"] > 1.0           # the first one has gone
    h.record(4.0, 55.0)            # the window [50, 60): [30, 40) and [40, 50) kept, both empty
    assert [sum(w) for w in h.older] == [0, 0] and sum(h.current) == 1
    assert dict(h.quantiles(55.0))["0.50"] > 3.0
    stats = BrokerStats.from_config({"metrics.sample.window.ms": 5000, "metrics.num.samples": 4})
    assert stats.requests.api(0).total.window_s == 5.0 and stats.requests.api(0).total.older.maxlen == 3
    assert stats.loop.span_s == 20.0


def test_overflow_bucket_answers_its_lower_bound():
    h = Histogram(now=0.0)
    h.record(10 ** 6, 0.0)
    assert dict(h.quantiles(0.0))["0.50"] == BOUNDS_MS[-1]


# ------------------------------------------------------------------------------------------------ event loop

def test_loop_busy_fraction_over_the_recent_span():
    now, cpu = [0.0], [0.0]
    load = LoopLoad(span_s=60.0, clock=lambda: now[0], cpu=lambda: cpu[0])
    now[0], cpu[0] = 10.0, 2.5
    assert load.busy_fraction() == pytest.approx(0.25)
    now[0], cpu[0] = 70.0, 2.5 + 6.0          # the last 60 s: 6 s of CPU; the first sample drops out
    assert load.busy_fraction() == pytest.approx(6.0 / 60.0)
    now[0], cpu[0] = 71.0, 8.5 + 2.0          # the window now starts at 10 s (the sample kept for it)
    assert load.busy_fraction() == pytest.approx((10.5 - 2.5) / 61.0)


# ------------------------------------------------------------------------------------ the Connection records

def _frame(corr, api_key, version, body=b""):
    payload = bytes(encode_request_header(APIS[api_key].request_header_version(version), api_key, version, corr,
                                          "t")) + body
    return struct.pack(">i", len(payload)) + payload


def _exchange(port, data, responses):
    def run():
        s = _real_socket()
        s.settimeout(5.0)
        s.connect(("127.0.0.1", port))
        s.sendall(data)
        got, n = b"", 0
        while n < responses:
            got += s.recv(65536)
            n, pos = 0, 0
            while pos + 4 <= len(got) and pos + 4 + struct.unpack_from(">i", got, pos)[0] <= len(got):
                pos += 4 + struct.unpack_from(">i", got, pos)[0]
                n += 1
        s.close()
    gevent.get_hub().threadpool.apply(run)


def test_connection_counts_requests_and_records_their_times():
    """Pipelined: ApiVersions v0, a Metadata v1 whose (stand-in) handler parks 0.2 s, two ApiVersions v3. Each is
    counted under its API and version once answered; the parked time is Metadata's remote time, not local; the
    requests behind it are timed from when the connection could take them (the end of the Metadata), so none of
    them carries the 0.2 s."""
    from kbroker.handlers import registry

    def parked_metadata(ctx, req):
        gevent.sleep(0.2)
        ctx.parked_s += 0.2
        return {"brokers": [], "controller_id": -1, "topics": []}

    handlers = dict(registry())
    handlers[3] = Handler(APIS[3], 0, 12, parked_metadata)
    stats = BrokerStats()
    srv = KafkaServer(services=SimpleNamespace(stats=stats, quotas=None), router=Router(handlers),
                      listeners=[("PLAINTEXT", "127.0.0.1", 0)], max_request_size=1 << 20)
    srv.start()
    try:
        port = srv.bound_ports()["PLAINTEXT"]
        av3 = APIS[18].encode_request(3, {"client_software_name": "t", "client_software_version": "1"}).getvalue()
        md1 = APIS[3].encode_request(1, {"topics": []}).getvalue()
        _exchange(port, _frame(1, 18, 0) + _frame(2, 3, 1, md1) + _frame(3, 18, 3, av3) + _frame(4, 18, 3, av3), 4)
        gevent.sleep(0.05)
    finally:
        srv.stop(grace_seconds=1)
    requests = stats.requests
    assert requests.by_name["ApiVersions"].versions == [1, 0, 0, 2]
    md = requests.by_name["Metadata"]
    assert md.versions == [0, 1] and md.total.count == md.remote.count == md.local.count == md.send.count == 1
    assert md.remote.sum_ms == pytest.approx(200.0)
    assert md.local.sum_ms < 50 and md.total.sum_ms >= 200.0
    assert md.total.sum_ms == pytest.approx(md.queue.sum_ms + md.local.sum_ms + md.remote.sum_ms
                                            + md.response_queue.sum_ms + md.send.sum_ms, abs=1.0)
    assert md.response_queue.count == 1
    av = requests.by_name["ApiVersions"]
    assert av.total.count == 3 and av.remote.sum_ms == 0.0 and av.throttle.sum_ms == 0.0
    assert av.total.sum_ms < 100.0
