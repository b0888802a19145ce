"""The ACL matrix (issue 10 item 4), end to end: a 2-broker cluster on ZooKeeper with Kafka's ACL authorizer and
a SASL_PLAINTEXT listener with PLAIN users admin (a super user), alice and bob; real clients (confluent-kafka /
librdkafka) authenticate as alice or bob. For each API family a principal without the permission gets Kafka's
error and nothing changes (checked as admin: watermarks, topics, partition counts, configs, groups, offsets); with
the permission the same call succeeds. Prefixed and deny ACLs; ACLs created through one broker's CreateAcls take
effect on the other broker (which learns them from ZooKeeper's change notifications).

Listeners: EXTERNAL (SASL_PLAINTEXT, the clients') and INTERNAL (PLAINTEXT, the brokers' own: replica fetchers
and controller requests, and this test's raw requests), ``inter.broker.listener.name=INTERNAL``. Connections on
INTERNAL are User:ANONYMOUS, which is a super user here -- Kafka's usual setup for a private inter-broker network
(the brokers' principal must hold ClusterAction; see docs/security.md). Every client below uses EXTERNAL.

Propagation: an ACL change is applied by the broker that wrote it at once and by the other when its watch on
``/kafka-acl-changes`` fires (milliseconds); ``grant`` returns once both brokers' caches hold the new ACLs (asked
with DescribeAcls of each broker), except in the cross-broker test, which is about exactly that wait. A few
"allowed now" checks still retry (``eventually``, bounded) where a client caches an earlier refusal (librdkafka's
metadata, a consumer's coordinator lookup); "still denied" never retries.
"""
from __future__ import annotations

import socket
import time
import uuid

import pytest

from tests.integration import harness
from tests.integration.harness import (BrokerProcess, ZkEnsemble, encode_request, free_port, raw_request,
                                       read_response, wait_until)

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,  # noqa: E402
                                   AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic,
                                   ResourcePatternType, ResourceType)

TOPIC_AUTH, GROUP_AUTH, CLUSTER_AUTH = 29, 30, 31
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items()) + ";")
OP = AclOperation
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
# Every client call waits at most this long; a denied call answers at once (the broker does not retry).
CALL_S = 20.0


# ------------------------------------------------------------------------------------------------ the cluster

class SecuredCluster:
    def __init__(self, base, zk):
        self.zk = zk
        self.brokers = []
        self.external = []
        connect = zk.connect_string + "/acls"
        for i in range(2):
            b = BrokerProcess(base / f"broker{i}", broker_id=i, zk=connect)
            ext = free_port()
            b.overrides = {
                "listeners": f"INTERNAL://{b.host}:{b.port},EXTERNAL://{b.host}:{ext}",
                "advertised.listeners": f"INTERNAL://{b.host}:{b.port},EXTERNAL://{b.host}:{ext}",
                "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT",
                "inter.broker.listener.name": "INTERNAL",
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.external.plain.sasl.jaas.config": JAAS,
                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                "super.users": "User:admin;User:ANONYMOUS",
                "auto.create.topics.enable": "true",
                "num.partitions": 1,
                "default.replication.factor": 1,
                "offsets.topic.replication.factor": 2,
                "offsets.topic.num.partitions": 2,
                "zookeeper.session.timeout.ms": 6000,
            }
            self.brokers.append(b)
            self.external.append(f"{b.host}:{ext}")

    def start(self):
        for b in self.brokers:
            b.start(wait=False)
        for b in self.brokers:
            b.wait_ready(60)
        return self

    def close(self):
        for b in self.brokers:
            b.close()

    def conf(self, user, brokers=None):
        return {"bootstrap.servers": ",".join(self.external if brokers is None else
                                              [self.external[i] for i in brokers]),
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": user,
                "sasl.password": PASSWORDS[user],
                # librdkafka's reconnect chatter after the brokers stop (clients outlive a test) is not news.
                "log_level": 2, "log.connection.close": False}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if harness.zookeeper_classpath() is None or not harness.shutil.which("java"):
        harness.skip_or_fail("Debian's zookeeper package / java not installed (run scripts/setup.sh)")
    zk = ZkEnsemble(tmp_path_factory.mktemp("zk"), n=1)
    c = None
    try:
        zk.start()
        c = SecuredCluster(tmp_path_factory.mktemp("acl_cluster"), zk).start()
        c.admin = AdminClient(c.conf("admin"))
        wait_until(lambda: len(c.admin.list_topics(timeout=5).brokers) == 2, 30, 0.2,
                   "both brokers in the admin's metadata")
        grant(c, *(acl(u, OP.READ, ResourceType.GROUP, ASSIGN_GROUPS + u, PREFIXED) for u in ("alice", "bob")))
        yield c
    finally:
        if c is not None:
            c.close()
        zk.close()


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def eventually(fn, what, timeout=CALL_S):
    """fn() until it returns a true value (bounded): for "allowed now" after an ACL change."""
    return wait_until(fn, timeout, 0.25, what)


