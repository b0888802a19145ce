"""ACLs over the wire and through the tools, against broker processes (tests/integration/harness.py):
CreateAcls/DescribeAcls/DeleteAcls from confluent-kafka's and kafka-python's admin clients and kbroker-admin acls
(both ways), SECURITY_DISABLED without an authorizer, a deny for User:ANONYMOUS taking effect on Metadata, and on a
2-broker cluster over a real ZooKeeper ensemble: ACLs created through one broker's API enforced and described by
the other, ACLs written by kbroker-admin --authorizer-properties seen by both, in Kafka's znode format.

Until SASL lands every client here is User:ANONYMOUS; the brokers run with ``allow.everyone.if.no.acl.found=true``
so that resources without ACLs (the cluster, for the ACL APIs themselves) stay open and each test's ACLs decide.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kbroker.client.connection import BrokerConnection
from tests.integration import harness
from tests.integration.harness import wait_until

AUTHZ = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
         "allow.everyone.if.no.acl.found": "true", "num.partitions": 1}
ANON = "User:ANONYMOUS"
# A change made through one broker reaches the other through a change notification: one ZooKeeper watch event
# and one read, well under a second; 15 s absorbs two busy cores.
PROPAGATION_S = 15.0


def admin(*argv, stdin=""):
    proc = subprocess.run([sys.executable, "-m", "kbroker.cli.admin", "acls", *map(str, argv)], input=stdin,
                          capture_output=True, text=True, timeout=60, cwd=str(harness.REPO_ROOT))
    return proc.returncode, proc.stdout, proc.stderr


def describe_on(broker, **flt):
    """DescribeAcls v1 asked of ``broker`` itself -> (error_code, {(type, name, pattern): {(principal, host, op,
    perm)}}) in wire codes."""
    body = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
            "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}
    body.update(flt)
    conn = BrokerConnection(broker.host, broker.port, "acl-test", 10)
    try:
        resp = conn.request("DescribeAcls", body, version=1)
    finally:
        conn.close()
    return resp["error_code"], {(r["resource_type"], r["resource_name"], r["pattern_type"]):
                                {(a["principal"], a["host"], a["operation"], a["permission_type"]) for a in r["acls"]}
                                for r in resp["resources"]}


def metadata_topics(broker, topics=None):
    """Metadata v1 asked of ``broker``: {topic: error_code}."""
    conn = BrokerConnection(broker.host, broker.port, "acl-test", 10)
    try:
        resp = conn.request("Metadata", {"topics": None if topics is None else [{"name": t} for t in topics],
                                         "allow_auto_topic_creation": False}, version=1)
    finally:
        conn.close()
    return {t["name"]: t["error_code"] for t in resp["topics"]}


def create_topic(broker, name):
    from kbroker.client.admin import AdminClient
    with AdminClient(broker.bootstrap) as a:
        a.create_topic(name, 1, 1)
    wait_until(lambda: metadata_topics(broker, [name]).get(name) == 0, 15, message="topic %s led" % name)


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    b = harness.BrokerProcess(tmp_path_factory.mktemp("acl_broker"), overrides=AUTHZ)
    try:
        b.start()
        yield b
    finally:
        b.close()


# ----------------------------------------------------------------------------------------------- one broker

def test_confluent_admin_create_describe_delete(secured):
    from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                       ResourcePatternType, ResourceType)
    a = AdminClient({"bootstrap.servers": secured.bootstrap})
    read = AclBinding(ResourceType.TOPIC, "cf-orders", ResourcePatternType.LITERAL, "User:alice", "*",
                      AclOperation.READ, AclPermissionType.ALLOW)
    deny = AclBinding(ResourceType.TOPIC, "cf-", ResourcePatternType.PREFIXED, "User:bob", "10.1.2.3",
                      AclOperation.WRITE, AclPermissionType.DENY)
    group = AclBinding(ResourceType.GROUP, "cf-group", ResourcePatternType.LITERAL, "User:alice", "*",
                       AclOperation.READ, AclPermissionType.ALLOW)
    for f in a.create_acls([read, deny, group], request_timeout=15).values():
        assert f.result(timeout=15) is None
    every = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                             AclPermissionType.ANY)
    got = a.describe_acls(every, request_timeout=15).result(timeout=15)
    assert sorted(got) == sorted([read, deny, group])
    match = AclBindingFilter(ResourceType.TOPIC, "cf-orders", ResourcePatternType.MATCH, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    assert sorted(a.describe_acls(match, request_timeout=15).result(timeout=15)) == sorted([read, deny])
    topics = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                              AclPermissionType.ANY)
    [(flt, fut)] = a.delete_acls([topics], request_timeout=15).items()
    assert sorted(fut.result(timeout=15)) == sorted([read, deny])
    assert a.describe_acls(every, request_timeout=15).result(timeout=15) == [group]
    groups = AclBindingFilter(ResourceType.GROUP, "cf-group", ResourcePatternType.LITERAL, "User:alice", "*",
                              AclOperation.READ, AclPermissionType.ALLOW)
    [(flt, fut)] = a.delete_acls([groups], request_timeout=15).items()
    assert fut.result(timeout=15) == [group]
    assert a.describe_acls(every, request_timeout=15).result(timeout=15) == []


def test_confluent_admin_invalid_binding_is_invalid_request(secured):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                       ResourcePatternType, ResourceType)
    a = AdminClient({"bootstrap.servers": secured.bootstrap})
    bad = AclBinding(ResourceType.GROUP, "a/b", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                     AclPermissionType.ALLOW)
    [fut] = a.create_acls([bad], request_timeout=15).values()
    with pytest.raises(KafkaException) as ei:
        fut.result(timeout=15)
    err = ei.value.args[0]
    assert err.code() == 42   # INVALID_REQUEST
    assert "invalid resource name: a/b" in err.str()
    assert describe_on(secured, resource_type_filter=3) == (0, {})


def test_kafka_python_admin_acls(secured):
    from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                             KafkaAdminClient, ResourcePattern, ResourcePatternFilter, ResourceType)
    a = KafkaAdminClient(bootstrap_servers=secured.bootstrap)
    try:
        acl = ACL("User:kp", "*", ACLOperation.DESCRIBE, ACLPermissionType.ALLOW,
                  ResourcePattern(ResourceType.TRANSACTIONAL_ID, "kp-tx", ACLResourcePatternType.PREFIXED))
        res = a.create_acls([acl])
        assert res["failed"] == [] and len(res["succeeded"]) == 1
        flt = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                        ResourcePatternFilter(ResourceType.TRANSACTIONAL_ID, None, ACLResourcePatternType.ANY))
        acls, err = a.describe_acls(flt)
        assert err.errno == 0
        assert [(x.principal, x.host, x.operation, x.permission_type, x.resource_pattern.resource_name,
                 x.resource_pattern.pattern_type) for x in acls] == [
            ("User:kp", "*", ACLOperation.DESCRIBE, ACLPermissionType.ALLOW, "kp-tx", ACLResourcePatternType.PREFIXED)]
        [(f, deleted, err)] = a.delete_acls([flt])
        assert err.errno == 0 and [(d.principal, d.resource_pattern.resource_name) for d in deleted] == [
            ("User:kp", "kp-tx")]
        assert describe_on(secured) == (0, {})
    finally:
        a.close()


def test_kbroker_admin_acls_over_the_api(secured):
    rc, out, err = admin("--bootstrap-server", secured.bootstrap, "--add", "--allow-principal", "User:tool",
                         "--operation", "Read", "--topic", "tool-orders")
    assert (rc, err) == (0, "")
    entry = "\t(principal=User:tool, host=*, operation=READ, permissionType=ALLOW)"
    res = "ResourcePattern(resourceType=TOPIC, name=tool-orders, patternType=LITERAL)"
    assert out == "Adding ACLs for resource `%s`: \n %s \n\nCurrent ACLs for resource `%s`: \n %s \n\n" % (
        res, entry, res, entry)
    assert describe_on(secured, resource_type_filter=2) == (0, {(2, "tool-orders", 3): {("User:tool", "*", 3, 3)}})
    rc, out, err = admin("--bootstrap-server", secured.bootstrap, "--list", "--topic", "tool-orders")
    assert (rc, out) == (0, "Current ACLs for resource `%s`: \n %s \n\n" % (res, entry))
    rc, out, err = admin("--bootstrap-server", secured.bootstrap, "--remove", "--topic", "tool-orders", stdin="y\n")
    assert rc == 0 and out.startswith("Are you sure you want to delete all ACLs for resource filter")
    assert describe_on(secured, resource_type_filter=2) == (0, {})


def test_deny_describe_hides_the_topic_from_metadata(secured):
    """A deny for User:ANONYMOUS (every client today) on one topic: Metadata of all topics leaves it out,
    Metadata naming it answers TOPIC_AUTHORIZATION_FAILED, another topic is untouched; removing the ACL brings it
    back. Only ``secret`` has ACLs, so the rest stays open (allow.everyone.if.no.acl.found)."""
    create_topic(secured, "secret")
    create_topic(secured, "public")
    assert {"secret", "public"} <= set(metadata_topics(secured))
    rc, _, err = admin("--bootstrap-server", secured.bootstrap, "--add", "--deny-principal", ANON, "--operation",
                       "Describe", "--topic", "secret")
    assert rc == 0, err
    topics = metadata_topics(secured)
    assert "secret" not in topics and topics.get("public") == 0
    assert metadata_topics(secured, ["secret"]) == {"secret": 29}
    rc, _, err = admin("--bootstrap-server", secured.bootstrap, "--remove", "--force", "--topic", "secret")
    assert rc == 0, err
    assert metadata_topics(secured, ["secret"]) == {"secret": 0}


def test_cluster_acl_can_lock_out_the_acl_apis(broker_factory):
    """Once the Cluster has an ACL that does not allow User:ANONYMOUS, its DescribeAcls answers
    CLUSTER_AUTHORIZATION_FAILED and its CreateAcls changes nothing."""
    b = broker_factory(overrides=AUTHZ)
    rc, out, err = admin("--bootstrap-server", b.bootstrap, "--add", "--allow-principal", "User:admin", "--cluster")
    # The ACL is added; the listing kafka-acls does afterwards is already refused (as with Kafka).
    assert out.startswith("Adding ACLs for resource `ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, "
                          "patternType=LITERAL)`")
    assert (rc, err) == (1, "Error while executing ACL command: Cluster authorization failed.\n")
    assert describe_on(b)[0] == 31
    rc, out, err = admin("--bootstrap-server", b.bootstrap, "--add", "--allow-principal", ANON, "--topic", "t")
    assert rc == 1 and "Cluster authorization failed." in err
    # The ACL survives a restart (it is in the coordination backend) and still locks the API.
    b.restart()
    assert describe_on(b)[0] == 31


def test_without_authorizer_security_disabled(broker_factory):
    """kafka-python raises DescribeAcls' SECURITY_DISABLED; confluent-kafka reports it per creation (librdkafka
    2.x drops DescribeAcls' top-level error and answers an empty list, so it is not asked here)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                       ResourcePatternType, ResourceType)
    from kafka.admin import (ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, KafkaAdminClient,
                             ResourcePatternFilter, ResourceType as KpResourceType)
    from kafka.errors import SecurityDisabledError
    b = broker_factory()
    assert describe_on(b) == (54, {})
    kp = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        with pytest.raises(SecurityDisabledError, match="No Authorizer is configured on the broker"):
            kp.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                       ResourcePatternFilter(KpResourceType.ANY, None, ACLResourcePatternType.ANY)))
    finally:
        kp.close()
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    [fut] = a.create_acls([AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, ANON, "*",
                                      AclOperation.READ, AclPermissionType.ALLOW)], request_timeout=15).values()
    with pytest.raises(KafkaException) as ei:
        fut.result(timeout=15)
    assert ei.value.args[0].code() == 54
    rc, _, err = admin("--bootstrap-server", b.bootstrap, "--add", "--allow-principal", ANON, "--topic", "t")
    assert rc == 1 and "No Authorizer is configured" in err


