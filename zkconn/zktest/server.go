package zktest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// startTimeout bounds how long a server (or an ensemble) may take to serve
// after its JVM starts. A JVM usually serves within a second or two; the rest
// is for a loaded machine.
const startTimeout = 90 * time.Second

// startAttempts is how often a standalone server is started on a fresh port
// when another process took its port between the check and the JVM's bind.
const startAttempts = 3

// restartAttempts is how often Restart starts a server whose port was
// taken, restartPause apart: the port cannot change, but what holds it (a
// socket the kernel keeps a moment after the old JVM, a port check of
// another test process) may let it go.
const (
	restartAttempts = 5
	restartPause    = time.Second
)

// errPortInUse marks a start that failed because a port was taken.
var errPortInUse = errors.New("port in use")

// A Server is one ZooKeeper server, standalone or a member of an Ensemble,
// running in its own JVM on 127.0.0.1 with its files in a temporary
// directory: zoo.cfg, the logging configuration, the server log
// (zookeeper.log) and the data directory.
//
// Its methods may be called from several goroutines; Stop, Restart, Pause,
// Resume and Close take turns. A Server is made by Start, StartServer or
// StartEnsemble; the zero value is not usable.
type Server struct {
	name       string // in messages: "zk", or "zk1"… in an ensemble
	addr       string
	secureAddr string // the TLS client address (WithTLS); "" for none
	inst       installation
	cfg        config
	layout     layout
	ownDir     bool // Close removes layout.dir

	mu     sync.Mutex              // held by lifecycle changes
	proc   atomic.Pointer[process] // the JVM while started; nil while stopped
	paused atomic.Bool             // the JVM is SIGSTOPped
	// logFrom is the log's length when the last JVM started: what a failed
	// start wrote comes after it.
	logFrom int
	closed  atomic.Bool
}

// Start starts a standalone ZooKeeper server for the test t and returns it
// once it serves: it answers "ruok" with "imok" and "srvr" with its mode.
// The server listens on a free port of 127.0.0.1 and keeps its files in a
// directory from t.TempDir. When the test ends, t.Cleanup stops the server,
// and, if the test failed, logs the server's log with t.Log.
//
// Start calls t.Fatal if the server does not serve within 90s, or cannot
// start at all, for example because Java or ZooKeeper is not installed (the
// message says what to install, or ends with the server's log); so, like
// t.Fatal, it must be called from the goroutine running the test.
//
// A JVM takes a second or more to start. To share one server among the tests
// of a package, start it with StartServer in TestMain (see the package
// documentation).
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s, err := startStandalone(t.TempDir(), false, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logServers(t, s)
		}
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// StartServer is Start without a testing.TB, for TestMain and for programs:
// it returns the server once it serves, or an error (wrapping ErrNotInstalled
// when Java or ZooKeeper is missing). The server's files live in a new
// directory under os.TempDir. The caller owns the server and
// must Close it, which stops it and removes that directory.
func StartServer(opts ...Option) (*Server, error) {
	dir, err := newDir()
	if err != nil {
		return nil, err
	}
	s, err := startStandalone(dir, true, opts)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// dirPrefix begins the name of the directory StartServer makes, which goes
// on with the owning process's pid: zktest-<pid>-<random>.
const dirPrefix = "zktest-"

// newDir makes a directory for a server's files, named for this process, and
// first removes the directories of earlier processes that are gone: a
// program killed before it could Close its servers (a test binary killed by
// its timeout, say; the kernel kills its JVMs too) leaves its directory to
// the next StartServer, in this program or another, to remove.
func newDir() (string, error) {
	olds, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*-*"))
	for _, old := range olds {
		pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(old), dirPrefix), "-")
		if n, err := strconv.Atoi(pid); err == nil && n > 0 && syscall.Kill(n, 0) == syscall.ESRCH {
			os.RemoveAll(old)
		}
	}
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", dirPrefix, os.Getpid()))
	if err != nil {
		return "", fmt.Errorf("zktest: %w", err)
	}
	return dir, nil
}

// startStandalone starts a standalone server in dir, trying again on another
// port if its port was taken.
func startStandalone(dir string, ownDir bool, opts []Option) (*Server, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	inst, err := findInstallation(cfg.tls)
	if err != nil {
		return nil, err
	}
	var material *tlsMaterial
	nports := 1
	if cfg.tls {
		if material, err = newTLSMaterial(dir); err != nil {
			return nil, err
		}
		nports++
	}
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(nports)
		if err != nil {
			return nil, err
		}
		l := layout{dir: dir, clientPort: ports[0]}
		if material != nil {
			l.securePort, l.tls = ports[1], material
		}
		s := newServer("zk", inst, cfg, l, ownDir)
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		err = s.start(ctx)
		cancel()
		if err == nil {
			return s, nil
		}
		if attempt == startAttempts || !errors.Is(err, errPortInUse) {
			return nil, err
		}
	}
}

