"""Client quota configuration: where Kafka keeps it, and every broker's precomputed view of it (``QuotaLimits``).

Znodes (Kafka's ``AdminZkClient`` / ``ConfigEntityName``; KIP-55)::

    /config/clients/<client-id>                   {"version":1,"config":{"producer_byte_rate":"1048576"}}
    /config/clients/<default>
    /config/users/<user>                          (the same znode also holds the user's SCRAM credentials:
    /config/users/<default>                        writers keep each other's keys, scram_store.py)
    /config/users/<user>/clients/<client-id>
    /config/users/<user>/clients/<default>
    /config/users/<default>/clients/<client-id>
    /config/users/<default>/clients/<default>
    /config/changes/config_change_<seq>           {"version":2,"entity_path":"users/<user>/clients/<client-id>"}

User names and client ids are stored sanitized as Kafka's ``Sanitizer`` does (``sanitize``: URL-encoding, ``+``
-> ``%20``, ``*`` -> ``%2A``), so ``<default>`` -- literal in a znode name -- never collides with an entity
called ``<default>`` (stored ``%3Cdefault%3E``). Values are doubles written as strings (``"1048576"`` or
``"1048576.0"``); the keys are ``QUOTA_KEYS``.

``QuotaLimits.limit_for(kind, user, client_id) -> (entity_key, bound | None)`` follows Kafka's precedence
(``ClientQuotaManager``'s default callback), first match wins:

    1 /config/users/<user>/clients/<client-id>      entity (user, client-id)
    2 /config/users/<user>/clients/<default>        entity (user, client-id)
    3 /config/users/<user>                          entity (user, "")        shared by all the user's clients
    4 /config/users/<default>/clients/<client-id>   entity (user, client-id)
    5 /config/users/<default>/clients/<default>     entity (user, client-id)
    6 /config/users/<default>                       entity (user, "")
    7 /config/clients/<client-id>                   entity ("", client-id)
    8 /config/clients/<default>                     entity ("", client-id)
    9 the static quota.producer.default / quota.consumer.default (Kafka 0.10.1)   entity ("", client-id)

``entity_key`` is the quota metric's (user, client-id) tags: requests with the same key share one rate. With no
match the answer is ``(("", client_id), None)``: no quota. The lookup is a few dict reads (every level's dict is
precomputed per kind; a kind with no quota anywhere answers after one test), so the produce/fetch path asks it per
request. The view changes only on the event loop (``entity_changed`` from the ConfigWatcher, ``load_all``): a
lookup never sees a half-applied change.
"""
import json
import logging
from urllib.parse import quote, unquote_plus

from kbroker.coord.errors import BadVersionError, NodeExistsError, NoNodeError
from kbroker.coord.znodes import ConfigEntityChangeNotificationSequenceZNode as _Change

log = logging.getLogger(__name__)

DEFAULT = "<default>"          # Kafka's ConfigEntityName.Default
USERS = "/config/users"
CLIENTS = "/config/clients"
PRODUCER = "producer_byte_rate"
CONSUMER = "consumer_byte_rate"
REQUEST = "request_percentage"
QUOTA_KEYS = (PRODUCER, CONSUMER, REQUEST)
# The <default> entity in QuotaLimits' tables: not a string, so a client or user literally named "<default>"
# (stored sanitized, %3Cdefault%3E) is never taken for it.
_ANY = ("<default>",)
# Conditional writes retried this often against concurrent writers of the same znode (a SCRAM change, say).
_WRITE_ATTEMPTS = 10


def sanitize(name):
    """Kafka's ``Sanitizer.sanitize``: URL-encode (UTF-8), keeping ``A-Za-z0-9._-``; space and ``*`` become
    ``%20``/``%2A`` (Java's URLEncoder keeps ``*`` and writes ``+`` for space; Kafka rewrites both). Python's
    quote keeps ``~`` too, which Java encodes."""
    return quote(name, safe="._-").replace("~", "%7E")


def desanitize(name):
    """Kafka's ``Sanitizer.desanitize`` (Java's URLDecoder: ``+`` is a space too)."""
    return unquote_plus(name)


def entity_name(name):
    """The znode name of a user or client-id entity: ``None`` (the default entity) -> ``<default>``, else
    ``sanitize(name)``."""
    return DEFAULT if name is None else sanitize(name)


def entity_path(user=False, client=False):
    """The ``/config/...`` znode of an entity; ``user``/``client`` are plain names, None for ``<default>``, False
    when the entity has no such part. Raises ValueError for an entity with neither."""
    if user is not False and client is not False:
        return "%s/%s/clients/%s" % (USERS, entity_name(user), entity_name(client))
    if user is not False:
        return "%s/%s" % (USERS, entity_name(user))
    if client is not False:
        return "%s/%s" % (CLIENTS, entity_name(client))
    raise ValueError("a quota entity names a user, a client-id or both")


