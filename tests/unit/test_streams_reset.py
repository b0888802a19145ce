"""kbroker-admin streams-application-reset (kbroker/cli/streams_reset.py): argument handling, the offsets plan, the
internal topics it deletes, and the whole run's output against an in-memory admin (line for line as Kafka's
StreamsResetter prints it). The real broker: tests/integration/test_streams_examples.py."""
import datetime as dt
from collections import namedtuple

import pytest

from kbroker.cli import streams_reset as sr
from kbroker.cli.admin import main as admin_main
from kbroker.cli.common import UsageError
from kbroker.client.admin import GroupDescription, GroupMember
from kbroker.errors import KafkaError


def parse(*argv):
    return sr.parse_args(["--application-id", "wc", *argv])


# ---------------------------------------------------------------------------------------------- arguments

def test_defaults_and_lists():
    a = parse("--input-topics", "a,b", "--input-topics", "c", "--internal-topics", "wc-x-changelog")
    assert a.bootstrap_server == "localhost:9092"
    assert a.input_topics == ["a", "b", "c"] and a.intermediate_topics == [] and not a.intermediate_given
    assert a.internal_topics == ["wc-x-changelog"]
    assert a.scenario is None and not a.dry_run and not a.force


def test_application_id_required():
    with pytest.raises(UsageError, match=r"^Missing required option\(s\) \[application-id\]$"):
        sr.parse_args(["--input-topics", "a"])


@pytest.mark.parametrize("argv, msg", [
    (["--to-latest", "--to-offset", "3"], 'Option "[to-offset]" can\'t be used with option "[to-latest]"'),
    (["--to-earliest", "--shift-by", "-1"], 'Option "[to-earliest]" can\'t be used with option "[shift-by]"'),
    (["--by-duration", "PT1H", "--to-datetime", "2024-01-01T00:00:00.000"],
     'Option "[to-datetime]" can\'t be used with option "[by-duration]"'),
    (["--from-file", "f", "--to-latest"], 'Option "[to-latest]" can\'t be used with option "[from-file]"'),
])
def test_reset_options_are_exclusive_with_kafkas_message(argv, msg):
    with pytest.raises(UsageError) as e:
        parse(*argv)
    assert str(e.value) == msg


def test_each_scenario_is_recognised():
    assert parse("--to-offset", "5").scenario == "to_offset"
    assert parse("--shift-by", "-2").shift_by == -2
    assert parse("--to-latest").scenario == "to_latest"
    assert parse("--by-duration", "PT1M").duration_ms == 60000
    assert parse("--to-datetime", "1970-01-01T00:00:01.500Z").datetime_ms == 1500
    assert parse("--intermediate-topics", "m").intermediate_given


def test_bad_numbers_are_usage_errors():
    with pytest.raises(UsageError, match="invalid int value"):
        parse("--to-offset", "x")


def test_cli_exit_status_and_usage_on_stderr(capsys):
    assert admin_main(["streams-application-reset", "--to-latest", "--to-earliest", "--application-id", "a"]) == 1
    err = capsys.readouterr().err
    assert err.startswith('Option "[to-earliest]" can\'t be used with option "[to-latest]"\nusage: ')
    assert admin_main(["streams-application-reset", "--help"]) == 0
    assert "--application-id" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------- time formats

@pytest.mark.parametrize("text, ms", [
    ("PT0.5S", 500), ("P1D", 86400000), ("PT1H30M", 5400000), ("-PT2S", -2000), ("PT-1.5S", -1500),
    ("p2dt3h", (2 * 24 + 3) * 3600000), ("PT0.0009S", 0),
])
def test_duration_as_java_duration_parse(text, ms):
    assert sr.parse_duration(text) == ms


@pytest.mark.parametrize("text", ["P", "PT", "1H", "PT1X", "P1H", ""])
def test_duration_refused(text):
    with pytest.raises(UsageError, match="Text cannot be parsed to a Duration"):
        sr.parse_duration(text)


def test_datetime_zones_and_local_default():
    assert sr.parse_datetime("2020-01-02T03:04:05.006Z") == 1577934245006
    assert sr.parse_datetime("2020-01-02T03:04:05.006+01:00") == 1577934245006 - 3600000
    assert sr.parse_datetime("2020-01-02T03:04:05.006-0130") == 1577934245006 + 5400000
    tz = dt.timezone(dt.timedelta(hours=2))
    assert sr.parse_datetime("2020-01-02T03:04:05.006", local_tz=tz) == 1577934245006 - 7200000
    with pytest.raises(UsageError, match="does not contain a 'T'"):
        sr.parse_datetime("2020-01-02 03:04:05.006")
    with pytest.raises(UsageError, match="Unparseable date"):
        sr.parse_datetime("2021-02-30T00:00:00.000Z")


