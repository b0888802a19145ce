"""A network partition between ONE broker and ZooKeeper (issue 16 item 2): the broker still reaches the other
brokers and the clients, only its ZooKeeper links are cut (tests/integration/netfault.py: a blackhole route to the
ensemble's address inside the broker's namespace -- netfault's `cut-zookeeper` fault).

One 3-broker NetCluster for the module (session timeout 4 s, replica.lag.time.max.ms 2 s, as the other fault
tests), one client namespace c0 beside the test's root-namespace clients. Topic per test: 3 partitions, RF 3,
min.insync.replicas=2; two idempotent acks=all producers -- one in the root namespace (reaches every broker), one in
c0, which is cut from every broker but the victim at the same moment, so its writes to the victim's partition can
only go to the victim. The history checker (tests/integration/checker.py) ends every test: 0 lost, 0 misplaced, 0
duplicated, 0 out of order.

1. `test_broker_cut_from_zookeeper_is_fenced_and_rejoins` -- victim X = the leader of partition 0, not the
   controller. X's session expires (its /brokers/ids node goes after the 4 s timeout); the controller moves
   partition 0's leadership (leader epoch + 1) and removes X from every ISR in ZooKeeper. X is a *zombie leader*: it
   cannot hear that (the controller sends nothing to a broker it considers dead), its metadata still names itself
   leader of partition 0 with the old ISR, and its followers now fetch from the new leader. What it does instead:
   its high watermark cannot move (no follower fetches from it), and shrinking the ISR to acknowledge alone needs a
   conditional write of the partition state that it cannot make (no ZooKeeper; and the version it holds is stale
   anyway) -- so its ISR stays the old one in memory and it acknowledges nothing alone: of what c0 had
   acknowledged before the heal (only the victim could acknowledge it), nothing at or above the new leader's
   first offset of the new leader epoch (OffsetForLeaderEpoch; the victim truncates to it at the heal), while the
   root producer's records for partition 0 are acknowledged by the new leader. Healed: X learns its session
   expired, re-registers in a new session with a larger broker epoch (czxid), the controller handles it as a
   started broker and sends it LeaderAndIsr for all its replicas stamped with that epoch (X's state-change.log:
   accepted, error 0, from the current controller, after the heal), X truncates its zombie writes and rejoins
   every ISR.
2. `test_controller_cut_from_zookeeper` -- the same with X = the controller. A new controller is elected (epoch +
   1) on the side that reaches ZooKeeper and moves X's leaderships; X still believes it is the controller until the
   heal tells it its session expired (it cannot know earlier: ZooKeeper's expiry is the server's decision), but
   every broker obeys only the current epoch: per broker, the controller epochs of the LeaderAndIsr it accepted
   never go back and each epoch had one controller. Healed: X resigns, re-registers with a new broker epoch, rejoins
   every ISR; 0 lost.
3. `test_controller_session_expiry_then_leader_and_isr_with_new_epoch` -- helper F1's `zk-session-expiry-controller`
   fault (no cut: the session is ended on the server and the broker re-registers at once): the new term's
   LeaderAndIsr reaches the re-registered broker for every one of its replicas, stamped with its new broker epoch
   (accepted; none refused for its broker epoch), whether the new controller read the new registration at its
   start or learned it from the broker-change watch.
The module takes ~41 s (cluster start included).
"""
from __future__ import annotations

import re
import time

import pytest

from tests.integration import faults
from tests.integration.harness import skip_or_fail, wait_until
from tests.integration.test_replication_common import NumberedProducer, metadata, read_all, require_zookeeper

pytestmark = [pytest.mark.zk, pytest.mark.timeout(300)]

SESSION_MS = 4000
OVERRIDES = {"zookeeper.session.timeout.ms": SESSION_MS, "replica.lag.time.max.ms": 2000,
             "replica.socket.timeout.ms": 3000}
# session expiry (4 s + the server's expiry tick) + election + LeaderAndIsr, with margin for two busy cores
ELECTION_S = SESSION_MS / 1000 + 16
PRODUCER = {"enable.idempotence": True, "acks": "all", "message.timeout.ms": 300000,
            "request.timeout.ms": 5000, "metadata.max.age.ms": 2000}
PARTITIONS = 3
# after the election an acknowledgement the victim sent before it (its followers had the records then) may still
# be on its way to c0's delivery callback: 1 s covers it (librdkafka polls every 10 ms)
IN_FLIGHT_S = 1.0
HOLD_S = 3.0   # the zombie is watched this long past the election: > replica.lag.time.max.ms, so it tried to shrink

