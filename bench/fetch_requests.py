#!/usr/bin/env python3
"""The brokers' consume path without a client's per-record cost: raw Fetch requests, kbroker / Kafka / Tansu.

    python bench/fetch_requests.py                               # 1 KB and 100 B records, the three brokers
    python bench/fetch_requests.py --sizes 100 --brokers kbroker,tansu --fill-mb 200 --rounds 5
    python bench/fetch_requests.py --repo /tmp/before-X          # kbroker from another tree (before/after)

Why (issue 15, target 1: "consume throughput >= 2x Tansu at 1 KB and at 100 B"): with a real client the 100 B
figure is the client's. bench_clients.py's unpaused Python consumer reads 1.2-1.6M records/s, about one core on this
2-core machine, from each of the three brokers alike (docs/performance.md, session 16), and the Java client reads
nothing from Tansu. Here the consumer is a loop that does what every client does on the wire and nothing per
record: one Fetch in flight (as librdkafka and the Java client keep per broker), librdkafka's default sizes
(``fetch.max.bytes`` 50 MiB, ``max.partition.fetch.bytes`` 1 MiB, ``fetch.wait.max.ms`` 500, ``fetch.min.bytes``
1), and the next offset taken from the batch headers. So the broker decides the rate, and the ratio compares
brokers.

How: each broker (bench/peers.py) gets one topic per record size, ``--partitions`` partitions, filled through
confluent-kafka with bench_clients.py's producer settings (acks=all, linger.ms 5: the batches a real producer
makes). A round reads every partition from offset 0 to its end ``--passes`` times, over one socket (all partitions in each
request, as a consumer assigned them would ask). Fetch v11 for every broker: the last version that names topics
(v13 asks by topic id) and one every broker here answers. Every response is checked: error code 0 on every
partition, each partition's batches contiguous from the offset asked (a batch may start before it: the client
skips the records below, as clients do), and the records counted from the batch headers (v2: base offset at byte
0, length at 8, magic at 16, last offset delta at 23, record count at 57) must total exactly what was produced.
A round's figures: payload MB/s (records x value size / wall time), records/s, broker CPU (utime + stime of the
process) per payload GB, and the client's CPU (so a client-bound round shows). ``--rounds`` alternate the brokers;
medians are printed with the ratios kbroker / Kafka and kbroker / Tansu, and written as JSON to bench/results/.
"""
import argparse
import json
import os
import socket
import statistics
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_clients as bc  # noqa: E402
import peers  # noqa: E402

import confluent_kafka as ck  # noqa: E402

FETCH_VERSION = 11
MAX_BYTES = 50 * 1024 * 1024          # librdkafka fetch.max.bytes
PARTITION_MAX_BYTES = 1024 * 1024     # librdkafka max.partition.fetch.bytes
MAX_WAIT_MS = 500                     # librdkafka fetch.wait.max.ms
_BATCH_HEAD = struct.Struct(">qi")    # base offset, batch length (bytes after this field: 12 + length in all)
_I32 = struct.Struct(">i")


def fill(broker, topic, partitions, size, count):
    """Produce ``count`` records of ``size`` bytes round-robin over the partitions; every one acknowledged."""
    value = os.urandom(size)
    failed = []
    p = ck.Producer(dict(bc.producer_conf(broker, 5), on_delivery=lambda err, msg: err and failed.append(err),
                         **{"delivery.report.only.error": True}))
    for i in range(count):
        while True:
            try:
                p.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
    left = p.flush(120)
    if left or failed:
        raise RuntimeError("%s: %d records not acknowledged, %d failed (%s)" % (broker.kind, left, len(failed),
                                                                               failed[:1]))


