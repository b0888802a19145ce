"""``kbroker-admin acls``: Kafka's kafka-acls.sh (AclCommand), through the ACL APIs or straight to the znodes.

    kbroker-admin acls (--bootstrap-server H:P | --authorizer-properties zookeeper.connect=H:P[/chroot])
                       (--add | --remove | --list)
                       [--allow-principal P]... [--deny-principal P]... [--allow-host H]... [--deny-host H]...
                       [--operation OP]... [--topic T]... [--group G]... [--cluster] [--transactional-id T]...
                       [--delegation-token D]... [--user-principal P]...
                       [--resource-pattern-type literal|prefixed|any|match]
                       [--producer [--idempotent]] [--consumer] [--principal P]... [--force]

``--bootstrap-server`` sends DescribeAcls/CreateAcls/DeleteAcls to a broker (which needs an authorizer: else
SECURITY_DISABLED), as the principal ``--command-config FILE`` logs in as (taken by kbroker-admin's dispatcher for
every command: kbroker/client/client_config.py); ``--authorizer-properties zookeeper.connect=...`` reads and writes ``/kafka-acl...`` itself
with kbroker's authorizer code (kbroker/security/authorizer.py), change notifications included, so running
brokers pick the change up as from Kafka's own tool.

Kafka's rules (AclCommand): principals ``Type:name``; without ``--allow-host``/``--deny-host`` a principal's host
is ``*``; ``--operation`` defaults to All; each resource type allows only its operations (e.g. Group: Read,
Describe, Delete, plus All); ``--producer`` adds Write, Describe, Create on the topics (Write, Describe on the
transactional ids; IdempotentWrite on the cluster with ``--idempotent``), ``--consumer`` Read, Describe on the
topics and Read on the groups. ``--add`` needs a LITERAL or PREFIXED pattern type (default LITERAL); ``--remove``
and ``--list`` also take ANY and MATCH. ``--remove`` without principals removes every ACL of the resource filter.
``--remove`` asks ``Are you sure ... (y/n)`` on stdin unless ``--force``, as kafka-acls.sh does; anything but
``y`` skips that resource.

Output (stdout, Kafka's text; resources and entries sorted where Kafka prints hash order)::

    Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:
     	(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)

    Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:
     	(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)

After ``--add`` and ``--remove`` the ACLs of the named resources are listed, as Kafka does. Errors: ``Error while
executing ACL command: <message>`` on stderr, exit 1; usage errors print the problem and the usage, exit 1.
"""
import sys

from kbroker import errors
from kbroker.client.cluster import Cluster, raise_for_code
from kbroker.coord.errors import CoordinationError
from kbroker.security import acl
from kbroker.security.authorizer import (ANY_ENTRY, AclAuthorizer, AclBinding, AclBindingFilter, AclEntry,
                                         EntryFilter, PatternFilter, ResourcePattern, enum_name, filter_error)

from .common import ArgParser, CommandError, UsageError, usage_error, zookeeper

# Operations each resource type takes (Kafka's AclCommand.ResourceTypeToValidOperations), All besides.
VALID_OPERATIONS = {
    acl.TOPIC: (acl.READ, acl.WRITE, acl.CREATE, acl.DESCRIBE, acl.DELETE, acl.ALTER, acl.DESCRIBE_CONFIGS,
                acl.ALTER_CONFIGS),
    acl.GROUP: (acl.READ, acl.DESCRIBE, acl.DELETE),
    acl.CLUSTER: (acl.CREATE, acl.CLUSTER_ACTION, acl.DESCRIBE_CONFIGS, acl.ALTER_CONFIGS, acl.IDEMPOTENT_WRITE,
                  acl.ALTER, acl.DESCRIBE),
    acl.TRANSACTIONAL_ID: (acl.DESCRIBE, acl.WRITE),
    acl.DELEGATION_TOKEN: (acl.DESCRIBE,),
    acl.USER: (acl.CREATE_TOKENS, acl.DESCRIBE_TOKENS),
}
PATTERN_TYPES = {"literal": acl.LITERAL, "prefixed": acl.PREFIXED, "any": acl.ANY_PATTERN, "match": acl.MATCH}
NEWLINE = "\n"


