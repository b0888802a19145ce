"""Down-conversion for Fetch v0-v3: v2 batches -> magic 0/1 message sets, bounded in time, memory and disk.

Stored bytes reach v4+ clients through ``sendfile`` and cost the broker no memory; old clients need every batch
decoded and re-encoded, which Kafka does lazily while sending (KIP-283). Here one conversion of one partition's
data is a job for the worker thread (``workers.py``), with four bounds:

* bytes: the partition's limit from the fetch budget (``convert_within``: whole converted batches until the
  next would pass it; the first one may pass it -- whole for v3's progress guarantee, cut for v0-v2);
* records: at most ``MAX_RECORDS_PER_JOB`` (100 000) records per job beyond its first batch (~0.5 s of the
  worker), and no batch of more than ``workers.DECODE_MAX_RECORDS`` is decoded at all;
* memory: stored bytes are read a window at a time, and at most ``SPILL_THRESHOLD`` (1 MiB) of one response's
  converted records are held in memory (where the connection's queue bound limits what one client can hold,
  kbroker/server/connection.py); a partition's result that does not fit what is left of that is written, as it is
  produced, to an unlinked temporary file in the partition's directory (one per response), and handed to the
  connection as a ``SpilledRegion`` (sent with ``sendfile``, like stored bytes);
* disk: spilled bytes not yet sent count against ``SPILL_BUDGET`` (256 MiB, broker-wide). A request's response
  budget above 1 MiB is granted from what is left of it (``FetchConversion``); a region gives its share back when
  the connection has sent it or dropped it (its last reference goes). When little is left the response is
  smaller -- 1 MiB at least, old clients wait their turn; the broker's memory and disk do not grow. Before the
  budget, eight connections pipelining Fetch v2 for 55 MiB each and not reading held 1.3 GB of converted
  responses.
"""
import os
import tempfile
import threading
import weakref

from kbroker.errors import UnsupportedCompressionType, UnsupportedVersion
from kbroker.handlers.workers import DECODE_MAX_RECORDS, gc_paused, run_in_worker
from kbroker.log.file_region import FileRegion
from kbroker.record import HEADER_SIZE, LOG_OVERHEAD, batch_header, batch_size, down_convert, iter_batches

SPILL_THRESHOLD = 1 << 20
SPILL_BUDGET = 256 << 20
MAX_RECORDS_PER_JOB = 100_000
READ_WINDOW = 1 << 20        # stored bytes read per pread; a larger batch is read whole


