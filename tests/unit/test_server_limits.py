"""The connection/request limit keys: parsing and cross-key rules (startup refuses bad values naming the key), their
translation into ServerLimits, and the two accounting objects (RequestMemory, ConnectionQuotas)."""
import gevent
import pytest

from kbroker.config import BrokerConfig, ConfigError
from kbroker.server.limits import ConnectionQuotas, RequestMemory, ServerLimits, client_ip

MiB = 1 << 20


def test_defaults_are_kafkas_and_kbrokers_documented_ones():
    lim = ServerLimits.from_config(BrokerConfig.from_dict({}))
    assert (lim.max_connections, lim.max_connections_per_ip, lim.ip_overrides) == (2147483647, 2147483647, {})
    assert (lim.idle_s, lim.receive_timeout_s, lim.max_request_size) == (600.0, 30.0, 104857600)
    assert lim.request_memory == 256 * MiB  # queued.max.request.bytes=-1: kbroker's bound, not unbounded
    assert lim.max_elements == 100_000
    assert lim.sweep_interval() == 1.0


def test_keys_reach_server_limits():
    cfg = BrokerConfig.from_dict({
        "max.connections": "7", "max.connections.per.ip": "3",
        "max.connections.per.ip.overrides": "127.0.0.2:1, [::1]:9", "connections.max.idle.ms": "-1",
        "socket.request.receive.timeout.ms": "400", "socket.request.max.bytes": str(300 * MiB),
        "queued.max.request.bytes": "0", "request.max.elements": "55"})
    lim = ServerLimits.from_config(cfg)
    assert (lim.max_connections, lim.max_connections_per_ip) == (7, 3)
    assert lim.ip_overrides == {"127.0.0.2": 1, "::1": 9}
    assert lim.idle_s is None and lim.receive_timeout_s == 0.4 and lim.sweep_interval() == 0.1
    assert lim.request_memory == 300 * MiB  # <= 0 and socket.request.max.bytes above 256 MiB: one request fits
    assert lim.max_elements == 55
    assert ServerLimits.from_config(BrokerConfig.from_dict({"queued.max.request.bytes": str(200 * MiB)})) \
        .request_memory == 200 * MiB


def test_host_names_in_overrides_stand_for_their_addresses():
    cfg = BrokerConfig.from_dict({"max.connections.per.ip.overrides": "localhost:4"})
    assert cfg.max_connections_per_ip_overrides.get("127.0.0.1") == 4


@pytest.mark.parametrize("props,key", [
    ({"max.connections.per.ip.overrides": "127.0.0.1"}, "max.connections.per.ip.overrides"),
    ({"max.connections.per.ip.overrides": "127.0.0.1:x"}, "max.connections.per.ip.overrides"),
    ({"max.connections.per.ip.overrides": "127.0.0.1:-2"}, "max.connections.per.ip.overrides"),
    ({"max.connections.per.ip.overrides": "no-such-host.invalid:3"}, "max.connections.per.ip.overrides"),
    ({"max.connections.per.ip": "0"}, "max.connections.per.ip"),        # Kafka: 0 only with overrides
    ({"max.connections.per.ip": "-1"}, "max.connections.per.ip"),
    ({"max.connections": "-1"}, "max.connections"),
    ({"queued.max.request.bytes": "1000"}, "queued.max.request.bytes"),  # Kafka: >= socket.request.max.bytes
    ({"socket.request.receive.timeout.ms": "0"}, "socket.request.receive.timeout.ms"),
    ({"request.max.elements": "0"}, "request.max.elements"),
    ({"metadata.request.max.topics": "0"}, "metadata.request.max.topics"),
])
def test_invalid_values_stop_startup_naming_the_key(props, key):
    with pytest.raises(ConfigError) as e:
        BrokerConfig.from_dict(props)
    assert key in str(e.value)


def test_zero_per_ip_allowed_with_overrides():
    cfg = BrokerConfig.from_dict({"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "127.0.0.9:2"})
    quotas = ConnectionQuotas(ServerLimits.from_config(cfg))
    assert quotas.admit("127.0.0.9") and quotas.admit("127.0.0.9") and not quotas.admit("127.0.0.9")
    assert not quotas.admit("127.0.0.1")


def test_connection_quotas_count_per_ip_and_pause_at_the_cap():
    resumed = []
    q = ConnectionQuotas(ServerLimits(max_connections=3, max_connections_per_ip=2), protected_listener="REPL")
    q.on_release.append(lambda: resumed.append(q.total))
    assert q.admit("a") and q.admit("a") and not q.admit("a")
    assert q.admit("b") and q.total == 3
    assert q.full("PLAINTEXT") and not q.full("REPL")       # the exempt listener keeps accepting
    assert q.admit("c") and q.over()                        # ... and may go over: the server then closes one
    q.release("c")
    q.release("a")
    assert q.per_ip == {"a": 1, "b": 1} and not q.full("PLAINTEXT") and resumed == [2]


def test_client_ip_unmaps_ipv4_mapped_addresses():
    assert client_ip(("::ffff:127.0.0.2", 5, 0, 0)) == "127.0.0.2"
    assert client_ip(("::1", 5, 0, 0)) == "::1"
    assert client_ip(("10.1.2.3", 9)) == "10.1.2.3"


def test_request_memory_is_non_strict_and_wakes_waiters():
    m = RequestMemory(100)
    assert m.try_reserve(80) and m.try_reserve(70)  # granted while anything is left: may overshoot once
    assert not m.try_reserve(1) and m.used == 150 and m.peak == 150
    got = []
    waiter = gevent.spawn(lambda: got.append(m.reserve(30, timeout=5)))
    gevent.sleep(0.05)
    assert got == []                                  # still waiting: 150 >= 100
    m.release(70)
    waiter.join(1)
    assert got == [True] and m.used == 110
    assert m.reserve(1, timeout=0.05) is False        # times out when nothing is released
    m.release(110)
    assert m.used == 0
