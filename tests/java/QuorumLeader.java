import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;

/**
 * Prints the node id of the active KRaft controller (the metadata quorum's leader).
 *
 * <p>Usage: {@code QuorumLeader <bootstrap>}.
 */
public final class QuorumLeader {
    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: QuorumLeader <bootstrap>");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        try (Admin admin = Admin.create(props)) {
            System.out.println(admin.describeMetadataQuorum().quorumInfo().get().leaderId());
        }
    }
}
