package zktest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// faultRig is a server, a proxy to it, a client through the proxy and an
// observer connected straight to the server, which sees what the server
// applied whatever the proxy does.
type faultRig struct {
	ctx      context.Context
	p        *zktest.Proxy
	c        *client
	observer *client
}

func newFaultRig(t *testing.T, s *zktest.Server, sessionTimeout time.Duration) *faultRig {
	t.Helper()
	ctx := testContext(t, time.Minute)
	p := zktest.NewProxy(t, s.Addr())
	c := connect(t, []string{p.Addr()}, sessionTimeout)
	c.waitState(ctx, t, zk.StateHasSession)
	return &faultRig{ctx: ctx, p: p, c: c, observer: connect(t, []string{s.Addr()}, 4*time.Second)}
}

// exists reports whether the server has path.
func (r *faultRig) exists(t *testing.T, path string) bool {
	t.Helper()
	ok, _, err := r.observer.Exists(path)
	if err != nil {
		t.Fatalf("observer's Exists(%s) error: %v", path, err)
	}
	return ok
}

// async runs f in a goroutine and returns a channel that receives its result.
func async(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

// waiting fails the test if the call behind done has returned, or the proxy
// does not hold its connection (and no other).
func (r *faultRig) waiting(t *testing.T, done <-chan error, call string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s returned %v; want it waiting for its reply", call, err)
	default:
	}
	if n := r.p.Conns(); n != 1 {
		t.Errorf("while %s waits, Conns() = %d; want its connection held", call, n)
	}
}

// notStruck fails the test if f, described by what, has struck.
func notStruck(t *testing.T, f *zktest.Fault, what string) {
	t.Helper()
	select {
	case <-f.Struck():
		t.Errorf("%s struck; want it not to", what)
	default:
	}
}

// failsClosed waits for the call behind done, and fails the test unless it
// returns zk.ErrConnectionClosed.
func (r *faultRig) failsClosed(t *testing.T, done <-chan error, call string) {
	t.Helper()
	select {
	case err := <-done:
		if !errors.Is(err, zk.ErrConnectionClosed) {
			t.Errorf("%s error = %v; want zk.ErrConnectionClosed", call, err)
		}
	case <-r.ctx.Done():
		t.Fatalf("waiting for %s to return: %v", call, r.ctx.Err())
	}
}

func create(c *client, path string) error {
	_, err := c.Create(path, nil, 0, zk.WorldACL(zk.PermAll))
	return err
}

// TestStrikeCutLose checks that Cut and Lose look the same to the client,
// and differ in what the server did.
func TestStrikeCutLose(t *testing.T) {
	t.Parallel()
	s := zktest.Start(t)
	for _, tt := range []struct {
		action   zktest.Action
		applied  bool
		requests int64 // what Requests grows by
		again    error // what the same create returns next
	}{
		{zktest.Cut, false, 0, nil},
		{zktest.Lose, true, 1, zk.ErrNodeExists},
	} {
		t.Run(tt.action.String(), func(t *testing.T) {
			r := newFaultRig(t, s, 4*time.Second)
			path := "/" + tt.action.String()
			before := r.p.Requests()
			f := r.p.Strike(zktest.Match{Op: zktest.OpCreate, Path: path}, tt.action)
			if err := create(r.c, path); !errors.Is(err, zk.ErrConnectionClosed) {
				t.Errorf("Create(%s) struck by %v error = %v; want zk.ErrConnectionClosed", path, tt.action, err)
			}
			zktest.AwaitStruck(t, f)
			if got := r.exists(t, path); got != tt.applied {
				t.Errorf("after %v, %s exists = %v; want %v", tt.action, path, got, tt.applied)
			}
			if n := r.p.Requests() - before; n != tt.requests {
				t.Errorf("Requests() grew by %d over a create struck by %v; want %d", n, tt.action, tt.requests)
			}

			// The fault is spent: the client reconnects and the same create
			// goes through.
			r.c.waitState(r.ctx, t, zk.StateHasSession)
			if err := create(r.c, path); !errors.Is(err, tt.again) {
				t.Errorf("Create(%s) after the fault error = %v; want %v", path, err, tt.again)
			}
		})
	}
}