def result(future):
    return future.result(timeout=CALL_S)


def error_code(exc):
    """The Kafka error code inside a confluent-kafka exception (KafkaException or a future's error)."""
    err = exc.args[0] if exc.args else None
    assert isinstance(err, KafkaError), repr(exc)
    return err.code()


def grant(cluster, *bindings):
    """Create ACL ``bindings`` as admin, then wait until both brokers' caches hold them (DescribeAcls answers
    from the cache): the broker that wrote them applies them at once, the other when ZooKeeper's change
    notification reaches it -- and any broker may answer a request (FindCoordinator, Metadata)."""
    for f in cluster.admin.create_acls(list(bindings)).values():
        assert result(f) is None
    for b in cluster.brokers:
        wait_until(lambda: all(_cached(b, x) for x in bindings), CALL_S, 0.05,
                   f"broker {b.broker_id} to cache {bindings}")


def _cached(broker, binding):
    """Whether ``broker``'s ACL cache holds ``binding`` (DescribeAcls v1 on its INTERNAL listener)."""
    from kbroker.protocol.apis import APIS
    api = APIS[29]
    flt = {"resource_type_filter": int(binding.restype.value), "resource_name_filter": binding.name,
           "pattern_type_filter": int(binding.resource_pattern_type.value), "principal_filter": binding.principal,
           "host_filter": binding.host, "operation": int(binding.operation.value),
           "permission_type": int(binding.permission_type.value)}
    resp = api.decode_response(1, raw_request(broker.host, broker.port, 29, 1, api.encode_request(1, flt).getvalue()))
    assert resp["error_code"] == 0, resp
    return any(r["acls"] for r in resp["resources"])


def acl(user, op, rtype, name, pattern=LITERAL, perm=ALLOW):
    return AclBinding(rtype, name, pattern, f"User:{user}", "*", op, perm)


def create_topic(cluster, name, partitions=1, assignment=None):
    t = NewTopic(name, len(assignment), replica_assignment=assignment) if assignment else NewTopic(name, partitions, 1)
    assert result(cluster.admin.create_topics([t])[name]) is None
    eventually(lambda: all(p.leader >= 0 for p in
                           cluster.admin.list_topics(name, timeout=5).topics[name].partitions.values())
               and cluster.admin.list_topics(name, timeout=5).topics[name].error is None, f"{name} to have leaders")


def both_see(cluster, user, topic):
    """Wait until each broker answers ``user``'s Metadata for ``topic`` without an error (an ACL granting
    Describe has reached both)."""
    for i in range(2):
        c = AdminClient(cluster.conf(user, brokers=[i]))
        eventually(lambda: c.list_topics(topic, timeout=5).topics[topic].error is None,
                   f"broker {i} to let {user} describe {topic}")


