// Command dsync runs a command while holding a lock in ZooKeeper, as flock(1)
// does with a file, and as "etcdctl lock" and "consul lock" do with their
// stores. Its locks are those of package dsync, which uses the node layout of
// Apache Curator's recipes: a dsync lock and a Curator InterProcessMutex (or
// InterProcessSemaphoreV2) on the same path exclude each other.
//
// Usage:
//
//	dsync lock [flags] PATH -- CMD [ARG...]
//	dsync sem [flags] -max N [-n W] PATH -- CMD [ARG...]
//	dsync ls [flags] PATH
//	dsync help [COMMAND]
//
// "dsync lock" waits for the mutex at PATH (Curator's InterProcessMutex),
// runs CMD while holding it, and releases it when CMD exits. "dsync sem"
// does the same with W leases (default 1) of a semaphore of N leases at PATH
// (Curator's InterProcessSemaphoreV2), taken all at once. "dsync ls" lists
// the holders and then the waiters of the mutex or semaphore at PATH, with
// each node's data (host and pid for dsync, an IP address for Curator), its
// ZooKeeper session and its age.
//
// Flags of lock and sem:
//
//	-zk host:port,...   ZooKeeper servers (default $DSYNC_ZK, else 127.0.0.1:2181)
//	-timeout D          give up waiting for the lock after D (default 0: wait forever)
//	-try                do not wait: fail at once if the lock is held
//	-lost term|ignore   when the lock is lost while CMD runs: terminate CMD
//	                    (default) or warn and let it run
//	-grace D            time between SIGTERM and SIGKILL (default 5s)
//	-session-timeout D  ZooKeeper session timeout (default 10s)
//
// "ls" takes -zk, -session-timeout, and -timeout (default 30s).
//
// CMD runs with dsync's standard input, output and error, in a process
// group of its own, so that signals reach every process it starts; it is
// therefore not a terminal's foreground job (reading from the terminal stops
// it). Its environment gains DSYNC_PATH (PATH) and, for lock,
// DSYNC_TOKEN: the fencing token of the hold (the lock node's czxid), which
// grows with every hold; pass it to the resources the lock protects so that
// they can refuse a holder that lost the lock without knowing it.
//
// SIGHUP, SIGINT and SIGTERM received while CMD runs are forwarded to its
// process group; dsync keeps the lock until CMD exits. Received while waiting, they
// end the wait. The lock counts as lost as soon as the connection to
// ZooKeeper drops (or the session expires, or the lock node is deleted):
// from then on nothing proves it is still held. With -lost term, dsync then
// sends SIGTERM to CMD's process group, SIGKILL after the grace period, and
// exits with status 3. If dsync itself is killed with SIGKILL, CMD keeps
// running without the lock: deliver signals to dsync, not to CMD.
//
// Exit status:
//
//	CMD's status  CMD ran; 128+N if CMD was killed by signal N
//	1             the lock was not acquired: held (-try), timed out
//	              (-timeout), or ZooKeeper failed; also ls failures
//	2             bad usage
//	3             the lock was lost while CMD ran (-lost term)
//	126, 127      CMD could not be run, or was not found
//	128+N         dsync got signal N while waiting for the lock
package main
