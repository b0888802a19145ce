"""KIP-73 replication quotas: the rate (Kafka's SimpleRate), the throttled-replica lists, the dynamic bounds, and
what kbroker-admin reassign-partitions --throttle / --verify write (kbroker/quota/replication.py, cli/reassign.py)."""
import io
import re
import json

import pytest

from kbroker.cli import reassign
from kbroker.coord.embedded import EmbeddedBackend
from kbroker.coord.znodes import ConfigEntityChangeNotificationSequenceZNode, ConfigEntityZNode
from kbroker.quota.replication import (ALL_PARTITIONS, LONG_MAX, ReplicationQuota,
                                       ReplicationQuotas, SimpleRate, parse_throttled_replicas,
                                       valid_throttled_replicas)


# -- the rate -------------------------------------------------------------------------------------------------

def test_rate_is_bytes_over_elapsed_time_never_less_than_one_window():
    r = SimpleRate(11, 1, clock=None)
    r.record(1000, now=100.0)
    assert r.measure(now=100.0) == 1000.0          # one window (1 s), not 0 s: no artificial spike
    assert r.measure(now=100.5) == 1000.0
    r.record(1000, now=101.5)                      # a second sample
    assert r.measure(now=102.0) == 1000.0          # 2000 bytes over 2 s


def test_rate_forgets_samples_older_than_the_whole_span():
    r = SimpleRate(3, 1, clock=None)
    for i in range(3):
        r.record(3000, now=10.0 + i)
    assert r.measure(now=12.0) == 9000 / 2.0
    assert r.measure(now=13.0) == 6000 / 2.0        # the sample of t=10 is 3 s old: gone
    assert r.measure(now=20.0) == 0.0


def test_rate_keeps_at_most_window_num_samples():
    r = SimpleRate(2, 1, clock=None)
    r.record(1, now=0.0)
    r.record(10, now=1.0)
    r.record(100, now=1.5)                          # same sample as t=1.0
    assert len(r._samples) == 2
    assert r.measure(now=1.5) == 111 / 1.5


def test_quota_exceeded_only_above_the_bound():
    q = ReplicationQuota("leader", 1, 11, 1, bound=1000, clock=lambda: 50.0)
    q.record(1000)
    assert not q.is_quota_exceeded()                # 1000 B/s is within a 1000 B/s bound
    q.record(1)
    assert q.is_quota_exceeded()
    assert q.bytes_recorded == 1001
    assert not ReplicationQuota("leader", 1, bound=LONG_MAX).is_quota_exceeded()


# -- the throttled-replica lists -----------------------------------------------------------------------------

@pytest.mark.parametrize("value, ok", [
    ("", True), ("*", True), ("0:1", True), ("0:1,1:2", True), (" 0:1 , 1:2 ", True), (["0:1", "2:3"], True),
    ("*,0:1", True),                                 # Kafka's validator checks only the first item for '*'
    ("0:1,*", False), ("0-1", False), ("a:1", False), ("0:", False), ("0:1:2", False)])
def test_throttled_replica_list_validation(value, ok):
    assert valid_throttled_replicas(value) is ok


def test_throttled_replica_list_keeps_this_brokers_partitions():
    assert parse_throttled_replicas("0:1,1:2,2:1", 1) == frozenset([0, 2])
    assert parse_throttled_replicas(["0:1", "1:2"], 2) == frozenset([1])
    assert parse_throttled_replicas("0:1", 3) == frozenset()
    assert parse_throttled_replicas("*", 3) == ALL_PARTITIONS
    assert parse_throttled_replicas("", 1) == frozenset()
    assert parse_throttled_replicas("bogus", 1) == frozenset()


