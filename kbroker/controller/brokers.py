"""Controller collaborator: the live brokers -- registrations, broker epochs, channel connections, endpoints -- and
the BrokerChange event (failure, startup, bounce).

State (``ctx``, state.py): ``live_brokers`` {id: BrokerRegistration} and ``broker_epochs`` {id: epoch} are written
only here; ``shutting_down`` is filled by ControlledShutdown and emptied here when the broker goes.

Broker epochs (KIP-380): a broker's epoch is the czxid of its ``/brokers/ids/<id>`` node, so each registration --
a restart, or a new session after an expiry -- has a new, larger one. The controller reads every live broker's
epoch with its registration and stamps it on each LeaderAndIsr / UpdateMetadata / StopReplica to that broker
(``broker_epoch``); the broker refuses any other value (STALE_BROKER_EPOCH 77), so requests meant for an earlier
incarnation are not applied to a new one. On every ``/brokers/ids`` change the controller compares the epochs: a
broker still listed but with another epoch was *bounced* -- killed and restarted, and registered again, between two
reads of the children ([1,2,3] -> [1,2] -> [1,2,3]; issue 8: its partitions stayed led by a broker that knew
nothing of them) -- and is handled as a failure followed by a startup: leadership and ISR membership move away
from it, then it gets LeaderAndIsr for all its replicas and every broker an UpdateMetadata naming it. The same
epochs authenticate ControlledShutdown: the request must carry the named broker's current epoch.

Controller requests go to each broker's ``control.plane.listener.name`` endpoint when that is configured (KIP-291;
brokers then accept them only there), else to its inter-broker endpoint.

Runs in the controller's event greenlet; uses the core's narrow surface (controller.py docstring).
"""
import logging
import time

from kbroker.cluster_state import PartitionLeadership
from kbroker.coord.errors import NoNodeError
from kbroker.coord.znodes import BrokerIdZNode

from .batch import ALL, RequestBatch
from .state import R_DELETION_INELIGIBLE, R_DELETION_SUCCESSFUL, OFFLINE, R_OFFLINE, R_ONLINE

log = logging.getLogger("kbroker.controller")

SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


