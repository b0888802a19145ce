"""Kafka's znode paths and JSON payloads, one small codec per znode kind.

Every ``encode`` returns compact UTF-8 JSON (separators ``,`` and ``:``), with keys in the order Kafka's own
writers produce them (readers must not depend on order; Kafka's do not). ``decode`` accepts every version Kafka
has written for that node, so trees written by real Kafka brokers and tools (kafka-topics.sh, Streams 0.10.1)
read back correctly. Shapes (kafka-digest.md E.1):

=============================================  ==========================================================================
``/brokers/ids/<id>`` (ephemeral)               ``{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},
                                                "endpoints":["PLAINTEXT://h:9092"],"jmx_port":-1,"host":"h",
                                                "timestamp":"<ms>","port":9092,"version":4[,"rack":"r1"]}``;
                                                host/port = the first PLAINTEXT endpoint, else null/-1
``/brokers/topics/<t>``                         ``{"version":1,"partitions":{"0":[1,2]}}`` (0.10.1 shape)
``/brokers/topics/<t>/partitions/<p>/state``    ``{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}``
``/config/<type>/<name>``                       ``{"version":1,"config":{"k":"v"}}`` (values are strings)
``/config/changes/config_change_<seq>``         ``{"version":2,"entity_path":"topics/t"}`` (v1: entity_type/entity_name)
``/controller`` (ephemeral)                     ``{"version":1,"brokerid":1,"timestamp":"<ms>"}``
``/controller_epoch``                           ``3`` (decimal text)
``/cluster/id``                                 ``{"version":"1","id":"<22-char url-safe base64 UUID>"}``
``/admin/delete_topics/<t>``                    empty
``/isr_change_notification/isr_change_<seq>``  ``{"version":1,"partitions":[{"topic":"t","partition":0}]}``
``/consumers/<g>/offsets/<t>/<p>``              ``42`` (decimal text; OffsetCommit v0)
``/brokers/seqid``                              empty; its data version after a blind set is the sequence
=============================================  ==========================================================================
"""

import base64
import json
import time
import uuid
from collections import namedtuple

from .backend import join


