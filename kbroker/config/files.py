"""File formats and string syntaxes: server.properties, YAML, --override, listeners, protocol maps."""
import re
from collections import namedtuple

from .values import ConfigError, _PROTOCOLS, _invalid


# --------------------------------------------------------------------------------------------------------------
# file formats


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s):
    out = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= n:
            break  # a lone trailing backslash vanishes, as in java.util.Properties
        c = s[i]
        if c == "u":
            hexdigits = s[i + 1:i + 5]
            if len(hexdigits) != 4 or not re.fullmatch(r"[0-9a-fA-F]{4}", hexdigits):
                raise ConfigError("Malformed \\uxxxx escape in %r" % s)
            out.append(chr(int(hexdigits, 16)))
            i += 5
            continue
        out.append(_ESCAPES.get(c, c))
        i += 1
    return "".join(out)


def _logical_lines(text):
    """Join continuation lines; skip blank and comment lines (a comment line never continues)."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(" \t\f")
            i += 1
        if _continues(line):
            line = line[:-1]
        yield line


def _continues(line):
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def parse_properties(text):
    """Parse java.util.Properties text into an ordered dict (later duplicates win)."""
    props = {}
    for line in _logical_lines(text):
        # the key ends at the first unescaped '=', ':' or whitespace
        i, n = 0, len(line)
        while i < n:
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c in "=: \t\f":
                break
            i += 1
        key = line[:i]
        # separator: optional whitespace, then at most one of '=' / ':', then optional whitespace
        j = i
        while j < n and line[j] in " \t\f":
            j += 1
        if j < n and line[j] in "=:":
            j += 1
            while j < n and line[j] in " \t\f":
                j += 1
        props[_unescape(key)] = _unescape(line[j:])
    return props


def flatten_mapping(mapping, prefix=""):
    """``{"log": {"retention": {"hours": 1}}}`` -> ``{"log.retention.hours": 1}``."""
    flat = {}
    for k, v in mapping.items():
        name = "%s.%s" % (prefix, k) if prefix else str(k)
        if isinstance(v, dict):
            flat.update(flatten_mapping(v, name))
        else:
            flat[name] = v
    return flat


def load_file(path):
    """Read a properties or YAML file into a flat {key: raw value} dict."""
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith((".yaml", ".yml")):
        import yaml

        try:
            doc = yaml.safe_load(data)
        except yaml.YAMLError as e:
            raise ConfigError("Cannot parse YAML config %s: %s" % (path, e)) from None
        if doc is None:
            return {}
        if not isinstance(doc, dict):
            raise ConfigError("YAML config %s must be a mapping of Kafka config keys" % path)
        return flatten_mapping(doc)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    return parse_properties(text)


def parse_override(s):
    """``key=value`` (split on the first '='; Kafka splits on every '=' and refuses values containing one)."""
    key, sep, value = s.partition("=")
    if not sep or not key.strip():
        raise ConfigError("Invalid override %r: expected key=value" % s)
    return key.strip(), value


# --------------------------------------------------------------------------------------------------------------
# listeners

Listener = namedtuple("Listener", "name host port")

_LISTENER_RE = re.compile(r"([A-Za-z0-9_]+)://(\[[0-9A-Fa-f:.]+\]|[^:/\[\]]*):(-?\d+)")


def parse_listeners(key, value):
    """``PLAINTEXT://:9092,SSL://[::1]:9093`` -> [Listener("PLAINTEXT", "", 9092), Listener("SSL", "::1", 9093)]."""
    out = []
    if value is None:
        return out
    for item in (p.strip() for p in value.split(",")):
        if not item:
            continue
        m = _LISTENER_RE.fullmatch(item)
        if not m:
            raise _invalid(key, value, "%r is not NAME://host:port (e.g. PLAINTEXT://:9092)" % item)
        name, host, port = m.group(1).upper(), m.group(2), int(m.group(3))
        if host.startswith("["):
            host = host[1:-1]
        if not 0 <= port <= 65535:
            raise _invalid(key, value, "port %d of %r is not in [0,...,65535]" % (port, item))
        if any(l.name == name for l in out):
            raise _invalid(key, value, "listener name %s appears more than once" % name)
        out.append(Listener(name, host, port))
    return out


def parse_protocol_map(key, value):
    out = {}
    for item in (p.strip() for p in (value or "").split(",")):
        if not item:
            continue
        name, sep, proto = item.partition(":")
        name, proto = name.strip().upper(), proto.strip().upper()
        if not sep or not name or proto not in _PROTOCOLS:
            raise _invalid(key, value, "%r must be NAME:PROTOCOL with PROTOCOL one of [%s]"
                           % (item, ", ".join(_PROTOCOLS)))
        out[name] = proto
    return out


_ZK_CONNECT = re.compile(r"[^,/\s]+:\d+(,[^,/\s]+:\d+)*(/[^\s]*)?")