def test_is_throttled_follows_the_topic_overrides_of_its_side():
    overrides = {"t": {"leader.replication.throttled.replicas": "0:1,1:2",
                       "follower.replication.throttled.replicas": "1:1"},
                 "all": {"leader.replication.throttled.replicas": "*"}}
    leader = ReplicationQuota("leader", 1, overrides_for=overrides.get)
    follower = ReplicationQuota("follower", 1, overrides_for=overrides.get)
    assert leader.is_throttled(("t", 0)) and not leader.is_throttled(("t", 1))
    assert follower.is_throttled(("t", 1)) and not follower.is_throttled(("t", 0))
    assert leader.is_throttled(("all", 7)) and not follower.is_throttled(("all", 7))
    assert not leader.is_throttled(("other", 0))
    overrides["t"]["leader.replication.throttled.replicas"] = "1:1"     # a config change re-parses
    assert leader.is_throttled(("t", 1)) and not leader.is_throttled(("t", 0))


# -- dynamic bounds ------------------------------------------------------------------------------------------

def _backend(tmp_path):
    return EmbeddedBackend(str(tmp_path / "coord")).start()


def _set_broker_config(backend, name, config):
    path = ConfigEntityZNode.path("brokers", name)
    if backend.exists(path) is None:
        backend.create(path, ConfigEntityZNode.encode(config), makepath=True)
    else:
        backend.set(path, ConfigEntityZNode.encode(config))
    backend.create(ConfigEntityChangeNotificationSequenceZNode.path_prefix(),
                   ConfigEntityChangeNotificationSequenceZNode.encode("brokers/" + name), sequence=True,
                   makepath=True)


def test_bounds_precedence_broker_then_default_then_static():
    q = ReplicationQuotas(1, static={"leader.replication.throttled.rate": 500})
    assert (q.leader.bound, q.follower.bound) == (500, LONG_MAX)
    q.apply_dynamic({}, {"leader.replication.throttled.rate": "700", "follower.replication.throttled.rate": "800"})
    assert (q.leader.bound, q.follower.bound) == (700, 800)
    q.apply_dynamic({"follower.replication.throttled.rate": "900"}, {})
    assert (q.leader.bound, q.follower.bound) == (500, 900)
    q.apply_dynamic({"leader.replication.throttled.rate": "-5"}, {})   # invalid: ignored
    assert q.leader.bound == 500


def _watch(backend, quotas):
    """The broker's wiring (kbroker/broker.py): the dynamic broker configs' watcher applies the throttle bounds."""
    import gevent
    from kbroker.config import BrokerConfig
    from kbroker.config.dynamic import DynamicBrokerConfig
    cfg = BrokerConfig.from_dict({"log.dirs": "/nonexistent", "broker.id": str(quotas.broker_id)})
    return DynamicBrokerConfig(cfg, quotas.broker_id, backend, gevent.spawn, listeners=[
        lambda _changed, per_broker, default: quotas.apply_dynamic(per_broker, default)]).start()


def test_watcher_applies_broker_config_notifications(tmp_path):
    import gevent
    backend = _backend(tmp_path)
    try:
        _set_broker_config(backend, "1", {"leader.replication.throttled.rate": "1000"})
        q = ReplicationQuotas(1)
        _watch(backend, q)
        assert q.leader.bound == 1000 and q.follower.bound == LONG_MAX
        _set_broker_config(backend, "<default>", {"follower.replication.throttled.rate": "2000"})
        _set_broker_config(backend, "1", {})
        with gevent.Timeout(5):
            while (q.leader.bound, q.follower.bound) != (LONG_MAX, 2000):
                gevent.sleep(0.01)
        _set_broker_config(backend, "2", {"leader.replication.throttled.rate": "1"})   # another broker's
        gevent.sleep(0.2)
        assert q.leader.bound == LONG_MAX
    finally:
        backend.stop()


# -- the tool ------------------------------------------------------------------------------------------------

