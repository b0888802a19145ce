"""``kbroker-admin dump-log`` (kafka-dump-log.sh) on a real broker's own files after a mixed workload: every codec,
a committed and an aborted transaction (markers, ``.txnindex``, producer snapshots), a compacted topic after the
cleaner ran, consumer-group commits and a group's membership (``__consumer_offsets``), the transaction log
(``__transaction_state``), a deleted group's tombstones.

Shown without Kafka: every batch printed once, its CRC valid, the records' offsets exactly the log's (consecutive
0..LEO-1 where nothing was compacted away; the compacted topic's gaps reported on stderr), each codec's batch
decompressed to the values written, the markers and the aborted transaction's index entry, the decoders' JSON (the
committed offset, the group's decoded subscription, the transaction states in order, tombstones as <DELETE>); a
hand-corrupted offset index and time index flagged (Kafka's "Mismatches in" / "Found timestamp mismatch in"
lines), a torn index failing --index-sanity-check (exit 1).
With Kafka's jars (tests/kafka_tools; always under CI): Kafka 4.4's DumpLogSegments prints the same stdout and
stderr, byte for byte, for every option, on the same files.
"""
import io
import json
import os
import re
import shutil
import struct
import subprocess

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kbroker.cli import dump_log
from tests.integration.harness import BrokerProcess, wait_until
from tests.kafka_tools import JVM_FLAGS, MAIN, classpath

pytestmark = pytest.mark.timeout(240)

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
BATCH = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .* isTransactional: (\w+) isControl: (\w+) "
                   r".* compresscodec: (\w+) crc: (\d+) isvalid: (\w+)$")
RECORD = re.compile(r"^\| offset: (\d+) CreateTime: \d+ keySize: (-?\d+) valueSize: (-?\d+) ")


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """The log dir of a broker that ran the workload and shut down cleanly."""
    base = tmp_path_factory.mktemp("dump_log")
    b = BrokerProcess(base, overrides={
        "offsets.topic.num.partitions": 1, "offsets.topic.replication.factor": 1,
        "transaction.state.log.num.partitions": 1, "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1, "log.cleaner.backoff.ms": 100})
    b.start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in admin.create_topics([
                NewTopic("mixed", 1, 1, config={"index.interval.bytes": "100"}),
                NewTopic("appendtime", 1, 1, config={"message.timestamp.type": "LogAppendTime"}),
                NewTopic("compacted", 1, 1, config={"cleanup.policy": "compact", "segment.bytes": "2000",
                                                    "min.cleanable.dirty.ratio": "0.01",
                                                    "min.compaction.lag.ms": "0"})]).values():
            f.result(30)
        for codec in CODECS:
            p = Producer({"bootstrap.servers": b.bootstrap, "compression.type": codec, "linger.ms": 100})
            for i in range(5):
                p.produce("mixed", key=b"k%d" % i if i % 2 else None, value=(b"%s-%d-" % (codec.encode(), i)) * 20,
                          headers=[("h1", b"a"), ("h2", None)] if i == 1 else None)
            assert p.flush(30) == 0
        p = Producer({"bootstrap.servers": b.bootstrap, "compression.type": "gzip", "linger.ms": 100})
        for i in range(3):
            # 420 repetitive bytes: gzip always shrinks them, so even a batch librdkafka closes with one record
            # stays gzip (it sends a batch uncompressed when compression would make it bigger)
            p.produce("appendtime", key=b"a%d" % i, value=b"stamped by the broker " * 20, timestamp=1000 + i)
        assert p.flush(30) == 0
        tp = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "dump-tx"})
        tp.init_transactions(30)
        tp.begin_transaction()
        tp.produce("mixed", b"committed-1")
        tp.produce("mixed", b"committed-2")
        tp.commit_transaction(30)
        tp.begin_transaction()
        tp.produce("mixed", b"aborted-1")
        tp.flush(30)
        tp.abort_transaction(30)
        p = Producer({"bootstrap.servers": b.bootstrap})
        for r in range(30):
            for k in range(5):
                p.produce("compacted", key=b"key%d" % k, value=b"round-%d" % r)
            p.flush(30)
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g1", "enable.auto.commit": False})
        c.assign([TopicPartition("mixed", 0, 0)])
        got = 0
        while got < 10:
            m = c.poll(5)
            got += m is not None and not m.error()
        c.commit(asynchronous=False)
        c.close()
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g2", "auto.offset.reset": "earliest",
                      "enable.auto.commit": False})
        c.subscribe(["mixed"])
        got = 0
        while got < 5:
            m = c.poll(5)
            got += m is not None and not m.error()
        c.commit(asynchronous=False)
        c.close()
        admin.delete_consumer_groups(["g1"])["g1"].result(30)
        compacted = os.path.join(str(b.log_dir), "compacted-0")
        wait_until(lambda: os.path.exists(os.path.join(str(b.log_dir), "cleaner-offset-checkpoint"))
                   and "compacted 0" in open(os.path.join(str(b.log_dir), "cleaner-offset-checkpoint")).read(), 30,
                   message="the cleaner compacted %s" % compacted)
    finally:
        b.stop()
    return str(b.log_dir)


