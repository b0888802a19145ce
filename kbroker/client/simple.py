"""SimpleClient: produce one v2 batch to a partition, fetch records from partitions. No groups, no idempotence.

Produce needs v3+ (the first version carrying record batches v2) and Fetch v4+ (the first returning v2 batches
undown-converted; older answers would be magic 0/1 message sets). Fetch is capped at v12, the last version naming
topics instead of topic ids. Requests go to the partition leader from Metadata; a leader change
(NOT_LEADER_OR_FOLLOWER 6, LEADER_NOT_AVAILABLE 5) refreshes the metadata once and retries once.

Fetch results: ``FetchResult(records, next_offset, high_watermark, error_code)`` per partition, where ``records``
are ``FetchedRecord(offset, timestamp, key, value, headers, timestamp_type)`` tuples at or after the requested
offset (a compressed batch may start before it), and ``next_offset`` is one past the last complete batch returned (control batches included, so
a consumer never re-reads a transaction marker), or the requested offset when nothing came back. A trailing
partial batch (cut by ``max_bytes``) is ignored and fetched again next time.
"""
import time
from collections import namedtuple

from kbroker import errors
from kbroker.client.admin import list_offsets
from kbroker.client.cluster import Cluster, raise_for_code
from kbroker.client.connection import resolve_api
from kbroker.record import batch_records, build_batch, iter_batches

FetchResult = namedtuple("FetchResult", "records next_offset high_watermark error_code")
# (offset, timestamp, key, value, headers) -- the record facade's tuple -- plus the batch's timestamp type
# (0 CreateTime, 1 LogAppendTime) so tools can print "CreateTime:<ts>" like Kafka's formatter.
FetchedRecord = namedtuple("FetchedRecord", "offset timestamp key value headers timestamp_type")
ProduceResult = namedtuple("ProduceResult", "error_code base_offset error_message")

PRODUCE_MIN_VERSION = 3
FETCH_MIN_VERSION = 4
FETCH_MAX_VERSION = 12

_RETRY_CODES = (errors.NOT_LEADER_OR_FOLLOWER, errors.LEADER_NOT_AVAILABLE)


def make_batch(records, codec=0, now_ms=None):
    """One v2 batch (offsets 0..n-1, CreateTime now) from values, (key, value) or (key, value, headers) items."""
    ts = int(time.time() * 1000) if now_ms is None else now_ms
    recs = []
    for i, r in enumerate(records):
        if isinstance(r, (bytes, bytearray, memoryview)) or r is None:
            key, value, headers = None, r, ()
        else:
            key, value = r[0], r[1]
            headers = r[2] if len(r) > 2 else ()
        recs.append((i, ts, key, value, tuple(headers)))
    return build_batch(recs, codec=codec)