def parse_entity_path(path):
    """A change notification's entity path (``clients/X``, ``users/U``, ``users/U/clients/C``) -> (user,
    client) as ``entity_path`` takes them (plain names, None for ``<default>``, False when absent); None for any
    other path (topics, brokers)."""
    parts = path.split("/")
    name = (lambda s: None if s == DEFAULT else desanitize(s))
    if len(parts) == 2 and parts[0] == "clients" and parts[1]:
        return False, name(parts[1])
    if len(parts) == 2 and parts[0] == "users" and parts[1]:
        return name(parts[1]), False
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients" and parts[1] and parts[3]:
        return name(parts[1]), name(parts[3])
    return None


def notification_path(user=False, client=False):
    """The ``entity_path`` of a change notification for the entity (``/config/`` left off)."""
    return entity_path(user, client)[len("/config/"):]


def _decode(data):
    if not data:
        return {}
    obj = json.loads(bytes(data).decode("utf-8"))
    cfg = obj.get("config") if isinstance(obj, dict) else None
    return dict(cfg) if isinstance(cfg, dict) else {}


def _encode(config):
    return json.dumps({"version": 1, "config": config}, separators=(",", ":"), sort_keys=True).encode("utf-8")


def quotas_of(config):
    """{key: float} of the quota keys in a znode's config map; an unparsable value is logged and left out."""
    out = {}
    for key in QUOTA_KEYS:
        raw = config.get(key)
        if raw is None:
            continue
        try:
            out[key] = float(raw)
        except (TypeError, ValueError):
            log.warning("ignoring quota %s=%r: not a number", key, raw)
    return out


def read_entity(backend, user=False, client=False):
    """{key: float} of the quotas stored for one entity ({} when none or no znode)."""
    data, _ = backend.get_or_none(entity_path(user, client))
    return quotas_of(_decode(data)) if data is not None else {}


# The quota keys Kafka types LONG (QuotaConfigs): stored as integers ("1048576"); request_percentage is a DOUBLE.
LONG_KEYS = frozenset((PRODUCER, CONSUMER))


def _format(key, value):
    """A quota value as Kafka's broker stores it (ZkAdminManager): a LONG key's integer, a DOUBLE's Java
    ``Double.toString`` (``12.5``, ``50.0``)."""
    return str(int(value)) if key in LONG_KEYS else repr(float(value))


def write_entity(backend, user=False, client=False, upserts=None, deletes=()):
    """Set ``upserts`` ({key: number}) and remove ``deletes`` (keys) in the entity's znode, keeping every other key
    (a user's SCRAM credentials), then append the change notification. A znode left with no key keeps an empty
    config, as Kafka leaves it (a user's znode is the parent of its clients' znodes). Returns the new quotas of the
    entity."""
    path = entity_path(user, client)
    for _ in range(_WRITE_ATTEMPTS):
        data, stat = backend.get_or_none(path)
        config = _decode(data) if data is not None else {}
        for key in deletes:
            config.pop(key, None)
        for key, value in (upserts or {}).items():
            config[key] = _format(key, value)
        try:
            if stat is None:
                if not config:
                    return {}
                backend.create(path, _encode(config), makepath=True)
            else:
                backend.set(path, _encode(config), version=stat.version)
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue
        backend.create(_Change.path_prefix(), _Change.encode(notification_path(user, client)), sequence=True,
                       makepath=True)
        return quotas_of(config)
    raise RuntimeError("could not update %s: %d concurrent writes in a row" % (path, _WRITE_ATTEMPTS))


def _children(backend, path):
    try:
        return backend.get_children(path)
    except NoNodeError:
        return []


def all_entities(backend):
    """Every entity with at least one quota: [((user, client), {key: float})] with ``entity_path``'s convention,
    read from the backend (an unreadable znode is logged and left out)."""
    out = []

    def add(user, client):
        try:
            q = read_entity(backend, user, client)
        except (ValueError, UnicodeDecodeError) as e:
            log.warning("ignoring %s: %s", entity_path(user, client), e)
            return
        if q:
            out.append(((user, client), q))

    name = (lambda s: None if s == DEFAULT else desanitize(s))
    for c in _children(backend, CLIENTS):
        add(False, name(c))
    for u in _children(backend, USERS):
        add(name(u), False)
        for c in _children(backend, "%s/%s/clients" % (USERS, u)):
            add(name(u), name(c))
    return out