def test_throttled_replicas_as_kafkas_tool_writes_them():
    current = {("t", 0): [1, 2], ("t", 1): [2, 3], ("u", 0): [1]}
    proposed = {("t", 0): [3, 2], ("t", 1): [2, 3], ("u", 0): [2]}
    assert reassign.throttled_replicas(current, proposed) == {"t": ("0:1,0:2", "0:3"), "u": ("0:1", "0:2")}


def _register(backend, broker_id):
    from kbroker.coord.znodes import BrokerIdZNode
    backend.create(BrokerIdZNode.path(broker_id),
                   BrokerIdZNode.encode([("PLAINTEXT", "h", 9090 + broker_id)], {"PLAINTEXT": "PLAINTEXT"}),
                   makepath=True)


def _run(backend, *argv):
    out, err = io.StringIO(), io.StringIO()
    rc = reassign.main(["--zookeeper", "unused"] + list(argv), backend=backend, out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def _config(backend, entity_type, name):
    data, _ = backend.get_or_none(ConfigEntityZNode.path(entity_type, name))
    return ConfigEntityZNode.decode(data) if data else None


def test_execute_throttle_then_verify_removes_it(tmp_path):
    from kbroker.controller.admin_znodes import ReassignPartitionsZNode
    from kbroker.coord.metadata_store import TopicStore
    backend = _backend(tmp_path)
    try:
        for b in (1, 2, 3):
            _register(backend, b)
        store = TopicStore(backend)
        store.create_topic("t", {0: [1, 2], 1: [2, 3]}, {"retention.ms": "1000"})
        f = tmp_path / "r.json"
        f.write_text(json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [3, 2]}]}))
        rc, out, err = _run(backend, "--execute", "--reassignment-json-file", str(f), "--throttle", "1000000")
        assert rc == 0, err
        lines = out.splitlines()
        assert lines[-3:] == [reassign.THROTTLE_WARNING, "The throttle limit was set to 1000000 B/s",
                              reassign.STARTED]
        for b in ("1", "2", "3"):
            assert _config(backend, "brokers", b) == {"leader.replication.throttled.rate": "1000000",
                                                      "follower.replication.throttled.rate": "1000000"}
        assert _config(backend, "topics", "t") == {"retention.ms": "1000",
                                                   "leader.replication.throttled.replicas": "0:1,0:2",
                                                   "follower.replication.throttled.replicas": "0:3"}
        # still running: verify keeps the throttle
        rc, out, _ = _run(backend, "--verify", "--reassignment-json-file", str(f))
        assert "is still in progress" in out and reassign.THROTTLE_REMOVED not in out
        assert _config(backend, "brokers", "1")["leader.replication.throttled.rate"] == "1000000"
        # re-executing while it runs only changes the rates
        rc, out, err = _run(backend, "--execute", "--reassignment-json-file", str(f), "--throttle", "5")
        assert rc == 0 and reassign.RUNNING in err and out.strip() == "The throttle limit was set to 5 B/s"
        assert _config(backend, "brokers", "3")["follower.replication.throttled.rate"] == "5"
        # the controller's work, done by hand: the assignment changes, the znode goes
        backend.delete(ReassignPartitionsZNode.path())
        backend.set("/brokers/topics/t", json.dumps({"version": 1, "partitions": {"0": [3, 2], "1": [2, 3]}}).encode())
        rc, out, _ = _run(backend, "--verify", "--reassignment-json-file", str(f))
        assert rc == 0 and out.splitlines()[-1] == reassign.THROTTLE_REMOVED
        for b in ("1", "2", "3"):
            assert _config(backend, "brokers", b) == {}
        assert _config(backend, "topics", "t") == {"retention.ms": "1000"}
        rc, out, _ = _run(backend, "--verify", "--reassignment-json-file", str(f))
        assert reassign.THROTTLE_REMOVED not in out                 # nothing left to remove
    finally:
        backend.stop()


