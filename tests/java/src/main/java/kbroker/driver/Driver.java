package kbroker.driver;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterConsumerGroupOffsetsResult;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeProducersOptions;
import org.apache.kafka.clients.admin.DescribeProducersResult;
import org.apache.kafka.clients.admin.ListConsumerGroupsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TopicListing;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Apache Kafka's Java client (kafka-clients 4.x) driven by kbroker's integration tests
 * (tests/integration/java_driver.py). One JVM run executes a list of steps, so a test pays the JVM start once.
 *
 * <p>Input: one JSON object on stdin (or as the only argument). Output: ONE line of JSON on stdout; the client's
 * own logs (slf4j-simple, level from {@code logLevel}, default warn) go to stderr. Bytes are base64 strings,
 * null stays null. Exit code 0 whenever the result was printed (a failed step is data: its result carries
 * {@code "error": {"type": <exception class>, "message": ..., "causes": [..]}} and the next steps still run; its
 * stack trace goes to stderr), 1 for a bad spec.
 *
 * <pre>
 * spec: {"bootstrap": "host:port", "steps": [step, ...], "timeoutMs": 30000 (per step),
 *        "adminConfig": {...}, "logLevel": "warn"}
 * result: {"clientVersion": "4.4.0", "steps": [{"op": ..., ...}, ...]}
 *
 * produce          {topic, records: [{partition?, key, value, headers: [[name, b64|null], ...], timestamp?}],
 *                   config: {producer overrides; none = the Java defaults, i.e. idempotent with acks=all}}
 *                  -> {metadata: [{partition, offset, timestamp} | {error}] in send order,
 *                      effective: {"enable.idempotence", "acks", "compression.type", "linger.ms"}}
 * produce_spread   {valueSize, config, phases: [{name, targets: [[topic, partition], ...], bytes, seed}]}
 *                  -- one producer (KafkaProducer with the driver's settings, then config) runs the phases in order:
 *                   bytes / valueSize records of one random value, each to a target drawn with java.util.Random(seed),
 *                   then flush(); a phase fails at the first record not acknowledged (bench/produce_spread.py)
 *                  -> {phases: [{name, records, startMs, endMs (epoch ms: send of the first record, return of
 *                      flush()), requests (the producer's request-total over the phase), failed}]}
 * consume          {topic, partitions?: [ints] (default: all), count, offsets?: {"p": offset} (default: from the
 *                   beginning), config} -- assign() + poll(), no group
 *                  -> {records: [rec], timedOut, endOffsets: {"p": n}, beginningOffsets: {"p": n}}
 * consume_count    {topic, count, config} -- consume's assign() + poll() from the beginning of every partition, records
 *                   only counted (bench/bench_clients.py's Java consume phase: no per-record JSON)
 *                  -> {records, valueBytes, firstPollMs (assign to first record), elapsedMs (assign to the
 *                      count-th record), timedOut}
 * group_consume    {topics: [..], groupId, count, config, commit: true (commitSync of the consumed positions at
 *                   the end, and of the revoked partitions' positions in onPartitionsRevoked), commitEachPoll: false,
 *                   untilAssigned: 0 (also poll until this many partitions are assigned), stopFile: path (also
 *                   poll until it exists), timeoutMs, whileMember: [step, ...] (run after the commit, before the
 *                   consumer leaves)}
 *                  -> {records, timedOut, assignment: [[topic, p]], generationId, memberId, whileMember: [result],
 *                      committed: [{topic, partition, offset, metadata}], history: [{event: "assigned"|"revoked"|
 *                      "lost", partitions: [[topic, p]]}] (the rebalance listener's calls, in order)};
 *                      the consumer then closes (leaves the group)
 * create_topics    {topics: [{name, partitions, replicationFactor, configs: {}}], validateOnly}
 *                  -> {results: {name: {numPartitions, replicationFactor, configs: {k: v}} | {error}}}
 * list_topics      {internal: false} -> {topics: [{name, internal}] sorted by name}
 * describe_topics  {topics} -> {results: {name: {internal, partitions: [{partition, leader, replicas, isr}]} | {error}}}
 * delete_topics    {topics} -> {results: {name: null | {error}}}
 * create_partitions {topics: {name: newTotalCount}} -> {results: {name: null | {error}}}
 * describe_configs {resources: [{type: "topic"|"broker", name}]}
 *                  -> {results: {name: {entries: {key: {value, source, readOnly, isDefault, isSensitive}}} | {error}}}
 * alter_configs    {resources: [{type, name, ops: [{name, value, op: "SET"|"DELETE"|"APPEND"|"SUBTRACT"}]}]}
 *                  (Admin.incrementalAlterConfigs: the only config-altering call left in 4.x)
 *                  -> {results: {name: null | {error}}}
 * list_groups      {states?: ["Stable", ...]} -> {groups: [{groupId, state, type, simple}] sorted by groupId}
 *                  (listConsumerGroups, optionally inGroupStates)
 * describe_groups  {groups} -> {results: {g: {state, simple, assignor, coordinator, type,
 *                   members: [{memberId, clientId, host, assignment: [[t, p]]}]} | {error}}}
 * list_group_offsets {group} -> {offsets: [{topic, partition, offset, metadata}]} | {error}
 * delete_groups    {groups} -> {results: {g: null | {error}}}
 * alter_group_offsets {group, offsets: [{topic, partition, offset, metadata?}]}   (a group without members)
 *                  -> {results: {"topic-p": null | {error}}}
 * describe_cluster {} -> {clusterId, controller, nodes: [{id, host, port}]}
 * list_offsets     {topic, partitions, spec: "earliest"|"latest"|"maxTimestamp"|<timestamp ms>}
 *                  -> {offsets: {"p": {offset, timestamp}}}
 * txn_produce      {topic, transactionalId, transactions: [{action: "commit"|"abort", records: [as produce]}],
 *                   config} -- initTransactions, then per transaction begin, send, flush, commit or abort
 *                  -> {metadata: [[{partition, offset} | {error}] per transaction], error?: at the first failure}
 * list_transactions {} -> {transactions: [{transactionalId, producerId, state}] sorted by transactionalId}
 * describe_transactions {ids} -> {results: {id: {coordinatorId, state, producerId, producerEpoch,
 *                   transactionTimeoutMs, transactionStartTimeMs (null: none), topicPartitions: ["t-p" sorted]}
 *                   | {error}}}
 * describe_producers {topic, partitions, brokerId?} -> {results: {"p": [{producerId, producerEpoch, lastSequence,
 *                   lastTimestamp, coordinatorEpoch (null: none), currentTransactionStartOffset (null: none)}]
 *                   | {error}}}
 * abort_transaction {topic, partition, producerId, producerEpoch, coordinatorEpoch} -> {} | {error}
 * alter_client_quotas {entries: [{entity: {"user"|"client-id": name|null (null: the default)}, ops: [{key,
 *                   value (null: remove)}]}], validateOnly} -> {results: [null | {error}] in entry order}
 * describe_client_quotas {components: [{type, match: "exact"|"default"|"any", name?}], strict}
 *                  -> {entries: [{entity: {type: name|null}, values: {key: double}}] sorted by entity} | {error}
 * rec = {topic, partition, offset, key, value, headers: [[name, b64|null]], timestamp, timestampType}
 * </pre>
 */
public final class Driver {
    /** One step kind: reads its fields from {@code step}, puts its results into {@code r}. */
    @FunctionalInterface
    private interface Op {
        void run(Driver d, Map<String, Object> step, Map<String, Object> r) throws Exception;
    }

    private static final Map<String, Op> OPS = Map.ofEntries(
            Map.entry("produce", Driver::produce),
            Map.entry("consume", Driver::consume),
            Map.entry("consume_count", Driver::consumeCount),
            Map.entry("produce_spread", Driver::produceSpread),
            Map.entry("group_consume", Driver::groupConsume),
            Map.entry("create_topics", Driver::createTopics),
            Map.entry("list_topics", Driver::listTopics),
            Map.entry("describe_topics", Driver::describeTopics),
            Map.entry("delete_topics", Driver::deleteTopics),
            Map.entry("create_partitions", Driver::createPartitions),
            Map.entry("describe_configs", Driver::describeConfigs),
            Map.entry("alter_configs", Driver::alterConfigs),
            Map.entry("list_groups", Driver::listGroups),
            Map.entry("describe_groups", Driver::describeGroups),
            Map.entry("list_group_offsets", Driver::listGroupOffsets),
            Map.entry("delete_groups", Driver::deleteGroups),
            Map.entry("alter_group_offsets", Driver::alterGroupOffsets),
            Map.entry("describe_cluster", Driver::describeCluster),
            Map.entry("list_offsets", Driver::listOffsets),
            Map.entry("txn_produce", Driver::txnProduce),
            Map.entry("list_transactions", Driver::listTransactions),
            Map.entry("describe_transactions", Driver::describeTransactions),
            Map.entry("describe_producers", Driver::describeProducers),
            Map.entry("abort_transaction", Driver::abortTransaction),
            Map.entry("alter_client_quotas", Driver::alterClientQuotas),
            Map.entry("describe_client_quotas", Driver::describeClientQuotas));

    private final Map<String, Object> spec;
    private final String bootstrap;
    private final long stepTimeoutMs;
    private Admin admin;

    private Driver(Map<String, Object> spec) {
        this.spec = spec;
        this.bootstrap = (String) require(spec, "bootstrap");
        this.stepTimeoutMs = num(spec.getOrDefault("timeoutMs", 30000L));
    }

    public static void main(String[] args) throws IOException {
        String text = args.length > 0 ? args[0] : readAll(System.in);
        // Keep stdout for the one JSON line: anything a library prints there would corrupt it.
        PrintStream out = System.out;
        System.setOut(System.err);
        Driver d;
        try {
            Map<String, Object> spec = map(Json.parse(text));
            String level = String.valueOf(spec.getOrDefault("logLevel", "warn"));
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", level);
            System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
            System.setProperty("org.slf4j.simpleLogger.showDateTime", "true");
            d = new Driver(spec);
            list(spec.get("steps"));
        } catch (RuntimeException e) {
            out.println(Json.write(Map.of("error", describe(e))));
            out.flush();
            System.exit(1);
            return;
        }
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("clientVersion", clientVersion());
        List<Object> steps = new ArrayList<>();
        result.put("steps", steps);
        try {
            for (Object s : list(d.spec.get("steps"))) {
                steps.add(d.runStep(map(s)));
            }
        } finally {
            d.closeAdmin();
        }
        out.println(Json.write(result));
        out.flush();
        // Client threads (e.g. a stuck admin call after its timeout) must not keep the JVM alive.
        System.exit(0);
    }

    private Map<String, Object> runStep(Map<String, Object> step) {
        String op = (String) require(step, "op");
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("op", op);
        long t0 = System.nanoTime();
        try {
            Op fn = OPS.get(op);
            if (fn == null) {
                throw new IllegalArgumentException("unknown op " + op + "; known: " + new TreeSet<>(OPS.keySet()));
            }
            fn.run(this, step, r);
        } catch (Exception e) {
            System.err.println("[kbroker-java-driver] step " + op + " failed:");
            e.printStackTrace(System.err);
            r.put("error", describe(e));
        }
        r.put("elapsedMs", (System.nanoTime() - t0) / 1_000_000);
        return r;
    }

    // ----------------------------------------------------------------------------------------------- producer

    /** The driver's producer settings (bootstrap, byte-array serializers, timeouts from the step timeout), then
     *  {@code overrides}. */
    private Properties producerProps(Object overrides) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, String.valueOf(stepTimeoutMs));
        // The producer insists on delivery.timeout.ms >= linger.ms + request.timeout.ms.
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, String.valueOf(stepTimeoutMs / 2));
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, String.valueOf(stepTimeoutMs));
        putAll(props, overrides);
        return props;
    }

    private void produce(Map<String, Object> step, Map<String, Object> r) throws InterruptedException {
        String topic = (String) require(step, "topic");
        Properties props = producerProps(step.get("config"));
        // What the producer will actually run with (defaults filled in and reconciled, as KafkaProducer does).
        ProducerConfig effective = new ProducerConfig(props);
        Map<String, Object> eff = new LinkedHashMap<>();
        eff.put("enable.idempotence", effective.getBoolean(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG));
        eff.put("acks", effective.getString(ProducerConfig.ACKS_CONFIG));
        eff.put("compression.type", effective.getString(ProducerConfig.COMPRESSION_TYPE_CONFIG));
        eff.put("linger.ms", effective.getLong(ProducerConfig.LINGER_MS_CONFIG));
        r.put("effective", eff);

        List<Future<RecordMetadata>> futures = new ArrayList<>();
        List<Object> metadata = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            for (Object o : list(step.get("records"))) {
                Map<String, Object> m = map(o);
                Integer partition = m.get("partition") == null ? null : (int) num(m.get("partition"));
                Long ts = m.get("timestamp") == null ? null : num(m.get("timestamp"));
                List<Header> headers = new ArrayList<>();
                for (Object h : list(m.getOrDefault("headers", List.of()))) {
                    List<Object> pair = list(h);
                    headers.add(new RecordHeader((String) pair.get(0), unb64(pair.get(1))));
                }
                futures.add(producer.send(new ProducerRecord<>(topic, partition, ts, unb64(m.get("key")),
                        unb64(m.get("value")), headers)));
            }
            producer.flush();
            for (Future<RecordMetadata> f : futures) {
                Map<String, Object> md = new LinkedHashMap<>();
                try {
                    RecordMetadata rm = f.get(stepTimeoutMs, TimeUnit.MILLISECONDS);
                    md.put("partition", rm.partition());
                    md.put("offset", rm.offset());
                    md.put("timestamp", rm.timestamp());
                } catch (ExecutionException | java.util.concurrent.TimeoutException e) {
                    md.put("error", describe(e));
                }
                metadata.add(md);
            }
        }
        r.put("metadata", metadata);
    }

    /** The producer's cumulative request count (every API; Produce is all but a few Metadata requests). */
    private static double requestTotal(KafkaProducer<byte[], byte[]> producer) {
        for (Map.Entry<org.apache.kafka.common.MetricName, ? extends org.apache.kafka.common.Metric> e
                : producer.metrics().entrySet()) {
            if (e.getKey().name().equals("request-total") && e.getKey().group().equals("producer-metrics")) {
                return ((Number) e.getValue().metricValue()).doubleValue();
            }
        }
        return -1;
    }

    private void produceSpread(Map<String, Object> step, Map<String, Object> r) throws InterruptedException {
        int valueSize = (int) num(require(step, "valueSize"));
        Properties props = producerProps(step.get("config"));
        byte[] value = new byte[valueSize];
        new java.util.Random(1).nextBytes(value);
        List<Object> phases = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            for (Object o : list(require(step, "phases"))) {
                Map<String, Object> ph = map(o);
                List<Object> raw = list(require(ph, "targets"));
                String[] topics = new String[raw.size()];
                int[] parts = new int[raw.size()];
                for (int i = 0; i < raw.size(); i++) {
                    List<Object> t = list(raw.get(i));
                    topics[i] = (String) t.get(0);
                    parts[i] = (int) num(t.get(1));
                }
                long records = num(require(ph, "bytes")) / valueSize;
                java.util.Random rnd = new java.util.Random(num(ph.getOrDefault("seed", 1L)));
                java.util.concurrent.atomic.AtomicLong failed = new java.util.concurrent.atomic.AtomicLong();
                java.util.concurrent.atomic.AtomicReference<String> firstError =
                        new java.util.concurrent.atomic.AtomicReference<>();
                org.apache.kafka.clients.producer.Callback cb = (md, e) -> {
                    if (e != null) {
                        failed.incrementAndGet();
                        firstError.compareAndSet(null, e.toString());
                    }
                };
                double req0 = requestTotal(producer);
                long start = System.currentTimeMillis();
                for (long i = 0; i < records; i++) {
                    int k = topics.length > 1 ? rnd.nextInt(topics.length) : 0;
                    producer.send(new ProducerRecord<>(topics[k], parts[k], null, value), cb);
                }
                producer.flush();
                long end = System.currentTimeMillis();
                Map<String, Object> out = new LinkedHashMap<>();
                out.put("name", ph.get("name"));
                out.put("records", records);
                out.put("startMs", start);
                out.put("endMs", end);
                out.put("requests", requestTotal(producer) - req0);
                out.put("failed", failed.get());
                out.put("firstError", firstError.get());
                phases.add(out);
                if (failed.get() > 0) {
                    break;
                }
            }
        }
        r.put("phases", phases);
    }

    // ----------------------------------------------------------------------------------------------- consumers

    private Properties consumerProps(Object overrides) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, String.valueOf(stepTimeoutMs));
        props.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, String.valueOf(Math.min(stepTimeoutMs, 30000)));
        props.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        putAll(props, overrides);
        return props;
    }

    /** Every partition of {@code topic}, in partition order. */
    private static List<TopicPartition> allPartitions(KafkaConsumer<byte[], byte[]> consumer, String topic) {
        List<TopicPartition> tps = new ArrayList<>();
        for (PartitionInfo pi : consumer.partitionsFor(topic)) {
            tps.add(new TopicPartition(topic, pi.partition()));
        }
        tps.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
        return tps;
    }

    private void consume(Map<String, Object> step, Map<String, Object> r) {
        String topic = (String) require(step, "topic");
        long count = num(require(step, "count"));
        Properties props = consumerProps(step.get("config"));
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        long deadline = System.currentTimeMillis() + num(step.getOrDefault("timeoutMs", stepTimeoutMs));
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> tps = new ArrayList<>();
            if (step.get("partitions") != null) {
                for (Object p : list(step.get("partitions"))) {
                    tps.add(new TopicPartition(topic, (int) num(p)));
                }
            } else {
                tps.addAll(allPartitions(consumer, topic));
            }
            consumer.assign(tps);
            if (step.get("offsets") != null) {
                Map<String, Object> offsets = map(step.get("offsets"));
                for (TopicPartition tp : tps) {
                    Object off = offsets.get(String.valueOf(tp.partition()));
                    consumer.seek(tp, off == null ? 0 : num(off));
                }
            } else {
                consumer.seekToBeginning(tps);
            }
            List<Map<String, Object>> records = new ArrayList<>();
            while (records.size() < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> rec : consumer.poll(Duration.ofMillis(200))) {
                    records.add(recordOf(rec));
                }
            }
            r.put("records", sortRecords(records));
            r.put("timedOut", records.size() < count);
            r.put("endOffsets", byPartition(consumer.endOffsets(tps)));
            r.put("beginningOffsets", byPartition(consumer.beginningOffsets(tps)));
        }
    }

    private void consumeCount(Map<String, Object> step, Map<String, Object> r) {
        String topic = (String) require(step, "topic");
        long count = num(require(step, "count"));
        Properties props = consumerProps(step.get("config"));
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        long deadline = System.currentTimeMillis() + num(step.getOrDefault("timeoutMs", stepTimeoutMs));
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> tps = allPartitions(consumer, topic);
            long started = System.nanoTime();
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            long got = 0;
            long bytes = 0;
            long first = -1;
            while (got < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> rec : consumer.poll(Duration.ofMillis(200))) {
                    if (first < 0) {
                        first = System.nanoTime();
                    }
                    got++;
                    bytes += rec.value() == null ? 0 : rec.value().length;
                }
            }
            long ended = System.nanoTime();
            r.put("records", got);
            r.put("valueBytes", bytes);
            r.put("firstPollMs", first < 0 ? -1 : (first - started) / 1_000_000.0);
            r.put("elapsedMs", (ended - started) / 1_000_000.0);
            r.put("timedOut", got < count);
        }
    }

    private void groupConsume(Map<String, Object> step, Map<String, Object> r) {
        List<String> topics = strings(require(step, "topics"));
        long count = num(require(step, "count"));
        long untilAssigned = num(step.getOrDefault("untilAssigned", 0L));
        java.io.File stopFile = step.get("stopFile") == null ? null : new java.io.File((String) step.get("stopFile"));
        boolean commit = !Boolean.FALSE.equals(step.get("commit"));
        boolean commitEachPoll = Boolean.TRUE.equals(step.get("commitEachPoll"));
        Properties props = consumerProps(null);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, (String) require(step, "groupId"));
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        putAll(props, step.get("config"));
        long deadline = System.currentTimeMillis() + num(step.getOrDefault("timeoutMs", stepTimeoutMs));
        List<Object> history = new ArrayList<>();
        r.put("history", history);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(topics, new ConsumerRebalanceListener() {
                private void event(String what, Collection<TopicPartition> tps) {
                    List<Object> parts = new ArrayList<>();
                    for (TopicPartition tp : sorted(tps)) {
                        parts.add(List.of(tp.topic(), tp.partition()));
                    }
                    history.add(Map.of("event", what, "partitions", parts));
                }

                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> revoked) {
                    event("revoked", revoked);
                    // Hand over what was read: the next owner starts where this member stopped.
                    if (commit && !revoked.isEmpty()) {
                        Map<TopicPartition, OffsetAndMetadata> positions = new LinkedHashMap<>();
                        for (TopicPartition tp : revoked) {
                            positions.put(tp, new OffsetAndMetadata(consumer.position(tp)));
                        }
                        consumer.commitSync(positions);
                    }
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> assigned) {
                    event("assigned", assigned);
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> lost) {
                    event("lost", lost);
                }
            });
            List<Map<String, Object>> records = new ArrayList<>();
            while (System.currentTimeMillis() < deadline
                    && (records.size() < count || consumer.assignment().size() < untilAssigned
                        || (stopFile != null && !stopFile.exists()))) {
                int before = records.size();
                for (ConsumerRecord<byte[], byte[]> rec : consumer.poll(Duration.ofMillis(200))) {
                    records.add(recordOf(rec));
                }
                if (commit && commitEachPoll && records.size() > before) {
                    consumer.commitSync(Duration.ofMillis(stepTimeoutMs));
                }
            }
            r.put("records", sortRecords(records));
            r.put("timedOut", records.size() < count || consumer.assignment().size() < untilAssigned);
            Set<TopicPartition> assignment = new HashSet<>(consumer.assignment());
            List<Object> assigned = new ArrayList<>();
            for (TopicPartition tp : sorted(assignment)) {
                assigned.add(List.of(tp.topic(), tp.partition()));
            }
            r.put("assignment", assigned);
            ConsumerGroupMetadata gm = consumer.groupMetadata();
            r.put("generationId", gm.generationId());
            r.put("memberId", gm.memberId());
            if (commit) {
                consumer.commitSync(Duration.ofMillis(stepTimeoutMs));
            }
            // Steps run while this consumer is still a member (e.g. describe or delete the live group).
            if (step.get("whileMember") != null) {
                List<Object> nested = new ArrayList<>();
                for (Object s : list(step.get("whileMember"))) {
                    nested.add(runStep(map(s)));
                }
                r.put("whileMember", nested);
            }
            List<Object> committed = new ArrayList<>();
            Map<TopicPartition, OffsetAndMetadata> got = consumer.committed(assignment,
                    Duration.ofMillis(stepTimeoutMs));
            for (TopicPartition tp : sorted(got.keySet())) {
                OffsetAndMetadata om = got.get(tp);
                Map<String, Object> c = new LinkedHashMap<>();
                c.put("topic", tp.topic());
                c.put("partition", tp.partition());
                c.put("offset", om == null ? null : om.offset());
                c.put("metadata", om == null ? null : om.metadata());
                committed.add(c);
            }
            r.put("committed", committed);
        }
    }

    // -------------------------------------------------------------------------------------------------- admin

    private Admin admin() {
        if (admin == null) {
            Properties props = new Properties();
            props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, String.valueOf(stepTimeoutMs));
            props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, String.valueOf(Math.min(stepTimeoutMs, 30000)));
            putAll(props, spec.get("adminConfig"));
            admin = Admin.create(props);
        }
        return admin;
    }

    private void closeAdmin() {
        if (admin != null) {
            admin.close(Duration.ofSeconds(5));
        }
    }

    private <T> T await(KafkaFuture<T> f) throws Exception {
        try {
            return f.get(stepTimeoutMs, TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            throw e.getCause() instanceof Exception ? (Exception) e.getCause() : e;
        }
    }

    private void createTopics(Map<String, Object> step, Map<String, Object> r) throws Exception {
        List<NewTopic> topics = new ArrayList<>();
        for (Object o : list(require(step, "topics"))) {
            Map<String, Object> t = map(o);
            NewTopic nt = new NewTopic((String) require(t, "name"), (int) num(t.getOrDefault("partitions", 1L)),
                    (short) num(t.getOrDefault("replicationFactor", 1L)));
            if (t.get("configs") != null) {
                Map<String, String> cfg = new LinkedHashMap<>();
                map(t.get("configs")).forEach((k, v) -> cfg.put(k, String.valueOf(v)));
                nt.configs(cfg);
            }
            topics.add(nt);
        }
        CreateTopicsOptions opts = new CreateTopicsOptions()
                .validateOnly(Boolean.TRUE.equals(step.get("validateOnly")));
        CreateTopicsResult res = admin().createTopics(topics, opts);
        Map<String, Object> out = new LinkedHashMap<>();
        for (NewTopic nt : topics) {
            Map<String, Object> one = new LinkedHashMap<>();
            try {
                await(res.values().get(nt.name()));
                one.put("numPartitions", await(res.numPartitions(nt.name())));
                one.put("replicationFactor", (int) await(res.replicationFactor(nt.name())));
                Map<String, Object> cfg = new TreeMap<>();
                for (ConfigEntry e : await(res.config(nt.name())).entries()) {
                    cfg.put(e.name(), e.value());
                }
                one.put("configs", cfg);
            } catch (Exception e) {
                one.put("error", describe(e));
            }
            out.put(nt.name(), one);
        }
        r.put("results", out);
    }

    private void listTopics(Map<String, Object> step, Map<String, Object> r) throws Exception {
        ListTopicsOptions opts = new ListTopicsOptions().listInternal(Boolean.TRUE.equals(step.get("internal")));
        Collection<TopicListing> listings = await(admin().listTopics(opts).listings());
        Map<String, Object> byName = new TreeMap<>();
        for (TopicListing l : listings) {
            byName.put(l.name(), Map.of("name", l.name(), "internal", l.isInternal()));
        }
        r.put("topics", new ArrayList<>(byName.values()));
    }

    private void describeTopics(Map<String, Object> step, Map<String, Object> r) {
        List<String> names = strings(require(step, "topics"));
        Map<String, KafkaFuture<TopicDescription>> futures = admin().describeTopics(names).topicNameValues();
        Map<String, Object> out = new LinkedHashMap<>();
        for (String name : names) {
            try {
                TopicDescription d = await(futures.get(name));
                Map<String, Object> one = new LinkedHashMap<>();
                one.put("internal", d.isInternal());
                List<Object> parts = new ArrayList<>();
                for (TopicPartitionInfo p : d.partitions()) {
                    Map<String, Object> pm = new LinkedHashMap<>();
                    pm.put("partition", p.partition());
                    pm.put("leader", p.leader() == null ? null : p.leader().id());
                    pm.put("replicas", nodeIds(p.replicas()));
                    pm.put("isr", nodeIds(p.isr()));
                    parts.add(pm);
                }
                one.put("partitions", parts);
                out.put(name, one);
            } catch (Exception e) {
                out.put(name, Map.of("error", describe(e)));
            }
        }
        r.put("results", out);
    }

    private void deleteTopics(Map<String, Object> step, Map<String, Object> r) {
        List<String> names = strings(require(step, "topics"));
        Map<String, KafkaFuture<Void>> futures = admin().deleteTopics(names).topicNameValues();
        Map<String, Object> out = new LinkedHashMap<>();
        for (String name : names) {
            try {
                await(futures.get(name));
                out.put(name, null);
            } catch (Exception e) {
                out.put(name, Map.of("error", describe(e)));
            }
        }
        r.put("results", out);
    }

    private void createPartitions(Map<String, Object> step, Map<String, Object> r) {
        Map<String, NewPartitions> req = new LinkedHashMap<>();
        map(require(step, "topics")).forEach((name, n) -> req.put(name, NewPartitions.increaseTo((int) num(n))));
        Map<String, KafkaFuture<Void>> futures = admin().createPartitions(req).values();
        Map<String, Object> out = new LinkedHashMap<>();
        for (String name : req.keySet()) {
            try {
                await(futures.get(name));
                out.put(name, null);
            } catch (Exception e) {
                out.put(name, Map.of("error", describe(e)));
            }
        }
        r.put("results", out);
    }

    private static ConfigResource resourceOf(Map<String, Object> m) {
        String type = String.valueOf(require(m, "type"));
        ConfigResource.Type t = "broker".equals(type) ? ConfigResource.Type.BROKER : ConfigResource.Type.TOPIC;
        return new ConfigResource(t, String.valueOf(require(m, "name")));
    }

    private void describeConfigs(Map<String, Object> step, Map<String, Object> r) {
        List<ConfigResource> resources = new ArrayList<>();
        for (Object o : list(require(step, "resources"))) {
            resources.add(resourceOf(map(o)));
        }
        Map<ConfigResource, KafkaFuture<Config>> futures = admin().describeConfigs(resources).values();
        Map<String, Object> out = new LinkedHashMap<>();
        for (ConfigResource res : resources) {
            try {
                Config cfg = await(futures.get(res));
                Map<String, Object> entries = new TreeMap<>();
                for (ConfigEntry e : cfg.entries()) {
                    Map<String, Object> em = new LinkedHashMap<>();
                    em.put("value", e.value());
                    em.put("source", e.source().name());
                    em.put("readOnly", e.isReadOnly());
                    em.put("isDefault", e.isDefault());
                    em.put("isSensitive", e.isSensitive());
                    entries.put(e.name(), em);
                }
                out.put(res.name(), Map.of("entries", entries));
            } catch (Exception e) {
                out.put(res.name(), Map.of("error", describe(e)));
            }
        }
        r.put("results", out);
    }

    private void alterConfigs(Map<String, Object> step, Map<String, Object> r) {
        Map<ConfigResource, Collection<AlterConfigOp>> changes = new LinkedHashMap<>();
        for (Object o : list(require(step, "resources"))) {
            Map<String, Object> m = map(o);
            List<AlterConfigOp> ops = new ArrayList<>();
            for (Object po : list(m.getOrDefault("ops", List.of()))) {
                Map<String, Object> op = map(po);
                Object value = op.get("value");
                ops.add(new AlterConfigOp(new ConfigEntry((String) require(op, "name"),
                        value == null ? null : String.valueOf(value)),
                        AlterConfigOp.OpType.valueOf(String.valueOf(op.getOrDefault("op", "SET")))));
            }
            changes.put(resourceOf(m), ops);
        }
        Map<ConfigResource, KafkaFuture<Void>> futures = admin().incrementalAlterConfigs(changes).values();
        Map<String, Object> out = new LinkedHashMap<>();
        for (ConfigResource res : changes.keySet()) {
            try {
                await(futures.get(res));
                out.put(res.name(), null);
            } catch (Exception e) {
                out.put(res.name(), Map.of("error", describe(e)));
            }
        }
        r.put("results", out);
    }

    @SuppressWarnings("deprecation")
    private void listGroups(Map<String, Object> step, Map<String, Object> r) throws Exception {
        ListConsumerGroupsOptions opts = new ListConsumerGroupsOptions();
        if (step.get("states") != null) {
            Set<GroupState> states = new HashSet<>();
            for (String st : strings(step.get("states"))) {
                states.add(GroupState.parse(st));
            }
            opts.inGroupStates(states);
        }
        Collection<ConsumerGroupListing> listings = await(admin().listConsumerGroups(opts).all());
        Map<String, Object> byId = new TreeMap<>();
        for (ConsumerGroupListing l : listings) {
            Map<String, Object> g = new LinkedHashMap<>();
            g.put("groupId", l.groupId());
            g.put("state", l.groupState().map(Object::toString).orElse(null));
            g.put("type", l.type().map(Object::toString).orElse(null));
            g.put("simple", l.isSimpleConsumerGroup());
            byId.put(l.groupId(), g);
        }
        r.put("groups", new ArrayList<>(byId.values()));
    }

    private void describeGroups(Map<String, Object> step, Map<String, Object> r) {
        List<String> ids = strings(require(step, "groups"));
        Map<String, KafkaFuture<ConsumerGroupDescription>> futures = admin().describeConsumerGroups(ids).describedGroups();
        Map<String, Object> out = new LinkedHashMap<>();
        for (String id : ids) {
            try {
                ConsumerGroupDescription d = await(futures.get(id));
                Map<String, Object> g = new LinkedHashMap<>();
                g.put("state", d.groupState().toString());
                g.put("simple", d.isSimpleConsumerGroup());
                g.put("assignor", d.partitionAssignor());
                g.put("coordinator", d.coordinator() == null ? null : d.coordinator().id());
                g.put("type", d.type().toString());
                List<Object> members = new ArrayList<>();
                for (MemberDescription m : d.members()) {
                    Map<String, Object> mm = new LinkedHashMap<>();
                    mm.put("memberId", m.consumerId());
                    mm.put("clientId", m.clientId());
                    mm.put("host", m.host());
                    List<Object> tps = new ArrayList<>();
                    for (TopicPartition tp : sorted(m.assignment().topicPartitions())) {
                        tps.add(List.of(tp.topic(), tp.partition()));
                    }
                    mm.put("assignment", tps);
                    members.add(mm);
                }
                g.put("members", members);
                out.put(id, g);
            } catch (Exception e) {
                out.put(id, Map.of("error", describe(e)));
            }
        }
        r.put("results", out);
    }

    private void listGroupOffsets(Map<String, Object> step, Map<String, Object> r) throws Exception {
        String group = (String) require(step, "group");
        Map<TopicPartition, OffsetAndMetadata> offsets =
                await(admin().listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata());
        List<Object> out = new ArrayList<>();
        for (TopicPartition tp : sorted(offsets.keySet())) {
            OffsetAndMetadata om = offsets.get(tp);
            Map<String, Object> c = new LinkedHashMap<>();
            c.put("topic", tp.topic());
            c.put("partition", tp.partition());
            c.put("offset", om == null ? null : om.offset());
            c.put("metadata", om == null ? null : om.metadata());
            out.add(c);
        }
        r.put("offsets", out);
    }

    private void deleteGroups(Map<String, Object> step, Map<String, Object> r) {
        List<String> ids = strings(require(step, "groups"));
        Map<String, KafkaFuture<Void>> futures = admin().deleteConsumerGroups(ids).deletedGroups();
        Map<String, Object> out = new LinkedHashMap<>();
        for (String id : ids) {
            try {
                await(futures.get(id));
                out.put(id, null);
            } catch (Exception e) {
                out.put(id, Map.of("error", describe(e)));
            }
        }
        r.put("results", out);
    }

    private void alterGroupOffsets(Map<String, Object> step, Map<String, Object> r) {
        String group = (String) require(step, "group");
        Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
        for (Object o : list(require(step, "offsets"))) {
            Map<String, Object> m = map(o);
            offsets.put(new TopicPartition((String) require(m, "topic"), (int) num(require(m, "partition"))),
                    new OffsetAndMetadata(num(require(m, "offset")), String.valueOf(m.getOrDefault("metadata", ""))));
        }
        AlterConsumerGroupOffsetsResult res = admin().alterConsumerGroupOffsets(group, offsets);
        Map<String, Object> out = new LinkedHashMap<>();
        for (TopicPartition tp : offsets.keySet()) {
            try {
                await(res.partitionResult(tp));
                out.put(tp.toString(), null);
            } catch (Exception e) {
                out.put(tp.toString(), Map.of("error", describe(e)));
            }
        }
        r.put("results", out);
    }

    private void describeCluster(Map<String, Object> step, Map<String, Object> r) throws Exception {
        DescribeClusterResult res = admin().describeCluster();
        r.put("clusterId", await(res.clusterId()));
        Node controller = await(res.controller());
        r.put("controller", controller == null ? null : controller.id());
        List<Object> nodes = new ArrayList<>();
        for (Node n : await(res.nodes())) {
            nodes.add(Map.of("id", n.id(), "host", n.host(), "port", n.port()));
        }
        r.put("nodes", nodes);
    }

    private void listOffsets(Map<String, Object> step, Map<String, Object> r) throws Exception {
        String topic = (String) require(step, "topic");
        Object spec = step.getOrDefault("spec", "latest");
        OffsetSpec which;
        if (spec instanceof Number) {
            which = OffsetSpec.forTimestamp(num(spec));
        } else if ("earliest".equals(spec)) {
            which = OffsetSpec.earliest();
        } else if ("maxTimestamp".equals(spec)) {
            which = OffsetSpec.maxTimestamp();
        } else {
            which = OffsetSpec.latest();
        }
        Map<TopicPartition, OffsetSpec> req = new LinkedHashMap<>();
        for (Object p : list(require(step, "partitions"))) {
            req.put(new TopicPartition(topic, (int) num(p)), which);
        }
        Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> got = await(admin().listOffsets(req).all());
        Map<String, Object> out = new TreeMap<>();
        got.forEach((tp, info) -> out.put(String.valueOf(tp.partition()),
                Map.of("offset", info.offset(), "timestamp", info.timestamp())));
        r.put("offsets", out);
    }

    // ----------------------------------------------------------------------------------------------- transactions

    private void txnProduce(Map<String, Object> step, Map<String, Object> r) throws Exception {
        String topic = (String) require(step, "topic");
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, (String) require(step, "transactionalId"));
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, String.valueOf(stepTimeoutMs));
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, String.valueOf(stepTimeoutMs / 2));
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, String.valueOf(stepTimeoutMs));
        putAll(props, step.get("config"));
        List<Object> all = new ArrayList<>();
        r.put("metadata", all);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            producer.initTransactions();
            for (Object t : list(require(step, "transactions"))) {
                Map<String, Object> txn = map(t);
                producer.beginTransaction();
                List<Future<RecordMetadata>> futures = new ArrayList<>();
                for (Object o : list(txn.get("records"))) {
                    Map<String, Object> m = map(o);
                    Integer partition = m.get("partition") == null ? null : (int) num(m.get("partition"));
                    futures.add(producer.send(new ProducerRecord<>(topic, partition, null, unb64(m.get("key")),
                            unb64(m.get("value")))));
                }
                producer.flush();
                List<Object> metadata = new ArrayList<>();
                for (Future<RecordMetadata> f : futures) {
                    RecordMetadata rm = f.get(stepTimeoutMs, TimeUnit.MILLISECONDS);
                    metadata.add(Map.of("partition", rm.partition(), "offset", rm.offset()));
                }
                all.add(metadata);
                if ("abort".equals(txn.get("action"))) {
                    producer.abortTransaction();
                } else {
                    producer.commitTransaction();
                }
            }
        }
    }

    private void listTransactions(Map<String, Object> step, Map<String, Object> r) throws Exception {
        List<Object> out = new ArrayList<>();
        Collection<TransactionListing> got = await(admin().listTransactions().all());
        got.stream().sorted((a, b) -> a.transactionalId().compareTo(b.transactionalId())).forEach(x -> {
            Map<String, Object> one = new LinkedHashMap<>();
            one.put("transactionalId", x.transactionalId());
            one.put("producerId", x.producerId());
            one.put("state", x.state().toString());
            out.add(one);
        });
        r.put("transactions", out);
    }

    private void describeTransactions(Map<String, Object> step, Map<String, Object> r) throws Exception {
        Map<String, Object> out = new TreeMap<>();
        for (Object o : list(require(step, "ids"))) {
            String id = (String) o;
            try {
                TransactionDescription d = await(admin().describeTransactions(List.of(id)).description(id));
                Map<String, Object> one = new LinkedHashMap<>();
                one.put("coordinatorId", d.coordinatorId());
                one.put("state", d.state().toString());
                one.put("producerId", d.producerId());
                one.put("producerEpoch", d.producerEpoch());
                one.put("transactionTimeoutMs", d.transactionTimeoutMs());
                one.put("transactionStartTimeMs", d.transactionStartTimeMs().isPresent()
                        ? d.transactionStartTimeMs().getAsLong() : null);
                one.put("topicPartitions", new ArrayList<>(new TreeSet<>(
                        d.topicPartitions().stream().map(TopicPartition::toString).toList())));
                out.put(id, one);
            } catch (Exception e) {
                out.put(id, Map.of("error", describe(e)));
            }
        }
        r.put("results", out);
    }

    private void describeProducers(Map<String, Object> step, Map<String, Object> r) throws Exception {
        String topic = (String) require(step, "topic");
        DescribeProducersOptions options = new DescribeProducersOptions();
        if (step.get("brokerId") != null) {
            options.brokerId((int) num(step.get("brokerId")));
        }
        List<TopicPartition> tps = new ArrayList<>();
        for (Object p : list(require(step, "partitions"))) {
            tps.add(new TopicPartition(topic, (int) num(p)));
        }
        DescribeProducersResult res = admin().describeProducers(tps, options);
        Map<String, Object> out = new TreeMap<>();
        for (TopicPartition tp : tps) {
            try {
                List<Object> producers = new ArrayList<>();
                for (ProducerState s : await(res.partitionResult(tp)).activeProducers()) {
                    Map<String, Object> one = new LinkedHashMap<>();
                    one.put("producerId", s.producerId());
                    one.put("producerEpoch", s.producerEpoch());
                    one.put("lastSequence", s.lastSequence());
                    one.put("lastTimestamp", s.lastTimestamp());
                    one.put("coordinatorEpoch", s.coordinatorEpoch().isPresent()
                            ? s.coordinatorEpoch().getAsInt() : null);
                    one.put("currentTransactionStartOffset", s.currentTransactionStartOffset().isPresent()
                            ? s.currentTransactionStartOffset().getAsLong() : null);
                    producers.add(one);
                }
                out.put(String.valueOf(tp.partition()), producers);
            } catch (Exception e) {
                out.put(String.valueOf(tp.partition()), Map.of("error", describe(e)));
            }
        }
        r.put("results", out);
    }

    private void abortTransaction(Map<String, Object> step, Map<String, Object> r) throws Exception {
        TopicPartition tp = new TopicPartition((String) require(step, "topic"), (int) num(require(step, "partition")));
        await(admin().abortTransaction(new AbortTransactionSpec(tp, num(require(step, "producerId")),
                (short) num(require(step, "producerEpoch")), (int) num(require(step, "coordinatorEpoch")))).all());
    }

    private void alterClientQuotas(Map<String, Object> step, Map<String, Object> r) throws Exception {
        List<org.apache.kafka.common.quota.ClientQuotaAlteration> alterations = new ArrayList<>();
        List<org.apache.kafka.common.quota.ClientQuotaEntity> entities = new ArrayList<>();
        for (Object o : list(require(step, "entries"))) {
            Map<String, Object> e = map(o);
            Map<String, String> parts = new java.util.HashMap<>();   // null names (the default) allowed
            for (Map.Entry<String, Object> p : map(require(e, "entity")).entrySet()) {
                parts.put(p.getKey(), (String) p.getValue());
            }
            List<org.apache.kafka.common.quota.ClientQuotaAlteration.Op> ops = new ArrayList<>();
            for (Object op : list(require(e, "ops"))) {
                Map<String, Object> m = map(op);
                Object v = m.get("value");
                ops.add(new org.apache.kafka.common.quota.ClientQuotaAlteration.Op((String) require(m, "key"),
                        v == null ? null : ((Number) v).doubleValue()));
            }
            org.apache.kafka.common.quota.ClientQuotaEntity entity =
                    new org.apache.kafka.common.quota.ClientQuotaEntity(parts);
            entities.add(entity);
            alterations.add(new org.apache.kafka.common.quota.ClientQuotaAlteration(entity, ops));
        }
        Map<org.apache.kafka.common.quota.ClientQuotaEntity, KafkaFuture<Void>> futures = admin().alterClientQuotas(
                alterations, new org.apache.kafka.clients.admin.AlterClientQuotasOptions().validateOnly(
                        Boolean.TRUE.equals(step.get("validateOnly")))).values();
        List<Object> out = new ArrayList<>();
        for (org.apache.kafka.common.quota.ClientQuotaEntity entity : entities) {
            try {
                await(futures.get(entity));
                out.add(null);
            } catch (Exception e) {
                out.add(Map.of("error", describe(e)));
            }
        }
        r.put("results", out);
    }

    private void describeClientQuotas(Map<String, Object> step, Map<String, Object> r) throws Exception {
        List<org.apache.kafka.common.quota.ClientQuotaFilterComponent> components = new ArrayList<>();
        for (Object o : list(require(step, "components"))) {
            Map<String, Object> m = map(o);
            String type = (String) require(m, "type");
            String match = (String) require(m, "match");
            components.add(match.equals("exact")
                    ? org.apache.kafka.common.quota.ClientQuotaFilterComponent.ofEntity(type, (String) m.get("name"))
                    : match.equals("default")
                    ? org.apache.kafka.common.quota.ClientQuotaFilterComponent.ofDefaultEntity(type)
                    : org.apache.kafka.common.quota.ClientQuotaFilterComponent.ofEntityType(type));
        }
        org.apache.kafka.common.quota.ClientQuotaFilter filter = Boolean.TRUE.equals(step.get("strict"))
                ? org.apache.kafka.common.quota.ClientQuotaFilter.containsOnly(components)
                : org.apache.kafka.common.quota.ClientQuotaFilter.contains(components);
        Map<org.apache.kafka.common.quota.ClientQuotaEntity, Map<String, Double>> got =
                await(admin().describeClientQuotas(filter).entities());
        List<Map<String, Object>> entries = new ArrayList<>();
        for (Map.Entry<org.apache.kafka.common.quota.ClientQuotaEntity, Map<String, Double>> e : got.entrySet()) {
            Map<String, Object> entry = new LinkedHashMap<>();
            entry.put("entity", new TreeMap<>(e.getKey().entries()));
            entry.put("values", new TreeMap<>(e.getValue()));
            entries.add(entry);
        }
        entries.sort(java.util.Comparator.comparing(m -> String.valueOf(m.get("entity"))));
        r.put("entries", entries);
    }

    // ------------------------------------------------------------------------------------------------ helpers

    private static Map<String, Object> recordOf(ConsumerRecord<byte[], byte[]> rec) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("topic", rec.topic());
        m.put("partition", rec.partition());
        m.put("offset", rec.offset());
        m.put("key", b64(rec.key()));
        m.put("value", b64(rec.value()));
        List<Object> headers = new ArrayList<>();
        for (Header h : rec.headers()) {
            headers.add(java.util.Arrays.asList(h.key(), b64(h.value())));
        }
        m.put("headers", headers);
        m.put("timestamp", rec.timestamp());
        m.put("timestampType", rec.timestampType().name);
        return m;
    }

    private static List<Map<String, Object>> sortRecords(List<Map<String, Object>> records) {
        records.sort((a, b) -> {
            int c = ((String) a.get("topic")).compareTo((String) b.get("topic"));
            if (c == 0) {
                c = Integer.compare((Integer) a.get("partition"), (Integer) b.get("partition"));
            }
            return c != 0 ? c : Long.compare((Long) a.get("offset"), (Long) b.get("offset"));
        });
        return records;
    }

    private static Map<String, Object> byPartition(Map<TopicPartition, Long> offsets) {
        Map<String, Object> out = new TreeMap<>();
        offsets.forEach((tp, off) -> out.put(String.valueOf(tp.partition()), off));
        return out;
    }

    private static List<TopicPartition> sorted(Collection<TopicPartition> tps) {
        TreeSet<TopicPartition> s = new TreeSet<>((a, b) -> {
            int c = a.topic().compareTo(b.topic());
            return c != 0 ? c : Integer.compare(a.partition(), b.partition());
        });
        s.addAll(tps);
        return new ArrayList<>(s);
    }

    private static List<Object> nodeIds(List<Node> nodes) {
        List<Object> ids = new ArrayList<>();
        for (Node n : nodes) {
            ids.add(n.id());
        }
        return ids;
    }

    /** The root cause of a failure as {"type": simple class name, "message": ...}. */
    private static Map<String, Object> describe(Throwable e) {
        Throwable t = e;
        while ((t instanceof ExecutionException || t instanceof java.util.concurrent.CompletionException)
                && t.getCause() != null) {
            t = t.getCause();
        }
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("type", t.getClass().getSimpleName());
        m.put("message", String.valueOf(t.getMessage()));
        List<Object> causes = new ArrayList<>();
        for (Throwable c = t.getCause(); c != null && causes.size() < 5; c = c.getCause()) {
            causes.add(c.getClass().getSimpleName() + ": " + c.getMessage());
        }
        if (!causes.isEmpty()) {
            m.put("causes", causes);
        }
        return m;
    }

    private static void putAll(Properties props, Object overrides) {
        if (overrides != null) {
            map(overrides).forEach((k, v) -> props.put(k, String.valueOf(v)));
        }
    }

    private static Object require(Map<String, Object> m, String key) {
        Object v = m.get(key);
        if (v == null) {
            throw new IllegalArgumentException("spec field '" + key + "' is required");
        }
        return v;
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> map(Object o) {
        if (!(o instanceof Map)) {
            throw new IllegalArgumentException("expected a JSON object, got " + o);
        }
        return (Map<String, Object>) o;
    }

    @SuppressWarnings("unchecked")
    private static List<Object> list(Object o) {
        if (!(o instanceof List)) {
            throw new IllegalArgumentException("expected a JSON array, got " + o);
        }
        return (List<Object>) o;
    }

    private static List<String> strings(Object o) {
        List<String> out = new ArrayList<>();
        for (Object x : list(o)) {
            out.add(String.valueOf(x));
        }
        return out;
    }

    private static long num(Object o) {
        if (!(o instanceof Number)) {
            throw new IllegalArgumentException("expected a number, got " + o);
        }
        return ((Number) o).longValue();
    }

    private static byte[] unb64(Object o) {
        return o == null ? null : Base64.getDecoder().decode((String) o);
    }

    private static String b64(byte[] b) {
        return b == null ? null : Base64.getEncoder().encodeToString(b);
    }

    /** kafka-clients' version, from the properties file its jar carries (its AppInfoParser moved in 4.x). */
    private static String clientVersion() throws IOException {
        Properties p = new Properties();
        try (InputStream in = KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            if (in != null) {
                p.load(in);
            }
        }
        return p.getProperty("version", "unknown");
    }

    private static String readAll(InputStream in) throws IOException {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        in.transferTo(buf);
        return buf.toString(StandardCharsets.UTF_8);
    }
}
