"""The ``ssl.*`` settings of each listener, resolved as Kafka resolves them, and their startup checks.

Kafka reads a listener's TLS settings with the listener's prefix first: ``listener.name.<listener>.ssl.X`` (the
listener name in lower case: ``listener.name.internal.ssl.keystore.location`` for ``INTERNAL://``) overrides
``ssl.X`` for that listener only. ``BrokerConfig`` hands the prefixed keys here (``is_listener_ssl_key``), and
``parse_prefixed`` checks them as strictly as unprefixed ones -- a known ``ssl.*`` key after the prefix, a value of
its type, the same ``effect`` (a refused key is refused prefixed too) -- and one more rule, fail-closed: the prefix
must name a configured listener in lower case. Kafka would silently ignore ``listener.name.SSL.ssl.client.auth``
(wrong case) or a listener that does not exist, leaving the listener with settings its operator did not mean; here
either stops startup naming the key. A prefixed key for a listener without TLS (PLAINTEXT, SASL_PLAINTEXT) is
accepted and warned about, as it does nothing.

``settings(cfg, listener)`` is the plain dict ``kbroker/security/tls.py`` takes (passwords as strings), and
``check(cfg)`` builds every TLS listener's server context -- and, when the inter-broker listener uses TLS, the
client context brokers connect to each other with -- so a wrong password, a missing file or a JKS store stops
startup (and ``kbroker-server --check-config``) as a ConfigError naming the key (prefixed when the prefixed key is
the one in force). ``ssl.principal.mapping.rules`` is parsed there too (Kafka's "Invalid rule" messages).

KIP-684: on a SASL_SSL listener ``ssl.client.auth`` applies only when listener-prefixed (the unprefixed key is for
SSL listeners; a SASL_SSL listener authenticates clients with SASL).
"""
import re

from kbroker.security import principal, tls

from .keys import APPLIED, CONFIG_KEYS, NO_EFFECT, REFUSED_UNLESS_DEFAULT, effect_of
from .values import Password, _invalid, format_default, parse_value

_PREFIXED = re.compile(r"listener\.name\.([^.]+)\.(ssl\..+)")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
# The keys resolved per listener: every ssl.* key of the table.
SSL_KEYS = tuple(k for k in CONFIG_KEYS if k.startswith("ssl."))


def is_listener_ssl_key(name):
    """True for ``listener.name.<l>.ssl.*`` (checked by ``parse_prefixed``, never an unknown key)."""
    return _PREFIXED.fullmatch(name) is not None


def parse_prefixed(props, listeners, pmap):
    """{full key: parsed value} of the listener-prefixed ssl keys in ``props`` and [(key, reason)] of those without
    effect; ConfigError naming the key for an unknown suffix, an unknown or wrongly-cased listener, a bad value or
    a refused non-default value."""
    names = {l.name.lower(): l.name for l in listeners}
    values, inert = {}, []
    for full, raw in sorted(props.items()):
        m = _PREFIXED.fullmatch(full)
        if m is None:
            continue
        prefix, key = m.group(1), m.group(2)
        spec = CONFIG_KEYS.get(key)
        if spec is None:
            raise _invalid(full, raw, "%s is not an SSL configuration kbroker knows" % key)
        if prefix not in names or prefix != prefix.lower():
            raise _invalid(full, "[hidden]" if spec.type == "password" else raw,
                           "no listener is named %r: the prefix is listener.name.<listener name in lower case>. "
                           "(listeners: %s)" % (prefix, ", ".join(sorted(names.values())) or "none"))
        if isinstance(raw, str) and raw.strip() == "" and spec.default is None:
            raw = None
        value = parse_value(full, spec.type, raw, spec.validator)
        kind, reason = effect_of(spec)
        if kind == REFUSED_UNLESS_DEFAULT and value != spec.default:
            raise _invalid(full, value if isinstance(value, Password) else raw,
                           "only the default (%s) is accepted: %s" % (format_default(spec.default), reason))
        if kind == NO_EFFECT:
            inert.append((full, reason))
        elif pmap.get(names[prefix]) not in TLS_PROTOCOLS:
            inert.append((full, "listener %s is %s, which uses no TLS" % (names[prefix], pmap.get(names[prefix]))))
        values[full] = value
    return values, inert


def prefixed_key(listener, key):
    return "listener.name.%s.%s" % (listener.lower(), key)


def _plain(value):
    return value.value if isinstance(value, Password) else value


def settings(cfg, listener):
    """The ssl.* settings of ``listener`` for kbroker/security/tls.py (module docstring)."""
    out = {}
    prefixed = cfg.listener_ssl_values
    protocol = cfg.listener_security_protocol_map.get(listener, listener)
    for key in SSL_KEYS:
        pk = prefixed_key(listener, key)
        if pk in prefixed:
            out[key] = _plain(prefixed[pk])
        elif key == "ssl.client.auth" and protocol == "SASL_SSL":
            out[key] = "none"  # KIP-684: only the listener-prefixed key applies to SASL_SSL
        else:
            out[key] = _plain(cfg[key])
    return out


def source_key(cfg, listener, key):
    """The key an operator set for ``listener``: the prefixed one when it is in force, else the plain one."""
    pk = prefixed_key(listener, key)
    return pk if pk in cfg.listener_ssl_values else key


def _error(cfg, listener, e):
    key = source_key(cfg, listener, e.key)
    shown = cfg.listener_ssl_values.get(key) if key != e.key else cfg.get(e.key)
    if isinstance(shown, (list, tuple)):
        shown = ",".join(shown)
    spec = CONFIG_KEYS.get(e.key)
    if spec is not None and spec.type == "password" and shown is not None:
        shown = "[hidden]"
    return _invalid(key, shown, "%s (TLS of listener %s)" % (e.reason, listener))


def tls_listeners(cfg):
    """Names of the configured listeners whose protocol uses TLS."""
    pmap = cfg.listener_security_protocol_map
    return [l.name for l in cfg.listeners if pmap.get(l.name) in TLS_PROTOCOLS]


def mapper(cfg, listener):
    """The ssl.principal.mapping.rules of ``listener`` as a SslPrincipalMapper (InvalidRules when they do not
    parse; ``check`` has reported that at startup)."""
    return principal.SslPrincipalMapper(settings(cfg, listener)["ssl.principal.mapping.rules"])


def check(cfg):
    """Build what every TLS listener needs (module docstring); ConfigError naming the key on any problem. Returns
    [(key, reason)] of ssl.* keys set explicitly that no listener uses (no listener has TLS), to be warned about."""
    names = tls_listeners(cfg)
    if not names:
        return [(k, "no listener uses TLS (listener.security.protocol.map maps none to SSL or SASL_SSL)")
                for k in SSL_KEYS if cfg.is_set(k) and effect_of(CONFIG_KEYS[k])[0] == APPLIED]
    inter = cfg.inter_broker_listener
    for name in names:
        s = settings(cfg, name)
        try:
            tls.server_context(s)
            tls.check_hostname(s)
            if name == inter or name == cfg.control_plane_listener:
                tls.client_context(s)
        except tls.TlsSettingError as e:
            raise _error(cfg, name, e) from None
        try:
            principal.parse_rules(s["ssl.principal.mapping.rules"])
        except principal.InvalidRules as e:
            key = source_key(cfg, name, "ssl.principal.mapping.rules")
            raise _invalid(key, s["ssl.principal.mapping.rules"], str(e)) from None
    return []
