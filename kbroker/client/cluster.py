"""Cluster view shared by the admin and simple clients: bootstrap, Metadata cache, one connection per broker.

``bootstrap`` is Kafka's ``bootstrap.servers`` form, ``host:port[,host:port...]``; the first address that answers
ApiVersions is used until the connection breaks. Connections are cached by ``(host, port)``, so the bootstrap
connection is reused when it is also a broker from Metadata. ``metadata()`` refreshes ``brokers``
(node id -> (host, port)), ``controller_id`` and the ``topics`` cache (name -> {partition: PartitionInfo}) for the
topics it was asked about (all topics when ``topics`` is None).

Errors surface as ``kbroker.errors.KafkaError`` subclasses built by ``raise_for_code``: the broker's own message
when it sent one, else ``"<ERROR_NAME>: <context>"``.
"""
from collections import namedtuple

from kbroker import errors
from kbroker.client.connection import BrokerConnection, parse_host_port, resolve_api

PartitionInfo = namedtuple("PartitionInfo", "partition leader replicas isr offline error_code")


def raise_for_code(code, message=None, context=""):
    """Raise the KafkaError subclass for a non-zero wire error code."""
    if not code:
        return
    cls = errors.error_for_code(code)
    if not message:
        name = errors.error_name(code)
        message = "%s: %s" % (name, context) if context else name
    exc = cls(message)
    if cls is errors.KafkaError:
        exc.code = code
    raise exc


class Cluster:
    def __init__(self, bootstrap, client_id="kbroker-admin", timeout=30):
        if isinstance(bootstrap, str):
            bootstrap = [b for b in bootstrap.split(",") if b.strip()]
        self.bootstrap = [parse_host_port(b) if isinstance(b, str) else tuple(b) for b in bootstrap]
        if not self.bootstrap:
            raise ValueError("no bootstrap server given")
        self.client_id = client_id
        self.timeout = timeout
        self._conns = {}
        self.brokers = {}
        self.controller_id = -1
        self.cluster_id = None
        self.topics = {}
        self.internal_topics = set()

    # ------------------------------------------------------------------------------------------ connections

    def _connect(self, host, port):
        conn = self._conns.get((host, port))
        if conn is None or conn.closed:
            conn = self._conns[(host, port)] = BrokerConnection(host, port, self.client_id, self.timeout)
        return conn

    def any_connection(self):
        """A live connection to some broker: a cached one, else the first bootstrap address that answers."""
        for conn in self._conns.values():
            if not conn.closed:
                return conn
        last = None
        for host, port in self.bootstrap:
            try:
                return self._connect(host, port)
            except errors.KafkaError as e:
                last = e
        raise last

    def connection(self, node_id):
        if node_id not in self.brokers:
            self.metadata([])
        if node_id not in self.brokers:
            raise errors.BrokerNotAvailable("broker %d is not in the cluster metadata" % node_id)
        return self._connect(*self.brokers[node_id])

    def controller(self):
        """Connection to the controller (admin requests must go there); refreshes metadata first."""
        self.metadata([])
        if self.controller_id < 0:
            # Metadata v0 has no controller id: any broker will have to do (single-broker clusters).
            return self.any_connection()
        return self.connection(self.controller_id)

    def request(self, api, body, **kw):
        """Send to any broker, retrying once on a fresh connection if the cached one broke."""
        try:
            return self.any_connection().request(api, body, **kw)
        except errors.NetworkException:
            return self.any_connection().request(api, body, **kw)

    def close(self):
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------------------------------ metadata

    def metadata(self, topics=None, allow_auto_topic_creation=False):
        """Metadata for ``topics`` (None = all) -> the response dict; updates the caches."""
        conn = self.any_connection()
        api_version = conn.pick_version(resolve_api("Metadata"))
        if topics is None:
            req_topics = [] if api_version == 0 else None
        else:
            # Metadata v0 cannot ask for "no topics" (empty means all): an empty request then gets every topic.
            req_topics = [{"name": t} for t in topics]
        resp = conn.request("Metadata", {"topics": req_topics,
                                         "allow_auto_topic_creation": allow_auto_topic_creation},
                            version=api_version)
        self.brokers = {b["node_id"]: (b["host"], b["port"]) for b in resp["brokers"]}
        self.controller_id = resp["controller_id"]
        self.cluster_id = resp["cluster_id"]
        for t in resp["topics"]:
            name = t["name"]
            if t["error_code"]:
                self.topics.pop(name, None)
                continue
            self.topics[name] = {
                p["partition_index"]: PartitionInfo(p["partition_index"], p["leader_id"], list(p["replica_nodes"]),
                                                    list(p["isr_nodes"]), list(p["offline_replicas"]),
                                                    p["error_code"])
                for p in t["partitions"]}
            if t["is_internal"]:
                self.internal_topics.add(name)
        if topics is None:
            listed = {t["name"] for t in resp["topics"] if not t["error_code"]}
            for gone in set(self.topics) - listed:
                del self.topics[gone]
        return resp

    def partitions_for(self, topic, refresh=False, allow_auto_topic_creation=False):
        """Sorted partition ids of ``topic``; raises the topic's Metadata error (e.g. UNKNOWN_TOPIC_OR_PARTITION)."""
        if refresh or topic not in self.topics:
            resp = self.metadata([topic], allow_auto_topic_creation=allow_auto_topic_creation)
            for t in resp["topics"]:
                if t["name"] == topic:
                    raise_for_code(t["error_code"], None, "topic %s" % topic)
        if topic not in self.topics:
            raise errors.UnknownTopicOrPartition("topic %s is not in the cluster metadata" % topic)
        return sorted(self.topics[topic])

    def leader_for(self, topic, partition, refresh=False):
        """Node id leading ``topic``-``partition``; raises LEADER_NOT_AVAILABLE / UNKNOWN_TOPIC_OR_PARTITION."""
        self.partitions_for(topic, refresh=refresh)
        info = self.topics[topic].get(partition)
        if info is None:
            raise errors.UnknownTopicOrPartition("%s-%d does not exist" % (topic, partition))
        if info.leader < 0:
            raise errors.LeaderNotAvailable("%s-%d has no leader" % (topic, partition))
        return info.leader
