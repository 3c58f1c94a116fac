package sluice.miniyarn;

import java.io.BufferedReader;
import java.io.File;
import java.io.FileOutputStream;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.BlockLocation;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;
import org.apache.hadoop.yarn.server.nodemanager.NodeManager;

/**
 * Runs a MiniYARNCluster beside a MiniDFSCluster for Sluice's YARN tests
 * and benchmarks.
 *
 * <p>Usage: {@code MiniYarn DIR [--nodemanagers N] [--nm-memory MB]
 * [--max-allocation MB] [--datanodes N] [--hosts N]}. Every server
 * listens on 127.0.0.1 (the ResourceManager on free ports chosen here),
 * but with {@code --hosts N} the cluster has N hosts as YARN and HDFS
 * see them: N DataNodes named {@code localhost}, {@code 127.0.0.2} ...
 * {@code 127.0.0.N} (all listening on 127.0.0.1, each its own name in
 * block locations), beside N NodeManagers of the same names (the
 * MiniYARNCluster's one, {@code localhost}, and N-1 more, each listening
 * on its own loopback address, which is its node name). YARN's and
 * HDFS's locality are by host name, so that is how a test tells hosts
 * apart on one machine. When the
 * cluster is up, {@code DIR/conf} is a Hadoop client configuration
 * directory (the {@code HADOOP_CONF_DIR} of a user of this cluster):
 * {@code core-site.xml} with {@code fs.defaultFS}, {@code yarn-site.xml}
 * with the ResourceManager's client, scheduler and web addresses and
 * {@code yarn.application.classpath} (this launcher's own class path, on
 * which containers find Hadoop's jars as they would under
 * {@code HADOOP_HOME} on a real cluster). Then one line goes to standard
 * output, {@code CONF_DIR http://RM_WEB hdfs://NAMENODE http://WEBHDFS}, and
 * {@code DIR/ready} holds the same line. The Capacity Scheduler has two
 * queues: {@code default} and {@code small}, whose maximum allocation
 * (2048 MB, 2 vcores) is below the cluster's. Standard input takes commands,
 * one a line, each answered by one line ({@code ok ...} or
 * {@code error ...}); end of input or {@code quit} shuts both clusters
 * down, so a test that dies takes its cluster with it:
 * <ul>
 * <li>{@code mkdir PATH}, {@code rm PATH}, {@code exists PATH},
 *     {@code put LOCAL PATH}, {@code get PATH LOCAL}: HDFS through
 *     Hadoop's own client.
 * <li>{@code put-on LOCAL PATH I}: one replica of each block, on DataNode
 *     I (from 0; HDFS's favored nodes).
 * <li>{@code hosts PATH}: the host names holding the blocks of a file,
 *     space-separated.
 * <li>{@code ls PATH}: the names in a directory with each one's
 *     modification time, {@code NAME@MILLIS}, space-separated.
 * <li>{@code perm PATH}: a file's or directory's permission, in octal.
 * </ul>
 */
public final class MiniYarn {
    private MiniYarn() {}

    private static final java.io.PrintStream ANSWERS = System.out;

