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
