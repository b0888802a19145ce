"""Security (issue 10; section 7 of Kafka's documentation): who a connection is and what it may do.

Layer 2, beside ``server`` (tests/unit/test_architecture.py): it may use ``protocol`` and ``coord`` but never
``config`` (layer 3) -- the composition root (``kbroker/broker.py``) turns the broker's config into the plain
settings these modules take, so a module here can be tested without a BrokerConfig.

* ``tls`` -- SSL contexts for listeners and for brokers' own connections (PEM, PKCS12 keystores; JKS refused with
  the conversion command).
* ``principal`` -- KafkaPrincipal strings; the distinguished name of a client certificate and
  ``ssl.principal.mapping.rules`` (KIP-371).
* ``sasl`` -- the SASL mechanisms (PLAIN, SCRAM-SHA-256/512, GSSAPI), server and client side; ``jaas`` parses JAAS
  files and ``sasl.jaas.config`` values; ``authenticator`` runs one connection's SaslHandshake/SaslAuthenticate
  exchange before any other request is served.
* ``acl`` -- Kafka's ACL vocabulary (resource types, operations, patterns) and wire codes; ``authorizer`` --
  the ACL authorizer over ``/kafka-acl`` and ``/kafka-acl-extended`` with change notifications.
* ``client_channel`` -- the client side of a secured listener (TLS, then SASL), for brokers' own connections and
  the command-line tools.
"""