// TestStrikeLoseConnectionEnds checks that a Lose fault whose reply never
// comes back strikes when its connection ends, before the client sees the
// close.
func TestStrikeLoseConnectionEnds(t *testing.T) {
	t.Parallel()
	r := newFaultRig(t, zktest.Start(t), 4*time.Second)

	r.p.DropReplies() // the reply never reaches the fault
	f := r.p.Strike(zktest.Match{Path: "/ends"}, zktest.Lose)
	done := async(func() error { return create(r.c, "/ends") })
	err := retry(r.ctx, func() error {
		if !r.exists(t, "/ends") {
			return errors.New("not created")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("waiting for /ends to be created: %v", err)
	}
	notStruck(t, f, "a Lose fault whose connection is up")
	r.p.Heal()
	r.failsClosed(t, done, "Create(/ends)")
	// The client has seen its connection close, so the fault has struck.
	select {
	case <-f.Struck():
	default:
		t.Fatal("Struck is open after Create(/ends) failed on the closed connection")
	}
}

func TestStrikeBlackHole(t *testing.T) {
	s := zktest.Start(t)

	t.Run("Heal", func(t *testing.T) {
		// A session timeout long enough that the client does not give up
		// before Heal.
		r := newFaultRig(t, s, 20*time.Second)
		before := r.p.Requests()
		f := r.p.Strike(zktest.Match{Op: zktest.OpCreate, Path: "/hole"}, zktest.BlackHole)
		done := async(func() error { return create(r.c, "/hole") })
		zktest.AwaitStruck(t, f)
		if r.exists(t, "/hole") {
			t.Errorf("/hole exists; want a request struck by BlackHole not applied")
		}
		if n := r.p.Requests() - before; n != 0 {
			t.Errorf("Requests() grew by %d over a black-holed create; want 0", n)
		}
		r.waiting(t, done, "Create(/hole) in a black hole, before Heal,")

		r.p.Heal()
		r.failsClosed(t, done, "Create(/hole) after Heal")
		r.c.waitState(r.ctx, t, zk.StateHasSession)
		if ok, _, err := r.c.Exists("/hole"); err != nil || ok {
			t.Errorf("Exists(/hole) after Heal = %v, %v; want false, nil", ok, err)
		}
	})

	t.Run("ClientTimesOut", func(t *testing.T) {
		const sessionTimeout = 2 * time.Second
		r := newFaultRig(t, s, sessionTimeout)
		f := r.p.Strike(zktest.Match{Path: "/timeout"}, zktest.BlackHole)
		done := async(func() error { return create(r.c, "/timeout") })
		zktest.AwaitStruck(t, f)
		struck := time.Now()
		// go-zookeeper gives up when it has read nothing for two thirds of
		// the session timeout; it last read a ping's reply about a ping
		// interval (half of that) before the fault at most.
		r.failsClosed(t, done, "Create(/timeout) in the black hole")
		if waited, least := time.Since(struck), sessionTimeout/4; waited < least {
			t.Errorf("Create(/timeout) returned %v after the fault; want at least %v, the client's own timeout", waited, least)
		}
		if r.exists(t, "/timeout") {
			t.Errorf("/timeout exists; want a request struck by BlackHole not applied")
		}
	})
}

func TestStrikeDrop(t *testing.T) {
	t.Parallel()
	r := newFaultRig(t, zktest.Start(t), 4*time.Second)

	f := r.p.Strike(zktest.Match{Op: zktest.OpCreate, Path: "/drop"}, zktest.Drop)
	done := async(func() error { return create(r.c, "/drop") })
	zktest.AwaitStruck(t, f)
	if !r.exists(t, "/drop") {
		t.Errorf("/drop does not exist; want a request struck by Drop applied")
	}
	// The connection still works: a request sent after the create is
	// answered, and the create is still waiting for its reply, which can
	// no longer come.
	if ok, _, err := r.c.Exists("/drop"); err != nil || !ok {
		t.Errorf("Exists(/drop) on the same connection = %v, %v; want true, nil", ok, err)
	}
	r.waiting(t, done, "Create(/drop) on a connection that is up")

	// go-zookeeper gives up only when the connection ends.
	r.p.Cut()
	r.failsClosed(t, done, "Create(/drop) after Cut")
}

func TestStrikePass(t *testing.T) {
	t.Parallel()
	r := newFaultRig(t, zktest.Start(t), 4*time.Second)

	f := r.p.Strike(zktest.Match{Op: zktest.OpCreate, Path: "/pass"}, zktest.Pass)
	done := async(func() error { return create(r.c, "/pass") })
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Create(/pass) = %v; want a request struck by Pass answered", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Create(/pass) not answered within a minute")
	}
	// Struck closes as the reply goes by, before the client reads it.
	select {
	case <-f.Struck():
	default:
		t.Fatal("Struck is open after Create(/pass) returned")
	}
	if !r.exists(t, "/pass") {
		t.Errorf("/pass does not exist; want a request struck by Pass applied")
	}
	if ok, _, err := r.c.Exists("/pass"); err != nil || !ok {
		t.Errorf("Exists(/pass) on the same connection = %v, %v; want true, nil", ok, err)
	}
}

