#!/usr/bin/env python3
"""A consume-transform-produce application for the exactly-once tests (issue 11), run as its own process.

    python -m tests.integration.eos_app --bootstrap H:P[,...] --input IN --output OUT --group G \
        [--transactional-id TID | --no-transactions] [--batch 50] [--rate 0] [--crash-after-produce K]

What it does (Confluent's EOS example, KIP-447 style): a consumer in group G (``isolation.level=read_committed``,
``enable.auto.commit=false``, ``auto.offset.reset=earliest``) reads IN; for every record it produces one output
record to OUT with the same key and the value ``transform(value)`` = ``b"out:" + value``. Per batch of at most
``--batch`` records (one ``consume()`` call):

    transactions (default)   begin_transaction; produce the batch; send_offsets_to_transaction(next offsets,
                             consumer.consumer_group_metadata()); commit_transaction. No transaction is open while
                             ``consume()`` runs, so a rebalance never revokes partitions under an open transaction;
                             a rebalance between consume and commit is fenced by the broker (KIP-447 generation
                             check on TxnOffsetCommit), which surfaces as an abortable error.
    --no-transactions        idempotent producer; produce the batch, flush (every record acknowledged), then
                             consumer.commit(next offsets) synchronously: at-least-once.

Errors (transactions): a retriable error of send_offsets / commit is retried (bounded by --op-timeout per call and
--give-up overall); an error that requires abort -> abort_transaction and *rewind* the consumer to the group's
committed offsets (what was consumed since is read again and produced in the next transaction); a fatal error
(e.g. the producer was fenced) -> a new producer with the same transactional id (init_transactions fences the old
epoch and aborts its open transaction), then rewind. ``--no-transactions``: produce/commit errors are retried the
same way (duplicates are the expected cost).

``--crash-after-produce K``: in the K-th non-empty batch (1-based), once every output record of it is written
(``flush()`` returned 0: acknowledged by the leaders, inside the open transaction in transactional mode), the
process SIGKILLs itself *before* committing (offsets not sent / not committed, transaction not committed). A
restarted instance then reads the batch again: with transactions the open transaction is aborted by the new
instance's init_transactions (no duplicate); without, the batch's outputs are duplicated -- exactly that batch's
size, which the crash event reports.

``--pause-after-produce K``: at the same point the process SIGSTOPs itself instead (event ``paused`` first, with
the batch's ids and the consumer's member id; ``resumed`` after SIGCONT) and then carries on with the commit: a
zombie whose partitions the group gave to another member meanwhile. KIP-447: the broker refuses its
TxnOffsetCommit (stale member / generation), the app aborts and rewinds.

Stop: SIGTERM or SIGINT ends the loop after the current batch (its transaction committed), then the consumer is
closed. Exit 0 on a clean stop, 2 when the --give-up budget ran out.

Output: one JSON object a line on stdout (flushed), ``event`` one of ``started`` (config), ``assigned`` /
``revoked`` (partitions), ``committed`` (every 20th batch: totals so far), ``abort`` / ``fatal`` / ``retry`` (error
and the operation), ``crash`` (batch number, records in the batch, their input ids), ``done`` (totals:
``batches``, ``records`` (records in committed batches), ``aborts``, ``fatal``, ``retries``, ``producers``
(producers created), ``positions`` {partition: next offset committed last}).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

PREFIX = b"out:"


def transform(value: bytes) -> bytes:
    """The output value of an input value (the checker recomputes it)."""
    return PREFIX + value


def emit(event: str, **fields) -> None:
    fields["event"] = event
    fields["t"] = round(time.time(), 3)
    sys.stdout.write(json.dumps(fields, default=str) + "\n")
    sys.stdout.flush()


class GiveUp(Exception):
    """The overall --give-up budget ran out while retrying."""


class Abort(Exception):
    """The current transaction must be aborted (or, without transactions, the batch redone)."""


class Fatal(Exception):
    """The producer is unusable (fenced, fatal idempotence error): make a new one."""


def _kafka_error(exc: KafkaException) -> KafkaError | None:
    return exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None


class App:
    def __init__(self, args):
        self.args = args
        self.stop = False
        self.stats = {"batches": 0, "records": 0, "aborts": 0, "fatal": 0, "retries": 0, "producers": 0}
        self.positions: dict[int, int] = {}
        self.give_up_at = time.monotonic() + args.give_up
        self.txn = args.transactional_id is not None
        self.consumer = Consumer({
            "bootstrap.servers": args.bootstrap, "group.id": args.group,
            "isolation.level": "read_committed", "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "session.timeout.ms": args.session_timeout_ms, "heartbeat.interval.ms": 1000,
            "fetch.wait.max.ms": 100, "topic.metadata.refresh.interval.ms": 2000,
        })
        self.producer = None
        self.paused = False
        self.new_producer()

    # -- producer lifecycle
    def producer_config(self) -> dict:
        conf = {"bootstrap.servers": self.args.bootstrap, "linger.ms": 5, "acks": "all",
                "enable.idempotence": True, "message.timeout.ms": self.args.message_timeout_ms,
                "request.timeout.ms": 10000, "topic.metadata.refresh.interval.ms": 2000}
        if self.txn:
            conf["transactional.id"] = self.args.transactional_id
            conf["transaction.timeout.ms"] = self.args.transaction_timeout_ms
            # librdkafka refuses a message timeout longer than the transaction's
            conf["message.timeout.ms"] = min(self.args.message_timeout_ms, self.args.transaction_timeout_ms)
        return conf

    def new_producer(self) -> None:
        if self.producer is not None:
            try:
                self.producer.purge()
                self.producer.flush(0)
            except Exception:  # noqa: BLE001 - the old producer is being thrown away
                pass
        while True:
            self.producer = Producer(self.producer_config())
            self.stats["producers"] += 1
            if not self.txn:
                return
            try:
                self.retrying("init_transactions", lambda: self.producer.init_transactions(self.args.op_timeout))
                return
            except (Abort, Fatal):
                if time.monotonic() > self.give_up_at:
                    raise GiveUp("init_transactions kept failing") from None
                self.producer.flush(0)

    def retrying(self, what: str, op):
        """Run op() until it succeeds; retriable errors are retried until --give-up seconds have passed in all.
        Raises Abort (txn_requires_abort) or Fatal (fatal / not retriable)."""
        while True:
            try:
                return op()
            except KafkaException as exc:
                err = _kafka_error(exc)
                if err is None:
                    raise
                if err.fatal():
                    emit("fatal", op=what, error=str(err))
                    raise Fatal(str(err)) from None
                if err.txn_requires_abort():
                    emit("abort", op=what, error=str(err))
                    raise Abort(str(err)) from None
                if not err.retriable() and err.code() != KafkaError._TIMED_OUT:
                    emit("fatal", op=what, error=str(err), retriable=False)
                    raise Fatal(str(err)) from None
                self.stats["retries"] += 1
                emit("retry", op=what, error=str(err))
                if time.monotonic() > self.give_up_at:
                    raise GiveUp(f"{what}: {err}") from None
                time.sleep(0.2)

    # -- consumer
    def on_assign(self, consumer, partitions):
        emit("assigned", partitions=[p.partition for p in partitions])

    def on_revoke(self, consumer, partitions):
        emit("revoked", partitions=[p.partition for p in partitions])

    def rewind(self) -> None:
        """Seek every assigned partition back to the group's committed offset (earliest when none)."""
        assignment = self.consumer.assignment()
        if not assignment:
            return
        while True:
            try:
                committed = self.consumer.committed(assignment, timeout=self.args.op_timeout)
                break
            except KafkaException as exc:
                emit("retry", op="committed", error=str(exc))
                self.stats["retries"] += 1
                if time.monotonic() > self.give_up_at:
                    raise GiveUp(f"committed: {exc}") from None
                time.sleep(0.2)
        for tp in committed:
            if tp.offset < 0:
                tp.offset = OFFSET_BEGINNING
            try:
                self.consumer.seek(tp)
            except KafkaException as exc:  # the partition was revoked meanwhile: nothing to rewind
                emit("retry", op="seek", error=str(exc))

    # -- the loop
    def run(self) -> int:
        args = self.args
        self.give_up_at = time.monotonic() + args.give_up
        self.consumer.subscribe([args.input], on_assign=self.on_assign, on_revoke=self.on_revoke)
        emit("started", pid=os.getpid(), transactional=self.txn, transactional_id=args.transactional_id,
             group=args.group, batch=args.batch)
        started = time.monotonic()
        done_records = 0
        try:
            while not self.stop:
                msgs = self.consumer.consume(num_messages=args.batch, timeout=0.5)
                msgs = [m for m in msgs if m.error() is None]
                if not msgs:
                    continue
                try:
                    self.process(msgs)
                except Abort:
                    self.stats["aborts"] += 1
                    if self.txn:
                        try:
                            self.retrying("abort_transaction",
                                          lambda: self.producer.abort_transaction(args.op_timeout))
                        except (Abort, Fatal):
                            self.stats["fatal"] += 1
                            self.new_producer()
                    self.rewind()
                    continue
                except Fatal:
                    self.stats["fatal"] += 1
                    self.new_producer()
                    self.rewind()
                    continue
                done_records += len(msgs)
                # a healthy run is never throttled by this; --rate spreads the input over a nemesis window
                if args.rate > 0:
                    ahead = done_records / args.rate - (time.monotonic() - started)
                    if ahead > 0:
                        time.sleep(ahead)
                # progress resets the give-up budget: it bounds one stall, not the whole run
                self.give_up_at = time.monotonic() + args.give_up
        except GiveUp as exc:
            emit("gave_up", error=str(exc), **self.stats)
            return 2
        finally:
            emit("done", positions=self.positions, **self.stats)
            try:
                self.consumer.close()
            except Exception as exc:  # noqa: BLE001 - closing after a failure
                emit("close_error", error=str(exc))
        return 0

    def process(self, msgs) -> None:
        args = self.args
        batch_no = self.stats["batches"] + 1
        if self.txn:
            self.retrying("begin_transaction", self.producer.begin_transaction)
        errors = []

        def delivered(err, msg):
            if err is not None:
                errors.append(err)

        for m in msgs:
            while True:
                try:
                    self.producer.produce(args.output, key=m.key(), value=transform(m.value()), on_delivery=delivered)
                    break
                except BufferError:
                    self.producer.poll(0.1)
                except KafkaException as exc:
                    err = _kafka_error(exc)
                    if err is not None and err.txn_requires_abort():
                        raise Abort(str(err)) from None
                    raise Fatal(str(exc)) from None
        nxt: dict[int, int] = {}
        for m in msgs:
            nxt[m.partition()] = max(nxt.get(m.partition(), -1), m.offset() + 1)
        offsets = [TopicPartition(args.input, p, o) for p, o in sorted(nxt.items())]

        if args.crash_after_produce and batch_no == args.crash_after_produce:
            left = self.producer.flush(60)
            ids = sorted(int(m.key()) for m in msgs)
            emit("crash", batch=batch_no, records=len(msgs), undelivered=left, delivery_errors=len(errors), ids=ids,
                 offsets={p: o for p, o in nxt.items()})
            os.kill(os.getpid(), signal.SIGKILL)
        if args.pause_after_produce and batch_no == args.pause_after_produce and not self.paused:
            self.paused = True
            left = self.producer.flush(60)
            emit("paused", batch=batch_no, records=len(msgs), undelivered=left, ids=sorted(int(m.key()) for m in msgs),
                 member=self.consumer.memberid())
            os.kill(os.getpid(), signal.SIGSTOP)   # a zombie: the test sends SIGCONT once the group moved on
            emit("resumed", batch=batch_no)

        if self.txn:
            self.retrying("send_offsets_to_transaction", lambda: self.producer.send_offsets_to_transaction(
                offsets, self.consumer.consumer_group_metadata(), args.op_timeout))
            self.retrying("commit_transaction", lambda: self.producer.commit_transaction(args.op_timeout))
        else:
            left = self.producer.flush(args.message_timeout_ms / 1000 + 5)
            if left or errors:
                emit("abort", op="flush", undelivered=left, errors=[str(e) for e in errors[:3]])
                for e in errors:
                    if e.fatal():
                        raise Fatal(str(e))
                raise Abort(f"{left} undelivered, {len(errors)} delivery errors")
            try:
                self.consumer.commit(offsets=offsets, asynchronous=False)
            except KafkaException as exc:
                # a rebalance or a coordinator move: the batch is read again by whoever owns it now
                emit("abort", op="commit", error=str(exc))
                raise Abort(str(exc)) from None
        self.stats["batches"] += 1
        self.stats["records"] += len(msgs)
        self.positions.update(nxt)
        if self.stats["batches"] % 20 == 0:
            emit("committed", positions=self.positions, **self.stats)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--group", required=True)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--transactional-id")
    mode.add_argument("--no-transactions", action="store_true")
    ap.add_argument("--batch", type=int, default=50, help="records per consume()/transaction (50)")
    ap.add_argument("--rate", type=float, default=0.0, help="records/s cap over the run (0 = none)")
    ap.add_argument("--crash-after-produce", type=int, default=0, metavar="K",
                    help="SIGKILL itself in batch K after its output is written, before the commit")
    ap.add_argument("--pause-after-produce", type=int, default=0, metavar="K",
                    help="SIGSTOP itself in batch K after its output is written, before the commit (a zombie)")
    ap.add_argument("--op-timeout", type=float, default=15.0, help="timeout of one transactional call, s (15)")
    ap.add_argument("--give-up", type=float, default=120.0,
                    help="exit 2 after retrying this long without progress, s (120)")
    ap.add_argument("--transaction-timeout-ms", type=int, default=30000)
    ap.add_argument("--message-timeout-ms", type=int, default=60000)
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    return ap.parse_args(argv)


def main(argv=None) -> int:
    app = App(parse_args(argv))

    def stop(signum, frame):
        app.stop = True
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    return app.run()


if __name__ == "__main__":
    sys.exit(main())
