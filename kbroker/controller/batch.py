"""Collects the controller's requests while one event is handled, then sends one request per (broker, API).

Kafka's ControllerBrokerRequestBatch: state changes during an event add LeaderAndIsr partition states, StopReplica
partitions and UpdateMetadata partitions per destination broker; ``send(controller)`` builds the bodies (versions
in ``channel.VERSIONS``) and queues them, per broker in the order LeaderAndIsr, UpdateMetadata, StopReplica. Each
carries the controller's id and epoch and the destination's broker epoch (``controller.brokers.broker_epoch(b)``,
KIP-380). LeaderAndIsr states are frozen ``PartitionLeadership`` values until ``send`` encodes them (``to_wire``).
UpdateMetadata partition states are read from the controller at send time
(``controller.partitions.update_metadata_state``), so they carry the final state of the event (a partition deleted
meanwhile is sent with leader -2, LeaderDuringDelete).

Size: a request carries at most ``MAX_ELEMENTS`` (90,000) decoded values -- each partition state, its fields,
the entries of its replica lists (~15 at RF 2) and its topic's entry -- and a larger set goes as several requests
of the same API in a row, each a complete request (partition states are independent; every UpdateMetadata repeats
the live brokers). A receiving broker refuses a request of more than ``request.max.elements`` (100,000 by default,
kbroker/server/limits.py) and closes the connection: with 27,000 partitions at RF 2 one UpdateMetadata of every
partition (~400,000 values) and the LeaderAndIsr of a restarted broker's 18,000 were refused over and over, and
the cluster never converged (docs/performance.md, issue 15 session 9). Kafka has no such limit and sends one
request; splitting changes nothing a broker can observe but the number of requests. 90 % of the default limit
(or of this broker's own ``request.max.elements`` when that is lower: ``element_budget``) leaves room for what the
count leaves out: the live brokers or leaders of each request (~15 values a broker: 10,000
are ~650 brokers) and any tagged fields. Fewer, larger requests matter in a failover: each LeaderAndIsr that makes
a broker leader waits for one syncfs of its leader-epoch checkpoints (0.1-0.7 s on this machine's disk), and a
broker applies its requests one after another -- at 50,000 a survivor of a 27,000-partition cluster got three
LeaderAndIsr and six UpdateMetadata after a kill (chunks of ~3,600 and ~3,000 states), now about half as many.
"""
import logging

from kbroker import errors

from .channel import LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA

log = logging.getLogger("kbroker.controller")

ALL = object()  # UpdateMetadata for every partition
MAX_ELEMENTS = 90_000


def _weight(wire):
    """What one partition state costs a receiver's element budget (``schema.py``: an array's struct element is
    itself plus each of its field values): 1 + its fields + the entries of its lists (replicas, isr, ...). The
    dict may hold fields the sent version lacks: an overestimate, which only makes the chunks smaller."""
    return 1 + len(wire) + sum(len(v) for v in wire.values() if isinstance(v, list))