class SimpleClient:
    def __init__(self, bootstrap, client_id="kbroker-console", timeout=30):
        self.cluster = Cluster(bootstrap, client_id=client_id, timeout=timeout)

    def close(self):
        self.cluster.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------------------------------ metadata

    def partitions_for(self, topic, refresh=False, allow_auto_topic_creation=False):
        return self.cluster.partitions_for(topic, refresh, allow_auto_topic_creation)

    def leader_for(self, topic, partition, refresh=False):
        return self.cluster.leader_for(topic, partition, refresh)

    def list_offsets(self, topic, timestamps):
        return list_offsets(self.cluster, topic, timestamps)

    def _version(self, conn, name, lo, hi=None):
        api = resolve_api(name)
        v = conn.pick_version(api, hi)
        if v < lo:
            raise errors.UnsupportedVersion("%s v%d+ needed, broker %s:%d offers at most v%d"
                                            % (name, lo, conn.host, conn.port, v))
        return v

    # ------------------------------------------------------------------------------------------ produce

    def produce(self, topic, partition, records, acks=1, codec=0, timeout_ms=30000):
        """Append ``records`` as one batch; returns the base offset (-1 with acks=0). Raises KafkaError."""
        res = self.produce_batches(topic, {partition: make_batch(records, codec)}, acks, timeout_ms)
        r = res[partition]
        raise_for_code(r.error_code, r.error_message, "producing to %s-%d" % (topic, partition))
        return r.base_offset

    def produce_batches(self, topic, batches, acks=1, timeout_ms=30000):
        """``batches``: {partition: v2 batch bytes} -> {partition: ProduceResult}; one request per leader.

        Partitions whose leader moved are retried once after a metadata refresh; other errors are returned."""
        results = self._produce_once(topic, batches, acks, timeout_ms)
        retry = {p: batches[p] for p, r in results.items() if r.error_code in _RETRY_CODES}
        if retry:
            self.cluster.partitions_for(topic, refresh=True)
            results.update(self._produce_once(topic, retry, acks, timeout_ms))
        return results

    def _produce_once(self, topic, batches, acks, timeout_ms):
        results = {}
        by_leader = {}
        for p, b in batches.items():
            try:
                by_leader.setdefault(self.cluster.leader_for(topic, p), {})[p] = b
            except errors.KafkaError as e:
                results[p] = ProduceResult(e.code, -1, e.message)
        for leader, parts in by_leader.items():
            conn = self.cluster.connection(leader)
            version = self._version(conn, "Produce", PRODUCE_MIN_VERSION)
            body = {"transactional_id": None, "acks": acks, "timeout_ms": timeout_ms,
                    "topic_data": [{"name": topic, "partition_data": [
                        {"index": p, "records": b} for p, b in sorted(parts.items())]}]}
            resp = conn.request("Produce", body, version=version, expect_response=acks != 0)
            if resp is None:
                results.update((p, ProduceResult(0, -1, None)) for p in parts)
                continue
            for t in resp["responses"]:
                for pr in t["partition_responses"]:
                    results[pr["index"]] = ProduceResult(pr["error_code"], pr["base_offset"], pr["error_message"])
        return results

    # ------------------------------------------------------------------------------------------ fetch

    def fetch(self, topic, partition, offset, max_bytes=1 << 20, max_wait_ms=500):
        """Records of ``topic``-``partition`` from ``offset``; raises the partition's error (e.g. OFFSET_OUT_OF_RANGE
        when ``offset`` is outside the log)."""
        r = self.fetch_many(topic, {partition: offset}, max_bytes, max_wait_ms)[partition]
        raise_for_code(r.error_code, None, "fetching %s-%d at offset %d" % (topic, partition, offset))
        return r.records

    def fetch_many(self, topic, offsets, max_bytes=50 << 20, max_wait_ms=500, partition_max_bytes=1 << 20):
        """``offsets``: {partition: fetch offset} -> {partition: FetchResult}; one Fetch per leader (sequential, so
        with several leaders the waits add up -- fine for tools, wrong for a real consumer)."""
        results = {}
        by_leader = {}
        for p, off in offsets.items():
            try:
                by_leader.setdefault(self.cluster.leader_for(topic, p), {})[p] = off
            except errors.KafkaError as e:
                results[p] = FetchResult([], off, -1, e.code)
        for leader, parts in by_leader.items():
            results.update(self._fetch_from(leader, topic, parts, max_bytes, max_wait_ms, partition_max_bytes))
        if any(r.error_code in _RETRY_CODES for r in results.values()):
            self.cluster.partitions_for(topic, refresh=True)
        return results

    def _fetch_from(self, leader, topic, parts, max_bytes, max_wait_ms, partition_max_bytes):
        conn = self.cluster.connection(leader)
        version = self._version(conn, "Fetch", FETCH_MIN_VERSION, FETCH_MAX_VERSION)
        body = {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": max_bytes,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": topic, "partitions": [
                    {"partition": p, "fetch_offset": off, "partition_max_bytes": partition_max_bytes}
                    for p, off in sorted(parts.items())]}],
                "forgotten_topics_data": [], "rack_id": ""}
        # The socket timeout must outlast the broker's long poll.
        conn.sock.settimeout(max(conn.timeout, max_wait_ms / 1000.0 + 10))
        resp = conn.request("Fetch", body, version=version)
        out = {}
        for t in resp["responses"]:
            for pd in t["partitions"]:
                p = pd["partition_index"]
                start = parts.get(p, 0)
                if pd["error_code"]:
                    out[p] = FetchResult([], start, pd["high_watermark"], pd["error_code"])
                    continue
                data = pd["records"] or b""
                next_offset = start
                recs = []
                for pos, h in iter_batches(data, include_control=True):
                    next_offset = max(next_offset, h.last_offset + 1)
                    if h.is_control or h.last_offset < start:
                        continue
                    recs += [FetchedRecord(*r, h.timestamp_type) for r in batch_records(data, pos, h) if r[0] >= start]
                out[p] = FetchResult(recs, next_offset, pd["high_watermark"], 0)
        return out
