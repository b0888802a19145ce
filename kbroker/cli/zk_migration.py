"""``kbroker-admin zookeeper-security-migration``: Kafka's zookeeper-security-migration.sh (ZkSecurityMigrator).

    KAFKA_OPTS="-Djava.security.auth.login.config=/etc/kafka/jaas.conf" \\
    kbroker-admin zookeeper-security-migration --zookeeper.acl secure|unsecure \\
        [--zookeeper.connect H:P[,H:P][/chroot]] [--zookeeper.session.timeout MS] \\
        [--zookeeper.connection.timeout MS] [--enable.path.check] [--zk-tls-config-file FILE]

It rewrites the ACLs of the znodes a Kafka (or kbroker) cluster keeps, so that a cluster can move to (``secure``)
or away from (``unsecure``) ZooKeeper authentication while it runs -- section 7.6.2 of Kafka's documentation:
brokers first get the JAAS file (rolling restart), then ``zookeeper.set.acl=true`` (second rolling restart), then
this tool; the way back is the same in reverse. What it does, as Kafka's tool does:

1. log in to ZooKeeper with the JAAS ``Client`` section of the file ``-Djava.security.auth.login.config`` in
   ``KAFKA_OPTS`` names (kbroker/security/zk_client.py: SASL DIGEST-MD5). Without that file: ``No JAAS
   configuration file has been specified...``; a file without the section: ``Security isn't enabled, most likely
   the file isn't set properly: <file>`` -- both on stderr, exit 1: secure ACLs set by an unauthenticated session
   would name nobody;
2. set the ACL of ``/`` (the chroot's root when the connect string has one);
3. with ``--enable.path.check``, stop (exit 1) when any of Kafka's secure root paths is missing -- usually a wrong
   chroot; without it, print the same warning and go on;
4. for each of Kafka's secure root paths (zk_security.SECURE_ROOT_PATHS; ``/controller`` only when it exists):
   create it if missing, then set the ACL of every node of its subtree.

Every ACL is ``default_acls(secure, path)`` (kbroker/coord/zk_security.py, Kafka's ``defaultAcls``): secure is the
migrating user with every permission plus world read, except the sensitive paths (credentials) that get no world
read and ``/consumers``, which stays open; unsecure is world-open. The tree walk is pipelined
(ZooKeeperBackend.set_default_acls). A node deleted while the tool runs is skipped, as in Kafka.

``--zk-tls-config-file FILE`` (Kafka 2.5+): a properties file whose ``zookeeper.ssl.*`` and
``zookeeper.clientCnxnSocket`` keys (any other key is ignored, as by Kafka) make the tool connect over TLS, as a
broker with those keys does (kbroker/security/zk_client.py ``zk_tls_context``); with a client certificate the
session is authenticated by it (``x509``) and no JAAS file is needed -- Kafka's tool then says, without either: ``No
JAAS configuration file has been specified and no TLS client certificate has been specified...``.

Output: ``Set secure ACLs on N znodes under <connect>.`` (unsecure likewise) on stdout. Errors: the message on
stderr, exit 1 (a node this user may not change: NoAuthError naming it).
"""
import sys

from .common import ArgParser, CommandError, UsageError, usage_error

USAGE_MESSAGE = ("ZooKeeper Migration Tool Help. This tool updates the ACLs of znodes as part of the process of "
                 "setting up ZooKeeper authentication.")


def parser():
    p = ArgParser(prog="kbroker-admin zookeeper-security-migration", description=USAGE_MESSAGE)
    p.add_argument("--zookeeper.acl", dest="acl", metavar="secure|unsecure",
                   help="Indicates whether to make the Kafka znodes in ZooKeeper secure or unsecure. The options are "
                        "'secure' and 'unsecure'")
    p.add_argument("--zookeeper.connect", dest="connect", default="localhost:2181", metavar="H:P[,H:P][/CHROOT]",
                   help="Sets the ZooKeeper connect string (ensemble). This parameter takes a comma-separated list of "
                        "host:port pairs. (default: localhost:2181)")
    p.add_argument("--zookeeper.session.timeout", dest="session_timeout", type=int, default=30000, metavar="MS",
                   help="Sets the ZooKeeper session timeout. (default: 30000)")
    p.add_argument("--zookeeper.connection.timeout", dest="connection_timeout", type=int, default=30000,
                   metavar="MS", help="Sets the ZooKeeper connection timeout. (default: 30000)")
    p.add_argument("--enable.path.check", dest="path_check", action="store_true",
                   help="Checks if all the root paths exist in ZooKeeper before migration. If not, exit the command.")
    p.add_argument("--zk-tls-config-file", dest="tls_config", metavar="FILE",
                   help="Identifies the file where ZooKeeper client TLS connectivity properties are defined. Any "
                        "properties other than zookeeper.ssl.* and zookeeper.clientCnxnSocket are ignored.")
    return p


