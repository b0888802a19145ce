"""The keys every connector has (Kafka's ConnectorConfig, SourceConnectorConfig, SinkConnectorConfig), their
validation (``PUT /connector-plugins/{plugin}/config/validate``) and the transformation chain they describe.

Common ("Common" group): ``name`` (required, no ISO control characters), ``connector.class`` (required),
``tasks.max`` (INT 1, >= 1), ``key.converter`` / ``value.converter`` / ``header.converter`` (CLASS, null: the
worker's), ``config.action.reload`` (none|restart, "restart"). "Transforms": ``transforms`` (LIST "") and per
alias ``transforms.<alias>.type`` (required) + ``.predicate`` + ``.negate`` + the transformation's own keys.
"Predicates" (KIP-585): ``predicates`` and ``predicates.<alias>.type`` + its keys. "Error Handling" (KIP-298):
``errors.retry.timeout`` (LONG 0 ms; -1 retries forever), ``errors.retry.delay.max.ms`` (LONG 60000),
``errors.tolerance`` (none|all, "none"), ``errors.log.enable`` (false), ``errors.log.include.messages`` (false).
Sinks: ``topics`` (LIST "") / ``topics.regex`` (STRING "") -- exactly one of them, ``errors.deadletterqueue.
topic.name`` (""), ``.topic.replication.factor`` (SHORT 3; -1 the broker's default), ``.context.headers.enable``
(false).

Sources, KIP-158 (when the worker's ``topic.creation.enable`` is true and the config has any ``topic.creation.``
key): ``topic.creation.groups`` (LIST ""), ``topic.creation.default.replication.factor`` / ``.partitions`` (INT,
required, -1 or >= 1; -1 is the broker's default), per group ``topic.creation.<group>.include`` / ``.exclude``
(regex lists, full match, exclusion wins; the default group includes ".*") and ``.replication.factor`` /
``.partitions`` (the default group's when not set); any other ``topic.creation.<group>.<key>`` is a topic config of
the topics that group creates.

Client overrides: ``producer.override.*``, ``consumer.override.*``, ``admin.override.*`` go to the task's clients
when the worker's ``connector.client.config.override.policy`` allows them (All: any; None: refused; Principal:
``sasl.jaas.config``, ``sasl.mechanism``, ``security.protocol`` only), as Kafka's.
"""
import re

from kbroker.connect import configdef as cd
from kbroker.connect.configdef import (NO_DEFAULT, ConfigDef, NonEmptyStringWithoutControlChars, Range,
                                       ValidString, key_info_json, value_info_json)
from kbroker.connect.exceptions import BadRequestError, ConfigError

COMMON_GROUP = "Common"
TRANSFORMS_GROUP = "Transforms"
PREDICATES_GROUP = "Predicates"
ERROR_GROUP = "Error Handling"
DLQ_TOPIC = "errors.deadletterqueue.topic.name"
OVERRIDE_PREFIXES = ("producer.override.", "consumer.override.", "admin.override.")
_PRINCIPAL_OVERRIDES = ("sasl.jaas.config", "sasl.mechanism", "security.protocol")


def _unique_aliases(what):
    class _Unique:
        def ensure_valid(self, name, value):
            seen = set()
            for alias in value or ():
                if alias in seen:
                    raise ConfigError(name, ",".join(value), "Duplicate alias provided.")
                seen.add(alias)

        def __str__(self):
            return "unique %s aliases" % what
    return _Unique()


