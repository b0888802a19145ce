"""``kbroker-admin configs --entity-type users``: users' SCRAM credentials, as kafka-configs.sh manages them.

    --alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=x]'
    --alter --delete-config SCRAM-SHA-512
    --describe [--entity-name alice]

With ``--bootstrap-server`` they go through AlterUserScramCredentials / DescribeUserScramCredentials (KIP-554: the
tool salts and hashes the password, which never crosses the wire); with ``--zookeeper`` the tool writes
``/config/users/<user>`` and the change notification itself (Kafka's way to create the brokers' own credentials
before any broker runs; ``kbroker/security/scram_store.py``). ``iterations`` defaults to 4096 and must be
4096..16384. Output, as Kafka 3.x prints it::

    Completed updating config for user alice.
    SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096

A describe of a user without credentials prints Kafka's ``Error retrieving SCRAM credential configs for
user-principal 'bob': ResourceNotFoundException: ...`` line. Keys other than the SCRAM mechanisms are quota
configs, which kbroker does not have (issue 12): refused naming them.
"""
import os

from kbroker import errors
from kbroker.security.sasl.scram import (DEFAULT_ITERATIONS, MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS,
                                         credential_from_salted, salted_password)

from .common import TIMEOUT_MS, CommandError, emit, zookeeper


def parse_scram_configs(to_add, to_delete):
    """-> ({mechanism: (iterations, password)}, [mechanism]); CommandError for anything else."""
    upserts = {}
    for key, value in to_add.items():
        if key not in MECHANISMS:
            raise CommandError("Invalid config(s): %s (kbroker manages only SCRAM credentials for users: %s; quota "
                               "configs are not supported)" % (key, ", ".join(sorted(MECHANISMS))))
        fields = {}
        for item in value.split(","):
            k, sep, v = item.partition("=")
            if not sep:
                raise CommandError('Invalid credential property %s=%s: expected "iterations=N,password=..."'
                                   % (key, value))
            fields[k.strip()] = v.strip()
        unknown = set(fields) - {"iterations", "password"}
        if unknown or "password" not in fields or not fields["password"]:
            raise CommandError("Invalid credential property %s: it takes password=... and optionally iterations=N"
                               % key)
        try:
            iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
        except ValueError:
            raise CommandError("Invalid iterations %r for %s" % (fields["iterations"], key)) from None
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise CommandError("Iterations %d for %s must be %d..%d" % (iterations, key, MIN_ITERATIONS,
                                                                        MAX_ITERATIONS))
        upserts[key] = (iterations, fields["password"])
    for key in to_delete:
        if key not in MECHANISMS:
            raise CommandError("Invalid config(s): %s" % key)
    return upserts, list(to_delete)


def _salted(mechanism, iterations, password):
    salt = os.urandom(32)
    return salt, salted_password(mechanism, password, salt, iterations)


def alter(args, to_add, to_delete, admin=None):
    user = args.entity_name
    upserts, deletes = parse_scram_configs(to_add, to_delete)
    if args.zookeeper:
        from kbroker.security import scram_store
        if not scram_store.valid_user_name(user):
            raise CommandError("Invalid user name %r" % user)
        creds = {}
        for mech, (iterations, password) in upserts.items():
            salt, salted = _salted(mech, iterations, password)
            creds[mech] = credential_from_salted(mech, salt, salted, iterations)
        with zookeeper(args.zookeeper, timeout_ms=TIMEOUT_MS) as backend:
            have = scram_store.read_user(backend, user)
            missing = [m for m in deletes if m not in have]
            if missing:
                raise CommandError("Attempt to delete a user credential that does not exist: %s" % ",".join(missing))
            scram_store.write_credentials(backend, user, creds, deletes)
    else:
        body = {"deletions": [{"name": user, "mechanism": MECHANISMS[m][1]} for m in deletes], "upsertions": []}
        for mech, (iterations, password) in upserts.items():
            salt, salted = _salted(mech, iterations, password)
            body["upsertions"].append({"name": user, "mechanism": MECHANISMS[mech][1], "iterations": iterations,
                                       "salt": salt, "salted_password": salted})
        resp = admin.cluster.any_connection().request("AlterUserScramCredentials", body)
        for r in resp["results"]:
            if r["error_code"]:
                raise errors.error_for_code(r["error_code"])(r["error_message"] or errors.error_name(r["error_code"]))
    emit(args, ["Completed updating config for user %s." % user],
         {"entity_type": "users", "entity_name": user, "upserted": sorted(upserts), "deleted": deletes})
    return 0


def _line(user, infos):
    return "SCRAM credential configs for user-principal '%s' are %s" % (
        user, ", ".join("%s=iterations=%d" % (m, i) for m, i in infos))


def describe(args, admin=None):
    names = [args.entity_name] if args.entity_name else None
    lines, doc, status = [], [], 0
    if args.zookeeper:
        from kbroker.security import scram_store
        with zookeeper(args.zookeeper, timeout_ms=TIMEOUT_MS) as backend:
            users = names or [u for u in scram_store.ScramAdmin(backend).users()]
            found = {u: sorted((m, c.iterations) for m, c in scram_store.read_user(backend, u).items())
                     for u in users if scram_store.valid_user_name(u)}
        results = [(u, found.get(u) or None) for u in users]
    else:
        resp = admin.cluster.any_connection().request(
            "DescribeUserScramCredentials", {"users": [{"name": n} for n in names] if names else None})
        if resp["error_code"]:
            raise errors.error_for_code(resp["error_code"])(resp["error_message"])
        by_id = {wire: name for name, (_, wire) in MECHANISMS.items()}
        results = []
        for r in resp["results"]:
            if r["error_code"]:
                results.append((r["user"], (r["error_code"], r["error_message"])))
            else:
                results.append((r["user"], [(by_id.get(c["mechanism"], "UNKNOWN"), c["iterations"])
                                            for c in r["credential_infos"]]))
    for user, infos in results:
        if isinstance(infos, list):
            lines.append(_line(user, infos))
            doc.append({"user": user, "credentials": [{"mechanism": m, "iterations": i} for m, i in infos]})
            continue
        code, message = infos if infos else (errors.RESOURCE_NOT_FOUND,
                                             "Attempt to describe a user credential that does not exist: %s" % user)
        cls = errors.error_for_code(code).__name__
        lines.append("Error retrieving SCRAM credential configs for user-principal '%s': %sException: %s"
                     % (user, cls, message))
        doc.append({"user": user, "error": errors.error_name(code), "message": message})
    emit(args, lines, doc)
    return status
