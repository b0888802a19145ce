"""``kbroker-admin configs --entity-type clients|users``: client quotas, as kafka-configs.sh manages them.

    --entity-type clients --entity-name slow --alter --add-config producer_byte_rate=1048576
    --entity-type users --entity-default --alter --add-config consumer_byte_rate=2097152,request_percentage=50
    --entity-type users --entity-name alice --entity-type clients --entity-name app --alter --delete-config K
    --entity-type clients --describe [--entity-name slow | --entity-default]

``--entity-type`` and ``--entity-name`` / ``--entity-default`` pair up in command-line order (Kafka's
ConfigCommand); ``users`` and ``clients`` together name a user+client-id entity. ``--user U`` / ``--user-defaults``
/ ``--client C`` / ``--client-defaults`` are Kafka's shorthands (kbroker/cli/admin.py appends them). The keys are
``producer_byte_rate``, ``consumer_byte_rate`` (bytes/s, whole numbers) and ``request_percentage``.

With ``--bootstrap-server`` (Kafka 3.x) the tool asks DescribeClientQuotas (strict filter: exactly the entity
types given) and AlterClientQuotas; the output is Kafka's::

    Quota configs for client-id 'slow' are producer_byte_rate=1048576.0
    Quota configs for user-principal 'alice', the default client-id are consumer_byte_rate=2048.0
    Completed updating config for client slow.
    Completed updating default config for users in the cluster.

With ``--zookeeper`` (Kafka 0.10-2.x) it reads and writes ``/config/clients`` / ``/config/users`` and the change
notification itself (kbroker/quota/store.py), printing the ZooKeeper-mode lines of ConfigCommand::

    Configs for client-id 'slow' are producer_byte_rate=1048576
    Configs for user-principal 'alice', default client-id are consumer_byte_rate=2048
    Completed updating config for entity: client-id 'slow'.

A ``--delete-config`` of a key the entity does not have fails with ``Invalid config(s): K`` in both modes, as
Kafka's does. Users' SCRAM credentials go through kbroker/cli/scram_users.py (a users command whose keys are SCRAM
mechanisms); quota and SCRAM keys cannot be altered in one command (Kafka's rule).
"""
import argparse
from decimal import Decimal

from kbroker import errors
from kbroker.quota import store
from kbroker.security.sasl.scram import MECHANISMS

from .common import TIMEOUT_MS, CommandError, emit, zookeeper

_TYPE = {"users": "user", "clients": "client-id"}


def entity_of(types, names):
    """(user, client) in kbroker/quota/store.py's convention (a name, None for <default>, False when absent) of
    the paired ``--entity-type`` values and ``--entity-name`` / ``--entity-default`` values ('' for default;
    fewer names than types: those types are unnamed, returned as ``...``: any entity with that part)."""
    user = client = False
    for i, etype in enumerate(types):
        name = names[i] if i < len(names) else ...
        name = None if name == "" else name
        if etype == "users":
            user = name
        else:
            client = name
    return user, client


def quota_and_scram_keys(to_add, to_delete):
    """Split the keys (Kafka's alterConfig checks) -> (quota_add, quota_delete, scram_add, scram_delete,
    unknown_add, unknown_delete)."""
    qa = {k: v for k, v in to_add.items() if k in store.QUOTA_KEYS}
    qd = [k for k in to_delete if k in store.QUOTA_KEYS]
    sa = {k: v for k, v in to_add.items() if k in MECHANISMS}
    sd = [k for k in to_delete if k in MECHANISMS]
    unknown_add = [k for k in to_add if k not in store.QUOTA_KEYS and k not in MECHANISMS]
    unknown_delete = [k for k in to_delete if k not in store.QUOTA_KEYS and k not in MECHANISMS]
    return qa, qd, sa, sd, unknown_add, unknown_delete