def base_def(kind):
    """The common keys of a ``kind`` ("source" | "sink" | anything else: common only) connector."""
    d = ConfigDef()
    d.define("name", cd.STRING, NO_DEFAULT, NonEmptyStringWithoutControlChars(), cd.HIGH,
             "Globally unique name to use for this connector.", COMMON_GROUP, 1, "MEDIUM", "Connector name")
    d.define("connector.class", cd.STRING, NO_DEFAULT, None, cd.HIGH,
             "Name or alias of the class for this connector. Must be a subclass of Connector.",
             COMMON_GROUP, 2, "LONG", "Connector class")
    d.define("tasks.max", cd.INT, 1, Range.at_least(1), cd.HIGH,
             "Maximum number of tasks to use for this connector.", COMMON_GROUP, 3, "SHORT", "Tasks max")
    d.define("key.converter", cd.CLASS, None, None, cd.LOW,
             "Converter class used for record keys; the worker's key.converter when not set.",
             COMMON_GROUP, 4, "SHORT", "Key converter class")
    d.define("value.converter", cd.CLASS, None, None, cd.LOW,
             "Converter class used for record values; the worker's value.converter when not set.",
             COMMON_GROUP, 5, "SHORT", "Value converter class")
    d.define("header.converter", cd.CLASS, None, None, cd.LOW,
             "HeaderConverter class used for record headers; the worker's header.converter when not set.",
             COMMON_GROUP, 6, "SHORT", "Header converter class")
    d.define("config.action.reload", cd.STRING, "restart", ValidString.in_("none", "restart"), cd.LOW,
             "What to do when an externalised config value changes (restart the connector, or nothing).",
             COMMON_GROUP, 7, "MEDIUM", "Reload Action")
    d.define("transforms", cd.LIST, "", _unique_aliases("transformation"), cd.LOW,
             "Aliases for the transformations to be applied to records.", TRANSFORMS_GROUP, 1, "LONG",
             "Transforms")
    d.define("predicates", cd.LIST, "", _unique_aliases("predicate"), cd.LOW,
             "Aliases for the predicates used by transformations.", PREDICATES_GROUP, 1, "LONG", "Predicates")
    d.define("errors.retry.timeout", cd.LONG, 0, None, cd.MEDIUM,
             "The maximum duration in milliseconds that a failed operation will be reattempted. The default is 0, "
             "which means no retries will be attempted. Use -1 for infinite retries.",
             ERROR_GROUP, 1, "MEDIUM", "Retry Timeout for Errors")
    d.define("errors.retry.delay.max.ms", cd.LONG, 60000, None, cd.MEDIUM,
             "The maximum duration in milliseconds between consecutive retry attempts.",
             ERROR_GROUP, 2, "MEDIUM", "Maximum Delay Between Retries for Errors")
    d.define("errors.tolerance", cd.STRING, "none", ValidString.in_("none", "all"), cd.MEDIUM,
             "Behavior for tolerating errors during connector operation. 'none' is the default value and signals "
             "that any error will result in an immediate connector task failure; 'all' changes the behavior to "
             "skip over problematic records.", ERROR_GROUP, 3, "SHORT", "Error Tolerance")
    d.define("errors.log.enable", cd.BOOLEAN, False, None, cd.MEDIUM,
             "If true, write each error and the details of the failed operation and problematic record to the "
             "Connect application log.", ERROR_GROUP, 4, "SHORT", "Log Errors")
    d.define("errors.log.include.messages", cd.BOOLEAN, False, None, cd.MEDIUM,
             "Whether to include in the log the Connect record that resulted in a failure.",
             ERROR_GROUP, 5, "SHORT", "Log Error Details")
    if kind == "sink":
        d.define("topics", cd.LIST, "", None, cd.HIGH,
                 "List of topics to consume, separated by commas", COMMON_GROUP, 4, "LONG", "Topics")
        d.define("topics.regex", cd.STRING, "", _Regex(), cd.HIGH,
                 "Regular expression giving topics to consume.", COMMON_GROUP, 4, "LONG", "Topics regex")
        d.define(DLQ_TOPIC, cd.STRING, "", None, cd.MEDIUM,
                 "The name of the topic to be used as the dead letter queue (DLQ) for messages that result in an "
                 "error when processed by this sink connector, or its transformations or converters.",
                 ERROR_GROUP, 6, "MEDIUM", "Dead Letter Queue Topic Name")
        d.define("errors.deadletterqueue.topic.replication.factor", cd.SHORT, 3, None, cd.MEDIUM,
                 "Replication factor used to create the dead letter queue topic when it doesn't already exist.",
                 ERROR_GROUP, 7, "MEDIUM", "Dead Letter Queue Topic Replication Factor")
        d.define("errors.deadletterqueue.context.headers.enable", cd.BOOLEAN, False, None, cd.MEDIUM,
                 "If true, add headers containing error context to the messages written to the dead letter "
                 "queue.", ERROR_GROUP, 8, "MEDIUM", "Enable Error Context Headers")
    return d


