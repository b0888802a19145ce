"""Host-aware replica placement (issue 15 target 8): several broker processes per host, combined with racks.

kbroker.controller.assignment takes ``hosts`` = {broker id: host}; when >= 2 hosts exist and some host runs more
than one broker, no two replicas of a partition share a host while RF <= #hosts, racks still come first, and
otherwise the layout is Kafka's, unchanged. controller.topics.create_topic feeds it the host of each broker's
first registered endpoint.
"""
import random
from collections import Counter

from kbroker.controller.assignment import assign_replicas_to_brokers, host_alternated_brokers
from kbroker.controller.topics import create_topic, live_broker_hosts
from kbroker.coord import EmbeddedBackend
from kbroker.coord.metadata_store import TopicStore
from kbroker.coord.znodes import BrokerIdZNode

TWO_HOSTS = {0: "hostA", 1: "hostA", 2: "hostB", 3: "hostB"}


def _hosts_of(replicas, hosts):
    return [hosts[b] for b in replicas]


def test_kafkas_layout_puts_two_replicas_on_one_host_without_hosts():
    # The reason for the feature: Kafka's rack-unaware walk with brokers 0,1 on one host and 2,3 on another gives
    # partition 0 the replicas [0, 1] (start index 0): both on hostA.
    kafka = assign_replicas_to_brokers(range(4), 8, 2, start_index=0)
    assert kafka[0] == [0, 1]
    assert sum(len(set(_hosts_of(r, TWO_HOSTS))) == 1 for r in kafka.values()) == 2  # [0, 1] and [2, 3]


def test_exact_layout_two_hosts_two_brokers_each():
    # arranged list 0,2,1,3 (hosts alternate); follower = next candidate of the walk, stride = #hosts = 2 once the
    # shift grows at p = 4.
    assert host_alternated_brokers({b: None for b in TWO_HOSTS}, {b: (None, h) for b, h in TWO_HOSTS.items()}) \
        == [0, 2, 1, 3]
    got = assign_replicas_to_brokers(range(4), 6, 2, start_index=0, hosts=TWO_HOSTS)
    assert got == {0: [0, 2], 1: [2, 1], 2: [1, 3], 3: [3, 0], 4: [0, 3], 5: [2, 0]}


def test_no_two_replicas_share_a_host_random_starts_and_leaders_balanced():
    hosts = {b: "h%d" % (b // 2) for b in range(6)}  # 3 hosts x 2 brokers
    for seed in range(30):
        got = assign_replicas_to_brokers(range(6), 60, 3, hosts=hosts, rng=random.Random(seed))
        assert sorted(got) == list(range(60))
        for p, reps in got.items():
            assert len(set(reps)) == 3, (seed, p, reps)
            assert len(set(_hosts_of(reps, hosts))) == 3, (seed, p, reps)
        # every broker leads 10 of the 60 partitions and holds 30 replicas, as with Kafka's walk
        assert Counter(r[0] for r in got.values()) == {b: 10 for b in range(6)}
        assert Counter(b for r in got.values() for b in r) == {b: 30 for b in range(6)}


def test_rf_above_hosts_uses_every_host_then_distinct_brokers():
    for seed in range(20):
        got = assign_replicas_to_brokers(range(4), 12, 3, hosts=TWO_HOSTS, rng=random.Random(seed))
        for reps in got.values():
            assert len(set(reps)) == 3
            assert set(_hosts_of(reps, TWO_HOSTS)) == {"hostA", "hostB"}


def test_racks_first_then_hosts():
    # rack r1: hostA {0, 1}; rack r2: hostB {2, 3}, hostC {4, 5}
    racks = {0: "r1", 1: "r1", 2: "r2", 3: "r2", 4: "r2", 5: "r2"}
    hosts = {0: "hostA", 1: "hostA", 2: "hostB", 3: "hostB", 4: "hostC", 5: "hostC"}
    for seed in range(30):
        rf2 = assign_replicas_to_brokers(racks, 30, 2, hosts=hosts, rng=random.Random(seed))
        for reps in rf2.values():
            assert {racks[b] for b in reps} == {"r1", "r2"}, reps
        rf3 = assign_replicas_to_brokers(racks, 30, 3, hosts=hosts, rng=random.Random(seed))
        for reps in rf3.values():
            assert {racks[b] for b in reps} == {"r1", "r2"}, reps
            assert len(set(_hosts_of(reps, hosts))) == 3, reps


def test_same_host_name_in_two_racks_is_two_hosts():
    # hosts are keyed (rack, host): a name reused across racks cannot make the walk run out of candidates
    racks = {0: "r1", 1: "r1", 2: "r2", 3: "r2"}
    hosts = {0: "x", 1: "x", 2: "x", 3: "y"}
    got = assign_replicas_to_brokers(racks, 8, 2, hosts=hosts, start_index=0)
    for reps in got.values():
        assert {racks[b] for b in reps} == {"r1", "r2"}


def test_layout_is_kafkas_when_hosts_cannot_matter():
    kafka = assign_replicas_to_brokers(range(5), 10, 3, start_index=0)
    one_host = {b: "127.0.0.1" for b in range(5)}            # every broker on one machine: nothing to spread
    own_hosts = {b: "host%d" % b for b in range(5)}           # one broker per host: Kafka's walk already does
    assert assign_replicas_to_brokers(range(5), 10, 3, start_index=0, hosts=one_host) == kafka
    assert assign_replicas_to_brokers(range(5), 10, 3, start_index=0, hosts=own_hosts) == kafka
    assert assign_replicas_to_brokers(range(5), 10, 3, start_index=0, hosts={}) == kafka
    racks = {0: "r1", 1: "r1", 2: "r2", 3: "r2", 4: "r3"}
    assert assign_replicas_to_brokers(racks, 10, 3, start_index=0, hosts=own_hosts) == \
        assign_replicas_to_brokers(racks, 10, 3, start_index=0)


def _register(backend, broker_id, host, port, rack=None):
    backend.create(BrokerIdZNode.path(broker_id),
                   BrokerIdZNode.encode([("PLAINTEXT", host, port)], {"PLAINTEXT": "PLAINTEXT"}, rack=rack),
                   makepath=True)


def test_create_topic_places_replicas_by_registered_host(tmp_path):
    backend = EmbeddedBackend(str(tmp_path)).start()
    try:
        for b, host in TWO_HOSTS.items():
            _register(backend, b, host + ".example", 9092 + b)
        assert live_broker_hosts(backend) == {b: h + ".example" for b, h in TWO_HOSTS.items()}
        store = TopicStore(backend)
        layout = create_topic(store, "spread", 40, 2)
        assert sorted(layout) == list(range(40))
        for reps in layout.values():
            assert {TWO_HOSTS[b] for b in reps} == {"hostA", "hostB"}, reps
    finally:
        backend.stop()
