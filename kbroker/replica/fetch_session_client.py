"""Incremental fetch sessions (KIP-227), the fetching side: Kafka's FetchSessionHandler for one leader connection.

``build(partitions, changed=None)`` takes what the fetcher wants this round -- {(topic, p): partition request dict}
in its order; in a session, with ``changed``, only the wanted ones among the partitions that may have moved (the
method's docstring) -- and returns ``(session_id, session_epoch, to_send, forgotten)``:
* no session yet (epoch 0, id 0 or the id of one to close): a full request naming every partition;
* in a session (epoch > 0): only the partitions added since the last request or whose request fields changed
  (fetch offset, log start offset, leader epoch, max bytes), and ``forgotten`` = the session's partitions not
  wanted any more. An unchanged idle partition is not sent at all.
``handle_response(resp)`` (the decoded Fetch answer) advances the state and says whether the answer is usable:
* error 70 FETCH_SESSION_ID_NOT_FOUND -> the next request is full without a session id; any other top-level error
  (71 INVALID_FETCH_SESSION_EPOCH, ...) -> full, closing the session (Kafka's nextCloseExisting); False returned.
* a full request answered with session id 0 -> the leader keeps no session (no slot): stay sessionless, every
  request full; with an id -> that session, next epoch 1.
* an incremental request answered with id 0 -> the leader closed the session: full again; else epoch + 1.
``reset()`` after a network error: the next request is full and closes the old session (it may survive on the
leader until evicted otherwise). ``partitions`` are what the leader's session holds, by the last request sent.
Answers of an incremental request carry only the changed partitions; a partition not in the answer is unchanged.
"""
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
FETCH_SESSION_ID_NOT_FOUND = 70
INT32_MAX = 0x7FFFFFFF
_COMPARED = ("fetch_offset", "log_start_offset", "current_leader_epoch", "partition_max_bytes")


def _next_epoch(epoch):
    return 1 if epoch == INT32_MAX else epoch + 1


class FetchSessionClient:
    """One leader's session as this fetcher sees it (module docstring). Counters: ``full_requests``,
    ``incremental_requests``, ``partitions_sent`` (partition entries in requests: what sessions save)."""

    def __init__(self):
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self.partitions = {}           # {tp: the request fields last sent}, in session order
        self._pending = None           # (full?, partitions after the request) until its answer
        self.full_requests = 0
        self.incremental_requests = 0
        self.partitions_sent = 0

    @property
    def incremental(self):
        """Whether the next request is incremental (a session is open): only then may ``build`` take ``changed``."""
        return self.epoch != INITIAL_EPOCH and self.session_id != 0

    def build(self, wanted, changed=None):
        """``wanted``: {tp: request} of every partition wanted this round -- or, with ``changed`` (the partitions
        that may have changed since the last request: new, moved, no longer wanted), of the wanted ones among
        ``changed`` only; every other session partition is then taken as wanted and unchanged. That makes an
        incremental round O(changed partitions), not O(partitions followed): 5,000 followed partitions cost a
        follower 5 ms a round to re-list and compare (``ReplicaFetcher`` marks what moved). A full request needs
        the whole ``wanted`` (ValueError with ``changed``)."""
        if not self.incremental:
            if changed is not None:
                raise ValueError("a full fetch request names every wanted partition: no 'changed' subset")
            self._pending = (True, dict(wanted), ())
            self.full_requests += 1
            self.partitions_sent += len(wanted)
            return self.session_id, INITIAL_EPOCH, dict(wanted), []
        send = {}
        partitions = self.partitions
        for tp, req in wanted.items():
            old = partitions.get(tp)
            if old is None or any(old.get(k) != req.get(k) for k in _COMPARED):
                send[tp] = req
        if changed is None:
            forgotten = [tp for tp in partitions if tp not in wanted]
        else:
            forgotten = [tp for tp in changed if tp in partitions and tp not in wanted]
        # The session after this request, as a change to apply when it is answered (no copy of the session).
        self._pending = (False, send, forgotten)
        self.incremental_requests += 1
        self.partitions_sent += len(send)
        return self.session_id, self.epoch, send, forgotten

    def handle_response(self, resp):
        full, sent, forgotten = self._pending if self._pending is not None else (True, {}, ())
        self._pending = None
        code = resp.get("error_code") or 0
        if code:
            if code == FETCH_SESSION_ID_NOT_FOUND:
                self.session_id = 0
            self.epoch = INITIAL_EPOCH
            self.partitions = {}
            return False
        sid = resp.get("session_id") or 0
        if sid == 0:
            self.session_id, self.epoch = 0, INITIAL_EPOCH     # sessionless (no slot) or closed by the leader
            self.partitions = {}
            return True
        if full:
            self.session_id = sid
            self.epoch = 1
            self.partitions = sent
        else:
            self.epoch = _next_epoch(self.epoch)
            for tp in forgotten:
                self.partitions.pop(tp, None)
            self.partitions.update(sent)
        return True

    def reset(self):
        """A network error: the next request is full and closes the old session (Kafka's handleError)."""
        self._pending = None
        self.epoch = INITIAL_EPOCH
        self.partitions = {}
