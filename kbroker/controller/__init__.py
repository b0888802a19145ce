"""Cluster controller (ZooKeeper mode): election, partition/replica state machines, requests to brokers.

Modules: ``controller`` (the core: election, term, event loop, dispatch table), ``events`` (one class per event,
its source and handler), collaborators over the core -- ``brokers`` (live brokers, epochs, endpoints),
``partitions`` (partition/replica state machines, state znode writes), ``topic_changes`` (topics and partitions
appearing/vanishing) -- and the duties ``deletion``, ``reassignment``, ``leader_balance`` (preferred leaders),
``shutdown`` (controlled shutdown); ``channel`` (per-broker sender greenlets), ``batch`` (request batching),
``election`` (leader selectors), ``state`` (in-memory context), ``admin_znodes`` (reassignment /
preferred-election JSON), ``topics`` (CreateTopics helper), ``assignment`` (Kafka's replica placement). The
partition-state values it sends are ``kbroker/cluster_state.py``'s. Contract: docs/architecture.md, "controller".
"""
