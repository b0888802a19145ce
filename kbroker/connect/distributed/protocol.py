"""Kafka Connect's group protocol: what a worker puts in JoinGroup and what the leader hands back in SyncGroup.

Byte formats (Kafka's ``ConnectProtocol`` and ``IncrementalCooperativeConnectProtocol``; big-endian; STRING is
int16 length + UTF-8, NULLABLE_BYTES int32 length (-1 = null) + bytes, ARRAY int32 count (-1 = null) + items):

Member metadata (JoinGroup ``protocols[].metadata``)::

    v0 ("default"):     version int16 = 0 | url STRING | config_offset int64
    v1 ("compatible"),
    v2 ("sessioned"):   version int16 = 1|2 | url STRING | config_offset int64
                        | allocation NULLABLE_BYTES   (the member's current assignment, itself a v1 assignment
                                                       below; null when it holds nothing)

Assignment (SyncGroup ``assignment``)::

    v0:     version int16 = 0 | error int16 | leader STRING | leader_url STRING | config_offset int64
            | assignment ARRAY of (connector STRING | tasks ARRAY of int32)
    v1/v2:  version int16 = 1|2 | the v0 fields | assignment ARRAY (nullable) | revoked ARRAY (nullable)
            | delay int32 (ms before the leader rebalances again to place lost work, KIP-415)

A task list holds the connector's task numbers; ``CONNECTOR_TASK`` (-1) in it means "run the Connector instance
itself". Readers accept any version >= 0 and read the fields they know (Kafka's forward compatibility: a newer
version only appends fields). ``error`` is ``NO_ERROR`` (0) or ``CONFIG_MISMATCH`` (1: the leader could not catch
up with the newest config offset a member reported; members read the config topic to its end and rejoin).

Protocol names offered in JoinGroup, most preferred first (the coordinator picks the first one every member
offers): ``connect.protocol=eager`` offers ``default``; ``compatible`` offers ``compatible``, ``default``;
``sessioned`` offers ``sessioned``, ``compatible``, ``default``.
"""
import struct
from dataclasses import dataclass, field

PROTOCOL_TYPE = "connect"
CONNECTOR_TASK = -1

NO_ERROR = 0
CONFIG_MISMATCH = 1

EAGER, COMPATIBLE, SESSIONED = "eager", "compatible", "sessioned"
# connect.protocol value -> the group protocol names it offers, most preferred first.
OFFERED = {
    EAGER: ("default",),
    COMPATIBLE: ("compatible", "default"),
    SESSIONED: ("sessioned", "compatible", "default"),
}
# Group protocol name -> the version of the formats above it uses.
VERSION_OF = {"default": 0, "compatible": 1, "sessioned": 2}

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class ProtocolError(ValueError):
    """Bytes that are not a Connect protocol metadata or assignment (truncated, negative lengths, bad UTF-8)."""


@dataclass
class Assignment:
    """What one worker runs (``connectors``: names; ``tasks``: (connector, task) pairs), and, in v1+, what it must
    stop first (``revoked_*``) and ``delay`` ms before the next rebalance."""
    error: int = NO_ERROR
    leader: str = ""
    leader_url: str = ""
    offset: int = -1
    connectors: list = field(default_factory=list)
    tasks: list = field(default_factory=list)
    revoked_connectors: list = field(default_factory=list)
    revoked_tasks: list = field(default_factory=list)
    delay: int = 0

    @property
    def failed(self):
        return self.error != NO_ERROR

    def is_empty(self):
        return not (self.connectors or self.tasks or self.revoked_connectors or self.revoked_tasks)


@dataclass
class WorkerState:
    """A member's JoinGroup metadata: its REST URL, the config offset it has read up to and (v1+) its current
    assignment (None when it holds nothing)."""
    url: str
    offset: int
    assignment: Assignment | None = None


# ---------------------------------------------------------------------------------------------------- writing

def _string(s):
    b = s.encode("utf-8")
    if len(b) > 0x7FFF:
        raise ProtocolError("string of %d bytes does not fit an int16 length" % len(b))
    return _I16.pack(len(b)) + b


