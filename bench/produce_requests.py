#!/usr/bin/env python3
"""Broker CPU per Produce request at a fixed request shape, one partition vs many (issue 15, target 4's spread).

    python bench/produce_requests.py                         # 1 KB x 40 records a request, 1 vs 1,000 partitions
    python bench/produce_requests.py --repo /tmp/before-X    # the broker from another tree (before/after)
    python bench/produce_requests.py --broker kafka          # the same requests to Apache Kafka 4.4 (or tansu)

Why not a client: bench/scale_partitions.py's spread step (confluent-kafka, linger.ms=100, 1,000 random partitions)
makes librdkafka send one Produce request per partition batch (5,798 requests for 5,958 batches of ~49 records in
one 300 MB run, counted with the broker's request metrics), and how many it sends depends on how fast the broker
and the client each are at that moment: runs of the same code measured 1.9-6.6 broker CPU s/GB. Here the requests
are built once (the real codecs, Produce v9, acks=1, one partition entry of ``--records`` records of ``--value``
bytes, one CRC-valid v2 batch) and sent over one raw socket with ``--inflight`` requests outstanding, so every run
makes the broker do the same work: ``--requests`` requests to one partition, then as many spread round-robin over
``--partitions`` partitions (the same bytes per request, so the only difference is how many partitions they touch).
Each phase's broker CPU (utime + stime of the process from /proc) is divided by its requests and its payload GB;
``--rounds`` alternate the two phases; the medians and the ratio spread / one are printed. Every response is
decoded and must carry error code 0 and the next base offset of its partition (a broker that drops or reorders
anything fails the run). The first pass over the partitions (not measured) gives every partition its first
segment's indexes (an index is mapped at its first entry), so the figure is the steady state.
"""
import argparse
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


def build_requests(topic, partitions, records, value_size):
    """{partition: framed Produce v9 request bytes} with a placeholder correlation id (patched per send)."""
    from kbroker.protocol.apis import APIS
    from kbroker.protocol.headers import encode_request_header
    from kbroker.protocol.schema import Writer
    from kbroker.record import Record, build_batch
    api = APIS[0]
    value = os.urandom(value_size)
    batch = bytes(build_batch([Record(j, 1_700_000_000_000 + j, None, value, ()) for j in range(records)]))
    out = {}
    for p in range(partitions):
        req = {"transactional_id": None, "acks": 1, "timeout_ms": 30000,
               "topic_data": [{"name": topic, "partition_data": [{"index": p, "records": batch}]}]}
        w = Writer()
        w.buf += encode_request_header(api.request_header_version(9), 0, 9, 0, "bench")
        api.encode_request(9, req, w)
        body = b"".join(bytes(c) for c in w.chunks())
        out[p] = struct.pack(">i", len(body)) + body
    return out, len(value) * records


def _recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise RuntimeError("broker closed the connection")
        buf += chunk
    return buf


