"""BrokerConfig: the typed, validated broker configuration and its derived values."""
import logging
import os
import socket

from kbroker.security.acl import AUTHORIZER_CLASSES, principal_error

from . import listener_sasl, listener_ssl
from .files import Listener, _ZK_CONNECT, load_file, parse_listeners, parse_override, parse_protocol_map
from .keys import CONFIG_KEYS, NO_EFFECT, REFUSED_UNLESS_DEFAULT, _KEYS, effect_of, is_default
from .values import ConfigError, Password, _invalid, format_default, format_value, parse_value


log = logging.getLogger("kbroker.config")


def _parse_ip_overrides(raw):
    """"host:count,[v6addr]:count" -> {address: count}; ConfigError naming max.connections.per.ip.overrides."""
    key = "max.connections.per.ip.overrides"
    out = {}
    for entry in (raw or "").split(","):
        entry = entry.strip()
        if not entry:
            continue
        host, sep, count = entry.rpartition(":")
        host = host.strip()
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        try:
            n = int(count.strip())
        except ValueError:
            n = -1
        if not sep or not host or n < 0:
            raise _invalid(key, raw, "expected a comma list of host:count with count >= 0, got %r" % entry)
        try:
            infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except (OSError, UnicodeError) as e:
            raise _invalid(key, raw, "cannot resolve host %r: %s" % (host, e))
        for info in infos:
            out[info[4][0]] = n
    return out


# --------------------------------------------------------------------------------------------------------------
# the config object