class _KindLimits:
    """The precomputed quotas of one kind: ``user_client[(u, c)]``, ``user[u]``, ``client[c]`` with ``_ANY``
    standing for ``<default>`` (plain names otherwise: a runtime user or client id is looked up as it is)."""

    __slots__ = ("user_client", "user", "client", "static", "any")

    def __init__(self, static=None):
        self.user_client, self.user, self.client = {}, {}, {}
        self.static = static
        self.any = static is not None

    def refresh(self):
        self.any = bool(self.user_client or self.user or self.client) or self.static is not None

    def lookup(self, user, client_id):
        if not self.any:
            return ("", client_id), None
        if self.user_client or self.user:
            uc, u = self.user_client, self.user
            for who in (user, _ANY):
                if uc:
                    bound = uc.get((who, client_id))
                    if bound is None:
                        bound = uc.get((who, _ANY))
                    if bound is not None:
                        return (user, client_id), bound
                bound = u.get(who)
                if bound is not None:
                    return (user, ""), bound
        c = self.client
        if c:
            bound = c.get(client_id)
            if bound is None:
                bound = c.get(_ANY)
            if bound is not None:
                return ("", client_id), bound
        return ("", client_id), self.static


class QuotaLimits:
    """One broker's view of every client quota (module docstring). ``static`` is {kind: bound} for the static
    client-id defaults (``quota.producer.default`` -> ``producer_byte_rate``; a missing kind or None: none)."""

    def __init__(self, backend, static=None):
        self.backend = backend
        static = static or {}
        self._kinds = {k: _KindLimits(static.get(k)) for k in QUOTA_KEYS}
        self._entities = {}     # (user, client) -> {key: float}, entity_path's convention

    def load_all(self):
        """Read every quota entity; call after the change watcher is registered (no change is missed)."""
        for (user, client), quotas in all_entities(self.backend):
            self._apply(user, client, quotas)
        log.info("client quotas loaded for %d entities", len(self._entities))
        return self

    def entity_changed(self, path):
        """Re-read the entity a change notification names (``clients/X``, ``users/U``, ``users/U/clients/C``);
        other paths are ignored. Blocks on the backend: call from a greenlet of its own."""
        entity = parse_entity_path(path)
        if entity is None:
            return
        user, client = entity
        try:
            quotas = read_entity(self.backend, user, client)
        except (ValueError, UnicodeDecodeError) as e:
            log.warning("ignoring %s: %s", entity_path(user, client), e)
            quotas = {}
        self._apply(user, client, quotas)

    def _apply(self, user, client, quotas):
        old = self._entities.pop((user, client), {})
        if quotas:
            self._entities[(user, client)] = dict(quotas)
        u = _ANY if user is None else user
        c = _ANY if client is None else client
        for key in set(old) | set(quotas):
            kind = self._kinds[key]
            if user is not False and client is not False:
                table, slot = kind.user_client, (u, c)
            elif user is not False:
                table, slot = kind.user, u
            else:
                table, slot = kind.client, c
            if key in quotas:
                table[slot] = quotas[key]
            else:
                table.pop(slot, None)
            kind.refresh()
        if old != quotas:
            log.info("quotas of %s: %s", notification_path(user, client), quotas or "none")

    def limit_for(self, kind, user, client_id):
        """``(entity_key, bound | None)`` of one request (module docstring); ``user`` is the principal's name
        (Kafka's is ``ANONYMOUS`` on an unauthenticated listener: the user defaults apply to it too; None is taken
        as ""), ``client_id`` the request header's (None is taken as "")."""
        return self._kinds[kind].lookup(user or "", client_id or "")

    def has_quotas(self, kind):
        """True when some entity (or the static default) has a quota of this kind."""
        return self._kinds[kind].any

    def entities(self):
        """{(user, client): {key: float}} as cached (a copy; entity_path's convention)."""
        return {k: dict(v) for k, v in self._entities.items()}


class QuotaAdmin:
    """What the KIP-546 handlers use (``Services.client_quotas``): reads and writes go to the coordination backend,
    the truth every broker's QuotaLimits follows. May block the calling greenlet on the backend."""

    def __init__(self, backend, limits=None):
        self.backend = backend
        self.limits = limits

    def entities(self):
        """[((user, client), {key: float})] of every entity with a quota (``all_entities``)."""
        return all_entities(self.backend)

    def alter(self, user, client, upserts, deletes):
        """Write one entity's quotas and notify; this broker's QuotaLimits is refreshed at once too."""
        write_entity(self.backend, user, client, upserts, deletes)
        if self.limits is not None:
            self.limits.entity_changed(notification_path(user, client))
