"""SCRAM credentials in the coordination backend, exactly where and how Kafka keeps them, and every broker's cache.

Znodes (Kafka's ``AdminZkClient`` / ``ScramCredentialUtils``)::

    /config/users/<user>                  {"version":1,"config":{"SCRAM-SHA-256":"salt=<b64>,stored_key=<b64>,
                                           server_key=<b64>,iterations=4096", ...other user configs kept...}}
    /config/changes/config_change_<seq>   {"version":2,"entity_path":"users/<user>"}

A writer (``write_credentials``: AlterUserScramCredentials, ``kbroker-admin configs --entity-type users``) rewrites
the user's znode -- keeping its other keys (quotas) -- with a conditional set, then appends the change notification.
Every broker's ``ScramStore`` loads all users at start and re-reads one user when a notification names it (the
broker's ConfigWatcher calls ``user_changed``), so the authenticator's ``lookup`` never touches the backend: it is a
dict read, safe on the event loop for every connection.

User names are used as znode names as Kafka does (``AdminZkClient`` sanitizes nothing for SCRAM users beyond what
a znode name allows): a name with ``/`` or that is empty is refused (``UNACCEPTABLE_CREDENTIAL``).
"""
import json
import logging

from kbroker.coord.errors import BadVersionError, NoNodeError, NodeExistsError
from kbroker.coord.znodes import ConfigEntityChangeNotificationSequenceZNode as _Change
from kbroker.security.sasl.scram import MECHANISMS, ScramCredential

log = logging.getLogger(__name__)

USERS = "/config/users"
# Conditional writes retried this often against concurrent writers of the same user's znode.
_WRITE_ATTEMPTS = 10


def user_path(user):
    return "%s/%s" % (USERS, user)


def valid_user_name(user):
    """A name usable as a znode (Kafka refuses an empty one; ``/`` would be a path, ``.``/``..`` are reserved)."""
    return bool(user) and "/" not in user and user not in (".", "..") and "\0" not in user


def decode_user_config(data):
    """The ``config`` map of a ``/config/users/<u>`` znode ({} for empty data); ValueError when not JSON."""
    if not data:
        return {}
    obj = json.loads(bytes(data).decode("utf-8"))
    cfg = obj.get("config") if isinstance(obj, dict) else None
    return dict(cfg) if isinstance(cfg, dict) else {}


def encode_user_config(config):
    return json.dumps({"version": 1, "config": config}, separators=(",", ":"), sort_keys=True).encode("utf-8")


def credentials_of(config, user="?"):
    """{mechanism: ScramCredential} of a user's config map; an unparsable entry is logged and left out."""
    out = {}
    for mech in MECHANISMS:
        raw = config.get(mech)
        if raw is None:
            continue
        try:
            out[mech] = ScramCredential.from_kafka(raw)
        except ValueError as e:
            log.warning("ignoring the %s credential of user %s: %s", mech, user, e)
    return out


def write_credentials(backend, user, upserts=None, deletes=()):
    """Apply ``upserts`` ({mechanism: ScramCredential}) and ``deletes`` (mechanisms) to ``/config/users/<user>``,
    then announce it under ``/config/changes``. Returns the mechanisms that were deleted (a delete of a mechanism
    the user does not have is left out: the caller answers RESOURCE_NOT_FOUND for those, checked beforehand)."""
    path = user_path(user)
    for _ in range(_WRITE_ATTEMPTS):
        try:
            data, stat = backend.get(path)
            config, version = decode_user_config(data), stat.version
        except NoNodeError:
            config, version = {}, None
        deleted = [m for m in deletes if m in config]
        for m in deleted:
            del config[m]
        for mech, cred in (upserts or {}).items():
            config[mech] = cred.to_kafka()
        encoded = encode_user_config(config)
        try:
            if version is None:
                backend.create(path, encoded, makepath=True)
            else:
                backend.set(path, encoded, version=version)
        except (BadVersionError, NodeExistsError):
            continue
        backend.create(_Change.path_prefix(), _Change.encode("users/" + user), sequence=True, makepath=True)
        return deleted
    raise RuntimeError("could not update %s: %d concurrent writes in a row" % (path, _WRITE_ATTEMPTS))


def read_user(backend, user):
    """{mechanism: ScramCredential} stored for ``user`` ({} when none)."""
    data, _stat = backend.get_or_none(user_path(user))
    return credentials_of(decode_user_config(data), user) if data is not None else {}


class ScramStore:
    """One broker's cache of every user's SCRAM credentials (module docstring)."""

    def __init__(self, backend):
        self.backend = backend
        self._users = {}

    def load_all(self):
        """Read every ``/config/users/<u>``; call after the change watcher is registered (no change is missed)."""
        try:
            users = self.backend.get_children(USERS)
        except NoNodeError:
            users = []
        for user in users:
            self.user_changed(user)
        log.info("SCRAM credentials loaded for %d users", len(self._users))
        return self

    def user_changed(self, user):
        """Re-read one user (a change notification named ``users/<user>``)."""
        try:
            creds = read_user(self.backend, user)
        except (ValueError, UnicodeDecodeError) as e:
            log.warning("ignoring %s: %s", user_path(user), e)
            creds = {}
        if creds:
            self._users[user] = creds
        else:
            self._users.pop(user, None)

    def lookup(self, user, mechanism):
        """The cached credential, or None (never blocks)."""
        creds = self._users.get(user)
        return creds.get(mechanism) if creds else None

    def users(self):
        """{user: {mechanism: ScramCredential}} as cached (a copy)."""
        return {u: dict(c) for u, c in self._users.items()}


class ScramAdmin:
    """What the KIP-554 handlers use (``Services.scram``): reads and writes go to the coordination backend, the
    truth every broker's cache follows. May block the calling greenlet on the backend (like topic admin)."""

    def __init__(self, backend, store=None):
        self.backend = backend
        self.store = store

    def users(self):
        """Every user that has at least one SCRAM credential, sorted."""
        try:
            names = self.backend.get_children(USERS)
        except NoNodeError:
            return []
        out = []
        for user in names:
            try:
                if read_user(self.backend, user):
                    out.append(user)
            except (ValueError, UnicodeDecodeError) as e:   # a corrupt znode: described (as an error) by name only
                log.warning("cannot read %s: %s", user_path(user), e)
        return out

    def describe(self, user):
        """{mechanism: iterations} stored for ``user`` ({} when none)."""
        return {m: c.iterations for m, c in read_user(self.backend, user).items()}

    def alter(self, user, upserts, deletes):
        """Write ``upserts`` ({mechanism: ScramCredential}) and ``deletes`` for one user, then notify. The local
        cache is refreshed at once too (the notification reaches this broker a moment later)."""
        write_credentials(self.backend, user, upserts, deletes)
        if self.store is not None:
            self.store.user_changed(user)
