package sluice.yarn;

import java.io.File;
import java.io.IOException;
import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.BlockLocation;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RemoteIterator;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.yarn.api.ApplicationConstants;
import org.apache.hadoop.yarn.api.records.Container;
import org.apache.hadoop.yarn.api.records.ContainerId;
import org.apache.hadoop.yarn.api.records.ContainerLaunchContext;
import org.apache.hadoop.yarn.api.records.ContainerStatus;
import org.apache.hadoop.yarn.api.records.FinalApplicationStatus;
import org.apache.hadoop.yarn.api.records.LocalResource;
import org.apache.hadoop.yarn.api.records.LocalResourceType;
import org.apache.hadoop.yarn.api.records.LocalResourceVisibility;
import org.apache.hadoop.yarn.api.records.NodeReport;
import org.apache.hadoop.yarn.api.records.Priority;
import org.apache.hadoop.yarn.api.records.Resource;
import org.apache.hadoop.yarn.api.records.UpdatedContainer;
import org.apache.hadoop.yarn.client.api.AMRMClient.ContainerRequest;
import org.apache.hadoop.yarn.client.api.async.AMRMClientAsync;
import org.apache.hadoop.yarn.client.api.async.NMClientAsync;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.util.Records;
import org.apache.hadoop.yarn.api.records.URL;

/**
 * Sluice's ApplicationMaster.
 *
 * <p>Usage (in the AM container, from {@code sluice yarn up}):
 * {@code AppMaster --staging URI --workers N --container-mb MB
 * --vcores V --max-worker-failures F --binary URI [--near PATH]
 * [--web-token T] [--insecure] [-- WORKER-FLAGS...]}.
 * The container's work directory holds the localized {@code sluice}
 * binary (from {@code --binary}, the client's cache, given to the workers
 * with PRIVATE visibility so a node keeps its copy for the user's next
 * applications), {@code secret}, {@code core-site.xml} and
 * {@code yarn-site.xml} (on the class path, so {@link YarnConfiguration}
 * finds the cluster), and, unless {@code --insecure}, the cluster CA's
 * {@code ca.pem} and {@code ca.key}.
 *
 * <p>TLS: the hosts of the containers are known only once YARN places
 * them, so this AM issues the certificates (with {@code sluice ca issue}
 * and the CA's key, which it alone holds: it removes
 * {@code STAGING/ca.key} once it starts). The coordinator's names this
 * container's host and address; each worker container's names its own
 * node's host and address, is written to {@code STAGING/tls/ID.pem} and
 * {@code ID.key} (mode 600 in the 700 staging directory) and localized
 * into that container alone, as {@code worker.pem} and {@code worker.key}
 * beside {@code ca.pem}.
 *
 * <p>It starts {@code sluice coordinator} as its own child (same process
 * group, so YARN's kill of this container kills it too), registers with
 * the coordinator's web pages as the tracking URL, writes
 * {@code STAGING/coordinator.json} ({@code {"coordinator":"IP:PORT",
 * "http":"IP:PORT"}}) for the client, and asks for N worker containers,
 * each running {@code sluice worker} against that coordinator (with
 * {@code --near}, on the hosts holding that path's blocks: strictly for
 * ten seconds, then anywhere, preferring them). A worker
 * container that ends while the application runs is replaced, up to F
 * times in all; one more, and the application ends FAILED. When
 * {@code STAGING/stop} appears ({@code sluice yarn down}), it releases
 * every container, stops the coordinator, unregisters SUCCEEDED and
 * removes the staging directory.
 */
public final class AppMaster {
    private static final Priority PRIORITY = Priority.newInstance(1);
    /** Requests that may go beyond --near's hosts (YARN wants a priority
     * of their own beside strict ones). */
    private static final Priority RELAXED = Priority.newInstance(2);
    /** How long --near's workers are asked for on its hosts alone. */
    private static final long NEAR_WAIT_MS = 10_000;

