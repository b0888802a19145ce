"""kbroker-admin acls (kbroker/cli/acls.py): kafka-acls.sh's options, checks and output, on the znodes of an
embedded backend (the --authorizer-properties path; the --bootstrap-server path is in
tests/integration/test_acls_admin.py)."""
import io
import json

import pytest

from kbroker.cli import acls as cli
from kbroker.cli.admin import main as admin_main
from kbroker.coord.embedded import EmbeddedBackend
from kbroker.security import acl
from kbroker.security.authorizer import AclAuthorizer, AclEntry, decode_acls

ZK = ["--authorizer-properties", "zookeeper.connect=unused:2181"]


@pytest.fixture
def backend(tmp_path):
    b = EmbeddedBackend(str(tmp_path / "coord")).start()
    yield b
    b.stop()


def run(backend, *argv, stdin=""):
    out = io.StringIO()
    rc = cli.main(list(ZK) + list(argv), out=out, stdin=io.StringIO(stdin), backend=backend)
    return rc, out.getvalue()


def test_add_list_remove_output(backend):
    rc, out = run(backend, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation",
                  "describe", "--topic", "orders")
    assert rc == 0
    header = "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)"
    entries = ("\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)\n"
               "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)")
    assert out == ("Adding ACLs for resource `%s`: \n %s \n\n" % (header, entries)
                   + "Current ACLs for resource `%s`: \n %s \n\n" % (header, entries))
    assert json.loads(backend.get("/kafka-acl/Topic/orders")[0])["acls"][1] == {
        "principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}
    rc, out = run(backend, "--add", "--deny-principal", "User:bob", "--deny-host", "10.0.0.9", "--group", "g*",
                  "--resource-pattern-type", "prefixed", "--operation", "Read")
    assert rc == 0
    rc, out = run(backend, "--list")
    assert out == ("Current ACLs for resource `%s`: \n %s \n\n" % (header, entries)
                   + "Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=g*, patternType=PREFIXED)`:"
                     " \n \t(principal=User:bob, host=10.0.0.9, operation=READ, permissionType=DENY) \n\n")
    rc, out = run(backend, "--list", "--topic", "orders", "--principal", "User:bob")
    assert out == "ACLs for principal `User:bob`\n"
    # --remove asks first: "n" keeps the ACLs.
    rc, out = run(backend, "--remove", "--topic", "orders", stdin="n\n")
    assert out.startswith("Are you sure you want to delete all ACLs for resource filter `ResourcePattern("
                          "resourceType=TOPIC, name=orders, patternType=LITERAL)`? (y/n)\n")
    assert backend.exists("/kafka-acl/Topic/orders") is not None
    rc, out = run(backend, "--remove", "--allow-principal", "User:alice", "--operation", "Read", "--topic",
                  "orders", stdin="y\n")
    assert rc == 0 and "Are you sure you want to remove ACLs: \n \t(principal=User:alice" in out
    assert decode_acls(backend.get("/kafka-acl/Topic/orders")[0]) == {
        AclEntry("User:alice", "*", acl.DESCRIBE, acl.ALLOW)}
    rc, out = run(backend, "--remove", "--topic", "orders", "--force")
    assert (rc, out) == (0, "")
    assert backend.exists("/kafka-acl/Topic/orders") is None
    # A running broker's authorizer would see every change: each one left a notification.
    assert len(backend.get_children("/kafka-acl-changes")) == 3
    assert len(backend.get_children("/kafka-acl-extended-changes")) == 1


def test_producer_consumer_and_idempotent(backend):
    rc, _ = run(backend, "--add", "--allow-principal", "User:p", "--producer", "--idempotent", "--topic", "t",
                "--transactional-id", "tx")
    assert rc == 0
    rc, _ = run(backend, "--add", "--allow-principal", "User:c", "--consumer", "--topic", "t", "--group", "g")
    assert rc == 0
    got = {(b.pattern.resource_type, b.pattern.name, b.entry.principal, b.entry.operation)
           for b in AclAuthorizer(backend).start(watch=False).acls()}
    assert got == {("Topic", "t", "User:p", acl.WRITE), ("Topic", "t", "User:p", acl.DESCRIBE),
                   ("Topic", "t", "User:p", acl.CREATE), ("TransactionalId", "tx", "User:p", acl.WRITE),
                   ("TransactionalId", "tx", "User:p", acl.DESCRIBE),
                   ("Cluster", "kafka-cluster", "User:p", acl.IDEMPOTENT_WRITE),
                   ("Topic", "t", "User:c", acl.READ), ("Topic", "t", "User:c", acl.DESCRIBE),
                   ("Group", "g", "User:c", acl.READ)}


@pytest.mark.parametrize("argv, message", [
    (["--list", "--add", "--topic", "t"], "exactly one action"),
    (["--add", "--topic", "t", "--allow-principal", "User:a", "--bootstrap-server", "h:1"], "Only one of"),
    (["--list", "--allow-principal", "User:a"], "can't be used with option \"[allow-principal]\""),
    (["--add", "--producer", "--allow-principal", "User:a"], "With --producer you must specify a --topic"),
    (["--add", "--consumer", "--topic", "t", "--allow-principal", "User:a"], "With --consumer you must specify"),
    (["--add", "--idempotent", "--topic", "t", "--allow-principal", "User:a"], "--idempotent option is only"),
    (["--add", "--topic", "t", "--allow-principal", "User:a", "--resource-pattern-type", "match"],
     "A '--resource-pattern-type' value of 'MATCH' is not valid when adding acls."),
    (["--add", "--topic", "t", "--allow-principal", "alice"], "principalType:principalName"),
    (["--add", "--topic", "t", "--allow-principal", "User:a", "--operation", "Fly"], "Invalid operation Fly"),
    (["--add", "--group", "g", "--allow-principal", "User:a", "--operation", "Write"],
     "ResourceType GROUP only supports operations All, Read, Describe, Delete"),
    (["--add", "--topic", "t"], "You must specify one of: --allow-principal, --deny-principal"),
    (["--add", "--user-principal", "User:u", "--allow-principal", "User:a", "--operation", "Read"],
     "ResourceType USER only supports operations All, CreateTokens, DescribeTokens"),
    (["--add", "--transactional-id", "x", "--allow-principal", "User:a", "--operation", "Read"],
     "ResourceType TRANSACTIONAL_ID only supports operations All, Describe, Write"),
    (["--add", "--allow-principal", "User:a"], "You must provide at least one resource"),
])
def test_usage_errors(backend, capsys, argv, message):
    rc, out = run(backend, *argv)
    assert rc == 1
    assert message in capsys.readouterr().err
    assert backend.exists("/kafka-acl/Topic/t") is None


def test_delegation_token_and_user_resources(backend):
    rc, _ = run(backend, "--add", "--allow-principal", "User:a", "--operation", "CreateTokens", "--user-principal",
                "User:owner")
    assert rc == 0
    rc, _ = run(backend, "--add", "--allow-principal", "User:a", "--operation", "Describe", "--delegation-token",
                "tok1")
    assert rc == 0
    assert decode_acls(backend.get("/kafka-acl/User/User:owner")[0]) == {
        AclEntry("User:a", "*", acl.CREATE_TOKENS, acl.ALLOW)}
    assert decode_acls(backend.get("/kafka-acl/DelegationToken/tok1")[0]) == {
        AclEntry("User:a", "*", acl.DESCRIBE, acl.ALLOW)}


def test_invalid_binding_is_the_brokers_error(backend, capsys):
    rc, _ = run(backend, "--add", "--topic", "a/b", "--allow-principal", "User:a")
    assert rc == 1
    assert capsys.readouterr().err == ("Error while executing ACL command: Failed to create ACL: ACL binding "
                                       "contains invalid resource name: a/b\n")


def test_admin_dispatches_acls(capsys):
    assert admin_main(["acls", "--list"]) == 1
    assert "One of --bootstrap-server or --authorizer-properties must be specified" in capsys.readouterr().err
