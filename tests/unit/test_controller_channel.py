"""ControllerChannel: real sockets (retry until the broker listens), ordering, the in-process local path."""
import struct

import gevent
from gevent.event import AsyncResult
from gevent.server import StreamServer

from kbroker.controller import channel as chmod
from kbroker.controller.channel import ControllerChannel
from kbroker.protocol.apis import APIS
from kbroker.protocol.headers import decode_request_header, encode_response_header


def _read_request(f):
    """(api, version, header, body) of the next request on the file ``f``; None at its end."""
    head = f.read(4)
    if len(head) < 4:
        return None
    frame = f.read(struct.unpack(">i", head)[0])
    api = APIS[struct.unpack(">h", frame[:2])[0]]
    version = struct.unpack(">h", frame[2:4])[0]
    hdr, pos = decode_request_header(frame, api.request_header_version(version))
    return api, version, hdr, api.decode_request(version, frame, pos)


def _answer(sock, api, version, hdr, body=None):
    body = body if body is not None else {"error_code": 0}
    frame = bytes(encode_response_header(api.response_header_version(version), hdr.correlation_id)) + \
        api.encode_response(version, body).getvalue()
    sock.sendall(struct.pack(">i", len(frame)) + frame)


def serve(sock, addr, seen):
    f = sock.makefile("rb")
    while True:
        req = _read_request(f)
        if req is None:
            return
        api, version, hdr, body = req
        seen.append((hdr.api_key, version, body["controller_epoch"]))
        _answer(sock, api, version, hdr, {"error_code": 0, "partition_errors": []})


def _send_three(port):
    """UpdateMetadata with controller epochs 1, 2, 3 to broker 2 at ``port``, waited for; -> (the epochs in the
    order their callbacks ran, the channel: the caller removes its brokers)."""
    answered = []
    done = AsyncResult()
    ch = ControllerChannel(local_broker_id=1)
    ch.add_broker(2, "127.0.0.1", port)
    for epoch in (1, 2, 3):
        ch.send(2, 6, {"controller_id": 1, "controller_epoch": epoch, "live_brokers": []},
                lambda r, e=epoch: (answered.append(e), e == 3 and done.set()))
    try:
        done.get(timeout=5)
    finally:
        ch.remove_all()
    return answered


def test_network_send_retries_and_keeps_order(monkeypatch):
    monkeypatch.setattr(chmod, "BACKOFF_MIN", 0.01)
    seen = []
    server = StreamServer(("127.0.0.1", 0), lambda s, a: serve(s, a, seen))
    server.init_socket()
    port = server.server_port  # bound but not accepting yet: the first attempts fail or wait
    server.close()
    ch = ControllerChannel(local_broker_id=1)
    results = []
    done = AsyncResult()
    ch.add_broker(2, "127.0.0.1", port)
    ch.send(2, 6, {"controller_id": 1, "controller_epoch": 7, "live_brokers": []}, results.append)
    ch.send(2, 5, {"controller_id": 1, "controller_epoch": 8, "topic_states": []},
            lambda r: (results.append(r), done.set()))
    gevent.sleep(0.05)
    server = StreamServer(("127.0.0.1", port), lambda s, a: serve(s, a, seen))
    server.start()
    try:
        done.get(timeout=5)
        assert seen == [(6, 6, 7), (5, 3, 8)]
        assert results == [{"error_code": 0}, {"error_code": 0, "partition_errors": []}]
        assert ch.send(9, 6, {}) is False  # unknown broker: dropped
    finally:
        ch.remove_all()
        server.stop()


def test_local_shortcut():
    calls = []
    done = AsyncResult()
    ch = ControllerChannel(local_broker_id=1, local_handler=lambda k, v, b: calls.append((k, v)) or {"error_code": 0})
    ch.add_broker(1, "unused", 1)
    ch.send(1, 4, {"controller_id": 1, "controller_epoch": 1}, done.set)
    assert done.get(timeout=2) == {"error_code": 0}
    assert calls == [(4, 4)]
    ch.remove_all()
    assert ch.brokers() == []


def test_several_requests_are_in_flight_and_answered_in_order():
    # The broker reads three requests before it answers any: with one request in flight the channel would wait
    # for the first answer forever (Kafka's RequestSendThread does); with several, all three arrive at once.
    seen = []

    def broker(sock, _addr):
        f = sock.makefile("rb")
        got = [_read_request(f) for _ in range(3)]
        seen.extend(body["controller_epoch"] for _api, _v, _hdr, body in got)
        for api, version, hdr, _body in got:
            _answer(sock, api, version, hdr)
        f.read(4)
    server = StreamServer(("127.0.0.1", 0), broker)
    server.start()
    try:
        answered = _send_three(server.server_port)
        assert seen == [1, 2, 3] and answered == [1, 2, 3]
    finally:
        server.stop()


def test_unanswered_requests_are_written_again_in_order_after_a_lost_connection(monkeypatch):
    monkeypatch.setattr(chmod, "BACKOFF_MIN", 0.01)
    seen = []
    connections = []

    def broker(sock, _addr):
        connections.append(sock)
        f = sock.makefile("rb")
        if len(connections) == 1:
            # the first connection: two requests in flight, the first answered, then the connection is lost
            first, second = _read_request(f), _read_request(f)
            seen.extend(req[3]["controller_epoch"] for req in (first, second))
            _answer(sock, *first[:3])
            gevent.sleep(0.05)
            sock.close()
            return
        while True:
            req = _read_request(f)
            if req is None:
                return
            seen.append(req[3]["controller_epoch"])
            _answer(sock, *req[:3])
    server = StreamServer(("127.0.0.1", 0), broker)
    server.start()
    try:
        answered = _send_three(server.server_port)
        # 1 and 2 were in flight on the first connection (3 too, at most IN_FLIGHT); only 1 was answered. What was
        # not answered is written again on the next connection, in order, and every callback runs once, in order.
        assert len(connections) == 2
        assert answered == [1, 2, 3]
        assert seen == [1, 2, 2, 3]
    finally:
        server.stop()
