"""Small synchronous Kafka client on kbroker's own codec (blocking sockets; used by the CLI tools and tests).

- ``connection.BrokerConnection``: one socket, ApiVersions negotiation, framed request/response.
- ``cluster.Cluster``: bootstrap, Metadata cache, a connection per broker, leader lookup.
- ``admin.AdminClient``: topics, partitions, configs, offsets.
- ``simple.SimpleClient``: produce one v2 batch per partition, fetch decoded records.
- ``partitioner``: Kafka's murmur2 key partitioner.
- ``client_config``: Kafka's client keys (``--command-config``) -> the security of this client's connections.
- ``rdkafka_props``: Kafka's Java client properties -> a librdkafka configuration (the confluent-kafka based
  tools and kbroker-connect's worker).
"""
from kbroker.client.admin import AdminClient, NewTopic
from kbroker.client.connection import BrokerConnection
from kbroker.client.partitioner import murmur2, partition_for_key
from kbroker.client.simple import SimpleClient

__all__ = ["AdminClient", "NewTopic", "BrokerConnection", "SimpleClient", "murmur2", "partition_for_key"]
