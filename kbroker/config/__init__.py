"""Broker configuration: Kafka's key names, Kafka's defaults, typed and validated up front.

Sources, applied in order (later wins): built-in defaults < config file < ``--override key=value``.

* ``server.properties`` uses ``java.util.Properties`` syntax: ``#``/``!`` comment lines, ``key=value``,
  ``key: value`` or ``key value``; a line ending in an odd number of backslashes continues on the next line
  (leading whitespace of the continuation is dropped); escapes ``\\t \\n \\r \\f \\uXXXX`` and ``\\<any>`` = that char.
  Kafka reads the file as ISO-8859-1; kbroker decodes UTF-8 when the bytes are valid UTF-8 (identical for ASCII
  files) and falls back to ISO-8859-1 otherwise. Later duplicates win. Values are trimmed like Kafka's ConfigDef.
* ``.yaml``/``.yml`` holds a flat mapping of Kafka keys, or nested mappings that flatten to dotted keys
  (``log: {retention: {hours: 1}}`` == ``log.retention.hours: 1``). Native YAML ints/bools/lists are accepted.
* Unknown keys are kept in ``BrokerConfig.unknown`` and logged once as a warning (Kafka does the same).
* An invalid value raises ``ConfigError`` naming the key, the value and what is allowed (it is also Kafka's
  INVALID_CONFIG, code 40, for topic configs).
* Nothing fails open: every key has an ``effect`` in the key table (keys.py). A key kbroker cannot honour (TLS,
  SASL, ACLs, quotas, ...) stops startup with a ConfigError naming it when set to anything but its default, as does
  a listener whose security protocol is not PLAINTEXT; a key naming a mechanism kbroker does not have (Kafka's
  thread pools, the purgatory, the transaction coordinator) is accepted with one WARNING line when set.
  docs/config-effects.md lists both kinds.

Defaults are Kafka 0.10.1's (``kafka_config.html``) except where this table deliberately follows modern Kafka,
each noted in the key's doc: ``delete.topic.enable`` (true, Kafka >= 1.0; 0.10.1 had false),
``message.max.bytes`` (1048588, Kafka >= 0.11 where batches carry a 61-byte header; 0.10.1 had 1000012),
``zookeeper.session.timeout.ms`` (18000, Kafka >= 2.5; 0.10.1 had 6000), ``unclean.leader.election.enable``
(false, Kafka >= 0.11; 0.10.1 had true -- silent data loss by default is not kept), and
``listener.security.protocol.map``. Keys newer than 0.10.1 use the modern default. An empty
``zookeeper.connect`` (the default here; 0.10.1 required it) selects the embedded coordination backend.

Topic-level configs (``TOPIC_CONFIGS``) map to broker keys whose *effective* values are the topic defaults; see
``validate_topic_config``, ``effective_topic_config`` and ``log_config_for``.
"""
from .broker import BrokerConfig
from .files import (Listener, flatten_mapping, load_file, parse_listeners, parse_override, parse_properties,
                    parse_protocol_map)
from .keys import CONFIG_KEYS, ConfigKey
from .topic import (CONFIG_SOURCE_CODES, DEFAULT_CONFIG, STATIC_BROKER_CONFIG, TOPIC_CONFIG, TOPIC_CONFIGS,
                    ConfigEntry, TopicKey, effective_topic_config, log_config_for, validate_topic_config)
from .values import (DOUBLE_MAX, INT_MAX, INT_MIN, LONG_MAX, LONG_MIN, SHORT_MAX, SHORT_MIN, ConfigError,
                     NonEmptyListOf, OneOf, Password, Pattern, Range, format_value, parse_value)

__all__ = [
    "BrokerConfig", "ConfigError", "Password", "Range", "OneOf", "NonEmptyListOf", "Pattern", "Listener",
    "CONFIG_KEYS", "ConfigKey", "TOPIC_CONFIGS", "TopicKey", "ConfigEntry", "CONFIG_SOURCE_CODES", "DEFAULT_CONFIG",
    "STATIC_BROKER_CONFIG", "TOPIC_CONFIG", "effective_topic_config", "log_config_for", "validate_topic_config",
    "format_value", "parse_value", "parse_properties", "flatten_mapping", "load_file", "parse_override",
    "parse_listeners", "parse_protocol_map", "INT_MAX", "INT_MIN", "LONG_MAX", "LONG_MIN", "SHORT_MAX", "SHORT_MIN",
    "DOUBLE_MAX",
]