class SpillBudget:
    """Bytes of spilled results not yet sent, all connections together. Thread-safe: a region may be freed in
    any thread (normally the loop's, after the writer sent it)."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.used = 0
        self._lock = threading.Lock()

    def take(self, wanted):
        """Reserve up to ``wanted`` bytes; returns what was granted (0 when the budget is spent)."""
        with self._lock:
            n = max(0, min(wanted, self.capacity - self.used))
            self.used += n
            return n

    def force(self, n):
        """Reserve ``n`` more bytes even past the capacity (a first batch larger than what was granted)."""
        with self._lock:
            self.used += n

    def give_back(self, n):
        with self._lock:
            self.used -= n


SPILL = SpillBudget(SPILL_BUDGET)


class _SpillFile:
    """An unlinked temporary file shared by the spilled partitions of one Fetch pass (one descriptor per
    response, however many partitions spill). ``share[0]`` bytes of it are held against the SpillBudget; the
    file is closed and they are given back when the last SpilledRegion over it (and the pass) let go of it."""

    def __init__(self, directory, budget):
        self.file = tempfile.TemporaryFile(dir=directory, buffering=0)  # O_TMPFILE: no name, gone on close
        self.size = 0
        self.share = [0]
        weakref.finalize(self, _release, self.file, budget, self.share)


def _release(file, budget, share):
    try:
        file.close()
    finally:
        budget.give_back(share[0])


class SpilledRegion(FileRegion):
    """Converted records in a _SpillFile, sent by the connection with ``sendfile`` like stored bytes."""

    def __init__(self, spill_file, position, size):
        super().__init__(spill_file.file, position, size)
        self.owner = spill_file  # keeps the file (and its budget share) until the region is gone


class FetchConversion:
    """The down-conversions of one pass of one Fetch request over its partitions (loop side).

    ``budget``: the largest response the request may get, ``min(max_bytes, fetch.max.bytes)``. Its first
    ``SPILL_THRESHOLD`` bytes may be held in memory; the rest is granted from the SpillBudget up front and
    ``budget`` shrinks to what was granted (``self.budget``: what the fetch handler must stay within). Call
    ``convert`` per partition, then ``finish`` (gives back what the spilled results did not use).
    """

    def __init__(self, budget, spill=None):
        self.spill = spill = spill if spill is not None else SPILL
        wanted = max(0, budget - SPILL_THRESHOLD)
        self.pool = spill.take(wanted)
        self.budget = min(budget, SPILL_THRESHOLD + self.pool)
        self.memory_room = SPILL_THRESHOLD
        self.spill_file = None

    def convert(self, sl, to_magic, limit, min_one, cut_first):
        """The records one partition sends from the FetchSlice ``sl`` (non-empty; its first batch cut only when
        ``cut_first``): bytes or a SpilledRegion, within ``limit`` (``convert_within``'s rules). Blocks the calling
        greenlet while the worker converts; the loop runs on."""
        region = sl.first_batch_region() if sl.first_entry_incomplete else sl.region
        sink = _Sink(_spill_dir(region), self.memory_room, self.spill, self.spill_file)
        run_in_worker(_convert_job, region, to_magic, limit, min_one, cut_first, sink)
        if sink.spilled is None:
            data = b"".join(sink.chunks)
            self.memory_room = max(0, self.memory_room - len(data))
            return data
        spill_file, position = sink.spilled, sink.position
        self.spill_file = spill_file
        size = sink.size
        share = min(size, self.pool)
        self.pool -= share
        if size > share:
            self.spill.force(size - share)  # a first batch larger than what was granted
        spill_file.share[0] += size
        return SpilledRegion(spill_file, position, size)

    def finish(self):
        self.spill.give_back(self.pool)
        self.pool = 0
        self.spill_file = None


def _convert_job(region, to_magic, limit, min_one, cut_first, sink):
    """(Worker thread) convert ``region`` into ``sink``; a failed job leaves nothing in the spill file."""
    try:
        _convert(_stored_batches(region), to_magic, limit, min_one, cut_first, sink)
    except BaseException:
        sink.discard()
        raise


def convert_within(data, to_magic, limit, min_one, cut_first):
    """In-memory form of the job (tests, small data): converted bytes of the v2 batches of ``data``.

    Per batch, in order: a converted batch that fits ``limit`` is taken whole; conversion stops at the first one
    that does not, or when ``MAX_RECORDS_PER_JOB`` records were converted. The first batch is still taken when
    it does not fit: whole with ``min_one`` (the v3 progress guarantee), cut to ``limit`` bytes with
    ``cut_first`` (v0-v2, when the client's own partition limit cuts it), else the result is empty. A batch
    that cannot be converted -- zstd (UnsupportedCompressionType) or more than ``DECODE_MAX_RECORDS`` records
    (UnsupportedVersion) -- raises when it is first in line and otherwise ends the data (the client gets the
    error when it fetches from there). A trailing partial batch is ignored; control batches give nothing.
    """
    sink = _Sink(None, None)
    view = memoryview(data)
    _convert((view[pos:pos + h.size] for pos, h in iter_batches(view, include_control=True)), to_magic, limit,
             min_one, cut_first, sink)
    return sink.result()


def _convert(batches, to_magic, limit, min_one, cut_first, sink):
    records = 0
    for batch in batches:
        first = sink.size == 0
        if not first and (sink.size >= limit or records >= MAX_RECORDS_PER_JOB):
            break
        head = batch_header(batch)
        count = head.records_count
        try:
            if count > DECODE_MAX_RECORDS:
                raise UnsupportedVersion("batch at offset %d holds %d records, more than the %d a down-conversion "
                                         "may decode" % (head.base_offset, count, DECODE_MAX_RECORDS))
            if not first and records + count > MAX_RECORDS_PER_JOB:
                break
            with gc_paused():
                chunk = down_convert(batch, to_magic)
        except (UnsupportedCompressionType, UnsupportedVersion):
            if not first:
                break
            raise
        records += count
        if not chunk:
            continue
        if sink.size + len(chunk) <= limit:
            sink.write(chunk)
            continue
        if sink.size == 0:
            if min_one:
                sink.write(chunk)
            elif cut_first:
                sink.write(chunk[:limit])
        break


def _stored_batches(region):
    """Whole v2 batches of a stored region, each a bytes-like, read ``READ_WINDOW`` at a time (a batch larger than
    the window is read whole); stops at a partial or malformed batch."""
    fd = region.fileno()
    pos, end = region.position, region.position + region.size
    while end - pos >= LOG_OVERHEAD:
        view = memoryview(os.pread(fd, min(READ_WINDOW, end - pos), pos))
        if len(view) < LOG_OVERHEAD:
            return  # the file shrank under us (a follower's truncation): what is left is not ours to send
        at = 0
        while len(view) - at >= LOG_OVERHEAD:
            size = batch_size(view, at)
            if size < HEADER_SIZE or pos + at + size > end:
                return
            if at + size > len(view):
                break
            yield view[at:at + size]
            at += size
        if at == 0:  # one batch larger than the window: read it whole
            size = batch_size(view)
            whole = os.pread(fd, size, pos)
            if len(whole) < size:
                return
            yield memoryview(whole)
            at = size
        pos += at


def _spill_dir(region):
    name = getattr(region.file, "name", None)
    return os.path.dirname(name) if isinstance(name, str) else None


class _Sink:
    """Collects one partition's converted chunks in memory up to ``memory_room`` bytes, then appends them all to a
    _SpillFile (the pass's, or a new one in ``directory``): ``spilled`` is that file and ``position`` where this
    partition's bytes start. With ``memory_room`` None everything stays in memory."""

    def __init__(self, directory, memory_room, budget=None, spill_file=None):
        self.directory = directory
        self.memory_room = memory_room
        self.budget = budget
        self.spill_file = spill_file
        self.chunks = []
        self.spilled = None
        self.position = 0
        self.size = 0

    def write(self, chunk):
        self.size += len(chunk)
        if self.spilled is not None:
            self._append(chunk)
            return
        self.chunks.append(chunk)
        if self.memory_room is None or self.size <= self.memory_room:
            return
        spill = self.spill_file
        if spill is None:
            try:
                spill = _SpillFile(self.directory, self.budget)
            except OSError:
                self.memory_room = None  # no room on disk: keep it in memory (bounded by the limit all the same)
                return
        self.spilled, self.position = spill, spill.size
        chunks, self.chunks = self.chunks, []
        for c in chunks:
            self._append(c)

    def _append(self, chunk):
        view = memoryview(chunk)
        while view:
            view = view[self.spilled.file.write(view):]
        self.spilled.size += len(chunk)

    def result(self):
        return b"".join(self.chunks)

    def discard(self):
        spill = self.spilled
        if spill is not None:
            spill.size = self.position
            os.ftruncate(spill.file.fileno(), self.position)
            spill.file.seek(self.position)
        self.chunks = []
