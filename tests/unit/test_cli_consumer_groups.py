"""kbroker-admin consumer-groups: argument rules, exact table text, reset plans, and the AdminClient group methods.

The client side runs for real (AdminClient -> Cluster -> connection) against ``FakeCluster``: ``FakeConn`` replaces
``BrokerConnection`` and round-trips every request and response through the protocol schemas at the negotiated
version, so a body that does not fit a version fails here. Node 1 is the bootstrap broker and partition leader,
node 2 coordinates every group (so routing mistakes answer NOT_COORDINATOR / NOT_LEADER_OR_FOLLOWER).
"""
import datetime as dt
import json

import pytest

import kbroker.client.cluster as cluster_mod
from kbroker import errors
from kbroker.cli import admin as admin_cli
from kbroker.cli import consumer_groups as cg
from kbroker.client.admin import AdminClient
from kbroker.client.connection import BrokerConnection, resolve_api
from kbroker.coordinator.consumer_protocol import encode_assignment

B = ["--bootstrap-server", "b1:9001"]

# What Kafka 2.1 served for the group APIs (the versions the coordinator targets).
KAFKA_2_1 = {18: (0, 2), 3: (0, 7), 2: (0, 4), 8: (0, 6), 9: (0, 5), 10: (0, 2), 15: (0, 2), 16: (0, 2), 42: (0, 1)}
NEWEST = {18: (0, 2), 3: (0, 9), 2: (0, 9), 8: (0, 9), 9: (0, 9), 10: (0, 6), 15: (0, 5), 16: (0, 5), 42: (0, 2)}