// A call is one request of a test, by a client.
type call struct {
	name    string
	do      func(c *client) error
	creates []string // the nodes it creates
}

func exists(path string) call {
	return call{"Exists(" + path + ")", func(c *client) error {
		_, _, err := c.Exists(path)
		return err
	}, nil}
}

func get(path string) call {
	return call{"Get(" + path + ")", func(c *client) error {
		_, _, err := c.Get(path)
		return err
	}, nil}
}

func set(path string) call {
	return call{"Set(" + path + ")", func(c *client) error {
		_, err := c.Set(path, nil, -1)
		return err
	}, nil}
}

func createCall(path string) call {
	return call{"Create(" + path + ")", func(c *client) error { return create(c, path) }, []string{path}}
}

// multi is a multi of creates of the paths, and a delete and a version
// check of any path that starts with "-".
func multi(paths ...string) call {
	var ops []any
	var creates []string
	for _, p := range paths {
		if del, ok := strings.CutPrefix(p, "-"); ok {
			ops = append(ops, &zk.CheckVersionRequest{Path: del, Version: -1}, &zk.DeleteRequest{Path: del, Version: -1})
		} else {
			ops = append(ops, &zk.CreateRequest{Path: p, Acl: zk.WorldACL(zk.PermAll)})
			creates = append(creates, p)
		}
	}
	return call{fmt.Sprintf("Multi%v", paths), func(c *client) error {
		_, err := c.Multi(ops...)
		return err
	}, creates}
}

// TestStrikeMatch checks which request a Match selects: a Cut fault is armed
// and the calls made in turn; the fault must strike call want and no other.
func TestStrikeMatch(t *testing.T) {
	t.Parallel()
	s := zktest.Start(t)
	tests := []struct {
		name  string
		match zktest.Match
		calls []call
		want  int
	}{
		{"zero", zktest.Match{}, []call{exists("/zero")}, 0},
		{"op", zktest.Match{Op: zktest.OpCreate}, []call{exists("/op"), get("/op"), set("/op"), createCall("/op")}, 3},
		{"path", zktest.Match{Path: "/path"}, []call{exists("/path2"), createCall("/pat"), get("/path")}, 2},
		{"op and path", zktest.Match{Op: zktest.OpSetData, Path: "/opp"}, []call{set("/opq"), get("/opp"), set("/opp")}, 2},
		{"prefix", zktest.Match{Path: "/pre/", Prefix: true}, []call{exists("/pre"), exists("/pr/e"), createCall("/pre/x")}, 2},
		{"prefix as a string", zktest.Match{Path: "/str", Prefix: true}, []call{exists("/st"), createCall("/string")}, 1},
		{"no prefix", zktest.Match{Path: "/exact"}, []call{exists("/exact/x"), exists("/exac"), exists("/exact")}, 2},
		{"create in a multi", zktest.Match{Op: zktest.OpCreate, Path: "/m/b"},
			[]call{createCall("/m"), multi("/m/a"), exists("/m/b"), multi("/m/c", "/m/b")}, 3},
		{"delete in a multi", zktest.Match{Op: zktest.OpDelete, Path: "/md"},
			[]call{createCall("/md"), exists("/md"), multi("/md2", "-/md")}, 2},
		{"path in a multi", zktest.Match{Path: "/mp/b"},
			[]call{createCall("/mp"), multi("/mp/a"), multi("/mp/c", "/mp/b")}, 2},
		{"any multi", zktest.Match{Op: zktest.OpMulti}, []call{createCall("/any"), exists("/any"), multi("/any2")}, 2},
		{"multi on a path", zktest.Match{Op: zktest.OpMulti, Path: "/mop"},
			[]call{multi("/mop2"), createCall("/mop"), multi("/mop3", "-/mop")}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newFaultRig(t, s, 4*time.Second)
			f := r.p.Strike(tt.match, zktest.Cut)
			for i, call := range tt.calls {
				err := call.do(r.c)
				if i < tt.want {
					if errors.Is(err, zk.ErrConnectionClosed) {
						t.Fatalf("%s error = %v; want %v to leave it alone", call.name, err, tt.match)
					}
					continue
				}
				if !errors.Is(err, zk.ErrConnectionClosed) {
					t.Errorf("%s error = %v; want zk.ErrConnectionClosed: %v should cut it", call.name, err, tt.match)
				}
				zktest.AwaitStruck(t, f)
				for _, path := range call.creates {
					if r.exists(t, path) {
						t.Errorf("%s was cut, but %s exists", call.name, path)
					}
				}
			}
		})
	}
}

