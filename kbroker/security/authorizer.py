"""Kafka's ACL authorizer (``kafka.security.authorizer.AclAuthorizer``, formerly ``SimpleAclAuthorizer``): ACLs in
the coordination backend exactly where Kafka keeps them, an in-memory cache every check answers from, and the
change notifications that keep every broker's cache current.

Storage (Kafka >= 2.0's layout, so kafka-acls.sh, Kafka brokers and kbroker read and write the same data)::

    /kafka-acl/<Type>/<name>                             LITERAL patterns (name may be the wildcard ``*``)
    /kafka-acl-extended/prefixed/<Type>/<name>           PREFIXED patterns
        data: {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read",
                                    "host":"*"}]}
    /kafka-acl-changes/acl_changes_<seq>                 a LITERAL pattern changed; data ``Topic:orders``
    /kafka-acl-extended-changes/acl_changes_<seq>        a PREFIXED one; data {"version":1,"resourceType":"Topic",
                                                         "name":"ord","patternType":"PREFIXED"}

``<Type>`` is Topic, Group, Cluster, TransactionalId, DelegationToken or User; operation and permission names are
``kbroker/security/acl.py``'s (Kafka's camel case: ``DescribeConfigs``, ``Deny``). A resource znode holds a set:
the order of ``acls`` means nothing. A znode left without ACLs is deleted.

Writes (``create_acls`` / ``delete_acls``) are read-modify-write on one resource znode, conditional on its data
version (``set``/``delete`` with the version read, ``create`` when absent): a conflict -- another broker or tool
wrote in between -- re-reads and retries, at most 10 times 100-150 ms apart, as Kafka does. A write that changed
the set appends a change notification; the writer updates its own cache at once. Every broker loads every ACL
at start (an unreadable ACL znode stops it: skipping it could drop a Deny), then applies notifications: a children
watch on both change paths wakes one greenlet per path, which re-reads the resource each new notification names
(sequence numbers above the last one applied; all of them at start) and replaces its cache entry. Notifications
older than 15 minutes (Kafka's ``changeExpirationMs``) are deleted by whichever broker sees them.

Checks (``authorize``) never touch the backend. Kafka's rules: a super user (``super.users``) may do anything;
otherwise the ACLs that apply are those of the literal resource, of the literal wildcard ``*`` of its type, and of
every PREFIXED pattern the name starts with. None apply -> ``allow.everyone.if.no.acl.found`` decides (default
false). Else any matching DENY refuses, and one matching ALLOW is needed. An ACL matches when its principal is the
caller's or ``User:*``, its host is ``*`` or the caller's IP address, and its operation is the one asked or
``All`` -- for ALLOW also one implying it (Describe from Read/Write/Delete/Alter, DescribeConfigs from
AlterConfigs; ``acl.IMPLIED_BY``). Cost: two dict lookups plus one per distinct PREFIXED name length of the type,
then a scan of the matching ACLs only -- never of all ACLs -- so a handler may ask once per partition.

Every check is logged on ``kbroker.authorizer`` (Kafka's ``kafka.authorizer.logger``): denials at INFO, grants at
DEBUG, ``Principal = User:bob is Denied Operation = Read from host = 10.0.0.7 on resource = Topic:LITERAL:orders``.

Concurrency: one event loop. ``authorize`` reads the index without yielding; updates replace whole entries between
two yields, so a check sees a resource's ACL set before or after a change, never half of it. Writers and the
notification greenlets serialise on one lock, since backend calls yield.
"""
import json
import logging
import random
import time
from collections import namedtuple

import gevent
from gevent.event import Event
from gevent.lock import RLock

from kbroker import errors
from kbroker.coord.errors import BadVersionError, CoordinationError, NodeExistsError, NoNodeError
from kbroker.security import acl
from kbroker.timeslice import TimeSlice

log = logging.getLogger(__name__)
audit = logging.getLogger("kbroker.authorizer")

