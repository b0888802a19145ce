"""Controller collaborator: the partition and replica state machines -- elections, conditional writes of the
partition state znodes, and the LeaderAndIsr / UpdateMetadata every leadership change sends.

State (``ctx``, state.py): ``leadership`` {(t, p): LeaderAndIsr} is written only here (``write``, ``reload``,
new partitions) and dropped with a forgotten topic (TopicChanges); ``partition_states`` / ``replica_states`` move
here for elections and replica failures, and in the other collaborators for their own transitions (new
partitions, broker startup, deletion, reassignment).

Partition state znode writes (``{"controller_epoch","leader","version":1,"leader_epoch","isr"}``) are conditional
on the data version the controller last saw; ``leader_epoch`` grows by one on every write the controller makes
(leader change or ISR change) -- except when dead brokers leave the ISRs of partitions whose leader stays
(``keep_epoch``, ``_next_epoch``: broker failure and a new term's dead replicas). There only the znode version moves,
and the replicas take the new ISR without a new epoch (``Partition.refresh_state``), as Kafka's KRaft controller does
since 3.6 (KAFKA-15021). The ZooKeeper-era controller bumped the epoch there too, to fence the removed replica's
fetches. A dead broker has no fetcher to fence: if it comes back, it registers again and gets a LeaderAndIsr like
any starting broker. The bump cost the survivors a leader-epoch checkpoint per partition they keep leading, with
their appends held until it was durable: 5,000 of them per survivor in a 30,000-partition failover, applied while
the clients of the newly elected leaders waited (session 18). A controlled shutdown still bumps: that broker is
alive and fetching, and the new epoch keeps it from rejoining the ISR. On a version conflict it re-reads (a leader
changed the ISR, issue 5) and retries, or resigns (ControllerMoved) if the znode was written by a higher controller
epoch.

Elections (``election.py``): new partition -> first live assigned replica, ISR = live assigned replicas; offline ->
first assigned replica that is live and in the ISR, ISR = live ISR members; none -> stays offline (with
``unclean.leader.election.enable``, broker or topic level, the first live replica). A replica leaving (broker
failure, controlled shutdown, reassignment) is removed from the ISR; when it led the partition the leader becomes
-1, and the last ISR member is kept so it can lead cleanly when it returns (Kafka >= 1.1 behaviour). Several replicas
leaving one partition together (brokers failing at once) cost one write, one leader epoch.

New term (``on_become_controller``): brokers that died while no controller was active -- typically the previous
controller itself, its registration gone with its session -- are never reported by a broker change, so every broker
a partition state names (leader, ISR) and absent from ``/brokers/ids`` is failed here: leaders are elected for
partitions whose leader is dead, then the dead replicas leave the ISRs (Kafka's onControllerFailover: replica state
machine startup, OfflineReplica). Unchanged partitions are re-sent with their current leader epoch, which the
replicas ignore (an equal epoch is not newer: Kafka 2.x does the same).

Runs in the controller's event greenlet; uses the core's narrow surface (controller.py docstring).
"""
import logging

from kbroker.cluster_state import LeaderAndIsr, PartitionLeadership
from kbroker.coord.errors import BadVersionError, NodeExistsError, NoNodeError
from kbroker.coord.znodes import ControllerEpochZNode, IsrChangeNotificationSequenceZNode, TopicPartitionStateZNode

from . import election
from .batch import ALL, RequestBatch
from .state import (NEW, NON_EXISTENT, OFFLINE, ONLINE, R_OFFLINE, R_ONLINE, TRACE, ControllerMoved,
                    state_change_log)

log = logging.getLogger("kbroker.controller")

# Kafka's LeaderAndIsr.LeaderDuringDelete in UpdateMetadata: brokers drop the partition from their cache.
LEADER_DURING_DELETE = -2
# How often a conditional partition-state write is retried after a concurrent (leader) ISR change.
WRITE_RETRIES = 5


def _next_epoch(cur, leader, keep_epoch):
    """The leader epoch a write of ``leader`` over the state ``cur`` carries: ``cur``'s + 1, or ``cur``'s own with
    ``keep_epoch`` when the leader stays (module docstring). A leader change always moves the epoch: log truncation
    and reconciliation need (offset, epoch) to name one history."""
    if keep_epoch and leader == cur.leader and leader >= 0:
        return cur.leader_epoch
    return cur.leader_epoch + 1


