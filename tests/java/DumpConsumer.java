import java.io.StringWriter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Dumps every record of a topic as the Java consumer sees it, for differential tests.
 *
 * <p>Usage: {@code DumpConsumer <bootstrap> <topic> <read_committed|read_uncommitted>}.
 *
 * <p>Assigns all partitions (no group), seeks to the beginning, and reads until each partition's
 * position reaches its end offset under the same isolation level (the last stable offset for
 * read_committed). Prints one JSON object per record, by partition then offset:
 * <pre>
 * {"partition":0,"offset":12,"timestamp":1700000000000,"timestamp_type":"CreateTime",
 *  "key":"base64"|null,"value":"base64"|null,"headers":[["k","base64"|null],...]}
 * </pre>
 * (one line each; header order and repeated keys preserved; standard base64 with padding),
 * then {@code {"end_offsets":{"0":N,"1":N,"2":N}}}. Fails after 60 s without reaching the ends.
 */
public final class DumpConsumer {
    private static final Duration DEADLINE = Duration.ofSeconds(60);

    public static void main(String[] args) throws Exception {
        if (args.length != 3 || !(args[2].equals("read_committed") || args[2].equals("read_uncommitted"))) {
            System.err.println("usage: DumpConsumer <bootstrap> <topic> <read_committed|read_uncommitted>");
            System.exit(2);
        }
        String topic = args[1];
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, args[2]);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());

        List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();
        Map<TopicPartition, Long> ends;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            List<PartitionInfo> infos = consumer.partitionsFor(topic, Duration.ofSeconds(30));
            if (infos == null || infos.isEmpty()) {
                throw new IllegalStateException("topic " + topic + " not found");
            }
            List<TopicPartition> partitions = new ArrayList<>();
            for (PartitionInfo info : infos) {
                partitions.add(new TopicPartition(topic, info.partition()));
            }
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            ends = consumer.endOffsets(partitions, Duration.ofSeconds(30));

            long deadline = System.nanoTime() + DEADLINE.toNanos();
            while (!atEnd(consumer, partitions, ends)) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("end offsets " + ends + " not reached in " + DEADLINE);
                }
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                    records.add(record);
                }
            }
        }

        records.sort(Comparator.<ConsumerRecord<byte[], byte[]>>comparingInt(ConsumerRecord::partition)
            .thenComparingLong(ConsumerRecord::offset));
        JsonFactory json = new JsonFactory();
        StringBuilder out = new StringBuilder();
        for (ConsumerRecord<byte[], byte[]> record : records) {
            StringWriter line = new StringWriter();
            try (JsonGenerator g = json.createGenerator(line)) {
                g.writeStartObject();
                g.writeNumberField("partition", record.partition());
                g.writeNumberField("offset", record.offset());
                g.writeNumberField("timestamp", record.timestamp());
                g.writeStringField("timestamp_type", record.timestampType().name);
                writeBytes(g, "key", record.key());
                writeBytes(g, "value", record.value());
                g.writeArrayFieldStart("headers");
                for (Header header : record.headers()) {
                    g.writeStartArray();
                    g.writeString(header.key());
                    writeBytes(g, null, header.value());
                    g.writeEndArray();
                }
                g.writeEndArray();
                g.writeEndObject();
            }
            out.append(line).append('\n');
        }
        StringWriter line = new StringWriter();
        try (JsonGenerator g = json.createGenerator(line)) {
            g.writeStartObject();
            g.writeObjectFieldStart("end_offsets");
            Map<Integer, Long> sorted = new TreeMap<>();
            ends.forEach((tp, offset) -> sorted.put(tp.partition(), offset));
            for (Map.Entry<Integer, Long> e : sorted.entrySet()) {
                g.writeNumberField(Integer.toString(e.getKey()), e.getValue());
            }
            g.writeEndObject();
            g.writeEndObject();
        }
        out.append(line).append('\n');
        System.out.print(out);
        System.out.flush();
    }

    private static boolean atEnd(KafkaConsumer<?, ?> consumer, List<TopicPartition> partitions,
                                 Map<TopicPartition, Long> ends) {
        for (TopicPartition tp : partitions) {
            if (consumer.position(tp) < ends.get(tp)) {
                return false;
            }
        }
        return true;
    }

    /** A base64 string, or null; as a field when {@code name} is given, else as an array item. */
    private static void writeBytes(JsonGenerator g, String name, byte[] bytes) throws Exception {
        if (name != null) {
            g.writeFieldName(name);
        }
        if (bytes == null) {
            g.writeNull();
        } else {
            g.writeString(Base64.getEncoder().encodeToString(bytes));
        }
    }
}
