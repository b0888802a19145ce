"""DescribeClientQuotas (48) and AlterClientQuotas (49), v0-1 (KIP-546), as Kafka's ZooKeeper-mode broker answers.

Authorization (KafkaApis): DescribeConfigs on the Cluster for 48, else the answer is CLUSTER_AUTHORIZATION_FAILED
(31) with null entries; AlterConfigs on the Cluster for 49, else every entry's result is 31. (Kafka leaves the
message null for both: it would only repeat the code's own.)

Entities are ``user`` / ``client-id`` parts (kbroker/quota/store.py has the znodes); a null name is ``<default>``.

Describe (ZkAdminManager.describeClientQuotas): a component per entity type at most -- a second ``user`` or
``client-id`` component, an empty entity type or an unknown match type answer INVALID_REQUEST (42) "Duplicate
user filter component entity type" / "Duplicate client filter component entity type" / "Unexpected empty filter
component entity type" / "Unexpected match type: N"; a type other than user / client-id / ip answers
UNSUPPORTED_VERSION (35) "Custom entity type 'T' not supported"; ``ip`` with user or client-id answers
INVALID_REQUEST "Invalid entity filter component combination, IP filter component should not be used with user
or clientId filter component." (kbroker has no IP quotas: an ``ip`` filter alone matches nothing). An entity
matches when each component does (exact name, ``<default>``, or any name) and, with ``strict``, it has no part
that no component names. Only the quota keys are described, as doubles.

Alter (ZkAdminManager.alterClientQuotas), per entry, each entry on its own (a failing one writes nothing of its
own and holds back no other): INVALID_REQUEST with Kafka's messages -- "Invalid empty client quota entity",
"Unhandled client quota entity type: T" (``ip`` included: no IP quotas here), "Empty user not supported" /
"Empty client-id not supported", "Invalid configuration key K" (a key that is not a quota key; a removal of any
key is accepted as Kafka does), "Configuration producer_byte_rate must be a LONG value" (a byte rate that is not a
whole number, within 1e-6). Beyond Kafka's ZooKeeper mode, a value that is not finite and > 0 answers
INVALID_REQUEST "Quota K must be a positive number, not V" (a zero or negative rate has no meaningful throttle).
``validate_only`` checks everything and writes nothing.
"""
import logging
import math

from kbroker import errors
from kbroker.handlers import auth
from kbroker.quota.store import LONG_KEYS, QUOTA_KEYS
from kbroker.security.acl import ALTER_CONFIGS, DESCRIBE_CONFIGS
from kbroker.server.router import handler

log = logging.getLogger(__name__)

USER, CLIENT_ID, IP = "user", "client-id", "ip"
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


class _Invalid(Exception):
    """(code, message) of a refused filter or entry."""

    def __init__(self, message, code=errors.INVALID_REQUEST):
        super().__init__(message)
        self.code, self.message = code, message


def _no_admin():
    raise errors.UnknownServerError("this broker has no client quota store")


# -- Describe ------------------------------------------------------------------------------------------------


def _filter(req):
    """{entity_type: (match_type, match)} of a request's components (module docstring), or _Invalid."""
    components = {}
    for comp in req["components"]:
        etype = comp["entity_type"]
        if comp["match_type"] not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise _Invalid("Unexpected match type: %d" % comp["match_type"])
        if etype == "":
            raise _Invalid("Unexpected empty filter component entity type")
        if etype not in (USER, CLIENT_ID, IP):
            raise _Invalid("Custom entity type '%s' not supported" % etype, errors.UNSUPPORTED_VERSION)
        if etype in components:
            raise _Invalid("Duplicate %s filter component entity type" % {USER: "user", CLIENT_ID: "client",
                                                                           IP: "ip"}[etype])
        if comp["match_type"] == MATCH_EXACT and comp["match"] is None:
            raise _Invalid("Missing name for an exact %s filter component" % etype)
        components[etype] = (comp["match_type"], comp["match"])
    if IP in components and (USER in components or CLIENT_ID in components):
        raise _Invalid("Invalid entity filter component combination, IP filter component should not be used with "
                       "user or clientId filter component.")
    return components


