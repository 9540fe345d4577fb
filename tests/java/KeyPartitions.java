import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Where the Java producer's default partitioner puts keys, for the partitioner differential
 * test.
 *
 * <p>Usage: {@code KeyPartitions <bootstrap> <topic> <count>}. Sends {@code count} records to
 * the existing {@code topic} with the default partitioner and keys {@code key-0} ..
 * {@code key-<count-1>}, then the empty key and the binary keys {@code [0..i)} for i in 1..17
 * (every tail length of murmur2), and prints one line per record: {@code <key as hex> <partition>}
 * (the empty key prints as {@code -}). Nothing else goes to stdout.
 */
public final class KeyPartitions {
    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: KeyPartitions <bootstrap> <topic> <count>");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        List<byte[]> keys = new ArrayList<>();
        int count = Integer.parseInt(args[2]);
        for (int i = 0; i < count; i++) {
            keys.add(("key-" + i).getBytes(StandardCharsets.UTF_8));
        }
        keys.add(new byte[0]);
        for (int length = 1; length <= 16; length++) {
            byte[] key = new byte[length];
            for (int i = 0; i < length; i++) {
                key[i] = (byte) (i * 37 + 200);
            }
            keys.add(key);
        }
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            for (byte[] key : keys) {
                sent.add(producer.send(new ProducerRecord<>(args[1], key, "v".getBytes(StandardCharsets.UTF_8))));
            }
            producer.flush();
            StringBuilder out = new StringBuilder();
            for (int i = 0; i < keys.size(); i++) {
                out.append(hex(keys.get(i))).append(' ').append(sent.get(i).get().partition()).append('\n');
            }
            System.out.print(out);
        }
    }

    private static String hex(byte[] bytes) {
        if (bytes.length == 0) {
            return "-";
        }
        StringBuilder hex = new StringBuilder();
        for (byte b : bytes) {
            hex.append(String.format("%02x", b & 0xff));
        }
        return hex.toString();
    }
}
