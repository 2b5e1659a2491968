// Kafka's AclCommand, once per line of standard input, in one JVM: a test that changes ACLs
// dozens of times pays for one JVM start instead of one per change. A line holds the command's
// arguments separated by tabs; for each, the reply is a line "<exit status> <byte count>" and
// then exactly that many bytes of what the command printed. AclCommand ends a failed command
// through Kafka's Exit, which here throws instead of ending the JVM. Standard input's end ends it.
//
// Run in source-file mode on Kafka's classpath: scripts/services/kafka.sh acl-shell.

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

import org.apache.kafka.common.utils.Exit;
import org.apache.kafka.tools.AclCommand;

public class AclShell {
    static final class Exited extends RuntimeException {
        final int status;

        Exited(int status, String message) {
            super(message, null, false, false);
            this.status = status;
        }
    }

    public static void main(String[] ignored) throws Exception {
        PrintStream replies = System.out;
        Exit.setExitProcedure((status, message) -> {
            throw new Exited(status, message);
        });
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            ByteArrayOutputStream printed = new ByteArrayOutputStream();
            PrintStream capture = new PrintStream(printed, true, StandardCharsets.UTF_8);
            System.setOut(capture);
            int status = 0;
            try {
                AclCommand.main(line.split("\t"));
            } catch (Exited e) {
                status = e.status;
                if (e.getMessage() != null) {
                    capture.println(e.getMessage());
                }
            } catch (Throwable t) {
                status = 1;
                t.printStackTrace(capture);
            } finally {
                capture.flush();
                System.setOut(replies);
            }
            byte[] bytes = printed.toByteArray();
            replies.println(status + " " + bytes.length);
            replies.write(bytes);
            replies.flush();
        }
    }
}
