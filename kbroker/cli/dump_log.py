"""``kbroker-admin dump-log``: Kafka's kafka-dump-log.sh (``org.apache.kafka.tools.DumpLogSegments``, Kafka 4.x) over
the files kbroker writes -- the same layout as Kafka's, so the output is Kafka's, line for line.

    kbroker-admin dump-log --files F[,F...] [--print-data-log] [--deep-iteration] [--verify-index-only]
                           [--index-sanity-check] [--offsets-decoder] [--transaction-log-decoder]
                           [--max-message-size N (5242880)] [--max-bytes N] [--skip-record-metadata]

Implications (Kafka's): a decoder implies ``--print-data-log``, which implies ``--deep-iteration``.
Per file, by suffix (stdout unless said):

* ``.log`` -- ``Dumping <file>``, ``Log starting offset: <base from the name>``, per batch
  ``baseOffset: B lastOffset: L count: N baseSequence: S lastSequence: S' producerId: P producerEpoch: E
  partitionLeaderEpoch: LE isTransactional: T isControl: C deleteHorizonMs: OptionalLong[H]|OptionalLong.empty
  position: POS CreateTime|LogAppendTime: MAXTS size: SIZE magic: 2 compresscodec: none|gzip|snappy|lz4|zstd
  crc: CRC isvalid: true|false`` (CRC = the stored CRC-32C; isvalid = it equals the one computed over bytes
  21..end); with ``--deep-iteration`` one line per record ``| offset: O CreateTime: TS keySize: K valueSize: V
  sequence: SEQ headerKeys: [k1,k2]`` plus `` endTxnMarker: COMMIT|ABORT coordinatorEpoch: CE`` for a marker, and
  with ``--print-data-log`` `` key: K payload: V`` (UTF-8 text; no key -> no ``key:``; a null value -> no
  ``payload:``); decoders print their JSON instead (below). A torn tail: ``Found N invalid bytes at the end of
  <name>``. On stderr at the end: ``Non-consecutive offsets in <abs path>`` / ``  A is followed by B`` (deep
  iteration; the previous offset starts at -1, as Kafka's).
* ``.index`` -- ``offset: O position: P`` per entry (``<file> is empty.`` when it has none); every entry is
  checked against the log: the batch at its position must end at its offset, else (stderr, at the end)
  ``Mismatches in :<abs path>`` / ``  Index offset: O, log offset: L`` (-1: no batch there).
* ``.timeindex`` -- ``timestamp: T offset: O`` per entry; checked: the batch holding the offset (found from the
  offset index's position) must end at it (``The following indexed offsets are not found in :<abs path>`` /
  ``Indexed offset: O, found log offset: L``), its largest record timestamp must equal T (``Found timestamp
  mismatch in :<abs path>`` / ``  Index timestamp: T, log timestamp: T'``) and T must grow (``Found out of order
  timestamp in :<abs path>`` / ``  Index timestamp: T, Previously indexed timestamp: T'``).
  ``--verify-index-only`` prints only the findings; ``--index-sanity-check`` only ``<file> passed sanity check.``
  per index (Kafka's OffsetIndex/TimeIndex.sanityCheck: size a multiple of the entry size, last offset >= base,
  last timestamp >= first). A failed sanity check is ``<file> failed sanity check: <reason>`` here (Kafka dies with
  the CorruptIndexException's stack trace) and the exit status is 1.
* ``.txnindex`` -- ``version: 0 producerId: P firstOffset: F lastOffset: L lastStableOffset: S`` per entry.
* ``.snapshot`` -- per producer ``producerId: P producerEpoch: E coordinatorEpoch: CE currentTxnFirstOffset:
  OptionalLong[O]|OptionalLong.empty lastTimestamp: T`` + `` firstSequence: F lastSequence: L lastOffset: O
  offsetDelta: D timestamp: T`` when it has a batch.
* anything else -- ``Ignoring unknown file <file>`` on stderr.

Decoders (Kafka's JSON, field names camelCase, fields of the record's version only, bytes as base64):
``--offsets-decoder`` (``__consumer_offsets``): ``key: {"type":"<key version>","data":{...}} payload:
{"version":"<value version>","data":{...}}`` (a group's members' subscription and assignment decoded with the
consumer protocol when the protocol type is "consumer"), a tombstone ``payload: <DELETE>``;
``--transaction-log-decoder`` (``__transaction_state``): the same shape, ``transactionStatus`` as the state's
name (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Dead, PrepareEpochFence).
Exit status 0, or 1 when a file could not be read or an index failed its sanity check.
"""
import base64
import json
import mmap
import os
import struct
import sys