ACCEPTED = re.compile(r"^\[([\d\- :,]+)\] INFO Broker (\d+) completed LeaderAndIsr request from controller (\d+) "
                      r"epoch (\d+) .*partition \[([^,\]]+),(\d+)\].*: error (\d+) ")
# a partition whose leadership did not change (same leader epoch) is "ignored" -- after the request passed the
# broker-epoch and controller-epoch checks, which refuse a request as a whole (kbroker/handlers/cluster.py)
IGNORED = re.compile(r"^\[([\d\- :,]+)\] INFO Broker (\d+) ignoring LeaderAndIsr request from controller (\d+) "
                     r"epoch (\d+) for partition \[([^,\]]+),(\d+)\] since its leader epoch")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    require_zookeeper()
    from tests.integration import netfault

    if not netfault.netns_available():
        skip_or_fail("needs root and `ip netns` (network namespaces)")   # CI=true: a failure, not a skip
    c = netfault.NetCluster(tmp_path_factory.mktemp("faults-zk-partition"), overrides=OVERRIDES, clients=1)
    try:
        c.start()
        yield c
    finally:
        c.close()


def accepted(broker, ignored: bool = False) -> list[tuple[int, int, str, int, int]]:
    """[(controller id, controller epoch, topic, partition, error)] of the LeaderAndIsr partitions `broker`
    answered, in its state-change.log's order; with `ignored`, also those it ignored for an unchanged leader epoch
    (error 0: the request was accepted)."""
    path = broker.server_log_dir / "state-change.log"
    out = []
    for line in path.read_text(errors="replace").splitlines() if path.exists() else []:
        m = ACCEPTED.match(line)
        if m:
            out.append((int(m.group(3)), int(m.group(4)), m.group(5), int(m.group(6)), int(m.group(7))))
        elif ignored and (m := IGNORED.match(line)):
            out.append((int(m.group(3)), int(m.group(4)), m.group(5), int(m.group(6)), 0))
    return out


def acks(prod, partition=None) -> int:
    return sum(1 for p, _, _ in list(prod.acked) if partition is None or p == partition)


def epoch_end_offset(cluster, broker_id: int, topic: str, partition: int, leader_epoch: int) -> int:
    """OffsetForLeaderEpoch (v3, as a debug consumer) on `broker_id`: where `leader_epoch` ends in its log. Asked of
    the new leader for the old epoch it is the first offset of the new epoch: the victim's log is truncated to it
    at the heal, so every record the victim acknowledged at or above it is lost."""
    from kbroker.client.connection import BrokerConnection

    b = faults.broker(cluster, broker_id)
    host, port = b.bootstrap.rsplit(":", 1)
    with BrokerConnection(host, int(port), timeout=10) as conn:
        resp = conn.request(23, {"replica_id": -2, "topics": [{"topic": topic, "partitions": [
            {"partition": partition, "current_leader_epoch": -1, "leader_epoch": leader_epoch}]}]}, version=3)
    part = resp["topics"][0]["partitions"][0]
    assert part["error_code"] == 0, part
    return part["end_offset"]


def victim_metadata(cluster, victim: int, topic: str) -> dict:
    return metadata(faults.broker(cluster, victim), [topic])["topics"][topic]["partitions"]


