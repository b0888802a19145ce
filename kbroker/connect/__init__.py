"""kbroker-connect: a Kafka Connect runtime in Python (issue 17; docs/connect.md).

It is a client of any Kafka cluster, kbroker or Apache Kafka: nothing here imports the broker. Modules, bottom up:

- ``exceptions``: the runtime's errors (each REST-visible one names its HTTP status).
- ``records``: ConnectRecord, SourceRecord, SinkRecord, ConnectorTaskId.
- ``configdef``: ConfigDef, Kafka's declarative config definitions and their validation.
- ``data``: Connect's schema/struct model (Schema, SchemaBuilder, Struct, logical types).
- ``converters``: JsonConverter (Kafka's envelope byte for byte), StringConverter, ByteArrayConverter, ...
- ``transforms``: the single message transforms (InsertField, ReplaceField, MaskField, ValueToKey, ...).
- ``api``: the connector API (SourceConnector/SourceTask, SinkConnector/SinkTask) and their contexts.
- ``plugins``: connectors, converters and transforms by Kafka class name, alias or Python entry point.
- ``file``: FileStreamSource / FileStreamSink.
- ``offsets``, ``status``: offset and status stores (memory, file); ``distributed.kafka_stores`` puts them in topics.
- ``worker``: runs connectors and tasks (source: poll -> transforms -> convert -> produce -> commit offsets after
  the acknowledgement; sink: consume -> convert -> transforms -> put -> flush -> commit).
- ``herder``: the interface the REST API drives; ``standalone`` and ``distributed.herder`` implement it.
- ``rest``: Kafka Connect's REST API.
"""