    private final Configuration conf = new YarnConfiguration();
    private final Args args;
    private final FileSystem fs;
    private final Path staging;
    private AMRMClientAsync<ContainerRequest> amrm;
    private NMClientAsync nm;
    private Process coordinator;
    private String coordinatorAddr;
    private final Map<String, LocalResource> resources = new HashMap<>();
    private final Map<ContainerId, Container> running = new ConcurrentHashMap<>();
    private final List<ContainerRequest> pending = Collections.synchronizedList(new ArrayList<>());
    private volatile int failures;
    private volatile String failed;
    private volatile boolean stopping;
    private String[] nearHosts;
    private volatile boolean relaxed;

    private AppMaster(Args args) throws IOException {
        this.args = args;
        this.fs = FileSystem.get(conf);
        this.staging = new Path(args.staging);
    }

    public static void main(String[] argv) throws Exception {
        AppMaster am = new AppMaster(Args.parse(argv));
        int code = am.run();
        System.exit(code);
    }

    private int run() throws Exception {
        log("started");
        String host = System.getenv(ApplicationConstants.Environment.NM_HOST.name());
        String ip = InetAddress.getByName(host).getHostAddress();
        if (!args.insecure) {
            issue("coordinator", "coordinator", host, ip);
            // Localized here; no one else needs the CA's key.
            fs.delete(new Path(staging, "ca.key"), false);
        }
        String[] addrs = startCoordinator(ip);
        coordinatorAddr = addrs[0];
        log("coordinator up");
        Runtime.getRuntime().addShutdownHook(new Thread(() -> coordinator.destroyForcibly()));
        amrm = AMRMClientAsync.createAMRMClientAsync(250, new RmHandler());
        amrm.init(conf);
        amrm.start();
        String tracking = (args.insecure ? "http://" : "https://") + addrs[1] + "/"
            + (args.webToken == null ? "" : "?token=" + args.webToken);
        amrm.registerApplicationMaster(host, 0, tracking);
        log("registered");
        nm = NMClientAsync.createNMClientAsync(new NmHandler());
        nm.init(conf);
        nm.start();
        resources.put("sluice", resource(new Path(args.binary), LocalResourceVisibility.PRIVATE));
        resources.put("secret", resource(new Path(staging, "secret"),
            LocalResourceVisibility.APPLICATION));
        if (!args.insecure) {
            resources.put("ca.pem", resource(new Path(staging, "ca.pem"),
                LocalResourceVisibility.APPLICATION));
        }
        nearHosts = args.near == null ? null : nearHosts(args.near);
        for (int i = 0; i < args.workers; i++) {
            request();
        }
        writeCoordinatorFile(addrs);
        log("coordinator at " + addrs[0] + ", web pages at " + addrs[1]
            + "; asked for " + args.workers + " workers");
        Path stop = new Path(staging, "stop");
        long asked = System.currentTimeMillis();
        while (true) {
            if (!relaxed && System.currentTimeMillis() - asked > NEAR_WAIT_MS) {
                relax();
            }
            if (failed != null) {
                return finish(FinalApplicationStatus.FAILED, failed);
            }
            if (!coordinator.isAlive()) {
                return finish(FinalApplicationStatus.FAILED,
                    "the coordinator exited with status " + coordinator.exitValue());
            }
            if (fs.exists(stop)) {
                return finish(FinalApplicationStatus.SUCCEEDED, "stopped by sluice yarn down");
            }
            Thread.sleep(200);
        }
    }

    /** Starts the coordinator; waits for its RPC and web addresses. */
    private String[] startCoordinator(String ip) throws Exception {
        File addr = new File("coordinator.addr");
        File http = new File("coordinator.http");
        List<String> cmd = new ArrayList<>(Arrays.asList("./sluice", "coordinator",
            "--listen", ip + ":0", "--state-dir", new File("coordinator").getAbsolutePath(),
            "--secret-file", "secret", "--addr-file", addr.getPath(),
            "--http", ip + ":0", "--http-addr-file", http.getPath()));
        if (args.insecure) {
            cmd.add("--insecure");
        } else {
            cmd.addAll(Arrays.asList("--tls-dir", "tls", "--tls-name", "coordinator"));
        }
        File logDir = new File(System.getenv(ApplicationConstants.Environment.LOG_DIRS.name())
            .split(",")[0]);
        coordinator = new ProcessBuilder(cmd)
            .redirectErrorStream(true)
            .redirectOutput(new File(logDir, "coordinator.log"))
            .start();
        long deadline = System.currentTimeMillis() + 60_000;
        while (!(addr.exists() && http.exists())) {
            if (!coordinator.isAlive()) {
                throw new IOException("the coordinator exited with status "
                    + coordinator.exitValue() + " (see coordinator.log)");
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IOException("the coordinator did not start within 60 s");
            }
            Thread.sleep(20);
        }
        return new String[] {read(addr), read(http)};
    }

