"""What a request handler sees: who is asking (``ClientIdentity``), the request's header fields, and the broker's
collaborators (``Services``) -- the seams that authorization, quotas and transactions plug into.

``handler(ctx, req)`` (``kbroker/server/router.py``) gets a ``RequestContext``:

* ``ctx.identity`` -- a ``ClientIdentity``, one per connection, built by the server when it accepts the connection:
  ``listener`` (the listener name it came in on; None for the in-process path, ``IN_PROCESS``, which never crosses
  a socket), ``security_protocol`` (``listener.security.protocol.map``: PLAINTEXT, SSL, SASL_PLAINTEXT,
  SASL_SSL), ``principal`` (Kafka's ``KafkaPrincipal`` string; kbroker authenticates nobody yet, so every
  connection is ``User:ANONYMOUS``, which is what Kafka's DefaultKafkaPrincipalBuilder says for PLAINTEXT),
  ``host`` / ``port`` (the peer's address). Frozen: what authorization and quotas key on cannot change under a
  request.
* ``ctx.api_key``, ``ctx.api_version``, ``ctx.correlation_id``, ``ctx.client_id`` -- this request's header
  (client_id may be None, Kafka's nullable string).
* ``ctx.services`` -- the broker's ``Services``, the same object for every request of a broker.
* ``ctx.connection`` -- the ``Connection`` hooks handlers use (``closing`` to end a long wait, ``router`` for
  ApiVersions); None on the in-process path.

``Services`` is built once by the broker (``Broker.start``, before its listeners open) and frozen: which objects
serve the handlers never changes while the broker runs. Each collaborator owns its state and offers the handlers
a narrow interface; the ``typing.Protocol`` classes below name exactly what the handlers call. They are defined
here, below the handlers' layer (tests/unit/test_architecture.py), so a handler needs no import of the group
coordinator or the controller (layer 4) nor of ``kbroker/broker.py`` (5) to use them;
tests/unit/test_request_context.py checks that the real classes provide every member. Who owns what:

* ``config`` -- the BrokerConfig (``cfg[key]``, ``cfg.get(key, default)``); read-only.
* ``broker_id``, ``cluster_id`` -- fixed once the broker has started.
* ``metadata`` -- the ``MetadataCache``: what this broker believes about the cluster (live brokers, partition
  states, the controller), changed only by the controller's UpdateMetadata.
* ``replicas`` -- the ReplicaManager: the partitions hosted here, their leadership, logs and high watermarks.
* ``topics`` -- the TopicAdmin: topic and partition creation/deletion and topic configs, through the coordination
  backend's znodes; the partition ceilings.
* ``producer_ids`` -- the producer-id block lease (``/latest_producer_id_block``).
* ``groups`` -- the GroupCoordinator: the consumer groups of the ``__consumer_offsets`` partitions led here.
* ``control_plane`` -- a ``ControlPlane``: whom controller requests must come from (the controller view, this
  broker's registration epoch, the control-plane listener).
* ``controller`` -- this broker's Controller (active or not), or None where none runs.
* ``ready`` -- set once the broker has the controller's first metadata (``wait(timeout) -> bool``).
* ``authorizer`` -- an ``Authorization`` (``kbroker/security/authorizer.py``'s ACL authorizer) when
  ``authorizer.class.name`` is set, else None: every request is allowed, as in Kafka without an authorizer.
  Handlers ask through ``ctx.authorize(operation, resource_type, name)`` (names from ``kbroker/security/acl.py``),
  never through the authorizer directly, so the identity asked about is always the connection's.
* ``scram`` -- the users' SCRAM credentials (``ScramCredentials``) for the KIP-554 APIs.
* ``client_quotas`` -- the configured client quotas (``ClientQuotaAdministration``) for the KIP-546 APIs.
* ``transactions`` -- the transaction coordinator (``kbroker/transaction``) of the ``__transaction_state``
  partitions led here (``TransactionCoordination``); None only in unit tests that build Services by hand.
* ``replication`` -- this broker's leader replication quota (``ReplicationThrottle``, KIP-73,
  kbroker/quota/replication.py) for Fetch's follower reads; None = no replication throttling.
* ``quotas`` -- the client quotas (``QuotaEnforcement``, ``kbroker/quota``): None = no quotas at all, so the
  handlers' and the connection's whole quota work is one ``is None`` test. Produce records the bytes it appended,
  Fetch the record bytes it answers (not a follower's), the connection each request's handler time; each answer
  is a throttle time in ms that goes to ``ctx.throttle(ms)``.
* ``stats`` -- the broker's counters for the metrics endpoint (``kbroker/server/stats.py`` BrokerStats: topic and
  request stats, the event loop's load), None = nothing counted (no metrics endpoint: metrics.http.port=-1; tests'
  Services). Produce and Fetch count
  per-topic messages and bytes through ``stats.topics``; the Connection counts requests and their times.

Throttling (KIP-219): ``ctx.throttle(ms)`` keeps the largest throttle asked for the request (``ctx.throttle_ms``, 0
by default). The Connection writes it into the response's ``throttle_time_ms`` (max with what the handler wrote),
sends the response at once and then reads nothing more from that connection for ``ctx.throttle_ms``: a client that
ignores the field is held back all the same. ``ctx.parked_s`` is the time the handler spent parked (a long-poll
Fetch, an acks=all wait), which the request quota does not charge; ``ctx.quota_exempt`` exempts the request from
the request quota (a follower's Fetch: the replication quotas govern those).
"""
from dataclasses import dataclass
from typing import Any, Optional, Protocol