func newServer(name string, inst installation, cfg config, l layout, ownDir bool) *Server {
	s := &Server{
		name:   name,
		addr:   net.JoinHostPort("127.0.0.1", strconv.Itoa(l.clientPort)),
		inst:   inst,
		cfg:    cfg,
		layout: l,
		ownDir: ownDir,
	}
	if l.tls != nil {
		s.secureAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(l.securePort))
	}
	return s
}

// Addr returns the server's client address, "127.0.0.1:port". It stays the
// same across Stop and Restart.
func (s *Server) Addr() string { return s.addr }

// SecureAddr returns the server's TLS client address, "127.0.0.1:port", if
// it was started WithTLS, and "" otherwise. It stays the same across Stop
// and Restart. Clients there must present a certificate the server trusts
// (see TLSConfig and ClientTLS); four-letter words go to Addr.
func (s *Server) SecureAddr() string { return s.secureAddr }

// TLSConfig returns a new client *tls.Config for SecureAddr: it trusts the
// CA that signed the server's certificate and presents a client certificate
// the server accepts. ServerName is left empty (the server's certificate
// names 127.0.0.1, ::1 and localhost). It returns nil if the server was not
// started WithTLS. The certificates are held in memory: the config works
// after Close too.
func (s *Server) TLSConfig() *tls.Config {
	if s.layout.tls == nil {
		return nil
	}
	return s.layout.tls.config()
}

// ClientTLS returns the PEM files of the identity TLSConfig holds, for
// programs that take files (dsync's -tls-ca, -tls-cert, -tls-key). It
// returns the zero TLSFiles if the server was not started WithTLS. The files
// are in the server's directory: Close removes those of a server made by
// StartServer.
func (s *Server) ClientTLS() TLSFiles {
	if s.layout.tls == nil {
		return TLSFiles{}
	}
	return s.layout.tls.client
}

// Stop stops the server's JVM (SIGTERM, then SIGKILL if it has not exited
// within 5s) and returns once it has exited. The data directory is kept, so
// Restart brings the server back with its data; clients see their
// connections close. Stopping a stopped server does nothing. Stop returns an
// error if the JVM had already exited on its own, and ErrClosed after Close.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	return s.stopLocked()
}

func (s *Server) stopLocked() error {
	p := s.proc.Load()
	if p == nil {
		return nil
	}
	err := p.stop()
	s.proc.Store(nil)
	s.paused.Store(false)
	if err != nil {
		return fmt.Errorf("%s (%s): %w", s.name, s.addr, err)
	}
	return nil
}

// Restart starts the server again on the same port with the same data, and
// returns once it serves; if it does not serve within 90s, Restart stops it
// again and returns an error that ends with the server's log. A running
// server is stopped first, so Restart also bounces a server. An ensemble
// member serves only once it has joined a quorum, so restarting one succeeds
// only while a majority of the ensemble is running. Restart returns ErrClosed
// after Close.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	// A JVM that exited on its own is restarted all the same; its log tells why.
	_ = s.stopLocked()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		err := s.start(ctx)
		if err == nil || attempt == restartAttempts || !errors.Is(err, errPortInUse) {
			return err
		}
		select {
		case <-time.After(restartPause):
		case <-ctx.Done():
			return err
		}
	}
}

// start launches the JVM and waits until it serves; on failure the JVM is
// killed. The caller holds s.mu or owns s exclusively.
func (s *Server) start(ctx context.Context) error {
	if err := s.launch(); err != nil {
		return err
	}
	if err := waitServing(ctx, s.addr, s.layout.dataDir(), s.proc.Load()); err != nil {
		return s.abort(err)
	}
	if err := s.waitSecure(ctx); err != nil {
		return s.abort(err)
	}
	return nil
}

// waitSecure waits until the server's TLS port, if it has one, completes a
// handshake with a client certificate, or its JVM exits, or ctx is done. The
// plain port can serve before the TLS port listens.
func (s *Server) waitSecure(ctx context.Context) error {
	if s.secureAddr == "" {
		return nil
	}
	return waitFor(ctx, s.proc.Load(), func(ctx context.Context) error {
		return handshake(ctx, s.secureAddr, s.layout.tls.config())
	})
}

// handshake makes a TLS connection to addr with cfg and closes it.
func handshake(ctx context.Context, addr string, cfg *tls.Config) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	cfg.ServerName = "127.0.0.1"
	d := tls.Dialer{Config: cfg}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("TLS port %s: %w", addr, err)
	}
	return c.Close()
}