def element_budget(controller):
    """The values one controller request may carry: ``MAX_ELEMENTS``, or 90 % of this broker's own
    ``request.max.elements`` when that is lower (an operator who lowered it did so on every broker, as a rule; a
    receiver refusing the requests would never converge)."""
    return max(1, min(MAX_ELEMENTS, int(controller.cfg("request.max.elements")) * 9 // 10))


def _chunks(wire_states, tick, budget=None, weights=None):
    """{tp: wire state} -> [{tp: wire state}, ...] in partition order, each under ``budget`` (default
    ``MAX_ELEMENTS``) values (its topic entries included: 3 each, the entry and its two fields; the request's other
    fields are not counted). ``tick()`` runs once per partition (the controller's time slice). ``weights``: {tp:
    ``_weight`` of its state} where the caller keeps them (an UpdateMetadata state goes to every broker: weighed
    once, not once per recipient -- 7 % of the controller broker's samples in a 27,000-partition failover)."""
    budget = MAX_ELEMENTS if budget is None else budget
    out, cur, size, topic = [], {}, 0, None
    for tp, st in sorted(wire_states.items()):
        tick()
        w = weights[tp] if weights is not None else _weight(st)
        if cur and size + w + 3 * (tp[0] != topic) > budget:
            out.append(cur)
            cur, size = {}, 0
        size += w + 3 * (not cur or tp[0] != topic)
        cur[tp] = st
        topic = tp[0]
    if cur or not out:
        out.append(cur)
    return out


def _group(tps_to_state):
    """{(topic, p): state} in topic, partition order (a ``_chunks`` chunk) -> [{"topic_name", "partition_states":
    [...]}] in that order."""
    out = {}
    for (topic, _p), st in tps_to_state.items():
        out.setdefault(topic, []).append(st)
    return [{"topic_name": t, "partition_states": states} for t, states in out.items()]


def _log_errors(api_key, bid):
    """The callback of a request nobody waits for: a broker's error is logged (the next event re-sends state)."""
    def cb(resp):
        if resp.get("error_code"):
            log.warning("broker %d answered controller request %d with error %s", bid, api_key,
                        errors.error_name(resp["error_code"]))
    return cb


def _leader_and_isr_answer(controller, bid):
    """A LeaderAndIsr's callback: errors logged, and the partitions answered KAFKA_STORAGE_ERROR (a failed log dir,
    KIP-112) handed to the controller's LogDirs, as Kafka's controller reads every LeaderAndIsr response."""
    logged = _log_errors(LEADER_AND_ISR, bid)
    dirs = getattr(controller, "log_dirs", None)
    if dirs is None:
        return logged
    offline = dirs.answer_callback(bid)

    def cb(resp):
        logged(resp)
        offline(resp)
    return cb


class RequestBatch:
    def __init__(self):
        self.leader_and_isr = {}
        self.stop_replica = {}
        self.update_metadata = {}
        self.stop_callbacks = {}
        self.leader_and_isr_callbacks = {}   # broker -> fn(response) (log_dirs.py reads the 56s; default: logged)

    def add_leader_and_isr(self, brokers, state):
        """``state``: a ``kbroker.cluster_state.PartitionLeadership`` (encoded with ``to_wire`` at send time)."""
        for b in brokers:
            self.leader_and_isr.setdefault(b, {})[state.tp] = state

    def add_stop_replica(self, brokers, tp, delete, leader_epoch=-1, callback=None):
        """``callback(broker_id, response)`` runs when that broker answers (used by topic deletion)."""
        for b in brokers:
            prev = self.stop_replica.setdefault(b, {}).get(tp)
            # A delete wins over a plain stop for the same partition in one batch.
            self.stop_replica[b][tp] = (bool(delete) or bool(prev and prev[0]), leader_epoch)
            if callback is not None:
                self.stop_callbacks[b] = callback

    def add_update_metadata(self, brokers, tps=ALL):
        for b in brokers:
            cur = self.update_metadata.get(b)
            if tps is ALL or cur is ALL:
                self.update_metadata[b] = ALL
            elif cur is None:
                self.update_metadata[b] = set(tps)
            else:
                cur.update(tps)  # in place: called once per partition, a copy each time was O(n^2) for n partitions

    def send(self, controller):
        """Queue everything on ``controller.channel``; the batch is empty afterwards."""
        cid, epoch = controller.broker_id, controller.epoch
        brokers, partitions = controller.brokers, controller.partitions
        tick = controller.tick                            # once per partition state built
        budget = element_budget(controller)
        for b, states in sorted(self.leader_and_isr.items()):
            wire, weights = {}, {}
            for tp, s in states.items():
                tick()
                wire[tp] = s.to_wire()
                weights[tp] = s.wire_weight()   # = _weight(wire[tp]) without walking the dict
            for chunk in _chunks(wire, tick, budget, weights):
                leaders = sorted({st["leader"] for st in chunk.values() if st["leader"] >= 0})
                live_leaders = []
                for lid in leaders:
                    ep = brokers.inter_broker_endpoint(lid)
                    if ep is not None:
                        live_leaders.append({"broker_id": lid, "host_name": ep[0], "port": ep[1]})
                body = {"controller_id": cid, "controller_epoch": epoch, "broker_epoch": brokers.broker_epoch(b),
                        "topic_states": _group(chunk), "live_leaders": live_leaders}
                controller.channel.send(b, LEADER_AND_ISR, body, self.leader_and_isr_callbacks.get(b)
                                        or _leader_and_isr_answer(controller, b))
        if self.update_metadata:
            live = brokers.update_metadata_brokers()
            built = {}      # tp -> its state, built once for every recipient (read-only once built)
            weights = {}    # tp -> _weight of its state
            for b, tps in sorted(self.update_metadata.items()):
                if tps is ALL:
                    tps = partitions.all_partitions()
                states = {}
                for tp in tps:
                    tick()
                    st = built.get(tp)
                    if st is None:
                        st = built[tp] = partitions.update_metadata_state(tp)
                        weights[tp] = _weight(st)
                    states[tp] = st
                for chunk in _chunks(states, tick, budget, weights):
                    body = {"controller_id": cid, "controller_epoch": epoch, "broker_epoch": brokers.broker_epoch(b),
                            "topic_states": _group(chunk), "live_brokers": live}
                    controller.channel.send(b, UPDATE_METADATA, body, _log_errors(UPDATE_METADATA, b))
        for b, parts in sorted(self.stop_replica.items()):
            states = {tp: {"partition_index": tp[1], "leader_epoch": le, "delete_partition": d}
                      for tp, (d, le) in parts.items()}
            cb = self.stop_callbacks.get(b)
            for chunk in _chunks(states, tick, budget):
                body = {"controller_id": cid, "controller_epoch": epoch, "broker_epoch": brokers.broker_epoch(b),
                        "topic_states": _group(chunk)}
                controller.channel.send(b, STOP_REPLICA, body,
                                        (lambda resp, b=b, cb=cb: cb(b, resp)) if cb is not None
                                        else _log_errors(STOP_REPLICA, b))
        self.__init__()
