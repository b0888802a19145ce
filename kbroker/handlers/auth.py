"""What the handlers ask the authorizer, in Kafka's shapes (Kafka's ``AuthHelper``; issue 10 item 4).

Every question goes through ``ctx.authorize(operation, resource_type, name)`` (kbroker/server/context.py), so the
identity asked about is always the connection's, the in-process path (the controller's requests to its own
broker) is always allowed, and a broker without ``authorizer.class.name`` allows everything, as Kafka does.

Cost: a handler asks once per distinct resource name of a request (``authorized_names``), never once per
partition: a Produce of 30,000 partitions of one topic asks once. Without an authorizer no question is asked at
all (``enforcing`` is False), so unsecured brokers pay one attribute read per request. With one, the questions
about a request's names are asked in time slices (``common.sliced``): a DeleteTopics naming 100,000 topics asks
100,000 questions, and the event loop is handed back every 20 ms of them.

The table of what each API asks, and the error a denied principal gets, is in docs/security.md; each handler's
docstring says its part.
"""
from kbroker.handlers.common import sliced
from kbroker.security.acl import (ALTER, ALTER_CONFIGS, CLUSTER, CLUSTER_ACTION, CLUSTER_NAME, CREATE, DELETE,
                                  DESCRIBE, DESCRIBE_CONFIGS, GROUP, IDEMPOTENT_WRITE, OPERATION_CODES, READ,
                                  TOPIC, TRANSACTIONAL_ID, WRITE)

# KIP-430's authorized-operations fields are bit fields of these operations' wire codes (Kafka's
# AclEntry.supportedOperations); INT32_MIN ("not provided") when the request did not ask.
SUPPORTED_OPERATIONS = {
    TOPIC: (READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    GROUP: (READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    CLUSTER: (CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE),
    TRANSACTIONAL_ID: (DESCRIBE, WRITE),
}
OPERATIONS_OMITTED = -2147483648


def enforcing(ctx):
    """True when ``ctx.authorize`` may say no: an authorizer is configured and the request came over a socket."""
    services = ctx.services
    return services is not None and services.authorizer is not None and not ctx.identity.in_process


def cluster(ctx, operation, log_denied=True):
    """May the principal perform ``operation`` on the Cluster resource? (``log_denied``: ``ctx.authorize``'s.)"""
    return ctx.authorize(operation, CLUSTER, CLUSTER_NAME, log_denied)


def authorized_names(ctx, operation, resource_type, names, log_denied=True):
    """The subset of ``names`` (any iterable; repeats allowed) the principal may perform ``operation`` on, as a
    set: one question per distinct name (Kafka's filterByAuthorized). ``log_denied=False`` when the denied names
    are only left out of the answer (``ctx.authorize``)."""
    if not enforcing(ctx):
        return set(names)
    authorize = ctx.authorize
    return {n for n in sliced(set(names)) if authorize(operation, resource_type, n, log_denied)}


def denied_names(ctx, operation, resource_type, names, log_denied=True):
    """The complement of ``authorized_names``: the distinct names the principal may NOT perform ``operation`` on
    (empty without an authorizer, with no question asked)."""
    if not enforcing(ctx):
        return frozenset()
    authorize = ctx.authorize
    return {n for n in sliced(set(names)) if not authorize(operation, resource_type, n, log_denied)}


def authorize_any(ctx, operation, resource_type):
    """Kafka's ``authorizeByResourceType`` (KIP-679): may the principal perform ``operation`` on at least one
    resource of ``resource_type`` (an allowing ACL on some literal or prefixed name, or a wildcard, and no deny
    ACL covering every such name)? Asked of the authorizer's ``authorize_by_resource_type(identity, operation,
    resource_type)`` (kbroker/server/context.py's Authorization)."""
    if not enforcing(ctx):
        return True
    return ctx.services.authorizer.authorize_by_resource_type(ctx.identity, operation, resource_type)


def authorized_operations(ctx, resource_type, name):
    """KIP-430's bit field for one resource: bit ``code`` set for each supported operation the principal may
    perform (every supported one without an authorizer, as Kafka)."""
    bits = 0
    authorize = ctx.authorize
    for op in SUPPORTED_OPERATIONS[resource_type]:
        if authorize(op, resource_type, name, False):   # a bit field, not a refusal: Kafka logs none
            bits |= 1 << OPERATION_CODES[op]
    return bits