class BrokerConfig:
    """Typed broker config. ``cfg["log.segment.bytes"]``, ``cfg.get(key, default)``, derived helpers below.

    ``sources[key]`` is "default", "file" or "override" (for --check-config); ``unknown`` holds unknown keys with
    their raw values; ``originals`` the explicitly supplied raw values of known keys; ``no_effect`` the
    [(key, reason)] of keys set explicitly that kbroker accepts without effect (logged once as warnings).

    Construction fails closed: a value out of range, a listener whose security protocol is not PLAINTEXT, or a
    non-default value of a key kbroker cannot honour (``effect`` in keys.py) raises ConfigError naming the key.
    """

    def __init__(self, props=None, sources=None):
        self._values = {}
        self.sources = {}
        self.originals = {}
        self.unknown = {}
        props = dict(props or {})
        sources = sources or {}
        # listener.name.<l>.ssl.* keys are known keys of one listener (config/listener_ssl.py checks them)
        self.listener_ssl_values = {}
        self._listener_ssl_props = {n: r for n, r in props.items() if listener_ssl.is_listener_ssl_key(n)}
        self._listener_ssl_sources = {n: sources.get(n, "file") for n in self._listener_ssl_props}
        # listener.name.<l>.sasl.enabled.mechanisms / .<mechanism>.sasl.jaas.config (config/listener_sasl.py)
        self.listener_sasl_values = {n: r for n, r in props.items() if listener_sasl.is_listener_sasl_key(n)}
        self._listener_sasl_sources = {n: sources.get(n, "file") for n in self.listener_sasl_values}
        for name, raw in props.items():
            if (name not in CONFIG_KEYS and name not in self._listener_ssl_props
                    and name not in self.listener_sasl_values):
                self.unknown[name] = raw
        for name in sorted(self.unknown):
            log.warning("The configuration '%s' was supplied but isn't a known config.", name)
        for key in _KEYS:
            if key.name in props:
                raw = props[key.name]
                self.originals[key.name] = raw
                self.sources[key.name] = sources.get(key.name, "file")
                if isinstance(raw, str) and raw.strip() == "" and key.default is None:
                    raw = None  # "log.retention.ms=" means unset, like Kafka's null default
                self._values[key.name] = parse_value(key.name, key.type, raw, key.validator)
            else:
                self.sources[key.name] = "default"
                d = key.default
                self._values[key.name] = list(d) if isinstance(d, list) else d
        self._validate()
        self.no_effect = self._check_effects() + self._listener_ssl_inert
        for name, reason in self.no_effect:
            log.warning("The configuration '%s' has no effect in kbroker: %s", name, reason)

    # -- construction ---------------------------------------------------------------------------------------------

    @classmethod
    def from_sources(cls, path=None, overrides=()):
        props, sources = {}, {}
        if path is not None:
            if not os.path.exists(path):
                raise ConfigError("Config file %s does not exist" % path)
            for k, v in load_file(path).items():
                props[k] = v
                sources[k] = "file"
        for s in overrides or ():
            k, v = parse_override(s)
            props[k] = v
            sources[k] = "override"
        return cls(props, sources)

    @classmethod
    def from_dict(cls, props):
        return cls(props, {k: "override" for k in props})

    # -- access ---------------------------------------------------------------------------------------------------

    def __getitem__(self, key):
        try:
            return self._values[key]
        except KeyError:
            raise KeyError("unknown config key %r" % key) from None

    def __contains__(self, key):
        return key in self._values

    def get(self, key, default=None):
        return self._values.get(key, default)

    def items(self):
        return self._values.items()

    def is_set(self, key):
        """True when the key was given explicitly (file or override)."""
        return self.sources.get(key, "default") != "default"

    def set_dynamic(self, values, sources):
        """Dynamic broker configs (KIP-226, kbroker/config/dynamic.py): ``values`` {key: typed value} replace the
        static ones, ``sources[key]`` is "dynamic-broker" or "dynamic-default"; a key dynamic before and absent now
        returns to its static value and source. Returns the set of keys whose value changed."""
        if not hasattr(self, "_static"):
            self._static = {}      # key -> (value, source) before its first dynamic value
        changed = set()
        for key in [k for k in self._static if k not in values]:
            value, source = self._static.pop(key)
            if self._values[key] != value:
                changed.add(key)
            self._values[key], self.sources[key] = value, source
        for key, value in values.items():
            if key not in self._static:
                self._static[key] = (self._values[key], self.sources[key])
            if self._values[key] != value:
                changed.add(key)
            self._values[key], self.sources[key] = value, sources[key]
        return changed

    def static_value(self, key):
        """(value, source) of ``key`` without its dynamic layers: "default", "file" or "override"."""
        held = getattr(self, "_static", {}).get(key)
        return held if held is not None else (self._values[key], self.sources[key])

    def describe(self):
        """[(key, string value, source)] sorted by key; passwords hidden (for --check-config)."""
        rows = []
        for name in sorted(self._values):
            v = self._values[name]
            shown = "[hidden]" if isinstance(v, Password) else format_value(v)
            rows.append((name, shown, self.sources[name]))
        for name, v in sorted(self.listener_ssl_values.items()):
            shown = "[hidden]" if isinstance(v, Password) else format_value(v)
            rows.append((name, shown, self._listener_ssl_sources[name]))
        for name, v in sorted(self.listener_sasl_values.items()):   # a sasl.jaas.config value holds passwords
            rows.append((name, "[hidden]" if name.endswith(".sasl.jaas.config") else str(v),
                         self._listener_sasl_sources[name]))
        return sorted(rows)

    # -- derived values -------------------------------------------------------------------------------------------

    @property
    def log_dirs(self):
        raw = self["log.dirs"] if self["log.dirs"] is not None else self["log.dir"]
        return [p.strip() for p in raw.split(",") if p.strip()]

    @property
    def retention_ms(self):
        """log.retention.ms > minutes > hours; any negative value = -1 (unlimited)."""
        if self["log.retention.ms"] is not None:
            ms = self["log.retention.ms"]
        elif self["log.retention.minutes"] is not None:
            ms = self["log.retention.minutes"] * 60000
        else:
            ms = self["log.retention.hours"] * 3600000
        return -1 if ms < 0 else ms

    @property
    def roll_ms(self):
        if self["log.roll.ms"] is not None:
            return self["log.roll.ms"]
        return self["log.roll.hours"] * 3600000

    @property
    def roll_jitter_ms(self):
        if self["log.roll.jitter.ms"] is not None:
            return self["log.roll.jitter.ms"]
        return self["log.roll.jitter.hours"] * 3600000

    @property
    def flush_interval_ms(self):
        v = self["log.flush.interval.ms"]
        return v if v is not None else self["log.flush.scheduler.interval.ms"]

    @property
    def zk_connection_timeout_ms(self):
        v = self["zookeeper.connection.timeout.ms"]
        return v if v is not None else self["zookeeper.session.timeout.ms"]

    @property
    def listener_security_protocol_map(self):
        return parse_protocol_map("listener.security.protocol.map", self["listener.security.protocol.map"])

    @property
    def listeners(self):
        if self["listeners"] is not None and self["listeners"].strip():
            return parse_listeners("listeners", self["listeners"])
        return [Listener("PLAINTEXT", self["host.name"] or "", self["port"])]

    @property
    def advertised_listeners(self):
        """Published endpoints; an empty or wildcard-less empty host becomes this machine's name."""
        if self["advertised.listeners"] is not None and self["advertised.listeners"].strip():
            eps = parse_listeners("advertised.listeners", self["advertised.listeners"])
        elif not self.is_set("listeners") and (self["advertised.host.name"] is not None
                                               or self["advertised.port"] is not None):
            host = self["advertised.host.name"] if self["advertised.host.name"] is not None else self["host.name"]
            port = self["advertised.port"] if self["advertised.port"] is not None else self["port"]
            eps = [Listener("PLAINTEXT", host, port)]
        else:
            eps = self.listeners
        return [Listener(l.name, l.host or socket.getfqdn(), l.port) for l in eps]

    @property
    def inter_broker_listener(self):
        """Listener name brokers use to reach each other: inter.broker.listener.name, else the first listener
        whose security protocol is security.inter.broker.protocol (Kafka's rule)."""
        if self["inter.broker.listener.name"]:
            return self["inter.broker.listener.name"].strip().upper()  # listener names are upper case (files.py)
        pmap = self.listener_security_protocol_map
        want = self["security.inter.broker.protocol"]
        for l in self.listeners:
            if pmap.get(l.name, l.name) == want:
                return l.name
        return self.listeners[0].name

    @property
    def control_plane_listener(self):
        """control.plane.listener.name (KIP-291), or None: controller requests on any listener."""
        v = (self["control.plane.listener.name"] or "").strip().upper()
        return v or None

    @property
    def embedded(self):
        return not (self["zookeeper.connect"] or "").strip()

    @property
    def security_protocol_of(self):
        """Listener name -> security protocol, for the configured listeners."""
        m = self.listener_security_protocol_map
        return {l.name: m[l.name] for l in self.listeners}

    @property
    def max_connections_per_ip_overrides(self):
        """``max.connections.per.ip.overrides`` ("host:count,host:count") as {IP address string: count}. A host name
        stands for every address it resolves to (at startup, like Kafka); IPv6 addresses may be bracketed."""
        cached = getattr(self, "_ip_overrides", None)
        if cached is None:
            cached = self._ip_overrides = _parse_ip_overrides(self["max.connections.per.ip.overrides"])
        return cached

    @property
    def socket_buffer_sizes(self):
        """{"SO_SNDBUF": bytes, "SO_RCVBUF": bytes} for socket.send/receive.buffer.bytes set explicitly to > 0.

        Kafka's default (102400) is deliberately not applied: setting SO_RCVBUF/SO_SNDBUF switches off Linux's buffer
        autotuning (tcp_rmem/tcp_wmem grow a busy connection's buffers to MiBs), and a fixed 100 KiB buffer caps a
        connection at ~100 KiB per round trip. -1 (Kafka: OS default) applies nothing either."""
        out = {}
        for key, opt in (("socket.send.buffer.bytes", "SO_SNDBUF"), ("socket.receive.buffer.bytes", "SO_RCVBUF")):
            if self.is_set(key) and self[key] > 0:
                out[opt] = self[key]
        return out

    @property
    def request_memory_bytes(self):
        """``queued.max.request.bytes`` when it sets a bound (> 0), else None: Kafka's default -1 is unbounded, and
        the server then keeps its own bound (``kbroker/server/limits.py``: max(256 MiB, socket.request.max.bytes)),
        so a hostile peer can never make it allocate without limit."""
        v = self["queued.max.request.bytes"]
        return v if v > 0 else None

    # -- cross-key validation --------------------------------------------------------------------------------------

    def _validate(self):
        pmap = self.listener_security_protocol_map
        listeners = self.listeners
        for l in listeners:
            if l.name not in pmap:
                raise _invalid("listeners", self["listeners"],
                               "listener name %s is not in listener.security.protocol.map (%s)"
                               % (l.name, ", ".join(sorted(pmap))))
        self._check_listener_protocols(pmap, listeners)
        self.listener_ssl_values, self._listener_ssl_inert = listener_ssl.parse_prefixed(
            self._listener_ssl_props, listeners, pmap)
        names = {l.name for l in listeners}
        if self["advertised.listeners"] is not None and self["advertised.listeners"].strip():
            adv = parse_listeners("advertised.listeners", self["advertised.listeners"])
            for l in adv:
                if l.name not in names:
                    raise _invalid("advertised.listeners", self["advertised.listeners"],
                                   "listener name %s is not one of listeners (%s)" % (l.name, ", ".join(sorted(names))))
                if l.host == "0.0.0.0":
                    raise _invalid("advertised.listeners", self["advertised.listeners"],
                                   "0.0.0.0 is not a routable address; name a host clients can reach")
        elif any(l.host in ("0.0.0.0", "::") for l in listeners):
            raise _invalid("advertised.listeners", None,
                           "must be set when listeners binds the wildcard address (%s); clients cannot connect to "
                           "0.0.0.0" % self["listeners"])
        ibl = self["inter.broker.listener.name"]
        if ibl is not None and ibl.upper() not in names:
            raise _invalid("inter.broker.listener.name", ibl,
                           "must be one of the listeners (%s)" % ", ".join(sorted(names)))
        cpl = self.control_plane_listener
        if cpl is not None and cpl not in names:
            raise _invalid("control.plane.listener.name", cpl,
                           "must be one of the listeners (%s)" % ", ".join(sorted(names)))
        if cpl is not None and cpl == self.inter_broker_listener.upper():
            raise _invalid("control.plane.listener.name", cpl,
                           "must differ from the inter-broker listener (%s), as in Kafka" % self.inter_broker_listener)
        self._check_inter_broker_protocol(pmap, listeners)
        # every TLS listener's keystore, truststore, protocols, ciphers and rules; ssl.* keys no listener uses
        self._listener_ssl_inert += listener_ssl.check(self)
        listener_sasl.check(self)  # every SASL listener's mechanisms and JAAS entries
        bid = self["broker.id"]
        if bid < 0 and not self["broker.id.generation.enable"]:
            raise _invalid("broker.id", bid, "must be >= 0 when broker.id.generation.enable is false")
        if bid >= 0 and self["broker.id.generation.enable"] and bid > self["reserved.broker.max.id"]:
            raise _invalid("broker.id", bid, "must be <= reserved.broker.max.id (%d) while broker.id.generation."
                           "enable is true" % self["reserved.broker.max.id"])
        if not self.log_dirs:
            raise _invalid("log.dirs", self["log.dirs"], "at least one directory is required")
        zk = (self["zookeeper.connect"] or "").strip()
        if zk and not _ZK_CONNECT.fullmatch(zk):
            raise _invalid("zookeeper.connect", zk, "expected host:port[,host:port...][/chroot], or empty for embedded")
        if not zk and self["zookeeper.set.acl"]:
            raise _invalid("zookeeper.set.acl", self.originals["zookeeper.set.acl"], "needs zookeeper.connect: the "
                           "embedded coordination backend lives inside the broker and has no ZooKeeper clients to "
                           "keep out, so there are no znode ACLs to set")
        self._check_authorizer()
        self.max_connections_per_ip_overrides  # parses and resolves: a bad entry stops startup naming the key
        if self["max.connections.per.ip"] == 0 and not self.max_connections_per_ip_overrides:
            raise _invalid("max.connections.per.ip", 0,
                           "can be 0 only when max.connections.per.ip.overrides is set (Kafka's rule)")
        qb = self["queued.max.request.bytes"]
        if 0 < qb < self["socket.request.max.bytes"]:
            raise _invalid("queued.max.request.bytes", qb, "must be <= 0 (unbounded in Kafka) or >= "
                           "socket.request.max.bytes (%d), so that one maximal request fits"
                           % self["socket.request.max.bytes"])
        for key in ("socket.send.buffer.bytes", "socket.receive.buffer.bytes", "replica.socket.receive.buffer.bytes"):
            if self[key] == 0:
                raise _invalid(key, self.originals[key], "must be -1 (the OS default) or > 0 bytes")
        if self["group.min.session.timeout.ms"] > self["group.max.session.timeout.ms"]:
            raise _invalid("group.min.session.timeout.ms", self["group.min.session.timeout.ms"],
                           "must be <= group.max.session.timeout.ms (%d)" % self["group.max.session.timeout.ms"])

    def _check_authorizer(self):
        """authorizer.class.name selects the ACL authorizer (acl.AUTHORIZER_CLASSES) or nothing; an unknown class
        would otherwise leave every resource open. super.users entries must be principals (``Type:name``)."""
        cls = (self["authorizer.class.name"] or "").strip()
        if cls and cls not in AUTHORIZER_CLASSES:
            raise _invalid("authorizer.class.name", cls, "kbroker provides only the ACL authorizer (%s) or none "
                           "(empty)" % ", ".join(AUTHORIZER_CLASSES))
        for principal in (self["super.users"] or "").split(";"):
            if principal.strip() and principal_error(principal.strip()):
                raise _invalid("super.users", self["super.users"], principal_error(principal.strip()))

    @property
    def authorizer_class(self):
        """The ACL authorizer's class name when one is configured, else None."""
        return (self["authorizer.class.name"] or "").strip() or None

    def _check_inter_broker_protocol(self, pmap, listeners):
        """A security.inter.broker.protocol set explicitly names the protocol of some listener, and of the
        inter.broker.listener.name when both are set (Kafka refuses both set at all; kbroker accepts them when they
        agree): brokers would otherwise talk to each other with other security than the operator asked for."""
        if not self.is_set("security.inter.broker.protocol"):
            return
        want = self["security.inter.broker.protocol"]
        ibl = self["inter.broker.listener.name"]
        if ibl and pmap.get(ibl.strip().upper()) != want:
            raise _invalid("security.inter.broker.protocol", want, "inter.broker.listener.name=%s is %s; set only one "
                           "of the two, as Kafka requires" % (ibl, pmap.get(ibl.strip().upper())))
        if not any(pmap.get(l.name) == want for l in listeners):
            raise _invalid("security.inter.broker.protocol", want, "no listener has security protocol %s (listeners:"
                           " %s)" % (want, ", ".join("%s=%s" % (l.name, pmap.get(l.name)) for l in listeners)))

    def _check_listener_protocols(self, pmap, listeners):
        """Fail closed: a listener mapped to SASL_* would otherwise be served as PLAINTEXT. The error names
        listeners (or listener.security.protocol.map when only the map makes a listener secure) and its value.
        SSL listeners are served with TLS (config/listener_ssl.py checks their settings)."""
        for l in listeners:
            proto = pmap[l.name]
            if proto in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
                continue
            key = "listeners" if self.is_set("listeners") else "listener.security.protocol.map"
            raise _invalid(key, self[key], "listener %s has security protocol %s (listener.security.protocol.map), "
                           "which kbroker does not serve; map it to PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
                           % (l.name, proto))

    def _check_effects(self):
        """Apply the ``effect`` column of the key table; returns [(key, reason)] of set keys without effect.

        A "refused-unless-default" key whose value differs from its default raises ConfigError naming it (the raw
        value as given, passwords hidden). A "no-effect" key is reported whenever it is set, whatever its value:
        its default is no more honoured than any other value."""
        inert = []
        for key in _KEYS:
            if not self.is_set(key.name):
                continue
            kind, reason = effect_of(key)
            value = self._values[key.name]
            if kind == REFUSED_UNLESS_DEFAULT and not is_default(key, value):
                shown = value if isinstance(value, Password) else self.originals[key.name]
                raise _invalid(key.name, shown, "only the default (%s) is accepted: %s"
                               % (format_default(key.default), reason))
            if kind == NO_EFFECT:
                inert.append((key.name, reason))
        return inert
