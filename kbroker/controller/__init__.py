"""Cluster controller (ZooKeeper mode): election, partition/replica state machines, requests to brokers.

Modules: ``controller`` (Controller: the event loop and every controller duty), ``channel`` (per-broker sender
greenlets), ``batch`` (request batching), ``election`` (leader selectors), ``state`` (in-memory context),
``admin_znodes`` (reassignment / preferred-election JSON), ``topics`` (CreateTopics helper), ``assignment``
(Kafka's replica placement). Contract: docs/architecture.md, "controller".
"""