def test_unknown_authorizer_class_stops_startup(broker_factory):
    b = broker_factory(overrides={"authorizer.class.name": "com.example.MyAuthorizer"}, start=False)
    b.write_config()
    proc = subprocess.run([sys.executable, "-m", "kbroker.cli.server", str(b.config_path)], capture_output=True,
                          text=True, timeout=60, cwd=str(b.dir))
    assert proc.returncode == 1
    assert "authorizer.class.name" in proc.stderr and "com.example.MyAuthorizer" in proc.stderr


# ----------------------------------------------------------------------------------------------- two brokers, ZooKeeper

@pytest.fixture(scope="module")
def zk_pair(zk_ensemble, tmp_path_factory):
    chroot = "/acls"
    zk = zk_ensemble.connect_string + chroot
    brokers = [harness.BrokerProcess(tmp_path_factory.mktemp("acl_zk%d" % i), broker_id=i, zk=zk,
                                     overrides=dict(AUTHZ, **{"zookeeper.session.timeout.ms": 6000}))
               for i in (1, 2)]
    try:
        for b in brokers:
            b.start(wait=False)
        for b in brokers:
            b.wait_ready(60)
        yield zk, brokers
    finally:
        for b in brokers:
            b.close()


def test_acls_created_on_one_broker_apply_on_the_other(zk_pair):
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                       ResourcePatternType, ResourceType)
    zk, (b1, b2) = zk_pair
    create_topic(b1, "zk-secret")
    wait_until(lambda: metadata_topics(b2, ["zk-secret"]).get("zk-secret") == 0, 20)
    a = AdminClient({"bootstrap.servers": b1.bootstrap})    # broker 1 only
    deny = AclBinding(ResourceType.TOPIC, "zk-sec", ResourcePatternType.PREFIXED, ANON, "*",
                      AclOperation.ALL, AclPermissionType.DENY)
    [fut] = a.create_acls([deny], request_timeout=15).values()
    assert fut.result(timeout=15) is None
    # librdkafka sends CreateAcls to the controller, either broker: both must get there.
    expected = (0, {(2, "zk-sec", 4): {(ANON, "*", 2, 2)}})
    for b in (b1, b2):
        wait_until(lambda b=b: describe_on(b, resource_type_filter=2) == expected, PROPAGATION_S,
                   message="ACL reached %r" % b)
    assert metadata_topics(b2, ["zk-secret"]) == {"zk-secret": 29}
    assert "zk-secret" not in metadata_topics(b2)
    # Deleted through broker 2: gone from broker 1 too.
    conn = BrokerConnection(b2.host, b2.port, "acl-test", 10)
    try:
        resp = conn.request("DeleteAcls", {"filters": [
            {"resource_type_filter": 2, "resource_name_filter": "zk-sec", "pattern_type_filter": 4,
             "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}]}, version=1)
    finally:
        conn.close()
    [res] = resp["filter_results"]
    assert res["error_code"] == 0
    assert [(m["resource_name"], m["pattern_type"], m["principal"], m["operation"], m["permission_type"])
            for m in res["matching_acls"]] == [("zk-sec", 4, ANON, 2, 2)]
    wait_until(lambda: describe_on(b1, resource_type_filter=2) == (0, {}), PROPAGATION_S,
               message="deletion reached broker 1")
    assert metadata_topics(b1, ["zk-secret"]) == {"zk-secret": 0}


def test_authorizer_properties_writes_what_brokers_and_kafka_read(zk_pair):
    zk, (b1, b2) = zk_pair
    rc, out, err = admin("--authorizer-properties", "zookeeper.connect=" + zk, "--add", "--allow-principal",
                         "User:zkt", "--allow-host", "10.0.0.5", "--operation", "Read", "--group", "zk-group")
    assert rc == 0, err
    assert out.startswith("Adding ACLs for resource `ResourcePattern(resourceType=GROUP, name=zk-group, "
                          "patternType=LITERAL)`: \n \t(principal=User:zkt, host=10.0.0.5")
    expected = (0, {(3, "zk-group", 3): {("User:zkt", "10.0.0.5", 3, 3)}})
    for b in (b1, b2):
        wait_until(lambda b=b: describe_on(b, resource_type_filter=3) == expected, PROPAGATION_S,
                   message="tool's ACL reached %r" % b)
    # The znode is Kafka's, byte for byte the format kafka-acls.sh reads.
    from kbroker.coord.zk import ZooKeeperBackend
    zkb = ZooKeeperBackend(zk, 10000).start()
    try:
        assert json.loads(zkb.get("/kafka-acl/Group/zk-group")[0]) == {"version": 1, "acls": [
            {"principal": "User:zkt", "permissionType": "Allow", "operation": "Read", "host": "10.0.0.5"}]}
        changes = zkb.get_children("/kafka-acl-changes")
        assert b"Group:zk-group" in [zkb.get("/kafka-acl-changes/" + c)[0] for c in changes]
    finally:
        zkb.stop()
    rc, out, err = admin("--authorizer-properties", "zookeeper.connect=" + zk, "--list", "--group", "zk-group")
    assert rc == 0 and "(principal=User:zkt, host=10.0.0.5, operation=READ, permissionType=ALLOW)" in out
    rc, _, err = admin("--authorizer-properties", "zookeeper.connect=" + zk, "--remove", "--force", "--group",
                       "zk-group")
    assert rc == 0, err
    for b in (b1, b2):
        wait_until(lambda b=b: describe_on(b, resource_type_filter=3) == (0, {}), PROPAGATION_S,
                   message="removal reached %r" % b)


# ----------------------------------------------------------------------------------------------- SASL principals

SASL_PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret"}


def test_tool_with_command_config_as_sasl_principals(broker_factory, tmp_path):
    """kbroker-admin acls --command-config over a SASL_PLAINTEXT listener: the super user adds an ACL for alice;
    alice (no Alter on the cluster) gets CLUSTER_AUTHORIZATION_FAILED for her own --add and --list, and sees only
    what her ACL allows in Metadata."""
    ext = harness.free_port()
    jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            + " ".join('user_%s="%s"' % kv for kv in SASL_PASSWORDS.items()) + ";")
    b = broker_factory(start=False)
    b.overrides = {
        "listeners": "INTERNAL://%s:%d,EXTERNAL://%s:%d" % (b.host, b.port, b.host, ext),
        "advertised.listeners": "INTERNAL://%s:%d,EXTERNAL://%s:%d" % (b.host, b.port, b.host, ext),
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL", "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.external.plain.sasl.jaas.config": jaas,
        "authorizer.class.name": "kafka.security.auth.SimpleAclAuthorizer",
        "super.users": "User:admin;User:ANONYMOUS", "num.partitions": 1}
    b.start()
    configs = {}
    for user, password in SASL_PASSWORDS.items():
        configs[user] = tmp_path / ("%s.properties" % user)
        configs[user].write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka.common."
            'security.plain.PlainLoginModule required username="%s" password="%s";\n' % (user, password))
    bootstrap = "%s:%d" % (b.host, ext)
    create_topic(b, "alice-topic")       # over the PLAINTEXT listener: User:ANONYMOUS, a super user here
    create_topic(b, "other-topic")
    rc, out, err = admin("--bootstrap-server", bootstrap, "--command-config", configs["admin"], "--add",
                         "--allow-principal", "User:alice", "--operation", "Read", "--topic", "alice-topic")
    assert (rc, err) == (0, "")
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in out
    rc, out, err = admin("--bootstrap-server", bootstrap, "--command-config", configs["alice"], "--list")
    assert (rc, out, err) == (1, "", "Error while executing ACL command: Cluster authorization failed.\n")
    rc, out, err = admin("--bootstrap-server", bootstrap, "--command-config", configs["alice"], "--add",
                         "--allow-principal", "User:alice", "--operation", "All", "--topic", "other-topic")
    assert rc == 1 and err == "Error while executing ACL command: Cluster authorization failed.\n"
    assert describe_on(b, resource_type_filter=2) == (0, {(2, "alice-topic", 3): {("User:alice", "*", 3, 3)}})
    from confluent_kafka.admin import AdminClient
    alice = AdminClient({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"})
    topics = set(alice.list_topics(timeout=15).topics)
    assert "alice-topic" in topics and "other-topic" not in topics     # Read implies Describe; nothing else
