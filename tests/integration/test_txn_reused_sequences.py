"""librdkafka reuses the sequence numbers of records its abort_transaction purged; the broker must not answer the
new records "duplicate" (kbroker/replica/producer_state.py, module docstring).

The failure this pins down was seen once in test_txn_eos.py's broker nemesis (4 of 2,000 records lost): a Produce
the leader had written failed at the client with a transport error (its leader was killed before answering), so
librdkafka queued the batch for a retry ("possibly persisted"); the app aborted the transaction meanwhile; the
abort purged the queued batch and advanced the partition's sequence base by its 4 records
(rd_kafka_toppar_purge_queues, librdkafka 2.x); the re-processed records of the next transaction went out with
the same 4 sequence numbers, which Kafka's rule calls a duplicate of the aborted batch: success, nothing written.

Here the transport error comes from a relay between the client and a single broker (advertised.listeners points
at it): armed, it forwards the next Produce request, waits for the broker's answer (so the records are in the log),
drops it and closes both sides. retry.backoff.ms=5000 keeps the batch queued (not in flight) while the test
aborts; librdkafka's statistics (msgq_cnt + xmit_msgq_cnt, waitresp_cnt) say when that is so.

What must show: the same 4 sequence numbers in the next transaction get OUT_OF_ORDER_SEQUENCE_NUMBER (45), which
librdkafka raises as a fatal error from commit_transaction; a new producer with the same transactional.id writes
the records, and read_committed sees each of them exactly once (and none of the aborted ones). With Kafka's rule
the commit succeeds and read_committed sees nothing: 4 records lost.
"""
from __future__ import annotations

import json
import socket
import struct
import threading

import pytest

from tests.integration.eos_checker import read_records
from tests.integration.harness import BrokerProcess, free_port, recv_exact, wait_until
from tests.integration.test_clients_common import create_topic

pytestmark = pytest.mark.integration

PRODUCE = 0
TOPIC = "reused-seq"


class CutOnceProxy:
    """A TCP relay to one broker port. ``arm()``: the next Produce request is forwarded, the broker's response to
    it swallowed and the connection closed on both sides (``cut`` is set then)."""

    def __init__(self, target_port: int):
        self.target = ("127.0.0.1", target_port)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.armed = False
        self.cut = threading.Event()
        self.lock = threading.Lock()
        self.socks: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self) -> None:
        with self.lock:
            self.armed = True

    def close(self) -> None:
        for s in [self.server] + self.socks:
            try:
                s.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:             # the broker is gone (teardown): refuse this client, keep accepting
                client.close()
                continue
            self.socks += [client, upstream]
            pending = {}   # correlation id of the Produce to swallow the answer of
            threading.Thread(target=self._requests, args=(client, upstream, pending), daemon=True).start()
            threading.Thread(target=self._responses, args=(client, upstream, pending), daemon=True).start()

    @staticmethod
    def _frame(sock: socket.socket) -> bytes:
        size = recv_exact(sock, 4)
        return size + recv_exact(sock, struct.unpack(">i", size)[0])

    def _requests(self, client, upstream, pending) -> None:
        try:
            while True:
                frame = self._frame(client)
                api_key, _version, correlation = struct.unpack(">hhi", frame[4:12])
                with self.lock:
                    if self.armed and api_key == PRODUCE:
                        self.armed = False
                        pending["cid"] = correlation
                upstream.sendall(frame)
        except (OSError, ConnectionError):
            pass
        finally:
            _hang_up(client, upstream)

    def _responses(self, client, upstream, pending) -> None:
        try:
            while True:
                frame = self._frame(upstream)
                if struct.unpack(">i", frame[4:8])[0] == pending.get("cid"):
                    self.cut.set()
                    break                        # the broker answered: the records are written; drop the answer
                client.sendall(frame)
        except (OSError, ConnectionError):
            pass
        finally:
            _hang_up(client, upstream)


def _hang_up(*socks) -> None:
    # shutdown() first: close() alone sends no FIN while the other relay thread is blocked in recv() on the socket.
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()


@pytest.fixture
def relayed_broker(tmp_path):
    port = free_port()
    proxy = CutOnceProxy(port)
    b = BrokerProcess(tmp_path / "broker", port=port, overrides={
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}",
        "transaction.state.log.num.partitions": 1, "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1})
    try:
        b.start()
        yield b, proxy
    finally:
        b.close()
        proxy.close()


def test_records_reusing_the_sequences_of_an_aborted_retry_are_written_once(relayed_broker):
    from confluent_kafka import KafkaException, Producer

    broker, proxy = relayed_broker
    bootstrap = f"127.0.0.1:{proxy.port}"
    create_topic(bootstrap, TOPIC, 1)
    stats = {}
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "reuse-1", "linger.ms": 0,
                  "retry.backoff.ms": 5000, "retry.backoff.max.ms": 5000, "statistics.interval.ms": 100,
                  "stats_cb": lambda js: stats.update(last=json.loads(js))})
    p.init_transactions(30)
    p.begin_transaction()
    proxy.arm()
    for i in range(4):
        p.produce(TOPIC, value=b"old-%d" % i, partition=0)
    p.poll(0)
    assert proxy.cut.wait(15), "the Produce request never went through the relay"

    def queued_for_retry():
        p.poll(0.1)
        st = stats.get("last")
        if st is None or TOPIC not in st["topics"]:
            return False
        tp = st["topics"][TOPIC]["partitions"]["0"]
        in_flight = sum(b["waitresp_cnt"] for b in st["brokers"].values())
        return tp["msgq_cnt"] + tp["xmit_msgq_cnt"] == 4 and in_flight == 0

    stats.clear()
    wait_until(queued_for_retry, 4.0, 0.05, "the 4 records back in librdkafka's queue (retry backoff 5 s)")
    p.abort_transaction(30)     # purges them: librdkafka moves the partition's sequence base past them

    p.begin_transaction()
    for i in range(4):
        p.produce(TOPIC, value=b"new-%d" % i, partition=0)
    with pytest.raises(KafkaException) as exc:
        p.commit_transaction(30)
    err = exc.value.args[0]
    assert err.fatal() and "OUT_OF_ORDER_SEQUENCE" in str(err), err

    # What an app does with a fatal error: a new producer (init_transactions fences the old epoch and aborts its
    # open transaction), then the records again.
    p2 = Producer({"bootstrap.servers": bootstrap, "transactional.id": "reuse-1", "linger.ms": 0})
    p2.init_transactions(30)
    p2.begin_transaction()
    for i in range(4):
        p2.produce(TOPIC, value=b"new-%d" % i, partition=0)
    p2.commit_transaction(30)
    # offsets: old 0-3, ABORT 4, (the refused batch wrote nothing), the fencing ABORT 5, new 6-9, COMMIT 10
    assert [(o, v) for o, _, v in read_records(bootstrap, TOPIC, 1, "read_committed")[0]] == [
        (6 + i, b"new-%d" % i) for i in range(4)]
