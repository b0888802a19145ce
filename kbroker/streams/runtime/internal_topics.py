"""Internal topics of a Streams application: partition counts, configs, creation and checks (Kafka's
InternalTopicManager + the partition-count part of StreamsPartitionAssignor), done with the admin client before the
first poll.

Names (from the Topology): repartition topics ``<application.id>-<name>-repartition``, changelogs
``<application.id>-<store>-changelog``.

Partition counts
  tasks of a subtopology   the max partition count of its source topics (user topics: from the cluster's
                           metadata; repartition topics: as computed here). Kafka's DefaultPartitionGrouper.
  repartition topic        the count the Topology fixed (``Repartitioned.with_number_of_partitions``), else the
                           task count of the subtopology that WRITES it (its sink); chains of repartition topics are
                           resolved by iterating to a fixed point (a cycle without a fixed count is a
                           TopologyException).
  changelog                the task count of the store's subtopology (one changelog partition per task).
  co-partition groups      (joins) must have equal counts: a StreamsException naming the topics and counts
                           otherwise (Kafka's TopologyException "Topics not co-partitioned").

Configs (Kafka's RepartitionTopicConfig / UnwindowedUnversionedChangelogTopicConfig / WindowedChangelogTopicConfig)
  repartition              cleanup.policy=delete, segment.bytes=52428800, retention.ms=-1,
                           message.timestamp.type=CreateTime
  changelog (key-value)    cleanup.policy=compact, message.timestamp.type=CreateTime
  changelog (windowed)     cleanup.policy=compact,delete, retention.ms = store retention +
                           windowstore.changelog.additional.retention.ms (1 day)
  plus the application's ``topic.*`` keys; replication.factor from the config (-1: the broker's default).

``ensure()`` creates the missing topics (a concurrent creation by another instance -- TOPIC_ALREADY_EXISTS -- is
fine) and checks the existing ones: an internal topic with another partition count stops startup with a
StreamsException naming it, its count and the expected one (Kafka: "Existing internal topic ... has invalid
partitions").
"""
from __future__ import annotations

import logging
import time

from kbroker.streams.errors import StreamsException

log = logging.getLogger("kbroker.streams.internal_topics")

REPARTITION_CONFIGS = {"cleanup.policy": "delete", "segment.bytes": "52428800", "retention.ms": "-1",
                       "message.timestamp.type": "CreateTime"}
CHANGELOG_CONFIGS = {"cleanup.policy": "compact", "message.timestamp.type": "CreateTime"}


class MissingSourceTopicException(StreamsException):
    """A source topic of the topology does not exist (Kafka's MissingSourceTopicException)."""


def changelog_configs(windowed: bool, retention_ms: int | None, additional_retention_ms: int) -> dict:
    if not windowed:
        return dict(CHANGELOG_CONFIGS)
    out = dict(CHANGELOG_CONFIGS, **{"cleanup.policy": "compact,delete"})
    if retention_ms is not None:
        out["retention.ms"] = str(int(retention_ms) + int(additional_retention_ms))
    return out


class InternalTopicPlan:
    """The outcome of ``plan()``: task counts per subtopology id and every internal topic's (partitions,
    configs)."""

    def __init__(self, task_counts: dict, topics: dict, source_partitions: dict):
        self.task_counts = task_counts          # {subtopology id: number of tasks}
        self.topics = topics                    # {internal topic: (partitions, {config: value})}
        self.source_partitions = source_partitions   # {every source topic incl. internal: partitions}


def _subtopology_sources(sub, app_id):
    return set(sub.source_topics)          # repartition sources included