class _Regex:
    def ensure_valid(self, name, value):
        if value:
            try:
                re.compile(value)
            except re.error as e:
                raise ConfigError(name, value, "Must be a valid regular expression: %s" % e) from None

    def __str__(self):
        return "valid regex"


class _PluginType:
    """Validator of ``transforms.<alias>.type`` / ``predicates.<alias>.type``: the name resolves to a plugin."""

    def __init__(self, resolve, what):
        self.resolve = resolve
        self.what = what

    def ensure_valid(self, name, value):
        if value is None:
            return
        try:
            self.resolve(value)
        except ConfigError as e:
            raise ConfigError(name, value, "Class %s could not be found (%s)." % (value, e)) from None

    def __str__(self):
        return "a " + self.what


def _plugin_def(cls):
    try:
        inst = cls()
        return inst.config_def() if hasattr(inst, "config_def") else ConfigDef()
    except Exception:
        return ConfigDef()


def enriched_def(plugins, kind, props, topic_creation=True):
    """``base_def(kind)`` plus, for each alias in ``props``' transforms/predicates, the alias's keys (Kafka's
    ConnectorConfig.enrich); for a source using topic creation (``uses_topic_creation``), the KIP-158 keys."""
    d = base_def(kind)
    if kind == "source" and topic_creation and uses_topic_creation(props):
        _topic_creation_def(d, props)
    transforms = _aliases(props.get("transforms"))
    predicates = _aliases(props.get("predicates"))
    for alias in transforms:
        prefix = "transforms.%s." % alias
        group = "Transforms: " + alias
        d.define(prefix + "type", cd.CLASS, NO_DEFAULT, _PluginType(plugins.transformation_class, "Transformation"),
                 cd.HIGH, "Class for the '%s' transformation." % alias, group, -1, "LONG",
                 "Transformation type for " + alias)
        d.define(prefix + "predicate", cd.STRING, None, None, cd.MEDIUM,
                 "The alias of a predicate used to determine whether to apply this transformation.", group, -1,
                 "LONG", "Predicate for " + alias)
        d.define(prefix + "negate", cd.BOOLEAN, False, None, cd.MEDIUM,
                 "Whether the configured predicate should be negated.", group, -1, "SHORT", "Negate for " + alias)
        cls = _try(plugins.transformation_class, props.get(prefix + "type"))
        if cls is not None:
            _embed(d, prefix, group, _plugin_def(cls))
    for alias in predicates:
        prefix = "predicates.%s." % alias
        group = "Predicates: " + alias
        d.define(prefix + "type", cd.CLASS, NO_DEFAULT, _PluginType(plugins.predicate_class, "Predicate"), cd.HIGH,
                 "Class for the '%s' predicate." % alias, group, -1, "LONG", "Predicate type for " + alias)
        cls = _try(plugins.predicate_class, props.get(prefix + "type"))
        if cls is not None:
            _embed(d, prefix, group, _plugin_def(cls))
    return d


# ------------------------------------------------------------------------------------------------ KIP-158
TOPIC_CREATION_PREFIX = "topic.creation."
TOPIC_CREATION_GROUP = "Topic Creation"
DEFAULT_TOPIC_CREATION = "default"
_TOPIC_GROUP_KEYS = ("include", "exclude", "replication.factor", "partitions")


def uses_topic_creation(props):
    """A source connector creates its topics (KIP-158) when its config has any ``topic.creation.`` key (and the
    worker's ``topic.creation.enable`` is true): then ``topic.creation.default.replication.factor`` and
    ``.partitions`` are required."""
    return any(str(k).startswith(TOPIC_CREATION_PREFIX) for k in props)


class _MinusOneOrPositive:
    def ensure_valid(self, name, value):
        if value is not None and value != -1 and value < 1:
            raise ConfigError(name, value, "Value must be -1 or at least 1")

    def __str__(self):
        return "-1 or [1,...]"


