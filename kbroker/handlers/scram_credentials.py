"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), v0 (KIP-554).

Authorization (Kafka's KafkaApis): Describe on the Cluster for 50, else the whole answer is
CLUSTER_AUTHORIZATION_FAILED (31); Alter on the Cluster for 51, else every user's result is 31.

Describe: ``users`` null or empty -> every user that has a credential; a user without one -> RESOURCE_NOT_FOUND
(91) "Attempt to describe a user credential that does not exist: <user>"; a user named twice -> DUPLICATE_RESOURCE
(92) for that user.

Alter, per user (one result each, in first-seen order; a failing user changes nothing of its own and nothing of
the others is held back): an empty name -> UNACCEPTABLE_CREDENTIAL (93) "Username must not be empty"; a mechanism
byte other than 1 (SCRAM-SHA-256) or 2 (SCRAM-SHA-512) -> UNSUPPORTED_SASL_MECHANISM (33) "Unknown SCRAM mechanism";
the same (user, mechanism) twice in the request -> DUPLICATE_RESOURCE (92) "A user credential cannot be altered
twice in the same request"; iterations outside 4096..16384 -> UNACCEPTABLE_CREDENTIAL "Too few iterations" / "Too
many iterations"; an empty salt or salted password -> UNACCEPTABLE_CREDENTIAL; deleting a credential the user does
not have -> RESOURCE_NOT_FOUND "Attempt to delete a user credential that does not exist". The broker derives the
stored and server keys from the salted password (kbroker/security/sasl/scram.py) and writes ``/config/users/<u>``
plus a change notification (kbroker/security/scram_store.py), which every broker applies.
"""
import logging

from kbroker import errors
from kbroker.handlers import auth
from kbroker.security.acl import ALTER, DESCRIBE
from kbroker.security.sasl.scram import MAX_ITERATIONS, MECHANISM_BY_ID, MIN_ITERATIONS, credential_from_salted
from kbroker.security.scram_store import valid_user_name
from kbroker.server.router import handler

log = logging.getLogger(__name__)


def _no_store():
    raise errors.UnknownServerError("this broker has no SCRAM credential store")


@handler(50, (0, 0))
def describe_user_scram_credentials(ctx, req):
    if not auth.cluster(ctx, DESCRIBE):
        return {"error_code": errors.CLUSTER_AUTHORIZATION_FAILED, "error_message": "Cluster authorization failed.",
                "results": []}
    scram = ctx.services.scram
    if scram is None:
        _no_store()
    names = [u["name"] for u in req["users"] or ()]
    results = []
    if not names:
        for user in scram.users():
            results.append(_described(user, scram.describe(user)))
        return {"error_code": 0, "error_message": None, "results": results}
    seen = set()
    duplicates = {n for n in names if n in seen or seen.add(n)}
    for user in dict.fromkeys(names):
        if user in duplicates:
            results.append({"user": user, "error_code": errors.DUPLICATE_RESOURCE, "credential_infos": [],
                            "error_message": "Cannot describe SCRAM credentials for the same user twice in a single "
                                             "request: %s" % user})
            continue
        try:
            creds = scram.describe(user) if valid_user_name(user) else {}
        except Exception as e:  # noqa: BLE001 - a corrupt znode fails this user only
            log.warning("DescribeUserScramCredentials for %s failed: %r", user, e)
            results.append({"user": user, "error_code": errors.UNKNOWN_SERVER_ERROR, "credential_infos": [],
                            "error_message": "could not read the credentials of %s: %s" % (user, e)})
            continue
        if not creds:
            results.append({"user": user, "error_code": errors.RESOURCE_NOT_FOUND, "credential_infos": [],
                            "error_message": "Attempt to describe a user credential that does not exist: %s" % user})
        else:
            results.append(_described(user, creds))
    return {"error_code": 0, "error_message": None, "results": results}


def _described(user, creds):
    ids = {name: wire for wire, name in MECHANISM_BY_ID.items()}
    return {"user": user, "error_code": 0, "error_message": None,
            "credential_infos": [{"mechanism": ids[m], "iterations": i} for m, i in sorted(creds.items())]}


def _check_upsertion(u):
    """None, or (code, message) refusing one upsertion."""
    if u["iterations"] < MIN_ITERATIONS:
        return errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if u["iterations"] > MAX_ITERATIONS:
        return errors.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    if not u["salt"] or not u["salted_password"]:
        return errors.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
    return None


@handler(51, (0, 0))
def alter_user_scram_credentials(ctx, req):
    ops = [("delete", d) for d in req["deletions"]] + [("upsert", u) for u in req["upsertions"]]
    users = list(dict.fromkeys(op["name"] for _, op in ops))
    if not auth.cluster(ctx, ALTER):
        return {"results": [{"user": u, "error_code": errors.CLUSTER_AUTHORIZATION_FAILED,
                             "error_message": "Cluster authorization failed."} for u in users]}
    scram = ctx.services.scram
    if scram is None:
        _no_store()
    errors_by_user = {}
    pairs = {}
    for _, op in ops:
        key = (op["name"], op["mechanism"])
        pairs[key] = pairs.get(key, 0) + 1
    for kind, op in ops:
        user = op["name"]
        if user in errors_by_user:
            continue
        if not user:
            errors_by_user[user] = (errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif not valid_user_name(user):
            errors_by_user[user] = (errors.UNACCEPTABLE_CREDENTIAL, "Username %r cannot be stored" % user)
        elif op["mechanism"] not in MECHANISM_BY_ID:
            errors_by_user[user] = (errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif pairs[(user, op["mechanism"])] > 1:
            errors_by_user[user] = (errors.DUPLICATE_RESOURCE,
                                    "A user credential cannot be altered twice in the same request")
        elif kind == "upsert":
            bad = _check_upsertion(op)
            if bad is not None:
                errors_by_user[user] = bad
    results = []
    for user in users:
        if user in errors_by_user:
            code, message = errors_by_user[user]
            results.append({"user": user, "error_code": code, "error_message": message})
            continue
        try:
            results.append(_alter_one(scram, req, user))
        except Exception as e:  # noqa: BLE001 - a corrupt znode or a backend failure fails this user only
            log.warning("AlterUserScramCredentials for %s failed: %r", user, e)
            results.append({"user": user, "error_code": errors.UNKNOWN_SERVER_ERROR,
                            "error_message": "could not update the credentials of %s: %s" % (user, e)})
    return {"results": results}


def _alter_one(scram, req, user):
    deletes = [MECHANISM_BY_ID[d["mechanism"]] for d in req["deletions"] if d["name"] == user]
    if deletes:
        have = scram.describe(user)
        if any(m not in have for m in deletes):
            return {"user": user, "error_code": errors.RESOURCE_NOT_FOUND,
                    "error_message": "Attempt to delete a user credential that does not exist"}
    upserts = {}
    for u in req["upsertions"]:
        if u["name"] == user:
            mech = MECHANISM_BY_ID[u["mechanism"]]
            upserts[mech] = credential_from_salted(mech, bytes(u["salt"]), bytes(u["salted_password"]),
                                                   u["iterations"])
    scram.alter(user, upserts, deletes)
    return {"user": user, "error_code": 0, "error_message": None}
