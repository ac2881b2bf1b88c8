// Interop drives Apache Curator 5.4.0 (Debian's libcurator-recipes-java) for
// dsync's interoperability tests and benchmarks. It is compiled and run by the
// Go package github.com/dsync-go/dsync/internal/curator; see curator.go there
// for the command protocol. Protocol lines go to stdout, one per line, flushed
// at once; errors go to stderr with exit code 1.
//
// Commands (KIND is mutex, semmutex, sem, read, write, multi or latch; MAX is
// the lease count of sem, either an integer or the absolute path of a
// SharedCount holding it, and the participant id of latch; PATH of multi is a
// comma-separated list of paths):
//
//	hold KIND CONNECT PATH [MAX]
//	hold-revocable KIND CONNECT PATH     (KIND mutex, read or write)
//	revoke CONNECT NODEPATH
//	loop KIND CONNECT PATH ITER LOGFILE [MAX]
//	participants KIND CONNECT PATH [MAX] (KIND also rw: the whole read/write queue)
//	count-get CONNECT PATH
//	count-set CONNECT PATH VALUE
//	bench KIND CONNECT PATH SESSIONS SECONDS [MAX]
//	bench rw CONNECT PATH SESSIONS SECONDS READPCT
//	lead KIND CONNECT PATH ID            (KIND latch or selector; SIGTERM resigns too)
//	leader KIND CONNECT PATH             (KIND latch or selector)

