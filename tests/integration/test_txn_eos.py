"""Exactly-once consume-transform-produce under faults (issue 11, "what must show it"), on a real 3-broker
ZooKeeper cluster, with the app (tests/integration/eos_app.py, confluent-kafka) running as separate processes and
the checker of tests/integration/eos_checker.py.

One 3-node ensemble and one 3-broker cluster for the module (RF 3 everywhere, min.insync.replicas=2; 5 partitions
of __consumer_offsets and of __transaction_state so a failover moves few coordinators); tests in file order:

1. `test_negative_control_reports_duplicates` -- transactions OFF (idempotent producer, the consumer commits its
   offsets after the produce is acknowledged: at-least-once). The app SIGKILLs itself in its 3rd batch after the
   batch's output is acknowledged and before the offset commit; a restarted instance reads the batch again. The
   checker must report exactly that batch's ids duplicated (k > 0 records, each twice), 0 lost: the checker can
   see a duplicate, so 0 in the tests below means something.
2. `test_app_killed_mid_transaction_exactly_once` -- the same crash with transactions ON: the output of the 3rd
   batch is in the log (read_uncommitted sees those ids twice) but inside a transaction that the restarted
   instance's init_transactions aborts (fencing the old epoch); read_committed sees every id exactly once and
   the group's committed offsets are the input end offsets.
3. `test_zombie_instance_is_fenced` -- KIP-447's zombie: instance A stops (SIGSTOP) mid-transaction, the group
   gives its partitions to B, B processes everything; A wakes and tries to commit: refused (stale member id or
   generation), aborted; exactly once, A's output only in aborted data.
4. `test_exactly_once_under_broker_nemesis` -- two app instances in one group (transactional ids eos-a, eos-b),
   2,000 input records over 3 partitions, throttled so processing lasts >= 50 s; meanwhile a nemesis SIGKILLs a
   broker every ~8 s and restarts it 3 s later, cycling through the roles: the transaction coordinator of eos-a
   (FindCoordinator key_type 1), the leader of an input partition, the leader of an output partition, the group
   coordinator (key_type 0). At the end: the output read read_committed holds every input id exactly once (0
   lost, 0 duplicated, values intact) and the group's committed offsets equal the input end offsets.

Environment: KBROKER_EOS_NEMESIS_SEED fixes which partition's leader is picked for the leader roles (printed).

FindCoordinator v1 (api key 10), request body: key string, key_type int8 (0 group, 1 transaction). Response v1
after the correlation id: throttle_time_ms int32, error_code int16, error_message nullable string, node_id int32,
host string, port int32.
"""
from __future__ import annotations

import json
import os
import random
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration import eos_checker
from tests.integration.harness import REPO_ROOT, HarnessError, raw_request, tail, wait_until
from tests.integration.test_replication_common import FAILOVER_S, RCluster, require_zookeeper

pytestmark = [pytest.mark.zk, pytest.mark.timeout(420)]

PARTITIONS = 3
OVERRIDES = {
    "min.insync.replicas": 2,
    "default.replication.factor": 3,
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 5,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "transaction.state.log.num.partitions": 5,
    # a restarted app must not wait 3 s more for its group (the dead member's session, 6 s, is wait enough)
    "group.initial.rebalance.delay.ms": 0,
}
KILL_EVERY_S = 8.0
DOWN_S = 3.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    require_zookeeper()
    c = RCluster(tmp_path_factory.mktemp("txn-eos"), overrides=OVERRIDES)
    try:
        c.start()
        yield c
    finally:
        c.close()


# ------------------------------------------------------------------------------------------------ app processes

_STARTED: list = []   # every AppProcess a test started; the autouse fixture below ends those still running


@pytest.fixture(autouse=True)
def _end_apps():
    yield
    while _STARTED:
        app = _STARTED.pop()
        if app.proc is not None and app.proc.poll() is None:
            app.proc.send_signal(signal.SIGCONT)   # a paused zombie must be able to die
            app.kill()


class AppProcess:
    """One eos_app process; stdout (JSON lines, see eos_app's docstring) and stderr go to `<dir>/<name>.log`."""

    def __init__(self, directory: Path, name: str, args: list[str]):
        self.log = Path(directory) / f"{name}.log"
        self.name = name
        self.args = args
        self.proc: subprocess.Popen | None = None

    def start(self, *extra: str) -> "AppProcess":
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "tests.integration.eos_app", *self.args, *extra],
                                         stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=str(REPO_ROOT), env=env)
        _STARTED.append(self)
        return self

    def events(self, kind: str | None = None) -> list[dict]:
        out = []
        try:
            lines = self.log.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return out
        for line in lines:
            if line.startswith("{"):
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                if kind is None or e.get("event") == kind:
                    out.append(e)
        return out

    def wait_exit(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise HarnessError(f"app {self.name} still running after {timeout:g}s\n{tail(self.log, 40)}") from None

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM (the app finishes its batch and leaves the group), bounded wait."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait_exit(timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def app_args(cluster, inp: str, out: str, group: str, tid: str | None, batch: int = 50,
             rate: float = 0.0) -> list[str]:
    mode = ["--transactional-id", tid] if tid else ["--no-transactions"]
    return ["--bootstrap", cluster.bootstrap, "--input", inp, "--output", out, "--group", group, *mode,
            "--batch", str(batch), "--rate", str(rate)]