// TestStrikeOrderAndDisarm checks that a request matched by two faults gets
// the one armed first, and that a disarmed fault never strikes.
func TestStrikeOrderAndDisarm(t *testing.T) {
	t.Parallel()
	r := newFaultRig(t, zktest.Start(t), 4*time.Second)

	disarmed := r.p.Strike(zktest.Match{Path: "/both"}, zktest.Cut)
	first := r.p.Strike(zktest.Match{Op: zktest.OpExists}, zktest.Cut)
	second := r.p.Strike(zktest.Match{Path: "/both"}, zktest.Cut)
	disarmed.Disarm()
	disarmed.Disarm() // does nothing

	if _, _, err := r.c.Exists("/both"); !errors.Is(err, zk.ErrConnectionClosed) {
		t.Errorf("Exists(/both) error = %v; want zk.ErrConnectionClosed", err)
	}
	zktest.AwaitStruck(t, first)
	notStruck(t, second, "the second fault, with the first,")

	r.c.waitState(r.ctx, t, zk.StateHasSession)
	if err := create(r.c, "/both"); !errors.Is(err, zk.ErrConnectionClosed) {
		t.Errorf("Create(/both) error = %v; want zk.ErrConnectionClosed", err)
	}
	zktest.AwaitStruck(t, second)
	second.Disarm() // too late: does nothing

	r.c.waitState(r.ctx, t, zk.StateHasSession)
	if err := create(r.c, "/both"); err != nil {
		t.Errorf("Create(/both) with no fault armed error: %v", err)
	}
	notStruck(t, disarmed, "a disarmed fault")
}

func TestStrikeMisuse(t *testing.T) {
	t.Parallel()
	p := zktest.NewProxy(t, "127.0.0.1:1")
	for _, tt := range []struct {
		match  zktest.Match
		action zktest.Action
	}{
		{zktest.Match{Op: zktest.OpPing}, zktest.Cut},
		{zktest.Match{}, zktest.Hold + 1},
		{zktest.Match{}, -1},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil {
					t.Errorf("Strike(%+v, %v) did not panic", tt.match, tt.action)
				}
			}()
			p.Strike(tt.match, tt.action)
		}()
	}
}

func TestProxySetDelay(t *testing.T) {
	t.Parallel()
	const d = 100 * time.Millisecond
	r := newFaultRig(t, zktest.Start(t), 4*time.Second)

	r.p.SetDelay(d)
	start := time.Now()
	if _, _, err := r.c.Exists("/"); err != nil {
		t.Fatalf("Exists(/) through a delaying proxy error: %v", err)
	}
	if rtt := time.Since(start); rtt < 2*d {
		t.Errorf("a round trip through a proxy delaying by %v took %v; want at least %v", d, rtt, 2*d)
	}

	// Requests from many goroutines share the connection, their frames one
	// after another on the wire: any reordering would garble them.
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range cap(errs) {
		wg.Go(func() { errs <- create(r.c, fmt.Sprintf("/delayed%d", i)) })
		if i == cap(errs)/2 {
			r.p.SetDelay(0)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Create through a delaying proxy error: %v", err)
		}
	}
}

// TestProxySetDelayKeepsOrder sends bytes to an echo server through a
// delaying proxy, shrinking the delay on the way, and checks that they all
// come back in order.
func TestProxySetDelayKeepsOrder(t *testing.T) {
	t.Parallel()
	const d = 50 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	echoed := make(chan struct{})
	go func() {
		defer close(echoed)
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		buf := make([]byte, 1024)
		for {
			n, err := conn.Read(buf)
			if _, werr := conn.Write(buf[:n]); err != nil || werr != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-echoed
	})
	p := zktest.NewProxy(t, ln.Addr().String())
	p.SetDelay(d)

	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Minute))
	start := time.Now()
	if _, err := io.WriteString(conn, "ping"); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(conn, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	if rtt := time.Since(start); rtt < 2*d {
		t.Errorf("a round trip through a proxy delaying by %v took %v; want at least %v", d, rtt, 2*d)
	}

	var want strings.Builder
	for i := range 100 {
		msg := fmt.Sprintf("%d,", i)
		if _, err := io.WriteString(conn, msg); err != nil {
			t.Fatal(err)
		}
		want.WriteString(msg)
		switch i {
		case 30:
			p.SetDelay(d / 5)
		case 60:
			p.SetDelay(0)
		}
	}
	got := make([]byte, want.Len())
	if _, err := io.ReadFull(conn, got); err != nil {
		t.Fatalf("reading the echo: %v", err)
	}
	if string(got) != want.String() {
		t.Errorf("echo through a proxy whose delay shrank = %q; want %q", got, want.String())
	}
}