def admin_client(cluster, user):
    """An AdminClient of ``user`` that knows both brokers (ListGroups asks every broker it knows of)."""
    client = AdminClient(cluster.conf(user))
    eventually(lambda: len(client.list_topics(timeout=5).brokers) == 2, f"{user}'s client to know both brokers")
    return client


def topic_names(cluster, user="admin"):
    return set(AdminClient(cluster.conf(user)).list_topics(timeout=CALL_S).topics)


def produce(cluster, user, topic, value, partition=0, **extra):
    """One record as ``user`` -> the delivery error code (0 = delivered)."""
    conf = {**cluster.conf(user), "message.timeout.ms": 8000, **extra}
    if not conf.get("enable.idempotence"):
        conf["retries"] = 0             # an authorization error is final; retries would only slow the test
    p = Producer(conf)
    out = []
    try:
        p.produce(topic, value, partition=partition, on_delivery=lambda err, msg: out.append(err))
        p.flush(CALL_S)
    except (ck.KafkaException, SystemError) as e:
        # An idempotent producer's fatal error (InitProducerId refused) is raised out of flush (through the
        # delivery callback: a SystemError whose cause is the KafkaException).
        fatal = e if isinstance(e, ck.KafkaException) else (e.__cause__ or e.__context__)
        if not isinstance(fatal, ck.KafkaException):
            raise
        return error_code(fatal)
    assert len(out) == 1, "no delivery report within %s s" % CALL_S
    return 0 if out[0] is None else out[0].code()


def watermarks(cluster, topic, partition=0):
    c = Consumer({**cluster.conf("admin"), "group.id": unique("wm")})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=CALL_S)
    finally:
        c.close()


# librdkafka's consumer asks for its group's coordinator even when partitions are assigned by hand, so assigned
# reads run in a group of this prefix, which the fixture lets alice and bob Read: their tests then see Fetch's
# answer, not FindCoordinator's.
ASSIGN_GROUPS = "assign-"


def consume(cluster, user, topic, n, group=None, subscribe=False, partition=0, commit=False, timeout=CALL_S):
    """Up to ``n`` records of ``topic`` as ``user`` from offset 0 -> (values, the first error code seen or 0).
    Partition ``partition`` assigned by hand (group: a fresh ASSIGN_GROUPS one unless given), or ``subscribe``d in
    ``group``; ``commit``: commit what was read (a subscribed member's, or a simple consumer's offsets)."""
    c = Consumer({**cluster.conf(user), "group.id": group or unique(ASSIGN_GROUPS + user),
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "session.timeout.ms": 6000})
    values, err = [], 0
    try:
        if subscribe:
            c.subscribe([topic])
        else:
            c.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + timeout
        while len(values) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() != KafkaError._PARTITION_EOF:
                    err = m.error().code()
                    break
                continue
            values.append(m.value())
        if commit and values:
            wait_until(lambda: _committed(c), CALL_S, 0.2, "the commit")
    except ck.KafkaException as e:
        err = error_code(e)
    finally:
        c.close()
    return values, err


def _committed(consumer):
    """One synchronous commit: True when done, False while the group's coordinator is still being looked up (a
    hand-assigned consumer does not wait for it before its first commit)."""
    try:
        consumer.commit(asynchronous=False)
        return True
    except ck.KafkaException as e:
        if error_code(e) == KafkaError._WAIT_COORD:
            return False
        raise


# ------------------------------------------------------------------------------------------------ Produce

def test_produce_needs_write_on_the_topic(cluster):
    t = unique("m-produce")
    create_topic(cluster, t)
    assert produce(cluster, "alice", t, b"denied") == TOPIC_AUTH                   # no ACL at all
    grant(cluster, acl("bob", OP.DESCRIBE, ResourceType.TOPIC, t))
    assert produce(cluster, "bob", t, b"denied") == TOPIC_AUTH                     # Describe is not Write
    assert watermarks(cluster, t) == (0, 0)
    grant(cluster, acl("alice", OP.WRITE, ResourceType.TOPIC, t))
    eventually(lambda: produce(cluster, "alice", t, b"\x00allowed\xff") == 0, "alice's produce to succeed")
    assert watermarks(cluster, t) == (0, 1)
    assert consume(cluster, "admin", t, 1) == ([b"\x00allowed\xff"], 0)