    /**
     * Issues a certificate of {@code role} for {@code host} and {@code ip}
     * as {@code tls/NAME.pem} and {@code tls/NAME.key} (mode 600), with
     * the CA of this work directory ({@code ca.pem}, {@code ca.key}).
     */
    private static void issue(String name, String role, String host, String ip)
            throws IOException, InterruptedException {
        String hosts = host.equals(ip) ? host : host + "," + ip;
        Process p = new ProcessBuilder("./sluice", "ca", "issue", "--ca", ".", "--host", hosts,
            "--role", role, "--out", "tls/" + name)
            .redirectErrorStream(true)
            .start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (p.waitFor() != 0) {
            throw new IOException("issuing the " + role + " certificate of " + hosts
                + " failed: " + out.trim());
        }
    }

    /**
     * A worker container's own certificate, issued for its node and
     * shipped through the staging directory (mode 600): its local
     * resources {@code worker.pem} and {@code worker.key}.
     */
    private Map<String, LocalResource> workerCertificate(Container c, String ip)
            throws IOException, InterruptedException {
        String id = c.getId().toString();
        issue(id, "worker", c.getNodeId().getHost(), ip);
        Map<String, LocalResource> r = new HashMap<>();
        for (String ext : new String[] {"pem", "key"}) {
            Path to = new Path(staging, "tls/" + id + "." + ext);
            fs.copyFromLocalFile(true, true, new Path(new File("tls/" + id + "." + ext)
                .getAbsolutePath()), to);
            fs.setPermission(to, new FsPermission((short) 0600));
            r.put("worker." + ext, resource(to, LocalResourceVisibility.APPLICATION));
        }
        return r;
    }

    private static String read(File f) throws IOException {
        return new String(Files.readAllBytes(f.toPath()), StandardCharsets.UTF_8).trim();
    }

    /** STAGING/coordinator.json, written beside and renamed into place. */
    private void writeCoordinatorFile(String[] addrs) throws IOException {
        Path tmp = new Path(staging, ".coordinator.json.tmp");
        try (FSDataOutputStream out = fs.create(tmp, true)) {
            out.write(("{\"coordinator\":\"" + addrs[0] + "\",\"http\":\"" + addrs[1]
                + "\"}\n").getBytes(StandardCharsets.UTF_8));
        }
        fs.rename(tmp, new Path(staging, "coordinator.json"));
    }

    private LocalResource resource(Path p, LocalResourceVisibility v) throws IOException {
        FileStatus st = fs.getFileStatus(p);
        URL url = URL.fromPath(fs.makeQualified(p));
        return LocalResource.newInstance(url, LocalResourceType.FILE, v, st.getLen(),
            st.getModificationTime());
    }

    /** The hosts of --near's blocks, or none (with why) when it cannot be listed. */
    private String[] nearHosts(String near) {
        try {
            return blockHosts(new Path(near));
        } catch (IOException | IllegalArgumentException e) {
            log("--near " + near + ": no block locations, so no locality asked: " + e);
            return null;
        }
    }

    /** The hosts holding the most blocks of PATH's files, most first. */
    private String[] blockHosts(Path p) throws IOException {
        Map<String, Integer> count = new HashMap<>();
        RemoteIterator<LocatedFileStatus> it = fs.listFiles(p, true);
        while (it.hasNext()) {
            for (BlockLocation b : it.next().getBlockLocations()) {
                for (String h : b.getHosts()) {
                    count.merge(h, 1, Integer::sum);
                }
            }
        }
        List<String> hosts = new ArrayList<>(count.keySet());
        hosts.sort((a, b) -> count.get(b) - count.get(a));
        log("--near " + p + ": blocks on " + count);
        return hosts.isEmpty() ? null : hosts.toArray(new String[0]);
    }

