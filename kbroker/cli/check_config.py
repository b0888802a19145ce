"""``kbroker-server --check-config FILE``: every key's fate, without starting anything.

The report (stdout) has one line per key, grouped by status in this order, keys sorted within a group:

    error      <key>=<value>  (<source>) <what is wrong>      the value is invalid, or refused (keys.py effect)
    unknown    <key>=<value>  (<source>)                      not a kbroker/Kafka broker key: ignored, as Kafka does
    ignored    <key>=<value>  (<source>) no effect: <reason>  accepted for compatibility, does nothing in kbroker
    used       <key>=<value>  (<source>)                      set, and it takes effect
    defaulted  <key>=<value>                                  not set: the default (shown) is in force

then ``summary: errors=N unknown=N ignored=N used=N defaulted=N``. ``<source>`` is ``file`` or ``override``
(--override); values are the effective typed values in Kafka's string form (lists comma-joined, ``null`` for
unset), passwords and JAAS entries ``[hidden]``. Every key is checked on its own first (so a broken file lists all
its bad keys, not just the first); when none is bad, the whole configuration is built exactly as startup builds it
(kbroker/config/broker.py), so the cross-key rules (listeners, advertised.listeners, TLS stores, SASL entries) are
checked too and a failure is reported as an error line on the key it names. Building it also logs the startup's
WARNING lines (unknown keys, keys without effect, by name) on stderr. A key set to a refused value is an error
even when its effect is otherwise "refused unless default" (startup would stop on it).

Exit code: 1 when there is an error (or the file cannot be read), else 0 -- unknown and ignored keys do not stop
startup, so they do not fail the check either.
"""
import sys

from kbroker.config import BrokerConfig, ConfigError, listener_sasl, listener_ssl
from kbroker.config.files import load_file, parse_override
from kbroker.config.keys import CONFIG_KEYS, KEYS, NO_EFFECT, REFUSED_UNLESS_DEFAULT, effect_of, is_default
from kbroker.config.values import Password, format_default, format_value, parse_value

ERROR, UNKNOWN, IGNORED, USED, DEFAULTED = "error", "unknown", "ignored", "used", "defaulted"
ORDER = (ERROR, UNKNOWN, IGNORED, USED, DEFAULTED)
_SECRET_WORDS = ("password", "secret", "jaas", "keystore.key", "certificate")


def _shown(value):
    if isinstance(value, Password):
        return "[hidden]"
    s = format_value(value)
    return "null" if s is None else s


def _raw_shown(name, raw):
    if any(w in name for w in _SECRET_WORDS):
        return "[hidden]"
    return "null" if raw is None else str(raw)


def _read(path, overrides):
    """({key: raw}, {key: source}); ConfigError / OSError for an unreadable file or a malformed override."""
    props, sources = {}, {}
    if path is not None:
        import os
        if not os.path.exists(path):
            raise ConfigError("Config file %s does not exist" % path)
        for k, v in load_file(path).items():
            props[k], sources[k] = v, "file"
    for s in overrides or ():
        k, v = parse_override(s)
        props[k], sources[k] = v, "override"
    return props, sources


def classify(props, sources):
    """{key: (status, shown value, source or None, note)} for every key of the table and every key given."""
    rows = {}
    for name, raw in props.items():
        src = sources.get(name, "file")
        if listener_ssl.is_listener_ssl_key(name) or listener_sasl.is_listener_sasl_key(name):
            rows[name] = (USED, _raw_shown(name, raw), src, "")
            continue
        key = CONFIG_KEYS.get(name)
        if key is None:
            rows[name] = (UNKNOWN, _raw_shown(name, raw), src, "")
            continue
        hidden = "[hidden]" if key.type == "password" else None
        value_raw = None if isinstance(raw, str) and raw.strip() == "" and key.default is None else raw
        try:
            value = parse_value(name, key.type, value_raw, key.validator)
        except ConfigError as e:
            rows[name] = (ERROR, hidden or _raw_shown(name, raw), src, str(e))
            continue
        kind, reason = effect_of(key)
        if kind == REFUSED_UNLESS_DEFAULT and not is_default(key, value):
            rows[name] = (ERROR, hidden or _shown(value), src,
                          "only the default (%s) is accepted: %s" % (format_default(key.default), reason))
        elif kind == NO_EFFECT:
            rows[name] = (IGNORED, hidden or _shown(value), src, "no effect: %s" % reason)
        else:
            rows[name] = (USED, hidden or _shown(value), src, "")
    for key in KEYS:
        if key.name not in rows:
            rows[key.name] = (DEFAULTED, _shown(key.default), None, "")
    return rows


def check(props, sources):
    """(rows, exit code): ``classify`` plus, when no key is bad on its own, the whole configuration built as at
    startup (its ConfigError becomes an error line on the key it names; its no-effect findings for prefixed
    listener keys turn them to ignored)."""
    rows = classify(props, sources)
    if not any(r[0] == ERROR for r in rows.values()):
        try:
            cfg = BrokerConfig(props, sources)
        except ConfigError as e:
            name = e.key if e.key in rows else "(configuration)"
            status, shown, src, _ = rows.get(name, (ERROR, "", None, ""))
            rows[name] = (ERROR, shown, src, str(e))
        else:
            for name, reason in cfg.no_effect:
                status, shown, src, _ = rows[name]
                if status == USED:
                    rows[name] = (IGNORED, shown, src, "no effect: %s" % reason)
    errors = sum(1 for r in rows.values() if r[0] == ERROR)
    return rows, (1 if errors else 0)


def format_report(rows):
    lines = []
    for status in ORDER:
        for name in sorted(n for n, r in rows.items() if r[0] == status):
            _, shown, src, note = rows[name]
            line = "%-10s %s=%s" % (status, name, shown)
            if src:
                line += "  (%s)" % src
            if note:
                line += " " + note
            lines.append(line)
    counts = {s: sum(1 for r in rows.values() if r[0] == s) for s in ORDER}
    lines.append("summary: " + " ".join("%s=%d" % ("errors" if s == ERROR else s, counts[s]) for s in ORDER))
    return "\n".join(lines)


def run(path, overrides=(), out=None):
    """The --check-config command: prints the report; returns the exit code."""
    out = out or sys.stdout
    try:
        props, sources = _read(path, overrides)
    except (ConfigError, OSError) as e:
        print("%-10s %s" % (ERROR, e), file=out)
        print("summary: errors=1 unknown=0 ignored=0 used=0 defaulted=0", file=out)
        return 1
    rows, code = check(props, sources)
    print(format_report(rows), file=out)
    return code