def test_reset_plan_csv():
    assert sr.parse_reset_plan("a,0,5\nb,1,7") == {("a", 0): 5, ("b", 1): 7}
    with pytest.raises(sr.JavaError, match="not following the format"):
        sr.parse_reset_plan("a,0")


# ---------------------------------------------------------------------------------------------- the plan

TPS = [("in", 0), ("in", 1)]
EARLIEST = {("in", 0): 2, ("in", 1): 0}
LATEST = {("in", 0): 10, ("in", 1): 4}


def plan(*argv, committed=None, by_time=None, file_plan=None):
    notes = []
    return sr.reset_offsets(parse(*argv), TPS, EARLIEST, LATEST, committed or {}, by_time, file_plan, notes), notes


def test_default_and_earliest_latest():
    assert plan()[0] == {("in", 0): 2, ("in", 1): 0}
    assert plan("--to-earliest")[0] == {("in", 0): 2, ("in", 1): 0}
    assert plan("--to-latest")[0] == {("in", 0): 10, ("in", 1): 4}


def test_to_offset_clamped_with_kafkas_notes():
    offsets, notes = plan("--to-offset", "3")
    assert offsets == {("in", 0): 3, ("in", 1): 3}
    assert notes == []
    offsets, notes = plan("--to-offset", "1")
    assert offsets == {("in", 0): 2, ("in", 1): 1}
    assert notes == ["New offset (1) is lower than earliest offset. Value will be set to 2"]
    offsets, notes = plan("--to-offset", "4")
    assert offsets == {("in", 0): 4, ("in", 1): 4}
    assert notes == ["New offset (4) is higher than latest offset. Value will be set to 4"]


def test_shift_by_counts_from_committed_or_the_end():
    offsets, notes = plan("--shift-by", "-3", committed={("in", 0): 6})
    assert offsets == {("in", 0): 3, ("in", 1): 1}       # partition 1 has no commit: from its end 4
    offsets, notes = plan("--shift-by", "5", committed={("in", 0): 6, ("in", 1): 0})
    assert offsets == {("in", 0): 10, ("in", 1): 4}
    assert notes == ["New offset (11) is higher than latest offset. Value will be set to 10",
                     "New offset (5) is higher than latest offset. Value will be set to 4"]


def test_by_time_falls_back_to_the_end():
    offsets, notes = plan("--by-duration", "PT1H", by_time={("in", 0): 7, ("in", 1): -1})
    assert offsets == {("in", 0): 7, ("in", 1): 4}
    assert notes == ["Partition 1 from topic in is empty, without a committed record. Falling back to latest "
                     "known offset."]


def test_from_file():
    offsets, _ = plan("--from-file", "x", file_plan={("in", 0): 5, ("in", 1): 9})
    assert offsets == {("in", 0): 5, ("in", 1): 4}


ALL = ["__consumer_offsets", "in", "out", "wc-KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog",
       "wc-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition", "wc-other", "wc2-x-changelog",
       "wc-a-subscription-registration-topic", "wc-x-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000012-topic",
       "wc-in-changelog"]


def test_inferred_internal_topics():
    assert sr.inferred_internal_topics("wc", ALL, ["wc-in-changelog"]) == [
        "wc-KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog",
        "wc-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition",
        "wc-a-subscription-registration-topic", "wc-x-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000012-topic"]


def test_specified_internal_topics_must_be_a_subset():
    topics, header = sr.topics_to_delete("wc", ALL, [], [], ["wc-KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog"])
    assert topics == ["wc-KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog"]
    assert header == "Deleting specified internal topics [wc-KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog]"
    with pytest.raises(sr.JavaError, match="Invalid topic specified in the --internal-topics option"):
        sr.topics_to_delete("wc", ALL, [], [], ["out"])


# ---------------------------------------------------------------------------------------------- a whole run

Offset = namedtuple("Offset", "offset ts")


