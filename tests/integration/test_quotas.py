"""Client quotas end to end on one broker (issue 12): real clients, measured rates, librdkafka's statistics.

One broker process for the module (embedded coordination backend) with a PLAINTEXT listener and a SASL_PLAINTEXT
listener (PLAIN; users admin, alice, bob from a JAAS file named by KAFKA_OPTS, as test_security_sasl.py). Quotas
are set with ``kbroker-admin configs --bootstrap-server`` (AlterClientQuotas) while the broker runs, so every one
of them is also a dynamic change. Each test has its own client ids / users and topics.

What is measured, and why the tolerances:
* The quota is 1 MiB/s (``QUOTA``). Kafka's rate (kbroker/quota/sensor.py) counts at least
  ``quota.window.num`` - 1 windows of elapsed time, so a client that always has data to send gets
  quota x (num - 1) x window through before its first throttle, and the same again each time the sample holding
  that burst expires (every num x window seconds): its acknowledged bytes rise in steps of that size. With Kafka's
  defaults (11 x 1 s) the steps are ~10 MiB every 11 s, and a 20 s window could be off by +-50 %. This broker
  uses ``quota.window.num=2`` (windows of 1 s): steps of ~1 MiB every 2 s, and every measurement window is a
  whole number of those 2 s periods, so it averages whole steps.
* A throttled Fetch carries its records and the throttle they cost (Kafka 0.10.1's rule, kbroker/handlers/fetch.py),
  so the consumer is held at its quota like the producer: within 10 %. (Kafka >= 2.0 answers a throttled Fetch
  empty yet throttles for the records it did not carry: Apache Kafka 4.4.0, same client and settings, measured on
  this machine, held this consumer at 0.66 MiB/s under a 1 MiB/s quota; kbroker did 0.62-0.71 with that rule.)
* Every measurement window starts 1 s after the client first reported a non-zero throttle (librdkafka
  ``brokers.*.throttle.max`` in the statistics every 500 ms; the raw client reads ``throttle_time_ms`` itself).
  The held rate must be within 10 % of the quota (the spec), over 20 s for the producer (the spec's figure) and
  10 s for the consumer, the user and the raw client. Values are 1 KiB and requests / fetch responses at most
  64 / 256 KiB; batch framing (~1-2 %) is counted by the broker, not in the value bytes.
"""
import time

import pytest

from tests.integration.harness import BrokerProcess, free_port, wait_until
from tests.integration.test_clients_common import create_topic
from tests.integration.test_quotas_common import (MIB, QUOTA, PipelinedRawProducer, RateConsumer, RateProducer,
                                                  alter_quota, describe_quota, fill_topic)

pytestmark = pytest.mark.timeout(240)

JAAS = """KafkaServer {
    org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin" password="admin-secret"
    user_admin="admin-secret"
    user_alice="alice-secret"
    user_bob="bob-secret";
};
"""
FAST_RATE = 4 * MIB
WINDOW_NUM = 2            # quota.window.num: see the module docstring (quota.window.size.seconds stays 1)
SETTLE_S = 1.0            # from the first throttle to the start of a measurement window
THROTTLE_WAIT_S = 20.0    # bound for the first throttle: ~1-2 MiB of burst, even at 0.1 MiB/s


def sasl(user: str) -> dict:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": user,
            "sasl.password": f"{user}-secret"}


@pytest.fixture(scope="module")
def qbroker(tmp_path_factory):
    base = tmp_path_factory.mktemp("quotas")
    jaas = base / "kafka_server_jaas.conf"
    jaas.write_text(JAAS)
    port, sasl_port = free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
    b = BrokerProcess(base / "b0", port=port, overrides={
        "listeners": listeners, "advertised.listeners": listeners, "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN", "quota.window.num": WINDOW_NUM},
        env={"KAFKA_OPTS": f"-Djava.security.auth.login.config={jaas}"})
    b.sasl_bootstrap = f"127.0.0.1:{sasl_port}"
    b.start()
    yield b
    b.close()