class FakeCluster:
    def __init__(self, ranges=KAFKA_2_1):
        self.ranges = dict(ranges)
        self.brokers = {1: ("b1", 9001), 2: ("b2", 9002)}
        self.coordinator = 2
        # topic -> partition -> (log start, [timestamp of each offset from 0]); log end = len(timestamps)
        self.logs = {"orders": {0: (0, [1000 + 10 * i for i in range(10)]), 1: (2, [2000, 2001, 2002, 2003])},
                     "audit": {0: (0, [])}}
        self.groups = {}
        self.requests = []          # (node, api name, version, decoded request)
        self.find_failures = 0      # FindCoordinator answers COORDINATOR_NOT_AVAILABLE this many times first

    def add_group(self, gid, state="Stable", members=(), offsets=None, protocol="range", protocol_type="consumer"):
        self.groups[gid] = {"state": state, "protocol": protocol, "protocol_type": protocol_type,
                            "members": list(members), "offsets": dict(offsets or {})}

    # ------------------------------------------------------------------ handlers (decoded request -> response)

    def handle(self, node, name, v, req):
        self.requests.append((node, name, v, req))
        return getattr(self, "_" + name)(node, v, req)

    def _Metadata(self, node, v, req):
        return {"brokers": [{"node_id": n, "host": h, "port": p} for n, (h, p) in sorted(self.brokers.items())],
                "cluster_id": "c", "controller_id": 1,
                "topics": [{"error_code": 0, "name": t, "is_internal": False, "partitions": [
                    {"error_code": 0, "partition_index": p, "leader_id": 1, "replica_nodes": [1], "isr_nodes": [1]}
                    for p in sorted(parts)]} for t, parts in sorted(self.logs.items())
                    if req["topics"] is None or not req["topics"] or t in {x["name"] for x in req["topics"]}]}

    def _FindCoordinator(self, node, v, req):
        code = 0
        if self.find_failures:
            self.find_failures -= 1
            code = 15
        host, port = self.brokers[self.coordinator]
        if v >= 4:
            return {"coordinators": [{"key": k, "node_id": self.coordinator, "host": host, "port": port,
                                      "error_code": code, "error_message": None} for k in req["coordinator_keys"]]}
        return {"error_code": code, "error_message": None, "node_id": self.coordinator, "host": host, "port": port}

    def _ListGroups(self, node, v, req):
        groups = self.groups if node == self.coordinator else {}
        return {"error_code": 0, "groups": [{"group_id": g, "protocol_type": d["protocol_type"],
                                             "group_state": d["state"]} for g, d in groups.items()]}

    def _DescribeGroups(self, node, v, req):
        out = []
        for gid in req["groups"]:
            if node != self.coordinator:
                out.append({"error_code": 16, "group_id": gid, "group_state": "", "protocol_type": "",
                            "protocol_data": "", "members": []})
                continue
            g = self.groups.get(gid)
            if g is None:
                out.append({"error_code": 0, "group_id": gid, "group_state": "Dead", "protocol_type": "",
                            "protocol_data": "", "members": []})
                continue
            out.append({"error_code": 0, "group_id": gid, "group_state": g["state"],
                        "protocol_type": g["protocol_type"], "protocol_data": g["protocol"],
                        "members": [{"member_id": m[0], "group_instance_id": m[4] if len(m) > 4 else None,
                                     "client_id": m[1], "client_host": m[2], "member_metadata": b"",
                                     "member_assignment": encode_assignment(m[3])} for m in g["members"]]})
        return {"groups": out}

    def _offsets_for(self, gid, topics):
        g = self.groups.get(gid, {"offsets": {}})
        if topics is None:
            by = {}
            for (t, p), o in sorted(g["offsets"].items()):
                by.setdefault(t, []).append((p, o))
        else:
            by = {t["name"]: [(p, g["offsets"].get((t["name"], p), -1)) for p in t["partition_indexes"]]
                  for t in topics}
        return [{"name": t, "partitions": [{"partition_index": p, "committed_offset": o, "metadata": "",
                                            "error_code": 0} for p, o in ps]} for t, ps in by.items()]

    def _OffsetFetch(self, node, v, req):
        code = 0 if node == self.coordinator else 16
        if v >= 8:
            return {"groups": [{"group_id": g["group_id"], "error_code": code,
                                "topics": [] if code else self._offsets_for(g["group_id"], g["topics"])}
                               for g in req["groups"]]}
        return {"error_code": code, "topics": [] if code else self._offsets_for(req["group_id"], req["topics"])}

    def _OffsetCommit(self, node, v, req):
        g = self.groups.get(req["group_id"])
        if node != self.coordinator:
            code = 16
        elif g is not None and g["members"] and req.get("generation_id_or_member_epoch", -1) < 0:
            code = 25   # UNKNOWN_MEMBER_ID: an admin commit while the group has members
        else:
            code = 0
            if g is None:
                self.add_group(req["group_id"], state="Empty", protocol="", protocol_type="")
                g = self.groups[req["group_id"]]
            for t in req["topics"]:
                for p in t["partitions"]:
                    g["offsets"][(t["name"], p["partition_index"])] = p["committed_offset"]
        return {"topics": [{"name": t["name"], "partitions": [{"partition_index": p["partition_index"],
                                                               "error_code": code} for p in t["partitions"]]}
                           for t in req["topics"]]}

    def _DeleteGroups(self, node, v, req):
        out = []
        for gid in req["groups_names"]:
            g = self.groups.get(gid)
            code = 16 if node != self.coordinator else 69 if g is None else 68 if g["members"] else 0
            if code == 0:
                del self.groups[gid]
            out.append({"group_id": gid, "error_code": code})
        return {"throttle_time_ms": 0, "results": out}

    def _ListOffsets(self, node, v, req):
        topics = []
        for t in req["topics"]:
            parts = []
            for p in t["partitions"]:
                start, stamps = self.logs[t["name"]][p["partition_index"]]
                ts = p["timestamp"]
                if ts == -2:
                    off = start
                elif ts == -1:
                    off = len(stamps)
                else:
                    off = next((o for o in range(start, len(stamps)) if stamps[o] >= ts), -1)
                parts.append({"partition_index": p["partition_index"], "error_code": 0 if node == 1 else 6,
                              "old_style_offsets": [off], "timestamp": -1, "offset": off})
            topics.append({"name": t["name"], "partitions": parts})
        return {"topics": topics}


class FakeConn:
    """Stands in for BrokerConnection: same version negotiation, codec round trip instead of a socket."""
    pick_version = BrokerConnection.pick_version
    cluster = None

    def __init__(self, host, port, client_id="kbroker-admin", timeout=30):
        by_addr = {a: n for n, a in self.cluster.brokers.items()}
        if (host, port) not in by_addr:
            raise errors.NetworkException("cannot connect to %s:%d" % (host, port))
        self.node, self.host, self.port = by_addr[(host, port)], host, port
        self.api_ranges = dict(self.cluster.ranges)
        self.last_version = None
        self.closed = False

    def request(self, api_name_or_key, body, version=None, expect_response=True, max_version=None):
        api = resolve_api(api_name_or_key)
        if version is None:
            version = self.pick_version(api, max_version)
        req = api.decode_request(version, memoryview(api.encode_request(version, body).getvalue()))
        resp = self.cluster.handle(self.node, api.name, version, req)
        self.last_version = version
        return api.decode_response(version, memoryview(api.encode_response(version, resp).getvalue()))

    def close(self):
        self.closed = True


@pytest.fixture
def fake(monkeypatch):
    c = FakeCluster()
    monkeypatch.setattr(FakeConn, "cluster", c)
    monkeypatch.setattr(cluster_mod, "BrokerConnection", FakeConn)
    return c


