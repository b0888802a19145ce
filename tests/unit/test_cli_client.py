"""kbroker.client against an in-process fake broker: version negotiation, headers, correlation ids, errors.

The fake broker is a thread on a loopback socket that decodes requests with the same schemas and answers canned
responses; it advertises deliberately narrow version ranges so the negotiation is visible.
"""
import socket
import struct
import threading

import pytest

from kbroker import errors
from kbroker.client import AdminClient, BrokerConnection, SimpleClient
from kbroker.client.connection import parse_host_port
from kbroker.protocol.apis import APIS
from kbroker.protocol.headers import decode_request_header, encode_response_header
from kbroker.record import iter_records


class FakeBroker:
    def __init__(self, ranges, handlers=None, bad_correlation=False):
        self.ranges = ranges
        self.handlers = handlers or {}
        self.bad_correlation = bad_correlation
        self.seen = []  # (api_key, version, correlation_id, client_id, header_version)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _recv(self, conn, n):
        buf = b""
        while len(buf) < n:
            chunk = conn.recv(n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return buf

    def _handle(self, conn):
        try:
            while True:
                (size,) = struct.unpack(">i", self._recv(conn, 4))
                frame = memoryview(self._recv(conn, size))
                api_key, version = struct.unpack_from(">hh", frame)
                api = APIS[api_key]
                hv = api.request_header_version(version)
                header, pos = decode_request_header(frame, hv)
                self.seen.append((api_key, version, header.correlation_id, header.client_id, hv))
                req = api.decode_request(version, frame, pos)
                if api_key == 18:
                    body = {"error_code": 0, "api_keys": [
                        {"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in self.ranges.items()]}
                else:
                    body = self.handlers[api_key](version, req)
                corr = header.correlation_id + (1 if self.bad_correlation and api_key != 18 else 0)
                payload = bytes(encode_response_header(api.response_header_version(version), corr)) + \
                    api.encode_response(version, body).getvalue()
                conn.sendall(struct.pack(">i", len(payload)) + payload)
        except (EOFError, OSError):
            pass
        finally:
            conn.close()

    @property
    def bootstrap(self):
        return "127.0.0.1:%d" % self.port

    def close(self):
        self.sock.close()


def _metadata(port, topics=("t",), partitions=2):
    def handler(version, req):
        return {"brokers": [{"node_id": 7, "host": "127.0.0.1", "port": port}], "cluster_id": "c",
                "controller_id": 7,
                "topics": [{"error_code": 0, "name": t, "is_internal": False, "partitions": [
                    {"error_code": 0, "partition_index": p, "leader_id": 7, "replica_nodes": [7], "isr_nodes": [7]}
                    for p in range(partitions)]} for t in topics]}
    return handler


@pytest.fixture
def broker_factory():
    made = []

    def make(ranges, handlers=None, **kw):
        b = FakeBroker(ranges, handlers, **kw)
        made.append(b)
        return b
    yield make
    for b in made:
        b.close()


def test_parse_host_port():
    assert parse_host_port("localhost:9092") == ("localhost", 9092)
    assert parse_host_port(" [::1]:19092 ") == ("::1", 19092)
    for bad in ("nohost", ":9092", "h:x"):
        with pytest.raises(ValueError):
            parse_host_port(bad)


def test_api_versions_first_then_highest_common_version(broker_factory):
    b = broker_factory({18: (0, 3), 3: (0, 5)})
    b.handlers[3] = _metadata(b.port)
    conn = BrokerConnection("127.0.0.1", b.port, client_id="me")
    assert conn.api_ranges == {18: (0, 3), 3: (0, 5)}
    resp = conn.request("Metadata", {"topics": None})
    assert conn.last_version == 5
    assert [t["name"] for t in resp["topics"]] == ["t"]
    conn.request(3, {"topics": []}, version=1)
    assert b.seen == [(18, 0, 1, "me", 1), (3, 5, 2, "me", 1), (3, 1, 3, "me", 1)]
    conn.close()


def test_flexible_versions_use_header_v2_and_response_header_v1(broker_factory):
    b = broker_factory({18: (0, 3), 3: (0, 9)})
    b.handlers[3] = _metadata(b.port)
    with BrokerConnection("127.0.0.1", b.port) as conn:
        resp = conn.request("Metadata", {"topics": None})
        assert conn.last_version == 9
        assert resp["controller_id"] == 7
    assert b.seen[-1] == (3, 9, 2, "kbroker-admin", 2)


def test_no_common_version(broker_factory):
    b = broker_factory({18: (0, 3), 0: (0, 2), 3: (0, 1), 1: (0, 3), 19: (8, 9)})
    b.handlers[3] = _metadata(b.port)
    with BrokerConnection("127.0.0.1", b.port) as conn:
        with pytest.raises(errors.UnsupportedVersion, match="does not support DeleteTopics"):
            conn.request("DeleteTopics", {"topic_names": []})
        with pytest.raises(errors.UnsupportedVersion) as ei:
            conn.request("CreateTopics", {"topics": []})
        assert ei.value.message == "no common version of CreateTopics: client 0-7, broker 8-9"
        assert ei.value.code == 35
        assert conn.pick_version(APIS[1]) == 3
        assert conn.pick_version(APIS[1], max_version=2) == 2
    client = SimpleClient(b.bootstrap)
    with pytest.raises(errors.UnsupportedVersion, match=r"Fetch v4\+ needed, broker 127.0.0.1:\d+ offers at most v3"):
        client.fetch("t", 0, 0)
    with pytest.raises(errors.UnsupportedVersion, match=r"Produce v3\+ needed, broker 127.0.0.1:\d+ offers at most v2"):
        client.produce("t", 0, [b"x"])
    client.close()


def test_correlation_mismatch_closes(broker_factory):
    b = broker_factory({18: (0, 3), 3: (0, 1)}, bad_correlation=True)
    b.handlers[3] = _metadata(b.port)
    conn = BrokerConnection("127.0.0.1", b.port)
    with pytest.raises(errors.NetworkException, match="correlation id 3 in response, expected 2"):
        conn.request("Metadata", {"topics": None})
    assert conn.closed


def test_connect_refused():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(errors.NetworkException, match="cannot connect to 127.0.0.1:%d" % port):
        BrokerConnection("127.0.0.1", port, timeout=2)


def test_admin_errors_carry_broker_message(broker_factory):
    b = broker_factory({18: (0, 3), 3: (0, 5), 19: (0, 4), 20: (0, 3)})
    b.handlers[3] = _metadata(b.port)
    b.handlers[19] = lambda v, req: {"topics": [{"name": t["name"], "error_code": 36,
                                                 "error_message": "Topic '%s' already exists." % t["name"]}
                                                for t in req["topics"]]}
    b.handlers[20] = lambda v, req: {"responses": [{"name": n, "error_code": 3} for n in req["topic_names"]]}
    with AdminClient(b.bootstrap) as admin:
        with pytest.raises(errors.TopicAlreadyExists) as ei:
            admin.create_topic("t", 1, 1)
        assert ei.value.message == "Topic 't' already exists." and ei.value.code == 36
        with pytest.raises(errors.UnknownTopicOrPartition) as ei:
            admin.delete_topics(["gone"])
        assert ei.value.message == "UNKNOWN_TOPIC_OR_PARTITION: deleting topic gone"
        assert admin.list_topics() == ["t"]


def test_create_topics_request_shape(broker_factory):
    got = {}

    def create(version, req):
        got["req"], got["version"] = req, version
        return {"topics": [{"name": t["name"], "error_code": 0} for t in req["topics"]]}
    b = broker_factory({18: (0, 3), 3: (0, 5), 19: (0, 4)})
    b.handlers.update({3: _metadata(b.port), 19: create})
    with AdminClient(b.bootstrap) as admin:
        admin.create_topic("a", replica_assignment={0: [7], 1: [7]}, configs={"segment.bytes": "1000"})
    t, = got["req"]["topics"]
    assert got["version"] == 4
    assert (t["num_partitions"], t["replication_factor"]) == (-1, -1)
    assert t["assignments"] == [{"partition_index": 0, "broker_ids": [7]}, {"partition_index": 1, "broker_ids": [7]}]
    assert t["configs"] == [{"name": "segment.bytes", "value": "1000"}]


def test_describe_configs_v0_normalised(broker_factory):
    def describe(version, req):
        return {"results": [{"error_code": 0, "resource_type": 2, "resource_name": "t", "configs": [
            {"name": "a", "value": "1", "is_default": True}, {"name": "b", "value": "2", "is_default": False}]}]}
    b = broker_factory({18: (0, 3), 3: (0, 5), 32: (0, 0)})
    b.handlers.update({3: _metadata(b.port), 32: describe})
    with AdminClient(b.bootstrap) as admin:
        a, bb = admin.topic_configs("t")
    assert (a.source, a.is_default, bb.source, bb.is_default) == (5, True, 1, False)


def test_simple_produce_and_fetch(broker_factory):
    stored = {}

    def produce(version, req):
        out = []
        for t in req["topic_data"]:
            for p in t["partition_data"]:
                stored[(t["name"], p["index"])] = bytes(p["records"])
                out.append({"index": p["index"], "error_code": 0, "base_offset": 0})
        return {"responses": [{"name": "t", "partition_responses": out}]}

    def fetch(version, req):
        parts = []
        for t in req["topics"]:
            for p in t["partitions"]:
                data = stored.get((t["topic"], p["partition"]), b"")
                # a truncated second batch must be ignored
                parts.append({"partition_index": p["partition"], "error_code": 0, "high_watermark": 3,
                              "records": data + data[:30]})
        return {"responses": [{"topic": "t", "partitions": parts}]}

    b = broker_factory({18: (0, 3), 3: (0, 5), 0: (0, 7), 1: (0, 11)})
    b.handlers.update({3: _metadata(b.port), 0: produce, 1: fetch})
    with SimpleClient(b.bootstrap) as client:
        assert client.partitions_for("t") == [0, 1]
        assert client.produce("t", 1, [(b"k", b"v", [("h", b"1")]), b"plain", (None, None)]) == 0
        recs = client.fetch("t", 1, 1)
        assert [(r.offset, r.key, r.value, r.headers, r.timestamp_type) for r in recs] == \
            [(1, None, b"plain", [], 0), (2, None, None, [], 0)]
        res = client.fetch_many("t", {1: 0})[1]
        assert (res.next_offset, res.high_watermark, len(res.records)) == (3, 3, 3)
    produce_seen = [s for s in b.seen if s[0] == 0]
    fetch_seen = [s for s in b.seen if s[0] == 1]
    assert produce_seen[0][1] == 7 and fetch_seen[0][1] == 11
    assert [r[2:4] for r in iter_records(stored[("t", 1)])] == [(b"k", b"v"), (None, b"plain"), (None, None)]
