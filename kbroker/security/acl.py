"""Kafka's ACL vocabulary: resource types, operations, permission and pattern types, with their wire codes (the int8
values of CreateAcls/DescribeAcls/DeleteAcls, KIP-140/KIP-290) and the names Kafka writes in ZooKeeper
(``/kafka-acl/<Type>/<name>``: ``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
"operation":"Read","host":"*"}]}``).

Handlers ask with these names: ``ctx.authorize(READ, TOPIC, "orders")`` (``kbroker/server/context.py``).
"""

# Resource types: wire code <-> ZooKeeper name.
UNKNOWN_RESOURCE, ANY_RESOURCE = 0, 1
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = "Topic", "Group", "Cluster", "TransactionalId", \
    "DelegationToken", "User"
RESOURCE_TYPE_CODES = {TOPIC: 2, GROUP: 3, CLUSTER: 4, TRANSACTIONAL_ID: 5, DELEGATION_TOKEN: 6, USER: 7}
RESOURCE_TYPE_NAMES = {v: k for k, v in RESOURCE_TYPE_CODES.items()}
# The one Cluster resource's name.
CLUSTER_NAME = "kafka-cluster"

# Operations: wire code <-> ZooKeeper name.
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = "All", "Read", "Write", "Create", "Delete", "Alter", "Describe"
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = "ClusterAction", "DescribeConfigs", \
    "AlterConfigs", "IdempotentWrite"
CREATE_TOKENS, DESCRIBE_TOKENS = "CreateTokens", "DescribeTokens"
OPERATION_CODES = {ALL: 2, READ: 3, WRITE: 4, CREATE: 5, DELETE: 6, ALTER: 7, DESCRIBE: 8, CLUSTER_ACTION: 9,
                   DESCRIBE_CONFIGS: 10, ALTER_CONFIGS: 11, IDEMPOTENT_WRITE: 12, CREATE_TOKENS: 13,
                   DESCRIBE_TOKENS: 14}
OPERATION_NAMES = {v: k for k, v in OPERATION_CODES.items()}
ANY_OPERATION = 1

# Permission types.
ALLOW, DENY = "Allow", "Deny"
PERMISSION_CODES = {DENY: 2, ALLOW: 3}
PERMISSION_NAMES = {v: k for k, v in PERMISSION_CODES.items()}
ANY_PERMISSION = 1

# Pattern types (KIP-290): LITERAL names one resource (or every one with "*"), PREFIXED every name starting with it.
LITERAL, PREFIXED = "LITERAL", "PREFIXED"
PATTERN_CODES = {"ANY": 1, "MATCH": 2, LITERAL: 3, PREFIXED: 4}
PATTERN_NAMES = {v: k for k, v in PATTERN_CODES.items()}

WILDCARD = "*"            # a literal resource name matching every resource of its type; also "any host"
WILDCARD_PRINCIPAL = "User:*"

# ``ANY`` / ``UNKNOWN`` in filters and in what a client may send (code 1 / code 0 of every enum above).
ANY, UNKNOWN = "Any", "Unknown"
ANY_PATTERN, MATCH = "ANY", "MATCH"

# authorizer.class.name values that select kbroker's ACL authorizer (kbroker/security/authorizer.py): Kafka's two
# ZooKeeper-backed class names (0.10-2.x and 2.4+) and kbroker's own; empty selects none. Anything else stops startup.
AUTHORIZER_CLASSES = ("kafka.security.auth.SimpleAclAuthorizer", "kafka.security.authorizer.AclAuthorizer",
                      "kbroker.security.authorizer.AclAuthorizer")

# Operations an ALLOW ACL on another operation implies (Kafka's AclOperation docs): Read, Write, Delete or Alter
# allow Describe; AlterConfigs allows DescribeConfigs. ``All`` allows everything (checked apart). A DENY ACL never
# implies: denying Read leaves Describe to the allow ACLs.
IMPLIED_BY = {DESCRIBE: frozenset((DESCRIBE, READ, WRITE, DELETE, ALTER)),
              DESCRIBE_CONFIGS: frozenset((DESCRIBE_CONFIGS, ALTER_CONFIGS))}


def resource_type_name(code):
    """Wire code -> resource type name: a concrete type, ``ANY`` (1) or ``UNKNOWN`` (0 and unknown codes)."""
    return ANY if code == ANY_RESOURCE else RESOURCE_TYPE_NAMES.get(code, UNKNOWN)


def operation_name(code):
    """Wire code -> operation name, ``ANY`` (1) or ``UNKNOWN``."""
    return ANY if code == ANY_OPERATION else OPERATION_NAMES.get(code, UNKNOWN)


def permission_name(code):
    """Wire code -> ``Allow`` / ``Deny``, ``ANY`` (1) or ``UNKNOWN``."""
    return ANY if code == ANY_PERMISSION else PERMISSION_NAMES.get(code, UNKNOWN)


def pattern_name(code):
    """Wire code -> ``LITERAL`` / ``PREFIXED`` / ``ANY`` / ``MATCH``, or ``UNKNOWN``."""
    return PATTERN_NAMES.get(code, UNKNOWN)


_RESOURCE_BY_LOWER = {n.lower(): n for n in RESOURCE_TYPE_CODES}
_OPERATION_BY_LOWER = {n.lower(): n for n in OPERATION_CODES}
_PERMISSION_BY_LOWER = {n.lower(): n for n in PERMISSION_CODES}


def _canon(table, text):
    return table.get(str(text).replace("_", "").lower())


def parse_resource_type(text):
    """``"topic"``, ``"TOPIC"``, ``"TransactionalId"``, ``"TRANSACTIONAL_ID"`` -> the canonical name, or None."""
    return _canon(_RESOURCE_BY_LOWER, text)


def parse_operation(text):
    """``"read"``, ``"DescribeConfigs"``, ``"DESCRIBE_CONFIGS"``, ``"all"`` -> the canonical name, or None."""
    return _canon(_OPERATION_BY_LOWER, text)


def parse_permission(text):
    return _canon(_PERMISSION_BY_LOWER, text)


def principal_error(principal):
    """None when ``principal`` is a KafkaPrincipal string ``Type:name`` (Kafka's SecurityUtils.parseKafkaPrincipal:
    split at the first ``:``; either side may be empty, the name may hold more ``:``), else Kafka's message."""
    if not isinstance(principal, str) or ":" not in principal:
        return "expected a string in format principalType:principalName but got %s" % (principal,)
    return None