def _tls(path):
    """``(SSLContext | None, client_auth)`` from the ``--zk-tls-config-file`` properties file (None: no file)."""
    if path is None:
        return None, False
    from kbroker.config import BrokerConfig, ConfigError
    from kbroker.config.files import load_file
    from kbroker.security.zk_client import ZK_TLS_KEYS, ZkClientSecurityError, zk_tls_context

    revocation = ("zookeeper.ssl.crl.enable", "zookeeper.ssl.ocsp.enable")
    try:
        raw = load_file(path)
        # Typed and checked by the broker's own key table (booleans, lists, refused revocation checks).
        cfg = BrokerConfig({k: v for k, v in raw.items() if k in ZK_TLS_KEYS or k in revocation})
        return zk_tls_context({k: cfg[k] for k in ZK_TLS_KEYS})
    except OSError as e:
        raise CommandError("ERROR: --zk-tls-config-file %s: %s" % (path, e.strerror or e)) from None
    except (ConfigError, ZkClientSecurityError) as e:
        raise CommandError("ERROR: --zk-tls-config-file %s: %s" % (path, e)) from None


def _credentials(tls_client_auth):
    """The JAAS Client section's credentials (None when a TLS client certificate authenticates the tool and no
    JAAS file is given), or CommandError with Kafka's message."""
    from kbroker.security.zk_client import LOGIN_CONFIG, ZkClientSecurityError, system_properties, \
        zk_sasl_credentials

    try:
        props = system_properties()
        path = props.get(LOGIN_CONFIG)
        if not path:
            if tls_client_auth:
                return None
            raise CommandError("ERROR: No JAAS configuration file has been specified and no TLS client certificate "
                               "has been specified. Please make sure that you set the system property %s (in "
                               "KAFKA_OPTS: -D%s=<file>) or provide a ZooKeeper client TLS configuration via "
                               "--zk-tls-config-file <filename> identifying at least zookeeper.ssl.client.enable, "
                               "zookeeper.clientCnxnSocket, and zookeeper.ssl.keystore.location"
                               % (LOGIN_CONFIG, LOGIN_CONFIG))
        creds = zk_sasl_credentials(props)
    except ZkClientSecurityError as e:
        raise CommandError("ERROR: %s" % e) from None
    if creds is None and not tls_client_auth:
        raise CommandError("ERROR: Security isn't enabled, most likely the file isn't set properly: %s" % path)
    return creds


def migrate(backend, secure, path_check=False, out=None):
    """Kafka's ZkSecurityMigrator.run over a started ZooKeeperBackend; returns the number of znodes set. Missing
    secure root paths are warned about on ``out`` (stderr), or, with ``path_check``, a CommandError."""
    from kbroker.coord.zk_security import SECURE_ROOT_PATHS

    out = sys.stderr if out is None else out
    count = backend.set_default_acls(["/"], secure, recursive=False)
    missing = [p for p in SECURE_ROOT_PATHS if backend.exists(p) is None]
    if missing:
        print("Warning: The following secure root paths do not exist in ZooKeeper: %s" % ",".join(missing), file=out)
        print("That might be due to an incorrect chroot is specified when executing the command.", file=out)
        if path_check:
            raise CommandError("Exit the command.")
    roots = []
    for path in SECURE_ROOT_PATHS:
        if path == "/controller" and backend.exists(path) is None:
            continue  # ephemeral: created by the next controller with the ACLs its broker is configured for
        backend.ensure_path(path)
        roots.append(path)
    # /kafka-acl-extended/prefixed lies inside /kafka-acl-extended: walked once, as a part of its parent's subtree.
    roots = [r for r in roots if not any(r != o and r.startswith(o + "/") for o in roots)]
    return count + backend.set_default_acls(roots, secure)


def main(argv):
    p = parser()
    try:
        args = p.parse_args(argv)
        if args.acl not in ("secure", "unsecure"):
            raise UsageError("--zookeeper.acl must be 'secure' or 'unsecure'%s"
                             % ("" if args.acl is None else ", not %r" % args.acl))
    except UsageError as e:
        print(USAGE_MESSAGE, file=sys.stderr)
        usage_error(p, e)
        return 1
    secure = args.acl == "secure"
    try:
        ssl_context, tls_client_auth = _tls(args.tls_config)
        creds = _credentials(tls_client_auth)
        count = _run(args, creds, secure, ssl_context, tls_client_auth)
    except CommandError as e:
        print(str(e), file=sys.stderr)
        return 1
    print("Set %s ACLs on %d znodes under %s." % (args.acl, count, args.connect))
    return 0


def _run(args, creds, secure, ssl_context=None, tls_client_auth=False):
    from kbroker.coord.errors import CoordinationError
    from kbroker.coord.zk import ZooKeeperBackend

    backend = ZooKeeperBackend(args.connect, args.session_timeout, args.connection_timeout, sasl=creds,
                               secure_acls=secure, ssl_context=ssl_context, tls_client_auth=tls_client_auth)
    try:
        backend.start()
    except CoordinationError as e:
        raise CommandError("ERROR: %s" % e) from None
    try:
        return migrate(backend, secure, args.path_check)
    except CoordinationError as e:
        raise CommandError("ERROR: could not set the ACLs of %s: %s" % (e.path or args.connect, e)) from None
    finally:
        backend.stop()