    public static void main(String[] args) throws Exception {
        System.setOut(System.err);
        if (args.length < 1) {
            System.err.println("usage: MiniYarn DIR [--nodemanagers N] [--nm-memory MB] "
                + "[--max-allocation MB] [--datanodes N]");
            System.exit(2);
        }
        File dir = new File(args[0]).getAbsoluteFile();
        int nodeManagers = 1;
        int datanodes = 1;
        int nmMemory = 8192;
        int maxAllocation = 4096;
        int hosts = 0;
        for (int i = 1; i < args.length; i++) {
            String v = i + 1 < args.length ? args[i + 1] : "";
            switch (args[i]) {
                case "--nodemanagers": nodeManagers = Integer.parseInt(v); i++; break;
                case "--datanodes": datanodes = Integer.parseInt(v); i++; break;
                case "--nm-memory": nmMemory = Integer.parseInt(v); i++; break;
                case "--max-allocation": maxAllocation = Integer.parseInt(v); i++; break;
                case "--hosts": hosts = Integer.parseInt(v); i++; break;
                default:
                    System.err.println("MiniYarn: unknown argument " + args[i]);
                    System.exit(2);
            }
        }
        // The test helpers MiniYARNCluster uses put its work under here.
        System.setProperty("test.build.data", new File(dir, "yarn").getPath());
        System.setProperty("hadoop.tmp.dir", new File(dir, "tmp").getPath());

        Configuration dconf = new Configuration();
        dconf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, new File(dir, "dfs").getPath());
        dconf.setLong("dfs.namenode.fs-limits.min-block-size", 0);
        dconf.setBoolean("dfs.webhdfs.enabled", true);
        dconf.set("dfs.block.local-path-access.user", System.getProperty("user.name"));
        MiniDFSCluster.Builder dfsBuilder = new MiniDFSCluster.Builder(dconf).format(true);
        if (hosts > 0) {
            datanodes = hosts;
            nodeManagers = 1;
            dfsBuilder.hosts(hostNames(hosts));
        }
        MiniDFSCluster dfs = dfsBuilder.numDataNodes(datanodes).build();
        // MiniDFSCluster resolves the host names it is given to 127.0.0.1
        // in this JVM (Hadoop's static resolutions); the NodeManagers
        // listen on their own addresses, so each name is its address.
        for (String h : hostNames(hosts)) {
            org.apache.hadoop.net.NetUtils.addStaticResolution(h,
                h.equals("localhost") ? "127.0.0.1" : h);
        }
        dfs.waitActive();
        String fsUri = "hdfs://127.0.0.1:" + dfs.getNameNodePort();
        FileSystem fs = dfs.getFileSystem();
        // Users' home directories, as a real cluster has them.
        fs.mkdirs(new Path("/user/" + System.getProperty("user.name")));

