package zktest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// ensembleAttempts is how often StartEnsemble tries fresh ports when another
// process took one of them between the check and a JVM's bind.
const ensembleAttempts = 2

// An Ensemble is a ZooKeeper quorum of servers on 127.0.0.1, each in its own
// JVM, for tests of failover: stop, restart, pause or resume members through
// Server and watch the quorum with Leader and WaitQuorum. Members are
// numbered from 0; member i has myid i+1. Its methods may be called from
// several goroutines. The zero value is not usable.
type Ensemble struct {
	servers   []*Server
	closeOnce sync.Once
}

// StartEnsemble starts an ensemble of n servers for the test t and returns it
// once every member serves and exactly one of them leads. Each member listens
// for clients on its own free port of 127.0.0.1 (see Addrs) and for its peers
// on two more; its files are in a directory from t.TempDir. initLimit and
// syncLimit are set to 20s and 5s, rounded up to whole ticks (see
// WithTickTime), so that a loaded machine does not break the quorum; a
// paused leader is therefore noticed by its followers after about 5s. The
// options apply to every member. When the test ends, t.Cleanup stops all
// members, and, if the test failed, logs their logs with t.Log.
//
// n should be odd (3 or 5): an ensemble of n tolerates the loss of (n-1)/2
// members. StartEnsemble calls t.Fatal if n < 1 or the ensemble does not
// serve within 90s; so, like t.Fatal, it must be called from the goroutine
// running the test.
func StartEnsemble(t testing.TB, n int, opts ...Option) *Ensemble {
	t.Helper()
	if n < 1 {
		t.Fatalf("zktest: StartEnsemble(%d): an ensemble needs at least one server", n)
	}
	e, err := startEnsemble(t.TempDir(), n, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logServers(t, e.servers...)
		}
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return e
}

func startEnsemble(dir string, n int, opts []Option) (*Ensemble, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	inst, err := findInstallation(cfg.tls)
	if err != nil {
		return nil, err
	}
	var material *tlsMaterial
	if cfg.tls {
		if material, err = newTLSMaterial(dir); err != nil {
			return nil, err
		}
	}
	for attempt := 1; ; attempt++ {
		e, err := tryEnsemble(dir, attempt, n, inst, cfg, material)
		if err == nil {
			return e, nil
		}
		if attempt == ensembleAttempts || !errors.Is(err, errPortInUse) {
			return nil, err
		}
	}
}

