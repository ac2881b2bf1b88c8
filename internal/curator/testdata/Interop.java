// Interop drives Apache Curator 5.4.0 (Debian's libcurator-recipes-java) for
// dsync's interoperability tests and benchmarks. It is compiled and run by the
// Go package github.com/dsync-go/dsync/internal/curator; see curator.go there
// for the command protocol. Protocol lines go to stdout, one per line, flushed
// at once; errors go to stderr with exit code 1.
//
// Commands (KIND is mutex, semmutex or sem; MAX is the lease count of sem,
// either an integer or the absolute path of a SharedCount holding it):
//
//	hold KIND CONNECT PATH [MAX]
//	loop KIND CONNECT PATH ITER LOGFILE [MAX]
//	participants KIND CONNECT PATH [MAX]
//	count-get CONNECT PATH
//	count-set CONNECT PATH VALUE
//	bench KIND CONNECT PATH SESSIONS SECONDS [MAX]

import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.retry.RetryNTimes;
import org.apache.curator.utils.ZKPaths;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.data.Stat;

public final class Interop {
    private static final PrintStream OUT =
            new PrintStream(new FileOutputStream(java.io.FileDescriptor.out), true, StandardCharsets.UTF_8);

    /** Prints one protocol line and flushes it. */
    static synchronized void say(String line) {
        OUT.print(line + "\n");
        OUT.flush();
    }

    static final class UsageException extends Exception {
        private static final long serialVersionUID = 1L;

        UsageException(String msg) {
            super(msg);
        }
    }

    public static void main(String[] args) {
        int code = 0;
        try {
            run(args);
        } catch (Throwable t) {
            System.err.println("interop: " + t);
            t.printStackTrace(System.err);
            System.err.flush();
            code = 1;
        }
        OUT.flush();
        // Curator and ZooKeeper leave no non-daemon threads once closed, but a
        // failed close must not keep the JVM alive.
        Runtime.getRuntime().halt(code);
    }

    static void run(String[] args) throws Exception {
        if (args.length < 1) {
            throw new UsageException("usage: Interop hold|loop|participants|count-get|count-set|bench ...");
        }
        String cmd = args[0];
        String[] rest = Arrays.copyOfRange(args, 1, args.length);
        switch (cmd) {
            case "hold":
                need(rest, 3, 4, "hold KIND CONNECT PATH [MAX]");
                hold(rest[0], rest[1], rest[2], opt(rest, 3));
                break;
            case "loop":
                need(rest, 5, 6, "loop KIND CONNECT PATH ITER LOGFILE [MAX]");
                loop(rest[0], rest[1], rest[2], Integer.parseInt(rest[3]), rest[4], opt(rest, 5));
                break;
            case "participants":
                need(rest, 3, 4, "participants KIND CONNECT PATH [MAX]");
                participants(rest[0], rest[1], rest[2], opt(rest, 3));
                break;
            case "count-get":
                need(rest, 2, 2, "count-get CONNECT PATH");
                countGet(rest[0], rest[1]);
                break;
            case "count-set":
                need(rest, 3, 3, "count-set CONNECT PATH VALUE");
                countSet(rest[0], rest[1], Integer.parseInt(rest[2]));
                break;
            case "bench":
                need(rest, 5, 6, "bench KIND CONNECT PATH SESSIONS SECONDS [MAX]");
                bench(rest[0], rest[1], rest[2], Integer.parseInt(rest[3]), Double.parseDouble(rest[4]), opt(rest, 5));
                break;
            default:
                throw new UsageException("unknown command " + cmd);
        }
    }

    static void need(String[] a, int min, int max, String usage) throws UsageException {
        if (a.length < min || a.length > max) {
            throw new UsageException("usage: Interop " + usage);
        }
    }

    static String opt(String[] a, int i) {
        return i < a.length ? a[i] : null;
    }

    // ---- clients ----------------------------------------------------------

