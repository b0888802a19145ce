package kbroker.streams;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.internals.AppInfoParser;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Kafka's WordCountDemo logic (org.apache.kafka.streams.examples.wordcount.WordCountDemo, written here) run by
 * Apache Kafka's Streams library against a broker: the oracle of kbroker.streams' WordCount and a broker-side
 * compatibility check (Streams' InternalTopicManager creating the repartition and changelog topics, its
 * StreamsPartitionAssignor's group, exactly_once_v2 transactions).
 *
 * <pre>
 * java -cp target/kbroker-kafka-streams.jar:$(cat target/classpath.txt) kbroker.streams.WordCount \
 *     BOOTSTRAP STATE_DIR INPUT_TOPIC APP_ID:OUTPUT_TOPIC:GUARANTEE [APP_ID:OUTPUT_TOPIC:GUARANTEE ...] [key=value ...]
 * </pre>
 *
 * One KafkaStreams instance per APP_ID spec, all in this JVM (a JVM start costs seconds on 2 cores), each with the
 * demo's topology and configs (String serdes, statestore.cache.max.bytes=0: every count update is forwarded,
 * auto.offset.reset=earliest) plus the extra key=value Streams configs given (applied to every instance).
 *
 * Protocol on stdout, one line each: {@code VERSION <kafka-streams version>}, {@code TOPOLOGY <app id>} followed by
 * the topology description, {@code STATE <app id> <new state> <old state>} at every state change, and at the end
 * {@code CLOSED <app id> <final state> <true|false: closed within the bound>}. The JVM runs until its stdin reaches
 * end-of-file or a line "stop", then closes every instance (commit, leave the group: CloseOptions LEAVE_GROUP,
 * KIP-1092) and exits 0; 2 when an instance reached ERROR.
 */
public final class WordCount {
    private WordCount() {
    }

    static Topology wordCountTopology(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> source = builder.stream(input);
        KTable<String, Long> counts = source
            .flatMapValues(value -> Arrays.asList(value.toLowerCase(Locale.getDefault()).split("\\W+")))
            .groupBy((key, value) -> value)
            .count();
        counts.toStream().to(output, Produced.with(Serdes.String(), Serdes.Long()));
        return builder.build();
    }

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 4) {
            System.err.println("usage: WordCount BOOTSTRAP STATE_DIR INPUT_TOPIC APP_ID:OUTPUT:GUARANTEE... [k=v...]");
            System.exit(64);
        }
        String bootstrap = args[0];
        String stateDir = args[1];
        String input = args[2];
        List<String[]> specs = new ArrayList<>();
        Properties extra = new Properties();
        for (int i = 3; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq > 0) {
                extra.setProperty(args[i].substring(0, eq), args[i].substring(eq + 1));
            } else {
                String[] spec = args[i].split(":");
                if (spec.length != 3) {
                    System.err.println("bad spec " + args[i] + " (APP_ID:OUTPUT_TOPIC:GUARANTEE)");
                    System.exit(64);
                }
                specs.add(spec);
            }
        }
        say("VERSION " + AppInfoParser.getVersion());

        List<KafkaStreams> instances = new ArrayList<>();
        List<String> appIds = new ArrayList<>();
        boolean[] failed = {false};
        for (String[] spec : specs) {
            String appId = spec[0];
            Properties props = new Properties();
            props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
            props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
            props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
            props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
            props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
            props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, spec[2]);
            props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            props.putAll(extra);
            Topology topology = wordCountTopology(input, spec[1]);
            say("TOPOLOGY " + appId);
            say(topology.describe().toString().trim());
            KafkaStreams streams = new KafkaStreams(topology, props);
            streams.setStateListener((now, before) -> {
                say("STATE " + appId + " " + now + " " + before);
                if (now == KafkaStreams.State.ERROR) {
                    failed[0] = true;
                }
            });
            streams.setUncaughtExceptionHandler(exc -> {
                exc.printStackTrace();
                say("EXCEPTION " + appId + " " + exc);
                return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse
                    .SHUTDOWN_CLIENT;
            });
            instances.add(streams);
            appIds.add(appId);
        }
        for (KafkaStreams streams : instances) {
            streams.start();
        }

        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = stdin.readLine()) != null) {
            if (line.trim().equals("stop")) {
                break;
            }
        }
        for (int i = 0; i < instances.size(); i++) {
            // Leave the group (Streams' default close does not: a restarted instance would get its tasks back
            // without a rebalance), so the reset tool and the tests need not wait for the session timeout.
            boolean done = instances.get(i).close(CloseOptions.groupMembershipOperation(
                CloseOptions.GroupMembershipOperation.LEAVE_GROUP).withTimeout(Duration.ofSeconds(30)));
            say("CLOSED " + appIds.get(i) + " " + instances.get(i).state() + " " + done);
        }
        System.exit(failed[0] ? 2 : 0);
    }
}
