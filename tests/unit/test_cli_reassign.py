"""kbroker-admin reassign-partitions / preferred-replica-election against an embedded znode tree (no controller).

The tools only read and write znodes, so an EmbeddedBackend with registered brokers and topics is the whole world
here: the exact stdout/stderr text, the znode bytes written, and the parsing/validation rules. The cluster-level
behaviour (the controller acting on the znodes) is tests/integration/test_tool_reassign.py.
"""
import io
import json

import pytest

from kbroker.cli import admin as admin_cli
from kbroker.cli import preferred_election as pe
from kbroker.cli import reassign as ra
from kbroker.cli.common import CommandError
from kbroker.controller import assignment as assignment_mod
from kbroker.coord import EmbeddedBackend, TopicStore
from kbroker.coord.znodes import BrokerIdZNode

REASSIGN = "/admin/reassign_partitions"
ELECTION = "/admin/preferred_replica_election"


@pytest.fixture
def backend(tmp_path):
    b = EmbeddedBackend(str(tmp_path)).start()
    yield b
    b.stop()


def register(backend, racks):
    for bid, rack in racks.items():
        backend.create(BrokerIdZNode.path(bid), BrokerIdZNode.encode([("PLAINTEXT", "127.0.0.1", 9090 + bid)],
                                                                     {"PLAINTEXT": "PLAINTEXT"}, rack=rack),
                       makepath=True)


@pytest.fixture
def world(backend):
    """Brokers 1, 2, 3 (no racks); foo = [1,2] [2,3] [3,1]; bar = [1] [2]."""
    register(backend, {1: None, 2: None, 3: None})
    store = TopicStore(backend)
    store.create_topic("foo", {0: [1, 2], 1: [2, 3], 2: [3, 1]})
    store.create_topic("bar", {0: [1], 1: [2]})
    return backend


def write(tmp_path, name, doc):
    p = tmp_path / name
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(p)