def _stable_group(fake):
    fake.add_group("billing", members=[
        ("consumer-1-aaaa", "consumer-1", "/127.0.0.1", [("orders", [1])]),
        ("consumer-2-bbbb", "consumer-2", "/10.0.0.2", [("orders", [0]), ("audit", [0])]),
        ("consumer-3-cccc", "consumer-3", "/10.0.0.3", []),
    ], offsets={("orders", 0): 7, ("orders", 1): 3, ("gone", 4): 11})


def run(capsys, argv, ranges=None):
    args = cg.parse_args(B + argv)
    with AdminClient(args.bootstrap_server, group_retry_s=1.0) as admin:
        rc = cg.run(admin, args)
    out, err = capsys.readouterr()
    return rc, out, err


# ---------------------------------------------------------------------------------------------- arguments

@pytest.mark.parametrize("argv,message", [
    (["--list"], 'Missing required argument "[bootstrap-server]"'),
    (B, "Command must include exactly one action: --list, --describe, --delete, --reset-offsets"),
    (B + ["--list", "--describe"], "Command must include exactly one action: --list, --describe, --delete, "
                                   "--reset-offsets"),
    (B + ["--describe"], "Option [describe] takes one of these options: [all-groups], [group]"),
    (B + ["--delete"], "Option [delete] takes one of these options: [all-groups], [group]"),
    (B + ["--reset-offsets", "--to-earliest", "--all-topics"],
     "Option [reset-offsets] takes one of these options: [all-groups], [group]"),
    (B + ["--describe", "--group", "g", "--all-groups"], 'Option "[group]" can\'t be used with option "[all-groups]"'),
    (B + ["--list", "--group", "g"], 'Option "[group]" can\'t be used with option "[list]"'),
    (B + ["--describe", "--group", "g", "--members", "--state"],
     "Option [describe] takes at most one of these options: [members], [offsets], [state]"),
    (B + ["--list", "--members"], 'Option "[members]" can\'t be used with option "[list]"'),
    (B + ["--delete", "--group", "g", "--topic", "t"],
     "The consumer does not support topic-specific offset deletion from a consumer group."),
    (B + ["--describe", "--group", "g", "--to-earliest"],
     'Option "[to-earliest]" can\'t be used with option "[describe]"'),
    (B + ["--describe", "--group", "g", "--execute"], 'Option "[execute]" can\'t be used with option "[describe]"'),
    (B + ["--reset-offsets", "--group", "g", "--all-topics"],
     "Option [reset-offsets] requires one of the following scenarios: [to-earliest], [to-latest], [to-offset], "
     "[shift-by], [to-datetime]"),
    (B + ["--reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--to-offset", "3"],
     'Option "[to-offset]" can\'t be used with option "[to-earliest]"'),
    (B + ["--reset-offsets", "--group", "g", "--to-earliest"],
     "One of the reset scopes should be defined: --all-topics, --topic."),
    (B + ["--reset-offsets", "--group", "g", "--to-earliest", "--topic", "t", "--all-topics"],
     'Option "[topic]" can\'t be used with option "[all-topics]"'),
    (B + ["--reset-offsets", "--group", "g", "--to-earliest", "--all-topics", "--dry-run", "--execute"],
     "Option [reset-offsets] only accepts one of [execute] and [dry-run]"),
    (B + ["--reset-offsets", "--group", "g", "--to-earliest", "--topic", "t:0,x"],
     "Invalid partition 'x' specified in topic arg 't:0,x'"),
    (B + ["--reset-offsets", "--group", "g", "--to-earliest", "--topic", "t:0:1"],
     "Invalid topic arg 't:0:1', expected topic name and partitions"),
    (B + ["--reset-offsets", "--group", "g", "--to-datetime", "2024-01-02 03:04:05.000", "--all-topics"],
     "Error parsing timestamp. It does not contain a 'T' according to ISO8601 format: '2024-01-02 03:04:05.000'"),
])
def test_usage_errors(argv, message):
    with pytest.raises(cg.UsageError) as ei:
        cg.parse_args(argv)
    assert str(ei.value) == message