import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMultiLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.locks.LockInternals;
import org.apache.curator.framework.recipes.locks.Revoker;
import org.apache.curator.framework.recipes.locks.StandardLockInternalsDriver;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.RetryNTimes;
import org.apache.curator.utils.ThreadUtils;
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
            throw new UsageException(
                    "usage: Interop hold|hold-revocable|revoke|loop|participants|count-get|count-set|bench|lead|leader ...");
        }
        String cmd = args[0];
        String[] rest = Arrays.copyOfRange(args, 1, args.length);
        switch (cmd) {
            case "hold":
                need(rest, 3, 4, "hold KIND CONNECT PATH [MAX]");
                hold(rest[0], rest[1], rest[2], opt(rest, 3), false);
                break;
            case "hold-revocable":
                need(rest, 3, 3, "hold-revocable KIND CONNECT PATH");
                if (!REVOCABLE.contains(rest[0])) {
                    throw new UsageException("KIND " + rest[0] + " is not revocable (want mutex, read or write)");
                }
                hold(rest[0], rest[1], rest[2], null, true);
                break;
            case "revoke":
                need(rest, 2, 2, "revoke CONNECT NODEPATH");
                revoke(rest[0], rest[1]);
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
                need(rest, 5, 6, "bench KIND CONNECT PATH SESSIONS SECONDS [MAX|READPCT]");
                bench(rest[0], rest[1], rest[2], Integer.parseInt(rest[3]), Double.parseDouble(rest[4]), opt(rest, 5));
                break;
            case "lead":
                need(rest, 4, 4, "lead KIND CONNECT PATH ID");
                lead(rest[0], rest[1], rest[2], rest[3]);
                break;
            case "leader":
                need(rest, 3, 3, "leader KIND CONNECT PATH");
                leader(rest[0], rest[1], rest[2]);
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

    // ---- waiting and stdin ------------------------------------------------

    /**
     * Prints "waiting" once: when a thread that polls ownedChild every 5 ms
     * finds a node of this session in one of its directories, or when print()
     * or stop() is called, whichever comes first. Callers print the lines
     * that must follow "waiting" after a print() of their own.
     */
    static final class Waiting {
        private final Thread poll;
        private volatile boolean stopped;
        private boolean said; // guarded by this

        private Waiting(CuratorFramework client, String[] dirs) {
            poll = new Thread(() -> {
                try {
                    while (!stopped) {
                        for (String dir : dirs) {
                            if (ownedChild(client, dir) != null) {
                                print();
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
            }, "interop-waiting");
            poll.setDaemon(true);
        }

        /** Starts polling dirs for a node of client's session. */
        static Waiting start(CuratorFramework client, String... dirs) {
            Waiting w = new Waiting(client, dirs);
            w.poll.start();
            return w;
        }

        /** Prints "waiting" unless it has been printed. */
        synchronized void print() {
            if (!said) {
                said = true;
                say("waiting");
            }
        }

        /**
         * Stops the polling and waits for it to end, then prints "waiting"
         * unless it has been printed. The calling thread must not be
         * interrupted meanwhile.
         */
        void stop() throws InterruptedException {
            stopped = true;
            poll.interrupt();
            poll.join();
            print();
        }
    }

    /**
     * Starts a daemon thread that reads one line from stdin, then calls
     * then.accept(true), or then.accept(false) on EOF or a read error.
     */
    static void onStdin(Consumer<Boolean> then) {
        Thread t = new Thread(() -> {
            boolean line = false;
            try {
                BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
                line = r.readLine() != null;
            } catch (Exception ignored) {
                // treat a read error like EOF
            }
            then.accept(line);
        }, "interop-stdin");
        t.setDaemon(true);
        t.start();
    }

    // ---- locks ------------------------------------------------------------

    /** A Curator lock that can tell the node of the hold of the calling thread. */
    interface HasNode {
        /** Full path of the node held by the calling thread, or null. */
        String node();
    }

    /** Exposes the node of the lock held by the calling thread. */
    static final class NodeMutex extends InterProcessMutex implements HasNode {
        NodeMutex(CuratorFramework client, String path) {
            super(client, path);
        }

        public String node() {
            return getLockPath();
        }
    }

    /** InterProcessReadWriteLock's write side, exposing its node. */
    static final class NodeWriteLock extends InterProcessReadWriteLock.WriteLock implements HasNode {
        NodeWriteLock(CuratorFramework client, String path) {
            super(client, path, null);
        }

        public String node() {
            return getLockPath();
        }
    }

    /** InterProcessReadWriteLock's read side, exposing its node. */
    static final class NodeReadLock extends InterProcessReadWriteLock.ReadLock implements HasNode {
        NodeReadLock(CuratorFramework client, String path, InterProcessReadWriteLock.WriteLock writeLock) {
            super(client, path, null, writeLock);
        }

        public String node() {
            return getLockPath();
        }
    }

    /**
     * InterProcessReadWriteLock(client, path), built from the same two sides
     * its public constructor builds (a WriteLock, and a ReadLock that knows
     * it, with the client's default node data), through its protected
     * constructor, so that the sides can tell their nodes.
     */
    static final class NodeReadWriteLock extends InterProcessReadWriteLock {
        private final NodeWriteLock write;
        private final NodeReadLock read;

        NodeReadWriteLock(CuratorFramework client, String path) {
            this(client, path, new NodeWriteLock(client, path));
        }

        private NodeReadWriteLock(CuratorFramework client, String path, NodeWriteLock w) {
            this(w, new NodeReadLock(client, path, w));
        }

        private NodeReadWriteLock(NodeWriteLock w, NodeReadLock r) {
            super(w, r);
            write = w;
            read = r;
        }

        @Override
        public NodeReadLock readLock() {
            return read;
        }

        @Override
        public NodeWriteLock writeLock() {
            return write;
        }
    }

    /**
     * The whole queue of the read/write lock at path, readers and writers, as
     * full paths in the lock's order (the sequence after __READ__ or __WRIT__,
     * as Curator's read/write driver sorts). Curator's own
     * readLock().getParticipantNodes() and writeLock().getParticipantNodes()
     * keep only the nodes of their own kind.
     */
    static Collection<String> readWriteQueue(CuratorFramework client, String path) throws Exception {
        return LockInternals.getParticipantNodes(client, path, READ_NAME, (name, lockName) ->
                StandardLockInternalsDriver.standardFixForSorting(
                        StandardLockInternalsDriver.standardFixForSorting(name, READ_NAME), WRITE_NAME));
    }

    /** Kinds that hold-revocable takes. */
    static final List<String> REVOCABLE = List.of("mutex", "read", "write");

    static final String READ_NAME = "__READ__";
    static final String WRITE_NAME = "__WRIT__";

    /** One of the Curator lock kinds, acquired and released by one thread. */
    interface Lock {
        void acquire() throws Exception;

        /** Node that represents the current hold, or null. */
        String node() throws Exception;

        void release() throws Exception;

        /** Directories where this lock's pending nodes live, for waiting detection. */
        String[] queueDirs();

        Collection<String> participants() throws Exception;

        /**
         * Whether the hold was lost since acquire() was called: only a latch
         * tells (its notLeader listener has run); the other kinds say false.
         */
        default boolean lost() {
            return false;
        }
    }

    /**
     * Returns a Lock of kind over path. If onRevoke is not null, the lock is
     * made revocable (kinds mutex, read and write only) and onRevoke runs, on
     * a Curator thread, whenever Curator calls the revocation listener.
     */
    static Lock newLock(CuratorFramework client, String kind, String path, String max, Runnable onRevoke)
            throws Exception {
        if (onRevoke != null && !REVOCABLE.contains(kind)) {
            throw new UsageException("KIND " + kind + " is not revocable (want mutex, read or write)");
        }
        switch (kind) {
            case "mutex":
                return mutexLock(new NodeMutex(client, path), path, onRevoke);
            case "read":
                return mutexLock(new NodeReadWriteLock(client, path).readLock(), path, onRevoke);
            case "write":
                return mutexLock(new NodeReadWriteLock(client, path).writeLock(), path, onRevoke);
            case "multi": {
                String[] paths = path.split(",", -1);
                List<NodeMutex> mutexes = new ArrayList<>();
                for (String p : paths) {
                    if (p.isEmpty()) {
                        throw new UsageException("multi PATH " + path + " has an empty path");
                    }
                    mutexes.add(new NodeMutex(client, p));
                }
                InterProcessMultiLock m = new InterProcessMultiLock(new ArrayList<InterProcessLock>(mutexes));
                return new Lock() {
                    public void acquire() throws Exception {
                        m.acquire();
                    }

                    public String node() {
                        List<String> nodes = new ArrayList<>();
                        for (NodeMutex x : mutexes) {
                            String n = x.node();
                            if (n == null) {
                                return null;
                            }
                            nodes.add(n);
                        }
                        return String.join(",", nodes);
                    }

                    public void release() throws Exception {
                        m.release();
                    }

                    public String[] queueDirs() {
                        return paths;
                    }

                    public Collection<String> participants() throws Exception {
                        List<String> all = new ArrayList<>();
                        for (NodeMutex x : mutexes) {
                            all.addAll(x.getParticipantNodes());
                        }
                        return all;
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
            case "latch":
                return latchLock(client, path, max == null ? "" : max);
            case "rw":
                throw new UsageException("KIND rw is only for participants and bench");
            default:
                throw new UsageException(
                        "unknown KIND " + kind + " (want mutex, semmutex, sem, read, write, multi or latch)");
        }
    }

    /**
     * A Lock over an InterProcessMutex (or a side of a read/write lock, which
     * is one): participants are its getParticipantNodes(), which for a side of
     * a read/write lock keeps only the nodes of that side.
     */
    static <M extends InterProcessMutex & HasNode> Lock mutexLock(M m, String path, Runnable onRevoke) {
        if (onRevoke != null) {
            m.makeRevocable(x -> onRevoke.run());
        }
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

    /**
     * A Lock over LeaderLatch(client, path, id): acquire() starts a new latch
     * and awaits leadership (closing the latch if the wait fails), release()
     * closes it; lost() tells whether the latch's notLeader listener has run.
     * Participants are the latch- children of path, full paths, in the order
     * LeaderLatch sorts them (LockInternals.getSortedChildren with "latch-").
     */
    static Lock latchLock(CuratorFramework client, String path, String id) {
        AtomicReference<LeaderLatch> held = new AtomicReference<>();
        AtomicBoolean lost = new AtomicBoolean(false);
        return new Lock() {
            public void acquire() throws Exception {
                LeaderLatch l = new LeaderLatch(client, path, id);
                lost.set(false);
                l.addListener(new LeaderLatchListener() {
                    public void isLeader() {
                    }

                    public void notLeader() {
                        lost.set(true);
                    }
                });
                l.start();
                try {
                    l.await();
                } catch (Exception e) {
                    l.close();
                    throw e;
                }
                held.set(l);
            }

            public String node() {
                LeaderLatch l = held.get();
                return l == null ? null : l.getOurPath();
            }

            public void release() throws Exception {
                LeaderLatch l = held.getAndSet(null);
                if (l != null) {
                    l.close();
                }
            }

            public String[] queueDirs() {
                return new String[] {path};
            }

            public Collection<String> participants() throws Exception {
                return LockInternals.getParticipantNodes(client, path, LATCH_NAME,
                        StandardLockInternalsDriver::standardFixForSorting);
            }

            public boolean lost() {
                return lost.get();
            }
        };
    }

    static final String LATCH_NAME = "latch-";

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
     *
     * hold-revocable (revocable true) makes the lock revocable before
     * acquiring it. Once it is held and Curator has called the revocation
     * listener (at any time since the node was created), it prints "revoked",
     * releases, prints "released" and returns, as if stdin had asked.
     */
    static void hold(String kind, String connect, String path, String max, boolean revocable) throws Exception {
        CuratorFramework client = connect(connect);
        try {
            // wake counts down when stdin has a line or EOF, or when a
            // revocation is requested: either ends a hold.
            CountDownLatch wake = new CountDownLatch(1);
            AtomicBoolean revoked = new AtomicBoolean(false);
            Runnable onRevoke = null;
            if (revocable) {
                // Curator calls the listener on its event thread; the lock
                // must be released by the thread that acquired it.
                onRevoke = () -> {
                    revoked.set(true);
                    wake.countDown();
                };
            }
            Lock lock = newLock(client, kind, path, max, onRevoke);
            Thread main = Thread.currentThread();
            Object mu = new Object();
            boolean[] acquired = {false};
            boolean[] cancel = {false};

            onStdin(line -> {
                synchronized (mu) {
                    if (line && !acquired[0]) {
                        cancel[0] = true;
                        main.interrupt();
                    }
                }
                wake.countDown();
            });
            Waiting waiting = Waiting.start(client, lock.queueDirs());

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
            boolean canceled;
            synchronized (mu) {
                canceled = cancel[0];
                acquired[0] = got;
                Thread.interrupted(); // an interrupt from the stdin thread is handled here
            }
            waiting.stop();
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
                wake.await();
                if (revoked.get()) {
                    say("revoked");
                }
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

    // ---- revoke -----------------------------------------------------------

    /** revoke: Revoker.attemptRevoke(client, node) (a no-op if node is gone), then prints "ok". */
    static void revoke(String connect, String node) throws Exception {
        CuratorFramework client = connect(connect);
        try {
            Revoker.attemptRevoke(client, node);
            say("ok");
        } finally {
            client.close();
        }
    }

    // ---- loop -------------------------------------------------------------

    /**
     * loop: iter times, acquires, appends "enter java-PID", sleeps 0-2 ms,
     * appends "lost java-PID" if the lock says its hold was lost (a latch
     * whose notLeader listener ran), appends "exit java-PID", releases.
     */
    static void loop(String kind, String connect, String path, int iter, String logfile, String max)
            throws Exception {
        String id = "java-" + ProcessHandle.current().pid();
        byte[] enter = ("enter " + id + "\n").getBytes(StandardCharsets.UTF_8);
        byte[] lostLine = ("lost " + id + "\n").getBytes(StandardCharsets.UTF_8);
        byte[] exit = ("exit " + id + "\n").getBytes(StandardCharsets.UTF_8);
        CuratorFramework client = connect(connect);
        // FileOutputStream in append mode opens with O_APPEND; each write of a
        // short array is one write(2), so lines of several processes interleave whole.
        try (FileOutputStream log = new FileOutputStream(logfile, true)) {
            Lock lock = newLock(client, kind, path, max, null);
            for (int i = 0; i < iter; i++) {
                lock.acquire();
                try {
                    log.write(enter);
                    LockSupport.parkNanos(ThreadLocalRandom.current().nextLong(2_000_001L));
                    if (lock.lost()) {
                        log.write(lostLine);
                    }
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
            Collection<String> nodes = kind.equals("rw")
                    ? readWriteQueue(client, path)
                    : newLock(client, kind, path, max, null).participants();
            for (String p : nodes) {
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

    // ---- lead, leader -----------------------------------------------------

    /** Returns whether KIND of lead or leader is selector; else it must be latch. */
    static boolean isSelector(String kind) throws UsageException {
        switch (kind) {
            case "latch":
                return false;
            case "selector":
                return true;
            default:
                throw new UsageException("unknown KIND " + kind + " (want latch or selector)");
        }
    }

    /** The wall clock as Unix time in microseconds. */
    static long micros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
    }

    /**
     * The leader and notleader lines of lead, printed from Curator's threads:
     * after "waiting", and never once resign() has been called.
     */
    static final class Leadership {
        private final Waiting waiting;
        // All guarded by this.
        private boolean resigned;
        private boolean leading; // the last line printed is a leader line
        private boolean led; // a leader line has been printed

        Leadership(Waiting waiting) {
            this.waiting = waiting;
        }

        /**
         * Prints "leader NODE MICROS" (NODE "-" when null) unless resigned;
         * returns whether it did.
         */
        synchronized boolean leader(String node) {
            if (resigned) {
                return false;
            }
            waiting.print();
            say("leader " + (node == null ? "-" : node) + " " + micros());
            leading = true;
            led = true;
            return true;
        }

        /** Prints "notleader MICROS" if the last line was a leader line, unless resigned. */
        synchronized void notLeader() {
            if (leading && !resigned) {
                say("notleader " + micros());
                leading = false;
            }
        }

        /** Ends the printing; returns whether a leader line was ever printed. */
        synchronized boolean resign() {
            resigned = true;
            return led;
        }
    }

    /**
     * lead: campaigns on path as id with a LeaderLatch or a LeaderSelector;
     * prints "waiting" once its node exists, then leader and notleader lines
     * as leadership comes and goes, until a line or EOF on stdin, or SIGTERM;
     * then leaves the election and prints "released".
     *
     * SIGTERM (or any other start of the JVM's shutdown) runs a shutdown
     * hook that wakes the campaign as a line on stdin would, then joins the
     * main thread: the JVM goes on until main has closed the recipe and the
     * client and halts with its own status, as it does after a resignation
     * on stdin.
     */
    static void lead(String kind, String connect, String path, String id) throws Exception {
        boolean selector = isSelector(kind);
        CuratorFramework client = connect(connect);
        try {
            CountDownLatch wake = new CountDownLatch(1);
            onStdin(line -> wake.countDown());
            Thread main = Thread.currentThread();
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                wake.countDown();
                // main halts the JVM once it has resigned, so this join
                // never returns; the JVM's own halt (status 143) never runs.
                joinUninterruptibly(main);
            }, "interop-sigterm"));
            Waiting waiting = Waiting.start(client, path);
            Leadership lines = new Leadership(waiting);
            if (selector) {
                leadSelector(client, path, id, lines, wake);
            } else {
                leadLatch(client, path, id, lines, wake);
            }
            waiting.stop();
            say("released");
        } finally {
            client.close();
        }
    }

    /** Waits for t to end, ignoring interrupts. */
    static void joinUninterruptibly(Thread t) {
        while (true) {
            try {
                t.join();
                return;
            } catch (InterruptedException ignored) {
                // keep waiting
            }
        }
    }

    /**
     * LeaderLatch(client, path, id), whose listener prints isLeader (NODE is
     * getLastPathIsLeader(), which Curator sets just before) and notLeader,
     * until wake; then close() (CloseMode.SILENT: the listener is not called).
     */
    static void leadLatch(CuratorFramework client, String path, String id, Leadership lines, CountDownLatch wake)
            throws Exception {
        LeaderLatch latch = new LeaderLatch(client, path, id);
        latch.addListener(new LeaderLatchListener() {
            public void isLeader() {
                lines.leader(latch.getLastPathIsLeader());
            }

            public void notLeader() {
                lines.notLeader();
            }
        });
        latch.start();
        wake.await();
        lines.resign();
        latch.close();
    }

    /**
     * LeaderSelector(client, path, listener) with id, without autoRequeue.
     * takeLeadership prints the leader line (NODE is this session's child of
     * path, or null if ZooKeeper cannot tell) and returns on wake;
     * stateChanged prints notleader before LeaderSelectorListenerAdapter
     * cancels the leadership (SUSPENDED or LOST), which interrupts
     * takeLeadership: the selector does not queue again. (A cancellation that
     * comes before the leader line is printed is reported when it interrupts
     * takeLeadership: nothing else interrupts it.) On wake, a selector
     * that never led is interrupted (it stops queuing); once its worker has
     * ended (the lock released), it is closed. The worker runs on an executor
     * of ours, one daemon thread as Curator's default, so as to wait for it.
     */
    static void leadSelector(CuratorFramework client, String path, String id, Leadership lines, CountDownLatch wake)
            throws Exception {
        ExecutorService worker = Executors.newSingleThreadExecutor(ThreadUtils.newThreadFactory("LeaderSelector"));
        LeaderSelector selector = new LeaderSelector(client, path, worker, new LeaderSelectorListenerAdapter() {
            public void takeLeadership(CuratorFramework c) throws Exception {
                String node;
                try {
                    node = ownedChild(c, path);
                } catch (KeeperException e) {
                    node = null;
                }
                if (lines.leader(node)) {
                    try {
                        wake.await();
                    } catch (InterruptedException e) {
                        lines.notLeader();
                        throw e;
                    }
                }
            }

            @Override
            public void stateChanged(CuratorFramework c, ConnectionState state) {
                if (c.getConnectionStateErrorPolicy().isErrorState(state)) {
                    lines.notLeader();
                }
                super.stateChanged(c, state);
            }
        });
        selector.setId(id);
        selector.start();
        wake.await();
        // The interrupt is sent holding lines, so that it reaches the worker
        // before its takeLeadership returns, never while it releases the lock.
        synchronized (lines) {
            if (!lines.resign()) {
                selector.interruptLeadership();
            }
        }
        worker.shutdown();
        worker.awaitTermination(Long.MAX_VALUE, TimeUnit.NANOSECONDS);
        selector.close();
    }

    /**
     * leader: prints "leader ID" for the participant that getLeader() of a
     * LeaderLatch or LeaderSelector on path names (neither needs to be
     * started for it), "leader" alone if its id is empty, or "none" when
     * there is no participant (Curator then returns a dummy participant that
     * is not the leader).
     */
    static void leader(String kind, String connect, String path) throws Exception {
        boolean selector = isSelector(kind);
        CuratorFramework client = connect(connect);
        try {
            Participant p = selector
                    ? new LeaderSelector(client, path, new LeaderSelectorListenerAdapter() {
                        public void takeLeadership(CuratorFramework c) {
                        }
                    }).getLeader()
                    : new LeaderLatch(client, path).getLeader();
            if (!p.isLeader()) {
                say("none");
            } else {
                say(p.getId().isEmpty() ? "leader" : "leader " + p.getId());
            }
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

    /**
     * bench: SESSIONS threads, each with a client of its own, run one untimed
     * warm-up cycle each; then "ready" is printed and a line (or EOF) read from
     * stdin; then the threads run acquire and release cycles for SECONDS, and
     * one line reports them: "ops=N seconds=S p50_us=P p99_us=Q", acquire
     * latency in microseconds. The clients stay open until another line (or
     * EOF) has been read from stdin after the report, so that whoever reads
     * the server's counters around the window (after "ready", after the
     * report) sees the cycles and nothing else. For KIND rw, max is READPCT: each cycle takes the read
     * lock with probability READPCT% and the write lock otherwise (one
     * InterProcessReadWriteLock per client; the warm-up takes both), and the
     * line goes on with " read_ops=R read_p50_us=P read_p99_us=Q write_ops=W
     * write_p50_us=P write_p99_us=Q"; ops is R+W and its percentiles are over
     * both.
     */
    static void bench(String kind, String connect, String path, int sessions, double seconds, String max)
            throws Exception {
        if (sessions < 1) {
            throw new UsageException("SESSIONS must be at least 1");
        }
        boolean rw = kind.equals("rw");
        int readPct = 0;
        if (rw) {
            if (max == null) {
                throw new UsageException("usage: Interop bench rw CONNECT PATH SESSIONS SECONDS READPCT");
            }
            readPct = Integer.parseInt(max);
            if (readPct < 0 || readPct > 100) {
                throw new UsageException("READPCT must be within 0..100");
            }
        }
        final int readShare = readPct;
        CountDownLatch ready = new CountDownLatch(sessions);
        CountDownLatch go = new CountDownLatch(1);
        CountDownLatch finished = new CountDownLatch(sessions); // cycles over
        CountDownLatch closing = new CountDownLatch(1); // the clients may close
        long[] deadline = new long[1];
        // samples[i][0] are the cycles of session i (its reads for rw);
        // samples[i][1] its writes for rw.
        Samples[][] samples = new Samples[sessions][];
        Throwable[] errs = new Throwable[sessions];
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < sessions; i++) {
            final int idx = i;
            samples[i] = new Samples[] {new Samples(), new Samples()};
            Thread t = new Thread(() -> {
                CuratorFramework client = null;
                boolean arrived = false;
                try {
                    client = connect(connect);
                    Lock[] locks;
                    if (rw) {
                        NodeReadWriteLock l = new NodeReadWriteLock(client, path);
                        locks = new Lock[] {mutexLock(l.readLock(), path, null), mutexLock(l.writeLock(), path, null)};
                    } else {
                        locks = new Lock[] {newLock(client, kind, path, max, null)};
                    }
                    for (Lock lock : locks) { // warm-up: creates parents, loads classes
                        lock.acquire();
                        lock.release();
                    }
                    arrived = true;
                    ready.countDown();
                    go.await();
                    Samples[] s = samples[idx];
                    ThreadLocalRandom rnd = ThreadLocalRandom.current();
                    long end = deadline[0];
                    while (System.nanoTime() - end < 0) {
                        int c = !rw || rnd.nextInt(100) < readShare ? 0 : 1;
                        Lock lock = locks[c];
                        long t0 = System.nanoTime();
                        lock.acquire();
                        long t1 = System.nanoTime();
                        lock.release();
                        s[c].add((t1 - t0) / 1000);
                    }
                } catch (Throwable e) {
                    errs[idx] = e;
                } finally {
                    if (!arrived) {
                        ready.countDown();
                    }
                    finished.countDown();
                    if (client != null) {
                        try {
                            closing.await();
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                        client.close();
                    }
                }
            }, "bench-" + i);
            threads.add(t);
            t.start();
        }
        // Errors end the run at once: main halts the JVM, waiting threads and all.
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        ready.await();
        boolean failed = false;
        for (Throwable t : errs) {
            failed |= t != null;
        }
        if (!failed) {
            say("ready");
            in.readLine();
        }
        long start = System.nanoTime();
        deadline[0] = failed ? start : start + (long) (seconds * 1e9);
        go.countDown();
        finished.await();
        long wall = System.nanoTime() - start;
        for (Throwable t : errs) {
            if (t instanceof Exception) {
                throw (Exception) t;
            } else if (t != null) {
                throw new RuntimeException(t);
            }
        }
        long[] reads = merge(samples, 0);
        long[] writes = merge(samples, 1);
        long[] all = new long[reads.length + writes.length];
        System.arraycopy(reads, 0, all, 0, reads.length);
        System.arraycopy(writes, 0, all, reads.length, writes.length);
        Arrays.sort(all);
        String line = String.format(java.util.Locale.ROOT, "ops=%d seconds=%.3f p50_us=%d p99_us=%d",
                all.length, wall / 1e9, pct(all, 0.50), pct(all, 0.99));
        if (rw) {
            line += String.format(java.util.Locale.ROOT,
                    " read_ops=%d read_p50_us=%d read_p99_us=%d write_ops=%d write_p50_us=%d write_p99_us=%d",
                    reads.length, pct(reads, 0.50), pct(reads, 0.99),
                    writes.length, pct(writes, 0.50), pct(writes, 0.99));
        }
        say(line);
        in.readLine();
        closing.countDown();
        for (Thread t : threads) {
            t.join();
        }
    }

    /** Returns the sorted samples of class c of all sessions. */
    static long[] merge(Samples[][] samples, int c) {
        int total = 0;
        for (Samples[] s : samples) {
            total += s[c].n;
        }
        long[] all = new long[total];
        int k = 0;
        for (Samples[] s : samples) {
            System.arraycopy(s[c].us, 0, all, k, s[c].n);
            k += s[c].n;
        }
        Arrays.sort(all);
        return all;
    }

    static long pct(long[] sorted, double q) {
        if (sorted.length == 0) {
            return 0;
        }
        int i = (int) Math.ceil(q * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(sorted.length - 1, i))];
    }
}