def run_cut(cluster, topic: str, victim: int, partition: int) -> dict:
    """Cut `victim` from ZooKeeper (and c0 from every other broker) while both producers run; wait for the
    expiry, the election of partition `partition`'s new leader and HOLD_S more; heal; wait for the re-registration
    and full ISRs. Returns what was seen."""
    from tests.integration.netfault import NsProducer

    seen = {"victim": victim}
    old_reg = cluster.zk.exists(f"/brokers/ids/{victim}")
    seen["before"] = before = faults.partition_state(cluster, topic, partition)
    seen["controller_epoch_before"] = faults.controller_epoch(cluster)
    root = NumberedProducer(cluster.bootstrap, topic, PARTITIONS, PRODUCER, rate=100, first=0)
    c0 = NsProducer(cluster.bootstrap, topic, PARTITIONS, PRODUCER, rate=100, first=1_000_000,
                    netns=cluster.net.ns_of("c0"))
    seen["producers"] = prods = (root, c0)
    for p in prods:
        p.start()
    try:
        wait_until(lambda: all(acks(p, partition) >= 20 for p in prods), 30, 0.1, "20 acks each before the cut")
        log_at_cut = len(faults.broker(cluster, victim).log_text())
        cluster.net.cut(cluster.node(victim), "zk")
        cluster.net.partition(["c0"], cluster.others(victim))
        cut_at = time.monotonic()
        faults.wait_unregistered(cluster, victim, timeout=ELECTION_S)
        seen["expired_s"] = time.monotonic() - cut_at
        after = wait_until(lambda: (s := faults.partition_state(cluster, topic, partition))["leader"] != victim
                           and s, ELECTION_S, 0.1, f"a new leader for {topic}-{partition}")
        seen["elected_s"] = time.monotonic() - cut_at
        seen["after"] = after
        time.sleep(IN_FLIGHT_S)   # acknowledgements sent before the election reach the callback (see IN_FLIGHT_S)
        c0_at_election = acks(c0, partition)
        c0_sent_at_election = c0.sent
        root_at_election = acks(root, partition)
        # the victim must leave every ISR in ZooKeeper (the controller's removal, and no leader re-adds it)
        wait_until(lambda: all(victim not in faults.partition_state(cluster, topic, p)["isr"]
                               for p in range(PARTITIONS)), ELECTION_S, 0.1, f"broker {victim} out of every ISR")
        seen["isr_while_cut"] = {p: faults.partition_state(cluster, topic, p)["isr"] for p in range(PARTITIONS)}
        # the majority side acknowledges partition `partition`'s records from the root producer
        wait_until(lambda: acks(root, partition) >= root_at_election + 20, 30, 0.1,
                   "20 acks of the moved partition from the new leader")
        deadline = time.monotonic() + HOLD_S
        samples = []
        while time.monotonic() < deadline:
            # the zombie's view and the ISR in ZooKeeper, sampled: it must never leave the victim in an ISR again
            samples.append({p: faults.partition_state(cluster, topic, p)["isr"] for p in range(PARTITIONS)})
            time.sleep(0.25)
        seen["isr_samples"] = samples
        seen["readded"] = sum(1 for sample in samples if any(victim in isr for isr in sample.values()))
        seen["isr_end"] = wait_until(
            lambda: (st := {p: faults.partition_state(cluster, topic, p)["isr"] for p in range(PARTITIONS)})
            and all(victim not in isr for isr in st.values()) and st, ELECTION_S, 0.1,
            f"broker {victim} out of every ISR at the end of the hold")
        seen["zombie_view"] = victim_metadata(cluster, victim, topic)[partition]
        seen["c0_while_cut"] = acks(c0, partition) - c0_at_election
        seen["new_epoch_start"] = epoch_end_offset(cluster, after["leader"], topic, partition, before["leader_epoch"])
        # c0 reaches only the victim until the heal: every acknowledgement it has now came from the victim
        seen["c0_acked_before_heal"] = [(p, o) for p, o, _ in list(c0.acked) if p == partition]
        seen["c0_sent_while_cut"] = c0.sent - c0_sent_at_election
        seen["held_s"] = time.monotonic() - cut_at
        # what the victim answered so far: the controller considers it dead, so what it accepts after this line
        # was sent to its new registration
        seen["accepted_before_heal"] = len(accepted(faults.broker(cluster, victim)))
        # the zombie's ISR shrinks while cut: each waits for ZooKeeper, and one waiting holds the broker's ISR
        # writer, so usually only the first partition to lag logs one
        seen["shrinks_tried"] = faults.broker(cluster, victim).log_text()[log_at_cut:].count("shrinking ISR")
    finally:
        cluster.net.heal()
    healed_at = time.monotonic()
    try:
        new_reg = wait_until(lambda: (st := cluster.zk.exists(f"/brokers/ids/{victim}")) is not None
                             and st.czxid != old_reg.czxid and st, 60, 0.1, f"broker {victim} re-registered",
                             ignore=(Exception,))
        seen["reregistered_s"] = time.monotonic() - healed_at
        cluster.wait_full_isr(topic, PARTITIONS, timeout=60)
        seen["rejoined_s"] = time.monotonic() - healed_at
        wait_until(lambda: acks(c0, partition) >= c0_at_election + seen["c0_while_cut"] + 20, 60, 0.1,
                   "c0 acknowledged again after the heal")
    finally:
        for p in prods:
            p.stop()
    seen["old_reg"], seen["new_reg"] = old_reg, new_reg
    return seen


