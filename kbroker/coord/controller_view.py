"""Who the controller is, as the coordination store says: the content of ``/controller`` and ``/controller_epoch``.

A broker accepts controller requests (LeaderAndIsr, UpdateMetadata, StopReplica) only from the current controller:
the request's ``controller_id`` must be the broker id in ``/controller`` and its ``controller_epoch`` the number in
``/controller_epoch`` (issue 8: a client's UpdateMetadata with a made-up epoch had been believed). ``ControllerView``
keeps both from two data watches, so a check costs no coordination round trip.

``controller_id`` is -1 while ``/controller`` is absent (no controller elected), ``epoch`` -1 while
``/controller_epoch`` is absent; unreadable content counts as absent.

``is_current(controller_id, epoch, timeout)``: True when the pair matches. A lower epoch is refused at once (an
earlier controller). Any other mismatch may be our view lagging: a controller elected a moment ago wrote
``/controller`` and ``/controller_epoch`` before its request reached us, and our watches (served by our own
ZooKeeper server, possibly a follower a few milliseconds behind) have not fired yet -- or this broker's session
just expired and the two watches are re-reading their nodes in the new session, in no particular order, so the
view can briefly pair the new epoch with the old id (seen in test_cluster_failover: a resumed ex-controller refused
its successor's first LeaderAndIsr and never got another). Such a request waits, at most ``timeout`` seconds, for
the view to change to the request's pair before it is refused. The wait holds only the asking request's greenlet
(the watch callbacks run elsewhere), never the event loop; a forged request just waits for its refusal.
"""
import logging
import time

from gevent.event import Event

from .znodes import ControllerEpochZNode, ControllerZNode

log = logging.getLogger("kbroker.coord.controller_view")


class ControllerView:
    def __init__(self, backend):
        self.backend = backend
        self.controller_id = -1
        self.epoch = -1
        self._changed = Event()
        self._watches = []

    def start(self):
        """Register the two watches (each is called once now, so the view is filled on return). Returns self."""
        self._watches = [self.backend.watch_data(ControllerZNode.path(), self._on_controller),
                         self.backend.watch_data(ControllerEpochZNode.path(), self._on_epoch)]
        return self

    def stop(self):
        for w in self._watches:
            w.cancel()
        self._watches = []
        self._wake()

    def _wake(self):
        ev, self._changed = self._changed, Event()
        ev.set()

    def _on_controller(self, data, stat):
        cid = -1
        if data is not None:
            try:
                cid = ControllerZNode.decode(data)
            except (ValueError, KeyError, TypeError):
                log.warning("unreadable /controller %r", data[:100])
        self.controller_id = cid
        self._wake()

    def _on_epoch(self, data, stat):
        epoch = -1
        if data is not None:
            try:
                epoch = ControllerEpochZNode.decode(data)
            except (ValueError, TypeError):
                log.warning("unreadable /controller_epoch %r", data[:100])
        self.epoch = epoch
        self._wake()

    def current(self):
        return self.controller_id, self.epoch

    def is_current(self, controller_id, epoch, timeout=0.0):
        """True when (controller_id, epoch) is the current controller; False at once for an epoch below the view's,
        else after waiting up to ``timeout`` s for the view to match (see the module docstring)."""
        deadline = time.monotonic() + timeout
        while True:
            if epoch == self.epoch and controller_id == self.controller_id and epoch >= 0 and controller_id >= 0:
                return True
            if epoch < self.epoch or epoch < 0 or controller_id < 0:
                return False
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._changed.wait(remaining)