def run(*args):
    out, err = io.StringIO(), io.StringIO()
    opts = dump_log.parser().parse_args(list(args))
    code = dump_log.run(opts, out, err)
    return code, out.getvalue(), err.getvalue()


def files(logs, partition, suffixes=(".log", ".index", ".timeindex", ".txnindex", ".snapshot")):
    d = os.path.join(logs, partition)
    return [os.path.join(d, n) for n in sorted(os.listdir(d)) if n.endswith(suffixes)]


def batches(out):
    return [m.groups() for m in map(BATCH.match, out.splitlines()) if m]


def test_every_batch_and_record_of_the_mixed_log_with_crc_validity(logs):
    (log,) = files(logs, "mixed-0", (".log",))
    code, out, err = run("--files", log, "--print-data-log")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[:2] == ["Dumping %s" % log, "Log starting offset: 0"]
    bs = batches(out)
    assert all(valid == "true" for *_x, valid in bs)
    codecs = [codec for _b, _l, _c, txn, ctl, codec, _crc, _v in bs if txn == "false"]
    # one producer per codec, in order (librdkafka may send a producer's five records in more than one batch)
    assert [c for i, c in enumerate(codecs) if i == 0 or codecs[i - 1] != c] == list(CODECS)
    offsets = [int(m.group(1)) for m in map(RECORD.match, lines) if m]
    assert offsets == list(range(30))                             # 25 plain + 2 committed + marker + 1 + marker
    assert sum(int(c) for _b, _l, c, *_r in bs) == 30
    for codec in CODECS:
        for i in range(5):
            assert any(ln.endswith(" payload: " + ("%s-%d-" % (codec, i)) * 20) for ln in lines), (codec, i)
    assert sum("headerKeys: [h1,h2] key: k1 payload: " in ln for ln in lines) == 5
    markers = [ln.split("endTxnMarker: ")[1] for ln in lines if "endTxnMarker" in ln]
    assert markers == ["COMMIT coordinatorEpoch: 0", "ABORT coordinatorEpoch: 0"]
    txn = [(int(b[0]), int(b[1]), b[4]) for b in bs if b[3] == "true"]
    assert [(first, last) for first, last, control in txn if control == "true"] == [(27, 27), (29, 29)]
    assert [o for first, last, control in txn if control == "false" for o in range(first, last + 1)] == [25, 26, 28]
    assert all(b[3] == "false" for b in bs if int(b[1]) < 25)
    code, out, err = run("--files", ",".join(files(logs, "mixed-0", (".txnindex", ".snapshot"))))
    assert "version: 0 producerId: 0 firstOffset: 28 lastOffset: 29 lastStableOffset: 30" in out.splitlines()
    assert "producerId: 0 producerEpoch: 0 coordinatorEpoch: 0 currentTxnFirstOffset: OptionalLong.empty" in out


def test_compacted_log_gaps_and_crc(logs):
    segs = files(logs, "compacted-0", (".log",))
    code, out, err = run("--files", ",".join(segs), "--deep-iteration")
    assert code == 0
    bs = batches(out)
    assert bs and all(valid == "true" for *_x, valid in bs)
    offsets = [int(m.group(1)) for m in map(RECORD.match, out.splitlines()) if m]
    assert offsets == sorted(offsets) and offsets[-1] == 149 and len(offsets) < 150
    gaps = dict(zip(*[iter(err.splitlines())] * 2))     # one gap per segment: its first offset after "-1"
    assert set(gaps) == {"Non-consecutive offsets in %s" % os.path.abspath(s) for s in segs
                         if os.path.getsize(s) > 61 and not s.endswith("00000000000000000000.log")}
    assert all(v.startswith("  -1 is followed by ") for v in gaps.values())