def run(main, backend, argv):
    out, err = io.StringIO(), io.StringIO()
    rc = main(argv, backend=backend, out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def reassign(backend, *argv):
    return run(ra.main, backend, ["--zookeeper", "unused:2181", *argv])


def elect(backend, *argv):
    return run(pe.main, backend, ["--zookeeper", "unused:2181", *argv])


# ---------------------------------------------------------------------------------------------- formats

def test_reassignment_json_is_kafkas_compact_form_sorted():
    got = ra.format_reassignment_json({("foo", 1): [2, 3], ("bar", 0): [1], ("foo", 0): [3, 4]})
    assert got == ('{"version":1,"partitions":[{"topic":"bar","partition":0,"replicas":[1]},'
                   '{"topic":"foo","partition":0,"replicas":[3,4]},{"topic":"foo","partition":1,"replicas":[2,3]}]}')
    assert ra.format_reassignment_json({}) == '{"version":1,"partitions":[]}'
    assert ra.tp_str(("foo", 7)) == "[foo,7]"
    assert ra.scala_list([("a", 0), ("b", 2)]) == "List([a,0], [b,2])"
    assert pe.scala_set([("a", 0), ("a", 1)]) == "Set([a,0], [a,1])"


def test_parse_reassignment_keeps_file_order_and_duplicates():
    text = ('{"version":1,"partitions":[{"topic":"foo","partition":2,"replicas":[3,1]},'
            '{"topic":"bar","partition":0,"replicas":[2],"log_dirs":["any"]},'
            '{"topic":"foo","partition":2,"replicas":[1]}]}')
    assert ra.parse_reassignment(text) == [(("foo", 2), [3, 1]), (("bar", 0), [2]), (("foo", 2), [1])]
    assert ra.parse_reassignment('{"version":1}') == []


@pytest.mark.parametrize("text, msg", [
    ("{nope", "reassignment file is not valid JSON: "),
    ("[1]", 'reassignment file must be {"version":1,"partitions":[...]}'),
    ('{"partitions":{"a":1}}', '"partitions" must be a list'),
    ('{"partitions":[{"topic":"a","partition":0}]}', 'each partition must be {"topic":"<name>","partition":<int>,'),
    ('{"partitions":[{"topic":"a","partition":"0","replicas":[1]}]}', 'partition must be an integer, got "0"'),
    ('{"partitions":[{"topic":"a","partition":0,"replicas":[true]}]}', "replica of [a,0] must be an integer, got true"),
])
def test_parse_reassignment_errors(text, msg):
    with pytest.raises(CommandError) as e:
        ra.parse_reassignment(text)
    assert str(e.value).startswith(msg)


def test_parse_topics_to_move():
    assert ra.parse_topics_to_move('{"topics":[{"topic":"foo1"},{"topic":"foo2"}],"version":1}') == ["foo1", "foo2"]
    assert ra.parse_topics_to_move('{"version":1}') == []
    with pytest.raises(CommandError, match=r"^List of topics to reassign contains duplicate entries: a$"):
        ra.parse_topics_to_move('{"topics":[{"topic":"a"},{"topic":"b"},{"topic":"a"}]}')
    with pytest.raises(CommandError, match=r'^each entry of "topics" must be \{"topic":"<name>"\}, got \{"t": 1\}$'):
        ra.parse_topics_to_move('{"topics":[{"t":1}]}')


def test_parse_broker_list():
    assert ra.parse_broker_list("5, 6,7") == [5, 6, 7]
    with pytest.raises(CommandError, match=r"^Broker list contains duplicate entries: 5$"):
        ra.parse_broker_list("5,6,5")
    with pytest.raises(CommandError, match=r"^Invalid broker list 'a,b'"):
        ra.parse_broker_list("a,b")


# ---------------------------------------------------------------------------------------------- arguments

@pytest.mark.parametrize("argv, msg", [
    (["--zookeeper", "z"], "Command must include exactly one action: --generate, --execute or --verify"),
    (["--zookeeper", "z", "--verify", "--execute"],
     "Command must include exactly one action: --generate, --execute or --verify"),
    (["--verify", "--reassignment-json-file", "f"], 'Missing required argument "[zookeeper]"'),
    (["--zookeeper", "z", "--verify"], "If --verify option is used, command must include --reassignment-json-file "
                                       "that was used during the --execute option"),
    (["--zookeeper", "z", "--generate", "--broker-list", "1"],
     "If --generate option is used, command must include both --topics-to-move-json-file and --broker-list options"),
    (["--zookeeper", "z", "--execute"], "If --execute option is used, command must include --reassignment-json-file "
                                        "that was output during the --generate option"),
    (["--zookeeper", "z", "--execute", "--reassignment-json-file", "f", "--broker-list", "1"],
     'Option "[execute]" can\'t be used with option "[broker-list]"'),
    (["--zookeeper", "z", "--generate", "--broker-list", "1", "--topics-to-move-json-file", "t",
      "--reassignment-json-file", "f"], 'Option "[generate]" can\'t be used with option "[reassignment-json-file]"'),
    (["--zookeeper", "z", "--verify", "--reassignment-json-file", "f", "--disable-rack-aware"],
     'Option "[verify]" can\'t be used with option "[disable-rack-aware]"'),
    (["--zookeeper", "z", "--generate", "--topics-to-move-json-file", "f", "--broker-list", "1", "--throttle", "100"],
     'Option "[generate]" can\'t be used with option "[throttle]"'),
])
def test_usage_errors(argv, msg):
    out, err = io.StringIO(), io.StringIO()
    assert ra.main(argv, out=out, err=err) == 1
    assert out.getvalue() == ""
    assert err.getvalue().startswith(msg + "\nusage: kbroker-admin reassign-partitions")


def test_admin_dispatches_both_tools(capsys):
    assert admin_cli.main(["reassign-partitions", "--zookeeper", "z"]) == 1
    assert capsys.readouterr().err.startswith("Command must include exactly one action")
    assert admin_cli.main(["preferred-replica-election"]) == 1
    assert capsys.readouterr().err.startswith('Missing required argument "[zookeeper]"\n'
                                              'usage: kbroker-admin preferred-replica-election')


# ---------------------------------------------------------------------------------------------- generate

def test_generate_fixed_start_index_is_kafkas_layout(world):
    store = TopicStore(world)
    proposed, current = ra.generate_assignment(store, [1, 2, 3], ["foo", "bar", "nope"], start_index=0)
    assert current == {("foo", 0): [1, 2], ("foo", 1): [2, 3], ("foo", 2): [3, 1], ("bar", 0): [1], ("bar", 1): [2]}
    # assignReplicasToBrokers(start 0, shift 0) over [1,2,3]: first replicas walk 1,2,3; followers the next broker.
    assert proposed == {("foo", 0): [1, 2], ("foo", 1): [2, 3], ("foo", 2): [3, 1], ("bar", 0): [1], ("bar", 1): [2]}
    proposed, _ = ra.generate_assignment(store, [2, 3], ["foo"], start_index=1)
    # over [2,3] starting at index 1: p0 -> 3,2; p1 -> 2,3; p2 (wraps, shift 2) -> 3,2.
    assert proposed == {("foo", 0): [3, 2], ("foo", 1): [2, 3], ("foo", 2): [3, 2]}
    assert ra.generate_assignment(store, [1, 2, 3], ["foo"], start_index=2)[0] == \
        {("foo", 0): [3, 1], ("foo", 1): [1, 2], ("foo", 2): [2, 3]}


def test_generate_is_rack_aware_with_registered_racks(backend):
    register(backend, {1: "r1", 2: "r1", 3: "r2", 4: "r2", 5: None})
    TopicStore(backend).create_topic("t", {0: [5, 1], 1: [5, 2], 2: [5, 3], 3: [5, 4]})
    store = TopicStore(backend)
    proposed, _ = ra.generate_assignment(store, [1, 2, 3, 4], ["t"], start_index=0)
    # rack-alternated list 1(r1),3(r2),2(r1),4(r2); every partition gets one replica in each rack.
    assert proposed == {("t", 0): [1, 3], ("t", 1): [3, 2], ("t", 2): [2, 4], ("t", 3): [4, 1]}
    with pytest.raises(CommandError, match=r"^Not all brokers have rack information\. Add --disable-rack-aware "
                                           r"in command line to make replica assignment without rack information\.$"):
        ra.generate_assignment(store, [1, 2, 5], ["t"], start_index=0)
    # Without racks the plain walk over 1,2,5: 1,2 / 2,5 / 5,1 / 1,5 (the 4th wraps: shift 1).
    assert ra.generate_assignment(store, [1, 2, 5], ["t"], disable_rack_aware=True, start_index=0)[0] == \
        {("t", 0): [1, 2], ("t", 1): [2, 5], ("t", 2): [5, 1], ("t", 3): [1, 5]}


def test_generate_output_exact(world, tmp_path, monkeypatch):
    real = assignment_mod.assign_replicas_to_brokers
    monkeypatch.setattr(ra, "assign_replicas_to_brokers",
                        lambda brokers, n, rf, start_index=-1, rng=None, hosts=None:
                        real(brokers, n, rf, start_index=0, hosts=hosts))
    topics = write(tmp_path, "topics.json", '{"topics":[{"topic":"bar"},{"topic":"gone"}],"version":1}')
    rc, out, err = reassign(world, "--generate", "--topics-to-move-json-file", topics, "--broker-list", "3,2,9")
    assert rc == 0
    assert out == ('Current partition replica assignment\n\n'
                   '{"version":1,"partitions":[{"topic":"bar","partition":0,"replicas":[1]},'
                   '{"topic":"bar","partition":1,"replicas":[2]}]}\n'
                   'Proposed partition reassignment configuration\n\n'
                   '{"version":1,"partitions":[{"topic":"bar","partition":0,"replicas":[2]},'
                   '{"topic":"bar","partition":1,"replicas":[3]}]}\n')
    assert err == ("WARNING: brokers 9 are not registered and were left out of the proposal\n"
                   "WARNING: topics gone do not exist and were left out\n")
    assert world.exists(REASSIGN) is None  # generate writes nothing


def test_generate_replication_factor_above_brokers(world, tmp_path):
    topics = write(tmp_path, "topics.json", {"topics": [{"topic": "foo"}], "version": 1})
    rc, out, err = reassign(world, "--generate", "--topics-to-move-json-file", topics, "--broker-list", "3")
    assert (rc, out) == (1, "")
    assert err == "Partitions reassignment failed due to replication factor: 2 larger than available brokers: 1\n"


# ---------------------------------------------------------------------------------------------- execute

def test_execute_writes_znode_and_prints_rollback(world, tmp_path):
    f = write(tmp_path, "r.json", '{"version":1,"partitions":[{"topic":"foo","partition":1,"replicas":[1,3]},'
                                  '{"topic":"bar","partition":0,"replicas":[3,2,1]}]}')
    rc, out, err = reassign(world, "--execute", "--reassignment-json-file", f)
    assert (rc, err) == (0, "")
    assert out == ('Current partition replica assignment\n\n'
                   '{"version":1,"partitions":[{"topic":"bar","partition":0,"replicas":[1]},'
                   '{"topic":"bar","partition":1,"replicas":[2]},{"topic":"foo","partition":0,"replicas":[1,2]},'
                   '{"topic":"foo","partition":1,"replicas":[2,3]},{"topic":"foo","partition":2,"replicas":[3,1]}]}\n\n'
                   'Save this to use as the --reassignment-json-file option during rollback\n'
                   'Successfully started reassignment of partitions.\n')
    assert world.get(REASSIGN)[0] == (b'{"version":1,"partitions":[{"topic":"bar","partition":0,"replicas":[3,2,1]},'
                                      b'{"topic":"foo","partition":1,"replicas":[1,3]}]}')
    # A second execute while the znode exists is refused and changes nothing.
    g = write(tmp_path, "g.json", '{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[3,2]}]}')
    rc, out, err = reassign(world, "--execute", "--reassignment-json-file", g)
    assert (rc, out, err) == (1, "", "There is an existing assignment running.\n")
    assert json.loads(world.get(REASSIGN)[0])["partitions"][0]["replicas"] == [3, 2, 1]


def test_execute_lost_race_reports_kafkas_message(world, tmp_path, monkeypatch):
    f = write(tmp_path, "r.json", '{"version":1,"partitions":[{"topic":"foo","partition":1,"replicas":[1,3]}]}')
    real_exists = world.exists

    def exists_then_someone_else_creates(path):
        res = real_exists(path)
        if path == REASSIGN and res is None:
            world.create(REASSIGN, b'{"version":1,"partitions":[{"topic":"foo","partition":2,"replicas":[1,2]}]}',
                         makepath=True)
        return res
    monkeypatch.setattr(world, "exists", exists_then_someone_else_creates)
    rc, out, err = reassign(world, "--execute", "--reassignment-json-file", f)
    assert rc == 1
    assert out.endswith("Save this to use as the --reassignment-json-file option during rollback\n")
    assert err == ("Partitions reassignment failed due to Partition reassignment currently in progress for "
                   "List([foo,2]). Aborting operation\n")


@pytest.mark.parametrize("doc, msg", [
    ('{"version":1,"partitions":[]}', "Partition reassignment data file is empty"),
    ('{"version":1}', "Partition reassignment data file is empty"),
    ('{"partitions":[{"topic":"foo","partition":0,"replicas":[1]},{"topic":"foo","partition":0,"replicas":[2]}]}',
     "Partition reassignment contains duplicate topic partitions: [foo,0]"),
    ('{"partitions":[{"topic":"foo","partition":0,"replicas":[1,2,1]},'
     '{"topic":"foo","partition":1,"replicas":[3,3]}]}',
     "Partition replica lists may not contain duplicate entries: [foo,0] contains multiple entries for 1. "
     "[foo,1] contains multiple entries for 3"),
    ('{"partitions":[{"topic":"foo","partition":0,"replicas":[]}]}',
     "Empty replica list specified in partition reassignment."),
    ('{"partitions":[{"topic":"foo","partition":3,"replicas":[1]},{"topic":"zz","partition":0,"replicas":[1]}]}',
     "The proposed assignment contains non-existent partitions: List([foo,3], [zz,0])"),
    ('{"partitions":[{"topic":"foo","partition":0,"replicas":[7,1,4]}]}',
     "The proposed assignment contains non-existent brokerIDs: 4,7"),
])
def test_execute_validation(world, tmp_path, doc, msg):
    f = write(tmp_path, "r.json", doc)
    rc, out, err = reassign(world, "--execute", "--reassignment-json-file", f)
    assert (rc, out, err) == (1, "", "Partitions reassignment failed due to %s\n" % msg)
    assert world.exists(REASSIGN) is None


def test_missing_file(world, tmp_path):
    rc, out, err = reassign(world, "--verify", "--reassignment-json-file", str(tmp_path / "none.json"))
    assert (rc, out) == (1, "")
    assert err == "Partitions reassignment failed due to cannot read %s: No such file or directory\n" % (
        tmp_path / "none.json")


# ---------------------------------------------------------------------------------------------- verify

def test_verify_statuses_exact(world, tmp_path):
    f = write(tmp_path, "r.json", '{"version":1,"partitions":[{"topic":"foo","partition":2,"replicas":[3,1]},'
                                  '{"topic":"foo","partition":0,"replicas":[2,1]},'
                                  '{"topic":"bar","partition":1,"replicas":[3]},'
                                  '{"topic":"gone","partition":0,"replicas":[1]}]}')
    world.create(REASSIGN, b'{"version":1,"partitions":[{"topic":"bar","partition":1,"replicas":[3]}]}',
                 makepath=True)
    rc, out, err = reassign(world, "--verify", "--reassignment-json-file", f)
    assert (rc, err) == (0, "")
    assert out == ("Status of partition reassignment: \n"
                   "ERROR: Assigned replicas (1,2) don't match the list of replicas for reassignment (2,1) for "
                   "partition [foo,0]\n"
                   "ERROR: Assigned replicas () don't match the list of replicas for reassignment (1) for "
                   "partition [gone,0]\n"
                   "Reassignment of partition [foo,2] completed successfully\n"
                   "Reassignment of partition [foo,0] failed\n"
                   "Reassignment of partition [bar,1] is still in progress\n"
                   "Reassignment of partition [gone,0] failed\n")
    # Once the controller has rewritten the assignment and dropped the znode, the same file reports completion.
    world.delete(REASSIGN)
    world.set("/brokers/topics/bar", b'{"version":1,"partitions":{"0":[1],"1":[3]}}')
    rc, out, _ = reassign(world, "--verify", "--reassignment-json-file", f)
    assert "Reassignment of partition [bar,1] completed successfully\n" in out


# ---------------------------------------------------------------------------------------------- preferred

def test_preferred_election_all_partitions(world):
    rc, out, err = elect(world)
    assert (rc, err) == (0, "")
    data = ('{"version":1,"partitions":[{"topic":"bar","partition":0},{"topic":"bar","partition":1},'
            '{"topic":"foo","partition":0},{"topic":"foo","partition":1},{"topic":"foo","partition":2}]}')
    assert out == ("Created preferred replica election path with %s\n"
                   "Successfully started preferred replica election for partitions "
                   "Set([bar,0], [bar,1], [foo,0], [foo,1], [foo,2])\n" % data)
    assert world.get(ELECTION)[0] == data.encode()
    # In progress: refused, znode unchanged.
    rc, out, err = elect(world)
    assert (rc, out) == (1, "")
    assert err == ("Failed to start preferred replica election\nPreferred replica leader election currently in "
                   "progress for Set([bar,0], [bar,1], [foo,0], [foo,1], [foo,2]). Aborting operation\n")
    assert world.get(ELECTION)[0] == data.encode()


def test_preferred_election_from_file(world, tmp_path):
    f = write(tmp_path, "p.json", '{"partitions":[{"topic":"foo","partition":2},{"topic":"bar","partition":1}]}')
    rc, out, err = elect(world, "--path-to-json-file", f)
    assert (rc, err) == (0, "")
    assert out == ('Created preferred replica election path with {"version":1,"partitions":['
                   '{"topic":"bar","partition":1},{"topic":"foo","partition":2}]}\n'
                   "Successfully started preferred replica election for partitions Set([bar,1], [foo,2])\n")


@pytest.mark.parametrize("doc, msg", [
    ('{"version":1}', "Preferred replica election data is empty"),
    ('{"partitions":[{"topic":"a","partition":1},{"topic":"a","partition":1}]}',
     "Preferred replica election data contains duplicate partitions: [a,1]"),
    ('{"partitions":[{"topic":"a"}]}', 'each partition must be {"topic":"<name>","partition":<int>}, '
                                       'got {"topic": "a"}'),
])
def test_preferred_election_bad_file(world, tmp_path, doc, msg):
    f = write(tmp_path, "p.json", doc)
    rc, out, err = elect(world, "--path-to-json-file", f)
    assert (rc, out, err) == (1, "", "Failed to start preferred replica election\n%s\n" % msg)
    assert world.exists(ELECTION) is None
