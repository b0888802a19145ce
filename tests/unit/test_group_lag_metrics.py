"""Consumer-group lag (kbroker/metrics/groups.py): committed offsets of the coordinator's groups against the high
watermark -- read from the Partition when led here, from the background ListOffsets cache when led elsewhere."""
import types

import gevent
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kbroker.coordinator.group import Group, OffsetAndMetadata
from kbroker.metrics.groups import FORGET_S, LIST_OFFSETS, GroupLagCollector, RemoteHighWatermarks


def scrape(collector):
    reg = CollectorRegistry()
    reg.register(collector)
    out = {}
    for fam in text_string_to_metric_families(generate_latest(reg).decode()):
        for s in fam.samples:
            out[(s.name, s.labels["group"], s.labels["topic"], s.labels["partition"])] = s.value
    return out


def lags(samples):
    return {k[1:]: v for k, v in samples.items() if k[0] == "kbroker_consumergroup_lag"}


class Coordinator:
    def __init__(self, offsets):
        self.metadata = types.SimpleNamespace(groups={})
        for gid, committed in offsets.items():
            g = Group(gid)
            g.offsets = {tp: OffsetAndMetadata(o, "", 0) for tp, o in committed.items()}
            self.metadata.groups[gid] = g


class Replicas:
    """Partitions hosted here: {tp: (is_leader, high watermark)}."""

    def __init__(self, parts):
        self.parts = parts

    def get_partition(self, topic, p):
        st = self.parts.get((topic, p))
        return None if st is None else types.SimpleNamespace(is_leader=st[0], high_watermark=st[1])


class Leaders:
    """The remote brokers: leader per partition, their HWs, the ListOffsets requests they got."""

    def __init__(self, leader_of, hws):
        self.leader_of = leader_of
        self.hws = hws
        self.requests = []
        self.down = set()

    def connect(self, host, port):
        broker = port - 9000
        if broker in self.down:
            raise ConnectionRefusedError(port)
        leaders = self

        class Conn:
            def request(self, api_key, version, body):
                assert (api_key, body["replica_id"]) == (LIST_OFFSETS, -1)
                leaders.requests.append((broker, body))
                if broker in leaders.down:
                    raise ConnectionResetError(port)
                return {"topics": [{"name": t["name"], "partitions": [
                    {"partition_index": p["partition_index"], "error_code": 0 if (t["name"], p["partition_index"]) in
                     leaders.hws else 6, "offset": leaders.hws.get((t["name"], p["partition_index"]), -1),
                     "timestamp": -1} for p in t["partitions"]]} for t in body["topics"]]}

            def close(self):
                pass
        return Conn()

    def remote(self, clock=None):
        kw = {} if clock is None else {"clock": clock}
        return RemoteHighWatermarks(lambda t, p: self.leader_of.get((t, p)), lambda b: ("127.0.0.1", 9000 + b),
                                    self.connect, **kw)


def test_lag_of_local_and_remote_partitions():
    coord = Coordinator({"g1": {("t", 0): 3, ("t", 1): 10, ("u", 0): 0}, "g2": {("t", 0): 8}})
    replicas = Replicas({("t", 0): (True, 8), ("t", 1): (False, 11)})   # t-1: a follower here, led by 2
    leaders = Leaders({("t", 1): 2, ("u", 0): 3}, {("t", 1): 12, ("u", 0): 5})
    remote = leaders.remote()
    col = GroupLagCollector(coord, replicas, remote)
    # First scrape: only the partition led here; the others are named to the cache, never fetched in the scrape.
    assert lags(scrape(col)) == {("g1", "t", "0"): 5, ("g2", "t", "0"): 0}
    assert leaders.requests == []
    remote.refresh()
    assert sorted(b for b, _ in leaders.requests) == [2, 3]             # one ListOffsets per leader
    s = scrape(col)
    assert lags(s) == {("g1", "t", "0"): 5, ("g1", "t", "1"): 2, ("g1", "u", "0"): 5, ("g2", "t", "0"): 0}
    assert s[("kbroker_consumergroup_committed_offset", "g1", "t", "1")] == 10
    # A committed offset above the HW (the HW moved back, or a commit of a future offset) is no lag, not negative.
    coord.metadata.groups["g1"].offsets[("t", 0)] = OffsetAndMetadata(9, "", 0)
    assert lags(scrape(col))[("g1", "t", "0")] == 0


def test_unknown_or_offline_leader_and_errors_give_no_series():
    coord = Coordinator({"g": {("t", 0): 1, ("t", 1): 1}})
    leaders = Leaders({("t", 0): 2, ("t", 1): -1}, {("t", 0): 4})
    remote = leaders.remote()
    col = GroupLagCollector(coord, Replicas({}), remote)
    scrape(col)
    remote.refresh()
    assert lags(scrape(col)) == {("g", "t", "0"): 3}
    leaders.hws.pop(("t", 0))            # broker 2 answers NOT_LEADER (6): dropped, asked again next round
    remote.refresh()
    assert lags(scrape(col)) == {}
    leaders.hws[("t", 0)] = 9
    leaders.down.add(2)                  # broker 2 unreachable: nothing cached, nothing raised
    remote.refresh()
    assert lags(scrape(col)) == {}
    leaders.down.clear()
    remote.refresh()
    assert lags(scrape(col)) == {("g", "t", "0"): 8}


def test_entries_no_scrape_wants_are_forgotten():
    now = [1000.0]
    leaders = Leaders({("t", 0): 2}, {("t", 0): 4})
    remote = leaders.remote(clock=lambda: now[0])
    col = GroupLagCollector(Coordinator({"g": {("t", 0): 1}}), Replicas({}), remote)
    scrape(col)
    remote.refresh()
    assert remote.get(("t", 0)) == 4
    col.groups.metadata.groups.clear()   # the group is deleted: no scrape names t-0 any more
    scrape(col)
    now[0] += FORGET_S + 1
    remote.refresh()
    assert remote.get(("t", 0)) is None


def test_refresher_fetches_a_new_partition_at_once_then_at_most_every_refresh_s():
    leaders = Leaders({("t", 0): 2}, {("t", 0): 4})
    remote = leaders.remote()
    remote.refresh_s = 0.5
    remote.start()
    try:
        col = GroupLagCollector(Coordinator({"g": {("t", 0): 1}}), Replicas({}), remote)
        scrape(col)                                   # wants t-0: the refresher is woken
        with gevent.Timeout(2):
            while remote.refreshes < 1:
                gevent.sleep(0.01)
        assert lags(scrape(col)) == {("g", "t", "0"): 3}
        gevent.sleep(0.2)
        assert remote.refreshes == 1                  # no second round before refresh_s
        with gevent.Timeout(2):
            while remote.refreshes < 2:
                gevent.sleep(0.01)
    finally:
        remote.stop()


def test_no_coordinator_no_series():
    assert scrape(GroupLagCollector(None, Replicas({}), None)) == {}
