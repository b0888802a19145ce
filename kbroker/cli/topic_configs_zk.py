"""``kbroker-admin configs --zookeeper Z --entity-type topics [--entity-name T]``: topic config overrides in
ZooKeeper mode (kafka-configs.sh --zookeeper, Kafka 0.10.1-2.x), straight on the znodes.

    --alter --add-config k=v[,k2=[a,b]] [--delete-config k]   -> Completed updating config for entity: topic 'T'.
    --describe [--entity-name T]                               -> Configs for topic 'T' are k=v,k2=v2

Alter reads ``/config/topics/<T>``, removes ``--delete-config`` keys, adds ``--add-config`` ones, validates the
result as CreateTopics / AlterConfigs do (kbroker/config/topic.py: an unknown key or bad value is refused naming
it), then writes the znode and a ``/config/changes`` notification (``TopicStore.set_topic_config``); every broker
applies it within moments. Describe lists the overrides in key order, one line per topic (every topic when none is
named, in name order). Errors (``Error while executing config command ...``, exit 1): a missing topic
``Topic 'T' does not exist``; deleting a key the topic does not override ``Invalid config(s): k``.
"""
from kbroker import errors
from kbroker.config import ConfigError, validate_topic_config
from kbroker.coord.metadata_store import TopicStore

from .common import CommandError, emit, zookeeper


def alter(store, name, to_add, to_delete):
    if not store.exists(name):
        raise CommandError("Topic '%s' does not exist" % name)
    config = dict(store.topic_config(name))
    missing = [k for k in to_delete if k not in config]
    if missing:
        raise CommandError("Invalid config(s): %s" % ",".join(missing))
    for k in to_delete:
        del config[k]
    config.update(to_add)
    try:
        validate_topic_config(config)
    except ConfigError as e:
        raise CommandError(str(e)) from None
    try:
        store.set_topic_config(name, config)
    except errors.KafkaError as e:
        raise CommandError(str(e)) from None
    return config


def describe(store, name):
    """-> [(topic, {key: value})]: the named topic, or every topic."""
    if name is not None:
        if not store.exists(name):
            raise CommandError("Topic '%s' does not exist" % name)
        return [(name, store.topic_config(name))]
    return [(t, store.topic_config(t)) for t in sorted(store.topics())]


def run(args, to_add, to_delete, backend=None):
    name = args.entity_name or None
    with zookeeper(args.zookeeper, backend) as b:
        store = TopicStore(b)
        if args.alter:
            config = alter(store, name, to_add, to_delete)
            emit(args, ["Completed updating config for entity: topic '%s'." % name],
                 {"entity_type": "topics", "entity_name": name, "configs": config})
            return 0
        found = describe(store, name)
        emit(args, ["Configs for topic '%s' are %s" % (t, ",".join("%s=%s" % kv for kv in sorted(c.items())))
                    for t, c in found],
             [{"entity_type": "topics", "entity_name": t, "configs": c} for t, c in found])
        return 0
