package zktest

import (
	"bytes"
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

func TestAwaitChildren(t *testing.T) {
	t.Parallel()
	srv := Start(t)
	c := Observer(t, srv.Addr())
	if kids := AwaitChildren(t, c, "/missing", 0); len(kids) != 0 {
		t.Fatalf("AwaitChildren(/missing, 0) = %v; want none", kids)
	}
	errs := make(chan error, 1)
	go func() { // the parent appears, then its children, while the test waits
		for _, p := range []string{"/p", "/p/a", "/p/b"} {
			if _, err := c.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	if kids := AwaitChildren(t, c, "/p", 2); len(kids) != 2 {
		t.Fatalf("AwaitChildren(/p, 2) = %v; want 2 children", kids)
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// TestAwaitChildrenAcrossRestart: while the server is down, go-zookeeper
// fails the requests it has queued each time it has tried every server.
// AwaitChildren makes its request again, and returns once the server is
// back with the children it waits for.
func TestAwaitChildrenAcrossRestart(t *testing.T) {
	srv := Start(t)
	tries := make(chan struct{}, 16) // go-zookeeper starts a connect: with one server, it fails the queue first
	c, _, err := zk.Connect([]string{srv.Addr()}, 10*time.Second, zk.WithLogInfo(false), zk.WithDialer(dialer()),
		zk.WithEventCallback(func(ev zk.Event) {
			if ev.Type == zk.EventSession && ev.State == zk.StateConnecting {
				select {
				case tries <- struct{}{}:
				default:
				}
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for _, p := range []string{"/p", "/p/a"} {
		if _, err := c.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	restarted := make(chan error, 1)
	go func() {
		// A bounded poll: nothing signals that a request is queued.
		buf := make([]byte, 1<<20)
		for deadline := time.Now().Add(30 * time.Second); !requestQueued(buf, "zktest.AwaitChildren("); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				restarted <- errors.New("AwaitChildren's request never queued")
				return
			}
		}
		for range len(tries) {
			<-tries
		}
		<-tries // the queue failed after this
		<-tries // and go-zookeeper is past that
		restarted <- srv.Restart()
	}()
	if kids := AwaitChildren(t, c, "/p", 1); len(kids) != 1 {
		t.Errorf("AwaitChildren(/p, 1) across a restart = %v; want 1 child", kids)
	}
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
}

// requestQueued reports whether a goroutine running fn waits in
// go-zookeeper for a request's reply, its request queued.
func requestQueued(buf []byte, fn string) bool {
	return slices.ContainsFunc(bytes.Split(buf[:runtime.Stack(buf, true)], []byte("\n\n")), func(g []byte) bool {
		return bytes.Contains(g, []byte(fn)) && bytes.Contains(g, []byte("zk.(*Conn).request(")) &&
			!bytes.Contains(g, []byte("zk.(*Conn).queueRequest("))
	})
}
