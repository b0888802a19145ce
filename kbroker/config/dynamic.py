"""Dynamic broker configs (KIP-226): per-broker and cluster-default values that change without a restart.

Storage is Kafka's (ZooKeeper mode, 1.1-3.x): ``/config/brokers/<id>`` (one broker) and ``/config/brokers/<default>``
(every broker without its own value), each ``{"version":1,"config":{key: string}}``; a writer changes the entity
znode, then creates a ``/config/changes/config_change_<seq>`` notification ``{"version":2,"entity_path":
"brokers/<id>"}`` (``brokers/<default>``). Every broker watches ``/config/changes`` and re-reads both znodes when a
notification names its id or the default -- ``kbroker-admin configs``, Kafka's kafka-configs.sh and AlterConfigs /
IncrementalAlterConfigs sent to any broker all take this path. This module is the one owner of ``/config/brokers``
changes on a broker: the replication throttle rates (KIP-73, kbroker/quota/replication.py) are applied from here
through a listener.

Precedence (Kafka's): DYNAMIC_BROKER_CONFIG (``<id>``) > DYNAMIC_DEFAULT_BROKER_CONFIG (``<default>``) >
STATIC_BROKER_CONFIG (server.properties / --override) > DEFAULT_CONFIG. The live ``BrokerConfig`` holds the merged
values (``BrokerConfig.set_dynamic``), so every reader of ``cfg[key]`` sees them; listeners then re-apply what was
computed from them at startup (the LogConfig of every hosted topic, the throttle bounds).

Keys (``DYNAMIC_KEYS``; Kafka's ``DynamicBrokerConfig.AllDynamicConfigs`` as far as kbroker has the mechanism):

* ``APPLIED_KEYS`` change at once: the broker-level defaults of topic configs (Kafka's ``DynamicLogConfig``: only
  the ``*.ms`` forms of retention / roll / jitter are dynamic, as in Kafka -- ``log.retention.hours`` is not),
  ``message.max.bytes``, ``min.insync.replicas``, ``unclean.leader.election.enable`` (the controller reads it per
  election), and the two replication throttle rates. A key kbroker refuses unless at its default (compression.type,
  log.preallocate, ...) is accepted only at that default.
* ``RESTART_KEYS``: dynamic in Kafka, but kbroker builds what they size once (thread pools it does not have, the
  cleaner, the listeners, the connection limits, keystores): refused with the reason, never accepted inertly.
* every other known key is read-only: refused with Kafka's ``Cannot update these configs dynamically: Set(k)``;
  an unknown key is refused too (Kafka would store it for plugins, which kbroker cannot load).

Every refusal is ``InvalidRequest`` (42) with Kafka's message ``Invalid config value for resource
ConfigResource(type=BROKER, name='<id>'): <reason>`` (ZkAdminManager turns the ConfigException into that), and
nothing is written. A malformed value already in a znode (written by hand) is logged and skipped.
"""
import logging

from kbroker import errors
from kbroker.coord.znodes import ConfigEntityChangeNotificationSequenceZNode, ConfigEntityZNode

from .keys import APPLIED, CONFIG_KEYS, REFUSED_UNLESS_DEFAULT, effect_of
from .values import ConfigError, Password, format_default, format_value, parse_value

log = logging.getLogger("kbroker.config")

DEFAULT_ENTITY = "<default>"
DYNAMIC_BROKER = "dynamic-broker"
DYNAMIC_DEFAULT = "dynamic-default"

# Kafka's DescribeConfigs ConfigSource ids.
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT = 3
SOURCE_STATIC = 4
SOURCE_DEFAULT = 5

# Kafka's DynamicLogConfig.ReconfigurableConfigs (LogConfig.TopicConfigSynonyms' broker keys, less
# log.message.format.version), minus log.message.downconversion.enable which kbroker does not have.
_LOG_KEYS = (
    "log.segment.bytes", "log.roll.ms", "log.roll.jitter.ms", "log.index.size.max.bytes",
    "log.flush.interval.messages", "log.flush.interval.ms", "log.retention.bytes", "log.retention.ms",
    "message.max.bytes", "log.index.interval.bytes", "log.cleaner.delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms", "log.segment.delete.delay.ms",
    "log.cleaner.min.cleanable.ratio", "log.cleanup.policy", "unclean.leader.election.enable", "min.insync.replicas",
    "compression.type", "log.preallocate", "log.message.timestamp.type", "log.message.timestamp.difference.max.ms",
)
_THROTTLE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
APPLIED_KEYS = frozenset(_LOG_KEYS + _THROTTLE_KEYS)