class RawFetcher:
    """One socket, one Fetch in flight; ``read_all`` walks every partition from offset 0 to ``ends``."""

    def __init__(self, port):
        from kbroker.protocol.apis import APIS
        from kbroker.protocol.headers import encode_request_header
        self.api = APIS[1]
        self.header = encode_request_header
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray(MAX_BYTES + (1 << 20))
        self.corr = 0

    def _request(self, topic, offsets):
        from kbroker.protocol.schema import Writer
        self.corr += 1
        req = {"replica_id": -1, "max_wait_ms": MAX_WAIT_MS, "min_bytes": 1, "max_bytes": MAX_BYTES,
               "isolation_level": 0, "session_id": 0, "session_epoch": -1,
               "topics": [{"topic": topic, "partitions": [
                   {"partition": p, "current_leader_epoch": -1, "fetch_offset": o, "log_start_offset": -1,
                    "partition_max_bytes": PARTITION_MAX_BYTES} for p, o in offsets]}],
               "forgotten_topics_data": [], "rack_id": ""}
        w = Writer()
        w.buf += self.header(self.api.request_header_version(FETCH_VERSION), 1, FETCH_VERSION, self.corr,
                             "kbench-fetch")
        self.api.encode_request(FETCH_VERSION, req, w)
        body = b"".join(bytes(c) for c in w.chunks())
        self.sock.sendall(_I32.pack(len(body)) + body)

    def _recv_into(self, view, n):
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:n])
            if not k:
                raise RuntimeError("broker closed the connection")
            got += k

    def _response(self):
        view = memoryview(self.buf)
        self._recv_into(view, 4)
        size = _I32.unpack_from(self.buf, 0)[0]
        if size > len(self.buf):
            raise RuntimeError("response of %d bytes is larger than fetch.max.bytes allows" % size)
        self._recv_into(view, size)
        if _I32.unpack_from(self.buf, 0)[0] != self.corr:
            raise RuntimeError("response answers correlation id %d, expected %d"
                               % (_I32.unpack_from(self.buf, 0)[0], self.corr))
        return self.api.decode_response(FETCH_VERSION, view[:size], 4), size

    def read_all(self, topic, ends, exact=True):
        """Read partitions 0..len(ends)-1 of ``topic`` from offset 0 up to ``ends``; returns (records, wire bytes,
        requests). Raises on any error code, gap, or (``exact``) a partition read past its end."""
        pos = [0] * len(ends)
        total = wire = requests = 0
        idle = 0            # consecutive answers that moved no partition forward
        while True:
            want = [(p, pos[p]) for p in range(len(ends)) if pos[p] < ends[p]]
            if not want:
                return total, wire, requests
            if idle >= 20:  # 20 x fetch.wait.max.ms (500 ms): the broker holds back records it acknowledged
                raise RuntimeError("no progress in %d answers at offsets %s (ends %s)" % (idle, pos, ends))
            before = total
            self._request(topic, want)
            resp, size = self._response()
            wire += size
            requests += 1
            for t in resp["responses"]:
                for part in t["partitions"]:
                    p = part["partition_index"]
                    if part["error_code"]:
                        raise RuntimeError("partition %d: error %d" % (p, part["error_code"]))
                    records = part["records"]
                    if records is None:
                        continue
                    data = memoryview(records)
                    off = 0
                    while off + 61 <= len(data):
                        base, length = _BATCH_HEAD.unpack_from(data, off)
                        end = off + 12 + length
                        if end > len(data):
                            break                       # the partial batch a size limit cut: asked for again
                        if data[off + 16] != 2:
                            raise RuntimeError("partition %d: magic %d batch" % (p, data[off + 16]))
                        last = base + _I32.unpack_from(data, off + 23)[0]
                        count = _I32.unpack_from(data, off + 57)[0]
                        if base > pos[p] or last < pos[p]:
                            if last >= pos[p]:
                                raise RuntimeError("partition %d: batch %d-%d after a gap at %d"
                                                   % (p, base, last, pos[p]))
                        else:
                            if count != last - base + 1:
                                raise RuntimeError("partition %d: batch %d-%d holds %d records" % (p, base, last,
                                                                                                  count))
                            total += last - pos[p] + 1
                            pos[p] = last + 1
                        off = end
                    if exact and pos[p] > ends[p]:
                        raise RuntimeError("partition %d: read up to %d, produced %d" % (p, pos[p], ends[p]))
            idle = idle + 1 if total == before else 0

    def close(self):
        self.sock.close()


