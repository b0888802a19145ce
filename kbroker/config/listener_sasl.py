"""The SASL settings of each SASL listener (SASL_PLAINTEXT, SASL_SSL) and their listener-prefixed keys.

Kafka's per-listener keys, listener and mechanism names lower-cased in the prefix:

* ``listener.name.<listener>.sasl.enabled.mechanisms`` over ``sasl.enabled.mechanisms``;
* ``listener.name.<listener>.<mechanism>.sasl.jaas.config`` -- one JAAS login module, over the JAAS file's
  ``<listener>.KafkaServer`` then ``KafkaServer`` sections (``kbroker/security/jaas.py``; the file is the
  ``-Djava.security.auth.login.config=<path>`` of ``KAFKA_OPTS``).

Fail closed: a listener-prefixed SASL key naming no SASL listener of this broker, or a mechanism kbroker does not
serve, or any other listener-prefixed ``sasl.*`` key (a per-listener callback handler or login class) stops
startup naming it (Kafka would ignore it silently); so does a SASL listener enabling a mechanism
kbroker does not serve or lacking a JAAS entry for one it enables. When the inter-broker (or control-plane)
listener is SASL, ``sasl.mechanism.inter.broker.protocol`` must be one it enables and its JAAS entry must carry the
``username``/``password`` this broker logs in to the others with (GSSAPI: its keytab entry).
"""
import re

from kbroker.security import jaas
from kbroker.security.authenticator import SERVER_MECHANISMS

from .values import ConfigError, _invalid

_KEY = re.compile(r"listener\.name\.([^.]+)\.(?:sasl\.enabled\.mechanisms|([^.]+)\.sasl\.jaas\.config)")
# Any other listener-prefixed SASL key (Kafka's listener.name.<l>.<mechanism>.sasl.server.callback.handler.class,
# .sasl.login.class, .sasl.kerberos.service.name, ...): refused, never silently ignored.
_ANY = re.compile(r"listener\.name\.[^.]+\.(?:[^.]+\.)?sasl\..+")


def is_listener_sasl_key(name):
    return _ANY.fullmatch(name) is not None


def sasl_listeners(cfg):
    """Names of the listeners whose security protocol is SASL_PLAINTEXT or SASL_SSL."""
    pmap = cfg.listener_security_protocol_map
    return [l.name for l in cfg.listeners if pmap.get(l.name, "").startswith("SASL_")]


def listener_settings(cfg, listener):
    """(mechanisms, {listener-prefixed sasl.jaas.config key: raw value}) of one SASL listener."""
    values = cfg.listener_sasl_values
    prefix = "listener.name.%s." % listener.lower()
    raw = values.get(prefix + "sasl.enabled.mechanisms")
    if raw is not None:
        mechanisms = [m.strip() for m in str(raw).split(",") if m.strip()]
    else:
        mechanisms = list(cfg["sasl.enabled.mechanisms"])
    jaas_values = {k: str(v) for k, v in values.items()
                   if k.startswith(prefix) and k.endswith(".sasl.jaas.config")}
    return mechanisms, jaas_values


def jaas_file():
    """The JAAS file KAFKA_OPTS names, parsed, or None."""
    path = jaas.resolve_path()
    return jaas.load(path) if path else None


def check(cfg):
    """Raise ConfigError (naming the key or JAAS file) unless every SASL listener can be served (module docstring)."""
    sasl = {l.lower(): l for l in sasl_listeners(cfg)}
    for name in sorted(cfg.listener_sasl_values):
        m = _KEY.fullmatch(name)
        if m is None:
            raise _invalid(name, "[hidden]", "kbroker applies only listener.name.<listener>.sasl.enabled.mechanisms "
                           "and listener.name.<listener>.<mechanism>.sasl.jaas.config per listener; set the "
                           "unprefixed key if kbroker has it (docs/config-effects.md)")
        if m.group(1) not in sasl:
            raise _invalid(name, "[hidden]" if m.group(2) else cfg.listener_sasl_values[name],
                           "names no SASL listener of this broker (listener names in keys are lower-case: %s)"
                           % (", ".join(sorted(sasl)) or "none"))
        if m.group(2) and m.group(2).upper() not in SERVER_MECHANISMS:
            raise _invalid(name, "[hidden]", "%s is not a SASL mechanism kbroker serves (%s)"
                           % (m.group(2), ", ".join(sorted(SERVER_MECHANISMS))))
    if not sasl:
        return
    try:
        parsed = jaas_file()
    except jaas.JaasError as e:
        raise ConfigError(str(e)) from None
    for listener in sasl.values():
        mechanisms, jaas_values = listener_settings(cfg, listener)
        key = "listener.name.%s.sasl.enabled.mechanisms" % listener.lower()
        key = key if key in cfg.listener_sasl_values else "sasl.enabled.mechanisms"
        if not mechanisms:
            raise _invalid(key, "", "listener %s is SASL but enables no mechanism" % listener)
        for mech in mechanisms:
            if mech not in SERVER_MECHANISMS:
                raise _invalid(key, ",".join(mechanisms), "%s is not a SASL mechanism kbroker serves (%s)"
                               % (mech, ", ".join(sorted(SERVER_MECHANISMS))))
            try:
                jaas.server_entry(listener, mech, jaas_values, parsed)
            except jaas.JaasError as e:
                jaas_key = "listener.name.%s.%s.sasl.jaas.config" % (listener.lower(), mech.lower())
                raise ConfigError(str(e), jaas_key) from None
    inter = [l for l in (cfg.inter_broker_listener, cfg.control_plane_listener) if l in sasl.values()]
    mech = cfg["sasl.mechanism.inter.broker.protocol"]
    for listener in inter:
        # Kafka's rule: the brokers' own mechanism must be one the listener serves.
        mechanisms, jaas_values = listener_settings(cfg, listener)
        if mech not in mechanisms:
            raise _invalid("sasl.mechanism.inter.broker.protocol", mech,
                           "must be included in the SASL mechanisms of listener %s (%s) when brokers talk SASL over "
                           "it" % (listener, ", ".join(mechanisms)))
        entry = jaas.server_entry(listener, mech, jaas_values, parsed)
        if mech != "GSSAPI" and (not entry.options.get("username") or entry.options.get("password") is None):
            raise ConfigError("%s: the %s login module for listener %s needs username and password options: they "
                              "are what this broker sends to the others (sasl.mechanism.inter.broker.protocol=%s)"
                              % (entry.source, entry.class_name, listener, mech))
