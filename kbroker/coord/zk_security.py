"""ZooKeeper authentication settings and the ACLs Kafka puts on its znodes (section 7.6), without kazoo.

ACLs. With ``zookeeper.set.acl=true`` a Kafka broker creates every znode with ``defaultAcls(path)`` (Kafka's
``ZkData.defaultAcls``), and ``zookeeper-security-migration --zookeeper.acl secure|unsecure`` rewrites existing
ones with the same function:

* secure, ordinary path: ``CREATOR_ALL_ACL`` -- every permission (ALL = 31) for the identities the creating session
  authenticated as (ZooKeeper's ``auth`` scheme: for a SASL session the one id ``sasl:<user>``) -- plus
  ``READ_ACL_UNSAFE``, read (1) for ``world:anyone``: the cluster's metadata is world-readable but only the brokers
  may change it;
* secure, sensitive path (``SENSITIVE_ROOT_PATHS`` prefixes: SCRAM credentials under ``/config/users``, broker
  configs with passwords under ``/config/brokers``, delegation tokens): the creator only, no world read;
* ``/consumers`` (the old consumers' offsets, which every consumer writes), and every path when not secure:
  ``OPEN_ACL_UNSAFE``, ALL for ``world:anyone``.

Paths are the broker's own (relative to the chroot, as Kafka's chrooted client sees them); the prefix test is
Kafka's plain ``startsWith`` (``/config/users2`` is sensitive too). ``SECURE_ROOT_PATHS`` is Kafka's
``ZkData.SecureRootPaths``: the subtrees the migration tool walks.

An ACL here is ``Acl(perms, scheme, id)``: perms a bit set (READ 1, WRITE 2, CREATE 4, DELETE 8, ADMIN 16, ALL 31),
ZooKeeper's own values, so zk.py turns one into a kazoo ACL field for field.

SASL. ``ZkSaslCredentials`` is what a broker or tool logs in to ZooKeeper with: the JAAS ``Client`` section's
``org.apache.zookeeper.server.auth.DigestLoginModule`` username and password, mechanism DIGEST-MD5 (the one
mechanism kbroker's ZooKeeper client speaks: kazoo through pure-sasl), and the SASL service name
(``zookeeper.sasl.client.username``, default ``zookeeper``). Reading the JAAS file is kbroker.security's job
(security/zk_client.py); this layer only carries the result.
"""

from collections import namedtuple

READ, WRITE, CREATE, DELETE, ADMIN = 1, 2, 4, 8, 16
ALL = READ | WRITE | CREATE | DELETE | ADMIN

Acl = namedtuple("Acl", "perms scheme id")
Acl.__doc__ = "One ZooKeeper ACL entry: ``perms`` (bit set, ALL = 31), ``scheme`` and ``id`` of the identity."

# ZooDefs.Ids: the identities of the creating session ("auth" scheme, empty id); anyone.
CREATOR_ALL_ACL = (Acl(ALL, "auth", ""),)
READ_ACL_UNSAFE = (Acl(READ, "world", "anyone"),)
OPEN_ACL_UNSAFE = (Acl(ALL, "world", "anyone"),)

CONSUMERS_PATH = "/consumers"

# Kafka's ZkData.SecureRootPaths (admin, brokers, cluster, config, controller, controller epoch, ISR change
# notifications, producer id block, log dir events, delegation tokens, the extended ACL root) ++
# ZkAclStore.securePaths (the literal and prefixed ACL stores and their change-notification paths).
SECURE_ROOT_PATHS = (
    "/admin",
    "/brokers",
    "/cluster",
    "/config",
    "/controller",
    "/controller_epoch",
    "/isr_change_notification",
    "/latest_producer_id_block",
    "/log_dir_event_notification",
    "/delegation_token",
    "/kafka-acl-extended",
    "/kafka-acl",
    "/kafka-acl-changes",
    "/kafka-acl-extended/prefixed",
    "/kafka-acl-extended-changes",
)

# Kafka's ZkData.SensitiveRootPaths: user credentials (SCRAM), broker configs (passwords), delegation tokens.
SENSITIVE_ROOT_PATHS = ("/config/users", "/config/brokers", "/delegation_token/tokens")


def sensitive_path(path):
    """True when ``path`` starts with one of SENSITIVE_ROOT_PATHS (Kafka's ``ZkData.sensitivePath``)."""
    return path is not None and any(path.startswith(p) for p in SENSITIVE_ROOT_PATHS)


def default_acls(secure, path):
    """The ACL list a znode at ``path`` is created with (Kafka's ``ZkData.defaultAcls(isSecure, path)``): a tuple of
    Acl, creator first. Module docstring has the rule."""
    if not secure or path == CONSUMERS_PATH:
        return OPEN_ACL_UNSAFE
    if sensitive_path(path):
        return CREATOR_ALL_ACL
    return CREATOR_ALL_ACL + READ_ACL_UNSAFE


def expected_acls(secure, path, principals):
    """What ZooKeeper reports for a node created with ``default_acls(secure, path)`` by a session authenticated as
    ``principals`` (``[(scheme, id)]``, e.g. ``[("sasl", "kafka")]``): the ``auth`` entry is replaced by one entry per
    identity, as the server does. Sorted, for comparing with a node's ACLs."""
    out = []
    for acl in default_acls(secure, path):
        if acl.scheme == "auth":
            out.extend(Acl(acl.perms, scheme, ident) for scheme, ident in principals)
        else:
            out.append(acl)
    return sorted(out)


ZkSaslCredentials = namedtuple("ZkSaslCredentials", "username password mechanism service source")
ZkSaslCredentials.__new__.__defaults__ = ("DIGEST-MD5", "zookeeper", "")
ZkSaslCredentials.__doc__ = (
    "SASL login to ZooKeeper: ``username``/``password`` (DIGEST-MD5), the SASL ``service`` name, and ``source`` (where "
    "they came from, e.g. ``JAAS file /etc/kafka/jaas.conf, section Client``) for error messages. ``repr`` hides the "
    "password.")
ZkSaslCredentials.__repr__ = lambda self: "ZkSaslCredentials(username=%r, mechanism=%r, service=%r, source=%r)" % (
    self.username, self.mechanism, self.service, self.source)


def sasl_options(credentials):
    """kazoo's ``sasl_options`` for ``credentials`` (None -> None: no SASL)."""
    if credentials is None:
        return None
    return {"mechanism": credentials.mechanism, "username": credentials.username,
            "password": credentials.password, "service": credentials.service}