class PartitionStateMachine:
    def __init__(self, core):
        self.core = core

    # ------------------------------------------------------------------------------------------------ new term

    def initialize(self):
        """Partition and replica states of a new term, from the assignments and leadership just read."""
        ctx = self.core.ctx
        for tp, replicas in ctx.assignments.items():
            for r in replicas:
                ctx.replica_states[(tp, r)] = R_ONLINE if r in ctx.live_brokers else R_OFFLINE
            st = ctx.leadership.get(tp)
            if st is None:
                ctx.partition_states[tp] = NEW
            elif st.leader in ctx.live_brokers:
                ctx.partition_states[tp] = ONLINE
            else:
                ctx.partition_states[tp] = OFFLINE

    def on_become_controller(self, batch):
        """Every broker learns the cluster, every live replica its partition's leadership (Kafka's replica state
        machine startup); leaders are elected where none is; leaders found dead are recorded as gone."""
        ctx = self.core.ctx
        batch.add_update_metadata(sorted(ctx.live_brokers), ALL)
        for tp, replicas in sorted(ctx.assignments.items()):
            st = ctx.leadership.get(tp)
            if st is not None:
                targets = [r for r in replicas if r in ctx.live_brokers]
                if targets:
                    batch.add_leader_and_isr(targets, PartitionLeadership(tp[0], tp[1], st, replicas))
        elected = self.trigger_online(batch)
        # Brokers that died while no controller was active -- typically the previous controller itself, whose
        # /brokers/ids node vanished with its /controller node, and any broker whose session expired meanwhile --
        # never reach the broker-change handler: this term read /brokers/ids without them. Every one still named in
        # a partition state (leader, ISR) is handled as failed here (Kafka's replica state machine startup:
        # OfflineReplica), after the elections above, so a dead follower leaves the ISR (same leader epoch, a
        # new znode version: module docstring; LeaderAndIsr to the live replicas, which then stop waiting for
        # it: acks=all, transaction markers) and a dead leader with no live ISR member is recorded as gone
        # (leader -1, last ISR member kept).
        # The states were read at this term's start (a dead broker cannot rejoin an ISR since), so a dead replica
        # that is neither leader nor in the ISR needs no write (nor a re-read): it is OfflineReplica already.
        # Partitions just elected have a live leader and ISR already. All in one batched write.
        gone = {}
        for tp, st in sorted(ctx.leadership.items()):
            if tp[0] in ctx.topics_to_delete or tp not in ctx.assignments or tp in elected:
                continue
            dead = {r for r in (st.leader, *st.isr) if r >= 0 and r not in ctx.live_brokers}
            if dead:
                gone[tp] = dead
        self.remove_many(batch, gone, dead=True)

    # ------------------------------------------------------------------------------------------------ state znodes

    def read(self, tp):
        """The partition's state znode as a LeaderAndIsr (None when absent); ControllerMoved when a later
        controller wrote it."""
        return self._decode(tp, *self.core.backend.get_or_none(TopicPartitionStateZNode.path(*tp)))

    def _decode(self, tp, data, stat):
        if data is None:
            return None
        st = TopicPartitionStateZNode.decode(data, stat.version)
        if st.controller_epoch > self.core.epoch:
            raise ControllerMoved("%s-%d state written by controller epoch %d" % (tp[0], tp[1], st.controller_epoch))
        return LeaderAndIsr.of(st)

    def reload(self, tp):
        """Re-read the state znode into ``ctx.leadership`` (kept when the znode is absent); returns it or None."""
        st = self.read(tp)
        if st is not None:
            self.core.ctx.leadership[tp] = st
        return st

    def write(self, tp, choose, keep_epoch=False):
        """Conditionally rewrite the state znode with ``choose(current LeaderAndIsr) -> (leader, isr) | None``.

        leader_epoch + 1 (``keep_epoch``: only when the leader changes, ``_next_epoch``), controller_epoch = ours.
        Returns the new LeaderAndIsr, or None when ``choose`` declined or
        the partition vanished. Re-reads and retries on a concurrent change; ControllerMoved when a newer
        controller wrote it.
        """
        core = self.core
        ctx = core.ctx
        for _ in range(WRITE_RETRIES):
            cur = ctx.leadership.get(tp)
            if cur is None:
                return None
            res = choose(cur)
            if res is None:
                # Our copy may be stale (a leader changed the ISR and its notification is not in yet): decide
                # again on the znode's current content before declining.
                fresh = self.read(tp)
                if fresh is None or fresh.zk_version == cur.zk_version:
                    return None
                ctx.leadership[tp] = fresh
                continue
            leader, isr = res[0], tuple(res[1])
            leader_epoch = _next_epoch(cur, leader, keep_epoch)
            try:
                stat = core.backend.set(TopicPartitionStateZNode.path(*tp),
                                        TopicPartitionStateZNode.encode(leader, leader_epoch, isr, core.epoch),
                                        version=cur.zk_version)
            except BadVersionError:
                fresh = self.read(tp)
                if fresh is None:
                    ctx.leadership.pop(tp, None)
                    return None
                ctx.leadership[tp] = fresh
                continue
            except NoNodeError:
                ctx.leadership.pop(tp, None)
                return None
            new = LeaderAndIsr(leader, leader_epoch, isr, core.epoch, stat.version)
            ctx.leadership[tp] = new
            if leader >= 0 and leader != cur.leader:
                core.stats.leader_elections += 1          # the metrics' count (controller/stats.py)
            return new
        log.error("could not update the state of %s-%d after %d attempts", tp[0], tp[1], WRITE_RETRIES)
        return None

    def write_many(self, choices, reread_declined=True, on_written=None, keep_epoch=False):
        """``write`` for many partitions at once: ``choices`` {tp: choose}. Each ``choose`` decides on the cached
        state; the decisions go out in ONE ``backend.set_many`` (ZooKeeper multi transactions of up to 1,000 sets,
        every one conditional on its znode's version and on ``/controller_epoch`` still being this term's -- a
        controller that lost office writes nothing: ControllerMoved). A partition whose ``choose`` declines goes
        through ``write`` after a re-read, as a single write would -- except, with ``reread_declined`` False, one
        whose ``choose`` declines on the cached state: None without a ZooKeeper read (2,000 sequential reads took
        25 s after a controlled shutdown had already taken the broker out of every ISR). Returns {tp: new
        LeaderAndIsr or None}.

        Writes that lost a race (a leader changed that ISR meanwhile) are re-read together (one pipelined round of
        reads) and decided and written again together, up to WRITE_RETRIES rounds, as Kafka's
        ``ZkPartitionStateMachine`` retries its failed updates: one at a time, a broker failure that overlapped
        the leaders' own shrinks of the dead replica out of their ISRs (replica.lag.time.max.ms after its last
        fetch) cost 4,500-9,500 sequential ZooKeeper round trips and 8-34 s (27,000 partitions, session 18).

        ``on_written({tp: new LeaderAndIsr or None})``, when given, runs once per ZooKeeper transaction as its
        answer comes in (then once for the declined ones, and once per retry round; every tp exactly once), while
        the later transactions are still being applied: a failed broker's 13,500 elections took ~1.1 s to write
        in 14 transactions, and its survivors can apply the first ones' LeaderAndIsr meanwhile."""
        ctx = self.core.ctx
        out = {}
        todo = choices
        for attempt in range(WRITE_RETRIES):
            lost = self._write_round(todo, out, reread_declined and attempt == 0, on_written, keep_epoch)
            if not lost:
                return out
            log.info("%d batched partition state writes lost a race (%s-%d: %s, ...); re-reading them together "
                     "(round %d)", len(lost), lost[0][0][0], lost[0][0][1], lost[0][1], attempt + 1)
            tps = [tp for tp, _ in lost]
            fresh = self._read_many(tps)
            todo, gone = {}, {}
            for tp in tps:
                st = fresh[tp]
                if st is None:
                    ctx.leadership.pop(tp, None)
                    gone[tp] = None
                else:
                    ctx.leadership[tp] = st
                    todo[tp] = choices[tp]
            if gone:
                out.update(gone)
                if on_written is not None:
                    on_written(gone)
            if not todo:
                return out
        for tp in todo:
            log.error("could not update the state of %s-%d after %d attempts", tp[0], tp[1], WRITE_RETRIES)
        failed = dict.fromkeys(todo)
        out.update(failed)
        if on_written is not None:
            on_written(failed)
        return out

    def _read_many(self, tps):
        """{tp: the state znode as a LeaderAndIsr, or None when absent}, read in one pipelined round."""
        results = self.core.backend.get_many([TopicPartitionStateZNode.path(*tp) for tp in tps])
        return {tp: self._decode(tp, data, stat) for tp, (data, stat) in zip(tps, results)}

    def _write_round(self, choices, out, reread_declined, on_written, keep_epoch):
        """One round of ``write_many``: decide on the cached states, write in one ``set_many``, fill ``out`` and
        report through ``on_written``; returns [(tp, error)] of the writes that lost a race (not in ``out``)."""
        core = self.core
        ctx = core.ctx
        declined = {}
        plans = []
        for tp, choose in choices.items():
            core.tick()
            cur = ctx.leadership.get(tp)
            res = choose(cur) if cur is not None else None
            if res is None:
                declined[tp] = self.write(tp, choose, keep_epoch) if cur is not None and reread_declined else None
            else:
                plans.append((tp, cur, res[0], tuple(res[1]), _next_epoch(cur, res[0], keep_epoch)))
        if declined:
            out.update(declined)
            if on_written is not None:
                on_written(declined)
        lost = []
        if not plans:
            return lost

        def settle(indexes, results):
            wave = {}
            for i, result in zip(indexes, results):
                core.tick()
                tp, cur, leader, isr, leader_epoch = plans[i]
                if isinstance(result, NoNodeError):
                    ctx.leadership.pop(tp, None)
                    wave[tp] = None
                elif isinstance(result, Exception):
                    lost.append((tp, result))
                else:
                    new = LeaderAndIsr(leader, leader_epoch, isr, core.epoch, result.version)
                    ctx.leadership[tp] = new
                    if leader >= 0 and leader != cur.leader:
                        core.stats.leader_elections += 1      # the metrics' count (controller/stats.py)
                    wave[tp] = new
            out.update(wave)
            if wave and on_written is not None:
                on_written(wave)

        try:
            core.backend.set_many(
                [(TopicPartitionStateZNode.path(*tp),
                  TopicPartitionStateZNode.encode(leader, leader_epoch, isr, core.epoch), cur.zk_version)
                 for tp, cur, leader, isr, leader_epoch in plans],
                check=(ControllerEpochZNode.path(), core.epoch_zk_version), on_wave=settle)
        except BadVersionError as e:
            raise ControllerMoved("/controller_epoch is not at this term's version: %s" % e) from None
        return lost

    def send_leadership(self, batch, tp, is_new=False, extra=()):
        """LeaderAndIsr to the partition's live replicas (+ ``extra``), UpdateMetadata to every live broker."""
        ctx = self.core.ctx
        replicas = ctx.assignments[tp]
        st = ctx.leadership[tp]
        targets = sorted({r for r in list(replicas) + list(extra) if r in ctx.live_brokers})
        reassign = ctx.reassignments.get(tp)
        adding = [r for r in reassign.target if r not in reassign.original] if reassign else ()
        removing = [r for r in reassign.original if r not in reassign.target] if reassign else ()
        if targets:
            batch.add_leader_and_isr(targets, PartitionLeadership(tp[0], tp[1], st, replicas, adding, removing, is_new))
            if state_change_log.isEnabledFor(TRACE):
                state_change_log.log(TRACE, "%s sending LeaderAndIsr request (Leader:%d,ISR:%s,LeaderEpoch:%d,"
                                     "ControllerEpoch:%d) to brokers %s for partition [%s,%d]",
                                     ctx.partition_states.owner, st.leader, ",".join(map(str, st.isr)),
                                     st.leader_epoch, st.controller_epoch, targets, tp[0], tp[1])
        batch.add_update_metadata(sorted(ctx.live_brokers), [tp])

    def _unclean_allowed(self, topic):
        v = self.core.topic_store.topic_config(topic).get("unclean.leader.election.enable")
        if v is None:
            return bool(self.core.cfg("unclean.leader.election.enable"))
        return str(v).lower() == "true"

    # ------------------------------------------------------------------------------------------------ transitions

    def trigger_online(self, batch, tps=None, on_elected=None):
        """New and Offline partitions (not being deleted) -> Online, electing leaders where possible. Returns
        {tp: new LeaderAndIsr} of the offline partitions it elected a leader for. ``on_elected(elected_part)``:
        ``_elect_offline_many``'s."""
        ctx = self.core.ctx
        if tps is None:
            tps = [tp for tp, s in ctx.partition_states.items() if s in (NEW, OFFLINE)]
        todo = [tp for tp in sorted(tps) if tp[0] not in ctx.topics_to_delete]
        created = self._create_states([tp for tp in todo if ctx.partition_states.get(tp, NON_EXISTENT) == NEW])
        for tp in todo:
            self.core.tick()
            if ctx.partition_states.get(tp, NON_EXISTENT) == NEW:
                self._init_leadership(batch, tp, created.get(tp))
        # Offline partitions' elections in one batched write (a failed broker's 10,000 partitions: a few ZooKeeper
        # multi transactions, not 10,000 conditional sets one round trip each).
        return self._elect_offline_many(batch, [tp for tp in todo if ctx.partition_states.get(tp) == OFFLINE],
                                        on_elected)

    def _create_states(self, tps):
        """First leader and ISR of new partitions, their state znodes created in one pipelined go (Kafka 0.10 made
        one synchronous create per partition: ~23 ms each against a 3-node ensemble, 23 s for 1,000 partitions).
        Returns {tp: ((leader, isr), create result or CoordinationError)} for those with a live replica."""
        core = self.core
        allowed = core.brokers.leaders_allowed()
        plans, creates = [], []
        for tp in tps:
            core.tick()
            res = election.new_partition_leader(core.ctx.assignments[tp], allowed)
            if res is not None:
                plans.append((tp, res))
                leader, isr = res
                creates.append((TopicPartitionStateZNode.path(*tp),
                                TopicPartitionStateZNode.encode(leader, 0, isr, core.epoch), True))
        if not plans:
            return {}
        results = core.backend.create_many(creates)
        return {tp: (plan, result) for (tp, plan), result in zip(plans, results)}

    def _init_leadership(self, batch, tp, created):
        """NewPartition -> Online. ``created``: ((leader, isr), create result) from _create_states, None when no
        replica was live to lead."""
        ctx = self.core.ctx
        if created is None:
            log.warning("%s-%d: no live replica among %s; stays new", tp[0], tp[1], ctx.assignments[tp])
            return
        (leader, isr), outcome = created
        if isinstance(outcome, NodeExistsError):
            st = self.read(tp)
            ctx.leadership[tp] = st
            if st.leader in self.core.brokers.leaders_allowed():
                ctx.partition_states[tp] = ONLINE
                self.send_leadership(batch, tp)
            else:
                ctx.partition_states[tp] = OFFLINE
                self._elect_offline(batch, tp)
            return
        if isinstance(outcome, Exception):
            raise outcome
        ctx.leadership[tp] = LeaderAndIsr(leader, 0, isr, self.core.epoch, 0)
        ctx.partition_states[tp] = ONLINE
        for r in ctx.assignments[tp]:
            if r in ctx.live_brokers:
                ctx.replica_states[(tp, r)] = R_ONLINE
        self.send_leadership(batch, tp, is_new=True)

    def _elect_offline(self, batch, tp):
        return tp in self._elect_offline_many(batch, [tp])

    def _elect_offline_many(self, batch, tps, on_elected=None):
        """OfflinePartition -> Online for ``tps`` in one ``write_many``; returns {tp: new LeaderAndIsr} of those
        that got a leader (the others stay offline: no live in-sync replica, unclean election not allowed).
        ``on_elected({tp: new LeaderAndIsr})``, when given, runs after each part of the write is in and its
        requests are in ``batch`` (``write_many``'s ``on_written``): the caller may send them while the rest is
        written."""
        ctx = self.core.ctx
        unclean_chosen = set()
        elected = {}

        def written(wave):
            now = {}
            for tp, new in wave.items():
                self.core.tick()
                if new is None:
                    log.warning("%s-%d: no live in-sync replica (replicas %s); stays offline",
                                tp[0], tp[1], ctx.assignments[tp])
                    continue
                if tp in unclean_chosen:
                    self.core.stats.unclean_elections += 1
                ctx.partition_states[tp] = ONLINE
                self.send_leadership(batch, tp)
                now[tp] = new
            elected.update(now)
            if now and on_elected is not None:
                on_elected(now)

        self.write_many({tp: self._offline_choice(tp, unclean_chosen) for tp in tps}, on_written=written)
        return elected

    def _offline_choice(self, tp, unclean_chosen):
        """The ``choose`` of an offline partition's election; it adds ``tp`` to ``unclean_chosen`` when the leader
        it picks is not in the ISR (unclean.leader.election.enable)."""
        ctx = self.core.ctx
        replicas = ctx.assignments[tp]
        allowed = self.core.brokers.leaders_allowed()
        if tp in ctx.offline_replicas:   # replicas in a failed log dir never lead (log_dirs.py, KIP-112)
            allowed = set(allowed) - ctx.offline_replicas[tp]
        unclean = None

        def choose(cur):
            nonlocal unclean
            unclean_chosen.discard(tp)
            res = election.offline_partition_leader(replicas, cur.isr, allowed, False)
            if res is None:
                if unclean is None:
                    unclean = self._unclean_allowed(tp[0])
                if unclean:
                    res = election.offline_partition_leader(replicas, cur.isr, allowed, True)
                    if res is not None:
                        unclean_chosen.add(tp)
                        log.warning("%s-%d: unclean leader election of broker %d (ISR was %s)",
                                    tp[0], tp[1], res[0], list(cur.isr))
            return res
        return choose

    def remove_replica_from_isr(self, batch, tp, broker):
        """Replica -> Offline: ``remove_replicas_from_isr`` of one broker."""
        return self.remove_replicas_from_isr(batch, tp, (broker,))

    def remove_replicas_from_isr(self, batch, tp, brokers):
        """Replicas -> Offline, in ONE state write (leader epoch + 1 once, however many leave): ``brokers`` leave
        the ISR; the leader becomes -1 if it is one of them. When none of the ISR would remain, one member is kept
        -- the leader if it was in the ISR, else the first ISR member in assignment order -- so that replica can
        lead cleanly when it returns (Kafka >= 1.1; any ISR member holds every committed record). No write when
        none of ``brokers`` is the leader or in the ISR. Returns the new LeaderAndIsr or None."""
        return self.remove_many(batch, {tp: brokers})[tp]

    def remove_many(self, batch, gone_by_tp, dead=False):
        """``remove_replicas_from_isr`` for many partitions in one ``write_many``: ``gone_by_tp`` {tp: brokers}.
        ``dead``: those brokers' registrations are gone (failure, not a shutdown or a failed log dir), so the
        partitions whose leader stays keep their leader epoch (module docstring). Returns {tp: new LeaderAndIsr or
        None}."""
        ctx = self.core.ctx
        # No re-read where the cached state names none of them: a leader that put one back into an ISR meanwhile
        # announced it (/isr_change_notification), and ``on_isr_change`` takes it out again then.
        out = self.write_many({tp: self._removal_choice(tp, set(gone)) for tp, gone in gone_by_tp.items()},
                              reread_declined=False, keep_epoch=dead)
        for tp, new in out.items():
            for broker in gone_by_tp[tp]:
                ctx.replica_states[(tp, broker)] = R_OFFLINE
            if new is not None:
                if new.leader < 0:
                    ctx.partition_states[tp] = OFFLINE
                self.send_leadership(batch, tp)
        return out

    def _removal_choice(self, tp, gone):
        ctx = self.core.ctx

        def choose(cur):
            if cur.leader not in gone and not gone.intersection(cur.isr):
                return None
            leader = -1 if cur.leader in gone else cur.leader
            isr = [r for r in cur.isr if r not in gone]
            if not isr and cur.isr:
                if cur.leader in cur.isr:
                    isr = [cur.leader]
                else:
                    order = {r: i for i, r in enumerate(ctx.assignments.get(tp, ()))}
                    isr = [min(cur.isr, key=lambda r: (order.get(r, len(order)), r))]
            return leader, isr
        return choose

    # ------------------------------------------------------------------------------------------------ ISR changes

    def on_isr_change(self, _event):
        """Leaders announced ISR changes under /isr_change_notification: re-read those states, tell every broker,
        and let reassignments waiting for their new replicas see the new ISR."""
        core = self.core
        ctx = core.ctx
        parent = IsrChangeNotificationSequenceZNode.path_prefix().rsplit("/", 1)[0]
        try:
            children = core.backend.get_children(parent)
        except NoNodeError:
            return
        tps = set()
        paths = [parent + "/" + c for c in children]
        # Pipelined reads and deletes: one notification per leader ISR change, 2,000 when a restarted broker
        # rejoins 2,000 ISRs (4,000 sequential ZooKeeper operations before).
        for path, (data, _) in zip(paths, core.backend.get_many(paths)):
            if data is not None:
                try:
                    tps.update(IsrChangeNotificationSequenceZNode.decode(data))
                except (ValueError, KeyError, TypeError):
                    log.warning("ignoring malformed ISR change notification %s", path)
        core.backend.delete_many(paths)
        tps = sorted(tp for tp in tps if tp in ctx.assignments)
        batch = RequestBatch()
        # One pipelined read of every changed state (a restarted broker rejoining 2,000 ISRs: 2,000 sequential
        # reads held the event loop -- and a broker failure queued behind them -- for ~20 s).
        states = core.backend.get_many([TopicPartitionStateZNode.path(*tp) for tp in tps])
        for tp, (data, stat) in zip(tps, states):
            st = self._decode(tp, data, stat)
            if st is not None:
                ctx.leadership[tp] = st
            # KIP-841: a broker in controlled shutdown, or one not alive, is not eligible for an ISR. Its leader took
            # it back (it was fetching when its leadership moved, before its StopReplica landed, or just before it
            # died): out again, as Kafka's controller refuses such an AlterPartition (INELIGIBLE_REPLICA). Never the
            # leader itself.
            back = [r for r in (st.isr if st is not None else ())
                    if (r in ctx.shutting_down or r not in ctx.live_brokers) and r != st.leader]
            if back:
                log.info("%s-%d: broker(s) %s (shutting down or not alive) rejoined the ISR %s; removing them",
                         tp[0], tp[1], back, list(st.isr))
                self.remove_replicas_from_isr(batch, tp, back)
        if tps:
            batch.add_update_metadata(sorted(ctx.live_brokers), tps)
            core.send(batch)
        for tp in tps:
            if tp in ctx.reassignments:
                core.reassignments.on_partition(tp)

    # ------------------------------------------------------------------------------------------------ batch view

    def all_partitions(self):
        """The partitions an UpdateMetadata for ALL names (those of topics being deleted excepted)."""
        ctx = self.core.ctx
        return [tp for tp in ctx.assignments if tp[0] not in ctx.topics_to_delete]

    def update_metadata_state(self, tp):
        """The UpdateMetadata v6 partition-state dict of ``tp`` now (leader -2 for a partition being deleted)."""
        core = self.core
        ctx = core.ctx
        replicas = ctx.assignments.get(tp)
        st = ctx.leadership.get(tp)
        if replicas is None or tp[0] in ctx.topics_to_delete:
            return {"partition_index": tp[1], "controller_epoch": core.epoch, "leader": LEADER_DURING_DELETE,
                    "leader_epoch": -1, "isr": [], "zk_version": -1, "replicas": list(replicas or []),
                    "offline_replicas": []}
        if st is None:
            st = LeaderAndIsr(-1, -1, (), core.epoch, -1)
        return {"partition_index": tp[1], "controller_epoch": st.controller_epoch, "leader": st.leader,
                "leader_epoch": st.leader_epoch, "isr": list(st.isr), "zk_version": st.zk_version,
                "replicas": list(replicas), "offline_replicas": [r for r in replicas if r not in ctx.live_brokers
                                                                 or r in ctx.offline_replicas.get(tp, ())]}