def _topic_creation_def(d, props):
    d.define("topic.creation.groups", cd.LIST, "", _unique_aliases("topic creation group"), cd.LOW,
             "Groups of configurations for topics created by source connectors", TOPIC_CREATION_GROUP, 1, "LONG",
             "Topic Creation Groups")
    groups = [g for g in _aliases(props.get("topic.creation.groups")) if g != DEFAULT_TOPIC_CREATION]
    for group in [DEFAULT_TOPIC_CREATION] + groups:
        prefix = "%s%s." % (TOPIC_CREATION_PREFIX, group)
        is_default = group == DEFAULT_TOPIC_CREATION
        d.define(prefix + "include", cd.LIST, ".*" if is_default else "", None, cd.LOW,
                 "Regular expressions of the topic names this group applies to.", group, 1, "LONG",
                 "Inclusion Topic Pattern for " + group)
        d.define(prefix + "exclude", cd.LIST, "", None, cd.LOW,
                 "Regular expressions of the topic names this group does not apply to (exclusion wins).",
                 group, 2, "LONG", "Exclusion Topic Pattern for " + group)
        for i, key in enumerate(("replication.factor", "partitions")):
            default = NO_DEFAULT if is_default else _default_group_value(props, key)
            d.define(prefix + key, cd.INT, default, _MinusOneOrPositive(), cd.LOW,
                     "%s of new topics (-1: the broker's default)%s." % (
                         "Replication factor" if i == 0 else "Partition count",
                         "" if is_default else "; the default group's when not set"),
                     group, 3 + i, "LONG", "%s for Topics in %s" % (
                         "Replication Factor" if i == 0 else "Partition Count", group))


def _default_group_value(props, key):
    raw = props.get("%s%s.%s" % (TOPIC_CREATION_PREFIX, DEFAULT_TOPIC_CREATION, key))
    try:
        value = int(str(raw).strip())
    except (TypeError, ValueError):
        return -1
    # An invalid default-group value is reported on its own key; the group's default must stay a valid one.
    return value if value == -1 or 1 <= value < 2 ** 31 else -1


class TopicCreationGroup:
    """One KIP-158 group: which topics (``include`` minus ``exclude`` regexes, full match), and how they are
    created (partitions, replication factor, the group's other keys as topic configs)."""

    def __init__(self, name, include, exclude, replication_factor, partitions, configs):
        self.name = name
        self.include = [re.compile(p) for p in include if p]
        self.exclude = [re.compile(p) for p in exclude if p]
        self.replication_factor = replication_factor
        self.partitions = partitions
        self.configs = configs

    def matches(self, topic):
        return (any(p.fullmatch(topic) for p in self.include)
                and not any(p.fullmatch(topic) for p in self.exclude))


def _embed(d, prefix, group, child):
    for i, key in enumerate(child.keys().values()):
        if prefix + key.name in d:
            continue
        d.define(prefix + key.name, key.type, key.default, key.validator, key.importance, key.documentation,
                 group, i, key.width, key.display_name, [prefix + x for x in key.dependents])


def _try(resolve, name):
    if not name:
        return None
    try:
        return resolve(name)
    except Exception:
        return None


def _aliases(value):
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value if str(v)]
    value = str(value).strip()
    return [a for a in re.split(r"\s*,\s*", value) if a] if value else []


def _sink_checks(props, values):
    """Kafka's SinkConnectorConfig.validate: exactly one of topics / topics.regex; the DLQ not consumed."""
    topics = _aliases(props.get("topics"))
    regex = (props.get("topics.regex") or "").strip()
    if topics and regex:
        msg = "topics and topics.regex are mutually exclusive options, but both are set."
        values["topics"].add_error(msg)
        values["topics.regex"].add_error(msg)
    elif not topics and not regex:
        msg = "Must configure one of topics or topics.regex"
        values["topics"].add_error(msg)
        values["topics.regex"].add_error(msg)
    dlq = (props.get(DLQ_TOPIC) or "").strip()
    if dlq and dlq in topics:
        values[DLQ_TOPIC].add_error("The DLQ topic '%s' may not be included in the list of topics ('topics=%s') "
                                    "to be consumed." % (dlq, ",".join(topics)))
    if dlq and regex and _matches(regex, dlq):
        values[DLQ_TOPIC].add_error("The DLQ topic '%s' may not be included in the regex matching topic names "
                                    "('topics.regex=%s') to be consumed." % (dlq, regex))


def _matches(regex, topic):
    try:
        return re.fullmatch(regex, topic) is not None
    except re.error:
        return False


def _predicate_checks(props, values):
    predicates = set(_aliases(props.get("predicates")))
    for alias in _aliases(props.get("transforms")):
        key = "transforms.%s.predicate" % alias
        name = (props.get(key) or "").strip()
        if name and name not in predicates and key in values:
            values[key].add_error("Invalid value %s for configuration %s: Predicate '%s' is not defined in "
                                  "predicates" % (name, key, name))


