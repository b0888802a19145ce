"""Follower side of replication: one ``ReplicaFetcher`` greenlet per source (leader) broker.

Loop, over the partitions this broker follows on that leader:
1. partitions just made followers (``truncating``) first reconcile their log with the leader's (KIP-101/279):
   OffsetForLeaderEpoch v3 (replica_id = this broker, current_leader_epoch, leader_epoch = our latest epoch).
   The leader answers (E, end): the largest epoch <= ours it knows and where it ends on the leader. If we know E
   too, truncate to min(end, our end of E, LEO) and start fetching; if we do not, truncate to our end of E (which
   drops our epochs above E) and ask again with our new latest epoch. Never to the high watermark (that loses
   acknowledged records when a follower's HW lags the leader's). UNDEFINED (-1, -1) -- the leader knows no epoch
   <= ours, so it is staler than us -- backs off until the next LeaderAndIsr. A log with no epoch information at
   all (batches written with partitionLeaderEpoch -1 by no leader) falls back to its high watermark.
2. one Fetch v11 for all the others (replica_id, current_leader_epoch, fetch_offset = LEO,
   ``replica.fetch.wait.max.ms`` / ``replica.fetch.min.bytes`` / ``replica.fetch.max.bytes`` per partition /
   ``replica.fetch.response.max.bytes``); the returned batches are appended verbatim (``Partition.
   append_as_follower``) and the follower HW becomes min(leader HW, own LEO).
Replication quota (KIP-73, ``settings["quota"]``: the broker's follower ``ReplicationQuota``, kbroker/quota/
replication.py): while it is exceeded, a throttled partition that has not caught up with the leader's high watermark
is left out of the Fetch (Kafka's shouldFollowerThrottle); the bytes appended for throttled partitions are recorded.
When every ready partition is left out the loop re-checks every 100 ms (Kafka waits replica.fetch.backoff.ms, 1 s,
which holds the rate well below the bound).
Per-partition errors: OFFSET_OUT_OF_RANGE -> if our LEO is below the leader's log start, truncate fully and start
there, else reconcile again by epoch; NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
UNKNOWN_TOPIC_OR_PARTITION and anything else -> that partition waits ``replica.fetch.backoff.ms`` (the next
LeaderAndIsr replaces its state); UNKNOWN_LEADER_EPOCH (the leader is about to apply the same LeaderAndIsr) waits
at most 100 ms. A network error closes the connection and backs every partition off.

Every response is applied only to the partition state it was sent for: the ReplicaManager replaces a
partition's ``FetchState`` (or removes it) on each LeaderAndIsr, and an answer for a replaced state is dropped
(the partition may have become leader while the request was in flight).

Cost per round: O(partitions that changed), not O(partitions followed). The fetcher keeps which partitions may
differ from what the leader's session holds (``_changed``: added, removed, delayed or released, reconciled, or
named in the last answer -- every way a follower's fetch offset, log start or epoch moves goes through one of
those) and which are backed off (``_delayed``) or reconciling (``_truncating``), so an incremental round lists
only those. Re-listing and comparing every partition cost 5 ms a round at 5,000 followed partitions (11 ms at
10,000) on this machine, and a broker following 5,000 partitions fell ~55 s behind acks=all traffic of 2,000
records/s (bench/follower_rounds.py, docs/performance.md session 20). A full sweep every ``SWEEP_S`` still
compares them all (the old round), which catches what moves without the fetcher: a log start raised by this
broker's own retention. Full requests (a new session, sessionless leaders) and rounds under an exceeded
replication quota always list every partition.
"""
import logging
import socket
import struct
import time

import gevent
from gevent import socket as gsocket
from gevent.event import Event

from kbroker import errors
from kbroker._native import receive_buffer
from kbroker.log import dir_failure
from kbroker.protocol.apis import APIS
from kbroker.protocol.headers import decode_response_header, encode_request_header
from kbroker.replica.fetch_session_client import FetchSessionClient
from kbroker.security.client_channel import secure

log = logging.getLogger(__name__)

FETCH_KEY, FETCH_VERSION = 1, 11
EPOCH_KEY, EPOCH_VERSION = 23, 3
MAX_RESPONSE = 256 << 20
_SIZE = struct.Struct(">i")

