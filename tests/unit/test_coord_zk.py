"""ZooKeeperBackend and broker registration on a real 3-node ensemble (one per module; each test uses its own chroot).

The test process is not monkey-patched: kazoo's gevent handler runs in the main thread's hub, so waits here use
gevent.sleep (a time.sleep would stall the client's pings).
"""
import json
import time
import uuid

import gevent
import pytest
from kazoo.client import KazooClient
from kazoo.handlers.gevent import SequentialGeventHandler

from kbroker.config import BrokerConfig
from kbroker.coord import TopicStore, make_backend
from kbroker.coord.errors import (
    BadVersionError, CoordinationError, NoChildrenForEphemeralsError, NodeExistsError, NoNodeError, NotEmptyError,
)
from kbroker.coord.registration import cluster_id, generate_broker_id, register_broker
from kbroker.coord.zk import ZooKeeperBackend, split_connect_string
from kbroker.coord.znodes import BrokerIdZNode
from tests.integration.harness import ZkEnsemble, free_ports

pytestmark = pytest.mark.zk

SESSION_MS = 4000   # the ensemble's tickTime is 500 ms: sessions may be 1 000..10 000 ms


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory):
    zk = ZkEnsemble(tmp_path_factory.mktemp("zk"), n=3)
    try:
        zk.start(timeout=60)
    except Exception as e:  # noqa: BLE001 - no java / zookeeper jars on this machine
        zk.close()
        pytest.skip("cannot start a ZooKeeper ensemble: %s" % str(e).splitlines()[0])
    yield zk
    zk.close()


@pytest.fixture
def chroot():
    return "/kbtest/" + uuid.uuid4().hex[:12]


@pytest.fixture
def backends(ensemble, chroot):
    made = []

    def make(session_ms=SESSION_MS, **kw):
        b = ZooKeeperBackend(ensemble.connect_string + chroot, session_ms, 10000, **kw).start()
        made.append(b)
        return b
    yield make
    for b in made:
        b.stop()


@pytest.fixture
def raw(ensemble):
    """A plain kazoo client on the ensemble root, to check what really landed in ZooKeeper."""
    c = KazooClient(hosts=ensemble.connect_string, handler=SequentialGeventHandler(), timeout=10)
    c.start(timeout=10)
    yield c
    c.stop()
    c.close()