def _override_checks(worker_config, props, values, extra):
    if worker_config is None:
        return
    policy = worker_config.get("connector.client.config.override.policy", "All")
    for key in sorted(props):
        if not key.startswith(OVERRIDE_PREFIXES):
            continue
        plain = key.split(".override.", 1)[1]
        if policy == "None" or (policy == "Principal" and plain not in _PRINCIPAL_OVERRIDES):
            cv = cd.ConfigValue(key, props[key])
            cv.add_error("The '%s' policy does not allow '%s' to be overridden in the connector configuration."
                         % (policy, plain))
            extra.append(cv)


def validate(plugins, config, worker_config=None):
    """Kafka's ConfigInfos JSON for ``config`` (a dict of str): ``{"name": <connector class>, "error_count",
    "groups", "configs": [{"definition": ConfigKeyInfo, "value": ConfigValueInfo}, ...]}`` -- the common keys
    (with the transforms' and predicates' keys) first, then the connector's own. BadRequestError when
    ``connector.class`` is missing or names no connector."""
    cls_name = (config.get("connector.class") or "").strip()
    if not cls_name:
        raise BadRequestError("Connector config %s contains no connector type" % _redacted(config))
    try:
        cls = plugins.connector_class(cls_name)
    except ConfigError as e:
        raise BadRequestError(str(e)) from None
    from kbroker.connect.plugins import connector_type_of
    kind = connector_type_of(cls)
    connector = cls()
    common = enriched_def(plugins, kind, config, _topic_creation_enabled(worker_config))
    values = common.validate_all(config)
    if kind == "sink":
        _sink_checks(config, values)
    _predicate_checks(config, values)
    extra = []
    _override_checks(worker_config, config, values, extra)
    own_def = connector.config_def()
    own_values = connector.validate(config)
    configs = []
    groups = list(common.groups())
    keys = common.keys()
    for name, value in values.items():
        if name in keys:
            configs.append({"definition": key_info_json(keys[name]),
                            "value": value_info_json(value, keys[name].type)})
    own_keys = own_def.keys()
    for value in own_values:
        if value.name in keys:
            continue   # a connector redefining a common key: the common definition wins (Kafka's merge)
        key = own_keys.get(value.name)
        if key is None:
            continue
        if key.group and key.group not in groups:
            groups.append(key.group)
        configs.append({"definition": key_info_json(key), "value": value_info_json(value, key.type)})
    for value in extra:
        configs.append({"definition": None, "value": value_info_json(value, cd.STRING)})
    errors = sum(len(c["value"]["errors"]) for c in configs)
    return {"name": plugins.class_name("connector", cls_name), "error_count": errors, "groups": groups,
            "configs": configs}


def _topic_creation_enabled(worker_config):
    return worker_config is None or bool(worker_config.get("topic.creation.enable", True))


def _redacted(config):
    return "{%s}" % ", ".join("%s=%s" % (k, v) for k, v in sorted(config.items()))


def connector_config_errors(plugins, config, worker_config=None):
    """Every error message of ``validate`` (the 400 answer of ``PUT /connectors/{name}/config`` lists them:
    "Connector configuration is invalid and contains the following N error(s):\\n..."), in order."""
    result = validate(plugins, config, worker_config)
    return [e for c in result["configs"] for e in c["value"]["errors"]]


def invalid_config_message(errors):
    """Kafka's message for a config with ``errors`` (AbstractHerder.maybeAddConfigErrors)."""
    return ("Connector configuration is invalid and contains the following %d error(s):\n%s\nYou can also find "
            "the above list of errors at the endpoint `/connector-plugins/{connectorType}/config/validate`"
            % (len(errors), "\n".join(errors)))