def plan(topology, app_id: str, user_partitions: dict, config) -> InternalTopicPlan:
    """Partition counts and configs (module docstring). ``user_partitions``: {user source topic: partitions}
    from the cluster; a source topic missing from it raises MissingSourceTopicException."""
    subs = list(topology.subtopologies(app_id))
    repartition = dict(topology.repartition_topics(app_id))       # name -> fixed partitions or None
    known = dict(user_partitions)
    missing = sorted(t for sub in subs for t in _subtopology_sources(sub, app_id)
                     if t not in repartition and t not in known)
    if missing:
        raise MissingSourceTopicException("Missing source topic(s) %s of application %s: create them first"
                                          % (", ".join(missing), app_id))
    for name, fixed in repartition.items():
        if fixed:
            known[name] = int(fixed)
    writers = {}      # repartition topic -> subtopologies writing it
    for sub in subs:
        for t in sub.sink_topics:
            if t in repartition:
                writers.setdefault(t, []).append(sub)
    # fixed point: a repartition topic's count is the max task count of its writers, whose own sources may be
    # repartition topics resolved in an earlier round
    for _ in range(len(repartition) + 1):
        changed = False
        for name in repartition:
            if name in known:
                continue
            counts = []
            for sub in writers.get(name, ()):
                srcs = _subtopology_sources(sub, app_id)
                if all(s in known for s in srcs) and srcs:
                    counts.append(max(known[s] for s in srcs))
                else:
                    counts = None
                    break
            if counts:
                known[name] = max(counts)
                changed = True
        if not changed:
            break
    unresolved = sorted(n for n in repartition if n not in known)
    if unresolved:
        raise StreamsException("Cannot determine the partition count of repartition topic(s) %s"
                               % ", ".join(unresolved))
    task_counts = {}
    for sub in subs:
        srcs = _subtopology_sources(sub, app_id)
        task_counts[sub.id] = max(known[s] for s in srcs) if srcs else 0
    for group in topology.copartition_groups(app_id):
        counts = {t: known.get(t) for t in group if t in known}
        if len(set(counts.values())) > 1:
            raise StreamsException("Topics not co-partitioned: [%s]" % ", ".join(
                "%s: %d partitions" % (t, n) for t, n in sorted(counts.items())))
    topic_cfg = config.topic_configs()
    topics = {}
    for name in repartition:
        topics[name] = (known[name], dict(REPARTITION_CONFIGS, **topic_cfg))
    additional = config["windowstore.changelog.additional.retention.ms"]
    for name, spec in topology.changelog_topics(app_id).items():
        sub_id = spec.subtopology
        cfg = changelog_configs(bool(spec.windowed), spec.retention_ms, additional)
        cfg.update(topic_cfg)
        cfg.update({k: str(v) for k, v in (spec.config or {}).items()})   # the store's with_logging_enabled(cfg)
        topics[name] = (task_counts[sub_id], cfg)
    return InternalTopicPlan(task_counts, topics, known)


def topic_partitions(admin, topics, timeout: float = 10.0) -> dict:
    """{topic: partition count} of the given topics that exist (admin metadata)."""
    md = admin.list_topics(timeout=timeout)
    out = {}
    for t in topics:
        tm = md.topics.get(t)
        if tm is not None and tm.error is None and tm.partitions:
            out[t] = len(tm.partitions)
    return out


def ensure(admin, planned: InternalTopicPlan, replication_factor: int, timeout: float = 30.0) -> list:
    """Create the missing internal topics, check the existing ones' partition counts (module docstring); returns
    the names created. Waits (bounded by ``timeout``) until every internal topic shows in the metadata with its
    partitions."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    existing = topic_partitions(admin, planned.topics)
    for name, (partitions, _) in sorted(planned.topics.items()):
        if name in existing and existing[name] != partitions:
            raise StreamsException("Existing internal topic %s has invalid partitions: expected: %d; actual: %d. "
                                   "Use 'kbroker-admin streams-application-reset' to reset the application"
                                   % (name, partitions, existing[name]))
    new = [NewTopic(name, num_partitions=partitions, replication_factor=replication_factor, config=cfg)
           for name, (partitions, cfg) in sorted(planned.topics.items()) if name not in existing]
    created = []
    if new:
        for name, fut in admin.create_topics(new, request_timeout=timeout).items():
            try:
                fut.result(timeout)
                created.append(name)
                log.info("Created internal topic %s with %d partitions", name, planned.topics[name][0])
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                if not (isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS):
                    raise StreamsException("Could not create internal topic %s: %s" % (name, exc)) from None
    deadline = time.monotonic() + timeout
    while True:
        got = topic_partitions(admin, planned.topics)
        bad = {n: got.get(n) for n, (p, _) in planned.topics.items() if got.get(n) != p}
        if not bad:
            return created
        wrong = {n: c for n, c in bad.items() if c is not None}
        if wrong:
            name, count = sorted(wrong.items())[0]
            raise StreamsException("Existing internal topic %s has invalid partitions: expected: %d; actual: %d"
                                   % (name, planned.topics[name][0], count))
        if time.monotonic() > deadline:
            raise StreamsException("Internal topics not visible in the metadata after %.0f s: %s"
                                   % (timeout, ", ".join(sorted(bad))))
        time.sleep(0.1)