def wait_processed(cluster, group: str, topic: str, ends: dict, timeout: float, apps=()) -> dict:
    """Bounded wait until the group's committed offsets of `topic` equal `ends`; fails early if an app exits."""
    def done():
        for a in apps:
            if a.proc.poll() is not None:
                raise HarnessError(f"app {a.name} exited with {a.proc.returncode}\n{tail(a.log, 40)}")
        got = eos_checker.committed_offsets(cluster.bootstrap, group, topic, len(ends))
        return got if got == ends else None

    from confluent_kafka import KafkaException

    return wait_until(done, timeout, 1.0, f"group {group} committed offsets == {ends}", ignore=(KafkaException,))


def committed_total(cluster, group: str, topic: str) -> int:
    """Records of `topic` the group has committed as processed (sum of its committed offsets)."""
    return sum(max(o, 0) for o in eos_checker.committed_offsets(cluster.bootstrap, group, topic, PARTITIONS).values())


def setup_topics(cluster, name: str, n: int) -> tuple[str, str, dict]:
    inp, out = f"{name}-in", f"{name}-out"
    for t in (inp, out):
        cluster.create_topic(t, PARTITIONS, 3)
        cluster.wait_full_isr(t, PARTITIONS)
    ends = eos_checker.produce_input(cluster.bootstrap, inp, n, PARTITIONS)
    return inp, out, ends


def read_uncommitted(bootstrap: str, topic: str) -> list[bytes]:
    """Keys of every data record below the high watermark, read_uncommitted (aborted data included)."""
    recs = eos_checker.read_records(bootstrap, topic, PARTITIONS, "read_uncommitted")
    return [k for part in recs.values() for _, k, _ in part]


def crash_and_recover(cluster, tmp_path, name: str, tid: str | None, n: int = 600):
    """Run the app until it SIGKILLs itself in batch 3 after producing, restart it, wait until the input is
    processed; returns (crash event, input end offsets, input topic, output topic, group, (first, second app))."""
    inp, out, ends = setup_topics(cluster, name, n)
    group = f"{name}-group"
    args = app_args(cluster, inp, out, group, tid, batch=50)
    first = AppProcess(tmp_path, f"{name}-1", args).start("--crash-after-produce", "3")
    rc = first.wait_exit(90)
    crash = first.events("crash")
    assert rc == -signal.SIGKILL and len(crash) == 1, f"rc {rc}, crash events {crash}\n{tail(first.log, 40)}"
    crash = crash[0]
    assert crash["undelivered"] == 0 and crash["delivery_errors"] == 0, crash
    assert 0 < crash["records"] == len(crash["ids"]) <= 50, crash

    second = AppProcess(tmp_path, f"{name}-2", args).start()
    try:
        wait_processed(cluster, group, inp, ends, 90, [second])
    finally:
        rc2 = second.stop()
    assert rc2 == 0, tail(second.log, 40)
    assert not second.events("gave_up")
    return crash, ends, inp, out, group, (first, second)


# ----------------------------------------------------------------------------------------------------- tests

def test_negative_control_reports_duplicates(cluster, tmp_path):
    n = 600
    crash, ends, inp, out, group, _ = crash_and_recover(cluster, tmp_path, "neg", None, n)
    output = eos_checker.read_committed(cluster.bootstrap, out, PARTITIONS)
    report = eos_checker.check(n, output)
    print(f"\nnegative control (no transactions, app killed after produce, before commit of {crash['records']} "
          f"records): {report.summary()}")
    assert report.lost == 0 and report.unexpected == 0 and report.corrupted == 0, report.summary()
    # exactly the crashed batch, every id of it twice
    assert report.duplicated == crash["records"] > 0, report.summary()
    dup_ids = sorted(i for _, _, i in report.examples["duplicated"])
    assert set(dup_ids) <= set(crash["ids"])
    assert report.consumed == n + crash["records"]
    assert eos_checker.committed_offsets(cluster.bootstrap, group, inp, PARTITIONS) == ends