def run_until(deadline: float, *clients) -> None:
    """Let the measurement window pass (monotonic ``deadline``), failing early when a client thread fails."""
    def passed():
        for c in clients:
            assert not c.errors, c.errors
        return time.monotonic() >= deadline

    wait_until(passed, deadline - time.monotonic() + 5, 0.1, "the measurement window")


def wait_throttled(client) -> float:
    """Bounded wait for ``client``'s first non-zero throttle; returns the start of the measurement window."""
    wait_until(lambda: (not client.errors or pytest.fail(str(client.errors))) and client.first_throttled_at,
               THROTTLE_WAIT_S, 0.1, f"{type(client).__name__} to be throttled")
    start = client.first_throttled_at + SETTLE_S
    run_until(start, client)
    return start


def assert_held(rate: float, what: str) -> None:
    assert abs(rate - QUOTA) <= 0.10 * QUOTA, f"{what}: {rate / MIB:.3f} MiB/s, quota 1 MiB/s +- 10 %"


def test_producer_quota_holds_client_id_not_others(qbroker):
    create_topic(qbroker.bootstrap, "q-slow")
    create_topic(qbroker.bootstrap, "q-fast")
    alter_quota(qbroker.bootstrap, [("clients", "slow")], add={"producer_byte_rate": QUOTA})
    assert "producer_byte_rate=1048576" in describe_quota(qbroker.bootstrap, [("clients", "slow")])
    fast = RateProducer(qbroker.bootstrap, "q-fast", "fast", rate=FAST_RATE).start()
    slow = None
    try:
        alone_t0 = time.monotonic() + 1.0   # past the producer's bootstrap
        run_until(alone_t0 + 5, fast)
        alone = fast.bytes_between(alone_t0, alone_t0 + 5) / 5
        slow = RateProducer(qbroker.bootstrap, "q-slow", "slow").start()
        t0 = wait_throttled(slow)
        run_until(t0 + 20, slow, fast)
        slow_rate = slow.bytes_between(t0, t0 + 20) / 20
        beside = fast.bytes_between(t0, t0 + 20) / 20
    finally:
        fast.stop()
        if slow is not None:
            slow.stop()
    print(f"producer: slow {slow_rate / MIB:.3f} MiB/s, unthrottled {alone / MIB:.2f} alone / {beside / MIB:.2f} "
          f"beside, largest throttle {slow.throttle_max()} ms")
    assert alone >= 0.9 * FAST_RATE, f"alone the unthrottled producer managed {alone / MIB:.2f} of 4 MiB/s"
    assert_held(slow_rate, "client.id=slow over 20 s")
    assert beside >= 0.9 * alone, f"unthrottled producer slowed: {beside / MIB:.2f} vs {alone / MIB:.2f} MiB/s alone"
    assert slow.throttle_max() > 0
    assert fast.stats_seen() >= 20 and fast.throttle_max() == 0, fast.throttle_maxes


