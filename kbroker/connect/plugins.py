"""Plugins: connectors, converters, header converters, transformations and predicates by name.

A name is resolved, in order (Kafka's DelegatingClassLoader + PluginUtils aliases, plus Python's ways):

1. a full class name of a built-in (``org.apache.kafka.connect.file.FileStreamSourceConnector``,
   ``org.apache.kafka.connect.json.JsonConverter``, ``org.apache.kafka.connect.transforms.InsertField$Value``) or of
   an entry point (its ``name``);
2. an alias: the simple name (``FileStreamSourceConnector``, ``JsonConverter``, ``InsertField$Value``) or the
   simple name without its kind's suffix (``FileStreamSource``, ``Json``), when exactly one plugin of that kind has
   it (an ambiguous alias is refused, naming the candidates, as Kafka does);
3. ``module:Class`` or ``package.module.Class``: imported (a Python class path, Kafka's ``connector.class`` with a
   Python spelling).

Entry points (``importlib.metadata``), groups: ``kbroker.connect.connectors``, ``kbroker.connect.converters``,
``kbroker.connect.header_converters``, ``kbroker.connect.transforms``, ``kbroker.connect.predicates``; an entry
point's name is the plugin's class name (use the Java-style full name if you want Kafka's aliases to work).
``plugin.path`` entries are put on ``sys.path`` first, so distributions and modules installed there are found.

A name that resolves nowhere raises ConfigError naming it ("Failed to find any class that implements Connector and
which name matches X", Kafka's wording).
"""
import importlib
import sys
import threading
from importlib import metadata

from kbroker.connect.exceptions import ConfigError

CONNECTOR, CONVERTER, HEADER_CONVERTER, TRANSFORMATION, PREDICATE = (
    "connector", "converter", "header_converter", "transformation", "predicate")

ENTRY_POINT_GROUPS = {
    CONNECTOR: "kbroker.connect.connectors",
    CONVERTER: "kbroker.connect.converters",
    HEADER_CONVERTER: "kbroker.connect.header_converters",
    TRANSFORMATION: "kbroker.connect.transforms",
    PREDICATE: "kbroker.connect.predicates",
}
_SUFFIX = {CONNECTOR: "Connector", CONVERTER: "Converter", HEADER_CONVERTER: "Converter",
           TRANSFORMATION: "", PREDICATE: ""}
_WHAT = {CONNECTOR: "Connector", CONVERTER: "Converter", HEADER_CONVERTER: "HeaderConverter",
         TRANSFORMATION: "Transformation", PREDICATE: "Predicate"}

_BUILTIN_CONNECTORS = {
    "org.apache.kafka.connect.file.FileStreamSourceConnector": "kbroker.connect.file:FileStreamSourceConnector",
    "org.apache.kafka.connect.file.FileStreamSinkConnector": "kbroker.connect.file:FileStreamSinkConnector",
}


def _k1_table(module, *names):
    """K1's tables of built-ins ({Kafka class name: class}); empty when that module is not there."""
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return {}
    out = {}
    for name in names:
        out.update(getattr(mod, name, None) or {})
    return out


def import_class(path):
    """``module:Class`` or ``package.module.Class`` -> the class; ImportError/AttributeError when missing."""
    if ":" in path:
        module, _, attr = path.partition(":")
    else:
        module, _, attr = path.rpartition(".")
        if not module:
            raise ImportError("not a class path: %s" % path)
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