from kbroker.server.metadata_cache import MetadataCache

ANONYMOUS = "User:ANONYMOUS"
# How long a request waits for ``Services.ready`` (the broker's own wait for its first metadata is as long).
READY_WAIT_S = 30.0


@dataclass(frozen=True, slots=True)
class ClientIdentity:
    """Who is on the other end of one connection (see the module docstring)."""
    listener: Optional[str]
    security_protocol: str
    principal: str
    host: str
    port: int

    @classmethod
    def accepted(cls, listener, protocol_map, address):
        """The identity of a connection accepted on ``listener``: its security protocol from ``protocol_map``
        (listener.security.protocol.map; a listener missing from it is named after its protocol, as in Kafka)."""
        host, port = (address[0], address[1]) if address else ("", -1)
        return cls(listener, (protocol_map or {}).get(listener, listener), ANONYMOUS, host, port)

    @property
    def in_process(self):
        return self.listener is None


# The controller's requests to its own broker (kbroker/handlers/cluster.py's local_dispatcher).
IN_PROCESS = ClientIdentity(None, "PLAINTEXT", ANONYMOUS, "", -1)


class RequestContext:
    """One request's context (module docstring). Built per request, so a plain class with slots."""
    __slots__ = ("identity", "services", "connection", "api_key", "api_version", "correlation_id", "client_id",
                 "throttle_ms", "parked_s", "quota_exempt")

    def __init__(self, identity, services, api_key, api_version, correlation_id=-1, client_id=None,
                 connection=None):
        self.identity = identity
        self.services = services
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.connection = connection
        self.throttle_ms = 0        # the largest throttle (ms) a quota asked for (module docstring: Throttling)
        self.parked_s = 0.0         # seconds the handler waited parked: not charged to the request quota
        self.quota_exempt = False   # exempt from the request quota (a follower's Fetch)

    def throttle(self, ms):
        """A quota asks to throttle this request's client for ``ms`` milliseconds; the largest ask wins."""
        if ms > self.throttle_ms:
            self.throttle_ms = ms

    @property
    def listener(self):
        """The listener name the request came in on (None in-process)."""
        return self.identity.listener

    def authorize(self, operation, resource_type, name, log_denied=True):
        """May this connection's principal perform ``operation`` on the resource (``kbroker/security/acl.py``
        names: ``ctx.authorize(acl.READ, acl.TOPIC, "orders")``)? True without an authorizer and for the in-process
        path (the controller's own requests to its broker). ``log_denied=False`` where a "no" only filters what
        the answer shows (Metadata listing all topics, ListGroups: Kafka's ``logIfDenied = false``): the audit log
        then records the denial at DEBUG, not INFO."""
        authorizer = self.services.authorizer if self.services is not None else None
        if authorizer is None or self.identity.in_process:
            return True
        return authorizer.authorize(self.identity, operation, resource_type, name, log_denied)


