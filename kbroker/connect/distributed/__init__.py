"""Distributed mode of kbroker-connect (Kafka's ``connect-distributed.sh``; issue 17 item 2).

Workers sharing a ``group.id`` form a group through the broker's group coordinator (JoinGroup with protocol type
``connect``) and keep all their state in three compacted topics, so any worker can die and another takes over:

- ``protocol``: Kafka Connect's group metadata and assignment formats (ConnectProtocol v0 "default",
  IncrementalCooperativeConnectProtocol v1 "compatible" / v2 "sessioned"), byte for byte.
- ``member``: the worker's group membership (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup) over
  ``kbroker.client.BrokerConnection``, with a heartbeat thread.
- ``assignor``: the leader's assignment of connectors and tasks to workers (Kafka's EagerAssignor, and the
  incremental cooperative one of KIP-415).
- ``kafka_stores``: the config, offset and status stores in their topics (Kafka's key and value formats).
- ``herder``: DistributedHerder, the Herder the REST API drives.
- ``main``: ``run(worker_props)``, what ``kbroker-connect distributed`` calls.
"""