def check_keys(types, names, to_add, to_delete):
    """Kafka's ConfigCommand checks for a users/clients --alter. Returns True for a quota alteration, False for a
    SCRAM one (users only); CommandError otherwise."""
    qa, qd, sa, sd, unknown_add, unknown_delete = quota_and_scram_keys(to_add, to_delete)
    if "clients" in types:
        if unknown_add or sa:
            raise CommandError("Only quota configs can be added for 'clients' using --bootstrap-server. Unexpected "
                               "config names: Set(%s)" % ", ".join(unknown_add + list(sa)))
        if unknown_delete or sd:
            raise CommandError("Only quota configs can be deleted for 'clients' using --bootstrap-server. "
                               "Unexpected config names: List(%s)" % ", ".join(unknown_delete + sd))
        return True
    if unknown_add:
        raise CommandError("Only quota and SCRAM credential configs can be added for 'users' using "
                           "--bootstrap-server. Unexpected config names: Set(%s)" % ", ".join(unknown_add))
    if unknown_delete:
        raise CommandError("Only quota and SCRAM credential configs can be deleted for 'users' using "
                           "--bootstrap-server. Unexpected config names: List(%s)" % ", ".join(unknown_delete))
    if sa or sd:
        if "" in names:
            raise CommandError("The use of --entity-default or --user-defaults is not allowed with User SCRAM "
                               "Credentials using --bootstrap-server.")
        if qa or qd:
            raise CommandError("Cannot alter both quota and SCRAM credential configs simultaneously for 'users' "
                               "using --bootstrap-server.")
        return False
    return True


def _values(to_add):
    """{key: float} of the --add-config values (Kafka's tool: ``value.toDouble``)."""
    out = {}
    for key, value in to_add.items():
        try:
            out[key] = float(value)
        except ValueError:
            raise CommandError("Cannot parse quota configuration value for %s: %s" % (key, value)) from None
    return out


def _done_line(types, names):
    if names and names[0]:
        return "Completed updating config for %s %s." % (types[0][:-1], names[0])
    return "Completed updating default config for %s in the cluster." % types[0]


# -- over --bootstrap-server -----------------------------------------------------------------------------------


def _filter(types, names):
    components = []
    for i, etype in enumerate(types):
        name = names[i] if i < len(names) else ...
        if name is ...:
            components.append({"entity_type": _TYPE[etype], "match_type": 2, "match": None})
        elif name == "":
            components.append({"entity_type": _TYPE[etype], "match_type": 1, "match": None})
        else:
            components.append({"entity_type": _TYPE[etype], "match_type": 0, "match": name})
    return {"components": components, "strict": True}


def _describe_quotas(admin, types, names):
    """[(user, client, {key: float})] from DescribeClientQuotas, sorted by entity."""
    resp = admin.cluster.any_connection().request("DescribeClientQuotas", _filter(types, names))
    if resp["error_code"]:
        raise errors.error_for_code(resp["error_code"])(resp["error_message"] or errors.error_name(resp["error_code"]))
    out = []
    for entry in resp["entries"] or ():
        parts = {p["entity_type"]: p["entity_name"] for p in entry["entity"]}
        out.append((parts.get("user", False), parts.get("client-id", False),
                    {v["key"]: v["value"] for v in entry["values"]}))
    return sorted(out, key=lambda e: (e[0] is not False, e[0] or "", e[1] is not False, e[1] or ""))


def _entity_str(user, client):
    """ConfigCommand's describeClientQuotaAndUserScramCredentialConfigs entity text."""
    parts = []
    for part, word in ((user, "user-principal"), (client, "client-id")):
        if part is False:
            continue
        parts.append("the default %s" % word if part is None else "%s '%s'" % (word, part))
    return ", ".join(parts)