    /**
     * Asks for one worker container: with --near, on its hosts alone at
     * first (YARN's schedulers give up a host after a few heartbeats of
     * other nodes, well before the host has room), anywhere but
     * preferably there once {@link #relax} ran.
     */
    private void request() {
        Resource r = Resource.newInstance(args.containerMb, args.vcores);
        boolean strict = nearHosts != null && !relaxed;
        ContainerRequest req = new ContainerRequest(r, nearHosts, null,
            strict ? PRIORITY : RELAXED, !strict);
        pending.add(req);
        amrm.addContainerRequest(req);
    }

    /** Workers still asked for on --near's hosts alone are asked for anywhere. */
    private void relax() {
        relaxed = true;
        if (nearHosts == null) {
            // Never strict: nothing to ask for again.
            return;
        }
        List<ContainerRequest> strict;
        synchronized (pending) {
            strict = new ArrayList<>(pending);
            pending.clear();
        }
        if (strict.isEmpty()) {
            return;
        }
        log("--near: " + strict.size() + " workers not placed on " + Arrays.toString(nearHosts)
            + " within " + NEAR_WAIT_MS / 1000 + " s; asking for them anywhere");
        for (ContainerRequest req : strict) {
            amrm.removeContainerRequest(req);
            request();
        }
    }

    private void launch(Container c) {
        String ip;
        try {
            ip = InetAddress.getByName(c.getNodeId().getHost()).getHostAddress();
        } catch (IOException e) {
            ip = c.getNodeId().getHost();
        }
        StringBuilder cmd = new StringBuilder("exec ./sluice worker --coordinator ")
            .append(coordinatorAddr)
            .append(" --listen ").append(ip).append(":0")
            .append(" --host ").append(c.getNodeId().getHost())
            .append(" --data-dir $PWD/data --secret-file secret");
        Map<String, LocalResource> files = new HashMap<>(resources);
        if (!args.insecure) {
            try {
                files.putAll(workerCertificate(c, ip));
            } catch (IOException | InterruptedException e) {
                log("worker container " + c.getId() + ": " + e);
                amrm.releaseAssignedContainer(c.getId());
                running.put(c.getId(), c);
                lost(c.getId(), e.toString());
                return;
            }
            cmd.append(" --tls-dir . --tls-name worker");
        }
        for (String f : args.workerFlags) {
            cmd.append(' ').append(quote(f));
        }
        cmd.append(" 1>").append(ApplicationConstants.LOG_DIR_EXPANSION_VAR).append("/stdout")
            .append(" 2>").append(ApplicationConstants.LOG_DIR_EXPANSION_VAR).append("/stderr");
        ContainerLaunchContext ctx = ContainerLaunchContext.newInstance(
            files, new HashMap<>(), List.of(cmd.toString()),
            null, null, null);
        running.put(c.getId(), c);
        nm.startContainerAsync(c, ctx);
    }

    private static String quote(String s) {
        return "'" + s.replace("'", "'\\''") + "'";
    }

    /** A worker container ended while the application runs. */
    private void lost(ContainerId id, String why) {
        if (stopping || running.remove(id) == null) {
            return;
        }
        failures++;
        log("worker container " + id + " ended: " + why + " (" + failures + " lost of "
            + args.maxWorkerFailures + " allowed)");
        if (failures > args.maxWorkerFailures) {
            failed = failures + " worker containers lost, more than --max-worker-failures "
                + args.maxWorkerFailures + "; the last: " + why;
        } else {
            request();
        }
    }

    private int finish(FinalApplicationStatus status, String message) throws Exception {
        stopping = true;
        log("finishing " + status + ": " + message);
        for (ContainerId id : running.keySet()) {
            amrm.releaseAssignedContainer(id);
        }
        coordinator.destroy();
        if (!coordinator.waitFor(5, java.util.concurrent.TimeUnit.SECONDS)) {
            coordinator.destroyForcibly();
        }
        amrm.unregisterApplicationMaster(status, message, null);
        if (status == FinalApplicationStatus.SUCCEEDED) {
            fs.delete(staging, true);
        }
        nm.stop();
        amrm.stop();
        return status == FinalApplicationStatus.SUCCEEDED ? 0 : 1;
    }