def test_consumer_quota_holds_client_id_not_others(qbroker):
    topic, total = "q-fetch", 40 * MIB
    create_topic(qbroker.bootstrap, topic)
    fill_topic(qbroker.bootstrap, topic, total)
    alter_quota(qbroker.bootstrap, [("clients", "slowc")], add={"consumer_byte_rate": QUOTA})

    def full_read():
        c = RateConsumer(qbroker.bootstrap, topic, "fastc", limit=total).start()
        wait_until(lambda: (not c.errors or pytest.fail(str(c.errors))) and c.done_at, 60, 0.05,
                   "the unthrottled consumer to read 40 MiB")
        wait_until(lambda: c.stats_seen() >= 2, 10, 0.05, "two statistics callbacks")
        c.stop()
        first = c.log[0][0]
        # from the first fetched record: the bootstrap and the first fetch's round trip are not reading
        return (total - c.log[0][1]) / max(c.done_at - first, 1e-3), c

    alone, _ = full_read()
    slow = RateConsumer(qbroker.bootstrap, topic, "slowc").start()
    try:
        t0 = wait_throttled(slow)
        beside, fastc = full_read()
        run_until(t0 + 10, slow)
        slow_rate = slow.bytes_between(t0, t0 + 10) / 10
    finally:
        slow.stop()
    print(f"consumer: slow {slow_rate / MIB:.3f} MiB/s, unthrottled {alone / MIB:.1f} alone / {beside / MIB:.1f} "
          f"beside, largest throttle {slow.throttle_max()} ms")
    # Held to the quota, never above it; below it by Kafka's own fetch throttling (see the module docstring):
    # Kafka >= 2.0's empty throttled answers would give ~0.66 MiB/s here (Apache Kafka 4.4.0, same windows).
    assert 0.9 * QUOTA <= slow_rate <= 1.1 * QUOTA, f"client.id=slowc over 10 s: {slow_rate / MIB:.3f} MiB/s"
    assert beside >= 0.25 * alone, f"unthrottled consumer: {beside / MIB:.1f} MiB/s beside, {alone / MIB:.1f} alone"
    assert slow.throttle_max() > 0
    assert fastc.stats_seen() >= 1 and fastc.throttle_max() == 0, fastc.throttle_maxes


def test_user_quota_over_sasl_plain(qbroker):
    """users/alice is held to 1 MiB/s; bob, with the same client.id, is not (the user entity decides)."""
    create_topic(qbroker.bootstrap, "q-alice")
    create_topic(qbroker.bootstrap, "q-bob")
    alter_quota(qbroker.bootstrap, [("users", "alice")], add={"producer_byte_rate": QUOTA})
    alice = RateProducer(qbroker.sasl_bootstrap, "q-alice", "app", **sasl("alice")).start()
    bob = RateProducer(qbroker.sasl_bootstrap, "q-bob", "app", rate=FAST_RATE, **sasl("bob")).start()
    try:
        t0 = wait_throttled(alice)
        run_until(t0 + 10, alice, bob)
        alice_rate = alice.bytes_between(t0, t0 + 10) / 10
        bob_rate = bob.bytes_between(t0, t0 + 10) / 10
    finally:
        alice.stop()
        bob.stop()
    print(f"users: alice {alice_rate / MIB:.3f} MiB/s, bob {bob_rate / MIB:.2f} MiB/s")
    assert_held(alice_rate, "user alice over 10 s")
    assert bob_rate >= 0.9 * FAST_RATE, f"user bob slowed: {bob_rate / MIB:.2f} of 4 MiB/s"
    assert alice.throttle_max() > 0
    assert bob.stats_seen() >= 10 and bob.throttle_max() == 0, bob.throttle_maxes


def test_client_ignoring_throttle_is_held_by_muted_channel(qbroker):
    create_topic(qbroker.bootstrap, "q-raw")
    alter_quota(qbroker.bootstrap, [("clients", "raw-slow")], add={"producer_byte_rate": QUOTA})
    raw = PipelinedRawProducer(qbroker.host, qbroker.port, "q-raw", "raw-slow").start()
    try:
        t0 = wait_throttled(raw)
        n0 = len(raw.throttles)
        run_until(t0 + 10, raw)
        rate = raw.bytes_between(t0, t0 + 10) / 10
        throttles = raw.throttles[n0:]
    finally:
        raw.stop()
    print(f"raw client: {rate / MIB:.3f} MiB/s, {len(throttles)} responses, throttles up to {max(throttles)} ms")
    assert_held(rate, "raw client ignoring throttle_time_ms over 10 s")
    # held because the broker stopped reading, not because the client waited: it never did
    assert throttles and sum(t > 0 for t in throttles) >= len(throttles) // 2, throttles