// launch writes the server's files and starts its JVM without waiting for it.
func (s *Server) launch() error {
	if err := s.cfg.writeFiles(&s.layout); err != nil {
		return err
	}
	s.logFrom = len(s.Log())
	p, err := startProcess(s.inst.java, s.cfg.jvmArgs(&s.layout, s.inst.classpath),
		s.layout.dir, filepath.Join(s.layout.dir, logFile))
	if err != nil {
		return err
	}
	s.paused.Store(false)
	s.proc.Store(p)
	return nil
}

// abort kills the JVM of a failed start and returns err with the log's tail.
func (s *Server) abort(err error) error {
	s.kill()
	log := s.Log()
	if strings.Contains(log[min(s.logFrom, len(log)):], "Address already in use") {
		err = fmt.Errorf("%w (%w)", err, errPortInUse)
	}
	return &startError{
		msg: fmt.Sprintf("zktest: start %s (%s): %v\n--- end of its log ---\n%s",
			s.name, s.addr, err, lastLines(log, 30)),
		err: err,
	}
}

// kill ends the JVM at once, if it runs.
func (s *Server) kill() {
	if p := s.proc.Load(); p != nil {
		p.kill()
		s.proc.Store(nil)
		s.paused.Store(false)
	}
}

// startError is a failed start: a message with the log's tail, wrapping the
// cause (which errors.Is can find) without repeating it.
type startError struct {
	msg string
	err error
}

func (e *startError) Error() string { return e.msg }
func (e *startError) Unwrap() error { return e.err }

// waitServing polls the server at addr until it serves from dataDir, or p
// exits or ctx is done.
func waitServing(ctx context.Context, addr, dataDir string, p *process) error {
	return waitFor(ctx, p, func(ctx context.Context) error { return serving(ctx, addr, dataDir) })
}

// waitFor calls check until it succeeds or p exits or ctx is done.
func waitFor(ctx context.Context, p *process, check func(context.Context) error) error {
	delay := 10 * time.Millisecond
	timer := time.NewTimer(0)
	defer timer.Stop()
	var last error
	for {
		select {
		case <-p.done:
			return fmt.Errorf("JVM exited during start-up: %v", p.err)
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("not serving: %w (last: %v)", ctx.Err(), last)
			}
			return fmt.Errorf("not serving: %w", ctx.Err())
		case <-timer.C:
		}
		if last = check(ctx); last == nil {
			return nil
		}
		delay = min(2*delay, 200*time.Millisecond)
		timer.Reset(delay)
	}
}

// serving checks the server at addr with ruok and srvr, and with conf that
// it keeps its data in dataDir: that it is the server just started, not
// another process's that holds the port.
func serving(ctx context.Context, addr, dataDir string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	reply, err := fourLetter(ctx, addr, "ruok")
	if err != nil {
		return err
	}
	if reply != "imok" {
		return fmt.Errorf("zktest: ruok: got %q; want imok", reply)
	}
	reply, err = fourLetter(ctx, addr, "srvr")
	if err != nil {
		return err
	}
	if _, err = parseMode(reply); err != nil {
		return err
	}
	if reply, err = fourLetter(ctx, addr, "conf"); err != nil {
		return err
	}
	for line := range strings.Lines(reply) {
		if dir, ok := strings.CutPrefix(strings.TrimSpace(line), "dataDir="); ok {
			if filepath.Dir(dir) != dataDir {
				return fmt.Errorf("zktest: the server at %s keeps its data in %s; want %s (another server holds the port)", addr, dir, dataDir)
			}
			return nil
		}
	}
	return fmt.Errorf("zktest: conf: no dataDir in %q", reply)
}

// Pause stops the server's JVM in its tracks with SIGSTOP, as a long garbage
// collection pause or a stalled machine would: its connections stay open but
// nothing answers, and clients notice only by their timeouts. On Linux, Pause
// returns once every thread of the JVM has stopped. Pausing a paused server
// does nothing. Pause returns ErrNotRunning if the server is stopped,
// and ErrClosed after Close. Stop, Restart and Close work on a paused server.
func (s *Server) Pause() error {
	return s.setPaused(true)
}

// Resume lets a paused server's JVM run again with SIGCONT. Resuming a server
// that is not paused does nothing. Resume returns ErrNotRunning if the server
// is stopped, and ErrClosed after Close.
func (s *Server) Resume() error {
	return s.setPaused(false)
}