    static CuratorFramework connect(String connect) throws Exception {
        int sessionMs = 10000;
        String env = System.getenv("INTEROP_SESSION_MS");
        if (env != null && !env.isEmpty()) {
            sessionMs = Integer.parseInt(env);
        }
        CuratorFramework client = CuratorFrameworkFactory.newClient(
                connect, sessionMs, 15000, new RetryNTimes(20, 100));
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            client.close();
            throw new IllegalStateException("could not connect to ZooKeeper at " + connect + " within 30s");
        }
        return client;
    }

    static long sessionId(CuratorFramework client) throws Exception {
        return client.getZookeeperClient().getZooKeeper().getSessionId();
    }

    /**
     * Returns the full path of the first child of dir that is an ephemeral
     * node of this client's session, or null.
     */
    static String ownedChild(CuratorFramework client, String dir) throws Exception {
        long sid = sessionId(client);
        List<String> children;
        try {
            children = client.getChildren().forPath(dir);
        } catch (KeeperException.NoNodeException e) {
            return null;
        }
        for (String c : children) {
            String p = ZKPaths.makePath(dir, c);
            Stat st = client.checkExists().forPath(p);
            if (st != null && st.getEphemeralOwner() == sid) {
                return p;
            }
        }
        return null;
    }

    // ---- locks ------------------------------------------------------------

    /** Exposes the node of the lock held by the calling thread. */
    static final class NodeMutex extends InterProcessMutex {
        NodeMutex(CuratorFramework client, String path) {
            super(client, path);
        }

        String node() {
            return getLockPath();
        }
    }

    /** One of the three Curator lock kinds, acquired and released by one thread. */
    interface Lock {
        void acquire() throws Exception;

        /** Node that represents the current hold, or null. */
        String node() throws Exception;

        void release() throws Exception;

        /** Directories where this lock's pending nodes live, for waiting detection. */
        String[] queueDirs();

        Collection<String> participants() throws Exception;
    }

    static Lock newLock(CuratorFramework client, String kind, String path, String max) throws Exception {
        switch (kind) {
            case "mutex": {
                NodeMutex m = new NodeMutex(client, path);
                return new Lock() {
                    public void acquire() throws Exception {
                        m.acquire();
                    }

                    public String node() {
                        return m.node();
                    }

                    public void release() throws Exception {
                        m.release();
                    }

                    public String[] queueDirs() {
                        return new String[] {path};
                    }

                    public Collection<String> participants() throws Exception {
                        return m.getParticipantNodes();
                    }
                };
            }
            case "semmutex": {
                InterProcessSemaphoreMutex m = new InterProcessSemaphoreMutex(client, path);
                InterProcessSemaphoreV2 view = new InterProcessSemaphoreV2(client, path, 1);
                return new Lock() {
                    public void acquire() throws Exception {
                        m.acquire();
                    }

                    public String node() throws Exception {
                        return ownedChild(client, ZKPaths.makePath(path, "leases"));
                    }

                    public void release() throws Exception {
                        m.release();
                    }

                    public String[] queueDirs() {
                        return new String[] {ZKPaths.makePath(path, "locks"), ZKPaths.makePath(path, "leases")};
                    }

                    public Collection<String> participants() throws Exception {
                        return leaseNames(view);
                    }
                };
            }
            case "sem": {
                InterProcessSemaphoreV2 s;
                if (max != null && max.startsWith("/")) {
                    SharedCount count = new SharedCount(client, max, 1);
                    count.start();
                    s = new InterProcessSemaphoreV2(client, path, count);
                } else {
                    s = new InterProcessSemaphoreV2(client, path, max == null ? 1 : Integer.parseInt(max));
                }
                AtomicReference<Lease> lease = new AtomicReference<>();
                return new Lock() {
                    public void acquire() throws Exception {
                        lease.set(s.acquire());
                    }

                    public String node() {
                        Lease l = lease.get();
                        // getNodeName is the bare child name of PATH/leases.
                        return l == null ? null : ZKPaths.makePath(path, "leases", l.getNodeName());
                    }

                    public void release() throws Exception {
                        Lease l = lease.getAndSet(null);
                        if (l != null) {
                            s.returnLease(l);
                        }
                    }

                    public String[] queueDirs() {
                        return new String[] {ZKPaths.makePath(path, "locks"), ZKPaths.makePath(path, "leases")};
                    }

                    public Collection<String> participants() throws Exception {
                        return leaseNames(s);
                    }
                };
            }
            default:
                throw new UsageException("unknown KIND " + kind + " (want mutex, semmutex or sem)");
        }
    }

    /** getParticipantNodes, with a missing PATH/leases read as no leases. */
    static Collection<String> leaseNames(InterProcessSemaphoreV2 s) throws Exception {
        try {
            return s.getParticipantNodes();
        } catch (KeeperException.NoNodeException e) {
            return List.of();
        }
    }

    // ---- hold -------------------------------------------------------------

    /**
     * hold: prints "waiting" once this session has a node queued under the
     * lock (or holds it), "acquired [NODE]" once held, then waits for a line or
     * EOF on stdin, releases and prints "released". A line that arrives
     * before the lock is acquired abandons the wait (Curator deletes the
     * node; closing the session removes it in any case) and prints "canceled";
     * EOF before the lock is acquired releases it as soon as it is acquired.
     */
    static void hold(String kind, String connect, String path, String max) throws Exception {
        CuratorFramework client = connect(connect);
        try {
            Lock lock = newLock(client, kind, path, max);
            Thread main = Thread.currentThread();
            Object mu = new Object();
            boolean[] acquired = {false};
            boolean[] cancel = {false};
            CountDownLatch stdinDone = new CountDownLatch(1);
            AtomicBoolean waitingSaid = new AtomicBoolean(false);

            Thread stdin = new Thread(() -> {
                boolean line = false;
                try {
                    BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
                    line = r.readLine() != null;
                } catch (Exception ignored) {
                    // treat a read error like EOF
                }
                synchronized (mu) {
                    if (line && !acquired[0]) {
                        cancel[0] = true;
                        main.interrupt();
                    }
                }
                stdinDone.countDown();
            }, "interop-stdin");
            stdin.setDaemon(true);
            stdin.start();

            AtomicBoolean stopWatch = new AtomicBoolean(false);
            Thread watch = new Thread(() -> {
                try {
                    while (!stopWatch.get()) {
                        for (String dir : lock.queueDirs()) {
                            if (ownedChild(client, dir) != null) {
                                if (waitingSaid.compareAndSet(false, true)) {
                                    say("waiting");
                                }
                                return;
                            }
                        }
                        Thread.sleep(5);
                    }
                } catch (InterruptedException ignored) {
                    // stopped
                } catch (Exception e) {
                    System.err.println("interop: waiting detection: " + e);
                }
            }, "interop-watch");
            watch.setDaemon(true);
            watch.start();

            boolean got = false;
            try {
                lock.acquire();
                got = true;
            } catch (InterruptedException e) {
                // canceled below
            } catch (Exception e) {
                if (!cancelRequested(mu, cancel)) {
                    throw e;
                }
            }
            stopWatch.set(true);
            watch.interrupt();
            watch.join();
            boolean canceled;
            synchronized (mu) {
                canceled = cancel[0];
                acquired[0] = got;
                Thread.interrupted(); // an interrupt from the stdin thread is handled here
            }
            if (waitingSaid.compareAndSet(false, true)) {
                say("waiting");
            }
            if (!got) {
                if (!canceled) {
                    throw new IllegalStateException("acquire returned without the lock");
                }
                say("canceled");
                return;
            }
            String node = lock.node();
            say(node == null ? "acquired" : "acquired " + node);
            if (!canceled) {
                stdinDone.await();
            }
            lock.release();
            say("released");
        } finally {
            client.close();
        }
    }

    static boolean cancelRequested(Object mu, boolean[] cancel) {
        synchronized (mu) {
            return cancel[0];
        }
    }

    // ---- loop -------------------------------------------------------------

    static void loop(String kind, String connect, String path, int iter, String logfile, String max)
            throws Exception {
        String id = "java-" + ProcessHandle.current().pid();
        byte[] enter = ("enter " + id + "\n").getBytes(StandardCharsets.UTF_8);
        byte[] exit = ("exit " + id + "\n").getBytes(StandardCharsets.UTF_8);
        CuratorFramework client = connect(connect);
        // FileOutputStream in append mode opens with O_APPEND; each write of a
        // short array is one write(2), so lines of several processes interleave whole.
        try (FileOutputStream log = new FileOutputStream(logfile, true)) {
            Lock lock = newLock(client, kind, path, max);
            for (int i = 0; i < iter; i++) {
                lock.acquire();
                try {
                    log.write(enter);
                    LockSupport.parkNanos(ThreadLocalRandom.current().nextLong(2_000_001L));
                    log.write(exit);
                } finally {
                    lock.release();
                }
            }
        } finally {
            client.close();
        }
        say("done " + iter);
    }

    // ---- participants -----------------------------------------------------

    static void participants(String kind, String connect, String path, String max) throws Exception {
        CuratorFramework client = connect(connect);
        try {
            Lock lock = newLock(client, kind, path, max);
            for (String p : lock.participants()) {
                say(p);
            }
            say("end");
        } finally {
            client.close();
        }
    }

    // ---- SharedCount ------------------------------------------------------

    static void countGet(String connect, String path) throws Exception {
        CuratorFramework client = connect(connect);
        try (SharedCount c = new SharedCount(client, path, 0)) {
            c.start();
            say(Integer.toString(c.getCount()));
        } finally {
            client.close();
        }
    }

    static void countSet(String connect, String path, int value) throws Exception {
        CuratorFramework client = connect(connect);
        try (SharedCount c = new SharedCount(client, path, 0)) {
            c.start();
            c.setCount(value);
            say("ok");
        } finally {
            client.close();
        }
    }

    // ---- bench ------------------------------------------------------------

    static final class Samples {
        long[] us = new long[1024];
        int n;

        void add(long v) {
            if (n == us.length) {
                us = Arrays.copyOf(us, n * 2);
            }
            us[n++] = v;
        }
    }

    static void bench(String kind, String connect, String path, int sessions, double seconds, String max)
            throws Exception {
        if (sessions < 1) {
            throw new UsageException("SESSIONS must be at least 1");
        }
        CountDownLatch ready = new CountDownLatch(sessions);
        CountDownLatch go = new CountDownLatch(1);
        long[] deadline = new long[1];
        Samples[] samples = new Samples[sessions];
        Throwable[] errs = new Throwable[sessions];
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < sessions; i++) {
            final int idx = i;
            samples[i] = new Samples();
            Thread t = new Thread(() -> {
                CuratorFramework client = null;
                boolean arrived = false;
                try {
                    client = connect(connect);
                    Lock lock = newLock(client, kind, path, max);
                    lock.acquire(); // warm-up: creates parents, loads classes
                    lock.release();
                    arrived = true;
                    ready.countDown();
                    go.await();
                    Samples s = samples[idx];
                    long end = deadline[0];
                    while (System.nanoTime() - end < 0) {
                        long t0 = System.nanoTime();
                        lock.acquire();
                        long t1 = System.nanoTime();
                        lock.release();
                        s.add((t1 - t0) / 1000);
                    }
                } catch (Throwable e) {
                    errs[idx] = e;
                } finally {
                    if (!arrived) {
                        ready.countDown();
                    }
                    if (client != null) {
                        client.close();
                    }
                }
            }, "bench-" + i);
            threads.add(t);
            t.start();
        }
        ready.await();
        boolean failed = false;
        for (Throwable t : errs) {
            failed |= t != null;
        }
        long start = System.nanoTime();
        deadline[0] = failed ? start : start + (long) (seconds * 1e9);
        go.countDown();
        for (Thread t : threads) {
            t.join();
        }
        long wall = System.nanoTime() - start;
        for (Throwable t : errs) {
            if (t instanceof Exception) {
                throw (Exception) t;
            } else if (t != null) {
                throw new RuntimeException(t);
            }
        }
        int total = 0;
        for (Samples s : samples) {
            total += s.n;
        }
        long[] all = new long[total];
        int k = 0;
        for (Samples s : samples) {
            System.arraycopy(s.us, 0, all, k, s.n);
            k += s.n;
        }
        Arrays.sort(all);
        say(String.format(java.util.Locale.ROOT, "ops=%d seconds=%.3f p50_us=%d p99_us=%d",
                total, wall / 1e9, pct(all, 0.50), pct(all, 0.99)));
    }

    static long pct(long[] sorted, double q) {
        if (sorted.length == 0) {
            return 0;
        }
        int i = (int) Math.ceil(q * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(sorted.length - 1, i))];
    }
}
