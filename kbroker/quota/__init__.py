"""Client quotas (issue 12; Kafka's KIP-55, KIP-124, KIP-219, KIP-546): how much a client may produce, fetch and
make the broker work, and how a client over its quota is slowed down.

The layer: ``kbroker/quota`` sits at layer 2 (tests/unit/test_architecture.py), beside ``kbroker/security``. It may
import ``coord`` (the quota znodes), ``protocol``, ``record`` and ``timeslice``, never ``config`` or anything
above: the composition root (``kbroker/broker.py``) turns the broker config into the plain settings it takes
(``quota.window.num``, ``quota.window.size.seconds``, ``quota.producer.default``, ``quota.consumer.default``).

The pieces:

* ``store.py`` -- ``QuotaLimits``: the configured quotas of the client-id, user and user+client-id entities (and
  their ``<default>``s) under ``/config/clients`` and ``/config/users``, kept current through ``/config/changes``
  notifications; ``limit_for(kind, user, client_id) -> (entity_key, bound | None)`` with Kafka's 8-level
  precedence. ``kind`` is ``producer_byte_rate``, ``consumer_byte_rate`` or ``request_percentage``.
* ``sensor.py`` -- Kafka's sampled ``Rate``: a value per second over ``quota.window.num`` sample windows of
  ``quota.window.size.seconds`` each.
* ``manager.py`` -- ``ClientQuotaManager`` (one quota type: a ``Rate`` per metric entity, the throttle time as
  Kafka's ClientQuotaManager / ClientRequestQuotaManager compute it) and ``ClientQuotas`` (the three of them plus
  the throttle counters): ``Services.quotas`` (``kbroker/server/context.py`` QuotaEnforcement).
* ``replication.py`` -- the replication throttles (KIP-73).

Enforcement (KIP-219) is the server's: a handler calls ``ctx.throttle(manager.record(...))``, the Connection puts
the throttle into the response's ``throttle_time_ms``, sends it at once and reads nothing more from that
connection for that long (kbroker/server/connection.py).
"""
