"""coord/zk.py with no ZooKeeper server reachable (issue 16): operations end with ConnectionLossError after
``operation_timeout_ms`` instead of waiting for a connection (kazoo queues a request made while disconnected and
its synchronous call waits forever), ``connected`` is False, ``stop()`` returns within STOP_TIMEOUT_S, and a
BrokerRegistrar's ``deregister()`` does not wait at all. One single-node ensemble, killed by the test."""
import time

import gevent
import pytest

from kbroker.coord import zk as zkmod
from kbroker.coord.errors import ConnectionLossError
from kbroker.coord.registration import register_broker
from kbroker.coord.zk import ZooKeeperBackend
from tests.integration.harness import ZkEnsemble, zookeeper_classpath

pytestmark = pytest.mark.zk

SESSION_MS = 4000
OP_MS = 2000


@pytest.fixture
def dead_backend(tmp_path):
    if zookeeper_classpath() is None:
        pytest.skip("Debian's zookeeper package is not installed")
    ens = ZkEnsemble(tmp_path / "zk", n=1).start()
    b = ZooKeeperBackend(ens.connect_string + "/outage", SESSION_MS, 10000, operation_timeout_ms=OP_MS).start()
    try:
        b.create("/kept", b"x")
        reg = register_broker(b, 1, [("PLAINTEXT", "127.0.0.1", 9092)], {"PLAINTEXT": "PLAINTEXT"})
        assert b.connected
        gevent.get_hub().threadpool.apply(ens.kill, (0,))   # a blocking harness call: keep the hub running
        deadline = time.monotonic() + 10
        while b.connected:
            assert time.monotonic() < deadline, "the backend never noticed the dead server"
            gevent.sleep(0.05)
        yield b, reg
    finally:
        b.stop()
        ens.close()


def test_operations_end_after_the_operation_timeout_then_stop(dead_backend):
    b, reg = dead_backend
    for op in (lambda: b.exists("/kept"), lambda: b.set("/kept", b"y"), lambda: b.create("/a/b", makepath=True)):
        t0 = time.monotonic()
        with pytest.raises(ConnectionLossError):
            op()
        took = time.monotonic() - t0
        # the backoff's last sleep may end up to 1 s (its cap) before the deadline; never much after it
        assert OP_MS / 1000 - 1.1 <= took <= OP_MS / 1000 + 1.0, took

    # deregister() and stop() do not wait for ZooKeeper
    t0 = time.monotonic()
    reg.deregister()
    # waiting for ZooKeeper would take OP_MS (2 s) at least; CI's loaded parallel phase once took 0.24 s here
    assert time.monotonic() - t0 < 1.0
    t0 = time.monotonic()
    b.stop()
    assert time.monotonic() - t0 <= zkmod.STOP_TIMEOUT_S + 0.5
    assert not b.connected