# ------------------------------------------------------------------------------------------------ interfaces

class ReplicaAccess(Protocol):
    """The hosted partitions (kbroker/replica/manager.py ReplicaManager)."""

    def get_partition(self, topic, p):
        """The Partition hosted here, leader or follower, or None."""

    def leader_partition(self, topic, p):
        """The Partition led here; raises UnknownTopicOrPartition / NotLeaderOrFollower."""

    def apply_leader_and_isr(self, controller_id, controller_epoch, partition_states, live_leaders):
        """LeaderAndIsr -> {(topic, p): error code} (missing = 0)."""

    def stop_replicas(self, controller_epoch, partitions):
        """StopReplica [(topic, p, delete)] -> {(topic, p): error code}."""

    def log_dir_usage(self):
        """DescribeLogDirs: [(log dir, [((topic, p), size, offset lag, is_future)] | None = offline)] in log.dirs
        order."""

    def alter_log_dir(self, topic, p, log_dir):
        """AlterReplicaLogDirs: move the replica to ``log_dir`` (KIP-113) -> error code. May yield."""


class TopicAdministration(Protocol):
    """Topic and config administration (kbroker/topic_admin.py TopicAdmin); raises kbroker.errors exceptions."""

    def request_allowance(self): ...

    def requested_partitions(self, num_partitions, assignment=None): ...

    def check_topic_partitions(self, name, n): ...

    def current_partitions(self, name): ...

    def create_topic(self, name, num_partitions, replication_factor, assignment=None, configs=None,
                     validate_only=False, timeout_ms=30000): ...

    def auto_create_topic(self, name): ...

    def ensure_offsets_topic(self): ...

    def ensure_transaction_state_topic(self): ...

    def delete_topic(self, name, timeout_ms=30000): ...

    def create_partitions(self, name, count, assignment=None, validate_only=False, timeout_ms=30000): ...

    def describe_topic_config(self, name): ...

    def describe_broker_config(self): ...

    def alter_topic_config(self, name, configs, validate_only=False): ...


class ProducerIds(Protocol):
    """Producer-id blocks (kbroker/producer_ids.py ProducerIdManager)."""

    def next_id(self): ...


class GroupCoordination(Protocol):
    """The consumer-group coordinator (kbroker/coordinator/coordinator.py GroupCoordinator); answers are Kafka
    error codes. ``active`` is False once it has shut down."""
    active: bool

    def partition_for(self, group_id): ...

    def join_group(self, group_id, member_id, group_instance_id, client_id, client_host, rebalance_timeout,
                   session_timeout, protocol_type, protocols, require_known_member_id, callback): ...

    def sync_group(self, group_id, generation, member_id, group_instance_id, protocol_type, protocol_name,
                   assignments, callback): ...

    def heartbeat(self, group_id, generation, member_id, group_instance_id=None): ...

    def leave_group(self, group_id, leaving): ...

    def handle_commit(self, group_id, generation, member_id, group_instance_id, retention_ms, offsets): ...

    def commit_unchecked(self, group_id, offsets): ...

    def fetch_offsets(self, group_id, partitions): ...

    def handle_txn_commit(self, group_id, producer_id, producer_epoch, generation, member_id, group_instance_id,
                          offsets): ...

    def complete_transaction(self, producer_id, offsets_partitions, commit):
        """The producer's marker is replicated in these ``__consumer_offsets`` partitions: its pending
        transactional offsets there become committed (``commit``) or are dropped (WriteTxnMarkers calls it)."""

    def pending_partitions(self, group_id): ...

    def describe_group(self, group_id): ...

    def list_groups(self): ...

    def delete_group(self, group_id): ...

    def delete_offsets(self, group_id, partitions): ...

    def on_partitions_deleted(self, partitions):
        """StopReplica deleted these [(topic, p)] here: their committed offsets go from every group (Kafka's
        onPartitionsDeleted), so a topic created again under the name is not read from a stale offset."""


