"""Quota enforcement (issue 12): what Produce and Fetch record, the throttled Fetch answer, and the connection's
KIP-219 mute (the response leaves at once with throttle_time_ms, then nothing is read for that long)."""
import socket
import struct
import time
import types

import gevent
from gevent import monkey

from kbroker.handlers import groups as G
from kbroker.handlers import produce as P
from kbroker.handlers.fetch import fetch as fetch_handler
from kbroker.protocol.apis import APIS
from kbroker.protocol.headers import encode_request_header
from kbroker.quota import manager as M
from kbroker.quota.manager import ClientQuotas
from kbroker.record import build_batch
from kbroker.server.router import Handler, Router
from kbroker.server.server import KafkaServer
from tests.unit.ctx import make_ctx, make_services
from tests.unit.test_handler_fetch import Replicas, recs, req as fetch_req
from tests.unit.test_quota_manager import Limits

_real_socket = monkey.get_original("socket", "socket")


class _Recorder:
    """A quota manager that answers ``throttle`` and remembers what was recorded."""

    def __init__(self, throttle=0):
        self.throttle, self.seen = throttle, []

    def enabled(self):
        return True

    def record(self, identity, client_id, value, now_ms=None):
        self.seen.append((identity.principal, client_id, value))
        return self.throttle


def _quotas(produce=0, fetch=0, request=0):
    return types.SimpleNamespace(produce=_Recorder(produce), fetch=_Recorder(fetch), request=_Recorder(request))


# ------------------------------------------------------------------------------------------------- Produce

class _Part:
    def append(self, records, version, acks):
        return types.SimpleNamespace(base_offset=0, log_append_time=-1, log_start_offset=0)


class _Replicas:
    def leader_partition(self, topic, p):
        return _Part()


def _produce_req(acks, sizes):
    return {"acks": acks, "timeout_ms": 1000, "transactional_id": None, "topic_data": [
        {"name": "t", "partition_data": [{"index": i, "records": bytes(n)} for i, n in enumerate(sizes)]}]}


def test_produce_records_the_request_record_bytes_and_throttles():
    quotas = _quotas(produce=700)
    ctx = make_ctx(9, replicas=_Replicas(), quotas=quotas, client_id="slow")
    resp = P.produce(ctx, _produce_req(1, [100, 250]))
    assert quotas.produce.seen == [("User:ANONYMOUS", "slow", 350)]
    assert ctx.throttle_ms == 700 and not ctx.quota_exempt
    assert resp["throttle_time_ms"] == 0       # the connection writes ctx.throttle_ms into it


def test_produce_acks_0_is_throttled_but_exempt_from_the_request_quota():
    quotas = _quotas(produce=50)
    ctx = make_ctx(9, replicas=_Replicas(), quotas=quotas)
    assert P.produce(ctx, _produce_req(0, [10])) is None
    assert ctx.throttle_ms == 50 and ctx.quota_exempt


def test_produce_in_process_or_without_quotas_records_nothing():
    quotas = _quotas(produce=50)
    ctx = make_ctx(9, replicas=_Replicas(), quotas=quotas, in_process=True)
    P.produce(ctx, _produce_req(1, [10]))
    assert quotas.produce.seen == [] and ctx.throttle_ms == 0
    ctx = make_ctx(9, replicas=_Replicas())        # quotas None
    P.produce(ctx, _produce_req(1, [10]))
    assert ctx.throttle_ms == 0


# --------------------------------------------------------------------------------------------------- Fetch

def _consumer_quotas(bound):
    limits = Limits({M.FETCH: {("ANONYMOUS", "c"): (("", "c"), bound)}})
    return ClientQuotas(limits, window_num=11, window_size_s=1, clock=lambda: 0)


def test_fetch_over_the_quota_answers_its_records_and_the_throttle(tmp_path):
    """Kafka 0.10.1's rule (the records, then the throttle they cost), not Kafka >= 2.0's empty answer, which
    throttles for bytes it does not send and holds a consumer at ~2/3 of its quota."""
    b = Replicas(tmp_path, [("a", 0)])
    b.append("a", 0, recs(1, 500))
    size = len(b.parts[("a", 0)].read(0, 1 << 30).region.read_bytes())
    quotas = _consumer_quotas(100.0)                            # 1000 B over the padded 10 s
    ctx = make_ctx(11, replicas=b, config={}, quotas=quotas)
    resp = fetch_handler(ctx, fetch_req([("a", 0, 0, 1 << 20)]))
    assert len(resp["responses"][0]["partitions"][0]["records"]) == size and ctx.throttle_ms == 0
    ctx = make_ctx(11, replicas=b, config={}, quotas=quotas)
    resp = fetch_handler(ctx, fetch_req([("a", 0, 0, 1 << 20)]))
    want = M.throttle_time(2 * size / 10.0, 100.0, 10000)      # two answers' bytes over 10 s
    assert len(resp["responses"][0]["partitions"][0]["records"]) == size
    assert ctx.throttle_ms == want > 0                          # the Connection writes it into the answer
    assert quotas.fetch.rate(("", "c"), 0) == 2 * size / 10.0  # both answers' bytes count


def test_fetch_budget_is_capped_by_the_quota_span(tmp_path):
    b = Replicas(tmp_path, [("a", 0)])
    for _ in range(3):
        b.append("a", 0, recs(1, 500))
    quotas = _consumer_quotas(100.0)                            # at most 100 B/s x 10 s = 1000 B per fetch
    ctx = make_ctx(11, replicas=b, config={}, quotas=quotas)
    resp = fetch_handler(ctx, fetch_req([("a", 0, 0, 1 << 20)]))
    assert len(resp["responses"][0]["partitions"][0]["records"]) == 1000