def one_round(broker, fetcher, topic, ends, size, passes):
    u0, s0 = broker.cpu_split()
    c0 = bc.client_cpu()
    t0 = time.perf_counter()
    records = wire = requests = 0
    for _ in range(passes):
        n, w, q = fetcher.read_all(topic, ends)
        if n != sum(ends):
            raise RuntimeError("%s: read %d records, produced %d" % (broker.kind, n, sum(ends)))
        records, wire, requests = records + n, wire + w, requests + q
    wall = time.perf_counter() - t0
    u1, s1 = broker.cpu_split()
    c1 = bc.client_cpu()
    gb = records * size / 1e9
    return {"mb_per_s": records * size / wall / 1e6, "records_per_s": records / wall, "seconds": wall,
            "broker_user_s": u1 - u0, "broker_sys_s": s1 - s0, "broker_cpu_s_per_gb": (u1 - u0 + s1 - s0) / gb,
            "client_cpu_cores": (c1 - c0) / wall, "requests": requests, "wire_mb": wire / 1e6}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", default="kbroker,kafka,tansu")
    ap.add_argument("--sizes", default="1024,100", help="record value sizes in bytes")
    ap.add_argument("--fill-mb", type=float, default=300.0, help="payload MB produced per size")
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--passes", type=int, default=3,
                    help="reads of the whole topic per round (CPU is counted in 10 ms ticks: 1 GB a round keeps "
                         "the tick under ~3 %% of the smallest figure)")
    ap.add_argument("--repo", default=None, help="run kbroker from this tree (PYTHONPATH)")
    args = ap.parse_args(argv)
    if args.repo:
        bc.REPO = peers.REPO = os.path.abspath(args.repo)
    kinds = [k for k in args.brokers.split(",") if k]
    sizes = [int(s) for s in args.sizes.split(",") if s]
    brokers = {}
    results = {k: {s: [] for s in sizes} for k in kinds}
    ends = {}
    try:
        for kind in kinds:
            try:
                b = peers.make_broker(kind)
                b.start()
            except peers.PeerUnavailable as e:
                print("%s: skipped (%s)" % (kind, e), flush=True)
                continue
            brokers[kind] = b
            for s in sizes:
                topic = "fetch-%d" % s
                peers.create_topics(b, [topic], args.partitions)
                count = int(args.fill_mb * 1e6 / s)
                t0 = time.perf_counter()
                fill(b, topic, args.partitions, s, count)
                ends[kind, s] = [count // args.partitions + (1 if p < count % args.partitions else 0)
                                 for p in range(args.partitions)]
                print("%s: %d records of %d B produced in %.1f s" % (kind, count, s, time.perf_counter() - t0),
                      flush=True)
        fetchers = {k: RawFetcher(b.port) for k, b in brokers.items()}
        for k, f in fetchers.items():       # warm: connection, the first index lookups, the JIT
            for s in sizes:
                f.read_all("fetch-%d" % s, [min(e, 1000) for e in ends[k, s]], exact=False)
        for r in range(args.rounds):
            for s in sizes:
                for k, f in fetchers.items():
                    res = one_round(brokers[k], f, "fetch-%d" % s, ends[k, s], s, args.passes)
                    results[k][s].append(res)
                    print("round %d %-7s %5d B: %8.1f MB/s %10.0f records/s, broker %.3f s/GB (user %.2f sys "
                          "%.2f), client %.2f cores, %d requests" % (
                              r + 1, k, s, res["mb_per_s"], res["records_per_s"], res["broker_cpu_s_per_gb"],
                              res["broker_user_s"], res["broker_sys_s"], res["client_cpu_cores"],
                              res["requests"]), flush=True)
        for f in fetchers.values():
            f.close()
    finally:
        for b in brokers.values():
            b.stop()

    def med(k, s, key):
        vals = [r[key] for r in results[k][s]]
        return statistics.median(vals) if vals else None

    print("\nmedians of %d rounds, %d partition(s), %.0f MB per size read %d times a round, Fetch v%d, one request "
          "in flight" % (args.rounds, args.partitions, args.fill_mb, args.passes, FETCH_VERSION))
    print("%-7s %6s %10s %12s %12s %12s" % ("broker", "size", "MB/s", "records/s", "broker s/GB", "client cores"))
    summary = {}
    for s in sizes:
        for k in brokers:
            row = {key: med(k, s, key) for key in ("mb_per_s", "records_per_s", "broker_cpu_s_per_gb",
                                                   "client_cpu_cores")}
            summary.setdefault(str(s), {})[k] = row
            print("%-7s %6d %10.1f %12.0f %12.3f %12.2f" % (k, s, row["mb_per_s"], row["records_per_s"],
                                                            row["broker_cpu_s_per_gb"], row["client_cpu_cores"]))
        if "kbroker" in brokers:
            for peer in ("kafka", "tansu"):
                if peer in brokers:
                    a, p = summary[str(s)]["kbroker"], summary[str(s)][peer]
                    print("  %d B kbroker / %s: throughput %.2fx, broker CPU per GB %.2fx"
                          % (s, peer, a["mb_per_s"] / p["mb_per_s"],
                             a["broker_cpu_s_per_gb"] / p["broker_cpu_s_per_gb"]))
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    path = os.path.join(HERE, "results", "fetch-requests-%s.json" % time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
    with open(path, "w") as f:
        json.dump({"args": vars(args), "machine": bc.machine(), "rounds": {k: {str(s): v for s, v in d.items()}
                                                                         for k, d in results.items()},
                   "medians": summary}, f, indent=1)
    print("written", path)


if __name__ == "__main__":
    main()