class ConnectorConfig:
    """A connector's parsed common keys (``values``) and the things built from them."""

    def __init__(self, plugins, props, kind=None, worker_config=None):
        self.plugins = plugins
        self.props = {str(k): v for k, v in props.items()}
        if kind is None:
            from kbroker.connect.plugins import connector_type_of
            kind = connector_type_of(plugins.connector_class(self.props.get("connector.class", "")))
        self.kind = kind
        self.topic_creation = kind == "source" and _topic_creation_enabled(worker_config) \
            and uses_topic_creation(self.props)
        self.definition = enriched_def(plugins, kind, self.props, _topic_creation_enabled(worker_config))
        self.values = self.definition.parse(self.props)
        if kind == "sink":
            probe = {n: cd.ConfigValue(n) for n in ("topics", "topics.regex", DLQ_TOPIC)}
            _sink_checks(self.props, probe)
            for cv in probe.values():
                if cv.errors:
                    raise ConfigError(cv.errors[0])
        self.worker_config = worker_config

    def __getitem__(self, key):
        return self.values[key]

    def get(self, key, default=None):
        return self.values.get(key, default)

    def prefixed(self, prefix):
        return {k[len(prefix):]: v for k, v in self.props.items() if k.startswith(prefix)}

    def client_overrides(self, kind):
        """The connector's ``<kind>.override.*`` keys (prefix stripped), after the worker's policy check."""
        overrides = self.prefixed(kind + ".override.")
        policy = self.worker_config.get("connector.client.config.override.policy", "All") \
            if self.worker_config is not None else "All"
        for key in overrides:
            if policy == "None" or (policy == "Principal" and key not in _PRINCIPAL_OVERRIDES):
                raise ConfigError("The '%s' policy does not allow '%s' to be overridden in the connector "
                                  "configuration." % (policy, key))
        return overrides

    def topic_creation_groups(self):
        """[TopicCreationGroup]: the ``topic.creation.groups`` in order, then ``default`` (which matches every
        topic no other group took); [] when this connector does not create topics."""
        if not self.topic_creation:
            return []
        out = []
        names = [g for g in self.values.get("topic.creation.groups") or () if g != DEFAULT_TOPIC_CREATION]
        for name in names + [DEFAULT_TOPIC_CREATION]:
            prefix = "%s%s." % (TOPIC_CREATION_PREFIX, name)
            configs = {k: str(v) for k, v in self.prefixed(prefix).items() if k not in _TOPIC_GROUP_KEYS}
            out.append(TopicCreationGroup(name, self.values[prefix + "include"], self.values[prefix + "exclude"],
                                          self.values[prefix + "replication.factor"],
                                          self.values[prefix + "partitions"], configs))
        return out

    def transformations(self):
        """[TransformationStage] in ``transforms`` order, each configured (``transforms.<alias>.`` keys, prefix
        stripped, without ``type``/``predicate``/``negate``) with its predicate configured likewise."""
        predicates = {}
        for alias in self.values.get("predicates") or ():
            prefix = "predicates.%s." % alias
            cls = self.plugins.predicate_class(self.values[prefix + "type"])
            pred = cls()
            conf = {k: v for k, v in self.prefixed(prefix).items() if k != "type"}
            pred.configure(conf)
            predicates[alias] = pred
        stages = []
        for alias in self.values.get("transforms") or ():
            prefix = "transforms.%s." % alias
            cls = self.plugins.transformation_class(self.values[prefix + "type"])
            transform = cls()
            conf = {k: v for k, v in self.prefixed(prefix).items() if k not in ("type", "predicate", "negate")}
            transform.configure(conf)
            pred_alias = self.values.get(prefix + "predicate")
            if pred_alias and pred_alias not in predicates:
                raise ConfigError(prefix + "predicate", pred_alias,
                                  "Predicate '%s' is not defined in predicates" % pred_alias)
            stages.append(TransformationStage(alias, transform, predicates.get(pred_alias) if pred_alias else None,
                                              bool(self.values.get(prefix + "negate"))))
        return stages


class TransformationStage:
    """One transformation with its optional predicate (KIP-585): applied when ``predicate.test(record)`` is true
    (false with ``negate``), or always without a predicate."""

    def __init__(self, alias, transform, predicate=None, negate=False):
        self.alias = alias
        self.transform = transform
        self.predicate = predicate
        self.negate = negate

    def apply(self, record):
        if self.predicate is not None and bool(self.predicate.test(record)) == self.negate:
            return record
        return self.transform.apply(record)

    def close(self):
        for obj in (self.transform, self.predicate):
            if obj is not None and hasattr(obj, "close"):
                try:
                    obj.close()
                except Exception:
                    pass