class TransactionCoordination(Protocol):
    """The transaction coordinator (kbroker/transaction/coordinator.py TransactionCoordinator); every answer is a
    Kafka error code or a dict ready for the response. ``partition_for(transactional_id)`` is its
    ``__transaction_state`` partition (the same hash as the group coordinator's). ``active`` is False once it has
    shut down. The calls may yield (they write ``__transaction_state`` with acks=-1)."""
    active: bool

    def partition_for(self, transactional_id): ...

    def init_producer_id(self, transactional_id, timeout_ms, expected=None):
        """-> (error code, producer id, epoch); ``expected`` (producer id, epoch) of KIP-360 or None."""

    def add_partitions(self, transactional_id, producer_id, producer_epoch, partitions):
        """AddPartitionsToTxn / AddOffsetsToTxn: {(topic, p)} -> error code."""

    def end_txn(self, transactional_id, producer_id, producer_epoch, commit):
        """EndTxn -> error code."""

    def describe(self, transactional_id):
        """DescribeTransactions' entry (a response dict) for one id."""

    def list_transactions(self, state_filters, producer_id_filters, duration_filter_ms=-1):
        """ListTransactions' answer (error_code, unknown_state_filters, transaction_states)."""


class Authorization(Protocol):
    """The authorizer (kbroker/security/authorizer.py): answers from its in-memory ACL cache, never blocking on
    the coordination backend, so a handler may ask once per partition."""

    def authorize(self, identity, operation, resource_type, name, log_denied=True):
        """True when ``identity`` (a ClientIdentity) may perform ``operation`` on ``resource_type``/``name``; a
        denial is audited at INFO when ``log_denied``, else at DEBUG."""

    def authorize_by_resource_type(self, identity, operation, resource_type):
        """True when ``identity`` may perform ``operation`` on at least one resource of the type (KIP-679)."""

    def acls(self, flt=None):
        """DescribeAcls: the cached AclBindings matching an AclBindingFilter (None: all)."""

    def create_acls(self, bindings):
        """CreateAcls: store (ResourcePattern, AclEntry) bindings -> [None | KafkaError], one per binding."""

    def delete_acls(self, filters):
        """DeleteAcls: per AclBindingFilter, [(AclBinding deleted, None | KafkaError)]."""


class ScramCredentials(Protocol):
    """Users' SCRAM credentials in the coordination backend (kbroker/security/scram_store.py ScramAdmin), for
    DescribeUserScramCredentials / AlterUserScramCredentials; None on a broker built without it."""

    def users(self): ...

    def describe(self, user): ...

    def alter(self, user, upserts, deletes): ...


class ClientQuotaAdministration(Protocol):
    """The client quotas in the coordination backend (kbroker/quota/store.py QuotaAdmin), for DescribeClientQuotas
    / AlterClientQuotas; None on a broker built without it. Entities are (user, client): a name, None for
    ``<default>``, False when the entity has no such part."""

    def entities(self): ...

    def alter(self, user, client, upserts, deletes): ...


class ReplicationThrottle(Protocol):
    """The leader replication quota (kbroker/quota/replication.py ReplicationQuota): ``bounded`` (a bool)."""

    def is_throttled(self, tp):
        """Whether (topic, p) is in this broker's leader.replication.throttled.replicas."""

    def is_quota_exceeded(self, now=None): ...

    def record(self, nbytes, now=None): ...