LITERAL_ROOT = "/kafka-acl"
EXTENDED_ROOT = "/kafka-acl-extended"
PREFIXED_ROOT = EXTENDED_ROOT + "/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
ACL_PATHS = (LITERAL_ROOT, PREFIXED_ROOT, LITERAL_CHANGES, EXTENDED_CHANGES)

CHANGE_EXPIRATION_MS = 15 * 60 * 1000    # Kafka's ZkNodeChangeNotificationListener default
MAX_UPDATE_RETRIES = 10                  # conditional-write attempts after the first (Kafka's maxUpdateRetries)
RETRY_BACKOFF_S, RETRY_JITTER_S = 0.1, 0.05
_NO_NODE = -1                            # "version" of a resource znode that does not exist


def enum_name(name):
    """``TransactionalId`` -> ``TRANSACTIONAL_ID``: the Java enum names Kafka's tools print."""
    out = []
    for i, c in enumerate(name):
        if c.isupper() and i and not name[i - 1].isupper():
            out.append("_")
        out.append(c.upper())
    return "".join(out)


class ResourcePattern(namedtuple("ResourcePattern", "resource_type name pattern_type")):
    """One resource pattern: a type name (``acl.TOPIC``...), a name, ``LITERAL`` or ``PREFIXED``."""
    __slots__ = ()

    def __str__(self):
        return "ResourcePattern(resourceType=%s, name=%s, patternType=%s)" % (
            enum_name(self.resource_type), "<any>" if self.name is None else self.name, self.pattern_type)


class AclEntry(namedtuple("AclEntry", "principal host operation permission")):
    """One access control entry: ``("User:alice", "*", "Read", "Allow")``."""
    __slots__ = ()

    def __str__(self):
        return "(principal=%s, host=%s, operation=%s, permissionType=%s)" % (
            self.principal, self.host, enum_name(self.operation), enum_name(self.permission))


AclBinding = namedtuple("AclBinding", "pattern entry")


class PatternFilter(namedtuple("PatternFilter", "resource_type name pattern_type")):
    """Kafka's ResourcePatternFilter: ``resource_type`` may be ``acl.ANY``, ``name`` None (any name),
    ``pattern_type`` ``ANY`` (LITERAL or PREFIXED, same name) or ``MATCH`` (every pattern that would apply to the
    named resource: the literal name, the literal ``*``, the prefixes of the name)."""
    __slots__ = ()

    def matches(self, p):
        if self.resource_type != acl.ANY and self.resource_type != p.resource_type:
            return False
        if self.pattern_type not in (acl.ANY_PATTERN, acl.MATCH) and self.pattern_type != p.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (acl.ANY_PATTERN, p.pattern_type):
            return self.name == p.name
        if p.pattern_type == acl.LITERAL:                      # MATCH
            return self.name == p.name or p.name == acl.WILDCARD
        return self.name.startswith(p.name)                    # MATCH against a PREFIXED pattern

    def definite_patterns(self):
        """The patterns this filter can match when it names them exactly (Kafka's matchesAtMostOne +
        filterToResources), else ``()``: a delete must also reach resources this broker has not cached yet."""
        if self.resource_type in (acl.ANY, acl.UNKNOWN) or self.name is None:
            return ()
        if self.pattern_type in (acl.LITERAL, acl.PREFIXED):
            return (ResourcePattern(self.resource_type, self.name, self.pattern_type),)
        if self.pattern_type == acl.ANY_PATTERN:
            return (ResourcePattern(self.resource_type, self.name, acl.LITERAL),
                    ResourcePattern(self.resource_type, self.name, acl.PREFIXED))
        return ()

    __str__ = ResourcePattern.__str__


class EntryFilter(namedtuple("EntryFilter", "principal host operation permission")):
    """Kafka's AccessControlEntryFilter: None principal/host and ``acl.ANY`` operation/permission match any (no
    wildcard expansion: the filter ``User:*`` matches only ACLs written for ``User:*``)."""
    __slots__ = ()

    def matches(self, e):
        return ((self.principal is None or self.principal == e.principal)
                and (self.host is None or self.host == e.host)
                and (self.operation == acl.ANY or self.operation == e.operation)
                and (self.permission == acl.ANY or self.permission == e.permission))