def test_idempotent_producer_needs_write_on_some_topic_or_idempotent_write(cluster):
    t = unique("m-idem")
    create_topic(cluster, t)
    # Describe but no Write anywhere: InitProducerId answers CLUSTER_AUTHORIZATION_FAILED.
    grant(cluster, acl("bob", OP.DESCRIBE, ResourceType.TOPIC, t))
    both_see(cluster, "bob", t)
    assert produce(cluster, "bob", t, b"denied", **{"enable.idempotence": True}) == CLUSTER_AUTH
    assert watermarks(cluster, t) == (0, 0)
    grant(cluster, acl("alice", OP.WRITE, ResourceType.TOPIC, t))
    # Kafka >= 2.8 (KIP-679): Write on any topic is enough for InitProducerId.
    eventually(lambda: produce(cluster, "alice", t, b"idem", **{"enable.idempotence": True}) == 0,
               "alice's idempotent produce")
    assert watermarks(cluster, t) == (0, 1)


def test_transactional_producer_needs_describe_on_its_transactional_id(cluster):
    p = Producer({**cluster.conf("alice"), "transactional.id": unique("tx")})
    with pytest.raises(ck.KafkaException) as e:
        p.init_transactions(CALL_S)                     # FindCoordinator(key type 1) without Describe
    assert error_code(e.value) == 53                    # TRANSACTIONAL_ID_AUTHORIZATION_FAILED


# ------------------------------------------------------------------------------------------------ Fetch and groups

def test_consume_needs_read_on_topic_and_group(cluster):
    t, g = unique("m-consume"), unique("g-consume")
    create_topic(cluster, t)
    for v in (b"a", b"b", b"c"):
        assert produce(cluster, "admin", t, v) == 0
    # Describe (so Metadata answers) but no Read: Fetch's TOPIC_AUTHORIZATION_FAILED.
    grant(cluster, acl("bob", OP.DESCRIBE, ResourceType.TOPIC, t))
    both_see(cluster, "bob", t)
    assert consume(cluster, "bob", t, 3) == ([], TOPIC_AUTH)
    grant(cluster, acl("bob", OP.READ, ResourceType.TOPIC, t))
    assert eventually(lambda: consume(cluster, "bob", t, 3, timeout=5) == ([b"a", b"b", b"c"], 0),
                      "bob's Fetch with Read on the topic")
    values, err = consume(cluster, "bob", t, 3, group=g, subscribe=True)    # no Read on the group
    assert (values, err) == ([], GROUP_AUTH)
    assert g not in {x.group_id for x in result(cluster.admin.list_consumer_groups()).valid}
    grant(cluster, acl("bob", OP.READ, ResourceType.GROUP, g))
    eventually(lambda: consume(cluster, "bob", t, 3, group=g, subscribe=True, commit=True, timeout=30)
               == ([b"a", b"b", b"c"], 0), "bob's group consumption", timeout=90)
    committed = result(cluster.admin.list_consumer_group_offsets(
        [ck.ConsumerGroupTopicPartitions(g, [TopicPartition(t, 0)])])[g])
    assert [(tp.topic, tp.offset) for tp in committed.topic_partitions] == [(t, 3)]


def test_deny_acl_beats_a_prefixed_allow(cluster):
    prefix = unique("m-deny") + "-"
    open_t, secret = prefix + "open", prefix + "secret"
    for t in (open_t, secret):
        create_topic(cluster, t)
        assert produce(cluster, "admin", t, t.encode()) == 0
    grant(cluster, acl("bob", OP.READ, ResourceType.TOPIC, prefix, PREFIXED),
          acl("bob", OP.READ, ResourceType.TOPIC, secret, LITERAL, DENY))
    assert eventually(lambda: consume(cluster, "bob", open_t, 1, timeout=5) == ([open_t.encode()], 0),
                      "bob reading through the prefixed ACL")
    assert consume(cluster, "bob", secret, 1) == ([], TOPIC_AUTH)


