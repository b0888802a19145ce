"""Metadata of a Streams application's instances for interactive queries (Kafka's StreamsMetadata, KeyQueryMetadata,
HostInfo, ThreadMetadata, TaskMetadata) and the member identity carried in client ids.

confluent-kafka cannot put Streams' subscription userdata (process id, application.server) in the JoinGroup, so
each StreamThread's consumer carries them in its ``client.id``, which DescribeGroups returns for every member::

    <client.id or application.id>-<process uuid>-StreamThread-<n>-consumer[@<application.server, percent-encoded>]

``parse_member_client_id`` reads it back. A member whose client id ends with ``-shutdown-application`` is a
SHUTDOWN_APPLICATION signal (kafka_streams.py), not a Streams member. ``GroupView`` (one DescribeGroups answer) gives, per member, its
process, host and assigned partitions; from it: which process owns task (subtopology, partition) actively
(the member assigned that partition of the subtopology's source topics), and the standby owners (standby.py's
ring rule).
"""
from __future__ import annotations

import re
import urllib.parse
from typing import NamedTuple

UUID_LEN = 36
_THREAD = re.compile(r"^(?P<prefix>.*)-(?P<uuid>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
                     r"-StreamThread-(?P<n>\d+)-consumer(?:@(?P<server>.*))?$")


class HostInfo(NamedTuple):
    host: str
    port: int

    @classmethod
    def parse(cls, text: str | None) -> "HostInfo":
        if not text:
            return UNAVAILABLE
        host, _, port = text.rpartition(":")
        return cls(host, int(port))

    def __str__(self):
        return "%s:%d" % (self.host, self.port)


UNAVAILABLE = HostInfo("unavailable", -1)     # Kafka's HostInfo.unavailable()


class KeyQueryMetadata(NamedTuple):
    active_host: HostInfo
    standby_hosts: frozenset
    partition: int


class StreamsMetadata(NamedTuple):
    host_info: HostInfo
    process_id: str
    state_store_names: frozenset
    topic_partitions: frozenset            # active (topic, partition)
    standby_state_store_names: frozenset
    standby_topic_partitions: frozenset    # changelog (topic, partition) hosted as standby


class TaskMetadata(NamedTuple):
    task_id: object
    topic_partitions: frozenset


class ThreadMetadata(NamedTuple):
    thread_name: str
    thread_state: str
    consumer_client_id: str
    restore_consumer_client_id: str
    producer_client_ids: frozenset
    active_tasks: frozenset                # TaskMetadata
    standby_tasks: frozenset


class MemberInfo(NamedTuple):
    member_id: str
    client_id: str
    process_id: str | None
    thread: int
    server: str | None
    partitions: frozenset                  # assigned (topic, partition)


def member_client_id(prefix: str, process_id: str, thread: int, application_server: str = "") -> str:
    cid = "%s-%s-StreamThread-%d-consumer" % (prefix, process_id, thread)
    if application_server:
        cid += "@" + urllib.parse.quote(application_server, safe="")
    return cid


SHUTDOWN_SUFFIX = "-shutdown-application"


def shutdown_signal_client_id(prefix: str, process_id: str) -> str:
    """Client id of the SHUTDOWN_APPLICATION signal member (kafka_streams.py)."""
    return "%s-%s%s" % (prefix, process_id, SHUTDOWN_SUFFIX)


def parse_member_client_id(client_id: str):
    """(process uuid, thread index, application.server or None), or None for a client id of another form."""
    m = _THREAD.match(client_id or "")
    if not m:
        return None
    server = m.group("server")
    return m.group("uuid"), int(m.group("n")), urllib.parse.unquote(server) if server else None


class GroupView:
    """One DescribeGroups answer of the application's group."""

    def __init__(self, members: list, state: str = ""):
        self.members = members
        self.state = state

    @classmethod
    def describe(cls, admin, group: str, timeout: float = 10.0) -> "GroupView":
        desc = admin.describe_consumer_groups([group], request_timeout=timeout)[group].result(timeout)
        members = []
        for m in desc.members:
            parsed = parse_member_client_id(m.client_id)
            parts = frozenset((tp.topic, tp.partition) for tp in (m.assignment.topic_partitions
                                                                  if m.assignment else []))
            members.append(MemberInfo(m.member_id, m.client_id, parsed[0] if parsed else None,
                                      parsed[1] if parsed else -1, parsed[2] if parsed else None, parts))
        return cls(members, str(getattr(desc, "state", "")))

    def shutdown_requesters(self) -> list:
        """Client ids of SHUTDOWN_APPLICATION signal members in the group."""
        return sorted(m.client_id for m in self.members if m.client_id.endswith(SHUTDOWN_SUFFIX))

    def processes(self) -> list:
        """Sorted distinct process ids of the group's Streams members."""
        return sorted({m.process_id for m in self.members if m.process_id})

    def server_of(self, process_id) -> str | None:
        for m in self.members:
            if m.process_id == process_id and m.server:
                return m.server
        return None

    def active_owner(self, source_topics, partition) -> str | None:
        """The process whose member is assigned ``partition`` of one of ``source_topics``."""
        for m in self.members:
            for t in source_topics:
                if (t, partition) in m.partitions:
                    return m.process_id
        return None

    def partitions_of(self, process_id) -> frozenset:
        out = set()
        for m in self.members:
            if m.process_id == process_id:
                out |= m.partitions
        return frozenset(out)


def standby_owners(processes: list, active: str | None, replicas: int) -> list:
    """The processes hosting standbys of a task whose active owner is ``active``: the 1st..``replicas``-th
    successors of ``active`` in the sorted ring of processes (never ``active`` itself); equivalently each process
    hosts standbys of the tasks of its 1st..k-th predecessors."""
    if active not in processes or replicas <= 0:
        return []
    i = processes.index(active)
    n = len(processes)
    return [processes[(i + k) % n] for k in range(1, min(replicas, n - 1) + 1)]
