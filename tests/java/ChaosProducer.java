import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Writes transactions to a topic until stdin closes, through broker failures: the producer of
 * the reliability tests.
 *
 * <p>Usage: {@code ChaosProducer <bootstrap> <topic> <partitions>}. Idempotent and transactional
 * (acks=all). Each transaction writes 10 records spread over the partitions, values
 * {@code {"p":<partition>,"n":<sequence>,"txn":<transaction>}}; every fourth transaction is
 * aborted on purpose. When a send or commit fails (a broker was killed, leadership moved), the
 * transaction is aborted if possible, or the producer is closed and a new one takes over the same
 * transactional id (which fences and aborts what the old one left open), and writing goes on.
 * Whatever the outcome of a failed commit, the broker decides it; the checker reads the broker.
 *
 * <p>Prints {@code READY} after its first transaction committed after an aborted one (the
 * fifth, without failures): from then on the topic holds both, whatever the pace. The tests
 * assert that the checker saw aborted records, and on a loaded CI machine a producer that was
 * ready after its first commit once wrote only three transactions in a whole test. On EOF of
 * stdin it stops and prints {@code committed=<n> aborted=<n> failed=<n>} (transactions), then
 * exits 0.
 */
public final class ChaosProducer {
    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: ChaosProducer <bootstrap> <topic> <partitions>");
            System.exit(2);
        }
        String bootstrap = args[0];
        String topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        AtomicBoolean stop = new AtomicBoolean(false);
        Thread watcher = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                while (in.readLine() != null) {
                    // Only EOF matters.
                }
            } catch (Exception ignored) {
                // Treat a broken stdin as EOF.
            }
            stop.set(true);
        });
        watcher.setDaemon(true);
        watcher.start();

        long sequence = 0;
        long committed = 0;
        long aborted = 0;
        long failed = 0;
        boolean ready = false;
        KafkaProducer<String, String> producer = null;
        for (long txn = 1; !stop.get(); txn++) {
            try {
                if (producer == null) {
                    producer = create(bootstrap, topic);
                    producer.initTransactions();
                }
                producer.beginTransaction();
                for (int i = 0; i < 10; i++) {
                    sequence++;
                    int partition = (int) (sequence % partitions);
                    String value = "{\"p\":" + partition + ",\"n\":" + sequence + ",\"txn\":" + txn + "}";
                    producer.send(new ProducerRecord<>(topic, partition, null, value));
                }
                if (txn % 4 == 0) {
                    producer.abortTransaction();
                    aborted++;
                } else {
                    producer.commitTransaction();
                    committed++;
                    if (!ready && aborted > 0) {
                        ready = true;
                        System.out.println("READY");
                        System.out.flush();
                    }
                }
                Thread.sleep(20);
            } catch (Exception error) {
                failed++;
                System.err.println("ChaosProducer: transaction " + txn + " failed (" + error + "); starting over");
                try {
                    if (producer != null) {
                        producer.close(java.time.Duration.ofSeconds(5));
                    }
                } catch (Exception ignored) {
                    // The next producer's initTransactions fences whatever this one left.
                }
                producer = null;
                Thread.sleep(500);
            }
        }
        if (producer != null) {
            producer.close();
        }
        System.out.println("committed=" + committed + " aborted=" + aborted + " failed=" + failed);
        System.out.flush();
    }

    private static KafkaProducer<String, String> create(String bootstrap, String topic) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "chaos-" + topic);
        props.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 20000);
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 20000);
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 5000);
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 15000);
        props.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        return new KafkaProducer<>(props);
    }
}