THROTTLE_RECHECK_S = 0.1
SWEEP_S = 1.0       # the full comparison's period (module docstring): 5 ms a second at 5,000 partitions
_BACKOFF_ERRORS = frozenset([errors.NOT_LEADER_OR_FOLLOWER, errors.FENCED_LEADER_EPOCH, errors.UNKNOWN_LEADER_EPOCH,
                             errors.UNKNOWN_TOPIC_OR_PARTITION])


class LeaderConnection:
    """One gevent TCP connection to a leader, one request in flight, our own codec (no ApiVersions: the peer is a
    kbroker serving Fetch v11 and OffsetForLeaderEpoch v3). ``security``: how the leader's inter-broker listener is
    reached (``kbroker/security/client_channel.py`` ChannelSecurity: TLS with this broker's client context for that
    listener, then SASL), secured before the first request; None = plaintext."""

    def __init__(self, host, port, client_id, timeout, rcvbuf=None, security=None):
        self.host, self.port = host, port
        self.client_id = client_id
        sock = gsocket.create_connection((host, port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if rcvbuf and rcvbuf > 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock = secure(sock, host, security, timeout, client_id)
        self.correlation_id = 0

    def request(self, api_key, version, body):
        api = APIS[api_key]
        self.correlation_id = (self.correlation_id + 1) & 0x7FFFFFFF
        corr = self.correlation_id
        header = encode_request_header(api.request_header_version(version), api_key, version, corr, self.client_id)
        payload = bytes(header) + api.encode_request(version, body).getvalue()
        self.sock.sendall(_SIZE.pack(len(payload)) + payload)
        (size,) = _SIZE.unpack(self._recv_exact(4))
        if size < 4 or size > MAX_RESPONSE:
            raise errors.NetworkException("bad response size %d from %s:%d" % (size, self.host, self.port))
        frame = memoryview(self._recv_exact(size))
        got, pos = decode_response_header(frame, api.response_header_version(version))
        if got != corr:
            raise errors.NetworkException("correlation id %d, expected %d" % (got, corr))
        return api.decode_response(version, frame, pos)

    def _recv_exact(self, n):
        # Not zeroed (receive_buffer): every byte is filled below before anything reads it, and a short read
        # raises. bytearray(n) memsets the whole response first -- up to replica.fetch.response.max.bytes (10 MiB).
        buf = receive_buffer(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if k == 0:
                raise errors.NetworkException("connection to %s:%d closed" % (self.host, self.port))
            got += k
        return buf

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class FetchState:
    """One followed partition in one fetcher; replaced (never mutated across roles) on each LeaderAndIsr."""
    __slots__ = ("partition", "leader_epoch", "truncating", "delay_until", "in_sync", "lag", "since")

    def __init__(self, partition, leader_epoch, truncating=True, since=0):
        self.partition = partition
        self.leader_epoch = leader_epoch
        self.truncating = truncating
        self.delay_until = 0.0
        self.in_sync = False            # our LEO reached the leader's HW in the last response (replication quota)
        # Messages behind the leader's HW after the last response (Kafka's FetcherLagMetrics: max(0, leader HW -
        # our next fetch offset)); 0 until the first answer. The metrics' MaxLag is the largest of these.
        self.lag = 0
        self.since = since              # the fetcher's request count when this state was added

    def __repr__(self):
        return "FetchState(%s-%d epoch=%d truncating=%s)" % (self.partition.topic, self.partition.index,
                                                              self.leader_epoch, self.truncating)


class ReplicaFetcher:
    def __init__(self, broker_id, source_id, host, port, settings, client_id=None):
        """``settings``: dict with wait_ms, min_bytes, max_bytes, response_max_bytes, backoff_ms, socket_timeout_ms,
        rcvbuf (the replica.* keys), and optionally security (LeaderConnection's) and quota (the follower
        ReplicationQuota)."""
        self.broker_id = broker_id
        self.source_id = source_id
        self.host, self.port = host, port
        self.settings = settings
        self.client_id = client_id or "kbroker-replica-fetcher-%d-%d" % (broker_id, source_id)
        self.states = {}
        self.conn = None
        self._wakeup = Event()
        self._stopped = False
        self.greenlet = None
        self.rounds = 0                           # completed Fetch round trips (tests, metrics)
        self.session = FetchSessionClient()       # the leader's incremental fetch session (KIP-227)
        self._changed = set()                     # tps that may differ from the session's (module docstring)
        self._delayed = {}                        # tp -> its FetchState while backed off (delay_until ahead)
        self._truncating = set()                  # tps whose state reconciles by epoch before it fetches
        self._sweep_at = 0.0                      # monotonic time of the next full comparison
        self._sent = 0                            # Fetch requests built; a state applies answers of later ones

    def start(self):
        self.greenlet = gevent.spawn(self._run)
        return self

    # ------------------------------------------------------------------------------------------- membership
    def add_partition(self, tp, partition, leader_epoch):
        self.states[tp] = FetchState(partition, leader_epoch, since=self._sent)
        self._delayed.pop(tp, None)
        self._truncating.add(tp)
        self._changed.add(tp)
        self._wakeup.set()

    def remove_partition(self, tp):
        self._delayed.pop(tp, None)
        self._truncating.discard(tp)
        self._changed.add(tp)
        return self.states.pop(tp, None) is not None

    def stop(self):
        self._stopped = True
        self.states.clear()
        self._delayed.clear()
        self._truncating.clear()
        self._changed.clear()
        self._wakeup.set()
        if self.greenlet is not None and not self.greenlet.dead:
            self.greenlet.kill(block=False)
        self._close()

    def _close(self):
        self.session.reset()                      # the next Fetch is full and closes the old session
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    # ----------------------------------------------------------------------------------------------- loop
    def _run(self):
        backoff = self.settings["backoff_ms"] / 1000.0
        while not self._stopped:
            now = time.monotonic()
            if self._delayed:
                self._release(now)
            if len(self._delayed) >= len(self.states):            # nothing ready (``_delayed`` <= ``states``)
                self._wakeup.clear()
                waits = [st.delay_until - now for st in self._delayed.values()]
                self._wakeup.wait(min(waits) if waits else None)
                continue
            try:
                if self.conn is None:
                    self.conn = LeaderConnection(self.host, self.port, self.client_id,
                                                 self.settings["socket_timeout_ms"] / 1000.0,
                                                 self.settings.get("rcvbuf"), self.settings.get("security"))
                truncating = {tp: self.states[tp] for tp in self._truncating if tp not in self._delayed}
                if truncating:
                    self._reconcile(truncating)
                elif not self._fetch_round(now):
                    self._wakeup.clear()
                    self._wakeup.wait(THROTTLE_RECHECK_S)
            except gevent.GreenletExit:
                raise
            except Exception as e:  # noqa: BLE001 - network trouble or a dead leader: back off, reconnect
                if not self._stopped:
                    log.warning("replica fetcher %d -> %d (%s:%d): %s", self.broker_id, self.source_id, self.host,
                                self.port, e)
                self._close()
                until = time.monotonic() + backoff
                for tp, st in self.states.items():
                    if tp not in self._delayed:
                        st.delay_until = until
                        self._delayed[tp] = st

    def _delay(self, st, code=None):
        ms = self.settings["backoff_ms"]
        if code == errors.UNKNOWN_LEADER_EPOCH:
            # The leader has not applied the LeaderAndIsr we already have (sent to both at once): it will in a
            # moment, so retry sooner than a full backoff (1 s by default), which would add to every failover.
            ms = min(ms, 100)
        st.delay_until = time.monotonic() + ms / 1000.0
        tp = (st.partition.topic, st.partition.index)
        if self.states.get(tp) is st:
            self._delayed[tp] = st          # out of the session until released (the old round's behaviour)
            self._changed.add(tp)

    def _release(self, now):
        """Backed-off partitions whose time has come are fetchable again (and named in the next request)."""
        for tp, st in list(self._delayed.items()):
            if st.delay_until <= now:
                del self._delayed[tp]
                self._changed.add(tp)

    def _set_truncating(self, tp, st, flag):
        st.truncating = flag
        if self.states.get(tp) is st:
            if flag:
                self._truncating.add(tp)
            else:
                self._truncating.discard(tp)
            self._changed.add(tp)

    def _current(self, tp, st):
        return not self._stopped and self.states.get(tp) is st

    # ------------------------------------------------------------------------------------- reconciliation
    def _reconcile(self, states):
        topics = {}
        asked = {}
        for tp, st in states.items():
            part = st.partition
            latest = part.epoch_cache.latest_epoch
            if latest < 0:
                # Nothing to compare: an empty log needs no truncation; epoch-less data falls back to the HW.
                if part.log_end_offset > part.log_start_offset:
                    part.truncate_to(max(part.high_watermark, part.log_start_offset))
                self._set_truncating(tp, st, False)
                continue
            asked[tp] = st
            topics.setdefault(tp[0], []).append({"partition": tp[1], "current_leader_epoch": st.leader_epoch,
                                                 "leader_epoch": latest})
        if not topics:
            return
        body = {"replica_id": self.broker_id,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]}
        resp = self.conn.request(EPOCH_KEY, EPOCH_VERSION, body)
        for t in resp["topics"]:
            for pr in t["partitions"]:
                tp = (t["topic"], pr["partition"])
                st = asked.get(tp)
                if st is None or not self._current(tp, st):
                    continue
                code = pr["error_code"]
                if code:
                    log.info("%s-%d: OffsetForLeaderEpoch from %d: %s", tp[0], tp[1], self.source_id,
                             errors.error_name(code))
                    self._delay(st, code)
                    continue
                self._truncate(tp, st, pr["leader_epoch"], pr["end_offset"])

    def _truncate(self, tp, st, leader_epoch, end_offset):
        part = st.partition
        if leader_epoch < 0 or end_offset < 0:
            log.warning("%s-%d: leader %d knows no epoch <= %d; waiting for the next LeaderAndIsr", tp[0], tp[1],
                        self.source_id, part.epoch_cache.latest_epoch)
            self._delay(st)
            return
        leo = part.log_end_offset
        our_epoch, our_end = part.epoch_cache.end_offset_for(leader_epoch, leo)
        if our_epoch == leader_epoch:
            part.truncate_to(min(end_offset, our_end, leo))
            self._set_truncating(tp, st, False)
        else:
            # We never had the leader's epoch: drop our epochs above it and ask again (KIP-279).
            target = leo if our_end < 0 else min(our_end, leo)
            part.truncate_to(target)
            part.epoch_cache.truncate_from_end(target)    # progress even when no byte was cut

    # ---------------------------------------------------------------------------------------------- fetch
    def _unthrottled(self, states):
        """``states`` without the throttled partitions not caught up, while the follower quota is exceeded."""
        quota = self.settings.get("quota")
        if quota is None or not quota.bounded or not quota.is_quota_exceeded():
            return states
        return {tp: st for tp, st in states.items() if st.in_sync or not quota.is_throttled(tp)}

    def _throttling(self):
        quota = self.settings.get("quota")
        return quota is not None and quota.bounded and quota.is_quota_exceeded()

    def _request(self, st):
        part = st.partition
        return {"partition": part.index, "current_leader_epoch": st.leader_epoch,
                "fetch_offset": part.log_end_offset, "log_start_offset": part.log_start_offset,
                "partition_max_bytes": self.settings["max_bytes"]}

    def _fetch_round(self, now):
        """One Fetch of the fetchable partitions (not backed off, not reconciling, not throttled); False when the
        quota leaves none. Incremental and not due for a sweep: only ``_changed`` is listed (module docstring)."""
        delayed, truncating = self._delayed, self._truncating
        throttled = self._throttling()
        if self.session.incremental and not throttled and now < self._sweep_at:
            changed, self._changed = self._changed, set()
            wanted = {}
            for tp in changed:
                st = self.states.get(tp)
                if st is not None and tp not in delayed and tp not in truncating:
                    wanted[tp] = self._request(st)
            self._fetch(wanted, changed)
            return True
        fetchable = {tp: st for tp, st in self.states.items() if tp not in delayed and tp not in truncating}
        if throttled:
            fetchable = self._unthrottled(fetchable)
            if not fetchable:
                return False
            # the session's partitions differ from the unthrottled ones' next round: compare them all again then
            self._sweep_at = 0.0
        else:
            self._sweep_at = now + SWEEP_S
        self._changed = set()
        self._fetch({tp: self._request(st) for tp, st in fetchable.items()}, None)
        return True

    def _fetch(self, wanted, changed):
        s = self.settings
        # An incremental session (KIP-227) sends only the partitions whose fields changed; the leader answers only
        # the partitions that changed (kbroker/replica/fetch_session_client.py).
        session_id, epoch, send, forgotten = self.session.build(wanted, changed)
        self._sent += 1
        sent = self._sent
        topics, gone = {}, {}
        for tp, req in send.items():
            topics.setdefault(tp[0], []).append(req)
        for topic, p in forgotten:
            gone.setdefault(topic, []).append(p)
        body = {"replica_id": self.broker_id, "max_wait_ms": s["wait_ms"], "min_bytes": s["min_bytes"],
                "max_bytes": s["response_max_bytes"], "isolation_level": 0, "session_id": session_id,
                "session_epoch": epoch, "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
                "forgotten_topics_data": [{"topic": t, "partitions": ps} for t, ps in gone.items()], "rack_id": ""}
        resp = self.conn.request(FETCH_KEY, FETCH_VERSION, body)
        self.rounds += 1
        if not self.session.handle_response(resp):
            code = resp["error_code"]
            if code in (errors.FETCH_SESSION_ID_NOT_FOUND, errors.INVALID_FETCH_SESSION_EPOCH):
                # The leader lost or moved past our session (evicted, restarted): the next round is a full fetch
                # at once, as Kafka's fetcher does (no backoff).
                log.info("fetch session %d with %d: %s; starting a new one", session_id, self.source_id,
                         errors.error_name(code))
                return
            log.warning("fetch from %d: %s", self.source_id, errors.error_name(resp["error_code"]))
            for tp in wanted if changed is None else list(self.states):
                st = self.states.get(tp)
                if st is not None and tp not in self._delayed and tp not in self._truncating:
                    self._delay(st)
            return
        states, delayed, marked = self.states, self._delayed, self._changed
        for t in resp["responses"]:
            for pd in t["partitions"]:
                tp = (t["topic"], pd["partition_index"])
                st = states.get(tp)
                # Only the state this request was built for: one added since (a LeaderAndIsr during the long
                # poll), one reconciling or backed off since, or a replaced one gets nothing.
                if st is None or st.since >= sent or st.truncating or tp in delayed or self._stopped:
                    continue
                marked.add(tp)          # its fetch offset / log start may move: named in the next request
                try:
                    self._apply(tp, st, pd)
                except Exception:  # noqa: BLE001 - one bad partition must not stop the others
                    log.exception("%s-%d: applying the fetch from %d failed", tp[0], tp[1], self.source_id)
                    self._delay(st)

    def _apply(self, tp, st, pd):
        part = st.partition
        code = pd["error_code"]
        if code == 0:
            records = pd["records"]
            if records:
                if dir_failure.SLOW:               # tests only: a slow follower disk (kbroker/log/dir_failure.py)
                    gevent.sleep(dir_failure.slow_delay(part.log.dir))
                    if not self._current(tp, st):
                        return
                part.append_as_follower(records)
                quota = self.settings.get("quota")
                if quota is not None and quota.is_throttled(tp):
                    quota.record(len(records))
            part.update_follower_hw(pd["high_watermark"])
            part.apply_leader_log_start_offset(pd["log_start_offset"])     # DeleteRecords reaches every replica
            st.in_sync = part.log_end_offset >= pd["high_watermark"]
            st.lag = max(0, pd["high_watermark"] - part.log_end_offset)
        elif code == errors.OFFSET_OUT_OF_RANGE:
            leader_start = pd["log_start_offset"]
            if 0 <= part.log_end_offset < leader_start:
                part.truncate_fully_and_start_at(leader_start)
            else:
                self._set_truncating(tp, st, True)    # we are ahead of the leader: reconcile by epoch again
                self._delay(st)
        else:
            if code not in _BACKOFF_ERRORS:
                log.warning("%s-%d: fetch from %d: %s", tp[0], tp[1], self.source_id, errors.error_name(code))
            self._delay(st, code)