from kbroker.coordinator import consumer_protocol, schemas as offsets_schemas
from kbroker.log import producer_snapshot
from kbroker.log.txn_index import ENTRY as TXN_ENTRY, ENTRY_SIZE as TXN_ENTRY_SIZE
from kbroker.protocol.schema import SchemaError
from kbroker.record import CODEC_NAMES
from kbroker.record.batch import (ATTR_DELETE_HORIZON, HEADER_SIZE, LOG_APPEND_TIME, LOG_OVERHEAD, MAGIC, batch_header,
                                  batch_records, compute_crc, last_sequence)
from kbroker.record.control import control_type
from kbroker.transaction import txn_log

from .common import ArgParser, parse_command_line
from .java_text import java_string

DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
INT_MAX = 0x7FFFFFFF
RECORD_INDENT = "|"
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_CONTROL_VALUE = struct.Struct(">hi")
TXN_STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
              "PrepareEpochFence")


# ------------------------------------------------------------------------------------------------ file reading
class LogFile:
    """The v2 batches of a ``.log`` file (its first ``max_bytes``), mapped read-only: a 1 GiB segment costs page
    cache, not a 1 GiB copy in this process."""

    def __init__(self, path, max_bytes=INT_MAX):
        self.path = path
        with open(path, "rb") as f:
            size = min(os.fstat(f.fileno()).st_size, max_bytes)
            self.data = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) if size > 0 else b""

    def batches(self, position=0):
        """``(position, BatchHeader)`` of every whole batch from ``position`` (stops at a torn or malformed one)."""
        data = self.data
        n = len(data)
        pos = position
        while n - pos >= LOG_OVERHEAD:
            size = LOG_OVERHEAD + struct.unpack_from(">i", data, pos + 8)[0]
            if size < HEADER_SIZE or pos + size > n:
                return
            head = batch_header(data, pos)
            if head.magic != MAGIC:
                return
            yield pos, head
            pos += size

    def first_batch_at(self, position, max_size):
        """The BatchHeader of the batch at ``position`` if it is whole within ``max_size`` bytes, else None."""
        for pos, head in self.batches(position):
            return head if head.size <= max_size else None
        return None


def _index_entries(path, entry):
    with open(path, "rb") as f:
        data = f.read()
    n = len(data) // entry.size
    return [entry.unpack_from(data, i * entry.size) for i in range(n)], len(data)


def _base_offset(path):
    return int(os.path.basename(path).split(".")[0])


def _sibling(path, suffix):
    return os.path.join(os.path.dirname(os.path.abspath(path)), os.path.basename(path).split(".")[0] + suffix)


# ------------------------------------------------------------------------------------------------ decoders
def _camel(name):
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _version_in(versions, version):
    """Is ``version`` in a Field's parsed ``versions`` range ((lo, hi) or None)?"""
    return versions is not None and versions[0] <= version <= versions[1]


def _json_value(field, value, version):
    if value is None:
        return None
    if field.type == "[]":
        return [_json_struct(field.fields, v, version) for v in value]
    if field.type == "bytes":
        return base64.b64encode(bytes(value)).decode("ascii")
    return value


def _json_struct(fields, values, version):
    """Kafka's generated JSON converter: the fields of ``version`` in schema order, camelCase names; tagged fields
    only when they differ from their default."""
    out = {}
    for f in fields:
        if not _version_in(f.versions, version):
            continue
        v = values.get(f.name, f.default)
        if f.tag is not None and v == f.default:
            continue
        out[_camel(f.name)] = _json_value(f, v, version)
    return out


def _dumps(doc):
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def _consumer_protocol_json(schema, buf):
    version, values = schema.decode(buf)
    return _json_struct(schema.fields, values, schema.layout_version(version))