class QuotaManager(Protocol):
    """One quota type's accounting (kbroker/quota/manager.py ClientQuotaManager)."""

    def enabled(self):
        """False while no client has a quota of this type: callers need not measure what they would record."""

    def record(self, identity, client_id, value, now_ms=None):
        """Record ``value`` (bytes; for the request quota, percent-seconds of handler time) for the client
        (``identity.principal``, ``client_id``) -> how long (ms) to throttle it, 0 within its quota."""


class QuotaEnforcement(Protocol):
    """The client quotas (kbroker/quota/manager.py ClientQuotas): ``produce`` (producer_byte_rate), ``fetch``
    (consumer_byte_rate), ``request`` (request_percentage) managers; ``stats()`` -> the throttle counters (per
    quota type and per (user, client-id): throttled requests and ms) and ``throttle_averages()`` (per quota type
    and (user, client-id): the average throttle ms over the quota windows), read by kbroker/metrics/cluster.py."""
    produce: QuotaManager
    fetch: QuotaManager
    request: QuotaManager

    def stats(self): ...

    def throttle_averages(self): ...


class ControllerAccess(Protocol):
    """This broker's controller (kbroker/controller/controller.py Controller)."""

    def is_active(self): ...

    def controlled_shutdown(self, broker_id, broker_epoch, timeout=None): ...

    def elect_leaders(self, election_type, partitions, timeout=None): ...


class ControlPlane:
    """Whom controller requests (LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown) must come from;
    the checks themselves are kbroker/handlers/cluster.py's.

    ``view``: the ControllerView (``/controller`` and ``/controller_epoch`` by watches: ``is_current(id, epoch,
    timeout)``, ``controller_id``, ``epoch``); ``listener``: control.plane.listener.name or None; the registrar
    (this broker's ``/brokers/ids/<id>``, whose czxid is the broker epoch) is attached once, when the broker
    registers -- after its listeners are bound, since the registration names their ports."""

    __slots__ = ("view", "listener", "_registrar")

    def __init__(self, view, listener=None, registrar=None):
        self.view = view
        self.listener = listener
        self._registrar = registrar

    def attach_registrar(self, registrar):
        if self._registrar is not None:
            raise RuntimeError("the broker registration is attached once")
        self._registrar = registrar

    def broker_epoch(self, timeout):
        """This broker's epoch (KIP-380), waiting up to ``timeout`` while a registration is under way; -1 before
        the broker has registered (no controller can know an epoch then, so no request matches it)."""
        registrar = self._registrar
        return -1 if registrar is None else registrar.wait_epoch(timeout)


@dataclass(frozen=True)
class Services:
    """The broker's collaborators as the handlers see them (module docstring: who owns what)."""
    config: Any
    broker_id: int
    cluster_id: Optional[str]
    metadata: MetadataCache
    replicas: ReplicaAccess
    topics: TopicAdministration
    producer_ids: ProducerIds
    groups: GroupCoordination
    control_plane: ControlPlane
    controller: Optional[ControllerAccess]
    ready: Any
    authorizer: Optional[Authorization] = None
    stats: Any = None    # kbroker/server/stats.py BrokerStats (issue 13); None = nothing counted
    scram: Optional["ScramCredentials"] = None
    transactions: Optional["TransactionCoordination"] = None
    quotas: Optional["QuotaEnforcement"] = None
    replication: Optional["ReplicationThrottle"] = None
    client_quotas: Optional["ClientQuotaAdministration"] = None
    broker_configs: Any = None    # kbroker/config/dynamic.py DynamicBrokerConfig (KIP-226)
    fetch_sessions: Any = None    # kbroker/server/fetch_sessions.py FetchSessionCache (KIP-227); None = sessionless
