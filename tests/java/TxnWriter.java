import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Optional;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Writes a topic whose log mixes committed and aborted transactions from two transactional
 * producers, interleaved, with non-transactional records in between; then leaves one
 * transaction open until stdin closes.
 *
 * <p>Usage: {@code TxnWriter <bootstrap> <topic> [compression]}. The topic must not exist; it is
 * created with 3 partitions and the broker's default replication factor. {@code compression} is
 * the producers' {@code compression.type} (default {@code none}).
 *
 * <p>The content is deterministic (offsets too, on a fresh topic). Keys are
 * {@code p<partition>-t<txn>-<i>} for transactional records and {@code p<partition>-plain-<n>-<i>}
 * for the others; values are the key prefixed by {@code v-}. Timestamps count up by one second
 * from 1700000000000. Records with an even index carry the headers
 * {@code [trace=a, trace=b, nullh=null]} (a repeated key and a null value), the others
 * {@code [src=txnwriter]}.
 *
 * <p>Transactions (A and B are the two transactional producers):
 * <pre>
 *   t1 A commit  p0 p1 p2      interleaved with t2
 *   t2 B abort   p0 p2 p1
 *   t3 A abort   p0 p1 p2      interleaved with t4
 *   t4 B commit  p1
 *   t5 B commit  p0 p2
 *   t6 A commit  p2 p0         interleaved with t7
 *   t7 B commit  p0 p1
 *   t8 A abort   p2 p0         the last thing written to partition 2 is its ABORT marker
 *   t9 B open    p0 p1         left open: the last stable offset of p0 and p1 stops at its start
 * </pre>
 *
 * <p>After t9's records are flushed it prints {@code READY} on stdout, waits for EOF on stdin,
 * then aborts t9 and exits 0. Nothing else goes to stdout.
 */
public final class TxnWriter {
    private static final long BASE_TIMESTAMP = 1_700_000_000_000L;
    private static final int PARTITIONS = 3;
    private static String compression = "none";

    private final String topic;
    private long clock = BASE_TIMESTAMP;
    private int plainBatch = 0;