class FakeAdmin:
    """The AdminClient calls the tool makes, over an in-memory cluster."""

    def __init__(self, topics, members=()):
        self.topics = dict(topics)                  # name -> [(log start, log end)] per partition
        self.members = list(members)
        self.committed = {}
        self.deleted = []
        self.cluster = self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def describe_groups(self, ids):
        return {g: GroupDescription(g, "Stable" if self.members else "Empty", "consumer", "stream",
                                    self.members, None) for g in ids}

    def list_topics(self, include_internal=True):
        return sorted(self.topics)

    def partitions_for(self, topic, refresh=False):
        return list(range(len(self.topics[topic])))

    def partition_offsets(self, tps, ts):
        return {tp: Offset(self.topics[tp[0]][tp[1]][0 if ts == sr.EARLIEST else 1], -1) for tp in tps}

    def list_group_offsets(self, group, tps=None):
        return {tp: o for tp, o in self.committed.items() if tps is None or tp in tps}

    def alter_group_offsets(self, group, offsets):
        self.committed.update(offsets)

    def delete_topics(self, names):
        self.deleted += names
        for n in names:
            del self.topics[n]


def run(admin, *argv):
    lines = []
    status = sr.run(parse("--bootstrap-server", "h:1", *argv), lambda bootstrap: admin, lines.append)
    return status, lines


CHANGELOG = "wc-KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog"
REPARTITION = "wc-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition"


def test_run_resets_commits_and_deletes():
    admin = FakeAdmin({"in": [(0, 3), (1, 5)], "mid": [(0, 9)], "out": [(0, 11)], CHANGELOG: [(0, 8)],
                       REPARTITION: [(0, 12)]})
    status, lines = run(admin, "--input-topics", "in,gone", "--intermediate-topics", "mid")
    assert status == 1                                   # "gone" does not exist
    assert lines == [
        "WARN: `--intermediate-topics` is deprecated and will be removed in a future release",
        "Reset-offsets for input topics [in, gone]",
        "Seek-to-end for intermediate topics [mid]",
        "Following input topics are not found, skipping them",
        "Topic: gone",
        "Following input topics offsets will be reset to (for consumer group wc)",
        "Topic: in Partition: 0 Offset: 0",
        "Topic: in Partition: 1 Offset: 1",
        "Following intermediate topics offsets will be reset to end (for consumer group wc)",
        "Topic: mid",
        "Done.",
        "Deleting inferred internal topics [%s, %s]" % (CHANGELOG, REPARTITION),
        "Done.",
    ]
    assert admin.committed == {("in", 0): 0, ("in", 1): 1, ("mid", 0): 9}
    assert admin.deleted == [CHANGELOG, REPARTITION]


def test_dry_run_changes_nothing():
    admin = FakeAdmin({"in": [(0, 3)], CHANGELOG: [(0, 8)]})
    admin.committed = {("in", 0): 3}
    status, lines = run(admin, "--input-topics", "in", "--to-offset", "1", "--dry-run")
    assert status == 0
    assert lines == [
        "----Dry run displays the actions which will be performed when running Streams Reset Tool----",
        "Reset-offsets for input topics [in]",
        "Following input topics offsets will be reset to (for consumer group wc)",
        "Topic: in Partition: 0 Offset: 1",
        "Done.",
        "Deleting inferred internal topics [%s]" % CHANGELOG,
        "Done.",
    ]
    assert admin.committed == {("in", 0): 3} and admin.deleted == [] and CHANGELOG in admin.topics


def test_no_topics_skips_the_seek():
    status, lines = run(FakeAdmin({"in": [(0, 3)]}))
    assert (status, lines) == (0, ["No input or intermediate topics specified. Skipping seek.",
                                   "Deleting inferred internal topics []", "Done."])


def test_refuses_an_active_group_with_kafkas_message():
    member = GroupMember("m-1", None, "wc-1-StreamThread-1-consumer", "/127.0.0.1", [("in", 0)])
    admin = FakeAdmin({"in": [(0, 3)]}, members=[member])
    with pytest.raises(sr.JavaError) as e:
        run(admin, "--input-topics", "in")
    assert str(e.value) == (
        "java.lang.IllegalStateException: Consumer group 'wc' is still active and has following members: "
        "[(memberId=m-1, groupInstanceId=null, rackId=null, clientId=wc-1-StreamThread-1-consumer, "
        "host=/127.0.0.1, assignment=(topicPartitions=in-0), targetAssignment=Optional.empty, "
        "memberEpoch=Optional.empty, upgraded=Optional.empty)]. Make sure to stop all running application "
        "instances before running the reset tool. You can use option '--force' to remove active members from the "
        "group.")
    assert admin.committed == {}


def test_delete_failure_is_an_error(capsys):
    class Failing(FakeAdmin):
        def delete_topics(self, names):
            raise KafkaError("boom")
    with pytest.raises(sr.JavaError, match="Encountered an error deleting one or more topics"):
        run(Failing({CHANGELOG: [(0, 1)]}))
    assert "ERROR: deleting topics [%s]" % CHANGELOG in capsys.readouterr().err
