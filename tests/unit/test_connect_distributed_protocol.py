"""kbroker.connect.distributed.protocol / assignor: Kafka Connect's group formats byte for byte, and the eager
assignment's round robin."""
import struct

import pytest

from kbroker.connect.distributed.assignor import CooperativeMemory, eager_assign, incremental_assign
from kbroker.connect.distributed.protocol import (
    CONFIG_MISMATCH, Assignment, ProtocolError, WorkerState, decode_assignment, decode_metadata,
    encode_assignment, encode_metadata, join_protocols)

URL = "http://w1:8083/"


def s(text):
    b = text.encode()
    return struct.pack(">h", len(b)) + b


def test_metadata_v0_bytes():
    got = encode_metadata(WorkerState(URL, 5), 0)
    assert got == b"\x00\x00" + s(URL) + b"\x00\x00\x00\x00\x00\x00\x00\x05"
    assert decode_metadata(got) == WorkerState(URL, 5, None)


def test_metadata_v1_without_and_with_allocation():
    empty = encode_metadata(WorkerState(URL, -1), 1)
    # version 1, url, offset -1, allocation null (int32 -1)
    assert empty == b"\x00\x01" + s(URL) + b"\xff" * 8 + b"\xff\xff\xff\xff"
    held = Assignment(0, "m1", URL, 7, ["a"], [("a", 0)])
    got = encode_metadata(WorkerState(URL, 7, held), 2)
    allocation = encode_assignment(held, 1)
    assert got == b"\x00\x02" + s(URL) + struct.pack(">q", 7) + struct.pack(">i", len(allocation)) + allocation
    back = decode_metadata(got)
    assert back.url == URL and back.offset == 7
    assert back.assignment.connectors == ["a"] and back.assignment.tasks == [("a", 0)]


def test_assignment_v0_bytes_connector_sentinel_first():
    a = Assignment(0, "leader-1", URL, 12, ["snk"], [("snk", 2), ("snk", 0), ("src", 0)])
    got = encode_assignment(a, 0)
    want = (b"\x00\x00" + b"\x00\x00" + s("leader-1") + s(URL) + struct.pack(">q", 12)
            + struct.pack(">i", 2)
            + s("snk") + struct.pack(">iiii", 3, -1, 0, 2)
            + s("src") + struct.pack(">ii", 1, 0))
    assert got == want
    back = decode_assignment(got)
    assert back.error == 0 and back.leader == "leader-1" and back.leader_url == URL and back.offset == 12
    assert back.connectors == ["snk"] and back.tasks == [("snk", 0), ("snk", 2), ("src", 0)]


def test_assignment_v1_revoked_and_delay():
    a = Assignment(0, "l", URL, 3, [], [("c", 1)], revoked_connectors=["c"], revoked_tasks=[("c", 0)], delay=3000)
    got = encode_assignment(a, 1)
    assert got.endswith(struct.pack(">i", 1) + s("c") + struct.pack(">iii", 2, -1, 0) + struct.pack(">i", 3000))
    back = decode_assignment(got)
    assert back.revoked_connectors == ["c"] and back.revoked_tasks == [("c", 0)] and back.delay == 3000
    # A v1 reader tolerates a v0 body without the trailing fields (Kafka reads missing fields as defaults) and a
    # v2 assignment with extra trailing bytes (a future version only appends).
    assert decode_assignment(b"\x00\x01" + encode_assignment(a, 0)[2:]).delay == 0
    assert decode_assignment(b"\x00\x02" + got[2:] + b"\x00\x00").delay == 3000


def test_null_assignment_array_v1():
    body = b"\x00\x01\x00\x00" + s("l") + s(URL) + struct.pack(">q", 1) + b"\xff\xff\xff\xff" * 2 + b"\x00" * 4
    a = decode_assignment(body)
    assert a.connectors == [] and a.tasks == [] and a.revoked_tasks == []


@pytest.mark.parametrize("data", [b"", b"\x00", b"\xff\xff" + s(URL), b"\x00\x00\x00\x05ab",
                                  b"\x00\x00" + s(URL) + b"\x00\x00", b"\x00\x00\x00\x02\xff\xfe" + b"\x00" * 8])
def test_garbage_raises_protocol_error(data):
    with pytest.raises(ProtocolError):
        decode_metadata(data)


def test_garbage_assignment_huge_array_raises():
    body = b"\x00\x00\x00\x00" + s("l") + s(URL) + struct.pack(">q", 1) + struct.pack(">i", 0x7FFFFFFF)
    with pytest.raises(ProtocolError):
        decode_assignment(body)


def test_join_protocols_order():
    st = WorkerState(URL, 4)
    assert [p["name"] for p in join_protocols("eager", st)] == ["default"]
    assert [p["name"] for p in join_protocols("compatible", st)] == ["compatible", "default"]
    assert [p["name"] for p in join_protocols("sessioned", st)] == ["sessioned", "compatible", "default"]
    assert join_protocols("sessioned", st)[0]["metadata"][:2] == b"\x00\x02"
    with pytest.raises(ValueError):
        join_protocols("greedy", st)


