"""kbroker-admin consumer-groups as a process against a real broker, with a real confluent-kafka (librdkafka) group.

One broker for the module (`__consumer_offsets` with 3 partitions and no initial rebalance delay, so a group forms in
well under a second). The scenario, in order: a consumer joins group `cg-app` on a 2-partition topic holding 10 + 6
records and commits offsets 4 and 6; the tool lists the group, describes its exact offsets/lag, members and state,
refuses to reset while the consumer is alive; the consumer leaves; the tool shows the empty group, resets it to the
earliest offsets; a new consumer (auto.offset.reset=latest, so only a committed offset can send it to 0) resumes at
offset 0 on both partitions; the group is deleted.
"""
import json
import os
import subprocess
import sys
import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
import confluent_kafka.admin  # noqa: E402  (the admin submodule is not imported by the package)

from kbroker.cli import consumer_groups as cg  # noqa: E402
from tests.integration.harness import REPO_ROOT, BrokerProcess  # noqa: E402

TOOL_TIMEOUT = 60
TOPIC = "cg-orders"
GROUP = "cg-app"
COUNTS = {0: 10, 1: 6}


@pytest.fixture(scope="module")
def cg_broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("cg_broker"), overrides={
        "offsets.topic.num.partitions": 3, "group.initial.rebalance.delay.ms": 0})
    try:
        b.start()
        yield b
    finally:
        b.close()


def tool(broker, *argv):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run([sys.executable, "-m", "kbroker.cli.admin", "consumer-groups", "--bootstrap-server",
                           broker.bootstrap, *map(str, argv)], capture_output=True, timeout=TOOL_TIMEOUT, env=env,
                          cwd=str(REPO_ROOT))
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


def consumer(broker, reset="earliest"):
    c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP, "client.id": "cg-client",
                                  "enable.auto.commit": False, "auto.offset.reset": reset,
                                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    c.subscribe([TOPIC])
    return c


def poll_until(c, n, timeout=30.0):
    """Poll until ``n`` records arrived (or the deadline) -> [(partition, offset)]."""
    got, deadline = [], time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append((m.partition(), m.offset()))
    return got


def wait_state(broker, state, timeout=20.0):
    deadline = time.monotonic() + timeout
    while True:
        rc, out, err = tool(broker, "--describe", "--group", GROUP, "--state", "--output", "json")
        if rc == 0 and json.loads(out)[0]["state"] == state:
            return json.loads(out)[0]
        assert time.monotonic() < deadline, "group never reached %s: %r %r" % (state, out, err)
        time.sleep(0.3)


def test_consumer_group_tool_lifecycle(cg_broker):
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": cg_broker.bootstrap})
    admin.create_topics([confluent_kafka.admin.NewTopic(TOPIC, 2, 1)])[TOPIC].result(timeout=30)
    p = confluent_kafka.Producer({"bootstrap.servers": cg_broker.bootstrap})
    for part, n in COUNTS.items():
        for i in range(n):
            p.produce(TOPIC, value=b"v%d-%d" % (part, i), partition=part)
    assert p.flush(30) == 0

    c = consumer(cg_broker)
    try:
        assert len(poll_until(c, sum(COUNTS.values()))) == sum(COUNTS.values())
        c.commit(offsets=[confluent_kafka.TopicPartition(TOPIC, 0, 4), confluent_kafka.TopicPartition(TOPIC, 1, 6)],
                 asynchronous=False)
        member_id = c.memberid()

        rc, out, err = tool(cg_broker, "--list")
        assert (rc, err) == (0, "") and GROUP in out.splitlines()

        rc, out, err = tool(cg_broker, "--describe", "--group", GROUP)
        assert (rc, err) == (0, "")
        row = {"group": GROUP, "topic": TOPIC, "consumer_id": member_id, "host": "/127.0.0.1",
               "client_id": "cg-client"}
        assert out == cg.format_offsets([
            dict(row, partition=0, current_offset=4, log_end_offset=10, lag=6),
            dict(row, partition=1, current_offset=6, log_end_offset=6, lag=0)])
        assert out.splitlines()[2].split() == [GROUP, TOPIC, "0", "4", "10", "6", member_id, "/127.0.0.1",
                                               "cg-client"]

        rc, out, err = tool(cg_broker, "--describe", "--group", GROUP, "--members")
        assert (rc, err) == (0, "")
        assert out.splitlines()[2].split() == [GROUP, member_id, "/127.0.0.1", "cg-client", "2"]
        state = wait_state(cg_broker, "Stable")
        assert (state["assignment_strategy"], state["members"]) == ("range", 1)

        rc, out, err = tool(cg_broker, "--reset-offsets", "--group", GROUP, "--all-topics", "--to-earliest",
                            "--execute")
        assert rc == 1
        assert err == ("\nError: Assignments can only be reset if the group '%s' is inactive, but the current "
                       "state is Stable.\n" % GROUP)
    finally:
        c.close()   # LeaveGroup: the group becomes Empty at once

    wait_state(cg_broker, "Empty")
    rc, out, err = tool(cg_broker, "--describe", "--group", GROUP)
    assert (rc, err) == (0, "\nConsumer group '%s' has no active members.\n" % GROUP)
    assert [line.split() for line in out.splitlines()[2:]] == [
        [GROUP, TOPIC, "0", "4", "10", "6", "-", "-", "-"], [GROUP, TOPIC, "1", "6", "6", "0", "-", "-", "-"]]

    # Dry run (the default) plans, commits nothing.
    rc, out, err = tool(cg_broker, "--reset-offsets", "--group", GROUP, "--topic", TOPIC, "--shift-by", "-5",
                        "--dry-run")
    assert (rc, err) == (0, "")
    assert [line.split() for line in out.splitlines()[1:]] == [
        ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], [GROUP, TOPIC, "0", "0"], [GROUP, TOPIC, "1", "1"]]
    rc, out, _ = tool(cg_broker, "--describe", "--group", GROUP, "--output", "json")
    assert [x["current_offset"] for x in json.loads(out)[0]["partitions"]] == [4, 6]

    rc, out, err = tool(cg_broker, "--reset-offsets", "--group", GROUP, "--all-topics", "--to-earliest",
                        "--execute")
    assert (rc, err) == (0, "")
    assert out == cg.format_reset_plan({GROUP: {(TOPIC, 0): 0, (TOPIC, 1): 0}})
    rc, out, _ = tool(cg_broker, "--describe", "--group", GROUP, "--output", "json")
    assert [(x["partition"], x["current_offset"], x["lag"]) for x in json.loads(out)[0]["partitions"]] == \
        [(0, 0, 10), (1, 0, 6)]

    c = consumer(cg_broker, reset="latest")
    try:
        got = poll_until(c, sum(COUNTS.values()))
    finally:
        c.close()
    first = {}
    for part, off in got:
        first.setdefault(part, off)
    assert first == {0: 0, 1: 0}
    assert sorted(got) == [(part, o) for part in COUNTS for o in range(COUNTS[part])]

    wait_state(cg_broker, "Empty")
    assert tool(cg_broker, "--delete", "--group", GROUP) == \
        (0, "Deletion of requested consumer groups ('%s') was successful.\n" % GROUP, "")
    rc, out, err = tool(cg_broker, "--list")
    assert rc == 0 and GROUP not in out.splitlines()
    assert tool(cg_broker, "--describe", "--group", GROUP) == \
        (1, "", "\nError: Consumer group '%s' does not exist.\n" % GROUP)
