"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), v0-v3, over ``ctx.services.authorizer``
(``kbroker/security/authorizer.py``), with Kafka's checks and answers:

* DescribeAcls needs Describe on the Cluster, CreateAcls and DeleteAcls need Alter on it; otherwise
  CLUSTER_AUTHORIZATION_FAILED (31) -- for DescribeAcls in the top-level error, for the others in every result.
* Without an authorizer (``authorizer.class.name`` empty) the same places answer SECURITY_DISABLED (54).
* A binding that cannot be stored (ANY or UNKNOWN type/operation/permission, an ANY/MATCH pattern type, an empty
  name, a Cluster named other than ``kafka-cluster``, a PREFIXED ``*``, a ``/`` in the name, a principal without
  ``Type:``) fails alone with INVALID_REQUEST (42) and a message; the others are stored. A filter with UNKNOWN
  elements answers INVALID_REQUEST (DescribeAcls: top level; DeleteAcls: that filter).
* DeleteAcls answers, per filter, every binding it deleted (a binding two filters match is listed under the first,
  as Kafka does), each with its own error code (a failed znode write).

DescribeAcls answers from this broker's cache (what it enforces); the writes go to the coordination backend first
and reach the other brokers through the change notifications.
"""
from kbroker import errors
from kbroker.handlers.common import sliced
from kbroker.security import acl
from kbroker.security.authorizer import (AclBindingFilter, AclEntry, EntryFilter, PatternFilter, ResourcePattern,
                                         filter_error)
from kbroker.server.router import handler

_NO_AUTHORIZER = "No Authorizer is configured on the broker"
_CLUSTER_DENIED = "Cluster authorization failed."


def _codes(pattern, entry):
    return {"resource_type": acl.RESOURCE_TYPE_CODES[pattern.resource_type], "resource_name": pattern.name,
            "pattern_type": acl.PATTERN_CODES[pattern.pattern_type], "principal": entry.principal,
            "host": entry.host, "operation": acl.OPERATION_CODES[entry.operation],
            "permission_type": acl.PERMISSION_CODES[entry.permission]}


def _filter(f):
    """A DescribeAcls request or DeleteAcls filter dict -> AclBindingFilter (v0: pattern_type_filter is 3)."""
    return AclBindingFilter(
        PatternFilter(acl.resource_type_name(f["resource_type_filter"]), f["resource_name_filter"],
                      acl.pattern_name(f["pattern_type_filter"])),
        EntryFilter(f["principal_filter"], f["host_filter"], acl.operation_name(f["operation"]),
                    acl.permission_name(f["permission_type"])))


def _refusal(ctx, operation):
    """(code, message) when the request may not be served, else None."""
    if not ctx.authorize(operation, acl.CLUSTER, acl.CLUSTER_NAME):
        return errors.CLUSTER_AUTHORIZATION_FAILED, _CLUSTER_DENIED
    if ctx.services.authorizer is None:
        return errors.SECURITY_DISABLED, _NO_AUTHORIZER
    return None


@handler(29, (0, 3))
def describe_acls(ctx, req):
    out = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "resources": []}
    refusal = _refusal(ctx, acl.DESCRIBE)
    if refusal is None:
        flt = _filter(req)
        err = filter_error(flt)
        if err:
            refusal = errors.INVALID_REQUEST, err
    if refusal is not None:
        out["error_code"], out["error_message"] = refusal
        return out
    grouped = {}
    for pattern, entry in sliced(ctx.services.authorizer.acls(flt)):
        c = _codes(pattern, entry)
        res = grouped.get(pattern)
        if res is None:
            res = grouped[pattern] = {"resource_type": c["resource_type"], "resource_name": c["resource_name"],
                                      "pattern_type": c["pattern_type"], "acls": []}
        res["acls"].append({k: c[k] for k in ("principal", "host", "operation", "permission_type")})
    out["resources"] = list(grouped.values())
    return out


@handler(30, (0, 3))
def create_acls(ctx, req):
    creations = req["creations"]
    refusal = _refusal(ctx, acl.ALTER)
    if refusal is not None:
        return {"throttle_time_ms": 0, "results": [
            {"error_code": refusal[0], "error_message": refusal[1]} for _ in creations]}
    bindings = [(ResourcePattern(acl.resource_type_name(c["resource_type"]), c["resource_name"],
                                 acl.pattern_name(c["resource_pattern_type"])),
                 AclEntry(c["principal"], c["host"], acl.operation_name(c["operation"]),
                          acl.permission_name(c["permission_type"])))
                for c in creations]
    results = ctx.services.authorizer.create_acls(bindings)
    return {"throttle_time_ms": 0, "results": [
        {"error_code": 0, "error_message": None} if e is None else {"error_code": e.code, "error_message": e.message}
        for e in results]}


@handler(31, (0, 3))
def delete_acls(ctx, req):
    filters = [_filter(f) for f in req["filters"]]
    refusal = _refusal(ctx, acl.ALTER)
    if refusal is not None:
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": refusal[0], "error_message": refusal[1], "matching_acls": []} for _ in filters]}
    results = [{"error_code": 0, "error_message": None, "matching_acls": []} for _ in filters]
    valid = []
    for i, f in enumerate(filters):
        err = filter_error(f)
        if err:
            results[i]["error_code"], results[i]["error_message"] = errors.INVALID_REQUEST, err
        else:
            valid.append(i)
    deleted = ctx.services.authorizer.delete_acls([filters[i] for i in valid])
    for i, matched in sliced(zip(valid, deleted)):
        for (pattern, entry), err in matched:
            m = _codes(pattern, entry)
            m["error_code"], m["error_message"] = (0, None) if err is None else (err.code, err.message)
            results[i]["matching_acls"].append(m)
    return {"throttle_time_ms": 0, "filter_results": results}