_THREADS = "kbroker has no %s thread pool: it serves connections in greenlets of one event loop"
RESTART_KEYS = {
    "num.io.threads": _THREADS % "request handler",
    "num.network.threads": _THREADS % "network",
    "background.threads": _THREADS % "background",
    "num.replica.fetchers": "a follower fetches from each leader broker in one greenlet; there is no pool to resize",
    "num.recovery.threads.per.data.dir": "the logs are loaded once, at startup",
    "log.cleaner.threads": "kbroker runs exactly one cleaner",
    "log.cleaner.io.max.bytes.per.second": "the cleaner is not throttled",
    "log.cleaner.dedupe.buffer.size": "the cleaner's key map is sized at startup",
    "log.cleaner.io.buffer.size": "the cleaner reads and writes one batch at a time",
    "log.cleaner.io.buffer.load.factor": "the cleaner's key map is sized at startup",
    "log.cleaner.backoff.ms": "the cleaner's schedule is set at startup",
    "max.connections": "connection limits are set when the listeners open",
    "max.connections.per.ip": "connection limits are set when the listeners open",
    "max.connections.per.ip.overrides": "connection limits are set when the listeners open",
    "metric.reporters": "kbroker loads no Java metric reporters",
    "listeners": "listeners are opened once at startup",
    "advertised.listeners": "the broker registers its endpoints once at startup",
    "listener.security.protocol.map": "listeners are opened once at startup",
    "ssl.keystore.location": "keystores are loaded once at startup",
    "ssl.keystore.password": "keystores are loaded once at startup",
    "ssl.key.password": "keystores are loaded once at startup",
    "ssl.truststore.location": "truststores are loaded once at startup",
    "ssl.truststore.password": "truststores are loaded once at startup",
    "producer.id.expiration.ms": "producer state expiry is fixed at startup",
}
DYNAMIC_KEYS = APPLIED_KEYS | frozenset(RESTART_KEYS)

# Kafka's DynamicBrokerConfig.brokerConfigSynonyms: keys that feed one value, highest precedence first.
_SYNONYM_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)
_SYNONYMS = {}
for _group in _SYNONYM_GROUPS:
    for _name in _group:
        _SYNONYMS[_name] = _group
# Kafka matches only log.flush.interval.ms to that group: the scheduler interval is its default, not the other way
# round, so the scheduler interval alone is its own synonym.
_SYNONYMS["log.flush.scheduler.interval.ms"] = ("log.flush.scheduler.interval.ms",)


def broker_synonyms(name):
    """The keys whose values ``name`` may take, ``name``'s own group first (``(name,)`` for most keys)."""
    return _SYNONYMS.get(name, (name,))


class Entry:
    """One DescribeConfigs entry of a broker resource: ``synonyms`` = [(name, value, source id)]."""
    __slots__ = ("name", "value", "source_id", "read_only", "sensitive", "synonyms")

    def __init__(self, name, value, source_id, read_only, sensitive, synonyms):
        self.name, self.value, self.source_id = name, value, source_id
        self.read_only, self.sensitive, self.synonyms = read_only, sensitive, synonyms


def resource_str(name):
    return "ConfigResource(type=BROKER, name='%s')" % name


def _refuse(resource_name, reason):
    raise errors.InvalidRequest("Invalid config value for resource %s: %s" % (resource_str(resource_name), reason))


def _kafka_set(names):
    return "Set(%s)" % ", ".join(sorted(names))


