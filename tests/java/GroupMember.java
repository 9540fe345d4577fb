import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A Java {@code KafkaConsumer} group member, the second opinion for the group interop tests.
 *
 * <p>Usage: {@code GroupMember <bootstrap> <topic> <group> <classic|consumer>}.
 *
 * <p>Subscribes (classic: the cooperative-sticky assignor, 6 s session, 500 ms heartbeats;
 * consumer: KIP-848, the broker's timeouts), reads from the committed offsets (earliest when
 * none), commits synchronously after every poll (again after the next poll when a rebalance is
 * in progress) and in {@code onPartitionsRevoked}, and prints
 * one line per event, flushed at once:
 * <pre>
 * READY
 * ASSIGNED 0,3        (partition numbers; after the callback returns)
 * REVOKED 3           (after the commit in the callback)
 * LOST 1
 * RECORD 0 17         (partition, offset)
 * </pre>
 * It leaves the group and exits when its stdin closes.
 */
public final class GroupMember {
    public static void main(String[] args) throws Exception {
        if (args.length != 4 || !(args[3].equals("classic") || args[3].equals("consumer"))) {
            System.err.println("usage: GroupMember <bootstrap> <topic> <group> <classic|consumer>");
            System.exit(2);
        }
        String topic = args[1];
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, args[2]);
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, args[3]);
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        if (args[3].equals("classic")) {
            props.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName());
            props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 6000);
            props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 500);
        }

        AtomicBoolean stop = new AtomicBoolean(false);
        Thread stdin = new Thread(() -> {
            try (BufferedReader reader = new BufferedReader(new InputStreamReader(System.in))) {
                while (reader.readLine() != null) {
                    // Only the end of input matters.
                }
            } catch (Exception ignored) {
                // Treated as the end of input.
            }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();

        Map<TopicPartition, OffsetAndMetadata> processed = new HashMap<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    consumer.commitSync(processed);
                    processed.clear();
                    print("REVOKED", partitions);
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    print("ASSIGNED", partitions);
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> partitions) {
                    processed.keySet().removeAll(partitions);
                    print("LOST", partitions);
                }
            });
            System.out.println("READY");
            System.out.flush();
            while (!stop.get()) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<byte[], byte[]> record : records) {
                    System.out.println("RECORD " + record.partition() + " " + record.offset());
                    processed.put(new TopicPartition(record.topic(), record.partition()),
                            new OffsetAndMetadata(record.offset() + 1));
                }
                System.out.flush();
                if (!processed.isEmpty()) {
                    try {
                        consumer.commitSync(processed);
                        processed.clear();
                    } catch (RebalanceInProgressException | CommitFailedException e) {
                        // Classic: the group is between JoinGroup and SyncGroup. KIP-848: the
                        // commit raced an epoch bump (STALE_MEMBER_EPOCH). Either way the next
                        // poll brings the member up to date (committing in onPartitionsRevoked
                        // what moves, dropping in onPartitionsLost what is gone), and the commit
                        // is tried again after it.
                        System.err.println("GroupMember: commit after the next poll: " + e.getMessage());
                    }
                }
            }
        }
        System.out.println("CLOSED");
        System.out.flush();
    }

    private static void print(String what, Collection<TopicPartition> partitions) {
        if (partitions.isEmpty()) {
            return;
        }
        StringBuilder line = new StringBuilder(what).append(' ');
        boolean first = true;
        for (TopicPartition partition : partitions) {
            if (!first) {
                line.append(',');
            }
            line.append(partition.partition());
            first = false;
        }
        System.out.println(line);
        System.out.flush();
    }
}