def parser():
    p = ArgParser(prog="kbroker-admin acls", description="Add, remove or list ACLs (like kafka-acls.sh).")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT", help="a broker to send the ACL requests to")
    p.add_argument("--authorizer-properties", action="append", default=[], metavar="KEY=VALUE",
                   help="zookeeper.connect=H:P[/chroot]: read and write the ACL znodes directly")
    for a in ("add", "remove", "list"):
        p.add_argument("--" + a, action="store_true")
    for opt in ("allow-principal", "deny-principal", "allow-host", "deny-host", "operation", "topic", "group",
                "transactional-id", "delegation-token", "user-principal", "principal"):
        p.add_argument("--" + opt, action="append", default=[])
    p.add_argument("--cluster", action="store_true", help="the cluster resource (kafka-cluster)")
    p.add_argument("--resource-pattern-type", default="literal", type=str.lower, choices=sorted(PATTERN_TYPES))
    p.add_argument("--producer", action="store_true", help="the ACLs a producer needs")
    p.add_argument("--idempotent", action="store_true", help="with --producer: IdempotentWrite on the cluster")
    p.add_argument("--consumer", action="store_true", help="the ACLs a consumer needs")
    p.add_argument("--force", action="store_true", help="remove without asking")
    return p


def parse_args(argv):
    """kafka-acls arguments checked with AclCommand's rules; raises UsageError."""
    args = parser().parse_args(argv)
    actions = [a for a in ("add", "remove", "list") if getattr(args, a)]
    if len(actions) != 1:
        raise UsageError("Command must include exactly one action: --list, --add, --remove. ")
    args.action = actions[0]
    if args.bootstrap_server and args.authorizer_properties:
        raise UsageError("Only one of --bootstrap-server or --authorizer-properties must be specified")
    if not args.bootstrap_server and not args.authorizer_properties:
        raise UsageError("One of --bootstrap-server or --authorizer-properties must be specified")
    props = {}
    for kv in args.authorizer_properties:
        k, sep, v = kv.partition("=")
        if not sep:
            raise UsageError("Invalid --authorizer-properties entry %r: expected key=value" % kv)
        props[k.strip()] = v.strip()
    if args.authorizer_properties and not props.get("zookeeper.connect"):
        raise UsageError("--authorizer-properties must set zookeeper.connect")
    args.zookeeper_connect = props.get("zookeeper.connect")
    if args.action == "list":
        for opt in ("producer", "consumer"):
            if getattr(args, opt):
                raise UsageError('Option "[list]" can\'t be used with option "[%s]"' % opt)
        for opt in ("allow_principal", "deny_principal", "allow_host", "deny_host"):
            if getattr(args, opt):
                raise UsageError('Option "[list]" can\'t be used with option "[%s]"' % opt.replace("_", "-"))
    elif args.principal:
        raise UsageError('Option "[principal]" can only be used with "[list]"')
    if args.producer and not args.topic:
        raise UsageError("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        raise UsageError("The --idempotent option is only available if --producer is set")
    if args.consumer and (not args.topic or not args.group
                          or (not args.producer and (args.cluster or args.transactional_id))):
        raise UsageError("With --consumer you must specify a --topic and a --group and no --cluster or "
                         "--transactional-id option should be specified.")
    args.pattern_type = PATTERN_TYPES[args.resource_pattern_type]
    if args.action == "add" and args.pattern_type not in (acl.LITERAL, acl.PREFIXED):
        raise UsageError("A '--resource-pattern-type' value of '%s' is not valid when adding acls."
                         % args.pattern_type)
    for p in args.allow_principal + args.deny_principal + args.principal:
        if acl.principal_error(p):
            raise UsageError(acl.principal_error(p))
    ops = []
    for o in args.operation or [acl.ALL]:
        op = acl.parse_operation(o)
        if op is None:
            raise UsageError("Invalid operation %s: one of %s" % (o, ", ".join(acl.OPERATION_CODES)))
        ops.append(op)
    args.operations = ops
    return args


# ---------------------------------------------------------------------------------------------- what to do

def resource_filters(args, pattern_type=None):
    """[PatternFilter] of the resource options (Kafka's getResourceFilter)."""
    pt = pattern_type or args.pattern_type
    out = [PatternFilter(acl.TOPIC, t, pt) for t in args.topic]
    if args.cluster:
        out.append(PatternFilter(acl.CLUSTER, acl.CLUSTER_NAME, pt))
    out += [PatternFilter(acl.GROUP, g, pt) for g in args.group]
    out += [PatternFilter(acl.TRANSACTIONAL_ID, t, pt) for t in args.transactional_id]
    out += [PatternFilter(acl.DELEGATION_TOKEN, d, pt) for d in args.delegation_token]
    out += [PatternFilter(acl.USER, u, pt) for u in args.user_principal]
    return out


def entries(args, operations):
    """The AclEntries of the principal/host options for ``operations`` (Kafka's getAcl)."""
    out = []
    for principals, hosts, perm in ((args.allow_principal, args.allow_host, acl.ALLOW),
                                    (args.deny_principal, args.deny_host, acl.DENY)):
        for p in principals:
            for h in (hosts or [acl.WILDCARD]):
                for op in operations:
                    out.append(AclEntry(p, h, op, perm))
    return out


def filter_to_entries(args):
    """{PatternFilter: [AclEntry]} (Kafka's getResourceFilterToAcls), checked against VALID_OPERATIONS."""
    out = {}

    def put(f, es):
        cur = out.setdefault(f, [])
        cur.extend(e for e in es if e not in cur)
    if not args.producer and not args.consumer:
        es = entries(args, args.operations)
        filters = resource_filters(args)
        if not filters:
            raise UsageError("You must provide at least one resource: --topic <topic> or --cluster or --group "
                             "<group> or --delegation-token <Delegation Token ID>")
        for f in filters:
            put(f, es)
    if args.producer:
        for t in args.topic:
            put(PatternFilter(acl.TOPIC, t, args.pattern_type), entries(args, (acl.WRITE, acl.DESCRIBE, acl.CREATE)))
        for t in args.transactional_id:
            put(PatternFilter(acl.TRANSACTIONAL_ID, t, args.pattern_type), entries(args, (acl.WRITE, acl.DESCRIBE)))
        if args.idempotent:
            put(PatternFilter(acl.CLUSTER, acl.CLUSTER_NAME, acl.LITERAL), entries(args, (acl.IDEMPOTENT_WRITE,)))
    if args.consumer:
        for t in args.topic:
            put(PatternFilter(acl.TOPIC, t, args.pattern_type), entries(args, (acl.READ, acl.DESCRIBE)))
        for g in args.group:
            put(PatternFilter(acl.GROUP, g, args.pattern_type), entries(args, (acl.READ,)))
    for f, es in out.items():
        valid = VALID_OPERATIONS.get(f.resource_type, ())
        bad = [e for e in es if e.operation != acl.ALL and e.operation not in valid]
        if bad:
            raise UsageError("ResourceType %s only supports operations %s" % (
                enum_name(f.resource_type), ", ".join((acl.ALL,) + valid)))
    return out


# ---------------------------------------------------------------------------------------------- the two stores

class ApiStore:
    """DescribeAcls / CreateAcls / DeleteAcls on a broker (any one: each forwards nothing, all share the znodes)."""

    def __init__(self, bootstrap):
        self.cluster = Cluster(bootstrap, client_id="kbroker-acls")

    def close(self):
        self.cluster.close()

    def describe(self, flt):
        p, e = flt
        resp = self.cluster.request("DescribeAcls", {
            "resource_type_filter": _type_code(p.resource_type), "resource_name_filter": p.name,
            "pattern_type_filter": acl.PATTERN_CODES[p.pattern_type], "principal_filter": e.principal,
            "host_filter": e.host, "operation": _op_code(e.operation), "permission_type": _perm_code(e.permission)})
        raise_for_code(resp["error_code"], resp["error_message"], "describing ACLs")
        out = []
        for r in resp["resources"]:
            pattern = ResourcePattern(acl.RESOURCE_TYPE_NAMES[r["resource_type"]], r["resource_name"],
                                      acl.PATTERN_NAMES[r["pattern_type"]])
            for a in r["acls"]:
                out.append(AclBinding(pattern, AclEntry(a["principal"], a["host"], acl.OPERATION_NAMES[a["operation"]],
                                                        acl.PERMISSION_NAMES[a["permission_type"]])))
        return out

    def create(self, bindings):
        resp = self.cluster.request("CreateAcls", {"creations": [
            {"resource_type": acl.RESOURCE_TYPE_CODES[p.resource_type], "resource_name": p.name,
             "resource_pattern_type": acl.PATTERN_CODES[p.pattern_type], "principal": e.principal, "host": e.host,
             "operation": acl.OPERATION_CODES[e.operation], "permission_type": acl.PERMISSION_CODES[e.permission]}
            for p, e in bindings]})
        for r in resp["results"]:
            raise_for_code(r["error_code"], r["error_message"], "creating ACLs")

    def delete(self, filters):
        resp = self.cluster.request("DeleteAcls", {"filters": [
            {"resource_type_filter": _type_code(p.resource_type), "resource_name_filter": p.name,
             "pattern_type_filter": acl.PATTERN_CODES[p.pattern_type], "principal_filter": e.principal,
             "host_filter": e.host, "operation": _op_code(e.operation), "permission_type": _perm_code(e.permission)}
            for p, e in filters]})
        for r in resp["filter_results"]:
            raise_for_code(r["error_code"], r["error_message"], "deleting ACLs")
            for m in r["matching_acls"]:
                raise_for_code(m["error_code"], m["error_message"], "deleting ACLs")


class ZkStore:
    """The znodes, through kbroker's authorizer code without the notification listeners."""

    def __init__(self, backend):
        self.authorizer = AclAuthorizer(backend).start(watch=False)

    def close(self):
        pass

    def describe(self, flt):
        return self.authorizer.acls(flt)

    def create(self, bindings):
        for err in self.authorizer.create_acls(bindings):
            if err is not None:
                raise err

    def delete(self, filters):
        for matched in self.authorizer.delete_acls(filters):
            for _binding, err in matched:
                if err is not None:
                    raise err


def _type_code(name):
    return acl.ANY_RESOURCE if name == acl.ANY else acl.RESOURCE_TYPE_CODES[name]


def _op_code(name):
    return acl.ANY_OPERATION if name == acl.ANY else acl.OPERATION_CODES[name]


def _perm_code(name):
    return acl.ANY_PERMISSION if name == acl.ANY else acl.PERMISSION_CODES[name]


# ---------------------------------------------------------------------------------------------- commands

def _entry_lines(es):
    return NEWLINE.join("\t" + str(e) for e in sorted(es))


def _confirm(args, message, stdin, out):
    if args.force:
        return True
    print(message, file=out)
    line = stdin.readline()
    return line.strip().lower() == "y"


def add(store, args, out):
    for f, es in filter_to_entries(args).items():
        if not es:
            raise UsageError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
        pattern = ResourcePattern(f.resource_type, f.name, f.pattern_type)
        print("Adding ACLs for resource `%s`: %s %s %s" % (pattern, NEWLINE, _entry_lines(es), NEWLINE), file=out)
        store.create([AclBinding(pattern, e) for e in es])
    list_acls(store, args, out)


def remove(store, args, out, stdin):
    for f, es in filter_to_entries(args).items():
        if not es:
            ok = _confirm(args, "Are you sure you want to delete all ACLs for resource filter `%s`? (y/n)" % (f,),
                          stdin, out)
            filters = [AclBindingFilter(f, ANY_ENTRY)]
        else:
            ok = _confirm(args, "Are you sure you want to remove ACLs: %s %s %s from resource filter `%s`? (y/n)"
                          % (NEWLINE, _entry_lines(es), NEWLINE, f), stdin, out)
            filters = [AclBindingFilter(f, EntryFilter(*e)) for e in es]
        if ok:
            store.delete(filters)
    list_acls(store, args, out)


def list_acls(store, args, out):
    filters = resource_filters(args)
    flts = [AclBindingFilter(f, ANY_ENTRY) for f in filters] or [
        AclBindingFilter(PatternFilter(acl.ANY, None, acl.ANY_PATTERN), ANY_ENTRY)]
    by_resource = {}
    for flt in flts:
        err = filter_error(flt)
        if err:
            raise CommandError(err)
        for b in store.describe(flt):
            es = by_resource.setdefault(b.pattern, [])
            if b.entry not in es:
                es.append(b.entry)
    if not args.principal:
        _print_resources(by_resource, out)
        return
    for principal in args.principal:
        print("ACLs for principal `%s`" % principal, file=out)
        _print_resources({p: [e for e in es if e.principal == principal] for p, es in by_resource.items()}, out)


def _print_resources(by_resource, out):
    for pattern in sorted(by_resource, key=lambda p: (acl.RESOURCE_TYPE_CODES[p.resource_type],
                                                      acl.PATTERN_CODES[p.pattern_type], p.name)):
        es = by_resource[pattern]
        if es:
            print("Current ACLs for resource `%s`: %s %s %s" % (pattern, NEWLINE, _entry_lines(es), NEWLINE),
                  file=out)


def run(args, out=None, stdin=None, backend=None):
    """Run parsed arguments; ``backend`` (tests) replaces the ZooKeeper session of --authorizer-properties."""
    out = sys.stdout if out is None else out
    stdin = sys.stdin if stdin is None else stdin
    if args.bootstrap_server:
        store = ApiStore(args.bootstrap_server)
        try:
            return _dispatch(store, args, out, stdin)
        finally:
            store.close()
    with zookeeper(args.zookeeper_connect, backend) as zk:
        return _dispatch(ZkStore(zk), args, out, stdin)


def _dispatch(store, args, out, stdin):
    if args.action == "add":
        add(store, args, out)
    elif args.action == "remove":
        remove(store, args, out, stdin)
    else:
        list_acls(store, args, out)
    return 0


def main(argv, out=None, stdin=None, backend=None):
    try:
        args = parse_args(argv)
    except UsageError as e:
        usage_error(parser(), e)
        return 1
    try:
        return run(args, out, stdin, backend)
    except UsageError as e:
        usage_error(parser(), e)
        return 1
    except (CommandError, CoordinationError, errors.KafkaError, OSError, ValueError) as e:
        print("Error while executing ACL command: %s" % (getattr(e, "message", None) or e), file=sys.stderr)
        return 1