def offsets_parser(key, value):
    """(key text, payload text | None) of a ``__consumer_offsets`` record (Kafka's OffsetsMessageParser)."""
    kind, key_version, key_values = offsets_schemas.decode_key(key)
    key_schema = offsets_schemas.OFFSET_COMMIT_KEY if kind == offsets_schemas.OFFSET_KEY \
        else offsets_schemas.GROUP_METADATA_KEY
    key_text = _dumps({"type": str(key_version), "data": _json_struct(key_schema.fields, key_values, key_version)})
    if value is None:
        return key_text, "<DELETE>"
    value_version, values = offsets_schemas.decode_value(kind, value)
    if kind == offsets_schemas.OFFSET_KEY:
        data = _json_struct(offsets_schemas.OFFSET_COMMIT_VALUE.fields, values, value_version)
    else:
        data = _json_struct(offsets_schemas.GROUP_METADATA_VALUE.fields, values, value_version)
        if values.get("protocol_type") == consumer_protocol.PROTOCOL_TYPE:
            for member, raw in zip(data["members"], values["members"]):
                for name, schema in (("subscription", consumer_protocol.SUBSCRIPTION),
                                     ("assignment", consumer_protocol.ASSIGNMENT)):
                    try:
                        member[name] = _consumer_protocol_json(schema, raw[name])
                    except SchemaError:
                        pass             # not decodable: left as base64, as Kafka leaves bytes it cannot read
    return key_text, _dumps({"version": str(value_version), "data": data})


def transaction_log_parser(key, value):
    """(key text, payload text | None) of a ``__transaction_state`` record (Kafka's TransactionLogMessageParser)."""
    if key is None or len(key) < 2:
        raise SchemaError("a transaction log key shorter than its version")
    key_version = struct.unpack_from(">h", key)[0]
    transactional_id = txn_log.decode_key(key)
    key_text = _dumps({"type": str(key_version), "data": {"transactionalId": transactional_id}})
    if value is None:
        return key_text, "<DELETE>"
    value_version, values = txn_log.TRANSACTION_LOG_VALUE.decode(value)
    data = _json_struct(txn_log.TRANSACTION_LOG_VALUE.fields, values, value_version)
    status = values["transaction_status"]
    data["transactionStatus"] = TXN_STATES[status] if 0 <= status < len(TXN_STATES) else str(status)
    return key_text, _dumps({"version": str(value_version), "data": data})


def string_parser(key, value):
    """Kafka's default: key and value as UTF-8 text, malformed bytes replaced as Java replaces them (java_text.py;
    absent ones print nothing)."""
    return (None if key is None else java_string(key), None if value is None else java_string(value))


def _parse(parser, offset, key, value):
    try:
        return parser(key, value)
    except (SchemaError, ValueError, struct.error) as e:
        if key is None:
            return "Failed to decode message at offset %d (message had a missing key)" % offset, None
        return "Error at offset %d, skipping. %s" % (offset, e), None