ANY_ENTRY = EntryFilter(None, None, acl.ANY, acl.ANY)
AclBindingFilter = namedtuple("AclBindingFilter", "pattern entry")


# ------------------------------------------------------------------------------------------------ validation

def binding_error(pattern, entry):
    """Why an ACL binding cannot be stored (Kafka's message), or None. Names come from ``acl.*_name(code)``."""
    rt, name, pt = pattern
    if rt == acl.ANY or pt in (acl.ANY_PATTERN, acl.MATCH) or entry.operation == acl.ANY \
            or entry.permission == acl.ANY:
        what = ("resourceType" if rt == acl.ANY else "patternType" if pt in (acl.ANY_PATTERN, acl.MATCH)
                else "operation" if entry.operation == acl.ANY else "permissionType")
        return "%s must not be %s" % (what, pt if what == "patternType" else "ANY")
    if acl.UNKNOWN in (rt, pt, entry.operation, entry.permission):
        return "ACL binding contains unknown elements"
    if name is None or name == "":
        return "Invalid empty resource name"
    if rt == acl.CLUSTER and name != acl.CLUSTER_NAME:
        return "The only valid name for the CLUSTER resource is %s" % acl.CLUSTER_NAME
    if pt == acl.PREFIXED and name == acl.WILDCARD:
        return "A PREFIXED pattern cannot be the wildcard %s: use a LITERAL %s for every name" % (name, name)
    # A name is one znode path component (Kafka refuses '/'; ZooKeeper refuses the other three).
    if "/" in name or name in (".", "..") or "\x00" in name:
        return "ACL binding contains invalid resource name: %s" % name
    if entry.principal is None or entry.host is None:
        return "principal and host must not be null"
    return acl.principal_error(entry.principal)


def filter_error(f):
    """Why a DescribeAcls/DeleteAcls filter is refused (Kafka: a filter with UNKNOWN elements), or None."""
    if acl.UNKNOWN in (f.pattern.resource_type, f.pattern.pattern_type, f.entry.operation, f.entry.permission):
        return "Filter contains UNKNOWN elements: %s" % (f,)
    return None


# ------------------------------------------------------------------------------------------------ znode codecs

def resource_path(pattern):
    """``/kafka-acl/Topic/orders`` or ``/kafka-acl-extended/prefixed/Topic/ord``."""
    root = LITERAL_ROOT if pattern.pattern_type == acl.LITERAL else PREFIXED_ROOT
    return "%s/%s/%s" % (root, pattern.resource_type, pattern.name)


def encode_acls(entries):
    """A resource znode's data: compact JSON, entries sorted (a set: the order carries nothing)."""
    return json.dumps({"version": 1, "acls": [
        {"principal": e.principal, "permissionType": e.permission, "operation": e.operation, "host": e.host}
        for e in sorted(entries)]}, separators=(",", ":")).encode("utf-8")


