// Kafka's own reading of topic config values, for test_kafkaconfig_oracle.py.
// Run in source-file mode against the Kafka jars: `java -cp 'libs/*' ConfigOracle.java`.
// "keys": one line per client-settable topic config, "name<TAB>TYPE".
// "parse": reads "name<TAB>hex(UTF-8 value)" lines and answers each with
// "OK<TAB>result" or "ERR<TAB>exception", the result encoded as the test expects.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.storage.internals.log.LogConfig;

public class ConfigOracle {
    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        Map<String, ConfigDef.ConfigKey> keys = LogConfig.configKeys();
        if (args[0].equals("keys")) {
            for (String name : LogConfig.nonInternalConfigNames()) {
                out.println(name + "\t" + keys.get(name).type);
            }
        } else {
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                String[] parts = line.split("\t", -1);
                String value = new String(HexFormat.of().parseHex(parts[1]), StandardCharsets.UTF_8);
                out.println(parse(keys.get(parts[0]), value));
            }
        }
        out.flush();
    }

    static String parse(ConfigDef.ConfigKey key, String value) {
        try {
            Object parsed = ConfigDef.parseType(key.name, value, key.type);
            if (key.validator != null) {
                key.validator.ensureValid(key.name, parsed);
            }
            return "OK\t" + encode(parsed);
        } catch (RuntimeException e) {
            return "ERR\t" + e.getClass().getSimpleName();
        }
    }

    static String encode(Object parsed) {
        if (parsed instanceof Double d) {
            return "D" + Long.toHexString(Double.doubleToLongBits(d));
        }
        if (parsed instanceof List<?> list) {
            StringBuilder text = new StringBuilder("L");
            for (Object item : list) {
                text.append(hex((String) item)).append(',');
            }
            return text.toString();
        }
        if (parsed instanceof String s) {
            return "S" + hex(s);
        }
        return "V" + parsed;
    }

    static String hex(String text) {
        return HexFormat.of().formatHex(text.getBytes(StandardCharsets.UTF_8));
    }
}