def _json(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _load(data):
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = bytes(data).decode("utf-8")
    return json.loads(data)


def _now_ms():
    return int(time.time() * 1000)


def _config_str(v):
    """Config values are stored as Kafka's strings."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    return str(v)


def _format_address(host, port):
    host = host or ""
    return "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)


def _parse_endpoint(s):
    """``NAME://host:port`` / ``NAME://[::1]:port`` -> (NAME, host, port)."""
    name, sep, rest = s.partition("://")
    if not sep:
        raise ValueError("bad endpoint %r" % s)
    host, _, port = rest.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return name, host, int(port)


# --------------------------------------------------------------------------------------------------------------

BrokerRegistration = namedtuple(
    "BrokerRegistration", "endpoints security_protocol_map host port jmx_port timestamp rack version")
BrokerRegistration.__doc__ = "Decoded /brokers/ids/<id>: endpoints = [(listener name, host, port)]."


class BrokerIdsZNode:
    @staticmethod
    def path():
        return "/brokers/ids"


class BrokerIdZNode:
    VERSION = 4

    @staticmethod
    def path(broker_id):
        return "/brokers/ids/%d" % broker_id

    @classmethod
    def encode(cls, endpoints, security_protocol_map, rack=None, jmx_port=-1, timestamp_ms=None):
        """endpoints: [(listener name, host, port)]; security_protocol_map: {listener name: protocol}."""
        eps = [(n, h, p) for n, h, p in endpoints]
        plaintext = next(((h, p) for n, h, p in eps if security_protocol_map.get(n, n) == "PLAINTEXT"), (None, -1))
        obj = {
            # Like Kafka: the map covers exactly the registered endpoints, in endpoint order.
            "listener_security_protocol_map": {n: security_protocol_map.get(n, n) for n, _, _ in eps},
            "endpoints": ["%s://%s" % (n, _format_address(h, p)) for n, h, p in eps],
            "jmx_port": jmx_port,
            "host": plaintext[0],
            "timestamp": str(_now_ms() if timestamp_ms is None else timestamp_ms),
            "port": plaintext[1],
            "version": cls.VERSION,
        }
        if rack is not None:
            obj["rack"] = rack
        return _json(obj)

    @staticmethod
    def decode(data):
        obj = _load(data)
        version = obj.get("version", 1)
        pmap = dict(obj.get("listener_security_protocol_map") or {})
        eps = []
        for s in obj.get("endpoints") or []:
            name, host, port = _parse_endpoint(s)
            eps.append((name, host, port))
            pmap.setdefault(name, name)  # before v4 the listener name *was* the protocol
        if not eps and obj.get("host") is not None:
            eps.append(("PLAINTEXT", obj["host"], obj.get("port", -1)))  # version 1: host/port only
            pmap.setdefault("PLAINTEXT", "PLAINTEXT")
        ts = obj.get("timestamp")
        return BrokerRegistration(eps, pmap, obj.get("host"), obj.get("port", -1), obj.get("jmx_port", -1),
                                  int(ts) if ts is not None else None, obj.get("rack"), version)


class BrokerSequenceIdZNode:
    @staticmethod
    def path():
        return "/brokers/seqid"


# --------------------------------------------------------------------------------------------------------------


class TopicsZNode:
    @staticmethod
    def path():
        return "/brokers/topics"


class TopicZNode:
    @staticmethod
    def path(topic):
        return "/brokers/topics/" + topic

    @staticmethod
    def encode(assignment):
        """{partition id: [replica broker ids]} -> 0.10.1 JSON, partitions in numeric order."""
        parts = {str(p): [int(b) for b in assignment[p]] for p in sorted(assignment, key=int)}
        return _json({"version": 1, "partitions": parts})

    @staticmethod
    def decode(data):
        """-> {partition id: [replicas]}; later versions' extra fields (topic_id, adding_replicas...) ignored."""
        obj = _load(data)
        return {int(p): list(r) for p, r in sorted(obj.get("partitions", {}).items(), key=lambda kv: int(kv[0]))}


class TopicPartitionsZNode:
    @staticmethod
    def path(topic):
        return "/brokers/topics/%s/partitions" % topic


class TopicPartitionZNode:
    @staticmethod
    def path(topic, partition):
        return "/brokers/topics/%s/partitions/%d" % (topic, partition)


PartitionState = namedtuple("PartitionState", "leader leader_epoch isr controller_epoch zk_version")
PartitionState.__new__.__defaults__ = (-1,)
PartitionState.__doc__ = "Decoded partition state; zk_version = data version of the state node (-1 if unknown)."


class TopicPartitionStateZNode:
    @staticmethod
    def path(topic, partition):
        return "/brokers/topics/%s/partitions/%d/state" % (topic, partition)

    @staticmethod
    def encode(leader, leader_epoch, isr, controller_epoch):
        """The bytes ``_json`` makes of {"controller_epoch", "leader", "version": 1, "leader_epoch", "isr"} (Kafka's
        key order), formatted directly: a broker failure writes one per partition it touched, 20,000 at 30,000
        partitions x RF 2, and ``json.dumps`` cost ~6 us each there against ~1 us
        (tests/unit/test_coord.py compares the two)."""
        return b'{"controller_epoch":%d,"leader":%d,"version":1,"leader_epoch":%d,"isr":[%s]}' % (
            int(controller_epoch), int(leader), int(leader_epoch), b",".join([b"%d" % int(b) for b in isr]))

    @staticmethod
    def decode(data, zk_version=-1):
        obj = _load(data)
        return PartitionState(obj["leader"], obj["leader_epoch"], list(obj["isr"]), obj["controller_epoch"],
                              zk_version)


# --------------------------------------------------------------------------------------------------------------


class ConfigEntityTypeZNode:
    @staticmethod
    def path(entity_type):
        return "/config/" + entity_type


class ConfigEntityZNode:
    """``/config/topics/<t>``, ``/config/clients/<id>``, ``/config/brokers/<id>``, ``/config/users/<u>``..."""

    @staticmethod
    def path(entity_type, name):
        return "/config/%s/%s" % (entity_type, name)

    @staticmethod
    def encode(config):
        return _json({"version": 1, "config": {k: _config_str(v) for k, v in config.items()}})

    @staticmethod
    def decode(data):
        if not data:
            return {}
        return dict(_load(data).get("config") or {})


class ConfigChangesZNode:
    @staticmethod
    def path():
        return "/config/changes"


class ConfigEntityChangeNotificationSequenceZNode:
    PREFIX = "config_change_"

    @classmethod
    def path_prefix(cls):
        """Pass to ``create(..., sequence=True)``; the store appends 10 digits."""
        return "/config/changes/" + cls.PREFIX

    @staticmethod
    def encode(entity_path):
        """entity_path: ``topics/<t>``, ``clients/<id>``, ``users/<u>/clients/<id>``, ``brokers/<id>``."""
        return _json({"version": 2, "entity_path": entity_path})

    @staticmethod
    def decode(data):
        """-> entity path (version 1's ``{"entity_type":"topic","entity_name":"t"}`` becomes ``topics/t``)."""
        obj = _load(data)
        if obj.get("version") == 1:
            kind = {"topic": "topics", "client": "clients", "user": "users", "broker": "brokers"}.get(
                obj["entity_type"], obj["entity_type"])
            return "%s/%s" % (kind, obj["entity_name"])
        return obj["entity_path"]


# --------------------------------------------------------------------------------------------------------------


class ControllerZNode:
    @staticmethod
    def path():
        return "/controller"

    @staticmethod
    def encode(broker_id, timestamp_ms=None):
        return _json({"version": 1, "brokerid": broker_id,
                      "timestamp": str(_now_ms() if timestamp_ms is None else timestamp_ms)})

    @staticmethod
    def decode(data):
        """-> controller broker id (very old Kafka wrote the bare id)."""
        obj = _load(data)
        return int(obj) if isinstance(obj, int) else int(obj["brokerid"])


class ControllerEpochZNode:
    @staticmethod
    def path():
        return "/controller_epoch"

    @staticmethod
    def encode(epoch):
        return str(int(epoch)).encode("ascii")

    @staticmethod
    def decode(data):
        return int(bytes(data).decode("ascii").strip())


class ClusterIdZNode:
    @staticmethod
    def path():
        return "/cluster/id"

    @staticmethod
    def generate():
        """22 chars: URL-safe base64 of a random UUID without '=' padding (Kafka's format)."""
        return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")

    @staticmethod
    def encode(cluster_id):
        return _json({"version": "1", "id": cluster_id})

    @staticmethod
    def decode(data):
        return _load(data)["id"]


class DeleteTopicsZNode:
    @staticmethod
    def path(topic=None):
        return "/admin/delete_topics" if topic is None else "/admin/delete_topics/" + topic

    @staticmethod
    def encode():
        return b""


class IsrChangeNotificationSequenceZNode:
    PREFIX = "isr_change_"

    @classmethod
    def path_prefix(cls):
        return "/isr_change_notification/" + cls.PREFIX

    @staticmethod
    def encode(partitions):
        """partitions: [(topic, partition)]."""
        return _json({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})

    @staticmethod
    def decode(data):
        return [(e["topic"], e["partition"]) for e in _load(data)["partitions"]]


class ConsumerOffsetZNode:
    @staticmethod
    def path(group, topic, partition):
        return "/consumers/%s/offsets/%s/%d" % (group, topic, partition)

    @staticmethod
    def encode(offset):
        return str(int(offset)).encode("ascii")

    @staticmethod
    def decode(data):
        return int(bytes(data).decode("ascii").strip())


# Created at broker startup if missing (Kafka 0.10.1 ZkUtils.persistentZkPaths, plus the users/brokers config roots
# later Kafka creates too).
PERSISTENT_PATHS = (
    "/consumers",
    "/brokers/ids",
    "/brokers/topics",
    "/brokers/seqid",
    "/config/changes",
    "/config/topics",
    "/config/clients",
    "/config/users",
    "/config/brokers",
    "/admin/delete_topics",
    "/isr_change_notification",
    "/log_dir_event_notification",     # KIP-112 (kbroker/controller/log_dirs.py)
)


def ensure_persistent_paths(backend):
    for path in PERSISTENT_PATHS:
        backend.ensure_path(path)


__all__ = [n for n in dir() if n.endswith("ZNode") or n in (
    "BrokerRegistration", "PartitionState", "PERSISTENT_PATHS", "ensure_persistent_paths", "join")]