def validate(resource_name, config):
    """Check a whole new config set ({key: string}) for ``/config/brokers/<resource_name>`` ('' = the default);
    raises InvalidRequest (module docstring). Returns {key: typed value}."""
    read_only = [k for k in config if k in CONFIG_KEYS and k not in DYNAMIC_KEYS]
    if read_only:
        _refuse(resource_name, "Cannot update these configs dynamically: %s" % _kafka_set(read_only))
    unknown = [k for k in config if k not in CONFIG_KEYS]
    if unknown:
        _refuse(resource_name, "Unknown broker configs: %s (kbroker loads no plugins that could read them)"
                % _kafka_set(unknown))
    restart = sorted(k for k in config if k in RESTART_KEYS)
    if restart:
        _refuse(resource_name, "Cannot update these configs dynamically in kbroker: %s (%s)"
                % (_kafka_set(restart), "; ".join("%s: %s" % (k, RESTART_KEYS[k]) for k in restart)))
    typed = {}
    for key, raw in config.items():
        ck = CONFIG_KEYS[key]
        try:
            value = parse_value(key, ck.type, raw, ck.validator)
        except ConfigError as e:
            _refuse(resource_name, str(e))
        kind, reason = effect_of(ck)
        if kind == REFUSED_UNLESS_DEFAULT and value != ck.default:
            _refuse(resource_name, "Invalid value %s for configuration %s: only the default (%s) is accepted: %s"
                    % (raw, key, format_default(ck.default), reason))
        if kind != APPLIED and kind != REFUSED_UNLESS_DEFAULT:
            _refuse(resource_name, "Cannot update these configs dynamically in kbroker: %s (%s)" % (key, reason))
        typed[key] = value
    return typed


def _shown(value):
    return None if value is None else format_value(value)