def test_follower_fetch_is_exempt(tmp_path):
    b = Replicas(tmp_path, [("a", 0)], isr=(1, 2))
    b.leader_quota = None       # no replication throttle (kbroker/quota/replication.py)
    b.append("a", 0, recs(1, 500))
    quotas = _quotas(fetch=999)
    ctx = make_ctx(11, replicas=b, config={}, quotas=quotas)
    fetch_handler(ctx, fetch_req([("a", 0, 0, 1 << 20)], replica_id=2))
    assert quotas.fetch.seen == [] and ctx.quota_exempt and ctx.throttle_ms == 0


# -------------------------------------------------------------------------------------------- parked time

def test_a_join_group_wait_is_parked_time():
    class Coord:
        def join_group(self, *args):
            callback = args[-1]
            gevent.spawn_later(0.2, callback, {"error_code": 0, "generation_id": 1, "protocol_name": "r",
                                               "leader": "m", "member_id": "m", "members": []})
    ctx = make_ctx(5, groups=Coord())
    t0 = time.monotonic()
    G.join_group(ctx, {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                       "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                       "protocols": [{"name": "r", "metadata": b""}]})
    took = time.monotonic() - t0
    # Nearly all of the call was the wait, and the wait was the coordinator's 0.2 s (less what gevent's cached loop
    # clock was behind when the timer was set: a loaded CI run once saw the parked time just under 0.19). Without
    # the parking, parked_s is 0.
    assert took >= 0.15, took
    assert took - 0.02 <= ctx.parked_s <= took, (ctx.parked_s, took)


# ---------------------------------------------------------------------------------------- the muted channel

def _api_versions(corr):
    header = encode_request_header(APIS[18].request_header_version(3), 18, 3, corr, "slow")
    payload = bytes(header) + APIS[18].encode_request(3, {"client_software_name": "t",
                                                          "client_software_version": "1"}).getvalue()
    return struct.pack(">i", len(payload)) + payload


def _read_responses(port, data, n):
    """Send ``data`` at once (pipelined) on a real thread; -> [(arrival s after the send, response bytes)]."""
    def run():
        s = _real_socket()
        s.settimeout(5.0)
        s.connect(("127.0.0.1", port))
        try:
            t0 = time.monotonic()
            s.sendall(data)
            out, buf = [], b""
            while len(out) < n:
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
                while len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
                    size = struct.unpack_from(">i", buf)[0]
                    out.append((time.monotonic() - t0, buf[4:4 + size]))
                    buf = buf[4 + size:]
            return out
        finally:
            s.close()
    return gevent.get_hub().threadpool.apply(run)


def test_a_throttled_response_leaves_at_once_and_the_connection_is_muted_after_it():
    handled = []
    quotas = _quotas(request=0)

    def api_versions(ctx, req):
        handled.append(time.monotonic())
        ctx.throttle(400)
        return {"error_code": 0, "api_keys": [], "throttle_time_ms": 0}
    services = make_services(quotas=quotas, config=None)
    srv = KafkaServer(services, Router({18: Handler(APIS[18], 0, 3, api_versions)}),
                      [("PLAINTEXT", "127.0.0.1", 0)], max_request_size=1 << 20)
    srv.start()
    try:
        out = _read_responses(srv.bound_ports()["PLAINTEXT"], _api_versions(1) + _api_versions(2), 2)
    finally:
        srv.stop(grace_seconds=1)
    assert len(out) == 2
    first = APIS[18].decode_response(3, out[0][1], 4)     # response header v0: correlation id only
    assert first["throttle_time_ms"] == 400
    assert out[0][0] < 0.3                                # the response went out before the mute
    # The pipelined second request was not even handled before the mute ended.
    assert handled[1] - handled[0] >= 0.39 and out[1][0] >= 0.39
    # Both requests' handler time went to the request quota (tiny, not 0.4 s: the mute is not handler time).
    assert [(p, c) for p, c, _v in quotas.request.seen] == [("User:ANONYMOUS", "slow")] * 2
    assert all(0 <= v < 5 for _p, _c, v in quotas.request.seen)    # percent-seconds: < 50 ms each


def _serve(quotas, handlers):
    srv = KafkaServer(make_services(quotas=quotas, config=None), Router(handlers), [("PLAINTEXT", "127.0.0.1", 0)],
                      max_request_size=1 << 20)
    srv.start()
    return srv, srv.bound_ports()["PLAINTEXT"]


def test_the_request_quota_throttles_through_the_response_and_controller_apis_are_exempt():
    quotas = _quotas(request=250)

    def api_versions(ctx, req):
        return {"error_code": 0, "api_keys": [], "throttle_time_ms": 0}

    def controlled_shutdown(ctx, req):
        return {"error_code": 0, "remaining_partitions": []}
    srv, port = _serve(quotas, {18: Handler(APIS[18], 0, 3, api_versions),
                                7: Handler(APIS[7], 0, 3, controlled_shutdown)})
    try:
        body = APIS[7].encode_request(3, {"broker_id": 1, "broker_epoch": 1}).getvalue()
        shutdown = bytes(encode_request_header(APIS[7].request_header_version(3), 7, 3, 9, "ctl")) + body
        out = _read_responses(port, struct.pack(">i", len(shutdown)) + shutdown + _api_versions(10), 2)
    finally:
        srv.stop(grace_seconds=1)
    # ControlledShutdown (a ClusterAction API) was not recorded nor throttled: the ApiVersions behind it came at once
    assert [c for _p, c, _v in quotas.request.seen] == ["slow"]
    assert out[1][0] < 0.2
    assert APIS[18].decode_response(3, out[1][1], 4)["throttle_time_ms"] == 250