def _java_double(value):
    """Java's Double.toString, which Kafka's tool prints: ``1048576.0``, ``12.5``, and from 10^7 up (or under
    10^-3) the computerized scientific form ``1.048576E7`` (the digits are Python's shortest repr)."""
    value = float(value)
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)
    d = Decimal(repr(value)).normalize()
    digits = "".join(map(str, d.as_tuple().digits))
    return "%s%s.%sE%d" % ("-" if value < 0 else "", digits[0], digits[1:] or "0", d.adjusted())


def describe(args, types, names, admin):
    quotas = _describe_quotas(admin, types, names)
    lines = ["Quota configs for %s are %s" % (_entity_str(u, c), ", ".join(
        "%s=%s" % (k, _java_double(v)) for k, v in sorted(q.items()))) for u, c, q in quotas]
    emit(args, lines, [_doc(u, c, q) for u, c, q in quotas])
    return 0


def _doc(user, client, quotas):
    doc = {}
    if user is not False:
        doc["user"] = user
    if client is not False:
        doc["client_id"] = client
    doc["configs"] = quotas
    return doc


def alter(args, types, names, to_add, to_delete, admin):
    """AlterClientQuotas for one entity after Kafka's tool's own check of the keys to delete."""
    values = _values(to_add)
    current = _describe_quotas(admin, types, names)
    have = set(current[0][2]) if current else set()
    missing = [k for k in to_delete if k not in have]
    if missing:
        raise CommandError("Invalid config(s): %s" % ",".join(missing))
    entity = [{"entity_type": _TYPE[t], "entity_name": (names[i] or None)} for i, t in enumerate(types)]
    ops = [{"key": k, "value": v, "remove": False} for k, v in values.items()]
    ops += [{"key": k, "value": 0.0, "remove": True} for k in to_delete]
    resp = admin.cluster.any_connection().request("AlterClientQuotas", {"entries": [{"entity": entity, "ops": ops}],
                                                                        "validate_only": False})
    for r in resp["entries"]:
        if r["error_code"]:
            raise errors.error_for_code(r["error_code"])(r["error_message"] or errors.error_name(r["error_code"]))
    emit(args, [_done_line(types, names)], dict(_doc(*entity_of(types, names), values), deleted=list(to_delete)))
    return 0


# -- over --zookeeper ------------------------------------------------------------------------------------------


def _zk_entity_str(user, client):
    """ZooKeeper-mode ConfigCommand's ConfigEntity.toString."""
    parts = []
    for part, word in ((user, "user-principal"), (client, "client-id")):
        if part is False:
            continue
        parts.append("default %s" % word if part is None else "%s '%s'" % (word, part))
    return ", ".join(parts)


def _zk_check_values(to_add):
    """The broker's DynamicConfig validation of the values, as the ZooKeeper-mode tool ran it."""
    out = {}
    for key, value in to_add.items():
        kind = "LONG" if key in store.LONG_KEYS else "DOUBLE"
        try:
            out[key] = int(value) if kind == "LONG" else float(value)
        except ValueError:
            raise CommandError("Invalid value %s for configuration %s: Not a number of type %s"
                               % (value, key, kind)) from None
    return out


def zk_alter(args, types, names, to_add, to_delete, backend=None):
    user, client = entity_of(types, names)
    values = _zk_check_values(to_add)
    with zookeeper(args.zookeeper, backend=backend, timeout_ms=TIMEOUT_MS) as zk:
        have = store.read_entity(zk, user, client)
        missing = [k for k in to_delete if k not in have]
        if missing:
            raise CommandError("Invalid config(s): %s" % ",".join(missing))
        store.write_entity(zk, user, client, values, to_delete)
    emit(args, ["Completed updating config for entity: %s." % _zk_entity_str(user, client)],
         dict(_doc(user, client, values), deleted=list(to_delete)))
    return 0


