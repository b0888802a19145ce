"""kbroker-admin configs --entity-type clients|users (kbroker/cli/client_quotas.py): kafka-configs.sh's syntax and
exact output, over --bootstrap-server (the requests answered by the real handlers over an embedded backend) and
--zookeeper (the znodes of an embedded backend); SCRAM users still go their own way."""
import contextlib
import json

import pytest

from kbroker.cli import admin as cli
from kbroker.cli import client_quotas
from kbroker.coord.embedded import EmbeddedBackend
from kbroker.handlers.client_quotas import alter_client_quotas, describe_client_quotas
from kbroker.handlers.scram_credentials import alter_user_scram_credentials, describe_user_scram_credentials
from kbroker.quota.store import QuotaAdmin, QuotaLimits
from kbroker.security.scram_store import ScramAdmin


@pytest.fixture
def backend(tmp_path):
    b = EmbeddedBackend(str(tmp_path / "coord")).start()
    yield b
    b.stop()


class Broker:
    """The AdminClient stand-in: each request goes to the real handler (no authorizer)."""

    HANDLERS = {"DescribeClientQuotas": describe_client_quotas, "AlterClientQuotas": alter_client_quotas,
                "DescribeUserScramCredentials": describe_user_scram_credentials,
                "AlterUserScramCredentials": alter_user_scram_credentials}

    def __init__(self, backend):
        self.limits = QuotaLimits(backend).load_all()
        self.services = type("S", (), {"client_quotas": QuotaAdmin(backend, self.limits), "authorizer": None,
                                       "scram": ScramAdmin(backend)})()
        self.identity = type("I", (), {"in_process": False})()
        self.cluster = self
        self.requests = []

    def authorize(self, *a, **kw):
        return True

    def any_connection(self):
        return self

    def request(self, name, body):
        self.requests.append(name)
        return self.HANDLERS[name](self, body)


def run(capsys, backend, *argv, zk=False):
    mode = ["--zookeeper", "zk:2181"] if zk else ["--bootstrap-server", "b:9092"]
    broker = Broker(backend)
    args = cli.parse_configs_args(mode + list(argv))
    rc = cli._run(lambda a: client_quotas.run(a, cli.parse_add_config(a.add_config),
                                              cli.parse_delete_config(a.delete_config),
                                              lambda _b: contextlib.nullcontext(broker), backend=backend),
                  args, "config")
    out, err = capsys.readouterr()
    return rc, out, err


def lines(capsys, backend, *argv, zk=False):
    rc, out, err = run(capsys, backend, *argv, zk=zk)
    assert (rc, err) == (0, ""), (argv, out, err)
    return out.splitlines()


ALTER = ["--alter", "--add-config"]


@pytest.mark.parametrize("zk", [False, True])
def test_alter_and_describe_every_kind_of_entity(capsys, backend, zk):
    assert lines(capsys, backend, "--entity-type", "clients", "--entity-name", "slow", *ALTER,
                 "producer_byte_rate=1048576", zk=zk) == (
        ["Completed updating config for entity: client-id 'slow'."] if zk else
        ["Completed updating config for client slow."])
    assert lines(capsys, backend, "--entity-type", "clients", "--entity-default", *ALTER,
                 "consumer_byte_rate=10485760,request_percentage=12.5", zk=zk) == (
        ["Completed updating config for entity: default client-id."] if zk else
        ["Completed updating default config for clients in the cluster."])
    assert lines(capsys, backend, "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
                 "--entity-default", *ALTER, "producer_byte_rate=2048", zk=zk) == (
        ["Completed updating config for entity: user-principal 'alice', default client-id."] if zk else
        ["Completed updating config for user alice."])
    assert lines(capsys, backend, "--entity-type", "users", "--entity-default", *ALTER, "producer_byte_rate=300",
                 zk=zk) == (["Completed updating config for entity: default user-principal."] if zk else
                            ["Completed updating default config for users in the cluster."])
    # The znodes are Kafka's, whichever way they were written.
    assert json.loads(backend.get("/config/clients/slow")[0]) == {"version": 1,
                                                                  "config": {"producer_byte_rate": "1048576"}}
    assert json.loads(backend.get("/config/users/alice/clients/<default>")[0])["config"] == {
        "producer_byte_rate": "2048"}
    assert len(backend.get_children("/config/changes")) == 4
    for describe_mode in (False, True):
        assert lines(capsys, backend, "--entity-type", "clients", "--describe", zk=describe_mode) == (
            ["Configs for default client-id are consumer_byte_rate=10485760,request_percentage=12.5",
             "Configs for client-id 'slow' are producer_byte_rate=1048576"]
            if describe_mode else
            ["Quota configs for the default client-id are consumer_byte_rate=1.048576E7, request_percentage=12.5",
             "Quota configs for client-id 'slow' are producer_byte_rate=1048576.0"])
    assert lines(capsys, backend, "--entity-type", "clients", "--entity-name", "slow", "--describe") == [
        "Quota configs for client-id 'slow' are producer_byte_rate=1048576.0"]
    assert lines(capsys, backend, "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
                 "--describe") == ["Quota configs for user-principal 'alice', the default client-id are "
                                   "producer_byte_rate=2048.0"]
    assert lines(capsys, backend, "--entity-type", "users", "--entity-default", "--describe") == [
        "Quota configs for the default user-principal are producer_byte_rate=300.0"]
    assert lines(capsys, backend, "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
                 "--entity-default", "--describe", zk=True) == [
        "Configs for user-principal 'alice', default client-id are producer_byte_rate=2048"]
    # Delete: the entity's key goes; a key it does not have is Kafka's "Invalid config(s)".
    assert lines(capsys, backend, "--entity-type", "clients", "--entity-name", "slow", "--alter",
                 "--delete-config", "producer_byte_rate", zk=zk)[0].startswith("Completed updating config for")
    assert json.loads(backend.get("/config/clients/slow")[0])["config"] == {}
    assert run(capsys, backend, "--entity-type", "clients", "--entity-name", "slow", "--alter", "--delete-config",
               "producer_byte_rate", zk=zk) == (1, "", "Error while executing config command : Invalid config(s): "
                                                        "producer_byte_rate\n")