func (s *Server) setPaused(pause bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	p := s.proc.Load()
	if p == nil || p.exited() {
		return fmt.Errorf("%s (%s): %w", s.name, s.addr, ErrNotRunning)
	}
	if s.paused.Load() == pause {
		return nil
	}
	sig := syscall.SIGCONT
	if pause {
		sig = syscall.SIGSTOP
	}
	if err := p.signal(sig); err != nil {
		return fmt.Errorf("%s (%s): %w", s.name, s.addr, err)
	}
	s.paused.Store(pause)
	if pause {
		if err := waitStopped(p.cmd.Process.Pid, 10*time.Second); err != nil {
			return fmt.Errorf("%s (%s): %w", s.name, s.addr, err)
		}
	}
	return nil
}

// Command sends the four-letter word (for example "ruok", "srvr", "mntr",
// "cons", "dump") to the server and returns its whole reply. All words are
// enabled. If ctx has no deadline, Command gives up after 10 seconds. On a
// timeout the error wraps context.DeadlineExceeded; on cancellation,
// ctx.Err(). Command returns ErrClosed after Close.
func (s *Server) Command(ctx context.Context, word string) (string, error) {
	if s.closed.Load() {
		return "", ErrClosed
	}
	return fourLetter(ctx, s.addr, word)
}

// Mntr returns the server's metrics from the "mntr" command, keyed by name
// ("zk_server_state", "zk_znode_count", "zk_outstanding_requests", …; values
// as the server printed them). When the server is up but not serving, the
// error wraps ErrNotServing.
func (s *Server) Mntr(ctx context.Context) (map[string]string, error) {
	reply, err := s.Command(ctx, "mntr")
	if err != nil {
		return nil, err
	}
	m, err := parseMntr(reply)
	if err != nil {
		return nil, fmt.Errorf("%s (%s): %w", s.name, s.addr, err)
	}
	return m, nil
}

// Watches returns the server's watch table from the "wchp" command: for
// each watched path, the ids of the sessions watching it.
func (s *Server) Watches(ctx context.Context) (map[string][]int64, error) {
	reply, err := s.Command(ctx, "wchp")
	if err != nil {
		return nil, err
	}
	m, err := parseWchp(reply)
	if err != nil {
		return nil, fmt.Errorf("%s (%s): %w", s.name, s.addr, err)
	}
	return m, nil
}

// AwaitWatches returns once ok reports true of the server's watch table
// (see Watches), or with ctx's error, or the error of a reading of it.
// ZooKeeper offers no watch on its watch table, so it reads it again every
// few milliseconds.
func (s *Server) AwaitWatches(ctx context.Context, ok func(map[string][]int64) bool) error {
	for {
		m, err := s.Watches(ctx)
		if err != nil {
			return err
		}
		if ok(m) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Mode returns the server's mode from the "srvr" command: "standalone" for a
// standalone server; "leader" or "follower" for an ensemble member. When the
// server is up but not serving (still starting, or a member without quorum),
// the error wraps ErrNotServing.
func (s *Server) Mode(ctx context.Context) (string, error) {
	reply, err := s.Command(ctx, "srvr")
	if err != nil {
		return "", err
	}
	mode, err := parseMode(reply)
	if err != nil {
		return "", fmt.Errorf("%s (%s): %w", s.name, s.addr, err)
	}
	return mode, nil
}

// Log returns the server's log so far, across restarts: ZooKeeper's log
// lines and anything else its JVM printed. It returns "" once Close has
// removed the server's directory.
func (s *Server) Log() string {
	b, err := os.ReadFile(filepath.Join(s.layout.dir, logFile))
	if err != nil {
		return ""
	}
	return string(b)
}

// Close stops the server as Stop does and marks it closed; a server made by
// StartServer also has its directory removed. Close returns Stop's error, if
// any. Closing a closed server does nothing and returns nil. Servers made by
// Start and StartEnsemble are closed by the test's cleanup.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return nil
	}
	s.closed.Store(true)
	err := s.stopLocked()
	if s.ownDir {
		if rerr := os.RemoveAll(s.layout.dir); rerr != nil {
			err = errors.Join(err, fmt.Errorf("zktest: %w", rerr))
		}
	}
	return err
}

// maxLoggedLog bounds what a failed test logs of one server's log.
const maxLoggedLog = 256 << 10

// logServers logs the servers' logs to t.
func logServers(t testing.TB, servers ...*Server) {
	t.Helper()
	for _, s := range servers {
		log := s.Log()
		if len(log) > maxLoggedLog {
			log = "[…]" + log[len(log)-maxLoggedLog:]
		}
		t.Logf("zktest: log of %s (%s):\n%s", s.name, s.addr, log)
	}
}

// lastLines returns the last n lines of s, without the final newline.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
