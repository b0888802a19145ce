"""Connection: pipelined requests are answered in order (the writer greenlet coalesces them), bad frames close."""
import socket
import struct

import gevent
from gevent import monkey

from kbroker.handlers import registry
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
    srv = KafkaServer(services=None, router=Router(registry()), listeners=[("PLAINTEXT", "127.0.0.1", 0)],
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


# ------------------------------------------------------------------------------------------ limits (issue 8)
# Each test runs a KafkaServer in this process with small ServerLimits; the clients are plain blocking sockets on a
# real thread (the hub's threadpool), so the server's greenlets run while they wait.

import time  # noqa: E402

from kbroker._native import encode_uvarint  # noqa: E402
from kbroker.server.limits import ServerLimits  # noqa: E402


def _serve_with(**limits):
    srv = KafkaServer(services=None, router=Router(registry()), listeners=[("PLAINTEXT", "127.0.0.1", 0)],
                      limits=ServerLimits(**limits))
    srv.start()
    return srv, srv.bound_ports()["PLAINTEXT"]


def _in_thread(fn, *args):
    return gevent.get_hub().threadpool.apply(fn, args)


def _connect(port, timeout=5.0):
    s = _real_socket()
    s.settimeout(timeout)
    s.connect(("127.0.0.1", port))
    return s


def _read_frame(s):
    """One response frame's payload, or None when the server closed the connection first."""
    buf = b""
    while len(buf) < 4 or len(buf) < 4 + struct.unpack_from(">i", buf)[0]:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        buf += chunk
    return buf[4:]


def _answered(s, corr):
    s.sendall(_request(corr))
    payload = _read_frame(s)
    return payload is not None and struct.unpack_from(">i", payload)[0] == corr


def _seconds_until_closed(s, limit=5.0):
    """Seconds until the server closes ``s`` (nothing may arrive before); raises after ``limit``."""
    t0 = time.monotonic()
    s.settimeout(limit)
    try:
        data = s.recv(65536)
    except ConnectionResetError:
        data = b""
    assert data == b"", "expected a close, got %r" % data[:40]
    return time.monotonic() - t0


def _api_versions_v3(corr, tags=0, tag_bytes=0):
    """ApiVersions v3 (flexible: header v2) whose body ends with ``tags`` unknown tagged fields, the first of them
    ``tag_bytes`` long -- a request whose size and element count the test chooses."""
    header = bytes(encode_request_header(2, 18, 3, corr, "t"))
    body = b"\x02k\x021"  # client_software_name "k", client_software_version "1"
    fields = b""
    for i in range(tags):
        data = b"z" * tag_bytes if i == 0 else b""
        fields += encode_uvarint(100 + i) + encode_uvarint(len(data)) + data
    payload = header + body + encode_uvarint(tags) + fields
    return struct.pack(">i", len(payload)) + payload


def test_idle_connection_closed_after_connections_max_idle_ms():
    srv, port = _serve_with(idle_ms=300)

    def run():
        quiet = _connect(port)
        used = _connect(port)
        assert _answered(used, 1)
        t_quiet = _seconds_until_closed(quiet)
        busy = _connect(port)
        for corr in range(10):  # one request every 100 ms for a second: never idle for 300 ms
            assert _answered(busy, corr)
            time.sleep(0.1)
        t_used = _seconds_until_closed(used, limit=0.5)  # it has been idle for > 1 s by now
        busy.close()
        return t_quiet, t_used
    try:
        t_quiet, t_used = _in_thread(run)
        assert 0.25 <= t_quiet <= 1.5, t_quiet
        assert t_used <= 0.5
    finally:
        srv.stop(grace_seconds=1)


def test_negative_idle_never_closes():
    srv, port = _serve_with(idle_ms=-1, receive_timeout_ms=200)

    def run():
        s = _connect(port)
        s.settimeout(0.8)
        try:
            s.recv(1)
            return "closed"
        except socket.timeout:
            return "open"
        finally:
            s.close()
    try:
        assert _in_thread(run) == "open"
    finally:
        srv.stop(grace_seconds=1)


def test_partial_frames_closed_after_receive_timeout_and_memory_returned():
    srv, port = _serve_with(receive_timeout_ms=400)

    def run():
        small = _connect(port)
        small.sendall(_request(1)[:6])                       # 6 bytes of a ~21-byte ApiVersions
        large = _connect(port)
        large.sendall(struct.pack(">i", 1 << 20) + b"\x00\x12\x00\x00" + b"x" * 200_000)  # 1 MiB declared
        slow = _connect(port)
        whole = _request(2)
        for i in range(len(whole)):                          # one byte every 10 ms: done in ~0.2 s < 0.4 s
            slow.sendall(whole[i:i + 1])
            time.sleep(0.01)
        answered = _read_frame(slow)
        return _seconds_until_closed(small), _seconds_until_closed(large), answered
    try:
        t_small, t_large, answered = _in_thread(run)
        assert answered is not None and struct.unpack_from(">i", answered)[0] == 2
        assert 0.2 <= t_small <= 1.5 and t_large <= 1.5, (t_small, t_large)
        assert srv.memory.used == 0 and srv.memory.peak >= 200_000
    finally:
        srv.stop(grace_seconds=1)


def test_max_connections_per_ip_closes_the_extra_connection_at_once():
    srv, port = _serve_with(max_connections_per_ip=2)

    def run():
        a, b = _connect(port), _connect(port)
        ok = _answered(a, 1) and _answered(b, 2)
        c = _connect(port)
        t_c = _seconds_until_closed(c, limit=1.0)
        a.close()
        d = None
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:                   # the server notices a's close asynchronously
            d = _connect(port)
            if _answered(d, 3):
                break
            d.close()
            d = None
            time.sleep(0.05)
        return ok, t_c, d is not None
    try:
        ok, t_c, d_ok = _in_thread(run)
        assert ok and t_c < 0.5 and d_ok
        assert srv.quotas.total <= 2
    finally:
        srv.stop(grace_seconds=1)


def test_max_connections_per_ip_override():
    srv, port = _serve_with(max_connections_per_ip=5, ip_overrides={"127.0.0.1": 1})

    def run():
        a = _connect(port)
        ok = _answered(a, 1)
        return ok, _seconds_until_closed(_connect(port), limit=1.0)
    try:
        ok, t = _in_thread(run)
        assert ok and t < 0.5
    finally:
        srv.stop(grace_seconds=1)


def test_max_connections_makes_new_connections_wait_for_a_slot():
    srv, port = _serve_with(max_connections=2)

    def run():
        a, b = _connect(port), _connect(port)
        assert _answered(a, 1) and _answered(b, 2)
        c = _connect(port)                                   # the kernel completes the handshake (backlog)
        c.sendall(_request(3))
        c.settimeout(0.6)
        try:
            early = c.recv(65536)
        except socket.timeout:
            early = None
        t0 = time.monotonic()
        a.close()
        c.settimeout(2.0)
        late = _read_frame(c)
        return early, late, time.monotonic() - t0
    try:
        early, late, waited = _in_thread(run)
        assert early is None, "the connection over max.connections was served: %r" % early
        assert late is not None and struct.unpack_from(">i", late)[0] == 3 and waited < 1.0
    finally:
        srv.stop(grace_seconds=1)


def test_request_memory_pauses_large_requests_not_small_ones():
    """Budget 256 KiB: a stalled 1 MiB request holds it; another large request waits until the stalled one's
    receive timeout frees it, while small requests are answered at once throughout."""
    srv, port = _serve_with(max_request_size=1 << 20, request_memory=256 * 1024, receive_timeout_ms=1000)

    def run():
        hog = _connect(port)
        hog.sendall(struct.pack(">i", 1 << 20) + b"\x00\x12\x00\x00" + b"x" * 600_000)
        # the hog is closed 1.0-1.25 s after its first byte (timeout + sweep interval); starting 0.5 s later, the
        # large request's own deadline (1.5 s) comes after that
        time.sleep(0.5)
        big = _connect(port)
        t0 = time.monotonic()
        big.sendall(_api_versions_v3(7, tags=1, tag_bytes=300_000))   # 300 KB: the large path
        small = _connect(port)
        small_rtts = []
        for corr in range(5):
            t = time.monotonic()
            assert _answered(small, 100 + corr)
            small_rtts.append(time.monotonic() - t)
        big.settimeout(5)
        got = _read_frame(big)
        return got, time.monotonic() - t0, max(small_rtts)
    try:
        got, big_wait, small_worst = _in_thread(run)
        assert got is not None and struct.unpack_from(">i", got)[0] == 7
        assert big_wait >= 0.4, "the large request did not wait for memory (%.2f s)" % big_wait
        assert small_worst < 0.3, small_worst
        # never more than the budget plus one reservation (<= the largest frame) at a time
        assert 256 * 1024 <= srv.memory.peak <= 256 * 1024 + (1 << 20)
        assert srv.memory.used == 0
    finally:
        srv.stop(grace_seconds=1)


def test_request_over_max_elements_closes_the_connection():
    srv, port = _serve_with(max_elements=10)

    def run():
        ok = _connect(port)
        ok.sendall(_api_versions_v3(1, tags=10))
        answered = _read_frame(ok)
        over = _connect(port)
        over.sendall(_api_versions_v3(2, tags=11))
        return answered, _seconds_until_closed(over, limit=2.0)
    try:
        answered, t = _in_thread(run)
        assert answered is not None and struct.unpack_from(">i", answered)[0] == 1
        assert t < 1.0
    finally:
        srv.stop(grace_seconds=1)


def test_frame_stalled_at_a_full_buffer_is_closed_and_released():
    """A large frame whose buffer is exactly full waits for more bytes; the receive timeout must still reach it
    (the wait goes through the socket, so the sweeper's close wakes it) and its memory must come back. An 8 MiB
    frame starts with a 1 MiB buffer (EAGER_FRAME) when little of it is readable."""
    srv, port = _serve_with(receive_timeout_ms=400, max_request_size=16 << 20)

    def run():
        s = _connect(port)
        s.sendall(struct.pack(">i", 8 << 20) + b"\x00\x12\x00\x00" + b"x" * 1000)
        time.sleep(0.1)                                # the broker takes it: a 1 MiB buffer, 1004 bytes in it
        s.sendall(b"y" * ((1 << 20) - 1004))           # ... now exactly full
        return _seconds_until_closed(s)
    try:
        assert _in_thread(run) <= 1.5
        deadline = time.monotonic() + 2
        while srv.memory.used and time.monotonic() < deadline:
            gevent.sleep(0.02)
        assert srv.memory.used == 0 and srv.memory.peak == 1 << 20
    finally:
        srv.stop(grace_seconds=1)


def test_large_frame_arriving_in_pieces_is_grown_and_assembled_exactly():
    """A 5 MiB request sent in 100 KB pieces: its buffer starts at 1 MiB and grows in place as the pieces come;
    every byte lands where it belongs (the request decodes and is answered), and the budget is returned."""
    srv, port = _serve_with(max_request_size=16 << 20)
    frame = _api_versions_v3(42, tags=1, tag_bytes=5 << 20)

    def run():
        s = _connect(port)
        for i in range(0, len(frame), 100_000):
            s.sendall(frame[i:i + 100_000])
            time.sleep(0.002)
        return _read_frame(s)
    try:
        got = _in_thread(run)
        assert got is not None and struct.unpack_from(">i", got)[0] == 42
        assert srv.memory.used == 0 and (1 << 20) <= srv.memory.peak <= len(frame)
    finally:
        srv.stop(grace_seconds=1)