def wait_for(pred, timeout=10.0, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for %s" % what)
        gevent.sleep(0.05)


def expire_session(ensemble, backend):
    """Expire ``backend``'s session for real: a second client joins the session (same id + password) and closes
    it, which ends the session on the server (ephemerals deleted); the first client then finds it expired."""
    sid, passwd = backend.client.client_id
    other = KazooClient(hosts=ensemble.connect_string, client_id=(sid, passwd), handler=SequentialGeventHandler(),
                        timeout=SESSION_MS / 1000)
    other.start(timeout=10)
    other.stop()
    other.close()
    return sid


def test_split_connect_string():
    assert split_connect_string("a:1,b:2/kafka/x") == ("a:1,b:2", "/kafka/x")
    assert split_connect_string("a:1/") == ("a:1", None)
    assert split_connect_string(" a:1 ") == ("a:1", None)
    with pytest.raises(CoordinationError):
        split_connect_string("a:1/x//y")


def test_connection_timeout_names_the_connect_string():
    port = free_ports(1)[0]  # nobody listens there
    b = ZooKeeperBackend("127.0.0.1:%d/kafka" % port, 4000, 1000)
    t0 = time.monotonic()
    with pytest.raises(CoordinationError) as e:
        b.start()
    assert time.monotonic() - t0 < 5
    assert "127.0.0.1:%d/kafka" % port in str(e.value)
    assert "1000 ms" in str(e.value)


def test_chroot_is_created_and_operations_translate_errors(backends, raw, chroot):
    b = backends()
    assert raw.exists(chroot) is not None
    assert b.session_id == b.client.client_id[0] and b.session_id > 0
    assert b.create("/a", b"x") == "/a"
    data, st = b.get("/a")
    assert (data, st.version, st.ephemeral_owner) == (b"x", 0, 0)
    assert raw.get(chroot + "/a")[0] == b"x"  # the chroot prefixes every path
    assert b.set("/a", b"y").version == 1
    with pytest.raises(BadVersionError):
        b.set("/a", b"z", version=0)
    assert b.set("/a", b"z", version=1).version == 2
    with pytest.raises(NodeExistsError):
        b.create("/a")
    with pytest.raises(NoNodeError):
        b.create("/missing/child")
    assert b.create("/deep/er/node", b"d", makepath=True) == "/deep/er/node"
    assert b.get_children("/deep") == ["er"]
    with pytest.raises(NoNodeError):
        b.get("/nope")
    assert b.exists("/nope") is None
    assert b.get_or_none("/nope") == (None, None)
    e = b.create("/eph", b"", ephemeral=True)
    assert b.exists(e).ephemeral_owner == b.session_id
    with pytest.raises(NoChildrenForEphemeralsError):
        b.create("/eph/child")
    b.ensure_path("/seq")
    assert [b.create("/seq/n", sequence=True) for _ in range(3)] == [
        "/seq/n0000000000", "/seq/n0000000001", "/seq/n0000000002"]
    b.delete("/seq/n0000000001")
    # Real ZooKeeper (3.8) numbers by child *creations* (the delete bumped cversion to 4 but not the counter);
    # the embedded backend uses cversion (4 here). Both are unique and increasing, which is all Kafka relies on.
    assert b.create("/seq/n", sequence=True) == "/seq/n0000000003"
    for name in ("c", "a", "b"):
        b.create("/kids/" + name, makepath=True)
    assert b.get_children("/kids") == ["a", "b", "c"]
    with pytest.raises(NotEmptyError):
        b.delete("/kids")
    with pytest.raises(BadVersionError):
        b.delete("/kids", version=5, recursive=True)
    b.create("/kids/a/grand", makepath=True)
    b.delete("/kids", recursive=True)
    assert b.exists("/kids") is None
    with pytest.raises(NoNodeError):
        b.delete("/kids", recursive=True)
    with pytest.raises(BadVersionError):
        b.delete("/a", version=0)
    b.delete("/a", version=2)
    b.stop()
    assert raw.exists(chroot + "/eph") is None  # ephemerals end with the session
    with pytest.raises(CoordinationError):
        b.get("/deep")


def test_watches_follow_the_embedded_semantics(backends):
    b, other = backends(), backends()
    seen_data, seen_kids = [], []
    b.watch_data("/w", lambda d, st: seen_data.append((d, st and st.version)))
    b.watch_children("/w", lambda kids: seen_kids.append(kids))
    assert seen_data == [(None, None)] and seen_kids == [[]]  # called once at registration, in our greenlet
    other.create("/w", b"1")
    wait_for(lambda: len(seen_data) == 2, what="create event")
    other.set("/w", b"2")
    other.create("/w/b")
    other.create("/w/a")
    wait_for(lambda: seen_data[-1] == (b"2", 1) and seen_kids[-1] == ["a", "b"], what="set + children")
    other.delete("/w", recursive=True)
    wait_for(lambda: seen_data[-1] == (None, None) and seen_kids[-1] == [], what="delete")
    other.create("/w/x", makepath=True)  # re-created: the watches are still there
    wait_for(lambda: seen_data[-1] == (b"", 0) and seen_kids[-1] == ["x"], what="re-create")
    assert seen_data[0] == (None, None) and seen_data[1] == (b"1", 0)
    assert all(seen_kids[i] != seen_kids[i + 1] for i in range(len(seen_kids) - 1))  # only real changes

    calls = []
    w = b.watch_children("/w", lambda kids: calls.append(kids) or (False if len(calls) == 2 else None))
    other.create("/w/y")
    wait_for(lambda: len(calls) == 2, what="second children call")
    other.create("/w/z")
    gevent.sleep(0.5)
    assert calls == [["x"], ["x", "y"]] and not w.active
    data_calls = []
    wd = b.watch_data("/w", lambda d, st: data_calls.append(d))
    wd.cancel()
    other.set("/w", b"after-cancel")
    gevent.sleep(0.5)
    assert data_calls == [b""]


def test_children_watch_sees_a_child_deleted_and_recreated_between_reads(backends, raw, chroot):
    """Issue 8: [a] -> [] -> [a] in one transaction leaves the same list; the parent's pzxid moved, so the watch
    must still be called (the controller's /brokers/ids watch missed a bounced broker this way)."""
    b = backends()
    b.create("/w/a", makepath=True)
    b.create("/w/b")
    calls = []
    b.watch_children("/w", lambda kids: calls.append(kids))
    assert calls == [["a", "b"]]
    czxid = b.exists("/w/a").czxid
    t = raw.transaction()
    t.delete(chroot + "/w/a")
    t.create(chroot + "/w/a", b"")
    assert t.commit() == [True, chroot + "/w/a"]
    wait_for(lambda: len(calls) == 2, what="the watch after a delete + create of one child")
    assert calls == [["a", "b"], ["a", "b"]] and b.exists("/w/a").czxid > czxid
    b.set("/w", b"data")  # a data change of the parent is no children change
    b.set("/w/b", b"data")
    gevent.sleep(0.5)
    assert len(calls) == 2


def test_session_expiry_runs_hooks_and_rewatches(ensemble, backends):
    b, other = backends(), backends()
    events = []
    b.on_session_expired(lambda: events.append("expired"))
    b.on_reconnected(lambda: events.append(("new session", b.session_id)))
    kids = []
    b.watch_children("/members", lambda k: kids.append(k))
    b.create("/members/mine", ephemeral=True, makepath=True)
    wait_for(lambda: kids[-1] == ["mine"], what="own ephemeral")
    old = expire_session(ensemble, b)
    wait_for(lambda: len(events) == 2, timeout=15, what="expiry + new session hooks")
    assert events[0] == "expired"
    assert events[1][0] == "new session" and events[1][1] not in (0, old)
    wait_for(lambda: kids[-1] == [], what="ephemeral gone with the old session")
    other.create("/members/theirs", ephemeral=True)
    wait_for(lambda: kids[-1] == ["theirs"], what="children watch re-armed in the new session")


def test_register_broker_writes_kafkas_json(backends, raw, chroot):
    b = backends()
    reg = register_broker(b, 3, [("PLAINTEXT", "127.0.0.1", 9092), ("INTERNAL", "10.0.0.1", 9093)],
                          {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "SSL"}, rack="r1")
    data, st = raw.get(chroot + "/brokers/ids/3")
    assert st.ephemeralOwner == b.session_id
    obj = json.loads(data)
    assert list(obj) == ["listener_security_protocol_map", "endpoints", "jmx_port", "host", "timestamp", "port",
                         "version", "rack"]
    assert obj["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "SSL"}
    assert obj["endpoints"] == ["PLAINTEXT://127.0.0.1:9092", "INTERNAL://10.0.0.1:9093"]
    assert (obj["host"], obj["port"], obj["jmx_port"], obj["version"], obj["rack"]) == ("127.0.0.1", 9092, -1, 4,
                                                                                        "r1")
    assert abs(int(obj["timestamp"]) - time.time() * 1000) < 60000
    assert BrokerIdZNode.decode(data).endpoints == [("PLAINTEXT", "127.0.0.1", 9092), ("INTERNAL", "10.0.0.1", 9093)]
    reg.deregister()
    assert raw.exists(chroot + "/brokers/ids/3") is None


def test_generated_ids_and_cluster_id(backends):
    b, other = backends(), backends()
    assert [generate_broker_id(b, 1000), generate_broker_id(other, 1000), generate_broker_id(b, 50)] == [1001, 1002,
                                                                                                          53]
    cid = cluster_id(b)
    assert len(cid) == 22 and cluster_id(other) == cid
    assert json.loads(b.get("/cluster/id")[0]) == {"version": "1", "id": cid}


def test_reregisters_after_session_expiry(ensemble, backends):
    b = backends()
    reg = register_broker(b, 5, [("PLAINTEXT", "127.0.0.1", 9092)], {"PLAINTEXT": "PLAINTEXT"})
    first_epoch = reg.epoch   # KIP-380 broker epoch: the czxid of our node
    assert first_epoch == b.exists("/brokers/ids/5").czxid > 0 and reg.wait_epoch(0) == first_epoch
    old = expire_session(ensemble, b)
    wait_for(lambda: b.session_id not in (0, old), timeout=15, what="new session")
    st = wait_for(lambda: b.exists("/brokers/ids/5"), timeout=10, what="re-registration")
    assert st.ephemeral_owner == b.session_id != old
    assert reg.wait_epoch(5) == st.czxid > first_epoch   # a new incarnation: a larger epoch
    reg.deregister()


def test_stale_registration_blocks_until_its_session_is_gone(backends):
    first, second = backends(), backends()
    ep = [("PLAINTEXT", "127.0.0.1", 9092)]
    register_broker(first, 7, ep, {"PLAINTEXT": "PLAINTEXT"})
    t0 = time.monotonic()
    with pytest.raises(NodeExistsError) as e:  # a live broker with the same id: bounded wait, then an error
        register_broker(second, 7, ep, {"PLAINTEXT": "PLAINTEXT"}, wait_timeout_ms=600)
    assert 0.5 < time.monotonic() - t0 < 3
    assert "/brokers/ids/7" in str(e.value) and "broker id 7" in str(e.value)
    gevent.spawn_later(1.0, first.stop)  # the old incarnation's session ends while we wait
    t0 = time.monotonic()
    reg = register_broker(second, 7, ep, {"PLAINTEXT": "PLAINTEXT"})
    assert time.monotonic() - t0 >= 0.9
    assert second.exists("/brokers/ids/7").ephemeral_owner == second.session_id
    assert reg.wait_timeout_ms == SESSION_MS + 5000


def test_restart_before_expiry_waits_for_the_old_session(ensemble, backends):
    """A client-side expiry (kazoo's test trick) leaves the old session alive on the server until its timeout:
    the re-registration in the new session must wait for the stale node, then take it over."""
    from kazoo.protocol.connection import _SESSION_EXPIRED

    b = backends()
    register_broker(b, 9, [("PLAINTEXT", "127.0.0.1", 9092)], {"PLAINTEXT": "PLAINTEXT"})
    old = b.session_id
    t0 = time.monotonic()
    b.client._call(_SESSION_EXPIRED, None)
    wait_for(lambda: b.session_id not in (0, old), timeout=10, what="new session")
    def taken_over():
        # One read: the stale node can vanish (its session expiring) between two exists() calls.
        st = b.exists("/brokers/ids/9")
        return st is not None and st.ephemeral_owner == b.session_id
    st = wait_for(taken_over, timeout=SESSION_MS / 1000 + 8, what="takeover of the stale node")
    assert st
    # The server only expires the old session after its timeout (4 s, checked every tick).
    assert time.monotonic() - t0 > SESSION_MS / 1000 * 0.5


def test_make_backend_from_config(ensemble, chroot, tmp_path):
    cfg = BrokerConfig.from_sources(None, ["log.dirs=%s" % tmp_path, "zookeeper.connect=%s%s" % (
        ensemble.connect_string, chroot), "zookeeper.session.timeout.ms=6000"])
    b = make_backend(cfg)
    assert isinstance(b, ZooKeeperBackend)
    assert (b.chroot, b.session_timeout_ms, b.connection_timeout_ms) == (chroot, 6000, 6000)
    with b:
        b.ensure_path("/brokers/ids")
        assert b.get_children("/brokers") == ["ids"]


# ------------------------------------------------------------------------------ kbroker-admin topics --zookeeper

def _admin(capsys, *argv):
    from kbroker.cli import admin

    rc = admin.main(["topics", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_admin_topics_zookeeper_mode(ensemble, backends, raw, chroot, capsys):
    b = backends()
    for bid in (1, 2, 3):
        register_broker(b, bid, [("PLAINTEXT", "127.0.0.1", 9090 + bid)], {"PLAINTEXT": "PLAINTEXT"})
    zk = ensemble.connect_string + chroot
    rc, out, err = _admin(capsys, "--zookeeper", zk, "--create", "--topic", "orders", "--partitions", "6",
                          "--replication-factor", "2", "--config", "retention.ms=1000")
    assert (rc, out, err) == (0, "Created topic orders.\n", "")
    assert json.loads(raw.get(chroot + "/config/topics/orders")[0]) == {"version": 1,
                                                                        "config": {"retention.ms": "1000"}}
    topic = json.loads(raw.get(chroot + "/brokers/topics/orders")[0])
    assert topic["version"] == 1 and sorted(topic["partitions"], key=int) == [str(p) for p in range(6)]
    reps = {int(p): r for p, r in topic["partitions"].items()}
    # Kafka's layout for 3 brokers: leaders round-robin, each follower on another broker.
    assert sorted(r[0] for r in reps.values()) == [1, 1, 2, 2, 3, 3]
    assert all(len(set(r)) == 2 and set(r) <= {1, 2, 3} for r in reps.values())
    # config before assignment (what the controller watches), like AdminUtils
    assert raw.exists(chroot + "/config/topics/orders").czxid < raw.exists(chroot + "/brokers/topics/orders").czxid

    rc, out, err = _admin(capsys, "--zookeeper", zk, "--create", "--topic", "orders", "--partitions", "1",
                          "--replication-factor", "1")
    assert rc == 1 and err == "Error while executing topic command : Topic 'orders' already exists.\n"
    assert _admin(capsys, "--zookeeper", zk, "--create", "--topic", "orders", "--partitions", "1",
                  "--replication-factor", "1", "--if-not-exists")[:2] == (0, "")
    rc, out, err = _admin(capsys, "--zookeeper", zk, "--create", "--topic", "big", "--partitions", "1",
                          "--replication-factor", "4")
    assert (rc, err) == (1, "Error while executing topic command : replication factor: 4 larger than available "
                            "brokers: 3\n")
    rc, out, err = _admin(capsys, "--zookeeper", zk, "--create", "--topic", "x")
    assert rc == 1 and err.startswith('Missing required argument "[partitions]"\n')
    assert _admin(capsys, "--zookeeper", zk, "--create", "--topic", "manual", "--replica-assignment",
                  "3:1,1:2")[:2] == (0, "Created topic manual.\n")
    assert json.loads(raw.get(chroot + "/brokers/topics/manual")[0]) == {"version": 1,
                                                                         "partitions": {"0": [3, 1], "1": [1, 2]}}

    # a controller's partition state for partition 0 of manual; partition 1 has none yet
    TopicStore(b).set_partition_state("manual", 0, leader=3, isr=[3], leader_epoch=0, controller_epoch=1)
    rc, out, err = _admin(capsys, "--zookeeper", zk, "--describe", "--topic", "manual")
    assert (rc, err) == (0, "")
    assert out == ("Topic: manual\tPartitionCount: 2\tReplicationFactor: 2\tConfigs: \n"
                   "\tTopic: manual\tPartition: 0\tLeader: 3\tReplicas: 3,1\tIsr: 3\n"
                   "\tTopic: manual\tPartition: 1\tLeader: none\tReplicas: 1,2\tIsr: \n")
    rc, out, _ = _admin(capsys, "--zookeeper", zk, "--describe", "--under-replicated-partitions")
    assert out.count("\n") == 8 and "Partition: 0\tLeader: 3" in out  # all 8 partitions lack a full ISR
    rc, out, _ = _admin(capsys, "--zookeeper", zk, "--describe", "--topics-with-overrides")
    assert out == "Topic: orders\tPartitionCount: 6\tReplicationFactor: 2\tConfigs: retention.ms=1000\n"
    assert _admin(capsys, "--zookeeper", zk, "--list")[:2] == (0, "manual\norders\n")

    assert _admin(capsys, "--zookeeper", zk, "--alter", "--topic", "orders", "--partitions", "8")[:2] == (0, "")
    after = {int(p): r for p, r in json.loads(raw.get(chroot + "/brokers/topics/orders")[0])["partitions"].items()}
    assert {p: after[p] for p in range(6)} == reps and sorted(after) == list(range(8))
    # new partitions continue the layout from partition 0's first replica (Kafka's addPartitions)
    first = sorted([1, 2, 3]).index(reps[0][0])
    assert [after[6][0], after[7][0]] == [[1, 2, 3][(6 + first) % 3], [1, 2, 3][(7 + first) % 3]]
    rc, _, err = _admin(capsys, "--zookeeper", zk, "--alter", "--topic", "orders", "--partitions", "3")
    assert (rc, err) == (1, "Error while executing topic command : Topic currently has 8 partitions, which is "
                            "higher than the requested 3.\n")
    assert _admin(capsys, "--zookeeper", zk, "--alter", "--topic", "manual", "--partitions", "3",
                  "--replica-assignment", "3:1,1:2,2:3")[:2] == (0, "")
    assert json.loads(raw.get(chroot + "/brokers/topics/manual")[0])["partitions"]["2"] == [2, 3]

    assert _admin(capsys, "--zookeeper", zk, "--delete", "--topic", "orders")[:2] == (0, "")
    assert raw.get(chroot + "/admin/delete_topics/orders")[0] == b""
    assert raw.exists(chroot + "/brokers/topics/orders") is not None  # the controller does the deleting
    rc, _, err = _admin(capsys, "--zookeeper", zk, "--delete", "--topic", "nope")
    assert (rc, err) == (1, "Error while executing topic command : Topic 'nope' does not exist as expected\n")


def test_admin_topics_zookeeper_unreachable(capsys, monkeypatch):
    from kbroker.cli import topics_zk

    monkeypatch.setattr(topics_zk, "TIMEOUT_MS", 1000)
    port = free_ports(1)[0]
    rc, out, err = _admin(capsys, "--zookeeper", "127.0.0.1:%d" % port, "--list")
    assert rc == 1 and out == ""
    assert err.startswith("Error while executing topic command : could not connect to ZooKeeper at 127.0.0.1:%d "
                          "within 1000 ms" % port)


def test_losing_one_node_of_three_keeps_the_session(ensemble, backends):
    """Kill the node this client is connected to: kazoo moves to another node inside the same session (no expiry
    hook, ephemerals and watches intact). Last in the module: it restarts that node."""
    b, other = backends(), backends()
    events, kids = [], []
    b.on_session_expired(lambda: events.append("expired"))
    b.on_reconnected(lambda: events.append("new session"))
    b.watch_children("/live", lambda k: kids.append(k))
    b.create("/live/me", ephemeral=True, makepath=True)
    sid = b.session_id
    port = b.client._connection._socket.getpeername()[1]
    victim = ensemble.client_ports.index(port)
    pool = gevent.get_hub().threadpool  # harness calls block: keep the hub (and kazoo's pings) running
    pool.apply(ensemble.kill, (victim,))
    b.set("/live", b"still here")  # retried on the connection loss, served by a surviving node
    assert b.session_id == sid
    other.create("/live/you", ephemeral=True)
    wait_for(lambda: kids[-1] == ["me", "you"], what="children watch after the failover")
    assert events == [] and b.exists("/live/me").ephemeral_owner == sid
    pool.apply(ensemble.restart, (victim,))


def test_set_many_is_multi_fenced_and_reports_per_item(backends, raw, chroot, monkeypatch):
    """Controller elections in ZooKeeper multi transactions (issue 15 target 4): 2,500 conditional sets in 3
    transactions with the /controller_epoch check; a transaction holding a stale version is re-sent item by item so
    only that item fails; a failed check raises and writes nothing."""
    from kbroker.coord import zk as zkmod

    b = backends()
    b.create("/controller_epoch", b"1")
    b.create_many([("/s/%d" % i, b"v0", True) for i in range(2500)])
    b.set("/s/7", b"moved")                                     # version 1: the controller's copy says 0
    sent = []
    real = zkmod.MULTI_SETS
    client = b.client
    orig = client.transaction
    monkeypatch.setattr(client, "transaction", lambda: sent.append(1) or orig())
    items = [("/s/%d" % i, b"v1", 0) for i in range(2500)] + [("/s/missing", b"x", 0)]
    waves = []
    out = b.set_many(items, check=("/controller_epoch", 0),
                     on_wave=lambda ix, res: waves.append((list(ix), list(res), len(sent))))
    # 3 transactions; then the other 999 of the 1st and 500 of the 3rd (holding /s/missing) one by one.
    assert real == 1000 and len(sent) == 3 + 999 + 500
    # on_wave: each transaction's final results as its answer came in (the 2nd whole, before any re-send), then
    # the re-sent ones; every item exactly once.
    assert [(ix[0], len(ix), n) for ix, _res, n in waves] == [(7, 1, 3), (1000, 1000, 3), (2500, 1, 3),
                                                              (0, 999 + 500, 3 + 999 + 500)]
    assert sorted(i for ix, _res, _n in waves for i in ix) == list(range(2501))
    assert all(out[i] is r for ix, res, _n in waves for i, r in zip(ix, res))
    assert isinstance(out[7], BadVersionError) and isinstance(out[2500], NoNodeError)
    assert [o.version for i, o in enumerate(out[:2500]) if i != 7] == [1] * 2499
    assert raw.get(chroot + "/s/7")[0] == b"moved" and raw.get(chroot + "/s/2499")[0] == b"v1"
    b.set("/controller_epoch", b"2")                            # another controller won: nothing may apply
    with pytest.raises(BadVersionError) as ei:
        b.set_many([("/s/1", b"zombie", 1)], check=("/controller_epoch", 0))
    assert ei.value.path == "/controller_epoch" and raw.get(chroot + "/s/1")[0] == b"v1"
    assert b.set_many([], check=("/controller_epoch", 1)) == []
    # Pipelined reads and deletes (the controller's ISR change notifications).
    got = b.get_many(["/s/0", "/s/missing", "/s/7"])
    assert [g[0] for g in got] == [b"v1", None, b"moved"] and got[0][1].version == 1 and got[1][1] is None
    b.delete_many(["/s/%d" % i for i in range(2500)] + ["/s/missing"])
    assert raw.get_children(chroot + "/s") == []


def test_create_many_is_pipelined_and_reports_per_item(backends, raw, chroot):
    b = backends()
    b.create("/x", b"1")
    items = [("/x", b"dup", False), ("/orphan/y", b"no parent", False)]
    items += [("/brokers/topics/t/partitions/%d/state" % p, b'{"p":%d}' % p, True) for p in range(300)]
    out = b.create_many(items)
    assert isinstance(out[0], NodeExistsError) and isinstance(out[1], NoNodeError)
    assert out[2:] == ["/brokers/topics/t/partitions/%d/state" % p for p in range(300)]
    assert raw.get(chroot + "/brokers/topics/t/partitions/299/state")[0] == b'{"p":299}'
    assert sorted(raw.get_children(chroot + "/brokers/topics/t/partitions"), key=int) == [str(p) for p in range(300)]
    assert raw.get(chroot + "/x")[0] == b"1"


def test_concurrent_pipelines_from_many_greenlets_all_answer(backends):
    """Ten greenlets each pipelining 2,000 reads at once (a controller's re-reads beside leaders' ISR batches):
    every read answers. kazoo writes one wake-up byte per request to a socketpair, and once its buffer is full only
    one greenlet may wait to write; before the submissions were serialised the others got ConnectionClosedError
    ("client is stopped") on a healthy session, and their requests were stranded in kazoo's queue."""
    b = backends()
    paths = ["/many/p%04d" % i for i in range(2000)]
    assert not any(isinstance(r, Exception) for r in b.create_many([(p, b"v%d" % i, True)
                                                                     for i, p in enumerate(paths)]))
    jobs = [gevent.spawn(b.get_many, paths) for _ in range(10)]
    gevent.joinall(jobs, timeout=60)
    assert [j.exception for j in jobs] == [None] * 10
    assert all([data for data, _st in j.value] == [b"v%d" % i for i in range(2000)] for j in jobs)
    assert b.get("/many/p1999")[0] == b"v1999"          # the session still serves a plain call afterwards
