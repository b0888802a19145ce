// tests/unit/test_java_text.py: prints each hex line of the file named by args[0] decoded as new String(bytes, UTF_8),
// as the UTF-16 code units in hex, one line per input line.
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.*;

public class JavaUtf8 {
    public static void main(String[] args) throws Exception {
        for (String line : Files.readAllLines(Paths.get(args[0]))) {
            byte[] b = HexFormat.of().parseHex(line.trim());
            String s = new String(b, StandardCharsets.UTF_8);
            StringBuilder out = new StringBuilder();
            for (int i = 0; i < s.length(); i++) out.append(String.format("%04x ", (int) s.charAt(i)));
            System.out.println(out.toString().trim());
        }
    }
}
