"""replica.socket.receive.buffer.bytes reaches a follower's connection to its leader only when set explicitly.

Kafka applies its default (65536) to every replica fetcher connection; setting SO_RCVBUF switches off Linux's
receive buffer autotuning, which cut RF 3 acks=all throughput by 28 % on this project's machine
(docs/performance.md), so kbroker applies the key only when an operator sets it -- the rule of
socket.receive.buffer.bytes (tests/unit/test_server_socket_buffers.py). Linux reports twice the value given, capped
at net.core.rmem_max; 50000 is below every distribution's cap and unlike the autotuned starting size
(tcp_rmem[1] = 131072). The tests of the default, of -1, of a dict config and of the refused values fail without
the feature; the others pin what must not change (an explicit value, LeaderConnection's own option).
"""
import socket
import types

import pytest
from gevent import socket as gsocket

from kbroker.config import BrokerConfig, ConfigError
from kbroker.replica.fetcher import LeaderConnection
from kbroker.replica.manager import ReplicaManager

RCVBUF = 50000
_NO_LOGS = types.SimpleNamespace(log_dirs=[])     # the manager reads its log dirs' checkpoints; none here


def _manager(overrides):
    cfg = BrokerConfig.from_sources(None, overrides)
    return ReplicaManager(1, _NO_LOGS, log_config_for=None, isr_writer=None, connect=None, config=cfg)


def _fetcher_rcvbuf(overrides):
    return _manager(overrides)._fetch_settings()["rcvbuf"]


def test_the_follower_buffer_is_applied_when_set_explicitly():
    assert _fetcher_rcvbuf(["replica.socket.receive.buffer.bytes=%d" % RCVBUF]) == RCVBUF


@pytest.mark.parametrize("overrides", [[], ["replica.socket.receive.buffer.bytes=-1"],
                                       ["replica.socket.receive.buffer.bytes=65536"]])
def test_default_or_minus_one_leaves_autotuning_on(overrides):
    # Kafka's default value given explicitly is an operator's choice and is applied; left at its default it is not.
    want = 65536 if overrides and overrides[0].endswith("65536") else None
    assert _fetcher_rcvbuf(overrides) == want


def test_a_dict_config_names_the_key_or_not():
    kw = dict(log_config_for=None, isr_writer=None, connect=None)
    assert ReplicaManager(1, _NO_LOGS, config={}, **kw)._fetch_settings()["rcvbuf"] is None
    assert ReplicaManager(1, _NO_LOGS, config={"replica.socket.receive.buffer.bytes": RCVBUF},
                          **kw)._fetch_settings()["rcvbuf"] == RCVBUF


@pytest.mark.parametrize("value", ["0", "-2"])
def test_zero_or_below_minus_one_stops_startup_naming_the_key(value):
    with pytest.raises(ConfigError, match="replica.socket.receive.buffer.bytes"):
        BrokerConfig.from_sources(None, ["replica.socket.receive.buffer.bytes=" + value])


@pytest.mark.parametrize("rcvbuf", [RCVBUF, None])
def test_leader_connection_sets_so_rcvbuf_only_when_given(rcvbuf):
    listener = gsocket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(2)
    try:
        conn = LeaderConnection("127.0.0.1", listener.getsockname()[1], "test", 5, rcvbuf=rcvbuf)
        try:
            got = conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
            if rcvbuf:
                assert got == 2 * RCVBUF
            else:   # what an untouched connection starts with (tcp_rmem[1]; autotuning grows it from there)
                plain = gsocket.create_connection(listener.getsockname(), timeout=5)
                try:
                    assert got == plain.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) != 2 * RCVBUF
                finally:
                    plain.close()
        finally:
            conn.close()
    finally:
        listener.close()