def test_log_append_time(logs):
    (log,) = files(logs, "appendtime-0", (".log",))
    code, out, err = run("--files", log, "--deep-iteration")
    stamp, records = None, []
    for ln in out.splitlines():
        if ln.startswith("baseOffset:"):                          # each batch: the broker's append time
            stamp = int(ln.split(" LogAppendTime: ")[1].split()[0])
            assert stamp > 1_000_000_000_000 and "compresscodec: gzip" in ln and "isvalid: true" in ln
        elif ln.startswith("| "):
            records.append(ln.split(" keySize")[0])
            assert records[-1] == "| offset: %d LogAppendTime: %d" % (len(records) - 1, stamp)
    assert len(records) == 3


def test_decoders(logs):
    (log,) = files(logs, "__consumer_offsets-0", (".log",))
    code, out, err = run("--files", log, "--offsets-decoder")
    assert code == 0
    records = [ln for ln in out.splitlines() if ln.startswith("| ")]
    keys = [json.loads(ln.split(" key: ")[1].split(" payload: ")[0]) for ln in records]
    payloads = [ln.split(" payload: ")[1] for ln in records]
    assert keys[0] == {"type": "1", "data": {"group": "g1", "topic": "mixed", "partition": 0}}
    assert json.loads(payloads[0])["data"]["offset"] == 10
    group = [json.loads(p) for k, p in zip(keys, payloads) if k["type"] == "2" and p != "<DELETE>"][0]["data"]
    assert group["protocolType"] == "consumer"
    assert group["members"][0]["subscription"]["topics"] == ["mixed"]
    assert group["members"][0]["assignment"]["assignedPartitions"] == [{"topic": "mixed", "partitions": [0]}]
    assert payloads[-2:] == ["<DELETE>", "<DELETE>"]                # g1's offset and group tombstones
    (log,) = files(logs, "__transaction_state-0", (".log",))
    code, out, err = run("--files", log, "--transaction-log-decoder")
    states = [json.loads(ln.split(" payload: ")[1])["data"]["transactionStatus"] for ln in out.splitlines()
              if ln.startswith("| ")]
    assert states == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit", "Ongoing", "PrepareAbort",
                      "CompleteAbort"]


def test_hand_corrupted_indexes_are_flagged(logs, tmp_path):
    src = os.path.join(logs, "mixed-0")
    d = tmp_path / "mixed-0"
    shutil.copytree(src, d)
    index, timeindex = str(d / "00000000000000000000.index"), str(d / "00000000000000000000.timeindex")
    code, out, err = run("--files", index + "," + timeindex, "--verify-index-only")
    assert (code, err) == (0, "")                                   # the broker's own indexes verify
    entries = [struct.unpack_from(">ii", open(index, "rb").read(), i * 8) for i in range(3)]
    with open(index, "r+b") as f:                                   # entry 1 now points at entry 2's batch
        f.seek(8)
        f.write(struct.pack(">ii", entries[1][0], entries[2][1]))
    with open(timeindex, "r+b") as f:                               # entry 2's timestamp lowered
        ts, rel = struct.unpack(">qi", f.read(36)[24:36])
        f.seek(24)
        f.write(struct.pack(">qi", ts - 5000, rel))
    code, out, err = run("--files", index + "," + timeindex, "--verify-index-only")
    assert out == "Dumping %s\nDumping %s\n" % (index, timeindex)
    lines = err.splitlines()
    assert lines[:2] == ["Mismatches in :%s" % index, "  Index offset: %d, log offset: %d" % (entries[1][0],
                                                                                                entries[2][0])]
    assert "Found timestamp mismatch in :%s" % timeindex in lines
    assert "  Index timestamp: %d, log timestamp: %d" % (ts - 5000, ts) in lines
    assert "Found out of order timestamp in :%s" % timeindex in lines
    log = str(d / "00000000000000000000.log")
    first = batches(run("--files", log)[1])
    flip_record_byte(log)
    assert [b[-1] for b in batches(run("--files", log)[1])] == ["true", "false"] + ["true"] * (len(first) - 2)
    with open(index, "r+b") as f:
        f.truncate(20)
    code, out, err = run("--files", index, "--index-sanity-check")
    assert code == 1
    assert out.splitlines()[1] == ("%s failed sanity check: Index file %s is corrupt, found 20 bytes which is "
                                   "neither positive nor a multiple of 8" % (index, index))


