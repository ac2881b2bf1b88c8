package zkconn

import (
	"net"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// TestWireRefusesSecondSession: go-zookeeper, told by the server that its
// session expired, asks for a new one on the same *zk.Conn and sends on it
// the requests queued for the old one. Through a wire it cannot: the
// request queued for the expired session never runs.
func TestWireRefusesSecondSession(t *testing.T) {
	srv := zktest.Start(t, zktest.WithMaxSessionTimeout(2*time.Second))
	p := zktest.NewProxy(t, srv.Addr())
	obs := zktest.Observer(t, srv.Addr())
	w := newWire(net.DialTimeout)
	// Asks for a minute: go-zookeeper sets its timers by the 2s granted,
	// but nothing here gives the session up, so the server's word decides.
	conn, events, err := zk.Connect([]string{p.Addr()}, time.Minute, zk.WithDialer(w.dialer()), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	next := func(want ...zk.State) zk.State {
		t.Helper()
		for ev := range events {
			for _, s := range want {
				if ev.Type == zk.EventSession && ev.State == s {
					return s
				}
			}
		}
		t.Fatalf("events closed waiting for %v", want)
		return 0
	}
	next(zk.StateHasSession)
	if got := w.Timeout(); got != 2*time.Second {
		t.Errorf("granted timeout = %v; want 2s", got)
	}
	node, err := conn.Create("/wire-test", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	_, _, gone, err := obs.ExistsW(node)
	if err != nil {
		t.Fatal(err)
	}
	p.BlackHole()
	next(zk.StateDisconnected)
	<-gone // expired by the server
	queued := make(chan error, 1)
	go func() {
		_, err := conn.Create("/wire-test-queued", nil, 0, zk.WorldACL(zk.PermAll))
		queued <- err
	}()
	p.Heal()
	next(zk.StateExpired)
	next(zk.StateConnected) // a TCP connection, asking for a new session
	if s := next(zk.StateHasSession, zk.StateDisconnected); s == zk.StateHasSession {
		t.Fatal("a second session on one *zk.Conn")
	}
	conn.Close()
	if err := <-queued; err == nil {
		t.Error("the request queued for the expired session ran")
	}
	if ok, _, err := obs.Exists("/wire-test-queued"); ok || err != nil {
		t.Errorf("Exists(/wire-test-queued) = %v, %v; want false", ok, err)
	}
}