def _zk_entities(zk, user, client):
    """The entities a ZooKeeper-mode describe shows: ``...`` parts (no name given) match every entity with that
    part, exactly the types given (Kafka's getAllEntities)."""
    if user is not ... and client is not ...:
        return [((user, client), store.read_entity(zk, user, client))]
    out = []
    for (u, c), quotas in store.all_entities(zk):
        if (u is False) != (user is False) or (c is False) != (client is False):
            continue
        if user is not ... and u != user or client is not ... and c != client:
            continue
        out.append(((u, c), quotas))
    return sorted(out, key=lambda e: (e[0][0] or "", e[0][1] or ""))


def zk_describe(args, types, names, backend=None, empty_lines=True):
    """``Configs for <entity> are k=v,...`` per entity; a named entity without quotas prints its line with nothing
    after "are" as Kafka's does, unless ``empty_lines`` is False (a users describe whose SCRAM lines follow)."""
    user, client = entity_of(types, names)
    with zookeeper(args.zookeeper, backend=backend, timeout_ms=TIMEOUT_MS) as zk:
        found = _zk_entities(zk, user, client)
    lines = ["Configs for %s are %s" % (_zk_entity_str(u, c), ",".join(
        "%s=%s" % (k, int(v) if k in store.LONG_KEYS else v) for k, v in sorted(q.items())))
        for (u, c), q in found if q or (empty_lines and user is not ... and client is not ...)]
    emit(args, lines, [_doc(u, c, q) for (u, c), q in found])
    return 0


# -- the command -----------------------------------------------------------------------------------------------


class EntityNameAction(argparse.Action):
    """``--entity-name X`` / ``--entity-default`` (``nargs=0``), kept in command-line order in
    ``args.entity_names`` ('' for the default), the order Kafka's ConfigCommand pairs them with the types in."""

    def __call__(self, parser, namespace, values, option_string=None):
        names = list(getattr(namespace, self.dest, None) or [])
        names.append(values if isinstance(values, str) else "")
        setattr(namespace, self.dest, names)


def check_entities(types, names):
    """Kafka's ConfigCommandOptions checks for users/clients entities -> a message, or None."""
    if len(types) != len(set(types)):
        return "Duplicate entity type(s) specified: %s" % ",".join(t for t in dict.fromkeys(types)
                                                                     if types.count(t) > 1)
    if len(types) > 1 and set(types) != {"users", "clients"}:
        return "Only the users and clients entity types may be combined"
    if len(names) > len(types):
        return "More entity names specified than entity types"
    return None


def run(args, to_add, to_delete, admin_client, backend=None):
    """One ``configs`` command for users/clients: quotas here, SCRAM credentials by kbroker/cli/scram_users.py.
    ``admin_client(bootstrap)`` opens the AdminClient; ``backend`` stands in for ZooKeeper (tests)."""
    from kbroker.cli import scram_users
    types, names = args.entity_types, args.entity_names
    scram_names = types == ["users"] and "" not in names
    if args.alter:
        if len(names) < len(types):
            raise CommandError("--entity-name or --entity-default must be specified with each --entity-type for "
                               "--alter")
        if not check_keys(types, names, to_add, to_delete):
            return (scram_users.alter(args, to_add, to_delete) if args.zookeeper is not None
                    else _with_admin(admin_client, args, lambda a: scram_users.alter(args, to_add, to_delete, a)))
        if args.zookeeper is not None:
            return zk_alter(args, types, names, to_add, to_delete, backend)
        return _with_admin(admin_client, args, lambda a: alter(args, types, names, to_add, to_delete, a))
    if args.zookeeper is not None:
        zk_describe(args, types, names, backend, empty_lines=not scram_names)
        return scram_users.describe(args) if scram_names else 0
    def both(a):
        describe(args, types, names, a)
        # Kafka describes SCRAM credentials too unless clients or a default entity are named.
        return scram_users.describe(args, a) if scram_names else 0
    return _with_admin(admin_client, args, both)


def _with_admin(admin_client, args, fn):
    with admin_client(args.bootstrap_server) as admin:
        return fn(admin)
