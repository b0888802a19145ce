"""GroupCoordinator: Kafka's classic group membership protocol for the groups this broker owns.

Split as Kafka splits it: this module is the membership state machine (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
sessions, rebalances) and decides whether a request may change a group; ``GroupMetadataManager``
(group_metadata.py, ``self.metadata``) owns the group cache, which ``__consumer_offsets`` partitions are loaded,
and every read and write of them (group metadata records, offset commits, fetches, expiry, deletion).

A broker owns the groups whose ``__consumer_offsets`` partition (``group.partition_for``) it leads. Ownership per
partition is ``LOADING`` (replaying the log: requests get COORDINATOR_LOAD_IN_PROGRESS 14, Heartbeat gets NONE) then
``LOADED``; an unowned partition answers NOT_COORDINATOR (16); a stopped coordinator COORDINATOR_NOT_AVAILABLE (15).

Concurrency model: everything runs in gevent greenlets of one thread, and a method runs to completion atomically
except where it writes (an append waits for the in-sync replicas, acks=-1: ``sync_group`` checks its group again
after storing the assignments) and a commit: ``handle_commit`` / ``commit_unchecked`` encode one record per
partition (~7 us each; an OffsetCommit may name 25,000 partitions), and every 20 ms of that they let other requests
run (``kbroker/timeslice.py``, issue 8); a commit that did so checks its group again before it writes, as if it had
just arrived (a rebalance that completed meanwhile answers ILLEGAL_GENERATION, as it would have then). Parked
requests are callbacks: ``join_group`` and ``sync_group`` take ``callback(result_dict)`` and may call it now or later
(when the rebalance completes, a timer fires, a member leaves); the handler waits on an event. Timers come from a
scheduler (``timers.py``) so unit tests drive time by hand.

Rebalance (Kafka 2.x semantics):
- a join by a new member, a rejoin by the leader or with changed protocols, a leave or a session expiry moves the
  group to PreparingRebalance; the join completes when every member has rejoined (and no MEMBER_ID_REQUIRED id is
  outstanding) or when the largest member rebalance timeout passes -- members that did not rejoin are removed
  (static members are kept). A group coming from Empty first waits ``group.initial.rebalance.delay.ms``, extended
  by the same delay while new members keep arriving, never beyond the rebalance timeout;
- completion: generation += 1, the protocol with the most first-choice votes among those every member supports,
  CompletingRebalance; every parked JoinGroup is answered, the leader's with all members' metadata;
- the leader's SyncGroup stores the assignments in a group-metadata record (members missing from it get empty
  assignments), answers every parked SyncGroup and makes the group Stable; an append error answers all of them
  with the mapped error and rebalances again.
Sessions: any request of a member (join, sync, heartbeat, commit) refreshes ``last_seen``; a timer per member checks
``last_seen + session_timeout`` lazily (it re-arms instead of being rescheduled on every heartbeat). A member whose
JoinGroup is parked is alive by definition.
Offsets: ``handle_commit`` holds the membership rules of a commit; what is stored, and when it expires, is
group_metadata.py's. Transactional commits (``handle_txn_commit``, TxnOffsetCommit) follow Kafka 2.5+'s rules
(KIP-447): checked against the group only when they name a generation >= 0, a member id or an instance id, never
refused for the group's state; they stay pending until ``complete_transaction`` (the WriteTxnMarkers handler,
after the marker is replicated) commits or aborts them.

Why this stays one module of over 600 lines: it is one state machine. Every public method moves a group along
group.py's transitions (Empty -> PreparingRebalance -> CompletingRebalance -> Stable, any -> Dead) or refuses by
them, and all of them keep one invariant together: a member has at most one parked JoinGroup and one parked
SyncGroup, each answered exactly once (``_answer_join``/``_answer_sync`` take the callback off the member before
calling it) -- by a completed join or sync, a rebalance, a fence, a leave, a session expiry or an unload -- and
the timers (join deadline, initial delay, sessions, pending member ids) are cancelled with the state they guard.
Join, sync, heartbeat, leave and the session checks each answer or cancel the others' parked requests and timers;
splitting them apart would spread that one invariant over several modules.
"""
import logging

from kbroker import errors
from kbroker.coordinator.group import (COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE, Group,
                                       Member, new_member_id)
from kbroker.coordinator.group_metadata import LOADING, NONE, GroupMetadataManager
from kbroker.timeslice import TimeSlice

log = logging.getLogger(__name__)


def join_result(error, member_id="", generation=-1, protocol_type=None, protocol=None, leader="", members=()):
    return {"error_code": error, "generation_id": generation, "protocol_type": protocol_type,
            "protocol_name": protocol, "leader": leader, "member_id": member_id, "members": list(members)}