def test_group_listing_describing_and_deleting(cluster):
    t, g1, g2 = unique("m-groups"), unique("g-list"), unique("g-list")
    create_topic(cluster, t)
    assert produce(cluster, "admin", t, b"x") == 0
    for g in (g1, g2):
        assert consume(cluster, "admin", t, 1, group=g, commit=True) == ([b"x"], 0)

    bob = admin_client(cluster, "bob")

    def listed(client):
        found = result(client.list_consumer_groups())
        assert not found.errors, found.errors
        return {x.group_id for x in found.valid} & {g1, g2}
    assert listed(cluster.admin) == {g1, g2}
    assert listed(bob) == set()                                     # ListGroups without Describe on the Cluster
    grant(cluster, acl("bob", OP.DESCRIBE, ResourceType.GROUP, g1))
    eventually(lambda: listed(bob) == {g1}, "bob to see g1 only")
    with pytest.raises(ck.KafkaException) as e:
        result(bob.describe_consumer_groups([g2])[g2])
    assert error_code(e.value) == GROUP_AUTH
    described = result(bob.describe_consumer_groups([g1], include_authorized_operations=True)[g1])
    assert described.group_id == g1 and described.authorized_operations == [OP.DESCRIBE]     # KIP-430
    with pytest.raises(ck.KafkaException) as e:
        result(bob.delete_consumer_groups([g1])[g1])                # Describe is not Delete
    assert error_code(e.value) == GROUP_AUTH
    assert listed(cluster.admin) == {g1, g2}
    # OffsetFetch of all the group's offsets leaves out the topics bob may not Describe.
    assert _offsets(bob, g1) == []
    grant(cluster, acl("bob", OP.DESCRIBE, ResourceType.TOPIC, t))
    eventually(lambda: _offsets(bob, g1) == [(t, 0, 1)], "g1's offsets of t for bob")
    grant(cluster, acl("bob", OP.DELETE, ResourceType.GROUP, g1))
    eventually(lambda: _deleted(bob, g1), "bob's DeleteGroups of g1")
    assert listed(cluster.admin) == {g2}


def _offsets(admin, group):
    found = result(admin.list_consumer_group_offsets([ck.ConsumerGroupTopicPartitions(group)])[group])
    return [(tp.topic, tp.partition, tp.offset) for tp in found.topic_partitions]


def _deleted(admin, group):
    try:
        return result(admin.delete_consumer_groups([group])[group]) is None
    except ck.KafkaException as e:
        if error_code(e) == GROUP_AUTH:
            return False
        raise


# ------------------------------------------------------------------------------------------------ Metadata

def test_metadata_shows_only_describable_topics_and_auto_creation_needs_create(cluster):
    prefix = unique("m-meta") + "-"
    a, b = prefix + "a", prefix + "b"
    for t in (a, b):
        create_topic(cluster, t)
    grant(cluster, acl("alice", OP.DESCRIBE, ResourceType.TOPIC, a))
    eventually(lambda: {t for t in topic_names(cluster, "alice") if t.startswith(prefix)} == {a},
               "alice's topic list to show a only")
    md = AdminClient(cluster.conf("alice")).list_topics(b, timeout=CALL_S)
    assert md.topics[b].error.code() == TOPIC_AUTH and not md.topics[b].partitions
    # Auto-creation by a producer's Metadata: Describe but no Create -> 29, nothing created.
    auto = prefix + "auto"
    grant(cluster, acl("alice", OP.DESCRIBE, ResourceType.TOPIC, auto))
    p = Producer({**cluster.conf("alice"), "allow.auto.create.topics": True})
    eventually(lambda: p.list_topics(auto, timeout=5).topics[auto].error is not None
               and p.list_topics(auto, timeout=5).topics[auto].error.code() == TOPIC_AUTH, "29 for the auto topic")
    assert auto not in topic_names(cluster)
    grant(cluster, acl("alice", OP.CREATE, ResourceType.TOPIC, prefix, PREFIXED))
    eventually(lambda: p.list_topics(auto, timeout=5).topics[auto].error is None, "auto-creation allowed")
    assert auto in topic_names(cluster)