class Brokers:
    def __init__(self, core):
        self.core = core

    # ------------------------------------------------------------------------------------------------ reading ZK

    def load(self):
        """New term: the registered brokers and their epochs; the channel connects to each."""
        ctx = self.core.ctx
        for bid in self._read_ids():
            reg, epoch = self._read_registration(bid)
            if reg is not None:
                ctx.live_brokers[bid] = reg
                ctx.broker_epochs[bid] = epoch
        for bid, reg in ctx.live_brokers.items():
            self._connect(bid, reg)

    def _read_ids(self):
        try:
            return sorted(int(c) for c in self.core.backend.get_children("/brokers/ids"))
        except NoNodeError:
            return []

    def _read_registration(self, bid):
        """(BrokerRegistration, broker epoch = the node's czxid), or (None, -1) when the broker is not registered
        or its node cannot be read."""
        data, stat = self.core.backend.get_or_none(BrokerIdZNode.path(bid))
        if data is None:
            return None, -1
        try:
            return BrokerIdZNode.decode(data), stat.czxid
        except (ValueError, KeyError, TypeError):
            log.error("unreadable registration of broker %d: %r; ignoring the broker", bid, data[:200])
            return None, -1

    # ------------------------------------------------------------------------------------------------ endpoints

    def _connect(self, bid, reg):
        ep = self._listener_endpoint(reg, control=True)
        if ep is not None:
            self.core.channel.add_broker(bid, ep[1], ep[2], listener=ep[0])

    def _endpoint(self, reg, control=False):
        """(host, port) of ``_listener_endpoint``, or None."""
        ep = self._listener_endpoint(reg, control)
        return (ep[1], ep[2]) if ep is not None else None

    def _listener_endpoint(self, reg, control=False):
        """(listener, host, port) of a registration's inter-broker listener -- inter.broker.listener.name, else
        the first listener whose protocol is security.inter.broker.protocol, as the broker config resolves it; with
        ``control``, its ``control.plane.listener.name`` endpoint when both sides have one (where controller requests
        go). None when the broker has no such listener: connecting to another one would use other security than
        configured (Kafka fails the same way: BrokerEndPointNotAvailable)."""
        cfg = self.core.cfg
        cp = (cfg("control.plane.listener.name") or "").strip().upper() if control else None
        if cp:
            for name, host, port in reg.endpoints:
                if name.upper() == cp:
                    return name, host, port
        want = (cfg("inter.broker.listener.name") or "").strip().upper()
        proto = cfg("security.inter.broker.protocol")
        for name, host, port in reg.endpoints:
            if want and name.upper() == want:
                return name, host, port
        if not want:
            for name, host, port in reg.endpoints:
                if reg.security_protocol_map.get(name, name) == proto:
                    return name, host, port
            if proto == "PLAINTEXT" and reg.endpoints:
                # Unset keys on a broker whose listeners have other names: the first listener, as the broker
                # config resolves inter_broker_listener then.
                return reg.endpoints[0]
        log.error("broker registration %s has no endpoint for the inter-broker listener (%s); not connecting",
                  [n for n, _, _ in reg.endpoints], want or "protocol %s" % proto)
        return None

    # ------------------------------------------------------------------------------------------------ queries

    def leaders_allowed(self):
        """Brokers that may lead: live and not shutting down."""
        ctx = self.core.ctx
        return set(ctx.live_brokers) - ctx.shutting_down

    def broker_epoch(self, bid):
        """The epoch stamped on requests to ``bid`` (-1 for a broker not live or while not active)."""
        ctx = self.core.ctx
        return ctx.broker_epochs.get(bid, -1) if ctx else -1

    def inter_broker_endpoint(self, bid):
        ctx = self.core.ctx
        reg = ctx.live_brokers.get(bid) if ctx else None
        return self._endpoint(reg) if reg is not None else None

    def update_metadata_brokers(self):
        """The live_brokers list of an UpdateMetadata v6 (every endpoint of every live broker)."""
        out = []
        for bid, reg in sorted(self.core.ctx.live_brokers.items()):
            eps = [{"port": port, "host": host, "listener": name,
                    "security_protocol": SECURITY_PROTOCOL_IDS.get(reg.security_protocol_map.get(name, name), 0)}
                   for name, host, port in reg.endpoints]
            out.append({"id": bid, "endpoints": eps, "rack": reg.rack})
        return out

    # ------------------------------------------------------------------------------------------------ BrokerChange

    def on_change(self, _event):
        """Diff ``/brokers/ids`` and each registration's epoch against the live brokers: gone -> failure, new ->
        startup, same id with another epoch (bounced) -> failure, then startup (module docstring)."""
        ctx = self.core.ctx
        regs = {}
        for bid in self._read_ids():
            reg, epoch = self._read_registration(bid)
            if reg is not None:
                regs[bid] = (reg, epoch)
        live = set(ctx.live_brokers)
        new = sorted(set(regs) - live)
        dead = sorted(live - set(regs))
        bounced = sorted(bid for bid in set(regs) & live if regs[bid][1] != ctx.broker_epochs.get(bid))
        for bid in bounced:
            log.info("controller: broker %d registered again (broker epoch %d -> %d): handled as failed, then started",
                     bid, ctx.broker_epochs.get(bid, -1), regs[bid][1])
        if dead or bounced:
            self._on_failure(sorted(dead + bounced))
        if new or bounced:
            self._on_startup(sorted(new + bounced), regs)

    def _on_failure(self, dead):
        core = self.core
        ctx = core.ctx
        log.info("controller: brokers %s failed", dead)
        started = time.monotonic()
        for bid in dead:
            ctx.live_brokers.pop(bid, None)
            ctx.broker_epochs.pop(bid, None)
            ctx.shutting_down.discard(bid)
            core.channel.remove_broker(bid)
            core.log_dirs.forget_broker(bid)
        batch = RequestBatch()
        dead_set = set(dead)
        affected = []
        for tp, replicas in sorted(ctx.assignments.items()):
            if not dead_set & set(replicas):
                continue
            affected.append(tp)
            if tp[0] in ctx.topics_to_delete:
                for r in replicas:
                    if r in dead_set and ctx.replica_states.get((tp, r)) != R_DELETION_SUCCESSFUL:
                        ctx.replica_states[(tp, r)] = R_DELETION_INELIGIBLE
                continue
            st = ctx.leadership.get(tp)
            if st is not None and st.leader in dead_set:
                ctx.partition_states[tp] = OFFLINE
        # Elections, then the dead replicas out of the other ISRs: each one batched write (ZooKeeper multi
        # transactions, partitions.write_many): an election is one leader epoch + 1 per partition however many
        # replicas failed; an ISR removal under a leader that stays keeps the epoch (partitions.py's docstring).
        # The elections' requests go out as soon as they are written, before the ISR removals are (Kafka's
        # onReplicasBecomeOffline sends after triggerOnlinePartitionStateChange, then again after the replica state
        # changes): the partitions without a leader are the ones whose clients wait, and their LeaderAndIsr and
        # UpdateMetadata are applied while the controller writes the removals. At 27,000 partitions x RF 2 the
        # removals are half the write (9,000 of 18,000 states, ~0.45 s) and half of each broker's requests.
        # And each ZooKeeper transaction's elections go out as soon as that transaction is in, while ZooKeeper
        # applies the next ones (write_many's on_written): 13,500 elections are 14 transactions and ~1.1 s of
        # writing here, time the survivors spend applying the first ones' LeaderAndIsr instead of waiting for all.
        live = sorted(ctx.live_brokers)

        def send_elected(part):
            for tp in part:
                for r in ctx.assignments[tp]:
                    if r in dead_set:
                        ctx.replica_states[(tp, r)] = R_OFFLINE
            batch.add_update_metadata(live, sorted(part))
            core.send(batch)
        elected = core.partitions.trigger_online(batch, on_elected=send_elected)
        elected_ms = (time.monotonic() - started) * 1000.0
        core.partitions.remove_many(batch, {tp: [r for r in ctx.assignments[tp] if r in dead_set] for tp in affected
                                            if tp[0] not in ctx.topics_to_delete and tp not in elected}, dead=True)
        log.info("controller: brokers %s failed: %d leaders elected (written and sent in %.0f ms), %d partitions "
                 "affected, state written in %.0f ms", dead, len(elected), elected_ms, len(affected),
                 (time.monotonic() - started) * 1000.0)
        batch.add_update_metadata(sorted(ctx.live_brokers), [tp for tp in affected if tp not in elected])
        core.send(batch)

    def _on_startup(self, new, regs):
        """``regs``: {id: (registration, epoch)} as the broker-change handler read them."""
        core = self.core
        ctx = core.ctx
        log.info("controller: brokers %s started", new)
        for bid in new:
            reg, epoch = regs[bid]
            ctx.live_brokers[bid] = reg
            ctx.broker_epochs[bid] = epoch
            self._connect(bid, reg)
        new = [b for b in new if b in ctx.live_brokers]
        # Every live broker's endpoints reach the new brokers before any LeaderAndIsr (Kafka's onBrokerStartup
        # sends this UpdateMetadata first): a follower looks its leader up on its *own* inter-broker listener in
        # the metadata cache, which differs from the controller's while a cluster is rolled to another
        # security.inter.broker.protocol (section 7.5); without it, a restarted broker's first fetchers would use
        # live_leaders (the controller's listener) and never get in.
        # Only to the new brokers: the others learn the new endpoints from the batch below, and an UpdateMetadata of
        # every partition costs a full encode per recipient.
        first = RequestBatch()
        first.add_update_metadata(sorted(new), ALL)
        core.send(first)
        batch = RequestBatch()
        batch.add_update_metadata(sorted(ctx.live_brokers), ALL)
        new_set = set(new)
        for tp, replicas in sorted(ctx.assignments.items()):
            if tp[0] in ctx.topics_to_delete:
                continue
            here = [r for r in replicas if r in new_set]
            if not here:
                continue
            for r in here:
                ctx.replica_states[(tp, r)] = R_ONLINE
            st = ctx.leadership.get(tp)
            if st is not None:
                batch.add_leader_and_isr(here, PartitionLeadership(tp[0], tp[1], st, replicas))
        core.partitions.trigger_online(batch)
        core.send(batch)
        for tp in list(ctx.reassignments):
            if new_set & set(ctx.reassignments[tp].target):
                core.reassignments.on_partition(tp)
        core.deletion.resume(retry_ineligible=True)