// tryEnsemble starts the JVMs of all members at once and waits for the
// quorum (and, with material, for every member's TLS port).
func tryEnsemble(dir string, attempt, n int, inst installation, cfg config, material *tlsMaterial) (*Ensemble, error) {
	per := 3 // client, peer and election ports
	if material != nil {
		per++ // and the TLS client port
	}
	ports, err := freePorts(per * n)
	if err != nil {
		return nil, err
	}
	members := make([]member, n)
	for i := range members {
		members[i] = member{id: i + 1, peerPort: ports[per*i+1], electionPort: ports[per*i+2]}
	}
	e := &Ensemble{}
	for i := range n {
		l := layout{
			dir:        filepath.Join(dir, fmt.Sprintf("try%d-zk%d", attempt, i+1)),
			clientPort: ports[per*i],
			id:         i + 1,
			members:    members,
		}
		if material != nil {
			l.securePort, l.tls = ports[per*i+3], material
		}
		e.servers = append(e.servers, newServer(fmt.Sprintf("zk%d", i+1), inst, cfg, l, false))
	}
	for _, s := range e.servers {
		if err := s.launch(); err != nil {
			e.Close()
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	_, err = e.waitQuorum(ctx, true)
	for _, s := range e.servers {
		if err == nil {
			err = s.waitSecure(ctx)
		}
	}
	if err != nil {
		var b strings.Builder
		fmt.Fprintf(&b, "zktest: start ensemble of %d: %v", n, err)
		for _, s := range e.servers {
			s.kill()
			log := s.Log()
			if strings.Contains(log, "Address already in use") {
				err = fmt.Errorf("%w (%w)", err, errPortInUse)
			}
			fmt.Fprintf(&b, "\n--- end of %s's log ---\n%s", s.name, lastLines(log, 15))
		}
		e.Close()
		return nil, &startError{msg: b.String(), err: err}
	}
	return e, nil
}

// Addrs returns the members' client addresses, in member order. The caller
// owns the returned slice.
func (e *Ensemble) Addrs() []string {
	addrs := make([]string, len(e.servers))
	for i, s := range e.servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

// SecureAddrs returns the members' TLS client addresses, in member order, if
// the ensemble was started WithTLS, and nil otherwise. The members share
// their certificates: any member's Server.TLSConfig and Server.ClientTLS do
// for all of them. The caller owns the returned slice.
func (e *Ensemble) SecureAddrs() []string {
	if e.servers[0].secureAddr == "" {
		return nil
	}
	addrs := make([]string, len(e.servers))
	for i, s := range e.servers {
		addrs[i] = s.SecureAddr()
	}
	return addrs
}

// Server returns member i, counted from 0 (its myid is i+1), to stop,
// restart, pause or query. It panics if i is out of range.
func (e *Ensemble) Server(i int) *Server {
	return e.servers[i]
}

// Len returns the number of members.
func (e *Ensemble) Len() int { return len(e.servers) }

// Leader blocks until exactly one member reports itself leader (asked with
// "srvr"; stopped and paused members are not asked) or ctx is done. On
// success it returns the leader's index. On failure it returns -1 and an
// error that wraps ctx.Err() and tells what each member answered last.
func (e *Ensemble) Leader(ctx context.Context) (int, error) {
	return e.poll(ctx, func(ctx context.Context) (int, error) {
		modes := e.modes(ctx)
		leader, err := modes.leader()
		if err != nil {
			return -1, fmt.Errorf("%w: %s", err, modes)
		}
		return leader, nil
	})
}

// WaitQuorum blocks until the ensemble serves: every member that is started
// and not paused serves requests, and exactly one of them leads. Members that
// were stopped or paused are not waited for, but a quorum needs a majority of
// all members, so with too few started WaitQuorum waits until ctx is done.
// On success it returns nil. On failure it returns an error that wraps
// ctx.Err() and tells what each member answered last.
func (e *Ensemble) WaitQuorum(ctx context.Context) error {
	_, err := e.waitQuorum(ctx, false)
	return err
}

// waitQuorum is WaitQuorum; with strict, a member whose JVM exited fails the
// wait at once (at start-up, all members must come up).
func (e *Ensemble) waitQuorum(ctx context.Context, strict bool) (int, error) {
	return e.poll(ctx, func(ctx context.Context) (int, error) {
		modes := e.modes(ctx)
		if strict {
			for i, m := range modes {
				if m.exited != nil {
					return -1, fmt.Errorf("%w: %s: JVM exited during start-up: %v", errStop, e.servers[i].name, m.exited)
				}
			}
		}
		if err := modes.serving(); err != nil {
			return -1, fmt.Errorf("%w: %s", err, modes)
		}
		leader, err := modes.leader()
		if err != nil {
			return -1, fmt.Errorf("%w: %s", err, modes)
		}
		return leader, nil
	})
}

// errStop ends a poll early.
var errStop = errors.New("zktest: giving up")

// poll calls check until it succeeds, fails with errStop, or ctx is done.
func (e *Ensemble) poll(ctx context.Context, check func(context.Context) (int, error)) (int, error) {
	delay := 10 * time.Millisecond
	timer := time.NewTimer(0)
	defer timer.Stop()
	var last error
	for {
		select {
		case <-ctx.Done():
			if last == nil {
				return -1, ctx.Err()
			}
			return -1, fmt.Errorf("zktest: %w; last seen: %w", ctx.Err(), last)
		case <-timer.C:
		}
		i, err := check(ctx)
		if err == nil {
			return i, nil
		}
		if errors.Is(err, errStop) {
			return -1, err
		}
		last = err
		delay = min(2*delay, 200*time.Millisecond)
		timer.Reset(delay)
	}
}

// memberMode is what one member answered.
type memberMode struct {
	name   string
	mode   string // "leader", "follower", "standalone"…; "" if not serving
	skip   string // why the member was not asked: "stopped", "paused"
	exited error  // the JVM exited on its own (non-nil) …
	err    error  // … or the query failed
}

type modeList []memberMode

// modes asks every started, unpaused member for its mode, all at once.
func (e *Ensemble) modes(ctx context.Context) modeList {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	modes := make(modeList, len(e.servers))
	var wg sync.WaitGroup
	for i, s := range e.servers {
		m := &modes[i]
		m.name = s.name
		p := s.proc.Load()
		switch {
		case s.closed.Load():
			m.skip = "closed"
		case p == nil:
			m.skip = "stopped"
		case p.exited():
			m.exited = fmt.Errorf("%v", p.err)
		case s.paused.Load():
			m.skip = "paused"
		default:
			wg.Go(func() { m.mode, m.err = s.Mode(ctx) })
		}
	}
	wg.Wait()
	return modes
}

// serving returns an error unless every member asked serves.
func (ms modeList) serving() error {
	for _, m := range ms {
		if m.skip == "" && m.mode == "" {
			return errors.New("not every member serves")
		}
	}
	return nil
}

// leader returns the index of the only leader.
func (ms modeList) leader() (int, error) {
	leader := -1
	for i, m := range ms {
		if m.mode != "leader" {
			continue
		}
		if leader >= 0 {
			return -1, errors.New("two leaders")
		}
		leader = i
	}
	if leader < 0 {
		return -1, errors.New("no leader")
	}
	return leader, nil
}

func (ms modeList) String() string {
	var parts []string
	for _, m := range ms {
		var what string
		switch {
		case m.skip != "":
			what = m.skip
		case m.exited != nil:
			what = "exited: " + m.exited.Error()
		case m.err != nil:
			what = m.err.Error()
		default:
			what = m.mode
		}
		parts = append(parts, m.name+": "+what)
	}
	return strings.Join(parts, "; ")
}

// Close stops every member as Server.Close does and returns their errors
// joined. Closing a closed ensemble does nothing and returns nil; an ensemble
// made by StartEnsemble is closed by the test's cleanup.
func (e *Ensemble) Close() error {
	var err error
	e.closeOnce.Do(func() {
		var errs []error
		for _, s := range e.servers {
			errs = append(errs, s.Close())
		}
		err = errors.Join(errs...)
	})
	return err
}