def test_eager_round_robin_continues_across_connectors_and_tasks():
    members = {m: WorkerState("http://%s/" % m, 9) for m in ("b", "a", "c")}
    out = eager_assign("b", members, 9, ["src", "snk"], {"src": 1, "snk": 3})
    assert out["a"].connectors == ["snk"] and out["b"].connectors == ["src"] and out["c"].connectors == []
    assert out["c"].tasks == [("snk", 0), ("src", 0)]
    assert out["a"].tasks == [("snk", 1)]
    assert out["b"].tasks == [("snk", 2)]
    assert all(a.leader == "b" and a.leader_url == "http://b/" and a.offset == 9 for a in out.values())


def test_eager_config_mismatch_when_leader_cannot_catch_up():
    members = {"a": WorkerState("http://a/", 4), "b": WorkerState("http://b/", 8)}
    out = eager_assign("a", members, 4, ["x"], {"x": 1}, catch_up=lambda off: (False, 4, ["x"], {"x": 1}))
    assert {m: (a.error, a.offset, a.connectors, a.tasks) for m, a in out.items()} == {
        "a": (CONFIG_MISMATCH, 8, [], []), "b": (CONFIG_MISMATCH, 8, [], [])}
    out = eager_assign("a", members, 4, [], {}, catch_up=lambda off: (True, 8, ["x"], {"x": 2}))
    assert out["a"].error == 0 and out["a"].offset == 8
    assert out["a"].connectors == ["x"] and out["b"].tasks == [("x", 0)] and out["a"].tasks == [("x", 1)]


# ---------------------------------------------------------------------------------------------- KIP-415

def _coop(members, connectors, counts, memory, now=0, delay=0):
    states = {m: WorkerState("http://%s/" % m, 1, Assignment(connectors=list(c), tasks=list(t)))
              for m, (c, t) in members.items()}
    return incremental_assign("a", states, 1, connectors, counts, memory, now, delay)


def test_incremental_first_round_places_everything_by_load():
    mem = CooperativeMemory()
    out = _coop({"a": ([], []), "b": ([], []), "c": ([], [])}, ["snk", "src"], {"snk": 3, "src": 1}, mem)
    assert [out[m].connectors for m in "abc"] == [["snk"], ["src"], []]
    assert sum(len(out[m].tasks) for m in "abc") == 4 and max(len(out[m].tasks) for m in "abc") == 2
    assert all(not a.revoked_tasks and a.delay == 0 for a in out.values())
    assert mem.owner["snk"] == "a" and mem.owner[("src", 0)] in "abc" and mem.deadline_ms is None


def test_incremental_lost_work_waits_for_the_delay_then_moves():
    mem = CooperativeMemory()
    running = {"a": (["snk"], [("snk", 0), ("snk", 1)]), "b": (["src"], [("snk", 2), ("src", 0)])}
    _coop(running, ["snk", "src"], {"snk": 3, "src": 1}, mem)                  # the leader learns who has what
    del running["b"]                                                             # b dies
    out = _coop(running, ["snk", "src"], {"snk": 3, "src": 1}, mem, now=1000, delay=5000)
    assert out["a"].connectors == [] and out["a"].tasks == [] and out["a"].delay == 5000
    assert mem.deadline_ms == 6000 and mem.owner["src"] == "b"
    out = _coop(running, ["snk", "src"], {"snk": 3, "src": 1}, mem, now=4000, delay=5000)
    assert out["a"].tasks == [] and out["a"].delay == 2000
    out = _coop(running, ["snk", "src"], {"snk": 3, "src": 1}, mem, now=6000, delay=5000)
    assert out["a"].connectors == ["src"] and out["a"].tasks == [("snk", 2), ("src", 0)] and out["a"].delay == 0
    assert mem.deadline_ms is None


def test_incremental_new_member_gets_work_by_revocation_then_assignment():
    mem = CooperativeMemory()
    running = {"a": (["snk"], [("snk", 0), ("snk", 1)]), "b": (["src"], [("snk", 2), ("src", 0)]),
               "c": ([], [])}
    out = _coop(running, ["snk", "src"], {"snk": 3, "src": 1}, mem)
    # 2 connectors over 3 members: a and b keep theirs; 4 tasks: targets 2/1/1 -> one task revoked from a or b.
    revoked = out["a"].revoked_tasks + out["b"].revoked_tasks
    assert len(revoked) == 1 and out["c"].tasks == [] and not out["a"].revoked_connectors
    for m in "ab":
        running[m] = (running[m][0], [t for t in running[m][1] if t not in out[m].revoked_tasks])
    out = _coop(running, ["snk", "src"], {"snk": 3, "src": 1}, mem)
    assert out["c"].tasks == revoked and not any(a.revoked_tasks for a in out.values())


def test_incremental_deleted_connector_is_revoked():
    mem = CooperativeMemory()
    out = _coop({"a": (["x", "y"], [("x", 0), ("y", 0)]), "b": ([], [])}, ["y"], {"y": 1}, mem)
    assert out["a"].revoked_connectors == ["x"] and out["a"].revoked_tasks == [("x", 0)]