def sync_result(error, assignment=b"", protocol_type=None, protocol=None):
    return {"error_code": error, "assignment": assignment, "protocol_type": protocol_type,
            "protocol_name": protocol}


class GroupCoordinator:
    """``config``: mapping with Kafka's group.* / offsets.* keys; ``store``: ``append(partition, [(k, v)], now)``
    and ``read(partition) -> [(k, v)]``; ``topic_exists((topic, partition)) -> bool`` or None (no check)."""

    def __init__(self, config, scheduler, store, topic_exists=None):
        self.scheduler = scheduler
        self.min_session = config["group.min.session.timeout.ms"]
        self.max_session = config["group.max.session.timeout.ms"]
        self.initial_delay = config["group.initial.rebalance.delay.ms"]
        self.metadata = GroupMetadataManager(store, scheduler.now_ms, config["offsets.topic.num.partitions"],
                                             config["offsets.retention.minutes"] * 60000,
                                             config["offset.metadata.max.bytes"], topic_exists)
        self.active = True

    @property
    def groups(self):
        """group id -> Group: the metadata manager's cache (the same dict)."""
        return self.metadata.groups

    @property
    def owned(self):
        """offsets partition -> LOADING | LOADED: the metadata manager's (the same dict)."""
        return self.metadata.owned

    def now(self):
        return self.scheduler.now_ms()

    # ------------------------------------------------------------------------------------------ ownership
    def partition_for(self, group_id):
        return self.metadata.partition_for(group_id)

    def load_partition(self, index):
        """Replay ``__consumer_offsets``-``index`` into the cache; groups there are served afterwards."""
        return self.metadata.load_partition(index, self._group_loaded)

    def _group_loaded(self, group):
        for m in group.members.values():
            self._touch(group, m)

    def unload_partition(self, index):
        """Leadership of the partition moved away: forget its groups, answer parked requests NOT_COORDINATOR."""
        for group in self.metadata.unload_partition(index):
            self._kill_group(group, errors.NOT_COORDINATOR)

    def shutdown(self):
        self.active = False
        for group in self.metadata.unload_all():
            self._kill_group(group, errors.NOT_COORDINATOR)

    def _kill_group(self, group, error):
        if group.join_timer:
            group.join_timer.cancel()
            group.join_timer = None
        for h in group.pending_members.values():
            h.cancel()
        group.pending_members.clear()
        for m in group.members.values():
            if m.session_timer:
                m.session_timer.cancel()
                m.session_timer = None
            self._answer_join(m, join_result(error, m.member_id))
            self._answer_sync(m, sync_result(error))
        group.transition(DEAD, self.now())

    def _check(self, group_id, allow_empty=False):
        """0, or the error code that stops any request for ``group_id``."""
        if group_id is None or (group_id == "" and not allow_empty):
            return errors.INVALID_GROUP_ID
        if not self.active:
            return errors.COORDINATOR_NOT_AVAILABLE
        st = self.metadata.ownership(group_id)
        if st is None:
            return errors.NOT_COORDINATOR
        if st == LOADING:
            return errors.COORDINATOR_LOAD_IN_PROGRESS
        return NONE

    # ----------------------------------------------------------------------------------------- sessions
    def _touch(self, group, member):
        member.last_seen = self.now()
        if member.session_timer is None:
            member.session_timer = self.scheduler.call_later(member.session_timeout, self._session_check,
                                                             group, member)

    def _session_check(self, group, member):
        member.session_timer = None
        if group.members.get(member.member_id) is not member or group.is_(DEAD):
            return
        now = self.now()
        if member.awaiting_join:
            member.last_seen = now
        deadline = member.last_seen + member.session_timeout
        if now >= deadline:
            log.info("group %s: member %s session expired", group.group_id, member.member_id)
            self._remove_member_and_update(group, member)
        else:
            member.session_timer = self.scheduler.call_later(deadline - now, self._session_check, group, member)

    def _remove_member_and_update(self, group, member):
        self._answer_join(member, join_result(errors.UNKNOWN_MEMBER_ID, member.member_id))
        self._answer_sync(member, sync_result(errors.UNKNOWN_MEMBER_ID))
        if member.session_timer:
            member.session_timer.cancel()
            member.session_timer = None
        group.remove_member(member.member_id)
        if group.state in (STABLE, COMPLETING_REBALANCE):
            self._prepare_rebalance(group)
        elif group.is_(PREPARING_REBALANCE):
            self._try_complete_join(group)

    @staticmethod
    def _answer_join(member, result):
        cb, member.join_callback = member.join_callback, None
        if cb is not None:
            cb(result)

    @staticmethod
    def _answer_sync(member, result):
        cb, member.sync_callback = member.sync_callback, None
        if cb is not None:
            cb(result)

    # -------------------------------------------------------------------------------------------- join
    def join_group(self, group_id, member_id, group_instance_id, client_id, client_host, rebalance_timeout,
                   session_timeout, protocol_type, protocols, require_known_member_id, callback):
        """JoinGroup. ``protocols``: [(name, metadata)]. ``callback(join_result dict)``, now or later."""
        err = self._check(group_id)
        if err:
            return callback(join_result(err, member_id))
        if not (self.min_session <= session_timeout <= self.max_session):
            return callback(join_result(errors.INVALID_SESSION_TIMEOUT, member_id))
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        protocols = [(n, bytes(m)) for n, m in protocols]
        group = self.groups.get(group_id)
        created = False
        if group is None:
            if member_id:
                return callback(join_result(errors.UNKNOWN_MEMBER_ID, member_id))
            group = self.groups[group_id] = Group(group_id, EMPTY, self.now())
            created = True
        if member_id:
            self._join_known(group, member_id, group_instance_id, client_id, client_host, rebalance_timeout,
                             session_timeout, protocol_type, protocols, callback)
        else:
            self._join_new(group, group_instance_id, client_id, client_host, rebalance_timeout, session_timeout,
                           protocol_type, protocols, require_known_member_id, callback)
        if created and not group.members and not group.pending_members and self.groups.get(group_id) is group:
            del self.groups[group_id]       # a rejected first join leaves no trace

    def _join_new(self, group, instance_id, client_id, client_host, rebalance_timeout, session_timeout,
                  protocol_type, protocols, require_known, callback):
        if group.is_(DEAD):
            return callback(join_result(errors.COORDINATOR_NOT_AVAILABLE))
        if not group.supports(protocol_type, protocols):
            return callback(join_result(errors.INCONSISTENT_GROUP_PROTOCOL))
        mid = new_member_id(client_id)
        if instance_id is not None and instance_id in group.static_members:
            return self._replace_static_member(group, group.static_members[instance_id], mid, client_id,
                                               client_host, rebalance_timeout, session_timeout, protocols, callback)
        if require_known and instance_id is None:
            # KIP-394: hand out the id and wait for the member to come back with it; forget it after a session.
            group.pending_members[mid] = self.scheduler.call_later(session_timeout, self._pending_expired,
                                                                   group, mid)
            return callback(join_result(errors.MEMBER_ID_REQUIRED, mid))
        member = Member(mid, instance_id, client_id, client_host, rebalance_timeout, session_timeout,
                        protocol_type, protocols)
        self._add_member_and_rebalance(group, member, callback)

    def _pending_expired(self, group, mid):
        if group.pending_members.pop(mid, None) is not None and group.is_(PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _replace_static_member(self, group, old_id, new_id, client_id, client_host, rebalance_timeout,
                               session_timeout, protocols, callback):
        """A static member restarted: its new id replaces the old one; the old incarnation is fenced."""
        member = group.members.pop(old_id)
        self._answer_join(member, join_result(errors.FENCED_INSTANCE_ID, old_id))
        self._answer_sync(member, sync_result(errors.FENCED_INSTANCE_ID))
        unchanged = member.matches(protocols)
        member.member_id = new_id
        member.client_id, member.client_host = client_id, client_host
        member.rebalance_timeout, member.session_timeout = rebalance_timeout, session_timeout
        member.protocols = list(protocols)
        group.members[new_id] = member
        group.static_members[member.group_instance_id] = new_id
        was_leader = group.leader_id == old_id
        if was_leader:
            group.leader_id = new_id
        self._touch(group, member)
        if group.is_(STABLE) and unchanged and not was_leader:
            # KIP-345: a known static member coming back unchanged keeps its assignment, no rebalance.
            return callback(join_result(NONE, new_id, group.generation, group.protocol_type, group.protocol,
                                        group.leader_id))
        member.join_callback = callback
        if group.state in (STABLE, COMPLETING_REBALANCE, EMPTY):
            self._prepare_rebalance(group)
        else:
            self._try_complete_join(group)

    def _join_known(self, group, member_id, instance_id, client_id, client_host, rebalance_timeout,
                    session_timeout, protocol_type, protocols, callback):
        if group.is_(DEAD):
            return callback(join_result(errors.COORDINATOR_NOT_AVAILABLE, member_id))
        if not group.supports(protocol_type, protocols):
            return callback(join_result(errors.INCONSISTENT_GROUP_PROTOCOL, member_id))
        pending = group.pending_members.pop(member_id, None)
        if pending is not None:
            pending.cancel()
            member = Member(member_id, instance_id, client_id, client_host, rebalance_timeout, session_timeout,
                            protocol_type, protocols)
            return self._add_member_and_rebalance(group, member, callback)
        member = group.members.get(member_id)
        if member is None:
            return callback(join_result(errors.UNKNOWN_MEMBER_ID, member_id))
        if member.group_instance_id != instance_id and instance_id is not None:
            return callback(join_result(errors.FENCED_INSTANCE_ID, member_id))
        self._touch(group, member)
        st = group.state
        if st == PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, rebalance_timeout, session_timeout, protocols,
                                              callback)
        elif st == COMPLETING_REBALANCE:
            if member.matches(protocols):
                # The JoinGroup answer was lost: hand the same generation back (leader gets the members again).
                callback(self._join_answer(group, member))
            else:
                self._update_member_and_rebalance(group, member, rebalance_timeout, session_timeout, protocols,
                                                  callback)
        elif st == STABLE:
            if member_id == group.leader_id or not member.matches(protocols):
                # The leader rejoins when metadata changed (new partitions, regex matches): always rebalance.
                self._update_member_and_rebalance(group, member, rebalance_timeout, session_timeout, protocols,
                                                  callback)
            else:
                callback(join_result(NONE, member_id, group.generation, group.protocol_type, group.protocol,
                                     group.leader_id))
        else:
            callback(join_result(errors.UNKNOWN_MEMBER_ID, member_id))

    def _join_answer(self, group, member):
        members = ()
        if member.member_id == group.leader_id:
            members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                        "metadata": m.metadata(group.protocol) or b""} for m in group.members.values()]
        return join_result(NONE, member.member_id, group.generation, group.protocol_type, group.protocol,
                           group.leader_id, members)

    def _add_member_and_rebalance(self, group, member, callback):
        member.join_callback = callback
        group.add_member(member)
        self._touch(group, member)
        group.new_member_added = True
        self._maybe_prepare_rebalance(group)

    def _update_member_and_rebalance(self, group, member, rebalance_timeout, session_timeout, protocols,
                                     callback):
        member.rebalance_timeout, member.session_timeout = rebalance_timeout, session_timeout
        member.protocols = list(protocols)
        if member.join_callback is not None and member.join_callback is not callback:
            self._answer_join(member, join_result(errors.REBALANCE_IN_PROGRESS, member.member_id))
        member.join_callback = callback
        self._maybe_prepare_rebalance(group)

    def _maybe_prepare_rebalance(self, group):
        if group.state in (STABLE, COMPLETING_REBALANCE, EMPTY):
            self._prepare_rebalance(group)
        elif group.is_(PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _prepare_rebalance(self, group):
        if group.is_(COMPLETING_REBALANCE):
            for m in group.members.values():
                m.assignment = b""
                self._answer_sync(m, sync_result(errors.REBALANCE_IN_PROGRESS))
        was_empty = group.is_(EMPTY)
        group.transition(PREPARING_REBALANCE, self.now())
        timeout = group.max_rebalance_timeout()
        if group.join_timer:
            group.join_timer.cancel()
        if was_empty and self.initial_delay > 0:
            group.initial_delay_pending = True
            group.new_member_added = False
            group.join_timer = self.scheduler.call_later(
                self.initial_delay, self._initial_delay_expired, group, max(timeout - self.initial_delay, 0))
        else:
            group.join_timer = self.scheduler.call_later(timeout, self._join_deadline, group)
            self._try_complete_join(group)

    def _initial_delay_expired(self, group, remaining):
        group.join_timer = None
        if not group.is_(PREPARING_REBALANCE):
            return
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            step = min(self.initial_delay, remaining)
            group.join_timer = self.scheduler.call_later(step, self._initial_delay_expired, group,
                                                         remaining - step)
        else:
            group.initial_delay_pending = False
            self._complete_join(group)

    def _join_deadline(self, group):
        group.join_timer = None
        if group.is_(PREPARING_REBALANCE):
            group.initial_delay_pending = False
            self._complete_join(group)

    def _try_complete_join(self, group):
        if group.is_(PREPARING_REBALANCE) and not group.initial_delay_pending and group.all_members_joined():
            self._complete_join(group)

    def _complete_join(self, group):
        if group.join_timer:
            group.join_timer.cancel()
            group.join_timer = None
        for m in [m for m in group.members.values() if not m.awaiting_join and m.group_instance_id is None]:
            log.info("group %s: member %s did not rejoin in time", group.group_id, m.member_id)
            self._answer_sync(m, sync_result(errors.UNKNOWN_MEMBER_ID))
            if m.session_timer:
                m.session_timer.cancel()
                m.session_timer = None
            group.remove_member(m.member_id)
        for h in group.pending_members.values():
            h.cancel()
        group.pending_members.clear()
        leader = group.members.get(group.leader_id)
        if leader is None or not leader.awaiting_join:
            group.leader_id = next((m.member_id for m in group.members.values() if m.awaiting_join),
                                   group.leader_id if group.members else None)
        now = self.now()
        group.generation += 1
        if not group.members:
            group.protocol = None
            group.leader_id = None
            group.transition(EMPTY, now)
            err = self.metadata.store_group(group, now)
            if err:
                log.warning("group %s: storing the empty generation failed (%d)", group.group_id, err)
            return
        group.protocol = group.select_protocol()
        group.transition(COMPLETING_REBALANCE, now)
        log.info("group %s: generation %d, protocol %s, %d members, leader %s", group.group_id,
                 group.generation, group.protocol, len(group.members), group.leader_id)
        for m in list(group.members.values()):
            if m.awaiting_join:
                result = self._join_answer(group, m)
                m.is_new = False
                self._touch(group, m)
                self._answer_join(m, result)

    # -------------------------------------------------------------------------------------------- sync
    def sync_group(self, group_id, generation, member_id, group_instance_id, protocol_type, protocol_name,
                   assignments, callback):
        """SyncGroup. ``assignments``: {member_id: bytes} (leader only). ``callback(sync_result dict)``."""
        err = self._check(group_id)
        if err:
            return callback(sync_result(err))
        group = self.groups.get(group_id)
        if group is None:
            return callback(sync_result(errors.UNKNOWN_MEMBER_ID))
        if group.is_(DEAD):
            return callback(sync_result(errors.COORDINATOR_NOT_AVAILABLE))
        member = group.members.get(member_id)
        if member is None:
            return callback(sync_result(errors.UNKNOWN_MEMBER_ID))
        if group_instance_id is not None and member.group_instance_id != group_instance_id:
            return callback(sync_result(errors.FENCED_INSTANCE_ID))
        if generation != group.generation:
            return callback(sync_result(errors.ILLEGAL_GENERATION))
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol):
            return callback(sync_result(errors.INCONSISTENT_GROUP_PROTOCOL))
        self._touch(group, member)
        if group.is_(PREPARING_REBALANCE):
            return callback(sync_result(errors.REBALANCE_IN_PROGRESS))
        if group.is_(STABLE):
            return callback(sync_result(NONE, member.assignment, group.protocol_type, group.protocol))
        if not group.is_(COMPLETING_REBALANCE):
            return callback(sync_result(errors.UNKNOWN_MEMBER_ID))
        if member.sync_callback is not None and member.sync_callback is not callback:
            self._answer_sync(member, sync_result(errors.REBALANCE_IN_PROGRESS))
        member.sync_callback = callback
        if member_id != group.leader_id:
            return None
        for m in group.members.values():
            m.assignment = bytes(assignments.get(m.member_id) or b"")
        now = self.now()
        err = self.metadata.store_group(group, now)
        if self.groups.get(group_id) is not group or not group.is_(COMPLETING_REBALANCE) or \
                group.generation != generation:
            return None
        if err:
            for m in group.members.values():
                m.assignment = b""
                self._answer_sync(m, sync_result(err))
            self._prepare_rebalance(group)
            return None
        group.transition(STABLE, now)
        for m in group.members.values():
            self._answer_sync(m, sync_result(NONE, m.assignment, group.protocol_type, group.protocol))
        return None

    # ---------------------------------------------------------------------------------- heartbeat, leave
    def heartbeat(self, group_id, generation, member_id, group_instance_id=None):
        err = self._check(group_id)
        if err == errors.COORDINATOR_LOAD_IN_PROGRESS:
            return NONE     # Kafka: a member of a loading group is not told to go elsewhere
        if err:
            return err
        group = self.groups.get(group_id)
        if group is None:
            return errors.UNKNOWN_MEMBER_ID
        if group.is_(DEAD):
            return errors.COORDINATOR_NOT_AVAILABLE
        member = group.members.get(member_id)
        if member is None or group.is_(EMPTY):
            return errors.UNKNOWN_MEMBER_ID
        if group_instance_id is not None and member.group_instance_id != group_instance_id:
            return errors.FENCED_INSTANCE_ID
        if generation != group.generation:
            return errors.ILLEGAL_GENERATION
        self._touch(group, member)
        if group.state in (PREPARING_REBALANCE, COMPLETING_REBALANCE):
            return errors.REBALANCE_IN_PROGRESS
        return NONE

    def leave_group(self, group_id, leaving):
        """``leaving``: [(member_id, group_instance_id)] -> (top-level error, [per-member error])."""
        err = self._check(group_id)
        if err:
            return err, [err] * len(leaving)
        group = self.groups.get(group_id)
        if group is None:
            return errors.UNKNOWN_MEMBER_ID, [errors.UNKNOWN_MEMBER_ID] * len(leaving)
        if group.is_(DEAD):
            return errors.COORDINATOR_NOT_AVAILABLE, [errors.COORDINATOR_NOT_AVAILABLE] * len(leaving)
        out = []
        for member_id, instance_id in leaving:
            if instance_id is not None:
                mid = group.static_members.get(instance_id)
                if mid is None:
                    out.append(errors.UNKNOWN_MEMBER_ID)
                    continue
                if member_id and member_id != mid:
                    out.append(errors.FENCED_INSTANCE_ID)
                    continue
                member_id = mid
            if member_id in group.pending_members:
                group.pending_members.pop(member_id).cancel()
                out.append(NONE)
                if group.is_(PREPARING_REBALANCE):
                    self._try_complete_join(group)
                continue
            member = group.members.get(member_id)
            if member is None:
                out.append(errors.UNKNOWN_MEMBER_ID)
                continue
            log.info("group %s: member %s left", group_id, member_id)
            self._remove_member_and_update(group, member)
            out.append(NONE)
        return NONE, out

    # ----------------------------------------------------------------------------------------- offsets
    def handle_commit(self, group_id, generation, member_id, group_instance_id, retention_ms, offsets):
        """OffsetCommit. ``offsets``: {(topic, partition): (offset, leader_epoch, metadata, commit_timestamp)}
        -> {(topic, partition): error code}.

        Accepted when the group is unknown or Empty and ``generation`` < 0 (a "simple" consumer, Kafka's rule), or
        from a known member at the current generation (also during PreparingRebalance); CompletingRebalance =>
        REBALANCE_IN_PROGRESS; unknown member => UNKNOWN_MEMBER_ID; unknown group with a generation =>
        ILLEGAL_GENERATION; metadata over ``offset.metadata.max.bytes`` => OFFSET_METADATA_TOO_LARGE.
        """
        def target():
            return self._commit_target(group_id, generation, member_id, group_instance_id)
        return self._commit(target, retention_ms, offsets)

    def _commit_target(self, group_id, generation, member_id, group_instance_id):
        """(error, group) an OffsetCommit may write to (``handle_commit``'s rules); creates a simple consumer's
        group."""
        err = self._check(group_id, allow_empty=True)
        if err:
            return err, None
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                return errors.ILLEGAL_GENERATION, None
            group = self.groups[group_id] = Group(group_id, EMPTY, self.now())
        elif group.is_(DEAD):
            return errors.COORDINATOR_NOT_AVAILABLE, None
        elif group_instance_id is not None and group.static_members.get(group_instance_id) != member_id:
            return errors.FENCED_INSTANCE_ID, None
        elif not (generation < 0 and group.is_(EMPTY)):
            if group.is_(COMPLETING_REBALANCE):
                return errors.REBALANCE_IN_PROGRESS, None
            member = group.members.get(member_id)
            if member is None:
                return errors.UNKNOWN_MEMBER_ID, None
            if generation != group.generation:
                return errors.ILLEGAL_GENERATION, None
            self._touch(group, member)
        return NONE, group

    def commit_unchecked(self, group_id, offsets):
        """OffsetCommit v0: stored like the others, without group-membership checks (Kafka kept v0 commits in
        ZooKeeper and never looked at the group)."""
        def target():
            err = self._check(group_id, allow_empty=True)
            if err:
                return err, None
            group = self.groups.get(group_id)
            if group is None:
                group = self.groups[group_id] = Group(group_id, EMPTY, self.now())
            elif group.is_(DEAD):
                return errors.COORDINATOR_NOT_AVAILABLE, None
            return NONE, group
        return self._commit(target, -1, offsets)

    def _commit(self, target, retention_ms, offsets, write=None):
        """Stage and write ``offsets`` to the group ``target()`` names ((error, group)), asked again when staging
        yielded (module docstring); ``write(group, staged)`` (default: a plain commit) stores them."""
        err, group = target()
        if err:
            return {tp: err for tp in offsets}
        slice_ = TimeSlice()
        staged = self.metadata.stage_offsets(group.group_id, retention_ms, offsets, slice_.tick)
        if slice_.yields:
            err, again = target()
            if err or again is not group:
                return {tp: err or errors.COORDINATOR_NOT_AVAILABLE for tp in offsets}
        return (write or self.metadata.write_offsets)(group, staged)

    def handle_txn_commit(self, group_id, producer_id, producer_epoch, generation, member_id, group_instance_id,
                          offsets):
        """TxnOffsetCommit. ``offsets`` as ``handle_commit``'s -> {(topic, partition): error code}.

        Kafka's rules (GroupCoordinator.handleTxnCommitOffsets / validateOffsetCommit, KIP-447): group id "" =>
        INVALID_GROUP_ID; an unknown group is created Empty (a transactional producer without group management).
        When the request names a generation >= 0, a member id or a group instance id (v3+ clients in a group):
        an instance id that is not a static member => UNKNOWN_MEMBER_ID, one held by another member id =>
        FENCED_INSTANCE_ID; an unknown member => UNKNOWN_MEMBER_ID; another generation => ILLEGAL_GENERATION.
        Otherwise (v0-v2, or generation -1 and no member) accepted whatever the group's state. The offsets are
        one transactional batch of the producer, pending until its marker (group_metadata.py)."""
        def target():
            return self._txn_commit_target(group_id, generation, member_id, group_instance_id)

        def write(group, staged):
            return self.metadata.write_txn_offsets(group, staged, producer_id, producer_epoch)
        return self._commit(target, -1, offsets, write)

    def _txn_commit_target(self, group_id, generation, member_id, group_instance_id):
        err = self._check(group_id)
        if err:
            return err, None
        group = self.groups.get(group_id)
        if group is not None and group.is_(DEAD):
            return errors.COORDINATOR_NOT_AVAILABLE, None
        if generation >= 0 or member_id or group_instance_id is not None:
            if group is None:
                return errors.UNKNOWN_MEMBER_ID, None        # no members to match (Kafka: created, then refused)
            if group_instance_id is not None:
                current = group.static_members.get(group_instance_id)
                if current is None:
                    return errors.UNKNOWN_MEMBER_ID, None
                if current != member_id:
                    return errors.FENCED_INSTANCE_ID, None
            if member_id not in group.members:
                return errors.UNKNOWN_MEMBER_ID, None
            if generation != group.generation:
                return errors.ILLEGAL_GENERATION, None
        if group is None:
            group = self.groups[group_id] = Group(group_id, EMPTY, self.now())
        return NONE, group

    def complete_transaction(self, producer_id, offsets_partitions, commit):
        """The producer's COMMIT/ABORT marker is replicated in these ``__consumer_offsets`` partitions (called by
        the WriteTxnMarkers handler): its pending transactional offsets of the groups there become committed
        (``commit``) or are dropped -> the number of groups completed."""
        return self.metadata.complete_transaction(producer_id, offsets_partitions, commit)

    def pending_partitions(self, group_id):
        """{(topic, partition)} of ``group_id`` with a transactional commit not yet completed (OffsetFetch
        require_stable answers UNSTABLE_OFFSET_COMMIT for them); empty when the group is not served here."""
        if self._check(group_id, allow_empty=True):
            return set()
        return self.metadata.pending_partitions(group_id)

    def fetch_offsets(self, group_id, partitions):
        """OffsetFetch. ``partitions``: [(topic, partition)] or None (= all committed) ->
        (error, {(topic, partition): OffsetAndMetadata | None})."""
        err = self._check(group_id, allow_empty=True)
        if err:
            return err, {}
        return NONE, self.metadata.fetch_offsets(group_id, partitions)

    def expire_offsets(self):
        """Drop expired offsets of member-less groups and remove Empty groups left without any (group_metadata.py)
        -> the number of offsets dropped."""
        return self.metadata.expire_offsets()

    # ---------------------------------------------------------------------------------- admin requests
    def describe_group(self, group_id):
        """(error, summary dict) -- an unknown group is reported Dead with no error (Kafka's behaviour)."""
        err = self._check(group_id, allow_empty=True)
        if err:
            return err, None
        group = self.groups.get(group_id)
        if group is None:
            return NONE, {"state": DEAD, "protocol_type": "", "protocol": "", "members": []}
        stable = group.is_(STABLE)
        members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                    "client_host": m.client_host,
                    "metadata": (m.metadata(group.protocol) or b"") if stable else b"",
                    "assignment": m.assignment if stable else b""} for m in group.members.values()]
        return NONE, {"state": group.state, "protocol_type": group.protocol_type or "",
                      "protocol": (group.protocol or "") if stable else "", "members": members}

    def list_groups(self):
        """(error, [(group_id, protocol_type, state)]) of every live group this broker coordinates."""
        if not self.active:
            return errors.COORDINATOR_NOT_AVAILABLE, []
        if self.metadata.any_loading():
            return errors.COORDINATOR_LOAD_IN_PROGRESS, []
        return NONE, [(g.group_id, g.protocol_type or "", g.state) for g in self.groups.values()
                      if not g.is_(DEAD)]

    def delete_offsets(self, group_id, partitions):
        """OffsetDelete (KIP-496; Kafka's GroupCoordinator.handleDeleteOffsets): ``partitions`` [(topic, p)] ->
        (group error, {tp: code}). Group errors: the usual coordinator ones, GROUP_ID_NOT_FOUND (69) for an unknown
        or Dead group, NON_EMPTY_GROUP (68) for a group with members that is not a consumer group (its
        subscriptions cannot be read). An Empty group's offsets all go; a consumer group with members keeps those of
        the topics a member subscribes to (GROUP_SUBSCRIBED_TO_TOPIC 86 per partition; every topic counts as
        subscribed before the first rebalance chose a protocol, as Kafka's ``isSubscribedToTopic``)."""
        err = self._check(group_id)
        if err:
            return err, {}
        group = self.groups.get(group_id)
        if group is None or group.is_(DEAD):
            return errors.GROUP_ID_NOT_FOUND, {}
        if group.is_(EMPTY):
            subscribed = set()
        elif group.protocol_type == "consumer":
            subscribed = _subscribed_topics(group)
        else:
            return errors.NON_EMPTY_GROUP, {}
        result = {}
        doomed = []
        for tp in partitions:
            if subscribed is None or tp[0] in subscribed:
                result[tp] = errors.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                result[tp] = NONE
                doomed.append(tp)
        err = self.metadata.delete_offsets(group, doomed) if doomed else NONE
        if err:
            return err, {}
        return NONE, result

    def on_partitions_deleted(self, partitions):
        """Kafka's GroupCoordinator.onPartitionsDeleted: the committed (and pending transactional) offsets of the
        deleted ``partitions`` [(topic, p)] are tombstoned in every group this broker coordinates, so a topic
        created again under the same name is not read from a stale offset (Kafka Streams' repartition topics after
        kafka-streams-application-reset). Called for StopReplica with delete=true; a group whose tombstones cannot
        be written keeps its offsets (logged)."""
        if not self.active or not partitions:
            return
        deleted = set(partitions)
        topics = {t for t, _ in deleted}
        ts = TimeSlice()
        for group in list(self.groups.values()):
            # Each group's own offsets against the set (not the deleted list against each group: 10,000
            # partitions x 1,000 groups would hold the loop for seconds); a slice per 20 ms for many groups.
            mine = sorted({tp for tp in list(group.offsets) + list(group.pending_txn_partitions())
                           if tp[0] in topics and tp in deleted})
            if mine:
                err = self.metadata.delete_offsets(group, mine)
                if err:
                    log.warning("group %s: the offsets of deleted partitions were not removed (error %d)",
                                group.group_id, err)
            ts.tick()

    def delete_group(self, group_id):
        err = self._check(group_id, allow_empty=True)
        if err:
            return err
        group = self.groups.get(group_id)
        if group is None or group.is_(DEAD):
            return errors.GROUP_ID_NOT_FOUND
        if not group.is_(EMPTY):
            return errors.NON_EMPTY_GROUP
        return self.metadata.delete_group(group)


def _subscribed_topics(group):
    """The topics the members of a consumer group subscribe to, from their metadata for the group's chosen protocol
    (the ConsumerProtocol Subscription, every version: ``version int16 | topics [string] | ...``), or None when no
    protocol is chosen yet or a member's metadata cannot be read (then every topic counts as subscribed)."""
    if group.protocol is None:
        return None
    topics = set()
    for member in group.members.values():
        metadata = dict(member.protocols).get(group.protocol)
        if metadata is None:
            return None
        try:
            topics.update(_subscription_topics(bytes(metadata)))
        except (ValueError, UnicodeDecodeError):
            return None
    return topics


def _subscription_topics(buf):
    if len(buf) < 6:
        raise ValueError("short subscription")
    count = int.from_bytes(buf[2:6], "big", signed=True)
    if count < 0 or count > len(buf):
        raise ValueError("bad topic count")
    pos, out = 6, []
    for _ in range(count):
        n = int.from_bytes(buf[pos:pos + 2], "big", signed=True)
        if n < 0 or pos + 2 + n > len(buf):
            raise ValueError("bad topic name")
        out.append(buf[pos + 2:pos + 2 + n].decode("utf-8"))
        pos += 2 + n
    return out