def check_history(seen, topic: str):
    prods = seen["producers"]
    total, each = faults.check_producers(prods, read_all(seen["cluster"].bootstrap, topic, PARTITIONS))
    print(f"checker (broker {seen['victim']} cut from ZooKeeper, RF 3, min ISR 2, acks=all): {total.summary()}")
    for name, r in zip(("root", "c0"), each):
        print(f"  {name}: {r.summary()}")
    assert total.acknowledged == sum(p.sent for p in prods) > 0
    assert (total.lost, total.misplaced, total.duplicated, total.out_of_order, total.offset_gaps) == \
        (0, 0, 0, 0, 0), total.summary()


def check_fenced_and_rejoined(cluster, seen, topic: str, partition: int):
    victim, before, after = seen["victim"], seen["before"], seen["after"]
    # moved: a new leader at a higher leader epoch, and the victim in no ISR while cut
    assert after["leader_epoch"] > before["leader_epoch"]
    # ...and it is in none at the end of the hold (a leader may re-add a follower that still fetches; the
    # controller then removes a broker that is not alive again: counted, not forbidden)
    assert all(victim not in isr for isr in seen["isr_end"].values()), seen["isr_end"]
    # the zombie: it still names itself leader (nobody can tell it otherwise) but acknowledged nothing
    assert seen["zombie_view"]["leader"] == victim, seen["zombie_view"]
    assert seen["c0_sent_while_cut"] > 0   # c0 kept offering the zombie writes
    # exact: an acknowledgement the victim gave at or above the new leader's epoch start is one it gave alone,
    # after its followers had moved (by time, c0_while_cut, it is ~0 too, but a loaded machine delays callbacks)
    zombie_acks = [o for _, o in seen["c0_acked_before_heal"] if o >= seen["new_epoch_start"]]
    assert zombie_acks == [], ("the zombie leader acknowledged acks=all writes after losing its ISR place",
                               seen["new_epoch_start"], zombie_acks[:10])
    # a new registration: a new session and a larger broker epoch
    old, new = seen["old_reg"], seen["new_reg"]
    assert new.ephemeralOwner not in (0, old.ephemeralOwner) and new.czxid > old.czxid
    # the current controller sent it LeaderAndIsr for every one of its replicas after the re-registration, and it
    # accepted them: the broker checks the request's broker epoch equals its own, the new czxid
    cid, cepoch = faults.controller_id(cluster), faults.controller_epoch(cluster)
    got = {p for c, e, t, p, err in accepted(faults.broker(cluster, victim))[seen["accepted_before_heal"]:]
           if (c, e, t, err) == (cid, cepoch, topic, 0)}
    assert got == set(range(PARTITIONS)), (cid, cepoch, got)
    print(f"\nbroker {victim} cut from ZooKeeper: session expired after {seen['expired_s']:.1f} s, {topic}-{partition} "
          f"leader {before['leader']} -> {after['leader']} (leader epoch {before['leader_epoch']} -> "
          f"{after['leader_epoch']}) after {seen['elected_s']:.1f} s; ISRs while cut {seen['isr_while_cut']} (victim "
          f"back in an ISR in {seen['readded']} of {len(seen['isr_samples'])} samples); "
          f"zombie's own Metadata: leader {seen['zombie_view']['leader']}, "
          f"{seen['shrinks_tried']} ISR shrink(s) tried (blocked on ZooKeeper); acks to c0 from the zombie: "
          f"{seen['c0_while_cut']} in the {seen['held_s'] - seen['elected_s']:.1f} s after the election + "
          f"{IN_FLIGHT_S:g} s, 0 at or above the new epoch's start {seen['new_epoch_start']}; "
          f"healed: re-registered after {seen['reregistered_s']:.1f} s (broker epoch {old.czxid} -> {new.czxid}), "
          f"every ISR full after {seen['rejoined_s']:.1f} s")


def topic_led_by(cluster, topic: str, leader: int) -> None:
    """`topic`: PARTITIONS partitions, RF 3, min ISR 2, partition 0 led by `leader` (the first replica), the others
    rotated so every broker leads one."""
    ids = sorted(b.broker_id for b in cluster.brokers)
    first = ids.index(leader)
    assignment = [[ids[(first + p + k) % len(ids)] for k in range(3)] for p in range(PARTITIONS)]
    cluster.create_topic(topic, assignment=assignment, configs={"min.insync.replicas": "2"})
    cluster.wait_full_isr(topic, PARTITIONS)
    assert faults.partition_state(cluster, topic, 0)["leader"] == leader