# ------------------------------------------------------------------------------------------------ admin APIs

def test_create_topics_needs_create_literal_or_prefixed(cluster):
    prefix = unique("alice") + "-"
    alice = AdminClient(cluster.conf("alice"))
    mine = prefix + "t1"
    with pytest.raises(ck.KafkaException) as e:
        result(alice.create_topics([NewTopic(mine, 1, 1)])[mine])
    assert error_code(e.value) == TOPIC_AUTH and mine not in topic_names(cluster)
    grant(cluster, acl("alice", OP.CREATE, ResourceType.TOPIC, prefix, PREFIXED))
    eventually(lambda: _created(alice, mine), "alice's CreateTopics under her prefix")
    assert mine in topic_names(cluster)
    other = unique("m-notalice")
    with pytest.raises(ck.KafkaException) as e:
        result(alice.create_topics([NewTopic(other, 1, 1)])[other])
    assert error_code(e.value) == TOPIC_AUTH and other not in topic_names(cluster)


def _created(admin, name):
    try:
        return result(admin.create_topics([NewTopic(name, 1, 1)])[name]) is None
    except ck.KafkaException as e:
        if error_code(e) == TOPIC_AUTH:
            return False
        raise


def test_delete_topics_needs_delete(cluster):
    t = unique("m-del")
    create_topic(cluster, t)
    bob = AdminClient(cluster.conf("bob"))
    for name in (t, unique("m-del-missing")):                       # existing or not: the same answer
        with pytest.raises(ck.KafkaException) as e:
            result(bob.delete_topics([name], operation_timeout=10)[name])
        assert error_code(e.value) == TOPIC_AUTH
    assert t in topic_names(cluster)
    grant(cluster, acl("bob", OP.DELETE, ResourceType.TOPIC, t))

    def deleted():
        try:
            return result(bob.delete_topics([t], operation_timeout=10)[t]) is None
        except ck.KafkaException as e:
            if error_code(e) == TOPIC_AUTH:
                return False
            raise
    eventually(deleted, "bob's DeleteTopics")
    eventually(lambda: t not in topic_names(cluster), "the topic gone")


def test_create_partitions_needs_alter(cluster):
    t = unique("m-parts")
    create_topic(cluster, t)
    bob = AdminClient(cluster.conf("bob"))
    with pytest.raises(ck.KafkaException) as e:
        result(bob.create_partitions([NewPartitions(t, 2)])[t])
    assert error_code(e.value) == TOPIC_AUTH
    assert len(cluster.admin.list_topics(t, timeout=CALL_S).topics[t].partitions) == 1
    grant(cluster, acl("bob", OP.ALTER, ResourceType.TOPIC, t))

    def grown():
        try:
            return result(bob.create_partitions([NewPartitions(t, 2)])[t]) is None
        except ck.KafkaException as e:
            if error_code(e) == TOPIC_AUTH:
                return False
            raise
    eventually(grown, "bob's CreatePartitions")
    eventually(lambda: len(cluster.admin.list_topics(t, timeout=5).topics[t].partitions) == 2, "2 partitions")


def _retention(cluster, t):
    res = ConfigResource(ConfigResource.Type.TOPIC, t)
    return result(cluster.admin.describe_configs([res])[res])["retention.ms"].value


