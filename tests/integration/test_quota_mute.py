"""KIP-219 end to end (issue 12): a raw-protocol producer that ignores throttle_time_ms and pipelines Produce
requests as fast as its socket takes them is still held to its client-id's producer_byte_rate, because the
broker stops reading from its connection for each throttle.

The quota: producer_byte_rate=262144 (256 KiB/s) for client id ``raw``, set with AlterClientQuotas (49), over
``quota.window.num=2`` x 1 s windows. Each request carries one v2 batch of 16 KiB (16 requests/s at the quota).
With two windows Kafka's sampled rate lets a muted client through in a 2-window cycle: when a window starts, the
oldest is forgotten and about 2 windows' worth (512 KiB) is accepted at once, then nothing until the next one
starts but one (the rate is over 1-2 s of history). So the measurement spans whole cycles: the batch bytes of the
responses that arrive in 6 s (3 cycles), after a 2 s warm-up (the first cycle: the padded first window).

Tolerance +-10 %: per cycle the broker accepts the bound's 512 KiB plus the one request that crosses it
(16 KiB, +3 %; measured: 271524 B/s = +3.6 %, the same in every run), and a cycle can stretch by the time a
muted client takes to send its next request (ms). A client that is not muted runs at tens of MiB/s here (measured
48 MB/s with the mute disabled), far outside it.
"""
import socket
import threading
import time

import pytest

from kbroker.protocol.apis import APIS
from kbroker.record import Record, build_batch
from tests.integration.harness import BrokerProcess, encode_request, read_response, wait_until

QUOTA = 262144
VALUE = 16 * 1024
WARMUP_S, MEASURE_S = 2.0, 6.0


def _call(sock, api_key, version, corr, body, client_id="admin"):
    api = APIS[api_key]
    sock.sendall(encode_request(api_key, version, corr, api.encode_request(version, body).getvalue(), client_id,
                                api.request_header_version(version)))
    got, rest = read_response(sock)
    assert got == corr
    return api.decode_response(version, rest, 1 if api.response_header_version(version) >= 1 else 0)


@pytest.fixture
def broker(tmp_path):
    b = BrokerProcess(tmp_path, overrides={"quota.window.num": 2, "quota.window.size.seconds": 1}).start()
    try:
        yield b
    finally:
        b.close()


def test_a_client_ignoring_throttle_times_is_held_to_its_quota(broker):
    with socket.create_connection((broker.host, broker.port), timeout=10) as s:
        created = _call(s, 19, 5, 1, {"topics": [{"name": "q", "num_partitions": 1, "replication_factor": 1,
                                                   "assignments": [], "configs": []}], "timeout_ms": 10000})
        assert created["topics"][0]["error_code"] == 0, created
        altered = _call(s, 49, 0, 2, {"entries": [{"entity": [{"entity_type": "client-id", "entity_name": "raw"}],
                                                   "ops": [{"key": "producer_byte_rate", "value": float(QUOTA),
                                                            "remove": False}]}], "validate_only": False})
        assert altered["entries"][0]["error_code"] == 0, altered
    batch = build_batch([Record(0, int(time.time() * 1000), None, b"x" * VALUE)])
    produce = APIS[0]
    body = produce.encode_request(7, {"transactional_id": None, "acks": 1, "timeout_ms": 10000, "topic_data": [
        {"name": "q", "partition_data": [{"index": 0, "records": batch}]}]}).getvalue()
    sock = socket.create_connection((broker.host, broker.port), timeout=30)
    arrivals = []          # (seconds since the first send, throttle_time_ms, error_code)
    stop = threading.Event()
    t0 = time.monotonic()

    def send():
        corr = 0
        try:
            while not stop.is_set():
                corr += 1
                sock.sendall(encode_request(0, 7, corr, body, "raw", produce.request_header_version(7)))
        except OSError:
            pass

    def receive():
        try:
            while not stop.is_set():
                _corr, rest = read_response(sock)
                resp = produce.decode_response(7, rest, 0)
                part = resp["responses"][0]["partition_responses"][0]
                arrivals.append((time.monotonic() - t0, resp["throttle_time_ms"], part["error_code"]))
        except (OSError, ConnectionError):
            pass

    threads = [threading.Thread(target=send, daemon=True), threading.Thread(target=receive, daemon=True)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: arrivals and arrivals[-1][0] >= WARMUP_S + MEASURE_S, timeout=WARMUP_S + MEASURE_S + 10,
                   message="responses kept coming for the whole measurement")
    finally:
        stop.set()
        sock.close()
        for t in threads:
            t.join(10)
    assert all(code == 0 for _t, _ms, code in arrivals)
    assert max(ms for _t, ms, _c in arrivals) > 0          # the broker asked it to back off; it did not
    measured = sum(1 for t, _ms, _c in arrivals if WARMUP_S <= t < WARMUP_S + MEASURE_S) * len(batch) / MEASURE_S
    assert 0.9 * QUOTA <= measured <= 1.1 * QUOTA, "%.0f B/s against a quota of %d B/s" % (measured, QUOTA)
