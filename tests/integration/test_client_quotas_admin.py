"""Client quota administration against a real kbroker-server (KIP-546; issue 12): ``kbroker-admin configs
--entity-type clients|users`` over --bootstrap-server with kafka-configs.sh's exact output, and Kafka's own Java
Admin (tests/java's driver, when built) altering and describing the same quotas over DescribeClientQuotas /
AlterClientQuotas, including Kafka's INVALID_REQUEST for a fractional byte rate and validateOnly.
(Enforcement and the 3-broker propagation: tests/integration/test_quotas*.py.)"""
import subprocess
import sys

import pytest

from tests.integration.harness import REPO_ROOT, BrokerProcess
from tests.integration.java_driver import java_driver, ok  # noqa: F401 - fixture

pytestmark = pytest.mark.timeout(180)

ADMIN = [sys.executable, "-m", "kbroker.cli.admin", "configs"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("client_quotas"))
    try:
        b.start()
        yield b
    finally:
        b.close()


def configs(broker, *args, rc=0):
    done = subprocess.run(ADMIN + ["--bootstrap-server", broker.bootstrap] + list(args), capture_output=True,
                          timeout=60, cwd=str(REPO_ROOT))
    assert done.returncode == rc, (args, done.stdout, done.stderr)
    return done.stdout.decode().splitlines(), done.stderr.decode()


def test_kafka_configs_syntax_and_output(broker):
    assert configs(broker, "--entity-type", "clients", "--entity-name", "slow", "--alter", "--add-config",
                   "producer_byte_rate=1048576,consumer_byte_rate=2097152") == (
        ["Completed updating config for client slow."], "")
    assert configs(broker, "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
                   "--entity-default", "--alter", "--add-config", "request_percentage=50") == (
        ["Completed updating config for user alice."], "")
    assert configs(broker, "--entity-type", "clients", "--entity-name", "slow", "--describe") == (
        ["Quota configs for client-id 'slow' are consumer_byte_rate=2097152.0, producer_byte_rate=1048576.0"], "")
    assert configs(broker, "--entity-type", "users", "--entity-type", "clients", "--describe") == (
        ["Quota configs for user-principal 'alice', the default client-id are request_percentage=50.0"], "")
    assert configs(broker, "--entity-type", "clients", "--entity-name", "slow", "--alter", "--add-config",
                   "producer_byte_rate=1.5", rc=1) == (
        [], "Error while executing config command : Configuration producer_byte_rate must be a LONG value\n")
    assert configs(broker, "--entity-type", "clients", "--entity-name", "slow", "--alter", "--delete-config",
                   "consumer_byte_rate") == (["Completed updating config for client slow."], "")
    assert configs(broker, "--entity-type", "clients", "--describe") == (
        ["Quota configs for client-id 'slow' are producer_byte_rate=1048576.0"], "")


def test_java_admin_alters_and_describes(broker, java_driver):  # noqa: F811 - fixture
    steps = [
        {"op": "alter_client_quotas", "entries": [
            {"entity": {"client-id": "java-app"}, "ops": [{"key": "producer_byte_rate", "value": 4096}]},
            {"entity": {"user": None}, "ops": [{"key": "consumer_byte_rate", "value": 8192}]},
            {"entity": {"client-id": "bad"}, "ops": [{"key": "producer_byte_rate", "value": 1.5}]},
            {"entity": {"client-id": "bad2"}, "ops": [{"key": "no_such_quota", "value": 1}]}]},
        {"op": "alter_client_quotas", "validateOnly": True, "entries": [
            {"entity": {"client-id": "never"}, "ops": [{"key": "producer_byte_rate", "value": 1}]}]},
        {"op": "describe_client_quotas", "components": [{"type": "client-id", "match": "exact",
                                                         "name": "java-app"}], "strict": True},
        {"op": "describe_client_quotas", "components": [{"type": "user", "match": "default"}], "strict": True},
        {"op": "describe_client_quotas", "components": [{"type": "client-id", "match": "exact",
                                                         "name": "never"}], "strict": True},
    ]
    altered, validated, app, default_user, never = (ok(s) for s in java_driver(broker.bootstrap, steps))
    assert altered["results"][:2] == [None, None]
    assert [(r["error"]["type"], r["error"]["message"]) for r in altered["results"][2:]] == [
        ("InvalidRequestException", "Configuration producer_byte_rate must be a LONG value"),
        ("InvalidRequestException", "Invalid configuration key no_such_quota")]
    assert validated["results"] == [None]
    assert app["entries"] == [{"entity": {"client-id": "java-app"}, "values": {"producer_byte_rate": 4096.0}}]
    assert default_user["entries"] == [{"entity": {"user": None}, "values": {"consumer_byte_rate": 8192.0}}]
    assert never["entries"] == []
    # kafka-configs.sh sees what Kafka's Admin wrote.
    assert configs(broker, "--entity-type", "users", "--entity-default", "--describe") == (
        ["Quota configs for the default user-principal are consumer_byte_rate=8192.0"], "")
