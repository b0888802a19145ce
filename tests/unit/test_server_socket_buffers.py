"""socket.send.buffer.bytes / socket.receive.buffer.bytes reach accepted connections only when set explicitly.

Linux reports twice the value given to setsockopt (the kernel's bookkeeping overhead), capped at
net.core.wmem_max / rmem_max; the sizes here (40000 / 50000) are below every distribution's cap (212992) and unlike
the autotuned starting sizes (tcp_wmem[1] = 16384, tcp_rmem[1] = 131072), so each assertion fails without the
feature.
"""
import socket
import types

import gevent
import pytest
from gevent import monkey

from kbroker.handlers import registry
from kbroker.config import BrokerConfig
from kbroker.server.router import Router
from kbroker.server.server import KafkaServer, apply_socket_buffers

_real_socket = monkey.get_original("socket", "socket")
SNDBUF, RCVBUF = 40000, 50000


def _buffers(sock):
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF), sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)


def test_apply_socket_buffers_sets_both_options():
    a, b = socket.socketpair()
    try:
        apply_socket_buffers(a, {"SO_SNDBUF": SNDBUF, "SO_RCVBUF": RCVBUF})
        assert _buffers(a) == (2 * SNDBUF, 2 * RCVBUF)
        assert _buffers(b) != (2 * SNDBUF, 2 * RCVBUF)
    finally:
        a.close()
        b.close()


def test_apply_socket_buffers_logs_a_failure_and_keeps_going(caplog):
    a, b = socket.socketpair()
    b.close()
    a.close()  # setsockopt on a closed socket raises OSError(EBADF)
    apply_socket_buffers(a, {"SO_SNDBUF": SNDBUF})
    assert any("SO_SNDBUF" in r.getMessage() for r in caplog.records)


def _accepted_buffers(overrides):
    """Start a KafkaServer with ``overrides``, connect once, return (SO_SNDBUF, SO_RCVBUF) of the accepted socket."""
    cfg = BrokerConfig.from_sources(None, overrides)
    srv = KafkaServer(services=types.SimpleNamespace(config=cfg), router=Router(registry()),
                      listeners=[("PLAINTEXT", "127.0.0.1", 0)])
    srv.start()
    client = _real_socket()
    try:
        gevent.get_hub().threadpool.apply(client.connect, (("127.0.0.1", srv.bound_ports()["PLAINTEXT"]),))
        with gevent.Timeout(5):
            while not srv.connections:
                gevent.sleep(0.01)
        (conn,) = srv.connections
        return _buffers(conn.sock)
    finally:
        client.close()
        srv.stop(grace_seconds=1)


def test_explicit_sizes_reach_accepted_connections():
    got = _accepted_buffers(["socket.send.buffer.bytes=%d" % SNDBUF, "socket.receive.buffer.bytes=%d" % RCVBUF])
    assert got == (2 * SNDBUF, 2 * RCVBUF)


@pytest.mark.parametrize("overrides", [[], ["socket.send.buffer.bytes=-1", "socket.receive.buffer.bytes=-1"]])
def test_default_or_minus_one_leaves_autotuning_on(overrides):
    # Nothing set: the kernel's autotuned starting sizes, not Kafka's 102400 (which would read back as 204800).
    sndbuf, rcvbuf = _accepted_buffers(overrides)
    assert sndbuf != 204800 and rcvbuf != 204800
    assert (sndbuf, rcvbuf) != (2 * SNDBUF, 2 * RCVBUF)
