// Package zktest starts real Apache ZooKeeper servers for tests, as
// net/http/httptest starts HTTP servers, and as Curator's TestingServer and
// TestingCluster do for Java. dsync's behaviour is tested against the real
// thing, never a fake: a Server is one ZooKeeper process, an Ensemble is a
// quorum of them, and a Proxy sits between a client and a server to cut,
// partition or slow the network, or to break it at one chosen request.
//
// # What it needs
//
// Java and ZooKeeper. By default zktest runs Debian's ZooKeeper 3.8
// (apt-get install zookeeper default-jdk-headless) with java from
// $JAVA_HOME/bin or $PATH; set DSYNC_ZOOKEEPER_CLASSPATH (see EnvClasspath)
// to run another installation. When something is missing, Start and
// StartEnsemble fail the test (they never skip it) with a message that says
// what to install, and StartServer returns an error wrapping ErrNotInstalled.
// zktest runs on Linux and, without the guarantee that no server outlives its
// test binary, on other Unix systems.
//
// # A server per test
//
// Start returns a server that serves, on a free port of 127.0.0.1, with its
// files in t.TempDir; the test's cleanup stops it, and prints its log if the
// test failed:
//
//	func TestCreate(t *testing.T) {
//		srv := zktest.Start(t)
//		conn, _, err := zk.Connect([]string{srv.Addr()}, 4*time.Second)
//		...
//	}
//
// # A server per package
//
// A JVM takes a second or so to start, too long to pay in every test. To
// share one server among the tests of a package, start it in TestMain with
// StartServer, run the tests, then Close it before exiting:
//
//	var zkAddr string
//
//	func TestMain(m *testing.M) {
//		srv, err := zktest.StartServer()
//		if err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//		zkAddr = srv.Addr()
//		code := m.Run()
//		if err := srv.Close(); err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			code = 1
//		}
//		if code == 0 {
//			if err := goleak.Find(); err != nil { // goleak.VerifyTestMain would run m.Run itself
//				fmt.Fprintln(os.Stderr, err)
//				code = 1
//			}
//		}
//		os.Exit(code)
//	}
//
// Tests that share a server share its tree: give each test its own root (for
// example "/" + t.Name()), and leave stopping and pausing to tests that start
// their own server. CreatePersistent, called before m.Run, makes a parent of
// those roots that stays for the whole run.
//
// # Failures on demand
//
// Server.Stop and Server.Restart crash and recover a server with its data;
// Server.Pause and Server.Resume freeze it (SIGSTOP, SIGCONT) like a long
// garbage-collection pause, so that clients time out on a connection that
// stays open. StartEnsemble runs a quorum whose members fail the same way
// (Ensemble.Server), and whose leader and health Ensemble.Leader and
// Ensemble.WaitQuorum observe. A Proxy forwards a client's connections to a
// server and can Cut them (the client sees them close), BlackHole them (a
// partition: nothing passes and nobody is told), DropReplies, Heal, and
// SetDelay to make every round trip at least twice the delay longer, as
// across a real network.
//
// Server.Command sends any four-letter word, and Server.Mntr and Server.Mode
// parse the two that tests need most: the server's metrics, such as request
// counts for benchmarks, and its role.
//
// # Faults at the exact request
//
// A safety argument usually hangs on one request: the create whose reply is
// lost, the delete that never arrives. Proxy.Strike arms a one-shot fault
// that strikes the first request a Match selects (by opcode and path, also
// inside a multi), on whichever connection of the proxy sends it, and
// Fault.Struck says when it has happened, so a test needs no sleep to hit
// the moment (AwaitStruck waits for it, and fails a test that waits too
// long). The Action decides the request's outcome:
//
//   - Cut: the connection closes before the request reaches the server. Not
//     applied; go-zookeeper returns zk.ErrConnectionClosed.
//   - Lose: the server applies the request; its reply is dropped and the
//     connection closed. Applied; go-zookeeper returns
//     zk.ErrConnectionClosed too, so the caller cannot tell it from Cut.
//   - BlackHole: the connection is partitioned from the request on, until
//     Heal. Not applied; the client finds out only by its own timeout.
//   - Drop: the server applies the request and only its reply is dropped;
//     the connection carries on. go-zookeeper waits for the reply until the
//     connection closes for some other reason.
//   - Pass: nothing; the request and its reply go through. Struck says the
//     server has answered it, so what the client sends next on that
//     connection is served after it.
//   - Hold: the connection is partitioned from the request on, as with
//     BlackHole, while the proxy keeps the session alive at the server;
//     Fault.Release delivers the request there, late. Applied after the
//     client has given up on it: a request that outlives its session.
//
// A multi is one request: a fault that strikes it strikes all its ops. For
// example, to check that a lock leaves no node behind when the reply to its
// create is lost:
//
//	p := zktest.NewProxy(t, srv.Addr())
//	sess, err := zkconn.Dial(ctx, []string{p.Addr()})
//	...
//	m := dsync.NewMutex(sess, "/locks/orders")
//	fault := p.Strike(zktest.Match{Op: zktest.OpCreate, Path: "/locks/orders/", Prefix: true}, zktest.Lose)
//	_, err = m.LockContext(ctx) // its create is applied, the reply lost
//	zktest.AwaitStruck(t, fault)
//	// now m is held, or no node of ours is left under /locks/orders
//
// A client's own timeouts run from the last reply it read. A partition
// aimed by the clock misses when a reply is still on its way;
// Proxy.BlackHoleAfterPing begins one right after a ping reply is written
// to the client, and says when, so a test can aim at the moment the client
// gives the connection up.
//
// Faults and Proxy.Requests read the ZooKeeper protocol on the wire;
// whatever else crosses a proxy (four-letter words) is forwarded as it
// comes, delayed like the rest, and never matches.
//
// # TLS
//
// WithTLS gives a server (or every member of an ensemble) a second client
// port that speaks only TLS and requires client certificates, as
// production ensembles do: ZooKeeper's secureClientPort with the Netty
// connection factory. zktest makes a CA, a server certificate and a client
// certificate for it (ECDSA, PEM files in the server's directory).
// Server.SecureAddr (Ensemble.SecureAddrs) is the port, Server.TLSConfig a
// client *tls.Config the server accepts, and Server.ClientTLS the same
// identity as files. For tests of refusals, NewTLSFiles makes a stranger's
// identity, signed by another CA, and MisfitTLSConfigs the client
// configurations a server refuses, or that refuse it:
//
//	srv := zktest.Start(t, zktest.WithTLS())
//	sess, err := zkconn.Dial(ctx, []string{srv.SecureAddr()}, zkconn.WithTLS(srv.TLSConfig()))
//
// The plain port (Server.Addr) keeps serving clients and four-letter words.
//
// # The servers
//
// Every server listens on 127.0.0.1 only: clients on a free port (TLS
// clients on another, WithTLS), ensemble members also on two peer ports;
// nothing else (no AdminServer, no remote JMX). Its configuration is made
// for tests: a tick of 200ms, session timeouts from 400ms to 30s (see the
// options), no limit on connections per client address, all four-letter
// words enabled, and no fsync, which keeps data safe against a killed
// process but not against a power cut. The JVM is kept small and quick to
// start (a 192MB heap, the serial collector, only the quick JIT tier). The
// server log goes to zookeeper.log in the server's directory, never to the
// test's output; Server.Log returns it.
//
// # Goroutines
//
// A started server has one goroutine, which waits for its JVM; a Proxy has
// one that accepts and up to four per connection (a reader and a writer each
// way). Stop and Close wait for
// them, so a test that closes what it starts (the cleanups of Start,
// StartEnsemble and NewProxy do) leaves no goroutine behind for goleak to
// find. On Linux the kernel kills a server's JVM when the process that
// started it dies, so a test binary killed by its timeout leaves no server
// running.
package zktest