@pytest.mark.parametrize("argv, message", [
    (["--verify", "--reassignment-json-file", "f", "--throttle", "10"], 'Option "[verify]" can\'t be used with option '
                                                                        '"[throttle]"'),
    (["--execute", "--reassignment-json-file", "f", "--throttle", "x"], "Cannot parse argument 'x' of option throttle"),
    (["--execute", "--reassignment-json-file", "f", "--throttle", "-2"], "--throttle must be"),
    (["--execute", "--reassignment-json-file", "f", "--replica-alter-log-dirs-throttle", "10"],
     "--replica-alter-log-dirs-throttle is not supported"),
])
def test_throttle_usage_errors(argv, message):
    out, err = io.StringIO(), io.StringIO()
    assert reassign.main(["--zookeeper", "z:1"] + argv, out=out, err=err) == 1
    assert message in err.getvalue()


# -- the leader side: the Fetch handler ----------------------------------------------------------------------

def test_leader_sends_no_records_of_throttled_partitions_to_an_out_of_isr_follower_over_quota(tmp_path):
    from kbroker.handlers.fetch import fetch as fetch_handler
    from tests.unit.ctx import make_ctx
    from tests.unit.test_handler_fetch import Replicas, answers, recs, req

    b = Replicas(tmp_path, [("t", 0), ("u", 0)])          # led by broker 1; follower 2 is not in the ISR
    for topic in ("t", "u"):
        b.append(topic, 0, recs(2, 2000))
    now = [100.0]
    quota = ReplicationQuota("leader", 1, 11, 1, bound=1000,
                             overrides_for={"t": {"leader.replication.throttled.replicas": "0:1"}}.get,
                             clock=lambda: now[0])

    def fetch():
        resp = fetch_handler(make_ctx(11, replicas=b, config=b.config, replication=quota),
                             req([("t", 0, 0, 1 << 20), ("u", 0, 0, 1 << 20)], replica_id=2))
        return answers(resp)[0]

    got = fetch()                                           # within the quota: both partitions answer records
    sent = len(got[("t", 0)][2])
    assert sent > 1000 and len(got[("u", 0)][2]) > 0
    assert quota.bytes_recorded == sent                    # only the throttled partition's bytes count
    got = fetch()                                           # over the quota now: t answers nothing, u is untouched
    assert got[("t", 0)] == (0, 2, b"") and len(got[("u", 0)][2]) > 0
    assert quota.bytes_recorded == sent
    b.parts[("t", 0)].isr = [1, 2]                          # an in-sync follower is never throttled
    assert len(fetch()[("t", 0)][2]) == sent
    b.parts[("t", 0)].isr = [1]
    now[0] += 12                                            # the samples expired: within the quota again
    assert len(fetch()[("t", 0)][2]) == sent


# -- the follower side: the fetcher --------------------------------------------------------------------------

class _FollowerPart:
    def __init__(self):
        self.log_end_offset, self.appended = 0, []

    def append_as_follower(self, records):
        self.appended.append(records)
        self.log_end_offset += 1

    def update_follower_hw(self, hw):
        pass

    def apply_leader_log_start_offset(self, offset):
        pass


def test_fetcher_leaves_out_throttled_partitions_not_caught_up_while_over_quota():
    from kbroker.replica.fetcher import FetchState, ReplicaFetcher

    now = [100.0]
    quota = ReplicationQuota("follower", 2, 11, 1, bound=1000,
                             overrides_for={"t": {"follower.replication.throttled.replicas": "0:2,1:2"}}.get,
                             clock=lambda: now[0])
    f = ReplicaFetcher(2, 1, "h", 1, {"backoff_ms": 1000, "quota": quota})
    parts = {tp: _FollowerPart() for tp in (("t", 0), ("t", 1), ("u", 0))}
    states = {tp: FetchState(part, 0, truncating=False) for tp, part in parts.items()}
    assert f._unthrottled(states) == states
    f._apply(("t", 0), states[("t", 0)],
             {"error_code": 0, "records": b"x" * 1500, "high_watermark": 5, "log_start_offset": 0})
    f._apply(("u", 0), states[("u", 0)],
             {"error_code": 0, "records": b"y" * 9000, "high_watermark": 5, "log_start_offset": 0})
    assert quota.bytes_recorded == 1500                     # only the throttled partition's bytes count
    f._apply(("t", 1), states[("t", 1)], {"error_code": 0, "records": b"", "high_watermark": 0, "log_start_offset": 0})
    assert states[("t", 1)].in_sync and not states[("t", 0)].in_sync
    assert set(f._unthrottled(states)) == {("t", 1), ("u", 0)}     # t-1 is caught up: never throttled
    now[0] += 12
    assert f._unthrottled(states) == states