    private static void log(String s) {
        System.err.println(java.time.Instant.now() + " sluice AM: " + s);
    }

    private final class RmHandler extends AMRMClientAsync.AbstractCallbackHandler {
        @Override
        public void onContainersAllocated(List<Container> containers) {
            for (Container c : containers) {
                ContainerRequest req = null;
                synchronized (pending) {
                    if (!pending.isEmpty()) {
                        req = pending.remove(0);
                    }
                }
                if (req == null || stopping) {
                    amrm.releaseAssignedContainer(c.getId());
                    continue;
                }
                amrm.removeContainerRequest(req);
                log("worker container " + c.getId() + " on " + c.getNodeId());
                launch(c);
            }
        }

        @Override
        public void onContainersCompleted(List<ContainerStatus> statuses) {
            for (ContainerStatus s : statuses) {
                lost(s.getContainerId(), "exit status " + s.getExitStatus() + ", "
                    + s.getDiagnostics().trim());
            }
        }

        @Override
        public void onContainersUpdated(List<UpdatedContainer> containers) {}

        @Override
        public void onShutdownRequest() {
            failed = "the ResourceManager asked this ApplicationMaster to shut down";
        }

        @Override
        public void onNodesUpdated(List<NodeReport> updated) {}

        @Override
        public float getProgress() {
            return 0.5f;
        }

        @Override
        public void onError(Throwable e) {
            failed = "the ResourceManager connection failed: " + e;
        }
    }

    private final class NmHandler extends NMClientAsync.AbstractCallbackHandler {
        @Override
        public void onContainerStarted(ContainerId id, Map<String, ByteBuffer> data) {}

        @Override
        public void onContainerStatusReceived(ContainerId id, ContainerStatus s) {}

        @Override
        public void onContainerStopped(ContainerId id) {}

        @Override
        public void onStartContainerError(ContainerId id, Throwable e) {
            lost(id, "could not start: " + e);
        }

        @Override
        public void onContainerResourceIncreased(ContainerId id, Resource r) {}

        @Override
        public void onContainerResourceUpdated(ContainerId id, Resource r) {}

        @Override
        public void onGetContainerStatusError(ContainerId id, Throwable e) {}

        @Override
        public void onIncreaseContainerResourceError(ContainerId id, Throwable e) {}

        @Override
        public void onUpdateContainerResourceError(ContainerId id, Throwable e) {}

        @Override
        public void onStopContainerError(ContainerId id, Throwable e) {}
    }

    /** The command line. */
    static final class Args {
        String staging;
        int workers = 1;
        int containerMb = 1024;
        int vcores = 1;
        int maxWorkerFailures = 3;
        String near;
        String webToken;
        String binary;
        boolean insecure;
        final List<String> workerFlags = new ArrayList<>();

        static Args parse(String[] a) {
            Args r = new Args();
            for (int i = 0; i < a.length; i++) {
                if (a[i].equals("--")) {
                    r.workerFlags.addAll(Arrays.asList(a).subList(i + 1, a.length));
                    break;
                }
                if (a[i].equals("--insecure")) {
                    r.insecure = true;
                    continue;
                }
                String v = a[++i];
                switch (a[i - 1]) {
                    case "--staging": r.staging = v; break;
                    case "--workers": r.workers = Integer.parseInt(v); break;
                    case "--container-mb": r.containerMb = Integer.parseInt(v); break;
                    case "--vcores": r.vcores = Integer.parseInt(v); break;
                    case "--max-worker-failures": r.maxWorkerFailures = Integer.parseInt(v); break;
                    case "--near": r.near = v; break;
                    case "--web-token": r.webToken = v; break;
                    case "--binary": r.binary = v; break;
                    default: throw new IllegalArgumentException("unknown argument " + a[i - 1]);
                }
            }
            if (r.staging == null || r.binary == null) {
                throw new IllegalArgumentException("--staging and --binary are required");
            }
            return r;
        }
    }
}