        YarnConfiguration conf = new YarnConfiguration();
        conf.set("fs.defaultFS", fsUri);
        conf.setBoolean(YarnConfiguration.YARN_MINICLUSTER_FIXED_PORTS, true);
        conf.set(YarnConfiguration.RM_ADDRESS, "127.0.0.1:" + freePort());
        conf.set(YarnConfiguration.RM_SCHEDULER_ADDRESS, "127.0.0.1:" + freePort());
        conf.set(YarnConfiguration.RM_RESOURCE_TRACKER_ADDRESS, "127.0.0.1:" + freePort());
        conf.set(YarnConfiguration.RM_ADMIN_ADDRESS, "127.0.0.1:" + freePort());
        conf.set(YarnConfiguration.RM_WEBAPP_ADDRESS, "127.0.0.1:" + freePort());
        // Memory is watched (containers over their size are killed), as
        // on a real cluster; virtual memory is not.
        conf.setBoolean(YarnConfiguration.YARN_MINICLUSTER_CONTROL_RESOURCE_MONITORING, true);
        conf.setBoolean(YarnConfiguration.NM_PMEM_CHECK_ENABLED, true);
        conf.setBoolean(YarnConfiguration.NM_VMEM_CHECK_ENABLED, false);
        // A NodeManager marks its local directories bad, and launches no
        // container, once their disk is 90% full: a test host's disk is
        // shared with builds, so only a truly full one fails the tests.
        conf.setFloat("yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage", 99.5f);
        conf.setInt("yarn.minicluster.yarn.nodemanager.resource.memory-mb", nmMemory);
        conf.setInt(YarnConfiguration.NM_PMEM_MB, nmMemory);
        conf.setInt(YarnConfiguration.RM_SCHEDULER_MINIMUM_ALLOCATION_MB, 64);
        conf.setInt(YarnConfiguration.RM_SCHEDULER_MAXIMUM_ALLOCATION_MB, maxAllocation);
        conf.setInt(YarnConfiguration.NM_VCORES, 16);
        conf.setInt(YarnConfiguration.RM_SCHEDULER_MAXIMUM_ALLOCATION_VCORES, 8);
        // Two queues: default, with all the capacity, and small, whose
        // containers are at most 2048 MB and 2 vcores (a queue's own
        // maximum allocation, below the cluster's).
        String cs = "yarn.scheduler.capacity.root.";
        conf.set(cs + "queues", "default,small");
        conf.setFloat(cs + "default.capacity", 100f);
        conf.setFloat(cs + "small.capacity", 0f);
        conf.setFloat(cs + "small.maximum-capacity", 100f);
        conf.setInt(cs + "small.maximum-allocation-mb", 2048);
        conf.setInt(cs + "small.maximum-allocation-vcores", 2);
        // A node whose disk is nearly full stays healthy (a full build
        // directory on a test machine must not take the only node away).
        conf.setFloat(YarnConfiguration.NM_MAX_PER_DISK_UTILIZATION_PERCENTAGE, 100.0f);
        conf.setLong(YarnConfiguration.NM_MIN_PER_DISK_FREE_SPACE_MB, 0);
        // A finished container is reported to its AM without delay.
        conf.setLong(YarnConfiguration.RM_NM_HEARTBEAT_INTERVAL_MS, 200);
        conf.setLong(YarnConfiguration.NM_CONTAINER_MON_INTERVAL_MS, 500);
        conf.setLong(YarnConfiguration.RM_AMLAUNCHER_THREAD_COUNT, 4);
        // NodeManager web servers off (the last argument): with them in the
        // ResourceManager's JVM, its REST API answers 404.
        MiniYARNCluster yarn = new MiniYARNCluster("sluice", nodeManagers, 1, 1, false);
        yarn.init(conf);
        yarn.start();
        if (!yarn.waitForNodeManagersToConnect(60_000)) {
            throw new IllegalStateException("the NodeManagers did not connect within 60 s");
        }
        String[] names = hostNames(hosts);
        for (int i = 1; i < hosts; i++) {
            startNodeManager(yarn.getConfig(), names[i], new File(dir, "nm-" + names[i]));
            nodeManagers++;
        }
        // Ready when the scheduler has the nodes' resources (a node
        // reported unhealthy has none).
        long deadline = System.currentTimeMillis() + 60_000;
        while (yarn.getResourceManager().getResourceScheduler().getClusterResource()
                .getMemorySize() < (long) nmMemory * nodeManagers) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("the nodes' resources did not reach the "
                    + "scheduler within 60 s (unhealthy nodes?)");
            }
            Thread.sleep(100);
        }
        Configuration live = yarn.getConfig();

        File confDir = new File(dir, "conf");
        confDir.mkdirs();
        Configuration core = new Configuration(false);
        core.set("fs.defaultFS", fsUri);
        write(core, new File(confDir, "core-site.xml"));
        Configuration site = new Configuration(false);
        for (String k : new String[] {YarnConfiguration.RM_ADDRESS,
                YarnConfiguration.RM_SCHEDULER_ADDRESS, YarnConfiguration.RM_WEBAPP_ADDRESS}) {
            site.set(k, live.get(k));
        }
        StringBuilder cp = new StringBuilder();
        for (String e : System.getProperty("java.class.path").split(File.pathSeparator)) {
            cp.append(cp.length() == 0 ? "" : ",").append(new File(e).getAbsolutePath());
        }
        site.set(YarnConfiguration.YARN_APPLICATION_CLASSPATH, cp.toString());
        write(site, new File(confDir, "yarn-site.xml"));

        String webhdfs = "http://127.0.0.1:" + dfs.getNameNode().getHttpAddress().getPort();
        String line = confDir + " http://" + live.get(YarnConfiguration.RM_WEBAPP_ADDRESS)
            + " " + fsUri + " " + webhdfs;
        File tmp = new File(dir, "ready.tmp");
        Files.writeString(tmp.toPath(), line + "\n", StandardCharsets.UTF_8);
        Files.move(tmp.toPath(), new File(dir, "ready").toPath(), StandardCopyOption.ATOMIC_MOVE);
        ANSWERS.println(line);
        ANSWERS.flush();

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String cmd;
        while ((cmd = in.readLine()) != null) {
            String[] w = cmd.trim().split("\\s+");
            if (w[0].equals("quit")) {
                break;
            }
            if (w[0].isEmpty()) {
                continue;
            }
            String answer;
            try {
                answer = "ok" + command(dfs, fs, w);
            } catch (Exception e) {
                answer = "error " + e.toString().replace('\n', ' ');
            }
            ANSWERS.println(answer);
            ANSWERS.flush();
        }
        yarn.stop();
        dfs.shutdown();
        System.exit(0);
    }

    /** The host names of {@code --hosts N}. */
    private static String[] hostNames(int n) {
        String[] names = new String[n];
        for (int i = 0; i < n; i++) {
            names[i] = i == 0 ? "localhost" : "127.0.0." + (i + 1);
        }
        return names;
    }

    /**
     * A NodeManager beside the MiniYARNCluster's, listening on the loopback
     * address {@code ip}, its node name (a NodeManager with a bind host is
     * named as its address says), with no web server (as the
     * MiniYARNCluster's: with one, the ResourceManager's REST API answers
     * 404).
     */
    private static void startNodeManager(Configuration live, String ip, File dir) {
        YarnConfiguration c = new YarnConfiguration(live);
        c.set(YarnConfiguration.NM_BIND_HOST, ip);
        c.set(YarnConfiguration.NM_ADDRESS, ip + ":0");
        c.set(YarnConfiguration.NM_LOCALIZER_ADDRESS, ip + ":0");
        c.set(YarnConfiguration.NM_WEBAPP_ADDRESS, ip + ":0");
        c.set(YarnConfiguration.NM_COLLECTOR_SERVICE_ADDRESS, ip + ":0");
        c.set(YarnConfiguration.NM_LOCAL_DIRS, new File(dir, "local").getAbsolutePath());
        c.set(YarnConfiguration.NM_LOG_DIRS, new File(dir, "log").getAbsolutePath());
        c.setInt(YarnConfiguration.NM_PMEM_MB,
            live.getInt("yarn.minicluster.yarn.nodemanager.resource.memory-mb", 4096));
        c.setBoolean(YarnConfiguration.NM_ENABLE_HARDWARE_CAPABILITY_DETECTION, false);
        c.setBoolean(YarnConfiguration.NM_RECOVERY_ENABLED, false);
        NodeManager nm = new NodeManager();
        nm.init(c);
        nm.disableWebServer();
        nm.start();
    }

    private static String command(MiniDFSCluster dfs, FileSystem fs, String[] w)
            throws IOException {
        switch (w[0]) {
            case "put-on": {
                InetSocketAddress dn = dfs.getDataNodes().get(Integer.parseInt(w[3]))
                    .getXferAddress();
                try (InputStream in = new FileInputStream(w[1]);
                     OutputStream out = ((DistributedFileSystem) fs).create(new Path(w[2]),
                         FsPermission.getFileDefault(), true, 65536, (short) 1,
                         fs.getDefaultBlockSize(new Path(w[2])), null,
                         new InetSocketAddress[] {dn})) {
                    in.transferTo(out);
                }
                return "";
            }
            case "hosts": {
                java.util.Set<String> names = new java.util.TreeSet<>();
                FileStatus st = fs.getFileStatus(new Path(w[1]));
                for (BlockLocation b : fs.getFileBlockLocations(st, 0, st.getLen())) {
                    names.addAll(java.util.Arrays.asList(b.getHosts()));
                }
                return names.isEmpty() ? "" : " " + String.join(" ", names);
            }
            case "mkdir":
                fs.mkdirs(new Path(w[1]));
                return "";
            case "rm":
                fs.delete(new Path(w[1]), true);
                return "";
            case "exists":
                return " " + fs.exists(new Path(w[1]));
            case "perm":
                return " " + Integer.toOctalString(
                    fs.getFileStatus(new Path(w[1])).getPermission().toShort());
            case "put":
                fs.copyFromLocalFile(false, true, new Path(w[1]), new Path(w[2]));
                return "";
            case "get":
                fs.copyToLocalFile(false, new Path(w[1]), new Path(w[2]), true);
                return "";
            case "ls": {
                StringBuilder b = new StringBuilder();
                for (org.apache.hadoop.fs.FileStatus st : fs.listStatus(new Path(w[1]))) {
                    b.append(' ').append(st.getPath().getName()).append('@')
                        .append(st.getModificationTime());
                }
                return b.toString();
            }
            default:
                throw new IllegalArgumentException("unknown command " + String.join(" ", w));
        }
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getByName("127.0.0.1"))) {
            return s.getLocalPort();
        }
    }

    private static void write(Configuration c, File f) throws IOException {
        try (OutputStream out = new FileOutputStream(f)) {
            c.writeXml(out);
        }
    }
}