def test_app_killed_mid_transaction_exactly_once(cluster, tmp_path):
    n = 600
    crash, ends, inp, out, group, (first, second) = crash_and_recover(cluster, tmp_path, "txcrash", "txcrash-app", n)
    output = eos_checker.read_committed(cluster.bootstrap, out, PARTITIONS)
    report = eos_checker.check(n, output)
    print(f"\ntransactions, app killed after produce, before commit of {crash['records']} records: "
          f"{report.summary()}")
    assert report.exactly_once and report.consumed == n, report.summary()
    assert eos_checker.committed_offsets(cluster.bootstrap, group, inp, PARTITIONS) == ends
    # the crashed batch's output really was written (and aborted): read_uncommitted sees those ids twice, and the
    # same checker over that stream reports them -- what a broker serving aborted data to read_committed would show
    raw = eos_checker.read_records(cluster.bootstrap, out, PARTITIONS, "read_uncommitted")
    dirty = eos_checker.check(n, raw)
    assert dirty.duplicated == crash["records"] and dirty.lost == 0, dirty.summary()
    keys = read_uncommitted(cluster.bootstrap, out)
    crashed = {str(i).encode() for i in crash["ids"]}
    twice = [k for k in crashed if keys.count(k) == 2]
    assert len(twice) == len(crashed) and len(keys) == n + crash["records"], \
        f"{len(twice)} of {len(crashed)} crashed ids twice, {len(keys)} records read_uncommitted"


# Errors a zombie's commit may meet (KIP-447): the group removed it (UNKNOWN_MEMBER_ID 25) or moved to a new
# generation (ILLEGAL_GENERATION 22); had the coordinator fenced the producer instead: PRODUCER_FENCED 90 /
# INVALID_PRODUCER_EPOCH 47.
ZOMBIE_ERRORS = ("UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")


def test_zombie_instance_is_fenced(cluster, tmp_path):
    """Two instances; A pauses (SIGSTOP) in its 3rd transaction after writing the output, before sending the
    offsets. The group evicts A after its 6 s session, B takes every partition and processes everything (A's batch
    included: committed offsets == end offsets while A is still stopped). SIGCONT A: its TxnOffsetCommit carries a
    member id / generation the group no longer has, the transaction must fail and be aborted; the output holds
    every id exactly once and A's batch only in aborted data (read_uncommitted sees it twice)."""
    cluster.ensure_all_running()
    n = 600
    inp, out, ends = setup_topics(cluster, "zombie", n)
    group = "zombie-group"
    a = AppProcess(tmp_path, "zombie-a", app_args(cluster, inp, out, group, "zombie-a", batch=20))
    b = AppProcess(tmp_path, "zombie-b", app_args(cluster, inp, out, group, "zombie-b", batch=20, rate=50))
    # A's transaction must still be open when it wakes up (not aborted by transaction.timeout.ms): 60 s
    a.start("--pause-after-produce", "3", "--transaction-timeout-ms", "60000")
    b.start()
    try:
        paused = wait_until(lambda: a.events("paused"), 60, 0.2, "app A to pause mid-transaction")[0]
        assert paused["undelivered"] == 0 and paused["records"] > 0, paused
        wait_processed(cluster, group, inp, ends, 90, [b])   # B did everything, A's batch included
        assert a.proc.poll() is None and not a.events("resumed")
        a.proc.send_signal(signal.SIGCONT)
        failed = wait_until(lambda: [e for e in a.events() if e["event"] in ("abort", "fatal")
                                     and e["t"] >= paused["t"]], 60, 0.2, "the zombie's transaction to fail")[0]
        # once aborted, A rewinds to the group's offsets (the end): nothing is left for it to redo
        assert wait_processed(cluster, group, inp, ends, 30, [a, b]) == ends
    finally:
        if a.proc.poll() is None:
            a.proc.send_signal(signal.SIGCONT)
        codes = [a.stop(60), b.stop(60)]
    print(f"\nzombie A paused in batch {paused['batch']} ({paused['records']} records); on waking: {failed}")
    assert codes == [0, 0], [tail(x.log, 30) for x in (a, b)]
    assert failed["op"] in ("send_offsets_to_transaction", "commit_transaction"), failed
    assert any(code in failed["error"] for code in ZOMBIE_ERRORS), failed
    assert a.events("done")[-1]["aborts"] + a.events("done")[-1]["fatal"] >= 1

    report = eos_checker.check(n, eos_checker.read_committed(cluster.bootstrap, out, PARTITIONS))
    print(f"checker (zombie fenced): {report.summary()}")
    assert report.exactly_once and report.consumed == n, report.summary()
    assert eos_checker.committed_offsets(cluster.bootstrap, group, inp, PARTITIONS) == ends
    keys = read_uncommitted(cluster.bootstrap, out)
    assert all(keys.count(str(i).encode()) == 2 for i in paused["ids"]), "A's batch is not in the log twice"