def _matches(component, part, strict):
    """Does one entity part (a name, None for <default>, False when the entity has no such part) pass the
    filter component of its type ((match_type, match), or None when the filter names none)?"""
    if component is None:
        return part is False or not strict
    match_type, match = component
    if part is False:
        return False
    if match_type == MATCH_EXACT:
        return part == match
    if match_type == MATCH_DEFAULT:
        return part is None
    return True


def _entity(user, client):
    parts = []
    if user is not False:
        parts.append({"entity_type": USER, "entity_name": user})
    if client is not False:
        parts.append({"entity_type": CLIENT_ID, "entity_name": client})
    return parts


@handler(48, (0, 1))
def describe_client_quotas(ctx, req):
    if not auth.cluster(ctx, DESCRIBE_CONFIGS):
        return {"error_code": errors.CLUSTER_AUTHORIZATION_FAILED, "error_message": None, "entries": None}
    try:
        components = _filter(req)
    except _Invalid as e:
        return {"error_code": e.code, "error_message": e.message, "entries": None}
    admin = ctx.services.client_quotas
    if admin is None:
        _no_admin()
    if IP in components:
        return {"error_code": 0, "error_message": None, "entries": []}
    strict = req["strict"]
    entries = []
    for (user, client), quotas in admin.entities():
        if _matches(components.get(USER), user, strict) and _matches(components.get(CLIENT_ID), client, strict):
            entries.append({"entity": _entity(user, client),
                            "values": [{"key": k, "value": v} for k, v in sorted(quotas.items())]})
    return {"error_code": 0, "error_message": None, "entries": entries}


# -- Alter ---------------------------------------------------------------------------------------------------


def _parse_entity(parts):
    """(user, client) in store.entity_path's convention of one entry's entity parts, or _Invalid. A type named
    twice: the last part wins (Kafka turns the list into a map)."""
    if not parts:
        raise _Invalid("Invalid empty client quota entity")
    user = client = False
    for part in parts:
        etype, name = part["entity_type"], part["entity_name"]
        if etype == USER:
            user = name
        elif etype == CLIENT_ID:
            client = name
        else:
            raise _Invalid("Unhandled client quota entity type: %s" % etype)
        if name is not None and name == "":
            raise _Invalid("Empty %s not supported" % etype)
    return user, client


def _parse_ops(ops):
    """(upserts {key: number}, deletes [key]) of one entry's ops, or _Invalid (module docstring)."""
    upserts, deletes = {}, []
    for op in ops:
        key, value = op["key"], op["value"]
        if op["remove"]:
            upserts.pop(key, None)
            deletes.append(key)
            continue
        if key not in QUOTA_KEYS:
            raise _Invalid("Invalid configuration key %s" % key)
        if not math.isfinite(value) or value <= 0:
            raise _Invalid("Quota %s must be a positive number, not %r" % (key, value))
        if key in LONG_KEYS:
            whole = int(value + 1e-6)
            if abs(whole - value) > 1e-6:
                raise _Invalid("Configuration %s must be a LONG value" % key)
            value = whole
        if key in deletes:
            deletes.remove(key)
        upserts[key] = value
    return upserts, deletes


@handler(49, (0, 1))
def alter_client_quotas(ctx, req):
    if not auth.cluster(ctx, ALTER_CONFIGS):
        return {"entries": [{"error_code": errors.CLUSTER_AUTHORIZATION_FAILED, "error_message": None,
                             "entity": e["entity"]} for e in req["entries"]]}
    admin = ctx.services.client_quotas
    if admin is None:
        _no_admin()
    results = []
    for entry in req["entries"]:
        code, message = 0, None
        try:
            user, client = _parse_entity(entry["entity"])
            upserts, deletes = _parse_ops(entry["ops"])
            if not req["validate_only"]:
                admin.alter(user, client, upserts, deletes)
        except _Invalid as e:
            code, message = e.code, e.message
        except Exception as e:  # noqa: BLE001 - a corrupt znode or a backend failure fails this entry only
            log.warning("AlterClientQuotas of %r failed: %r", entry["entity"], e)
            code, message = errors.UNKNOWN_SERVER_ERROR, None
        results.append({"error_code": code, "error_message": message, "entity": entry["entity"]})
    return {"entries": results}
