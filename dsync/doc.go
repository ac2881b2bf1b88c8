// Command dsync runs a command while holding a lock in ZooKeeper, as flock(1)
// does with a file, and as "etcdctl lock" and "consul lock" do with their
// stores; while leading an election, as "etcdctl elect" does; or once across
// every process that asks for it. Its locks are those of package dsync,
// which uses the node layout of Apache Curator's recipes: a dsync lock and a
// Curator InterProcessMutex (or InterProcessSemaphoreV2) on the same path
// exclude each other, and "dsync elect" campaigns with Curator's LeaderLatch
// (or LeaderSelector) participants.
//
// Usage:
//
//	dsync lock [flags] PATH -- CMD [ARG...]
//	dsync sem [flags] -max N [-n W] PATH -- CMD [ARG...]
//	dsync elect [flags] PATH -- CMD [ARG...]
//	dsync elect -listen [flags] PATH
//	dsync once [flags] PATH -- CMD [ARG...]
//	dsync once -status|-reset [flags] PATH
//	dsync ls [flags] PATH
//	dsync revoke [flags] PATH
//	dsync help [COMMAND]
//
// "dsync lock" waits for the mutex at PATH (Curator's InterProcessMutex),
// runs CMD while holding it, and releases it when CMD exits. "dsync sem"
// does the same with W leases (default 1) of a semaphore of N leases at PATH
// (Curator's InterProcessSemaphoreV2), taken all at once. "dsync elect"
// campaigns for leadership of the election at PATH and runs CMD while it
// leads (see Elections below); "dsync once" runs CMD unless a run of it at
// PATH has succeeded already (see Once below). "dsync ls" lists the holders
// and then the waiters of the mutex, semaphore, read/write lock or election
// at PATH, with each node's data (host and pid for dsync, an IP address for
// Curator, a participant's id for an election), its ZooKeeper session and
// its age; for an election, the leader first, then the participants in the
// order they will lead; for a "dsync once" path, the record of the run that
// succeeded, then the queue of its lock at PATH/lock. "dsync revoke" asks
// the holders of the lock at PATH to release it (see Revocation below).
//
// Flags of lock, sem, elect and once:
//
//	-zk host:port,...   ZooKeeper servers (default $DSYNC_ZK, else 127.0.0.1:2181)
//	-timeout D          give up waiting for the lock after D (default 0: wait forever)
//	-try                (lock and sem) do not wait: fail at once if the lock
//	                    is held
//	-lost term|ignore   when the lock is lost while CMD runs: terminate CMD
//	                    (default) or warn and let it run
//	-grace D            time between SIGTERM and SIGKILL (default and maximum:
//	                    a quarter of the granted session timeout)
//	-exit-lost N        exit status when -lost term ended CMD (default 3)
//	-session-timeout D  ZooKeeper session timeout (default 10s)
//	-dial-timeout D     give up if no ZooKeeper server answers within D
//	                    (default 15s)
//	-revocable          (lock only) make the hold revocable: see Revocation
//	-id ID              (elect) the participant's id, its node's data
//	                    (default "host=<host name> pid=<pid>")
//	-selector           (elect) Curator LeaderSelector's layout
//	-listen             (elect) print the leaders instead of campaigning
//	-status, -reset     (once) print or delete the record instead of running
//
// "ls" and "revoke" take -zk, -session-timeout, -dial-timeout, and -timeout
// (default 30s). "elect -listen" takes neither CMD nor -id, -timeout, -lost,
// -grace, -exit-lost; "once -status" and "once -reset" take neither CMD nor
// -lost, -grace, -exit-lost (their -timeout bounds the whole command).
//
// Every command gives up, with exit status 1, when no server of -zk
// answers within -dial-timeout, and says so on stderr, naming the servers:
//
//	dsync: no ZooKeeper server answered within 15s: zk1:2181, zk2:2181
//
// A bad -dial-timeout (not a duration, or not positive) is bad usage (exit
// status 2), found before anything is dialed. The default is Curator's
// default connection timeout; it does not follow -session-timeout, which is
// how long a session outlives a dropped connection, not how long to wait for
// the first one. A -timeout that passes first ends the dial too, and its
// message says that no server answered.
//
// While "lock", "sem", "elect" or "once" waits in line, after 3s it says
// once on stderr who holds the lock (or leads), if stderr is a terminal (not
// in a log or a pipe):
//
//	dsync: waiting for /locks/x (held by host=web1 pid=4242, session 0x1000a2b3c4d0005)
//
// with the holder's node data (host and pid for dsync, an IP address for
// Curator, nothing for a revocable holder) and its ZooKeeper session, as
// "dsync ls" shows them; for a semaphore, how many leases are held and who
// holds the first; for an election, "led by ID, session …".
//
// CMD runs with dsync's standard input, output and error, in a process
// group of its own, so that signals reach every process it starts; it is
// therefore not a terminal's foreground job: reading from the terminal
// stops it, as it stops a background job, and so does writing to it with
// tostop set (stty tostop); dsync, holding the lock, then waits for it. Its
// environment gains DSYNC_PATH (PATH) and, for lock, elect and once (the
// run's lock), DSYNC_TOKEN: the fencing token of the hold (the lock node's
// czxid), which grows with every hold; pass it to the resources the lock
// protects so that they can refuse a holder that lost the lock without
// knowing it. All that follows about the lock holds for leadership and for
// the lock of a once's run alike.
//
// CMD's parent, the leader of its group, is a guard: dsync run again, which
// starts CMD, waits for it and exits as it did (see below). The signals
// dsync sends the group (those it forwards, a revocation's SIGTERM) wait
// until the guard has started CMD, which takes a few milliseconds; SIGKILL,
// SIGSTOP and SIGCONT do not wait. A loss of the lock in those milliseconds
// SIGKILLs the guard, with CMD if it has just started. A signal someone
// else sends the group in those milliseconds reaches the guard alone, which
// drops it, or, before the guard handles signals, takes its default action:
// SIGTSTP, SIGTTIN and SIGTTOU stop the guard, which starts CMD once the
// group is continued; others may kill it, and CMD does not start. The
// guard runs without the GODEBUG, GORACE, LD_DEBUG and LD_SHOW_AUXV dsync
// got, which would make it write of itself (in a -race build its GORACE is
// atexit_sleep_ms=0), and CMD gets them back as dsync got them (variables
// named DSYNC_GUARD_ and one of those, which carry them to the guard, are
// not passed on). The guard runs in the
// background of dsync's terminal, where with tostop set a write stops a
// process: on Linux it starts with SIGTTOU blocked, so that what is written
// at its start (the dynamic loader's warnings, as for an LD_PRELOAD library
// that is not there, or a preloaded library's output) goes through, and it
// starts CMD with dsync's signal mask. On other systems such output stops
// the guard before it starts CMD, and dsync then waits until it is killed.
//
// The lock covers CMD's process group: dsync releases it only once no
// process of the group is left. When CMD exits, the processes it left in
// its group get SIGTERM, then SIGKILL after the grace period, and dsync
// waits for them (on Linux it adopts them as a child subreaper, so that it
// can reap them). A process that leaves the group (setsid, setpgid) is not
// covered. Once it has released the lock, dsync waits for the release to
// reach ZooKeeper before it exits: if the connection dropped just then, it
// waits for the next one (at most the session timeout and a second, or
// until a signal that ends waits), so that the next in line does not wait
// for the server to expire dsync's session. A wait given up (-timeout,
// -try, a signal) ends the session without waiting, so as to exit when
// asked: with the connection down just then, its place in line stays until
// the server expires the session. (A lock won just as the signal came is
// released, and that waited for as above; a second signal cuts it short.)
//
// SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1 and SIGUSR2 received while CMD
// runs are forwarded to its process group; dsync keeps the lock until the
// group is gone. Received while waiting, they end the wait. SIGTSTP,
// SIGTTIN and SIGTTOU stop CMD's group (SIGSTOP), then dsync; SIGCONT
// continues both. A stopped dsync cannot answer ZooKeeper, so its session
// expires after the session timeout and others may take the lock while
// CMD's group sits stopped: continued after a stop longer than a quarter of
// the session timeout, dsync takes the lock as lost and SIGKILLs the stopped
// group instead of continuing it. SIGPIPE never kills dsync (a closed
// stderr only loses its messages); CMD starts with the default action.
// SIGHUP and SIGINT ignored when dsync starts (nohup, a shell's background
// job) stay ignored, for CMD too; dsync cannot see that other signals were
// ignored (Go's runtime handles them), so CMD starts with their default
// actions. SIGSTOP, which dsync cannot catch, stops dsync alone: CMD's group
// runs on meanwhile, and once the session has expired, without the lock.
//
// The lock counts as lost as soon as the connection to ZooKeeper drops (or
// the session expires, or the lock node is deleted): from then on nothing
// proves it is still held. With -lost term, dsync then sends SIGTERM to
// CMD's process group, SIGKILL after the grace period whatever CMD's first
// process did, and exits with status 3 (-exit-lost). The kill deadline:
// the connection counts as dropped once the server has answered no request
// (a ping goes out every T/3, T the session timeout) for 2T/3 after the
// last it surely heard, whatever else arrives, and the server may expire
// the session T after it last heard from dsync, so about T/3 remains; -grace is at most T/4 of the
// timeout the server granted (default T/4, 2.5s for the default 10s), and a
// longer -grace is rejected (exit status 2) before the lock is taken. A loss
// that is final at once (the session expired, or was given up shortly
// before it could expire; the lock node deleted) gets no grace period: the
// next in line may hold already, so dsync SIGKILLs CMD's group at once.
//
// If dsync dies without ending CMD (SIGKILL, a crash), the guard SIGKILLs
// CMD's whole process group, set-user-ID programs included, on every Unix:
// it reads a socket whose other end only dsync holds, and the read ends
// when dsync dies. Not covered: a process that leaves the group (setsid); one
// the guard may not signal (a program that takes another real user id, as
// sudo does, under a dsync that is not root); the processes CMD left in
// its group once CMD has exited (the guard exits with it) and dsync is
// ending them. A group stopped with dsync (SIGTSTP) dies once continued,
// as the kernel does with a SIGHUP when dsync's death orphans the group.
// Deliver signals to dsync, not to CMD. Whenever dsync ends CMD or
// forwards a signal, a line on stderr says why.
//
// # TLS
//
// Every command connects over TLS, to the servers' secureClientPort
// (ZooKeeper's NettyServerCnxnFactory), when given any of:
//
//	-tls-ca FILE    trust the CA certificates in PEM FILE to sign the
//	                servers' certificates (default: the system's CAs)
//	-tls-cert FILE  present the client certificate in PEM FILE
//	-tls-key FILE   its private key, in PEM FILE (not encrypted)
//
// -tls-cert and -tls-key go together. Without them dsync presents no
// certificate, which servers refuse unless ssl.clientAuth is "want" or
// "none" (ZooKeeper's default is "need"). A server's certificate must name
// the host given in -zk (a DNS name, or an IP address). A missing partner
// flag, an unreadable file, a CA file without a PEM certificate, or a
// certificate and key that do not match is bad usage (exit status 2), found
// before anything is dialed. A handshake refused by every server of -zk
// (no certificate, or one signed by a CA the servers do not trust; or a
// server certificate -tls-ca does not trust) ends the command at once with
// exit status 1 and a message that says so:
//
//	dsync: /locks/x: zkconn: dial [zk1:2281]: zkconn: TLS handshake refused by every server: TLS handshake with 10.0.0.1:2281: refused by the server: remote error: tls: bad certificate
//
// # Elections
//
// "dsync elect PATH -- CMD" puts a participant in line at PATH, in Curator
// LeaderLatch's layout (_c_<uuid>-latch-<sequence> nodes whose data is the
// participant's id, -id), or with -selector in LeaderSelector's (an
// InterProcessMutex's lock- nodes, data the id). Once it leads, it runs CMD;
// once CMD's process group is gone, it resigns and exits with CMD's status,
// and the next participant in line leads. Leadership is lost as a lock is
// (the connection drops, the session expires, the node is deleted), and
// -lost, -grace and -exit-lost act on the loss as they do for lock. The two
// layouts must not share a path: a participant of one does not wait for a
// leader of the other.
//
// "dsync elect -listen PATH" does not campaign: it prints the leader as
// "ID<TAB>NODE" as it starts (once there is one) and at every change of
// leader, a line each, until SIGINT or SIGTERM (exit 0). It rides out lost
// sessions and reports other ZooKeeper errors on stderr as it goes on; it
// exits 1 if no server answered within -dial-timeout, or if it cannot go on.
//
// # Once
//
// "dsync once PATH -- CMD" runs CMD unless a run of it at PATH has
// succeeded, as sync.Once does across goroutines (package dsync's Once).
// Runs are one at a time under the mutex at PATH/lock; a run whose CMD exits
// 0 is recorded in the persistent node PATH/done ("host=… pid=…
// at=<RFC 3339 time>"), and every "dsync once" on PATH from then on exits 0
// without running CMD, as do those that waited meanwhile. They say nothing,
// or one line on stderr if it is a terminal. A run whose CMD fails records
// nothing: dsync exits with CMD's status, and the next in line runs CMD.
// If the lock is lost before CMD's process group is gone (-lost term, which
// terminates CMD), or (with -lost term) before the success is recorded,
// nothing is recorded and dsync exits 3 (-exit-lost); with -lost ignore, a
// success is recorded if the lock node is still there when the record is
// written (its transaction checks it): make CMD safe to run again after an
// interrupted run. (If it is lost while the record's request is under way,
// dsync also exits 3, and says the record may or may not be written.) A
// run needs write permission on PATH: it advances PATH's version before
// CMD starts, which is what keeps "dsync once -reset" from deleting a
// record written after the one it read. "dsync once -status PATH" prints "done RECORD" or "not
// done"; "dsync once -reset PATH" deletes the record, so that CMD runs again
// (a run under way is not stopped, and records its success as usual).
//
// # Revocation
//
// "dsync lock -revocable" holds the mutex as Curator's makeRevocable does:
// its node has empty data, and it watches the node for "__REVOKE__", which
// "dsync revoke" and Curator's Revoker write. When a revocation is requested
// while CMD runs, CMD's process group gets SIGTERM, once, with a line on
// stderr; nothing else happens (no SIGKILL follows): CMD decides when to
// exit, and dsync releases the lock as usual once the group is gone, with
// CMD's exit status. A request made before CMD started (written into
// dsync's node while it waited in line) keeps CMD from starting: dsync
// releases the lock and exits 1.
//
// "dsync revoke PATH" writes the request: into the node of each holder of
// the lock at PATH (a mutex's first node in line; for a semaphore, every
// lease held, never a lease still waiting), or, if the last segment of PATH
// is a node name (_c_<uuid>-..., as "dsync ls" shows it), into that one
// node, holder or waiter. It asks only revocable nodes (empty data): it
// never overwrites the data of a node that is not revocable. It prints
// "asked NODE" on stdout for each node it asked. It exits 0 when it asked
// every holder (at least one), and 1 when nobody holds PATH, the node does
// not exist, a holder is not revocable (the others are still asked), no
// ZooKeeper server answered (-dial-timeout), ZooKeeper failed or -timeout
// passed; 2 on bad usage.
//
// Exit status of lock and sem (elect and once follow below):
//
//	CMD's status  CMD ran; 128+N if CMD was killed by signal N
//	1             the lock was not acquired: held (-try), timed out
//	              (-timeout), no ZooKeeper server answered
//	              (-dial-timeout), or ZooKeeper failed; with -revocable, a
//	              revocation was requested before CMD started (it did not
//	              run); also ls and revoke failures
//	2             bad usage
//	3             the lock was lost while CMD ran (-lost term), or after
//	              it was acquired and before CMD started (CMD did not
//	              run); -exit-lost sets another
//	126, 127      CMD could not be run, or was not found (found before
//	              anything is dialed, when CMD is not there or not
//	              executable)
//	128+N         dsync got signal N while waiting for the lock
//
// elect exits as lock does, 1 meaning that leadership was not won and 3
// that it was lost while CMD ran or before CMD started; with -listen, 0
// after SIGINT or SIGTERM, 1 if it cannot go on. once exits:
//
//	0             the run is done: CMD ran, exited 0 and was recorded, or
//	              a run had succeeded already (CMD did not run)
//	CMD's status  CMD ran and failed; nothing was recorded
//	1             the lock was not acquired (as for lock), or CMD succeeded
//	              but its success could not be recorded
//	2             bad usage
//	3             the lock was lost before CMD started (CMD did not
//	              run), before CMD's group was gone or before the success
//	              was recorded; nothing was recorded
//	126, 127      CMD could not be run, or was not found
//	128+N         dsync got signal N while waiting for the lock
//
// once -status and once -reset exit 0, or 1 when they fail.
package main