class DynamicBrokerConfig:
    """Keeps ``config`` (the live BrokerConfig) equal to static + ``/config/brokers/<default>`` +
    ``/config/brokers/<broker_id>`` (module docstring). ``listeners``: callables ``fn(changed_keys, per_broker,
    default)`` run after each change (raw dicts of the two znodes). ``backend``: the coordination backend
    (get_or_none / create / set / ensure_path / watch_children). State: the two raw dicts (``per_broker``,
    ``default``) last applied; ``seen`` the notifications already known."""

    PATH = "/config/changes"

    def __init__(self, config, broker_id, backend, spawn, listeners=()):
        self.config = config
        self.broker_id = broker_id
        self.backend = backend
        self.spawn = spawn
        self.listeners = list(listeners)
        self.per_broker = {}
        self.default = {}
        self.seen = None
        self._entities = {"brokers/%d" % broker_id, "brokers/" + DEFAULT_ENTITY}

    # ------------------------------------------------------------------------------------------- watching
    def start(self):
        self.reload()
        self.backend.ensure_path(self.PATH)
        self.backend.watch_children(self.PATH, self._changed)
        return self

    def read(self, entity):
        """The raw config of ``/config/brokers/<entity>`` ({} when absent or malformed)."""
        data, _ = self.backend.get_or_none(ConfigEntityZNode.path("brokers", entity))
        try:
            return ConfigEntityZNode.decode(data) if data else {}
        except (ValueError, KeyError, TypeError):
            log.warning("ignoring malformed /config/brokers/%s", entity)
            return {}

    def reload(self):
        self.apply(self.read(str(self.broker_id)), self.read(DEFAULT_ENTITY))

    def apply(self, per_broker, default):
        """Make ``per_broker`` / ``default`` (raw dicts) the live dynamic layers; values kbroker cannot apply
        (written by hand or by another tool) are logged and skipped."""
        self.per_broker, self.default = dict(per_broker), dict(default)
        values, sources = {}, {}
        for layer, source, entity in ((default, DYNAMIC_DEFAULT, DEFAULT_ENTITY),
                                      (per_broker, DYNAMIC_BROKER, str(self.broker_id))):
            for key, raw in layer.items():
                try:
                    values.update(validate(entity, {key: raw}))
                    sources[key] = source
                except errors.InvalidRequest as e:
                    log.warning("dynamic broker config %s=%r of /config/brokers/%s not applied: %s",
                                key, raw, entity, e)
        changed = self.config.set_dynamic(values, sources)
        if changed:
            log.info("dynamic broker configs changed: %s", ", ".join(
                "%s=%s" % (k, _shown(self.config[k])) for k in sorted(changed)))
        for fn in self.listeners:
            fn(changed, self.per_broker, self.default)
        return changed

    def _changed(self, children, *_):
        names = set(children or ())
        new = names - self.seen if self.seen is not None else set()
        self.seen = names
        if new:
            self.spawn(self._notified, sorted(new))

    def _notified(self, notifications):
        for name in notifications:
            data, _ = self.backend.get_or_none("%s/%s" % (self.PATH, name))
            try:
                entity = ConfigEntityChangeNotificationSequenceZNode.decode(data) if data else ""
            except (ValueError, KeyError, TypeError):
                continue
            if entity in self._entities:
                self.reload()
                return

    # ------------------------------------------------------------------------------------------- altering
    def entity_of(self, resource_name, describing=False):
        """'' -> <default>; this broker's id -> itself; anything else InvalidRequest (Kafka's getBrokerId, and
        ConfigHelper's "... or empty string" wording when ``describing``)."""
        if resource_name == "":
            return DEFAULT_ENTITY
        try:
            bid = int(resource_name)
        except ValueError:
            raise errors.InvalidRequest("Node id must be an integer, but it is: %s" % resource_name) from None
        if bid != self.broker_id:
            raise errors.InvalidRequest("Unexpected broker id, expected %d%s, but received %s"
                                        % (self.broker_id, " or empty string" if describing else "", resource_name))
        return str(bid)

    def current(self, resource_name):
        """The raw dynamic config of the resource ('' = default), as stored."""
        return self.read(self.entity_of(resource_name))

    def alter(self, resource_name, config, validate_only=False):
        """Replace the resource's dynamic config with ``config`` ({key: string}; None values dropped), after
        ``validate``; writes the znode and the notification, and applies it here at once."""
        entity = self.entity_of(resource_name)
        config = {k: v for k, v in config.items() if v is not None}
        validate(resource_name, config)
        if validate_only:
            return
        write_entity(self.backend, entity, config)
        if entity == DEFAULT_ENTITY:
            self.apply(self.per_broker, config)
        else:
            self.apply(config, self.default)

    # ------------------------------------------------------------------------------------------- describing
    def _layers(self, per_broker):
        """[(raw dict, source id)] in precedence order; the static layer holds only keys set in the file."""
        static = {}
        for key in CONFIG_KEYS:
            value, source = self.config.static_value(key)
            if source != "default" and value is not None:
                static[key] = value
        defaults = {k: ck.default for k, ck in CONFIG_KEYS.items() if ck.default is not None}
        layers = [(self.default, SOURCE_DYNAMIC_DEFAULT), (static, SOURCE_STATIC), (defaults, SOURCE_DEFAULT)]
        if per_broker:
            layers.insert(0, (self.per_broker, SOURCE_DYNAMIC_BROKER))
        return layers

    def synonyms(self, name, per_broker=True):
        """[(name, string value or None, source id)]: Kafka's ConfigHelper.configSynonyms -- by source in
        precedence order, then by synonym; the leading entries of other names are dropped."""
        out = []
        for layer, source in self._layers(per_broker):
            for syn in broker_synonyms(name):
                if syn in layer:
                    v = layer[syn]
                    sensitive = isinstance(v, Password) or CONFIG_KEYS[syn].type == "password"
                    out.append((syn, None if sensitive else _raw_str(v), source))
        while out and out[0][0] != name:
            out.pop(0)
        return out

    def describe(self, resource_name):
        """[Entry] of a broker resource: '' = the cluster default (only the keys it sets, Kafka's answer), this
        broker's id = every key with its effective value and source."""
        entity = self.entity_of(resource_name, describing=True)
        if entity == DEFAULT_ENTITY:
            names = sorted(self.default)
        else:
            names = sorted(CONFIG_KEYS)
        per_broker = entity != DEFAULT_ENTITY
        out = []
        for name in names:
            ck = CONFIG_KEYS.get(name)
            if ck is None:
                continue
            syn = self.synonyms(name, per_broker)
            sensitive = ck.type == "password"
            if per_broker:
                value = self.config[name]
                value = None if sensitive or value is None else format_value(value)
            else:
                value = None if sensitive else self.default[name]
            out.append(Entry(name, value, syn[0][2] if syn else SOURCE_DEFAULT, name not in DYNAMIC_KEYS,
                             sensitive, syn))
        return out


def _raw_str(v):
    return v if isinstance(v, str) else format_value(v)


def write_entity(backend, entity, config):
    """Write ``/config/brokers/<entity>`` (created when missing) and its ``/config/changes`` notification --
    Kafka's AdminZkClient.changeBrokerConfig order, so a broker that sees the notification reads the new data."""
    path = ConfigEntityZNode.path("brokers", entity)
    data, _ = backend.get_or_none(path)
    if data is None:
        backend.create(path, ConfigEntityZNode.encode(config), makepath=True)
    else:
        backend.set(path, ConfigEntityZNode.encode(config))
    backend.create(ConfigEntityChangeNotificationSequenceZNode.path_prefix(),
                   ConfigEntityChangeNotificationSequenceZNode.encode("brokers/" + entity), sequence=True,
                   makepath=True)
