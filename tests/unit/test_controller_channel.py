"""ControllerChannel: real sockets (retry until the broker listens), ordering, the in-process local path."""
import struct

import gevent
from gevent.event import AsyncResult
from gevent.server import StreamServer

from kbroker.controller import channel as chmod
from kbroker.controller.channel import ControllerChannel
from kbroker.protocol.apis import APIS
from kbroker.protocol.headers import decode_request_header, encode_response_header


def serve(sock, addr, seen):
    f = sock.makefile("rb")
    while True:
        head = f.read(4)
        if len(head) < 4:
            return
        frame = f.read(struct.unpack(">i", head)[0])
        api = APIS[struct.unpack(">h", frame[:2])[0]]
        version = struct.unpack(">h", frame[2:4])[0]
        hdr, pos = decode_request_header(frame, api.request_header_version(version))
        seen.append((hdr.api_key, version, api.decode_request(version, frame, pos)["controller_epoch"]))
        body = bytes(encode_response_header(api.response_header_version(version), hdr.correlation_id)) + \
            api.encode_response(version, {"error_code": 0, "partition_errors": []}).getvalue()
        sock.sendall(struct.pack(">i", len(body)) + body)


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
