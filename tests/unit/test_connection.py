"""Connection: pipelined requests are answered in order (the writer greenlet coalesces them), bad frames close."""
import socket
import struct

import gevent
from gevent import monkey

from kbroker.protocol.apis import APIS
from kbroker.protocol.headers import encode_request_header
from kbroker.server.router import Router
from kbroker.server.server import KafkaServer

_real_socket = monkey.get_original("socket", "socket")


def _request(corr, api_key=18, version=0):
    body = APIS[18].encode_request(0, {}).getvalue() if api_key == 18 else b""
    payload = bytes(encode_request_header(1, api_key, version, corr, "t")) + body
    return struct.pack(">i", len(payload)) + payload


def _serve():
    srv = KafkaServer(broker=None, router=Router(), listeners=[("PLAINTEXT", "127.0.0.1", 0)],
                      max_request_size=1 << 20)
    srv.start()
    return srv, srv.bound_ports()["PLAINTEXT"]


def _client(port, data):
    """Blocking client on a real thread: send ``data``, read until EOF or 2 s of silence."""
    def run():
        s = _real_socket()
        s.settimeout(2.0)
        s.connect(("127.0.0.1", port))
        s.sendall(data)
        out = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return out, True
                out += chunk
                if _complete(out) >= 5:
                    return out, False
        except socket.timeout:
            return out, False
        finally:
            s.close()
    return gevent.get_hub().threadpool.apply(run)


def _complete(buf):
    n, pos = 0, 0
    while pos + 4 <= len(buf):
        size = struct.unpack_from(">i", buf, pos)[0]
        if pos + 4 + size > len(buf):
            break
        pos += 4 + size
        n += 1
    return n


def _correlations(buf):
    out, pos = [], 0
    while pos + 4 <= len(buf):
        size = struct.unpack_from(">i", buf, pos)[0]
        out.append(struct.unpack_from(">i", buf, pos + 4)[0])
        pos += 4 + size
    return out


def test_pipelined_requests_answered_in_order():
    srv, port = _serve()
    try:
        data = b"".join(_request(c) for c in (11, 12, 13, 14, 15))
        out, _eof = _client(port, data)
        assert _correlations(out) == [11, 12, 13, 14, 15]
    finally:
        srv.stop(grace_seconds=1)


def test_unknown_api_key_closes_after_earlier_answers():
    srv, port = _serve()
    try:
        bad = struct.pack(">i", 8) + struct.pack(">hhi", 999, 0, 77)
        out, eof = _client(port, _request(1) + bad + _request(2))
        assert _correlations(out) == [1] and eof
    finally:
        srv.stop(grace_seconds=1)