    private TxnWriter(String topic) {
        this.topic = topic;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2 && args.length != 3) {
            System.err.println("usage: TxnWriter <bootstrap> <topic> [compression]");
            System.exit(2);
        }
        String bootstrap = args[0];
        String topic = args[1];
        if (args.length == 3) {
            compression = args[2];
        }
        createTopic(bootstrap, topic);
        new TxnWriter(topic).run(bootstrap);
    }

    private static void createTopic(String bootstrap, String topic) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(props)) {
            // Fails with TopicExistsException when the topic is there already.
            admin.createTopics(List.of(new NewTopic(topic, Optional.of(PARTITIONS), Optional.empty())))
                .all().get();
        }
    }

    private void run(String bootstrap) throws Exception {
        try (KafkaProducer<String, String> a = transactional(bootstrap, "a");
             KafkaProducer<String, String> b = transactional(bootstrap, "b");
             KafkaProducer<String, String> plain = new KafkaProducer<>(baseProps(bootstrap))) {
            a.initTransactions();
            b.initTransactions();

            plain(plain, 0, 1, 2);

            // t1 (A, committed) and t2 (B, aborted) interleave on partitions 0, 1 and 2.
            a.beginTransaction();
            send(a, 0, 1, 2);
            send(a, 1, 1, 2);
            b.beginTransaction();
            send(b, 0, 2, 2);
            send(b, 2, 2, 2);
            send(a, 2, 1, 1);
            a.commitTransaction();
            plain(plain, 0, 1);
            send(b, 1, 2, 2);
            b.abortTransaction();

            // t3 (A, aborted) and t4 (B, committed) interleave.
            a.beginTransaction();
            send(a, 0, 3, 1);
            send(a, 1, 3, 1);
            send(a, 2, 3, 2);
            b.beginTransaction();
            send(b, 1, 4, 2);
            b.commitTransaction();
            a.abortTransaction();
            plain(plain, 1);

            // t5 (B, committed) alone.
            b.beginTransaction();
            send(b, 0, 5, 2);
            send(b, 2, 5, 1);
            b.commitTransaction();

            // t6 (A, committed) and t7 (B, committed) interleave.
            a.beginTransaction();
            send(a, 2, 6, 2);
            b.beginTransaction();
            send(b, 0, 7, 1);
            send(a, 0, 6, 1);
            send(b, 1, 7, 1);
            a.commitTransaction();
            b.commitTransaction();
            plain(plain, 0, 1, 2);

            // t8 (A, aborted): partition 2 ends with this ABORT marker; nothing follows there.
            a.beginTransaction();
            send(a, 2, 8, 2);
            send(a, 0, 8, 1);
            a.abortTransaction();
            plain(plain, 0, 1);

            // Commit and abort return before the coordinator has written every marker; wait until
            // they are all in the logs, so that readers started after READY agree on the end offsets.
            waitForMarkers(bootstrap);

            // t9 (B) stays open until stdin closes.
            b.beginTransaction();
            send(b, 0, 9, 2);
            send(b, 1, 9, 2);
            System.out.println("READY");
            System.out.flush();
            byte[] sink = new byte[4096];
            while (System.in.read(sink) != -1) {
                // Wait for EOF.
            }
            b.abortTransaction();
        }
    }

    /** Waits (up to 30 s) until every partition's last stable offset equals its high watermark. */
    private void waitForMarkers(String bootstrap) throws Exception {
        List<org.apache.kafka.common.TopicPartition> partitions = new java.util.ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) {
            partitions.add(new org.apache.kafka.common.TopicPartition(topic, p));
        }
        long deadline = System.nanoTime() + java.time.Duration.ofSeconds(30).toNanos();
        try (org.apache.kafka.clients.consumer.KafkaConsumer<byte[], byte[]> committed = consumer(bootstrap, "read_committed");
             org.apache.kafka.clients.consumer.KafkaConsumer<byte[], byte[]> uncommitted = consumer(bootstrap, "read_uncommitted")) {
            while (true) {
                java.util.Map<org.apache.kafka.common.TopicPartition, Long> stable =
                    committed.endOffsets(partitions, java.time.Duration.ofSeconds(10));
                java.util.Map<org.apache.kafka.common.TopicPartition, Long> high =
                    uncommitted.endOffsets(partitions, java.time.Duration.ofSeconds(10));
                if (stable.equals(high)) {
                    return;
                }
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("transaction markers not written after 30 s: " + stable + " vs " + high);
                }
                Thread.sleep(50);
            }
        }
    }

    private static org.apache.kafka.clients.consumer.KafkaConsumer<byte[], byte[]> consumer(String bootstrap, String isolation) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("isolation.level", isolation);
        props.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        props.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        return new org.apache.kafka.clients.consumer.KafkaConsumer<>(props);
    }

    private KafkaProducer<String, String> transactional(String bootstrap, String name) {
        Properties props = baseProps(bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "txnwriter-" + topic + "-" + name);
        props.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 120_000);
        return new KafkaProducer<>(props);
    }

    private static Properties baseProps(String bootstrap) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
        props.put(ProducerConfig.LINGER_MS_CONFIG, 0);
        return props;
    }

    /** Sends {@code count} records of transaction {@code txn} to {@code partition} as one batch. */
    private void send(KafkaProducer<String, String> producer, int partition, int txn, int count)
            throws Exception {
        for (int i = 0; i < count; i++) {
            producer.send(record(partition, "p" + partition + "-t" + txn + "-" + i, i));
        }
        // Flushing after every step puts each step in its own batch, in this order in the log.
        producer.flush();
    }

    /** One non-transactional record to each of {@code partitions}. */
    private void plain(KafkaProducer<String, String> producer, int... partitions) throws Exception {
        int n = plainBatch++;
        for (int partition : partitions) {
            producer.send(record(partition, "p" + partition + "-plain-" + n + "-0", 0)).get();
        }
    }

    private ProducerRecord<String, String> record(int partition, String key, int index) {
        RecordHeaders headers = new RecordHeaders();
        if (index % 2 == 0) {
            headers.add("trace", "a".getBytes(StandardCharsets.UTF_8));
            headers.add("trace", "b".getBytes(StandardCharsets.UTF_8));
            headers.add("nullh", null);
        } else {
            headers.add("src", "txnwriter".getBytes(StandardCharsets.UTF_8));
        }
        long timestamp = clock;
        clock += 1000;
        return new ProducerRecord<>(topic, partition, timestamp, key, "v-" + key, headers);
    }
}