def flip_record_byte(log):
    """Invert one byte of the second batch's records: a CRC mismatch, nothing else. In a compressed batch any byte
    of the compressed records past the 61-byte header does (9 bytes in); in an uncompressed one -- librdkafka
    sometimes sends the first record alone, and the next four go uncompressed -- the byte is taken in the middle of
    the first record's value: 9 bytes in was a length varint there (CI: both tools reported a malformed record,
    Kafka with a stack trace)."""
    from kbroker._native import decode_varint
    with open(log, "r+b") as f:
        data = f.read()
        second = 12 + struct.unpack_from(">i", data, 8)[0]
        at = second + 70
        if not struct.unpack_from(">h", data, second + 21)[0] & 0x7:    # attributes: codec none
            _length, pos = decode_varint(data, second + 61)     # the first record: its length,
            _ts_delta, pos = decode_varint(data, pos + 1)        # (attributes: 1 byte) timestamp delta,
            _offset_delta, pos = decode_varint(data, pos)        # offset delta, key, value
            key_len, pos = decode_varint(data, pos)
            value_len, pos = decode_varint(data, pos + max(key_len, 0))
            assert value_len > 0, value_len
            at = pos + value_len // 2
        f.seek(at)
        f.write(bytes([data[at] ^ 0xFF]))


OPTION_SETS = [(), ("--deep-iteration",), ("--print-data-log",), ("--verify-index-only",), ("--index-sanity-check",)]


def test_same_output_as_kafkas_dump_log_segments(logs, tmp_path):
    cp = classpath()                                                # skips (fails under CI) without Kafka's jars
    every = [f for part in ("mixed-0", "compacted-0", "appendtime-0", "__consumer_offsets-0", "__transaction_state-0")
             for f in files(logs, part)]
    cases = [(every, opts) for opts in OPTION_SETS]
    cases.append((files(logs, "__consumer_offsets-0", (".log",)), ("--offsets-decoder",)))
    cases.append((files(logs, "__transaction_state-0", (".log",)), ("--transaction-log-decoder",)))
    corrupt = tmp_path / "c"
    shutil.copytree(os.path.join(logs, "mixed-0"), corrupt)
    with open(corrupt / "00000000000000000000.index", "r+b") as f:
        f.seek(12)
        f.write(struct.pack(">i", 0))                                # entry 1's position: the first batch
    flip_record_byte(str(corrupt / "00000000000000000000.log"))
    cases.append(([str(corrupt / "00000000000000000000.index"), str(corrupt / "00000000000000000000.timeindex"),
                   str(corrupt / "00000000000000000000.log")], ("--deep-iteration",)))
    for paths, opts in cases:                                      # one JVM per case: ~1 s each
        # bytes, decoded without newline translation: text=True would turn a 0x0d inside a printed payload (a
        # timestamp's byte, so it depends on the clock) into "\n" and fail the comparison one run in ~50
        java = subprocess.run(["java", *JVM_FLAGS, "-cp", cp, MAIN, "--files", ",".join(paths), *opts],
                              capture_output=True, timeout=120)
        jout, jstderr = java.stdout.decode("utf-8"), java.stderr.decode("utf-8")
        code, out, err = run("--files", ",".join(paths), *opts)
        jerr = "".join(ln + "\n" for ln in jstderr.split("\n")[:-1] if "SLF4J" not in ln)
        assert (out, err) == (jout, jerr), (paths, opts)


def test_unreadable_files_are_reported_and_the_others_dumped(logs, tmp_path):
    bad = tmp_path / "00000000000000000000.snapshot"
    bad.write_bytes(b"garbage")
    (txn,) = files(logs, "mixed-0", (".txnindex",))
    code, out, err = run("--files", ",".join([str(tmp_path / "nosuch.log"), str(bad), txn]))
    assert code == 1
    assert out.splitlines()[-2:] == ["Dumping %s" % txn,
                                     "version: 0 producerId: 0 firstOffset: 28 lastOffset: 29 lastStableOffset: 30"]
    assert [ln.split(":")[0] for ln in err.splitlines()] == ["Error dumping %s" % (tmp_path / "nosuch.log"),
                                                             "Error dumping %s" % bad]