def test_configs_need_describe_configs_and_alter_configs(cluster):
    t = unique("m-conf")
    create_topic(cluster, t)
    bob = AdminClient(cluster.conf("bob"))
    topic_res = ConfigResource(ConfigResource.Type.TOPIC, t)
    broker_res = ConfigResource(ConfigResource.Type.BROKER, "0")
    for res, code in ((topic_res, TOPIC_AUTH), (broker_res, CLUSTER_AUTH)):
        with pytest.raises(ck.KafkaException) as e:
            result(bob.describe_configs([res])[res])
        assert error_code(e.value) == code
    before = _retention(cluster, t)
    change = ConfigResource(ConfigResource.Type.TOPIC, t, incremental_configs=[
        ConfigEntry("retention.ms", "123456", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(ck.KafkaException) as e:
        result(bob.incremental_alter_configs([change])[change])
    assert error_code(e.value) == TOPIC_AUTH
    assert _retention(cluster, t) == before != "123456"
    grant(cluster, acl("bob", OP.DESCRIBE_CONFIGS, ResourceType.TOPIC, t),
          acl("bob", OP.ALTER_CONFIGS, ResourceType.TOPIC, t))
    eventually(lambda: _altered(bob, change), "bob's IncrementalAlterConfigs")
    assert _retention(cluster, t) == "123456"
    assert result(bob.describe_configs([topic_res])[topic_res])["retention.ms"].value == "123456"


def _altered(admin, change):
    try:
        return result(admin.incremental_alter_configs([change])[change]) is None
    except ck.KafkaException as e:
        if error_code(e) == TOPIC_AUTH:
            return False
        raise


def test_kafka_python_clients_get_the_same_answers(cluster):
    """kafka-python (another client stack) as bob: CreateTopics, DeleteTopics and Produce denied with its
    TopicAuthorizationFailedError, then CreateTopics allowed."""
    kafka = pytest.importorskip("kafka")
    from kafka.admin import NewTopic as KpNewTopic
    from kafka.errors import TopicAuthorizationFailedError
    sasl = dict(bootstrap_servers=cluster.external, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                sasl_plain_username="bob", sasl_plain_password=PASSWORDS["bob"])
    mine, existing = unique("m-kp"), unique("m-kp-existing")
    create_topic(cluster, existing)
    admin = kafka.KafkaAdminClient(**sasl)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            admin.create_topics([KpNewTopic(mine, 1, 1)])
        with pytest.raises(TopicAuthorizationFailedError):
            admin.delete_topics([existing])
        assert mine not in topic_names(cluster) and existing in topic_names(cluster)
        grant(cluster, acl("bob", OP.CREATE, ResourceType.TOPIC, mine))
        admin.create_topics([KpNewTopic(mine, 1, 1)])
        eventually(lambda: mine in topic_names(cluster), "bob's topic")
    finally:
        admin.close()
    # Describe (so the producer learns the partitions) but no Write: the Produce itself is refused.
    grant(cluster, acl("bob", OP.DESCRIBE, ResourceType.TOPIC, existing))
    producer = kafka.KafkaProducer(**sasl, retries=0, max_block_ms=int(CALL_S * 1000))
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(existing, b"denied", partition=0).get(timeout=CALL_S)
    finally:
        producer.close(timeout=5)
    assert watermarks(cluster, existing) == (0, 0)


# ------------------------------------------------------------------------------------------------ 2 brokers

def _create_acls_on(broker, bindings):
    """CreateAcls v1 sent to ``broker`` itself (its INTERNAL listener: User:ANONYMOUS, a super user here)."""
    from kbroker.protocol.apis import APIS
    api = APIS[30]
    body = {"creations": [{"resource_type": 2, "resource_name": name, "resource_pattern_type": 3,
                           "principal": principal, "host": "*", "operation": 4, "permission_type": 3}
                          for principal, name in bindings]}
    rest = raw_request(broker.host, broker.port, 30, 1, api.encode_request(1, body).getvalue())
    return [r["error_code"] for r in api.decode_response(1, rest)["results"]]


def test_acls_created_on_one_broker_apply_on_the_other(cluster):
    """Write ACLs for two topics, one led by each broker, created through broker 0's CreateAcls: both brokers
    enforce them (broker 1 learned them from ZooKeeper, not from the request)."""
    on0, on1 = unique("m-b0"), unique("m-b1")
    create_topic(cluster, on0, assignment=[[0]])
    create_topic(cluster, on1, assignment=[[1]])
    assert produce(cluster, "alice", on0, b"x") == TOPIC_AUTH
    assert produce(cluster, "alice", on1, b"x") == TOPIC_AUTH
    assert _create_acls_on(cluster.brokers[0], [("User:alice", on0), ("User:alice", on1)]) == [0, 0]
    eventually(lambda: produce(cluster, "alice", on1, b"via broker 1") == 0, "broker 1 to apply broker 0's ACL")
    assert produce(cluster, "alice", on0, b"via broker 0") == 0
    assert watermarks(cluster, on0) == (0, 1) and watermarks(cluster, on1) == (0, 1)


# ------------------------------------------------------------------------------------------------ inter-broker APIs

class SaslConnection:
    """A raw client connection to a broker's EXTERNAL listener, authenticated as ``user`` (SASL PLAIN through
    kbroker's client side: SaslHandshake v1 + SaslAuthenticate v1); ``request(api_key, version, body) -> dict``."""

    def __init__(self, cluster, broker_index, user):
        from kbroker.security.sasl.client import authenticate, client_mechanism
        host, port = cluster.external[broker_index].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=CALL_S)
        self.correlation = 0
        authenticate(self.request, client_mechanism("PLAIN", user, PASSWORDS[user]))

    def request(self, api_key, version, body):
        from kbroker.protocol.apis import APIS
        api = APIS[api_key]
        self.correlation += 1
        payload = api.encode_request(version, body).getvalue()
        self.sock.sendall(encode_request(api_key, version, self.correlation, payload, "acl-matrix",
                                         api.request_header_version(version)))
        got, rest = read_response(self.sock)
        assert got == self.correlation
        if api.response_header_version(version) >= 1:
            rest = rest[1:]                                     # the response header's empty tagged fields
        return api.decode_response(version, rest)

    def close(self):
        self.sock.close()


def test_controller_requests_need_cluster_action(cluster):
    """LeaderAndIsr, StopReplica, UpdateMetadata and ControlledShutdown from a client without ClusterAction:
    CLUSTER_AUTHORIZATION_FAILED, and the StopReplica that would delete a partition deletes nothing. The super
    user gets past authorization to the controller checks (a made-up broker epoch: STALE_BROKER_EPOCH 77)."""
    t = unique("m-ctl")
    create_topic(cluster, t, assignment=[[0]])
    assert produce(cluster, "admin", t, b"keep") == 0
    stop = {"controller_id": 0, "controller_epoch": 1, "broker_epoch": 1, "topic_states": [
        {"topic_name": t, "partition_states": [{"partition_index": 0, "delete_partition": True}]}]}
    update = {"controller_id": 0, "controller_epoch": 1, "broker_epoch": 1, "live_brokers": [], "topic_states": []}
    lai = {"controller_id": 0, "controller_epoch": 1, "broker_epoch": 1, "topic_states": [], "live_leaders": []}
    shutdown = {"broker_id": 1, "broker_epoch": 1}
    requests = [(5, 3, stop), (6, 6, update), (4, 4, lai), (7, 3, shutdown)]
    bob = SaslConnection(cluster, 0, "bob")
    try:
        codes = [bob.request(k, v, body)["error_code"] for k, v, body in requests]
    finally:
        bob.close()
    assert codes == [CLUSTER_AUTH] * 4
    assert watermarks(cluster, t) == (0, 1)
    assert consume(cluster, "admin", t, 1) == ([b"keep"], 0)
    admin = SaslConnection(cluster, 0, "admin")
    try:
        codes = [admin.request(k, v, body)["error_code"] for k, v, body in requests[:3]]
    finally:
        admin.close()
    assert codes == [77, 77, 77]
    assert watermarks(cluster, t) == (0, 1)