def _connector_assignments(connectors, tasks):
    """``ARRAY of (connector, tasks)``, connectors sorted, -1 first then the task numbers ascending."""
    by_connector = {}
    for name in connectors:
        by_connector.setdefault(name, set()).add(CONNECTOR_TASK)
    for name, task in tasks:
        by_connector.setdefault(name, set()).add(int(task))
    out = [_I32.pack(len(by_connector))]
    for name in sorted(by_connector):
        numbers = sorted(by_connector[name])
        out.append(_string(name))
        out.append(_I32.pack(len(numbers)))
        out.extend(_I32.pack(n) for n in numbers)
    return b"".join(out)


def encode_metadata(state: WorkerState, version: int = 0) -> bytes:
    head = _I16.pack(version) + _string(state.url) + _I64.pack(state.offset)
    if version == 0:
        return head
    allocation = None
    if state.assignment is not None and not state.assignment.is_empty():
        allocation = encode_assignment(state.assignment, 1)
    if allocation is None:
        return head + _I32.pack(-1)
    return head + _I32.pack(len(allocation)) + allocation


def encode_assignment(a: Assignment, version: int = 0) -> bytes:
    out = [_I16.pack(version), _I16.pack(a.error), _string(a.leader), _string(a.leader_url), _I64.pack(a.offset),
           _connector_assignments(a.connectors, a.tasks)]
    if version >= 1:
        out.append(_connector_assignments(a.revoked_connectors, a.revoked_tasks))
        out.append(_I32.pack(a.delay))
    return b"".join(out)


def join_protocols(mode: str, state: WorkerState):
    """JoinGroup's ``protocols``: ``[{"name", "metadata"}]`` for ``connect.protocol`` = ``mode``."""
    try:
        names = OFFERED[mode]
    except KeyError:
        raise ValueError("unknown connect.protocol %r (eager, compatible, sessioned)" % mode) from None
    return [{"name": n, "metadata": encode_metadata(state, VERSION_OF[n])} for n in names]


# ---------------------------------------------------------------------------------------------------- reading

class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, data):
        self.buf = bytes(data)
        self.pos = 0

    def _take(self, n):
        if n < 0 or self.pos + n > len(self.buf):
            raise ProtocolError("truncated: need %d bytes at %d of %d" % (n, self.pos, len(self.buf)))
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def at_end(self):
        return self.pos >= len(self.buf)

    def i16(self):
        return _I16.unpack(self._take(2))[0]

    def i32(self):
        return _I32.unpack(self._take(4))[0]

    def i64(self):
        return _I64.unpack(self._take(8))[0]

    def string(self):
        n = self.i16()
        if n < 0:
            raise ProtocolError("negative string length %d" % n)
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolError("string is not UTF-8: %s" % e) from None

    def nullable_bytes(self):
        n = self.i32()
        if n == -1:
            return None
        return self._take(n)

    def connector_assignments(self, nullable):
        """-> (connectors, tasks); a null array (v1 only) reads as empty."""
        count = self.i32()
        if count == -1 and nullable:
            return [], []
        if count < 0 or count > len(self.buf):
            raise ProtocolError("bad array length %d" % count)
        connectors, tasks = [], []
        for _ in range(count):
            name = self.string()
            n = self.i32()
            if n < 0 or n * 4 > len(self.buf) - self.pos:
                raise ProtocolError("bad task array length %d" % n)
            for _ in range(n):
                t = self.i32()
                if t == CONNECTOR_TASK:
                    connectors.append(name)
                else:
                    tasks.append((name, t))
        return connectors, tasks


def _version(r):
    v = r.i16()
    if v < 0:
        raise ProtocolError("unsupported Connect protocol version %d" % v)
    return v


def decode_metadata(data) -> WorkerState:
    r = _Reader(data)
    version = _version(r)
    url = r.string()
    offset = r.i64()
    assignment = None
    if version >= 1 and not r.at_end():
        allocation = r.nullable_bytes()
        if allocation is not None:
            assignment = decode_assignment(allocation)
    return WorkerState(url, offset, assignment)


def decode_assignment(data) -> Assignment:
    r = _Reader(data)
    version = _version(r)
    a = Assignment(error=r.i16(), leader=r.string(), leader_url=r.string(), offset=r.i64())
    a.connectors, a.tasks = r.connector_assignments(nullable=version >= 1)
    if version >= 1:
        if not r.at_end():
            a.revoked_connectors, a.revoked_tasks = r.connector_assignments(nullable=True)
        if not r.at_end():
            a.delay = r.i32()
    return a