def decode_acls(data):
    """A resource znode's data -> frozenset of AclEntry; ValueError on anything Kafka would not read (names are
    taken case-insensitively, as Kafka's readers do, and kept canonical)."""
    try:
        doc = json.loads(bytes(data).decode("utf-8")) if data else {"acls": []}
        out = set()
        for a in doc.get("acls", []):
            op, perm = acl.parse_operation(a["operation"]), acl.parse_permission(a["permissionType"])
            principal, host = a["principal"], a["host"]
            if op is None or perm is None or not isinstance(principal, str) or not isinstance(host, str):
                raise ValueError("bad ACL entry %r" % (a,))
            out.add(AclEntry(principal, host, op, perm))
        return frozenset(out)
    except (KeyError, TypeError, AttributeError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError("unreadable ACL data %r: %s" % (bytes(data)[:200], e)) from None


def encode_change(pattern):
    """(change path, data) announcing a change of ``pattern``: LITERAL in Kafka's old ``Type:name`` form under
    /kafka-acl-changes, PREFIXED as JSON under /kafka-acl-extended-changes."""
    if pattern.pattern_type == acl.LITERAL:
        return LITERAL_CHANGES, ("%s:%s" % (pattern.resource_type, pattern.name)).encode("utf-8")
    return EXTENDED_CHANGES, json.dumps({"version": 1, "resourceType": pattern.resource_type, "name": pattern.name,
                                         "patternType": pattern.pattern_type}, separators=(",", ":")).encode()


def decode_literal_change(data):
    text = bytes(data).decode("utf-8")
    rtype, sep, name = text.partition(":")
    rt = acl.parse_resource_type(rtype)
    if not sep or rt is None:
        raise ValueError("bad ACL change notification %r" % text)
    return ResourcePattern(rt, name, acl.LITERAL)


def decode_extended_change(data):
    try:
        doc = json.loads(bytes(data).decode("utf-8"))
        rt, pt = acl.parse_resource_type(doc["resourceType"]), str(doc["patternType"]).upper()
        name = doc["name"]
    except (KeyError, TypeError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError("bad ACL change notification %r: %s" % (bytes(data)[:200], e)) from None
    if rt is None or pt not in (acl.LITERAL, acl.PREFIXED) or not isinstance(name, str):
        raise ValueError("bad ACL change notification %r" % bytes(data)[:200])
    return ResourcePattern(rt, name, pt)


# ------------------------------------------------------------------------------------------------ the cache

class AclIndex:
    """The ACLs in memory, indexed for checks: ``by_pattern`` {ResourcePattern: (entries tuple, znode version)};
    ``literal`` {(type, name): entries}; ``prefixed`` {type: {name: entries}} with ``prefix_lengths`` {type: the
    distinct name lengths, ascending}, so the prefixes of a name are found by one slice and lookup per length;
    ``by_type`` {type: {ResourcePattern}} for the questions about a whole type."""

    def __init__(self):
        self.by_pattern = {}
        self.by_type = {}
        self.literal = {}
        self.prefixed = {}
        self.prefix_lengths = {}
        self._length_counts = {}

    def get(self, pattern):
        return self.by_pattern.get(pattern)

    def put(self, pattern, entries, version):
        """Replace one resource's entries (empty: forget it)."""
        entries = tuple(sorted(entries))
        rt, name, pt = pattern
        had = pattern in self.by_pattern
        if not entries:
            if not had:
                return
            del self.by_pattern[pattern]
            self.by_type[rt].discard(pattern)
            if pt == acl.LITERAL:
                del self.literal[(rt, name)]
            else:
                del self.prefixed[rt][name]
                self._count_length(rt, len(name), -1)
            return
        self.by_pattern[pattern] = (entries, version)
        self.by_type.setdefault(rt, set()).add(pattern)
        if pt == acl.LITERAL:
            self.literal[(rt, name)] = entries
        else:
            self.prefixed.setdefault(rt, {})[name] = entries
            if not had:
                self._count_length(rt, len(name), +1)

    def _count_length(self, rt, length, delta):
        counts = self._length_counts.setdefault(rt, {})
        n = counts.get(length, 0) + delta
        if n:
            counts[length] = n
        else:
            counts.pop(length, None)
        self.prefix_lengths[rt] = tuple(sorted(counts))

    def matching(self, rt, name):
        """Every ACL entry that applies to the resource ``rt``/``name`` (literal, literal ``*``, prefixes)."""
        out = []
        found = self.literal.get((rt, acl.WILDCARD))
        if found:
            out.extend(found)
        found = self.literal.get((rt, name))
        if found and name != acl.WILDCARD:
            out.extend(found)
        lengths = self.prefix_lengths.get(rt)
        if lengths and name:
            by_name = self.prefixed[rt]
            n = len(name)
            for length in lengths:
                if length > n:
                    break
                found = by_name.get(name[:length])
                if found:
                    out.extend(found)
        return out

    def bindings(self, flt=None):
        """[AclBinding] matching ``flt`` (None: all), by type code, pattern type, name, entry. Yields to the event
        loop every time slice (100,000 ACLs take longer than one); a resource changed meanwhile is taken as it is
        when reached."""
        out = []
        tick = TimeSlice().tick
        for pattern in sorted(self.by_pattern, key=_pattern_order):
            tick()
            if flt is not None and not flt.pattern.matches(pattern):
                continue
            got = self.by_pattern.get(pattern)
            for e in (got[0] if got else ()):
                if flt is None or flt.entry.matches(e):
                    out.append(AclBinding(pattern, e))
        return out


def _pattern_order(p):
    return acl.RESOURCE_TYPE_CODES.get(p.resource_type, 99), acl.PATTERN_CODES.get(p.pattern_type, 99), p.name


def _matches(entries, principal, host, operations, permission):
    for e in entries:
        if (e.permission == permission and (e.principal == principal or e.principal == acl.WILDCARD_PRINCIPAL)
                and (e.operation == acl.ALL or e.operation in operations)
                and (e.host == acl.WILDCARD or e.host == host)):
            return True
    return False


# ------------------------------------------------------------------------------------------------ the authorizer

class AclAuthorizer:
    """See the module docstring. ``backend``: a started CoordinationBackend; ``super_users``: principal strings
    (``super.users`` split on ``;``); ``allow_everyone_if_no_acl_found``: the key of that name."""

    def __init__(self, backend, super_users=(), allow_everyone_if_no_acl_found=False,
                 change_expiration_ms=CHANGE_EXPIRATION_MS, clock=time.time, sleep=gevent.sleep):
        self.backend = backend
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = bool(allow_everyone_if_no_acl_found)
        self.change_expiration_ms = change_expiration_ms
        self._clock = clock
        self._sleep = sleep
        self.index = AclIndex()
        self._lock = RLock()
        self._listeners = []

    @staticmethod
    def parse_super_users(value):
        """``super.users`` ("User:a;User:b") -> principal strings; ValueError naming a malformed one."""
        out = []
        for s in (value or "").split(";"):
            s = s.strip()
            if not s:
                continue
            err = acl.principal_error(s)
            if err:
                raise ValueError(err)
            out.append(s)
        return out

    # -- lifecycle ----------------------------------------------------------------------------------------------

    def start(self, watch=True):
        """Create the ACL paths, load every ACL, and (``watch``) follow the change notifications. Returns self.
        Raises ValueError naming an ACL znode that cannot be read."""
        for path in ACL_PATHS:
            self.backend.ensure_path(path)
        if watch:
            # The listeners start after the load, and their first pass applies every notification still present
            # (sequence numbers above -1): a change made while loading is applied after it, as Kafka's order of
            # "listen, then load" guarantees.
            self._listeners = [_ChangeListener(self, LITERAL_CHANGES, decode_literal_change),
                               _ChangeListener(self, EXTENDED_CHANGES, decode_extended_change)]
        with self._lock:
            self._load_all()
        for listener in self._listeners:
            listener.start()
        return self

    def stop(self):
        for listener in self._listeners:
            listener.stop()
        self._listeners = []

    def _load_all(self):
        for root, pt in ((LITERAL_ROOT, acl.LITERAL), (PREFIXED_ROOT, acl.PREFIXED)):
            for type_name in self._children(root):
                rt = acl.parse_resource_type(type_name)
                if rt is None:
                    log.warning("ignoring unknown ACL resource type %s under %s", type_name, root)
                    continue
                for name in self._children(root + "/" + type_name):
                    pattern = ResourcePattern(rt, name, pt)
                    entries, version = self._read(pattern)
                    self.index.put(pattern, entries, version)
        log.info("loaded %d ACL resource patterns", len(self.index.by_pattern))

    def _children(self, path):
        try:
            return self.backend.get_children(path)
        except NoNodeError:
            return []

    def _read(self, pattern):
        """(entries, znode version) of one resource as stored now; (frozenset(), -1) when it has no znode."""
        path = resource_path(pattern)
        data, stat = self.backend.get_or_none(path)
        if stat is None:
            return frozenset(), _NO_NODE
        try:
            return decode_acls(data), stat.version
        except ValueError as e:
            raise ValueError("%s: %s" % (path, e)) from None

    # -- checks -------------------------------------------------------------------------------------------------

    def authorize(self, identity, operation, resource_type, name, log_denied=True):
        """May ``identity`` (its ``principal`` and ``host``) perform ``operation`` on the resource? From memory.
        A denial is audited at INFO, or at DEBUG when ``log_denied`` is False (a check that only filters an
        answer: Kafka's logIfDenied)."""
        principal = identity.principal
        if principal in self.super_users:
            allowed = True
        else:
            entries = self.index.matching(resource_type, name)
            if not entries:
                allowed = self.allow_everyone_if_no_acl_found
            else:
                host = _host(identity)
                allowed = (not _matches(entries, principal, host, (operation,), acl.DENY)
                           and _matches(entries, principal, host, acl.IMPLIED_BY.get(operation, (operation,)),
                                        acl.ALLOW))
        if allowed:
            if audit.isEnabledFor(logging.DEBUG):
                audit.debug(_audit_line(identity, "Allowed", operation, resource_type, name))
        elif audit.isEnabledFor(logging.INFO if log_denied else logging.DEBUG):
            audit.log(logging.INFO if log_denied else logging.DEBUG,
                      _audit_line(identity, "Denied", operation, resource_type, name))
        return allowed

    def authorize_by_resource_type(self, identity, operation, resource_type):
        """Kafka's authorizeByResourceType (KIP-679): may ``identity`` perform ``operation`` on at least one
        resource of ``resource_type``? Only ACLs naming the operation itself or ``All`` count (no implication).
        A literal ``*`` deny refuses; ``allow.everyone.if.no.acl.found`` then allows; else some allowing literal
        or prefixed name must survive the denies (a literal denied by name or by a deny prefix of it, a prefix
        under a deny prefix). Scans the type's patterns: for a once-per-request question (InitProducerId)."""
        principal, host = identity.principal, _host(identity)
        if principal in self.super_users:
            return True
        found = {(acl.ALLOW, acl.LITERAL): set(), (acl.ALLOW, acl.PREFIXED): set(),
                 (acl.DENY, acl.LITERAL): set(), (acl.DENY, acl.PREFIXED): set()}
        by_pattern = self.index.by_pattern
        for pattern in self.index.by_type.get(resource_type, ()):
            entries = by_pattern[pattern][0]
            for perm in (acl.ALLOW, acl.DENY):
                if _matches(entries, principal, host, (operation,), perm):
                    found[(perm, pattern.pattern_type)].add(pattern.name)
        deny_literal, deny_prefix = found[(acl.DENY, acl.LITERAL)], found[(acl.DENY, acl.PREFIXED)]
        if acl.WILDCARD in deny_literal:
            allowed = False
        elif self.allow_everyone_if_no_acl_found:
            allowed = True
        else:
            def under_deny_prefix(name):
                return any(name[:n] in deny_prefix for n in range(len(name) + 1))
            allowed = (any(not under_deny_prefix(p) for p in found[(acl.ALLOW, acl.PREFIXED)])
                       or any(n == acl.WILDCARD or (n not in deny_literal and not under_deny_prefix(n))
                              for n in found[(acl.ALLOW, acl.LITERAL)]))
        if allowed:
            if audit.isEnabledFor(logging.DEBUG):
                audit.debug(_audit_line(identity, "Allowed", operation, resource_type, "NONE", "UNKNOWN"))
        elif audit.isEnabledFor(logging.INFO):
            audit.info(_audit_line(identity, "Denied", operation, resource_type, "NONE", "UNKNOWN"))
        return allowed

    def acls(self, flt=None):
        """[AclBinding] in this broker's cache matching the AclBindingFilter ``flt`` (None: all)."""
        return self.index.bindings(flt)

    # -- changes ------------------------------------------------------------------------------------------------

    def create_acls(self, bindings):
        """Store AclBindings; one result per binding, in order: None, or the KafkaError it failed with."""
        bindings = list(bindings)
        results = [None] * len(bindings)
        by_pattern = {}
        for i, (pattern, entry) in enumerate(bindings):
            err = binding_error(pattern, entry)
            if err:
                results[i] = errors.InvalidRequest("Failed to create ACL: %s" % err)
            else:
                by_pattern.setdefault(pattern, []).append(i)
        with self._lock:
            for pattern, indexes in by_pattern.items():
                new = frozenset(bindings[i][1] for i in indexes)
                try:
                    self._update(pattern, lambda current, new=new: current | new)
                except Exception as e:  # noqa: BLE001 - reported per binding, as Kafka does
                    err = _api_error(e, pattern)
                    for i in indexes:
                        results[i] = err
        return results

    def delete_acls(self, filters):
        """Delete the ACLs matching each AclBindingFilter. One list per filter, in order, of (AclBinding, None or
        KafkaError); a binding matched by several filters is reported under the first (Kafka's rule)."""
        filters = list(filters)
        deleted = {}        # AclBinding -> index of the first filter matching it
        failed = {}
        with self._lock:
            patterns = set(self.index.by_pattern)
            for f in filters:
                patterns.update(f.pattern.definite_patterns())
            tick = TimeSlice().tick
            for pattern in sorted(patterns, key=_pattern_order):
                tick()
                matching = [(i, f) for i, f in enumerate(filters) if f.pattern.matches(pattern)]
                if not matching:
                    continue
                being_deleted = []

                def change(current, pattern=pattern, matching=matching, being_deleted=being_deleted):
                    del being_deleted[:]
                    gone = set()
                    for e in current:
                        for i, f in matching:
                            if f.entry.matches(e):
                                being_deleted.append((AclBinding(pattern, e), i))
                                gone.add(e)
                                break
                    return current - gone
                try:
                    self._update(pattern, change)
                except Exception as e:  # noqa: BLE001
                    err = _api_error(e, pattern)
                    for b, _i in being_deleted:
                        failed.setdefault(b, err)
                for b, i in being_deleted:
                    deleted.setdefault(b, i)
        out = [[] for _ in filters]
        for b, i in deleted.items():
            out[i].append((b, failed.get(b)))
        return out

    def _update(self, pattern, change):
        """Read-modify-write one resource znode, conditional on its version (retried on conflict); updates the
        cache and announces a real change. Returns True when the set changed."""
        cached = self.index.get(pattern)
        current, version = (frozenset(cached[0]), cached[1]) if cached else self._read(pattern)
        path = resource_path(pattern)
        for attempt in range(MAX_UPDATE_RETRIES + 1):
            new = frozenset(change(current))
            try:
                if new == current:
                    # Nothing to write -- if what we read is still what is stored (else: conflict, read again).
                    stat = self.backend.exists(path)
                    if (stat.version if stat is not None else _NO_NODE) != version:
                        raise BadVersionError(path=path)
                    new_version = version
                elif new:
                    if version == _NO_NODE:
                        self.backend.create(path, encode_acls(new), makepath=True)
                        new_version = 0
                    else:
                        new_version = self.backend.set(path, encode_acls(new), version).version
                else:       # emptied: a stored set (version >= 0), since an absent one read as empty == new
                    self.backend.delete(path, version)
                    new_version = _NO_NODE
                break
            except (BadVersionError, NodeExistsError, NoNodeError):
                if attempt == MAX_UPDATE_RETRIES:
                    raise errors.UnknownServerError("Failed to update ACLs for %s after trying a maximum of %d "
                                                    "times" % (pattern, MAX_UPDATE_RETRIES)) from None
                self._sleep(RETRY_BACKOFF_S + random.random() * RETRY_JITTER_S)
                current, version = self._read(pattern)
        self.index.put(pattern, new, new_version)
        if new == current:
            return False
        log.info("Updated ACLs for %s with new version %d", pattern, new_version)
        change_path, data = encode_change(pattern)
        self.backend.create(change_path + "/" + CHANGE_PREFIX, data, sequence=True, makepath=True)
        return True

    def apply_change(self, pattern):
        """A change notification named ``pattern``: re-read it and replace the cache entry. An unreadable znode
        keeps the entry as it was (logged): dropping it could drop a Deny."""
        with self._lock:
            try:
                entries, version = self._read(pattern)
            except ValueError as e:
                log.error("ACL change for %s not applied: %s", pattern, e)
                return
            log.info("Processing Acl change notification for %s, acls: %s, version: %d", pattern,
                     ", ".join(str(e) for e in sorted(entries)) or "none", version)
            self.index.put(pattern, entries, version)


def _api_error(exc, pattern):
    if isinstance(exc, errors.KafkaError):
        return exc
    if isinstance(exc, (CoordinationError, ValueError)):
        return errors.UnknownServerError("Failed to update ACLs for %s: %s" % (pattern, exc))
    log.exception("updating ACLs of %s", pattern, exc_info=exc)
    return errors.UnknownServerError("Failed to update ACLs for %s" % (pattern,))


def _audit_line(identity, result, operation, resource_type, name, pattern_type=acl.LITERAL):
    return "Principal = %s is %s Operation = %s from host = %s on resource = %s:%s:%s" % (
        identity.principal, result, operation, _host(identity), resource_type, pattern_type, name)


def _host(identity):
    """The client's IP address as Kafka's ACLs name it: an IPv4 client of a dual-stack listener shows up as
    ``::ffff:10.0.0.7``, which Java reports (and operators write) as ``10.0.0.7``."""
    h = identity.host
    return h[7:] if h.startswith("::ffff:") and "." in h else h


class _ChangeListener:
    """Follows one change path (``/kafka-acl-changes`` or ``/kafka-acl-extended-changes``): its children watch
    only wakes a greenlet, which applies every notification whose sequence number is above the last applied, then
    deletes the notifications older than ``change_expiration_ms`` (their ctime)."""

    def __init__(self, authorizer, path, decode):
        self.authorizer = authorizer
        self.backend = authorizer.backend
        self.path = path
        self.decode = decode
        self.last_applied = -1
        self._ctimes = {}          # notification name -> ctime (ms), for the purge
        self._wake = Event()
        self._watch = None
        self._greenlet = None

    def start(self):
        self._watch = self.backend.watch_children(self.path, self._changed)
        self._wake.set()
        self._greenlet = gevent.spawn(self._run)

    def stop(self):
        if self._watch is not None:
            self._watch.cancel()
        if self._greenlet is not None:
            self._greenlet.kill(block=False)

    def _changed(self, _children):
        self._wake.set()    # runs in the backend's watch greenlet: never block it

    def _run(self):
        while True:
            self._wake.wait()
            self._wake.clear()
            try:
                self.process()
            except CoordinationError as e:
                log.warning("ACL change notifications under %s: %s; retrying in 1 s", self.path, e)
                gevent.sleep(1.0)
                self._wake.set()
            except Exception:  # noqa: BLE001 - keep following changes
                log.exception("ACL change notifications under %s", self.path)
                gevent.sleep(1.0)
                self._wake.set()

    def process(self):
        try:
            children = self.backend.get_children(self.path)
        except NoNodeError:
            return
        for child in children:
            if not child.startswith(CHANGE_PREFIX):
                continue
            try:
                seq = int(child[len(CHANGE_PREFIX):])
            except ValueError:
                continue
            if seq <= self.last_applied:
                continue
            data, stat = self.backend.get_or_none(self.path + "/" + child)
            if stat is not None:
                self._ctimes[child] = stat.ctime
                try:
                    pattern = self.decode(data)
                except (ValueError, UnicodeDecodeError) as e:
                    log.warning("ignoring ACL change notification %s/%s: %s", self.path, child, e)
                else:
                    self.authorizer.apply_change(pattern)
            self.last_applied = seq
        self._purge(set(children))

    def _purge(self, present):
        horizon = self.authorizer._clock() * 1000 - self.authorizer.change_expiration_ms
        for child, ctime in list(self._ctimes.items()):
            if child not in present:
                del self._ctimes[child]
            elif ctime < horizon:
                try:
                    self.backend.delete(self.path + "/" + child)
                except NoNodeError:
                    pass    # another broker purged it first
                del self._ctimes[child]