def run_phase(sock, wires, targets, inflight, next_offset, records):
    """Send one request to each of ``targets`` (partition numbers) with ``inflight`` outstanding; check that every
    answer is in order, error-free and at ``next_offset`` of its partition (advanced by ``records`` a request)."""
    from kbroker.protocol.apis import APIS
    api = APIS[0]
    sent = 0
    expect = []         # (correlation id, partition) in send order
    done = 0
    corr = 1
    while done < len(targets):
        while sent < len(targets) and sent - done < inflight:
            p = targets[sent]
            wire = bytearray(wires[p])
            struct.pack_into(">i", wire, 8, corr)        # size 4 | api key 2 | version 2 | correlation id 4
            sock.sendall(wire)
            expect.append((corr, p))
            corr += 1
            sent += 1
        size = struct.unpack(">i", _recv_exact(sock, 4))[0]
        body = _recv_exact(sock, size)
        want_corr, p = expect[done]
        got_corr = struct.unpack_from(">i", body, 0)[0]
        if got_corr != want_corr:
            raise RuntimeError("response %d answers correlation id %d" % (want_corr, got_corr))
        resp = api.decode_response(9, memoryview(body), 5)       # v9 responses have the flexible header's tag byte
        part = resp["responses"][0]["partition_responses"][0]
        if part["error_code"] != 0 or part["base_offset"] != next_offset[p]:
            raise RuntimeError("partition %d answered error %d base offset %d (expected 0, %d)"
                               % (p, part["error_code"], part["base_offset"], next_offset[p]))
        next_offset[p] += records
        done += 1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--records", type=int, default=40)
    ap.add_argument("--value", type=int, default=1024)
    ap.add_argument("--requests", type=int, default=6000)
    ap.add_argument("--inflight", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repo", default=None, help="run the broker from this tree (PYTHONPATH)")
    ap.add_argument("--broker", default="kbroker", help="kbroker, kafka or tansu (bench/peers.py)")
    args = ap.parse_args(argv)
    if args.repo:
        for mod in (bc, sys.modules.get("peers")):
            if mod is not None:
                mod.REPO = os.path.abspath(args.repo)
    topics_per = 10
    ntopics = -(-args.partitions // topics_per)
    b = peers.make_broker(args.broker)
    try:
        b.start()
        # the spread's partitions, as scale_partitions lays them out: topics of 10 partitions
        names = ["s%04d" % t for t in range(ntopics)]
        for i in range(0, ntopics, 100):           # CreateTopics in requests of 100 topics
            bc.create_topics(b, names[i:i + 100], topics_per, timeout=120)
        bc.create_topics(b, ["one"], 1)
        wires_by_topic = {}
        spread_wires = {}
        for i in range(args.partitions):
            t, p = names[i // topics_per], i % topics_per
            if t not in wires_by_topic:
                wires_by_topic[t], payload = build_requests(t, topics_per, args.records, args.value)
            spread_wires[i] = wires_by_topic[t][p]
        one_wires, payload = build_requests("one", 1, args.records, args.value)
        sock = socket.create_connection(("127.0.0.1", b.port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        offsets_spread = [0] * args.partitions
        offsets_one = [0]
        spread_targets = [i % args.partitions for i in range(args.requests)]
        run_phase(sock, spread_wires, list(range(args.partitions)) * 2, args.inflight, offsets_spread,
                  args.records)   # warm: every partition's second batch maps its indexes
        run_phase(sock, one_wires, [0] * 200, args.inflight, offsets_one, args.records)
        res = {"one": [], "spread": []}
        gb = args.requests * payload / 1e9
        for _ in range(args.rounds):
            for name, wires, targets, offs in (("one", one_wires, [0] * args.requests, offsets_one),
                                               ("spread", spread_wires, spread_targets, offsets_spread)):
                u0, s0 = b.cpu_split()
                t0 = time.monotonic()
                run_phase(sock, wires, targets, args.inflight, offs, args.records)
                wall = time.monotonic() - t0
                u1, s1 = b.cpu_split()
                res[name].append((u1 - u0, s1 - s0, wall))
                print("%-6s %6d requests: broker user %.3f sys %.3f s -> %.1f us CPU per request, %.3f s/GB, "
                      "wall %.2f s" % (name, args.requests, u1 - u0, s1 - s0, (u1 - u0 + s1 - s0) / args.requests
                                       * 1e6, (u1 - u0 + s1 - s0) / gb, wall), flush=True)
        med = {k: statistics.median(u + s for u, s, _ in v) for k, v in res.items()}
        print("broker %s (kbroker tree %s): %d records x %d B a request, %d partitions, inflight %d" % (
            args.broker, bc.REPO, args.records, args.value, args.partitions, args.inflight))
        print("median CPU s/GB: one %.3f  spread %.3f  ratio %.2f (per request: %.1f vs %.1f us)" % (
            med["one"] / gb, med["spread"] / gb, med["spread"] / med["one"], med["one"] / args.requests * 1e6,
            med["spread"] / args.requests * 1e6))
    finally:
        b.stop()


if __name__ == "__main__":
    main()