# ------------------------------------------------------------------------------------------------- the nemesis

def find_coordinator(cluster, key: str, key_type: int) -> int | None:
    """node id of the coordinator of `key` (0 group, 1 transaction) as a running broker answers, else None."""
    raw = key.encode()
    body = struct.pack(">h", len(raw)) + raw + struct.pack(">b", key_type)
    for b in cluster.running():
        try:
            resp = raw_request(b.host, b.port, 10, 1, body, timeout=3.0)
        except OSError:
            continue
        _throttle, error = struct.unpack_from(">ih", resp, 0)
        (mlen,) = struct.unpack_from(">h", resp, 6)
        pos = 8 + max(mlen, 0)
        (node,) = struct.unpack_from(">i", resp, pos)
        if error == 0:
            return node
    return None


def leader_of(cluster, topic: str, p: int) -> int | None:
    md = cluster.any_metadata([topic])
    try:
        return md["topics"][topic]["partitions"][p]["leader"]
    except (TypeError, KeyError):
        return None


def test_exactly_once_under_broker_nemesis(cluster, tmp_path):
    cluster.ensure_all_running()
    n = 2000
    inp, out, ends = setup_topics(cluster, "chaos", n)
    group = "chaos-group"
    # two instances x 20 records/s: >= 50 s of processing, a margin over the ~45 s the five kills take (a stalled
    # app catches up with its schedule afterwards, so stalls do not lengthen the run by much)
    apps = [AppProcess(tmp_path, f"app-{x}", app_args(cluster, inp, out, group, f"eos-{x}", batch=20, rate=20))
            for x in ("a", "b")]
    for a in apps:
        a.start()
    seed = int(os.environ.get("KBROKER_EOS_NEMESIS_SEED", str(random.randrange(1 << 30))))
    rng = random.Random(seed)
    print(f"\nnemesis seed {seed} (KBROKER_EOS_NEMESIS_SEED={seed} repeats the partition choices)")
    roles = [
        ("transaction coordinator of eos-a", lambda: find_coordinator(cluster, "eos-a", 1)),
        ("input leader", lambda: leader_of(cluster, inp, rng.randrange(PARTITIONS))),
        ("output leader", lambda: leader_of(cluster, out, rng.randrange(PARTITIONS))),
        ("group coordinator", lambda: find_coordinator(cluster, group, 0)),
        ("transaction coordinator of eos-b", lambda: find_coordinator(cluster, "eos-b", 1)),
    ]
    kills = []
    t0 = time.monotonic()
    try:
        # the apps join the group and start committing before the first kill
        wait_until(lambda: committed_total(cluster, group, inp) > 0, 60, 0.5,
                   "the apps to commit their first transactions", ignore=(Exception,))
        for role, who in roles:
            time.sleep(max(0.0, KILL_EVERY_S - DOWN_S))
            # (broker id,): node 0 is a valid answer, a bare 0 would read as "not yet"
            (victim_id,) = wait_until(lambda: (b := who()) is not None and b >= 0 and (b,), 30, 0.5, role,
                                      ignore=(OSError, struct.error))
            victim = cluster.brokers[victim_id]
            processed = committed_total(cluster, group, inp)
            victim.kill9()
            kills.append((round(time.monotonic() - t0, 1), role, victim_id, processed))
            time.sleep(DOWN_S)
            victim.start(wait=True, timeout=60)
    finally:
        print(f"nemesis kills (t, role, broker, records committed so far): {kills}")
        cluster.ensure_all_running()
    try:
        wait_processed(cluster, group, inp, ends, 150, apps)
    finally:
        codes = [a.stop(60) for a in apps]
    stats = [a.events("done")[-1] for a in apps]
    print("apps: " + "; ".join(f"{a.name}: {s}" for a, s in zip(apps, stats)))
    assert codes == [0, 0], [tail(a.log, 30) for a in apps]
    # the processed positions: per partition, the last offset an app committed in a transaction is the end
    assert {p: max(s["positions"].get(str(p), 0) for s in stats) for p in range(PARTITIONS)} == ends, stats
    # every kill hit the cluster while the apps still had input to process
    assert len(kills) == len(roles) and all(k[3] < n for k in kills), kills

    output = eos_checker.read_committed(cluster.bootstrap, out, PARTITIONS, timeout=FAILOVER_S * 3)
    report = eos_checker.check(n, output)
    print(f"checker (transactions, {len(kills)} broker kill -9): {report.summary()}")
    assert report.exactly_once and report.consumed == n, report.summary()
    assert eos_checker.committed_offsets(cluster.bootstrap, group, inp, PARTITIONS) == ends