def test_broker_cut_from_zookeeper_is_fenced_and_rejoins(cluster):
    topic = "zkcut"
    controller = faults.controller_id(cluster)
    victim = min(b.broker_id for b in cluster.brokers if b.broker_id != controller)
    topic_led_by(cluster, topic, victim)
    seen = run_cut(cluster, topic, victim, 0)
    seen["cluster"] = cluster
    assert faults.controller_id(cluster) == controller   # the controller never changed
    check_fenced_and_rejoined(cluster, seen, topic, 0)
    check_history(seen, topic)


def test_controller_cut_from_zookeeper(cluster):
    topic = "zkcut-ctl"
    victim = faults.controller_id(cluster)
    topic_led_by(cluster, topic, victim)
    partition = 0
    seen = run_cut(cluster, topic, victim, partition)
    seen["cluster"] = cluster
    epoch_before = seen["controller_epoch_before"]
    new_ctl, new_epoch = faults.controller_id(cluster), faults.controller_epoch(cluster)
    assert new_epoch > epoch_before and new_ctl is not None
    # X found out at the heal and resigned
    wait_until(lambda: "resigns as controller" in faults.broker(cluster, victim).log_text(), 30, 0.2,
               f"broker {victim} resigned")
    # no two controllers acted: per broker, the controller epochs obeyed never go back; one controller per epoch
    owners = {}
    for b in cluster.brokers:
        seen_epochs = [e for _, e, _, _, err in accepted(b) if err == 0]
        assert seen_epochs == sorted(seen_epochs), (b.broker_id, seen_epochs)
        for c, e, _, _, err in accepted(b):
            if err == 0:
                assert owners.setdefault(e, c) == c, (e, owners[e], c)
    assert max(owners) <= new_epoch, (owners, new_epoch)
    check_fenced_and_rejoined(cluster, seen, topic, partition)
    print(f"controller {victim} cut from ZooKeeper: controller epoch {epoch_before} -> {new_epoch} (broker "
          f"{new_ctl}); LeaderAndIsr epochs obeyed -> controller {owners}")
    check_history(seen, topic)


def test_controller_session_expiry_then_leader_and_isr_with_new_epoch(cluster):
    """F1's fault `zk-session-expiry-controller` (the controller's session ended on the server while it stays
    connected): it re-registers within a fraction of a second, so the new controller may read its new registration
    when its term starts (then the takeover's LeaderAndIsr to every live replica reaches it) or only later (then
    the broker-change handler starts it). Either way it must get LeaderAndIsr for every one of its replicas from
    the new term, stamped with its new broker epoch (it accepts them; one with another epoch is refused whole)."""
    from tests.integration import faults_zk  # noqa: F401 - registers the fault

    topic = "zkexp-ctl"
    victim = faults.controller_id(cluster)
    topic_led_by(cluster, topic, victim)
    epoch_before = faults.controller_epoch(cluster)
    old_reg = cluster.zk.exists(f"/brokers/ids/{victim}")
    seen_before = len(accepted(faults.broker(cluster, victim), ignored=True))
    log_at = len(faults.broker(cluster, victim).log_text())
    fault = faults.FAULTS["zk-session-expiry-controller"]()
    fault.inject(cluster)
    fault.heal(cluster)
    new_reg = cluster.zk.exists(f"/brokers/ids/{victim}")
    assert fault.victim == victim and new_reg.czxid > old_reg.czxid
    wait_until(lambda: faults.controller_epoch(cluster) > epoch_before and faults.controller_id(cluster) is not None,
               ELECTION_S, 0.1, "a new controller term")
    cluster.wait_full_isr(topic, PARTITIONS, timeout=60)
    cid, cepoch = faults.controller_id(cluster), faults.controller_epoch(cluster)

    def from_new_term():
        return {p for c, e, t, p, err in accepted(faults.broker(cluster, victim), ignored=True)[seen_before:]
                if (c, e, t, err) == (cid, cepoch, topic, 0)}

    got = wait_until(lambda: from_new_term() == set(range(PARTITIONS)) and from_new_term(), 15, 0.2,
                     f"broker {victim} accepting LeaderAndIsr for {topic} from controller {cid} epoch {cepoch}")
    refused = faults.broker(cluster, victim).log_text()[log_at:].count("refused: broker epoch")
    print(f"\ncontroller {victim}'s session expired: broker epoch {old_reg.czxid} -> {new_reg.czxid}, controller "
          f"{cid} epoch {epoch_before} -> {cepoch}; LeaderAndIsr of the new term accepted for partitions "
          f"{sorted(got)}; requests refused for their broker epoch: {refused}")
    assert refused == 0
