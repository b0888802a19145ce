"""Golden bytes captured from a real client: librdkafka (confluent-kafka) opens every connection with an
ApiVersions v3 request (flexible, header v2). A throwaway listening socket captures it; our codec must decode it
field by field and re-encode the body to the identical bytes."""
import socket
import struct
import threading

import pytest

from kbroker.protocol.apis import APIS
from kbroker.protocol.headers import decode_request_header

confluent_kafka = pytest.importorskip("confluent_kafka")


def _capture_first_request(timeout=10.0):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.settimeout(timeout)
    port = srv.getsockname()[1]
    got = {}

    def accept():
        conn, _ = srv.accept()
        conn.settimeout(timeout)
        size = struct.unpack(">i", _recv_exact(conn, 4))[0]
        got["payload"] = _recv_exact(conn, size)
        conn.close()

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    p = confluent_kafka.Producer({"bootstrap.servers": "127.0.0.1:%d" % port, "client.id": "golden-client",
                                  "log_level": 0})
    t.join(timeout)
    del p
    srv.close()
    return got["payload"]


def _recv_exact(conn, n):
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise EOFError("peer closed")
        buf += chunk
    return buf


def test_librdkafka_api_versions_v3_request_decodes_and_reencodes_identically():
    payload = _capture_first_request()
    api = APIS[18]
    hdr, pos = decode_request_header(payload, 2)
    assert (hdr.api_key, hdr.api_version, hdr.client_id) == (18, 3, "golden-client")
    assert api.request_header_version(3) == 2
    body = api.decode_request(3, payload, pos)
    assert body["client_software_name"] == "confluent-kafka-python"
    assert body["client_software_version"]  # e.g. "2.16.1-rdkafka-2.x"
    assert api.encode_request(3, body).getvalue() == bytes(payload[pos:])