# -- kbroker-admin configs --zookeeper --entity-type brokers ---------------------------------------------------

def _configs(backend, capsys, *argv):
    from kbroker.cli import admin, broker_configs_zk
    args = admin.parse_configs_args(["--zookeeper", "unused", "--entity-type", "brokers"] + list(argv))
    rc = broker_configs_zk.run(args, admin.parse_add_config(args.add_config),
                               admin.parse_delete_config(args.delete_config), backend=backend)
    return rc, capsys.readouterr().out


def test_configs_zookeeper_brokers_alter_describe_and_the_broker_follows(tmp_path, capsys):
    import gevent
    backend = _backend(tmp_path)
    try:
        q = ReplicationQuotas(1)
        _watch(backend, q)
        rc, out = _configs(backend, capsys, "--entity-name", "1", "--alter", "--add-config",
                           "leader.replication.throttled.rate=1000,follower.replication.throttled.rate=2000")
        assert rc == 0 and out == "Completed updating config for entity: brokers '1'.\n"
        assert _config(backend, "brokers", "1") == {"leader.replication.throttled.rate": "1000",
                                                    "follower.replication.throttled.rate": "2000"}
        with gevent.Timeout(5):
            while (q.leader.bound, q.follower.bound) != (1000, 2000):
                gevent.sleep(0.01)
        rc, out = _configs(backend, capsys, "--entity-default", "--alter", "--add-config",
                           "leader.replication.throttled.rate=3000")
        assert out == "Completed updating config for entity: default brokers.\n"
        rc, out = _configs(backend, capsys, "--entity-name", "1", "--alter", "--delete-config",
                           "leader.replication.throttled.rate")
        with gevent.Timeout(5):
            while q.leader.bound != 3000:                   # the default applies once the broker's own value goes
                gevent.sleep(0.01)
        rc, out = _configs(backend, capsys, "--describe")
        assert out == ("Configs for brokers '1' are follower.replication.throttled.rate=2000\n"
                       "Configs for default brokers are leader.replication.throttled.rate=3000\n")
    finally:
        backend.stop()


@pytest.mark.parametrize("argv, message", [
    (["--add-config", "no.such.key=1"], "requirement failed: Unknown Dynamic Configuration 'no.such.key'."),
    (["--add-config", "broker.id=1"], "Cannot update these configs dynamically: Set(broker.id)"),
    (["--add-config", "log.retention.ms=x"], "Invalid value 'x' for configuration log.retention.ms"),
    (["--add-config", "leader.replication.throttled.rate=x"],
     "Invalid value x for configuration leader.replication.throttled.rate: Not a number of type LONG"),
    (["--add-config", "leader.replication.throttled.rate=-1"], "Value must be at least 0"),
    (["--delete-config", "follower.replication.throttled.rate"], "Invalid config(s): follower.replication"),
])
def test_configs_zookeeper_brokers_errors(tmp_path, capsys, argv, message):
    from kbroker.cli.common import CommandError
    backend = _backend(tmp_path)
    try:
        with pytest.raises(CommandError, match=re.escape(message)):
            _configs(backend, capsys, "--entity-name", "1", "--alter", *argv)
        assert _config(backend, "brokers", "1") is None
    finally:
        backend.stop()