def test_usage_error_through_kbroker_admin(capsys):
    assert admin_cli.main(["consumer-groups", "--list"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith('Missing required argument "[bootstrap-server]"\nusage: kbroker-admin consumer-groups')


def test_parse_reset_args():
    a = cg.parse_args(B + ["--reset-offsets", "--group", "g", "--group", "h", "--topic", "t", "--topic", "u:2,0",
                           "--shift-by", "-3", "--execute"])
    assert (a.action, a.group, a.topics, a.scenario, a.shift_by, a.execute) == \
        ("reset_offsets", ["g", "h"], [("t", None), ("u", [2, 0])], "shift_by", -3, True)
    a = cg.parse_args(B + ["--reset-offsets", "--all-groups", "--all-topics", "--to-datetime",
                           "2024-01-02T03:04:05.678"])
    assert a.datetime_ms == 1704164645678


def _ms(*args, tz=dt.timezone.utc):
    return int(dt.datetime(*args, tzinfo=tz).timestamp() * 1000)


@pytest.mark.parametrize("text,expected", [
    ("2024-01-02T03:04:05.678", 1704164645678),
    ("2024-01-02T03:04:05.678Z", 1704164645678),
    ("2024-01-02T03:04:05.678+02:00", 1704164645678 - 2 * 3600000),
    ("2024-01-02T03:04:05.678+0200", 1704164645678 - 2 * 3600000),
    ("2024-01-02T03:04:05.678+02", 1704164645678 - 2 * 3600000),
    ("2024-01-02T03:04:05.678-05:30", 1704164645678 + 5 * 3600000 + 30 * 60000),
    ("1970-01-01T00:00:00.000", 0),
    ("2024-02-29T23:59:59.999", _ms(2024, 2, 29, 23, 59, 59, 999000)),
])
def test_parse_datetime(text, expected):
    assert cg.parse_datetime(text) == expected


@pytest.mark.parametrize("text", ["2024-01-02T03:04:05", "2024-01-02T03:04:05.678901", "2023-02-29T00:00:00.000",
                                  "2024-01-02T24:00:00.000", "2024-01-02T03:04:05.678+25:00", "yesterday"])
def test_parse_datetime_rejects(text):
    with pytest.raises(cg.UsageError):
        cg.parse_datetime(text)


# ---------------------------------------------------------------------------------------------- formatting

def _r(group, topic, p, cur, leo, lag, cid="-", host="-", client="-"):
    return {"group": group, "topic": topic, "partition": p, "current_offset": cur, "log_end_offset": leo,
            "lag": lag, "consumer_id": cid, "host": host, "client_id": client}


def test_format_offsets_exact():
    text = cg.format_offsets([_r("g", "orders", 0, 7, 10, 3, "consumer-1-aaaa", "/127.0.0.1", "consumer-1"),
                              _r("g", "orders", 1, None, 4, None)])
    assert text == (
        "\nGROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID     "
        "HOST            CLIENT-ID"
        "\ng               orders          0          7               10              3               consumer-1-aaaa "
        "/127.0.0.1      consumer-1"
        "\ng               orders          1          -               4               -               -               "
        "-               -\n")


def test_format_offsets_widens_to_longest_value():
    cid = "rdkafka-0123456789abcdef0123456789"
    text = cg.format_offsets([_r("a-rather-long-group-name", "t", 12345678901, 1, 2, 1, cid, "/192.168.100.200",
                                 "rdkafka")])
    header, row = text.split("\n")[1:3]
    assert header == ("GROUP                    TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG       "
                      "      CONSUMER-ID                        HOST             CLIENT-ID")
    assert row == ("a-rather-long-group-name t               12345678901 1               2               1         "
                   "      rdkafka-0123456789abcdef0123456789 /192.168.100.200 rdkafka")


def test_format_members_exact():
    members = [{"consumer_id": "c-1", "group_instance_id": None, "host": "/127.0.0.1", "client_id": "c",
                "partitions": 2}]
    assert cg.format_members("g", members) == (
        "\nGROUP           CONSUMER-ID     HOST            CLIENT-ID       #PARTITIONS     \n"
        "g               c-1             /127.0.0.1      c               2               \n")
    members.append({"consumer_id": "c-2", "group_instance_id": "i-1", "host": "/h", "client_id": "c",
                    "partitions": 0})
    assert cg.format_members("g", members) == (
        "\nGROUP           CONSUMER-ID     GROUP-INSTANCE-ID HOST            CLIENT-ID       #PARTITIONS     \n"
        "g               c-1                               /127.0.0.1      c               2               \n"
        "g               c-2             i-1               /h              c               0               \n")


def test_format_state_exact():
    assert cg.format_state("g", (2, "b2", 9002), "range", "Stable", 3) == (
        "\nGROUP           COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE                #MEMBERS"
        "\ng               b2:9002  (2)              range                Stable               3\n")
    assert cg.format_state("g", (0, "localhost", 19092), "", "Empty", 0).endswith(
        "\ng               localhost:19092  (0)      -                    Empty                0\n")


def test_format_reset_plan_exact():
    assert cg.format_reset_plan({"g": {("orders", 1): 4, ("orders", 0): 0}}) == (
        "\nGROUP           TOPIC           PARTITION  NEW-OFFSET"
        "\ng               orders          0          0"
        "\ng               orders          1          4\n")
    assert cg.format_reset_plan({"g": {}}) == "\nGROUP           TOPIC           PARTITION  NEW-OFFSET\n"
    assert cg.format_reset_plan({}) == "\n"


# ---------------------------------------------------------------------------------------------- reset plans

TPS = [("t", 0), ("t", 1)]
EARLIEST = {("t", 0): 5, ("t", 1): 0}
LATEST = {("t", 0): 20, ("t", 1): 3}


@pytest.mark.parametrize("scenario,value,expected", [
    ("to_earliest", None, {("t", 0): 5, ("t", 1): 0}),
    ("to_latest", None, {("t", 0): 20, ("t", 1): 3}),
    ("to_offset", 10, {("t", 0): 10, ("t", 1): 3}),       # above the log end: clamped to it
    ("to_offset", 0, {("t", 0): 5, ("t", 1): 0}),         # below the log start: clamped to it
    ("to_offset", -7, {("t", 0): 5, ("t", 1): 0}),
    ("shift_by", -10, {("t", 0): 5, ("t", 1): 0}),        # 12-10 = 2 < 5 -> 5; 2-10 < 0 -> 0
    ("shift_by", 2, {("t", 0): 14, ("t", 1): 3}),         # 12+2; 2+2 = 4 > 3 -> 3
    ("shift_by", 0, {("t", 0): 12, ("t", 1): 2}),
])
def test_compute_reset_plan(scenario, value, expected):
    plan, warnings = cg.compute_reset_plan(scenario, TPS, EARLIEST, LATEST, {("t", 0): 12, ("t", 1): 2},
                                           value=value)
    assert (plan, warnings) == (expected, [])


def test_shift_by_needs_a_commit():
    with pytest.raises(cg.UsageError) as ei:
        cg.compute_reset_plan("shift_by", TPS, EARLIEST, LATEST, {("t", 0): 12}, value=1)
    assert str(ei.value) == "Cannot shift offset for partition t-1 since there is no current committed offset"


def test_to_datetime_falls_back_to_log_end():
    plan, warnings = cg.compute_reset_plan("to_datetime", TPS, None, LATEST, by_time={("t", 0): 9, ("t", 1): -1})
    assert plan == {("t", 0): 9, ("t", 1): 3}
    assert warnings == ["\nWarn: Partition 1 from topic t is empty. Falling back to latest known offset."]


# ---------------------------------------------------------------------------------------------- AdminClient

def test_admin_group_methods_route_to_the_coordinator(fake):
    _stable_group(fake)
    with AdminClient("b1:9001") as admin:
        assert admin.find_coordinator("billing") == (2, "b2", 9002)
        d = admin.describe_groups(["billing"])["billing"]
        assert (d.state, d.protocol_type, d.protocol, d.coordinator) == ("Stable", "consumer", "range", (2, "b2", 9002))
        assert [(m.member_id, m.client_id, m.client_host, m.assignment) for m in d.members] == [
            ("consumer-1-aaaa", "consumer-1", "/127.0.0.1", [("orders", 1)]),
            ("consumer-2-bbbb", "consumer-2", "/10.0.0.2", [("orders", 0), ("audit", 0)]),
            ("consumer-3-cccc", "consumer-3", "/10.0.0.3", [])]
        assert admin.list_group_offsets("billing") == {("orders", 0): 7, ("orders", 1): 3, ("gone", 4): 11}
        assert admin.list_group_offsets("billing", [("orders", 0), ("audit", 0)]) == {("orders", 0): 7}
        assert admin.describe_groups(["nobody"])["nobody"].state == "Dead"
    by_api = {}
    for node, name, v, req in fake.requests:
        by_api.setdefault(name, set()).add((node, v))
    assert by_api["FindCoordinator"] == {(1, 2)}
    assert by_api["DescribeGroups"] == {(2, 2)}
    assert by_api["OffsetFetch"] == {(2, 5)}
    fetch_all = [req for _, name, _, req in fake.requests if name == "OffsetFetch"][0]
    assert fetch_all["topics"] is None


def test_admin_commit_and_delete(fake):
    _stable_group(fake)
    fake.add_group("idle", state="Empty", offsets={("orders", 0): 1}, protocol="")
    with AdminClient("b1:9001") as admin:
        admin.alter_group_offsets("idle", {("orders", 0): 4, ("orders", 1): 2})
        assert fake.groups["idle"]["offsets"] == {("orders", 0): 4, ("orders", 1): 2}
        commit = [req for _, name, _, req in fake.requests if name == "OffsetCommit"][0]
        assert (commit["generation_id_or_member_epoch"], commit["member_id"], commit["retention_time_ms"]) == \
            (-1, "", -1)
        with pytest.raises(errors.UnknownMemberId):
            admin.alter_group_offsets("billing", {("orders", 0): 0})
        res = admin.delete_groups(["idle", "billing", "nobody"])
    assert res["idle"] is None
    assert (res["billing"].code, res["nobody"].code) == (68, 69)
    assert "idle" not in fake.groups


def test_admin_retries_coordinator_not_available(fake):
    _stable_group(fake)
    fake.find_failures = 3
    with AdminClient("b1:9001", group_retry_s=5) as admin:
        assert admin.describe_groups(["billing"])["billing"].state == "Stable"
    fake.find_failures = 1000
    with AdminClient("b1:9001", group_retry_s=0.3) as admin:
        with pytest.raises(errors.CoordinatorNotAvailable):
            admin.find_coordinator("billing")


def test_admin_newest_versions(fake):
    fake.ranges = dict(NEWEST)
    _stable_group(fake)
    with AdminClient("b1:9001") as admin:
        assert admin.find_coordinator("billing").node_id == 2
        assert admin.list_group_offsets("billing") == {("orders", 0): 7, ("orders", 1): 3, ("gone", 4): 11}
        d = admin.describe_groups(["billing"])["billing"]
        assert len(d.members) == 3
        assert [g.group_id for g in admin.list_groups()] == ["billing"]
    versions = {(name, v) for _, name, v, _ in fake.requests}
    assert {("FindCoordinator", 6), ("OffsetFetch", 9), ("DescribeGroups", 5), ("ListGroups", 5)} <= versions


def test_admin_offset_fetch_v1_asks_for_every_partition(fake):
    fake.ranges[9] = (0, 1)
    _stable_group(fake)
    with AdminClient("b1:9001") as admin:
        assert admin.list_group_offsets("billing") == {("orders", 0): 7, ("orders", 1): 3}
    req = [req for _, name, _, req in fake.requests if name == "OffsetFetch"][0]
    assert req["topics"] == [{"name": "audit", "partition_indexes": [0]}, {"name": "orders",
                                                                           "partition_indexes": [0, 1]}]


# ---------------------------------------------------------------------------------------------- commands

def test_list(fake, capsys):
    _stable_group(fake)
    fake.add_group("connect-cluster", protocol_type="connect")
    fake.add_group("a-offsets-only", state="Empty", protocol="", protocol_type="")
    assert run(capsys, ["--list"]) == (0, "a-offsets-only\nbilling\n", "")
    rc, out, _ = run(capsys, ["--list", "--output", "json"])
    # ListGroups v2 (Kafka 2.1) has no state; v4+ does.
    assert json.loads(out) == [{"group": "a-offsets-only", "protocol_type": "", "state": None},
                               {"group": "billing", "protocol_type": "consumer", "state": None}]
    fake.ranges = dict(NEWEST)
    rc, out, _ = run(capsys, ["--list", "--output", "json"])
    assert [g["state"] for g in json.loads(out)] == ["Empty", "Stable"]


def test_describe_offsets_exact(fake, capsys):
    _stable_group(fake)
    rc, out, err = run(capsys, ["--describe", "--group", "billing"])
    assert (rc, err) == (0, "")
    # consumer-2 owns two partitions so comes first; its partitions sort by (topic, partition); consumer-3 owns
    # nothing (no row); gone-4 is committed but unowned and its topic is gone (no log end, no lag).
    assert out == (
        "\nGROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID     "
        "HOST            CLIENT-ID"
        "\nbilling         audit           0          -               0               -               consumer-2-bbbb "
        "/10.0.0.2       consumer-2"
        "\nbilling         orders          0          7               10              3               consumer-2-bbbb "
        "/10.0.0.2       consumer-2"
        "\nbilling         orders          1          3               4               1               consumer-1-aaaa "
        "/127.0.0.1      consumer-1"
        "\nbilling         gone            4          11              -               -               -               "
        "-               -\n")


def test_describe_empty_group_and_missing_group(fake, capsys):
    fake.add_group("idle", state="Empty", offsets={("orders", 0): 10}, protocol="")
    fake.add_group("fresh", state="Empty", protocol="")
    rc, out, err = run(capsys, ["--describe", "--group", "idle"])
    assert (rc, err) == (0, "\nConsumer group 'idle' has no active members.\n")
    assert out.splitlines()[2].split() == ["idle", "orders", "0", "10", "10", "0", "-", "-", "-"]
    assert run(capsys, ["--describe", "--group", "fresh"]) == \
        (0, "", "\nConsumer group 'fresh' has no active members.\n")
    assert run(capsys, ["--describe", "--group", "nobody"]) == \
        (1, "", "\nError: Consumer group 'nobody' does not exist.\n")


def test_describe_rebalancing_warns(fake, capsys):
    fake.add_group("moving", state="PreparingRebalance", offsets={("orders", 0): 1})
    rc, out, err = run(capsys, ["--describe", "--group", "moving", "--offsets"])
    assert (rc, err) == (0, "\nWarning: Consumer group 'moving' is rebalancing.\n")
    assert "moving          orders          0          1               10              9" in out


def test_describe_all_groups_members_state(fake, capsys):
    _stable_group(fake)
    fake.add_group("idle", state="Empty", protocol="")
    rc, out, err = run(capsys, ["--describe", "--all-groups", "--members"])
    assert (rc, err) == (0, "\nConsumer group 'idle' has no active members.\n")
    assert out == (
        "\nGROUP           CONSUMER-ID     HOST            CLIENT-ID       #PARTITIONS     \n"
        "billing         consumer-1-aaaa /127.0.0.1      consumer-1      1               \n"
        "billing         consumer-2-bbbb /10.0.0.2       consumer-2      2               \n"
        "billing         consumer-3-cccc /10.0.0.3       consumer-3      0               \n")
    rc, out, err = run(capsys, ["--describe", "--group", "idle", "--group", "billing", "--state"])
    assert out == (
        "\nGROUP           COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE                #MEMBERS"
        "\nbilling         b2:9002  (2)              range                Stable               3\n"
        "\nGROUP           COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE                #MEMBERS"
        "\nidle            b2:9002  (2)              -                    Empty                0\n")


def test_describe_json(fake, capsys):
    _stable_group(fake)
    rc, out, err = run(capsys, ["--describe", "--group", "billing", "--output", "json"])
    doc = json.loads(out)
    assert doc[0]["group"] == "billing" and doc[0]["state"] == "Stable"
    assert doc[0]["partitions"][1] == {"topic": "orders", "partition": 0, "current_offset": 7,
                                       "log_end_offset": 10, "lag": 3, "consumer_id": "consumer-2-bbbb",
                                       "host": "/10.0.0.2", "client_id": "consumer-2"}
    assert doc[0]["partitions"][3]["log_end_offset"] is None
    rc, out, err = run(capsys, ["--describe", "--group", "billing", "--members", "--output", "json"])
    assert json.loads(out)[0]["members"][1]["assignment"] == [{"topic": "audit", "partition": 0},
                                                             {"topic": "orders", "partition": 0}]
    rc, out, err = run(capsys, ["--describe", "--group", "billing", "--state", "--output", "json"])
    assert json.loads(out) == [{"group": "billing", "state": "Stable", "assignment_strategy": "range",
                                "members": 3, "coordinator": {"id": 2, "host": "b2", "port": 9002}}]


RESET_WARN = ("WARN: No action will be performed as the --execute option is missing. Add --dry-run to keep this "
              "(default) behaviour without the warning.\n")


def test_reset_dry_run_is_default_and_commits_nothing(fake, capsys):
    fake.add_group("idle", state="Empty", offsets={("orders", 0): 8, ("orders", 1): 3}, protocol="")
    rc, out, err = run(capsys, ["--reset-offsets", "--group", "idle", "--topic", "orders", "--to-earliest"])
    assert (rc, err) == (0, RESET_WARN)
    assert out == ("\nGROUP           TOPIC           PARTITION  NEW-OFFSET"
                   "\nidle            orders          0          0"
                   "\nidle            orders          1          2\n")
    assert fake.groups["idle"]["offsets"] == {("orders", 0): 8, ("orders", 1): 3}
    assert not [r for r in fake.requests if r[1] == "OffsetCommit"]


@pytest.mark.parametrize("scenario,expected", [
    (["--to-latest"], {("orders", 0): 10, ("orders", 1): 4}),
    (["--to-offset", "3"], {("orders", 0): 3, ("orders", 1): 3}),
    (["--to-offset", "1"], {("orders", 0): 1, ("orders", 1): 2}),     # orders-1 starts at 2
    (["--shift-by", "5"], {("orders", 0): 10, ("orders", 1): 4}),     # 8+5 > 10, 3+5 > 4
    (["--shift-by", "-4"], {("orders", 0): 4, ("orders", 1): 2}),
    # orders-0 has timestamps 1000, 1010, ... (offset i at 1000 + 10 i); orders-1 2000..2003.
    (["--to-datetime", "1970-01-01T00:00:01.025"], {("orders", 0): 3, ("orders", 1): 2}),
    (["--to-datetime", "1970-01-01T00:00:02.002"], {("orders", 0): 10, ("orders", 1): 2}),
])
def test_reset_execute_scenarios(fake, capsys, scenario, expected):
    fake.add_group("idle", state="Empty", offsets={("orders", 0): 8, ("orders", 1): 3}, protocol="")
    rc, out, err = run(capsys, ["--reset-offsets", "--group", "idle", "--all-topics", "--execute"] + scenario)
    assert rc == 0
    assert fake.groups["idle"]["offsets"] == expected
    lines = out.split("\n")[2:-1]
    assert [tuple(x.split()) for x in lines] == [("idle", "orders", str(p), str(o))
                                                 for (_, p), o in sorted(expected.items())]
    if scenario[-1] == "1970-01-01T00:00:02.002":   # no orders-0 record is that new
        assert err == "\nWarn: Partition 0 from topic orders is empty. Falling back to latest known offset.\n"
    else:
        assert err == ""


def test_reset_explicit_partitions_and_unknown_ones(fake, capsys):
    rc, out, err = run(capsys, ["--reset-offsets", "--group", "new", "--topic", "orders:1", "--to-earliest",
                                "--execute", "--output", "json"])
    assert (rc, err) == (0, "")
    assert json.loads(out) == [{"group": "new", "executed": True,
                                "partitions": [{"topic": "orders", "partition": 1, "new_offset": 2}]}]
    assert fake.groups["new"]["offsets"] == {("orders", 1): 2}
    rc, out, err = run(capsys, ["--reset-offsets", "--group", "new", "--topic", "orders:1,7", "--to-earliest",
                                "--dry-run"])
    assert (rc, out) == (1, "")
    assert err == '\nError: Executing consumer group command failed due to The partitions "orders-7" do not exist\n'


def test_reset_refused_for_active_group(fake, capsys):
    _stable_group(fake)
    rc, out, err = run(capsys, ["--reset-offsets", "--group", "billing", "--all-topics", "--to-earliest",
                                "--execute"])
    assert rc == 1
    assert err == ("\nError: Assignments can only be reset if the group 'billing' is inactive, but the current state "
                   "is Stable.\n")
    assert out == "\nGROUP           TOPIC           PARTITION  NEW-OFFSET\n"
    assert fake.groups["billing"]["offsets"][("orders", 0)] == 7


def test_reset_shift_by_without_commit_is_a_usage_error(fake, capsys):
    fake.add_group("idle", state="Empty", offsets={("orders", 0): 8}, protocol="")
    rc, out, err = run(capsys, ["--reset-offsets", "--group", "idle", "--topic", "orders", "--shift-by", "1",
                                "--dry-run"])
    assert (rc, out) == (1, "")
    assert err.startswith("Cannot shift offset for partition orders-1 since there is no current committed offset\n"
                          "usage: kbroker-admin consumer-groups")


def test_delete(fake, capsys):
    _stable_group(fake)
    fake.add_group("idle", state="Empty", protocol="")
    fake.add_group("idle2", state="Empty", protocol="")
    assert run(capsys, ["--delete", "--group", "idle", "--group", "idle2"]) == \
        (0, "Deletion of requested consumer groups ('idle', 'idle2') was successful.\n", "")
    fake.add_group("idle", state="Empty", protocol="")
    rc, out, err = run(capsys, ["--delete", "--group", "billing", "--group", "idle", "--group", "nobody"])
    assert rc == 1
    assert out == "\nThese consumer groups were deleted successfully: 'idle'\n"
    assert err == ("\nError: Deletion of some consumer groups failed:\n"
                   "* Group 'billing' could not be deleted due to: NON_EMPTY_GROUP: The group is not empty.\n"
                   "* Group 'nobody' could not be deleted due to: GROUP_ID_NOT_FOUND: The group id does not exist.\n")
    rc, out, err = run(capsys, ["--delete", "--group", "billing", "--output", "json"])
    assert json.loads(out) == [{"group": "billing", "deleted": False,
                                "error": "NON_EMPTY_GROUP: The group is not empty."}]


def test_broker_unreachable(monkeypatch, fake, capsys):
    args = cg.parse_args(["--bootstrap-server", "nowhere:1", "--list"])
    with AdminClient(args.bootstrap_server, group_retry_s=0.2) as admin:
        assert cg.run(admin, args) == 1
    assert capsys.readouterr().err == \
        "\nError: Executing consumer group command failed due to cannot connect to nowhere:1\n"