# ------------------------------------------------------------------------------------------------ dumping
def java_string_hash(s):
    """Java's ``String.hashCode`` (int32 over UTF-16 code units)."""
    h = 0
    for unit in struct.unpack(">%dH" % (len(s.encode("utf-16-be")) // 2), s.encode("utf-16-be")):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h


def java_hash_map_order(keys):
    """``keys`` (strings, in insertion order) in the order Kafka's findings maps iterate them (measured against
    Kafka 4.4's DumpLogSegments; what a Scala 2.13 ``mutable.HashMap`` does): by bucket ``(h ^ h >>> 16) &
    (capacity - 1)`` of Java's String hash (capacity 16, doubled while size > 0.75 x capacity), and within a bucket
    the newest first (a new entry goes to the head of its bucket; a resize keeps the order)."""
    keys = list(keys)
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(k):
        h = java_string_hash(k)
        return (h ^ (h >> 16)) & (capacity - 1)
    return sorted(reversed(keys), key=bucket)   # sorted() is stable: newest first within a bucket


class Findings:
    """What the index verifications found, printed on stderr after every file (Kafka's order: its maps are hash maps
    keyed by path, hence ``java_hash_map_order``)."""

    def __init__(self):
        self.index_mismatches = {}        # abs path -> [(index offset, log offset)]
        self.time_mismatches = {}         # abs path -> [(index ts, log ts)]
        self.out_of_order = {}            # abs path -> [(index ts, previous ts)]
        self.shallow_not_found = {}       # abs path -> [(index offset, log offset)]
        self.non_consecutive = {}         # abs path -> [(a, b)]
        self.failed = False

    def print(self, err):
        for path, pairs in _ordered(self.index_mismatches):
            print("Mismatches in :%s" % path, file=err)
            for idx, got in pairs:
                print("  Index offset: %d, log offset: %d" % (idx, got), file=err)
        for path, pairs in _ordered(self.time_mismatches):
            print("Found timestamp mismatch in :%s" % path, file=err)
            for idx, got in pairs:
                print("  Index timestamp: %d, log timestamp: %d" % (idx, got), file=err)
        for path, pairs in _ordered(self.out_of_order):
            print("Found out of order timestamp in :%s" % path, file=err)
            for idx, prev in pairs:
                print("  Index timestamp: %d, Previously indexed timestamp: %d" % (idx, prev), file=err)
        for path, pairs in _ordered(self.shallow_not_found):
            print("The following indexed offsets are not found in :%s" % path, file=err)
            for idx, got in pairs:
                print("Indexed offset: %d, found log offset: %d" % (idx, got), file=err)
        for path, pairs in _ordered(self.non_consecutive):
            print("Non-consecutive offsets in %s" % path, file=err)
            for a, b in pairs:
                print("  %d is followed by %d" % (a, b), file=err)


def _ordered(by_path):
    return [(path, by_path[path]) for path in java_hash_map_order(by_path)]


def _opt(flag, value):
    return "OptionalLong[%d]" % value if flag else "OptionalLong.empty"


def _timestamp_type(head):
    return "LogAppendTime" if head.timestamp_type == LOG_APPEND_TIME else "CreateTime"


def batch_line(data, pos, head):
    """Kafka's printBatchLevel line for the v2 batch at ``data[pos]`` (``pos`` is also the printed position)."""
    valid = compute_crc(data, pos, head.size) == head.crc
    horizon = head.attributes & ATTR_DELETE_HORIZON
    return ("baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d producerId: %d "
            "producerEpoch: %d partitionLeaderEpoch: %d isTransactional: %s isControl: %s deleteHorizonMs: %s "
            "position: %d %s: %d size: %d magic: %d compresscodec: %s crc: %d isvalid: %s" % (
                head.base_offset, head.last_offset, head.records_count, head.base_sequence,
                last_sequence(head.base_sequence, head.last_offset_delta), head.producer_id, head.producer_epoch,
                head.partition_leader_epoch, _bool(head.is_transactional), _bool(head.is_control),
                _opt(horizon, head.base_timestamp), pos, _timestamp_type(head), head.max_timestamp, head.size,
                head.magic, CODEC_NAMES.get(head.codec, "unknown(%d)" % head.codec), head.crc, _bool(valid)))


def _bool(b):
    return "true" if b else "false"


def _sequence(head, offset):
    if head.base_sequence < 0:
        return -1
    return last_sequence(head.base_sequence, offset - head.base_offset)


def record_line(head, record, opts, parser):
    offset, ts, key, value, headers = record
    out = RECORD_INDENT + " "
    sep = ""
    if not opts.skip_record_metadata:
        out += "offset: %d %s: %d keySize: %d valueSize: %d sequence: %d headerKeys: [%s]" % (
            offset, _timestamp_type(head), ts, -1 if key is None else len(key), -1 if value is None else len(value),
            _sequence(head, offset), ",".join(k for k, _v in headers))
        sep = " "
        if head.is_control:
            kind = control_type(key) if key is not None and len(key) >= 4 else None
            if kind in (0, 1) and value is not None and len(value) >= _CONTROL_VALUE.size:
                out += " endTxnMarker: %s coordinatorEpoch: %d" % ("COMMIT" if kind == 1 else "ABORT",
                                                                   _CONTROL_VALUE.unpack_from(value)[1])
            else:
                out += " controlType: UNKNOWN(%s)" % kind
    if opts.print_data_log and not head.is_control:
        k, v = _parse(parser, offset, key, value)
        if k is not None:
            out += "%skey: %s" % (sep, k)
            sep = " "
        if v is not None:
            out += " payload: %s" % v
    return out


def dump_log(path, opts, parser, findings, out):
    print("Log starting offset: %d" % _base_offset(path), file=out)
    lf = LogFile(path, opts.max_bytes)
    data = lf.data
    last = -1
    valid_bytes = 0
    consecutive = []
    for pos, head in lf.batches():
        print(batch_line(data, pos, head), file=out)
        if opts.deep_iteration:
            try:
                records = batch_records(data, pos, head, max(opts.max_message_size, 64 << 20))
            except Exception as e:  # noqa: BLE001 - a corrupt batch: say so, go on with the next one
                print("%s failed to decode the records of the batch at position %d: %s" % (RECORD_INDENT, pos, e),
                      file=out)
                records = []
            for record in records:
                if record[0] != last + 1:
                    consecutive.append((last, record[0]))
                last = record[0]
                print(record_line(head, record, opts, parser), file=out)
        valid_bytes = pos + head.size
    if consecutive:
        findings.non_consecutive[os.path.abspath(path)] = consecutive
    trailing = len(data) - valid_bytes
    if trailing > 0 and opts.max_bytes >= INT_MAX:
        print("Found %d invalid bytes at the end of %s" % (trailing, os.path.basename(path)), file=out)


def _offset_sanity(path, entries, length, base):
    if entries and base + entries[-1][0] < base:
        return "Corrupt index found, index file (%s) has non-zero size but the last offset is %d which is less " \
               "than the base offset %d" % (os.path.abspath(path), base + entries[-1][0], base)
    if length % _OFFSET_ENTRY.size:
        return "Index file %s is corrupt, found %d bytes which is neither positive nor a multiple of %d" % (
            os.path.abspath(path), length, _OFFSET_ENTRY.size)
    return None


def _time_sanity(path, entries, length, base):
    if entries and entries[-1][0] < entries[0][0]:
        return "Corrupt time index found, time index file (%s) has non-zero size but the last timestamp is %d " \
               "which is less than the first timestamp %d" % (os.path.abspath(path), entries[-1][0], entries[0][0])
    if entries and base + entries[-1][1] < base:
        return "Corrupt time index found, time index file (%s) has non-zero size but the last offset is %d which " \
               "is less than the first offset %d" % (os.path.abspath(path), base + entries[-1][1], base)
    if length % _TIME_ENTRY.size:
        return "Time index file %s is corrupt, found %d bytes which is neither positive nor a multiple of %d" % (
            os.path.abspath(path), length, _TIME_ENTRY.size)
    return None


def _sanity(path, error, findings, out):
    if error is None:
        print("%s passed sanity check." % path, file=out)
    else:
        print("%s failed sanity check: %s" % (path, error), file=out)
        findings.failed = True


def dump_index(path, opts, findings, out):
    base = _base_offset(path)
    entries, length = _index_entries(path, _OFFSET_ENTRY)
    if not entries:
        print("%s is empty." % path, file=out)
        return
    if opts.index_sanity_check:
        _sanity(path, _offset_sanity(path, entries, length, base), findings, out)
        return
    lf = LogFile(_sibling(path, ".log"))
    mismatches = []
    for i, (rel, position) in enumerate(entries):
        offset = base + rel
        if offset == base and i > 0:
            break                   # the zero-filled tail of a preallocated index that was not trimmed (crash)
        head = lf.first_batch_at(position, opts.max_message_size)
        found = head.last_offset if head is not None else -1
        if found != offset:
            mismatches.append((offset, found))
        if not opts.verify_index_only:
            print("offset: %d position: %d" % (offset, position), file=out)
    if mismatches:
        findings.index_mismatches[os.path.abspath(path)] = mismatches


def _offset_lookup(entries, base, target):
    """Kafka's OffsetIndex.lookup: the position of the largest entry at or below ``target``, else 0."""
    position = 0
    for rel, pos in entries:
        if base + rel > target:
            break
        position = pos
    return position


def dump_time_index(path, opts, findings, out):
    base = _base_offset(path)
    entries, length = _index_entries(path, _TIME_ENTRY)
    if opts.index_sanity_check:
        _sanity(path, _time_sanity(path, entries, length, base), findings, out)
        return
    lf = LogFile(_sibling(path, ".log"))
    try:
        offsets, _len = _index_entries(_sibling(path, ".index"), _OFFSET_ENTRY)
    except FileNotFoundError:
        offsets = []
    apath = os.path.abspath(path)
    prev = -1
    for i, (ts, rel) in enumerate(entries):
        offset = base + rel
        if offset == base and i > 0:
            break
        position = _offset_lookup(offsets, base, offset)
        match = next(((p, h) for p, h in lf.batches(position) if h.last_offset >= offset), None)
        if match is None:
            findings.shallow_not_found.setdefault(apath, []).append((offset, -1))
        elif match[1].last_offset != offset:
            findings.shallow_not_found.setdefault(apath, []).append((offset, match[1].last_offset))
        else:
            p, head = match
            records = batch_records(lf.data, p, head, max(opts.max_message_size, 64 << 20))
            max_ts = max((r[1] for r in records), default=-1)
            if max_ts != ts:
                findings.time_mismatches.setdefault(apath, []).append((ts, max_ts))
            if prev >= ts:
                findings.out_of_order.setdefault(apath, []).append((ts, prev))
        if not opts.verify_index_only:
            print("timestamp: %d offset: %d" % (ts, offset), file=out)
        prev = ts


def dump_txn_index(path, out):
    with open(path, "rb") as f:
        data = f.read()
    for i in range(len(data) // TXN_ENTRY_SIZE):
        version, pid, first, last, lso = TXN_ENTRY.unpack_from(data, i * TXN_ENTRY_SIZE)
        print("version: %d producerId: %d firstOffset: %d lastOffset: %d lastStableOffset: %d"
              % (version, pid, first, last, lso), file=out)


def dump_snapshot(path, out):
    for e in producer_snapshot.read(path):
        line = "producerId: %d producerEpoch: %d coordinatorEpoch: %d currentTxnFirstOffset: %s lastTimestamp: %d" % (
            e.producer_id, e.producer_epoch, e.coordinator_epoch,
            _opt(e.current_txn_first_offset >= 0, e.current_txn_first_offset), e.timestamp)
        if e.last_sequence >= 0:
            line += " firstSequence: %d lastSequence: %d lastOffset: %d offsetDelta: %d timestamp: %d" % (
                e.last_sequence - e.offset_delta, e.last_sequence, e.last_offset, e.offset_delta, e.timestamp)
        print(line, file=out)


# ------------------------------------------------------------------------------------------------ command line
def parser():
    p = ArgParser(prog="kbroker-admin dump-log", description="Print the contents of Kafka log, index, transaction "
                                                             "index and producer snapshot files (kafka-dump-log.sh).")
    p.add_argument("--files", required=True, help="REQUIRED: the comma separated list of data and index log files "
                                                  "to be dumped")
    p.add_argument("--print-data-log", action="store_true", help="print the messages' content (implies "
                                                                 "--deep-iteration)")
    p.add_argument("--deep-iteration", action="store_true", help="iterate over the records of every batch")
    p.add_argument("--verify-index-only", action="store_true", help="verify the indexes without printing them")
    p.add_argument("--index-sanity-check", action="store_true", help="only check the indexes' sanity (what the "
                                                                     "broker checks at startup)")
    p.add_argument("--offsets-decoder", action="store_true", help="decode __consumer_offsets records")
    p.add_argument("--transaction-log-decoder", action="store_true", help="decode __transaction_state records")
    p.add_argument("--max-message-size", type=int, default=DEFAULT_MAX_MESSAGE_SIZE,
                   help="size of the largest message (default 5242880)")
    p.add_argument("--max-bytes", type=int, default=INT_MAX, help="read at most this many bytes of a .log file")
    p.add_argument("--skip-record-metadata", action="store_true", help="print no record metadata, only the data")
    return p


def run(opts, out=None, err=None):
    """Dump every file of ``opts.files``; returns the exit status."""
    out = out or sys.stdout
    err = err or sys.stderr
    opts.print_data_log = opts.print_data_log or opts.offsets_decoder or opts.transaction_log_decoder
    opts.deep_iteration = opts.deep_iteration or opts.print_data_log
    record_parser = (offsets_parser if opts.offsets_decoder
                     else transaction_log_parser if opts.transaction_log_decoder else string_parser)
    findings = Findings()
    status = 0
    for path in [f for f in opts.files.split(",") if f]:
        print("Dumping %s" % path, file=out)
        try:
            if path.endswith(".log"):
                dump_log(path, opts, record_parser, findings, out)
            elif path.endswith(".index"):
                dump_index(path, opts, findings, out)
            elif path.endswith(".timeindex"):
                dump_time_index(path, opts, findings, out)
            elif path.endswith(".txnindex"):
                dump_txn_index(path, out)
            elif path.endswith(".snapshot"):
                dump_snapshot(path, out)
            else:
                print("Ignoring unknown file %s" % path, file=err)
        except Exception as e:  # noqa: BLE001 - a file that cannot be read or named is reported, the others go on
            print("Error dumping %s: %s" % (path, e), file=err)
            status = 1
    findings.print(err)
    return 1 if findings.failed else status


def main(argv):
    opts, code = parse_command_line(parser(), argv)
    return code if opts is None else run(opts)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