def test_user_and_client_shorthands(capsys, backend):
    assert lines(capsys, backend, "--user", "bob", "--client", "app", *ALTER, "producer_byte_rate=64") == [
        "Completed updating config for user bob."]
    assert lines(capsys, backend, "--client-defaults", *ALTER, "producer_byte_rate=32") == [
        "Completed updating default config for clients in the cluster."]
    assert lines(capsys, backend, "--user", "bob", "--client-defaults", *ALTER, "producer_byte_rate=16") == [
        "Completed updating config for user bob."]
    assert sorted(backend.get_children("/config/users/bob/clients")) == ["<default>", "app"]
    assert lines(capsys, backend, "--user-defaults", "--describe") == []
    assert lines(capsys, backend, "--client-defaults", "--describe") == [
        "Quota configs for the default client-id are producer_byte_rate=32.0"]


def test_bad_values_and_keys(capsys, backend):
    c = ["--entity-type", "clients", "--entity-name", "c"]
    assert run(capsys, backend, *c, *ALTER, "producer_byte_rate=1.5") == (
        1, "", "Error while executing config command : Configuration producer_byte_rate must be a LONG value\n")
    assert run(capsys, backend, *c, *ALTER, "producer_byte_rate=fast") == (
        1, "", "Error while executing config command : Cannot parse quota configuration value for "
               "producer_byte_rate: fast\n")
    assert run(capsys, backend, *c, *ALTER, "producer_byte_rate=fast", zk=True) == (
        1, "", "Error while executing config command : Invalid value fast for configuration producer_byte_rate: "
               "Not a number of type LONG\n")
    assert run(capsys, backend, *c, *ALTER, "retention.ms=5") == (
        1, "", "Error while executing config command : Only quota configs can be added for 'clients' using "
               "--bootstrap-server. Unexpected config names: Set(retention.ms)\n")
    assert run(capsys, backend, "--entity-type", "users", "--entity-name", "u", *ALTER,
               "SCRAM-SHA-256=[password=x],producer_byte_rate=5") == (
        1, "", "Error while executing config command : Cannot alter both quota and SCRAM credential configs "
               "simultaneously for 'users' using --bootstrap-server.\n")
    assert backend.exists("/config/clients/c") is None and backend.exists("/config/users/u") is None
    for argv, message in [
            (["--entity-type", "clients", "--entity-type", "clients", "--describe"],
             "Duplicate entity type(s) specified: clients"),
            (["--entity-type", "clients", "--entity-name", "a", "--entity-name", "b", "--describe"],
             "More entity names specified than entity types"),
            (["--entity-type", "topics", "--entity-default", "--describe"],
             "one --entity-type and --entity-name (--entity-default only for brokers) for topics")]:
        with pytest.raises(cli.UsageError) as ei:
            cli.parse_configs_args(["--bootstrap-server", "b:1"] + argv)
        assert str(ei.value) == message


def test_scram_users_keep_their_path_and_share_the_znode(capsys, backend, monkeypatch):
    from kbroker.cli import scram_users
    monkeypatch.setattr(scram_users, "zookeeper", lambda *a, **kw: contextlib.nullcontext(backend))
    u = ["--entity-type", "users", "--entity-name", "alice"]
    assert lines(capsys, backend, *u, *ALTER, "SCRAM-SHA-256=[iterations=4096,password=pw]") == [
        "Completed updating config for user alice."]
    assert lines(capsys, backend, *u, *ALTER, "consumer_byte_rate=100") == [
        "Completed updating config for user alice."]
    assert sorted(json.loads(backend.get("/config/users/alice")[0])["config"]) == ["SCRAM-SHA-256",
                                                                                    "consumer_byte_rate"]
    # A user's describe shows the quotas, then the SCRAM credentials (Kafka 3.x).
    assert lines(capsys, backend, *u, "--describe") == [
        "Quota configs for user-principal 'alice' are consumer_byte_rate=100.0",
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=4096"]
    assert lines(capsys, backend, *u, "--describe", zk=True) == [
        "Configs for user-principal 'alice' are consumer_byte_rate=100",
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=4096"]
    assert lines(capsys, backend, *u, "--alter", "--delete-config", "consumer_byte_rate", zk=True) == [
        "Completed updating config for entity: user-principal 'alice'."]
    assert list(json.loads(backend.get("/config/users/alice")[0])["config"]) == ["SCRAM-SHA-256"]
