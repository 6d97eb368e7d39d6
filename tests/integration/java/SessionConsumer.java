// A plain Java consumer for the fetch-session tests: assigned partitions, read from the
// beginning, counts per topic printed twice a second. A TopicAuthorizationException is
// printed and polling goes on (the other partitions must keep flowing). Run with
// `java -cp <kafka libs>/* SessionConsumer.java BOOTSTRAP SECONDS topic:partition,... [PROPS]`
// (PROPS: a properties file with the client's security settings).
import java.io.FileReader;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicAuthorizationException;

public class SessionConsumer {
    public static void main(String[] args) throws IOException {
        Properties props = new Properties();
        if (args.length > 3) {
            try (FileReader reader = new FileReader(args[3])) {
                props.load(reader);
            }
        }
        props.put("bootstrap.servers", args[0]);
        props.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        props.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        props.put("enable.auto.commit", "false");
        props.put("fetch.max.wait.ms", "200");
        long deadline = System.currentTimeMillis() + Long.parseLong(args[1]) * 1000;
        List<TopicPartition> partitions = new ArrayList<>();
        for (String item : args[2].split(",")) {
            int colon = item.lastIndexOf(':');
            partitions.add(new TopicPartition(item.substring(0, colon),
                    Integer.parseInt(item.substring(colon + 1))));
        }
        Map<String, Long> counts = new TreeMap<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            long printed = 0;
            while (System.currentTimeMillis() < deadline) {
                try {
                    for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                        counts.merge(record.topic(), 1L, Long::sum);
                    }
                } catch (TopicAuthorizationException e) {
                    System.out.println("AUTHZ " + e.unauthorizedTopics());
                }
                if (System.currentTimeMillis() - printed > 500) {
                    System.out.println("COUNTS " + counts);
                    System.out.flush();
                    printed = System.currentTimeMillis();
                }
            }
        }
        System.out.println("DONE " + counts);
    }
}