class Plugins:
    """See the module docstring. Thread-safe; tables are built once, on first use."""

    def __init__(self, extra_paths=()):
        self.extra_paths = [str(p) for p in extra_paths if str(p).strip()]
        for p in reversed(self.extra_paths):
            if p not in sys.path:
                sys.path.insert(0, p)
        self._lock = threading.Lock()
        self._tables = None

    # -------------------------------------------------------------------------------------------------- tables
    def _load_tables(self):
        with self._lock:
            if self._tables is not None:
                return self._tables
            tables = {
                CONNECTOR: dict(_BUILTIN_CONNECTORS),
                CONVERTER: _k1_table("kbroker.connect.converters", "BUILTIN_CONVERTERS"),
                HEADER_CONVERTER: _k1_table("kbroker.connect.converters", "BUILTIN_HEADER_CONVERTERS",
                                            "BUILTIN_CONVERTERS"),
                TRANSFORMATION: _k1_table("kbroker.connect.transforms", "BUILTIN_TRANSFORMS"),
                PREDICATE: _k1_table("kbroker.connect.transforms", "BUILTIN_PREDICATES"),
            }
            try:
                eps = metadata.entry_points()
                for kind, group in ENTRY_POINT_GROUPS.items():
                    for ep in eps.select(group=group):
                        tables[kind].setdefault(ep.name, ep)
            except Exception as e:    # a broken distribution on the path must not stop the worker
                print("WARN cannot read entry points: %s" % e, file=sys.stderr)
            self._tables = tables
            return tables

    def _candidates(self, kind, name):
        table = self._load_tables()[kind]
        if name in table:
            return [name]
        suffix = _SUFFIX[kind]
        found = []
        for full in table:
            simple = full.rsplit(".", 1)[-1]
            pruned = simple[:-len(suffix)] if suffix and simple.endswith(suffix) and simple != suffix else None
            if name == simple or (pruned is not None and name == pruned):
                found.append(full)
        return found

    def _resolve(self, kind, name):
        if isinstance(name, type):
            return name
        name = str(name).strip()
        table = self._load_tables()[kind]
        found = self._candidates(kind, name)
        if len(found) > 1:
            raise ConfigError("%s is ambiguous: it matches %s; use the full class name" % (name, sorted(found)))
        if found:
            return self._materialise(table[found[0]])
        try:
            return import_class(name)
        except (ImportError, AttributeError, ValueError):
            pass
        raise ConfigError("Failed to find any class that implements %s and which name matches %s"
                          % (_WHAT[kind], name))

    @staticmethod
    def _materialise(entry):
        if isinstance(entry, type):
            return entry
        if isinstance(entry, str):
            return import_class(entry)
        try:
            return entry.load()     # an entry point
        except Exception as e:
            raise ConfigError("cannot load plugin %s (%s): %s" % (entry.name, entry.value, e)) from None

    # -------------------------------------------------------------------------------------------------- lookups
    def connector_class(self, name):
        return self._resolve(CONNECTOR, name)

    def converter_class(self, name):
        return self._resolve(CONVERTER, name)

    def header_converter_class(self, name):
        return self._resolve(HEADER_CONVERTER, name)

    def transformation_class(self, name):
        return self._resolve(TRANSFORMATION, name)

    def predicate_class(self, name):
        return self._resolve(PREDICATE, name)

    def class_name(self, kind, name):
        """The full name ``name`` resolves to among the known plugins of ``kind`` (itself when it is a class path)."""
        found = self._candidates(kind, str(name).strip())
        return found[0] if len(found) == 1 else str(name).strip()

    def connector_plugins(self):
        """[{"class", "type": "source"|"sink", "version"}] of every known connector, sorted by class."""
        out = []
        for full in sorted(self._load_tables()[CONNECTOR]):
            try:
                cls = self.connector_class(full)
                kind = connector_type_of(cls)
                version = cls().version()
            except Exception as e:      # one broken plugin must not hide the others
                print("WARN cannot load connector plugin %s: %s" % (full, e), file=sys.stderr)
                continue
            if kind != "unknown":
                out.append({"class": full, "type": kind, "version": str(version)})
        return out

    def plugin_names(self, kind):
        """Sorted full names of every known plugin of ``kind`` ("connector", "converter", "header_converter",
        "transformation", "predicate"): ``GET /connector-plugins?connectorsOnly=false``."""
        return sorted(self._load_tables()[kind])

    def connector_type(self, name):
        try:
            return connector_type_of(self.connector_class(name))
        except Exception:
            return "unknown"


def connector_type_of(cls):
    from kbroker.connect.api import SinkConnector, SourceConnector
    if isinstance(cls, type) and issubclass(cls, SourceConnector):
        return "source"
    if isinstance(cls, type) and issubclass(cls, SinkConnector):
        return "sink"
    return "unknown"
