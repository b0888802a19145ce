"""``kbroker-admin configs --zookeeper Z --entity-type brokers (--entity-name ID | --entity-default)``: dynamic
broker configs in ZooKeeper mode (kafka-configs.sh --zookeeper, Kafka 0.10.1-2.x): the replication throttle rates
(KIP-73, Kafka 0.10.1's DynamicConfig.Broker) ``leader.replication.throttled.rate`` and
``follower.replication.throttled.rate`` in bytes/s, and every other key kbroker changes without restart (KIP-226,
kbroker/config/dynamic.py ``APPLIED_KEYS``: log.retention.ms, message.max.bytes, ...), checked as AlterConfigs
checks them (a read-only key: ``Invalid config value for resource ...: Cannot update these configs dynamically:
Set(k)``).

    --alter --add-config leader.replication.throttled.rate=N[,follower.replication.throttled.rate=N]
    --alter --delete-config leader.replication.throttled.rate
    --describe [--entity-name ID | --entity-default]

Writes ``/config/brokers/<id>`` (or ``<default>``: every broker without its own value) as
``{"version":1,"config":{...}}`` keeping its other keys, then a ``/config/changes`` notification
``{"version":2,"entity_path":"brokers/<id>"}``; every broker applies it within moments (kbroker/
config/dynamic.py's watcher). Output: ``Completed updating config for entity: brokers '1'.``;
``--describe``: ``Configs for brokers '1' are k=v,...`` (``default brokers`` for the default entity), one line per
entity under /config/brokers when no entity is named. Errors (``Error while executing config command ...``, exit
1): an unknown key ``requirement failed: Unknown Dynamic Configuration 'k'.``; a value that is not a long >= 0
``Invalid value v for configuration k: ...``; deleting a key the entity does not have ``Invalid config(s): k``.
"""
from kbroker.config import CONFIG_KEYS, dynamic
from kbroker.coord.errors import NoNodeError
from kbroker.coord.znodes import ConfigEntityZNode
from kbroker.errors import KafkaError
from kbroker.quota.replication import DEFAULT_ENTITY, RATE_KEYS

from .common import CommandError, emit, zookeeper

LONG_MAX = (1 << 63) - 1


def _entity_str(name):
    return "default brokers" if name == DEFAULT_ENTITY else "brokers '%s'" % name


def check(to_add, to_delete, name="1"):
    """The throttle rates keep Kafka 0.10.1's messages; every other key is checked as AlterConfigs checks it
    (kbroker/config/dynamic.py: read-only keys, keys kbroker cannot change live, bad values refused)."""
    for k in list(to_add) + list(to_delete):
        if k not in CONFIG_KEYS:
            raise CommandError("requirement failed: Unknown Dynamic Configuration '%s'." % k)
    for k, v in to_add.items():
        if k not in RATE_KEYS:
            continue
        try:
            n = int(v.strip())
        except ValueError:
            raise CommandError("Invalid value %s for configuration %s: Not a number of type LONG" % (v, k)) from None
        if not 0 <= n <= LONG_MAX:
            raise CommandError("Invalid value %s for configuration %s: Value must be at least 0" % (v, k))
    try:
        dynamic.validate("" if name == DEFAULT_ENTITY else name, to_add)
    except KafkaError as e:
        raise CommandError(str(e)) from None


def entity_name(args):
    """``--entity-default`` ('') -> ``<default>``; a broker id must be an integer (Kafka's check)."""
    name = args.entity_name
    if name is None or name == DEFAULT_ENTITY:
        return name
    if name == "":
        return DEFAULT_ENTITY
    if not name.isdigit():
        raise CommandError("The entity name for brokers must be a valid integer broker id, found: %s" % name)
    return name


def _read(backend, name):
    data, _ = backend.get_or_none(ConfigEntityZNode.path("brokers", name))
    return ConfigEntityZNode.decode(data) if data else None


def alter(backend, name, to_add, to_delete):
    current = _read(backend, name)
    config = dict(current or {})
    missing = [k for k in to_delete if k not in config]
    if missing:
        raise CommandError("Invalid config(s): %s" % ",".join(missing))
    for k in to_delete:
        del config[k]
    config.update({k: str(int(v.strip())) if k in RATE_KEYS else v.strip() for k, v in to_add.items()})
    dynamic.write_entity(backend, name, config)


def describe(backend, name):
    """-> [(entity name, {key: value})]: the named entity, or every one under /config/brokers."""
    if name is not None:
        return [(name, _read(backend, name) or {})]
    try:
        names = sorted(backend.get_children("/config/brokers"), key=lambda n: (not n.isdigit(), n.zfill(12)))
    except NoNodeError:
        names = []
    return [(n, _read(backend, n) or {}) for n in names]


def run(args, to_add, to_delete, backend=None):
    name = entity_name(args)
    with zookeeper(args.zookeeper, backend) as b:
        if args.alter:
            check(to_add, to_delete, name)
            alter(b, name, to_add, to_delete)
            emit(args, ["Completed updating config for entity: %s." % _entity_str(name)],
                 {"entity_type": "brokers", "entity_name": name, "configs": _read(b, name)})
            return 0
        found = describe(b, name)
        emit(args, ["Configs for %s are %s" % (_entity_str(n), ",".join("%s=%s" % kv for kv in sorted(c.items())))
                    for n, c in found],
             [{"entity_type": "brokers", "entity_name": n, "configs": c} for n, c in found])
        return 0
