package sluice.minidfs;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.hdfs.MiniDFSCluster;

/**
 * Runs a MiniDFSCluster for Sluice's HDFS tests and benchmarks.
 *
 * <p>Usage: {@code MiniDfs DIR [--datanodes N] [--hosts h0,h1,...]
 * [--block-size BYTES] [--replication R] [--nn-port P] [--http-port P]}.
 * The cluster's storage lives under DIR. When it is up, DIR/ready holds one
 * line: {@code hdfs://127.0.0.1:PORT http://127.0.0.1:HTTP_PORT} (the
 * NameNode's RPC and WebHDFS addresses). Then it takes commands on standard
 * input, one a line, each answered by one line on standard output
 * ({@code ok ...} or {@code error ...}); end of input or {@code quit} shuts
 * the cluster down, so a test that dies takes its cluster with it:
 * <ul>
 * <li>{@code stop-datanode I}: stops DataNode I.
 * <li>{@code put LOCAL PATH [REPLICATION]}: copies a local file or
 *     directory in, with Hadoop's own client (an oracle independent of
 *     Sluice's).
 * <li>{@code get PATH LOCAL}: copies a file or directory out.
 * <li>{@code chmod PATH OCTAL}, {@code mkdir PATH}, {@code rm PATH}
 *     (recursively), {@code exists PATH}
 *     ({@code ok true} or {@code ok false}), {@code ls PATH} (names, one
 *     line, space-separated, hidden ones too).
 * <li>{@code age PATH SECONDS}: sets PATH's modification time that many
 *     seconds back.
 * <li>{@code corrupt-replicas}: how many blocks have a replica the
 *     NameNode holds corrupt ({@code ok N}).
 * </ul>
 *
 * <p>{@code --hosts} gives the DataNodes host names of their own (they still
 * listen on 127.0.0.1): block locations then name them, as on a real
 * cluster with one DataNode a host.
 */
public final class MiniDfs {
    private MiniDfs() {}

    /** Where answers go: standard output, kept for them alone. */
    private static final java.io.PrintStream ANSWERS = System.out;

    public static void main(String[] args) throws Exception {
        // Hadoop logs to "standard output": send it to standard error
        // before logging starts, so standard output carries answers only.
        System.setOut(System.err);
        if (args.length < 1) {
            System.err.println("usage: MiniDfs DIR [--datanodes N] [--hosts h0,h1] "
                + "[--block-size BYTES] [--replication R] [--nn-port P] [--http-port P]");
            System.exit(2);
        }
        File dir = new File(args[0]).getAbsoluteFile();
        int datanodes = 1;
        int nnPort = 0;
        int httpPort = 0;
        String[] hosts = null;
        Configuration conf = new Configuration();
        conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, new File(dir, "data").getPath());
        // Small blocks in tests: the NameNode's 1 MiB floor lifted.
        conf.setLong("dfs.namenode.fs-limits.min-block-size", 0);
        conf.setBoolean("dfs.webhdfs.enabled", true);
        conf.setBoolean("dfs.permissions.enabled", true);
        // A stopped DataNode is not waited for long by the NameNode's
        // clients (replication monitors run every second).
        conf.setInt("dfs.namenode.replication.interval", 1);
        // Short-circuit reads (ClientDatanodeProtocol.getBlockLocalPathInfo)
        // allowed to the user running the cluster, as an operator allows
        // them to the users of a host's jobs.
        conf.set("dfs.block.local-path-access.user", System.getProperty("user.name"));
        for (int i = 1; i < args.length; i++) {
            String v = i + 1 < args.length ? args[i + 1] : "";
            switch (args[i]) {
                case "--datanodes": datanodes = Integer.parseInt(v); i++; break;
                case "--hosts": hosts = v.split(","); i++; break;
                case "--block-size": conf.setLong("dfs.blocksize", Long.parseLong(v)); i++; break;
                case "--replication": conf.setInt("dfs.replication", Integer.parseInt(v)); i++; break;
                case "--nn-port": nnPort = Integer.parseInt(v); i++; break;
                case "--http-port": httpPort = Integer.parseInt(v); i++; break;
                default:
                    System.err.println("MiniDfs: unknown argument " + args[i]);
                    System.exit(2);
            }
        }
        MiniDFSCluster.Builder b = new MiniDFSCluster.Builder(conf)
            .numDataNodes(datanodes)
            .nameNodePort(nnPort)
            .nameNodeHttpPort(httpPort)
            .format(true);
        if (hosts != null) {
            b.hosts(hosts);
        }
        MiniDFSCluster cluster = b.build();
        cluster.waitActive();
        String rpc = "hdfs://127.0.0.1:" + cluster.getNameNodePort();
        String http = "http://127.0.0.1:" + cluster.getNameNode().getHttpAddress().getPort();
        File tmp = new File(dir, "ready.tmp");
        Files.writeString(tmp.toPath(), rpc + " " + http + "\n", StandardCharsets.UTF_8);
        Files.move(tmp.toPath(), new File(dir, "ready").toPath(), StandardCopyOption.ATOMIC_MOVE);
        ANSWERS.println(rpc + " " + http);
        ANSWERS.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        FileSystem fs = cluster.getFileSystem();
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            if (w[0].equals("quit")) {
                break;
            }
            if (w[0].isEmpty()) {
                continue;
            }
            String answer;
            try {
                answer = "ok" + command(cluster, fs, w);
            } catch (Exception e) {
                answer = "error " + e.toString().replace('\n', ' ');
            }
            ANSWERS.println(answer);
            ANSWERS.flush();
        }
        cluster.shutdown();
        System.exit(0);
    }

    /** Runs one command; returns what follows "ok" in its answer. */
    private static String command(MiniDFSCluster cluster, FileSystem fs, String[] w)
            throws Exception {
        switch (w[0]) {
            case "stop-datanode":
                cluster.stopDataNode(Integer.parseInt(w[1]));
                return "";
            case "put": {
                Path dst = new Path(w[2]);
                fs.copyFromLocalFile(false, true, new Path(w[1]), dst);
                if (w.length > 3) {
                    short r = Short.parseShort(w[3]);
                    for (FileStatus st : fs.listStatus(dst)) {
                        fs.setReplication(st.getPath(), r);
                    }
                }
                return "";
            }
            case "get":
                fs.copyToLocalFile(false, new Path(w[1]), new Path(w[2]), true);
                return "";
            case "chmod":
                fs.setPermission(new Path(w[1]), new FsPermission(Short.parseShort(w[2], 8)));
                return "";
            case "rm":
                fs.delete(new Path(w[1]), true);
                return "";
            case "mkdir":
                fs.mkdirs(new Path(w[1]));
                return "";
            case "age":
                // Sets a path's modification time that many seconds back.
                fs.setTimes(new Path(w[1]),
                        System.currentTimeMillis() - Long.parseLong(w[2]) * 1000L, -1);
                return "";
            case "exists":
                return " " + fs.exists(new Path(w[1]));
            case "corrupt-replicas":
                // Blocks with a replica the NameNode holds corrupt.
                return " " + cluster.getNamesystem().getCorruptReplicaBlocks();
            case "ls": {
                StringBuilder b = new StringBuilder();
                for (FileStatus st : fs.listStatus(new Path(w[1]))) {
                    b.append(' ').append(st.getPath().getName());
                }
                return b.toString();
            }
            default:
                throw new IllegalArgumentException("unknown command " + String.join(" ", w));
        }
    }
}
