package zkconn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"
)

// connGoroutines returns the stacks of the goroutines running a method of
// the *zk.Conn conn (with conn as its receiver).
func connGoroutines(conn *zk.Conn) []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	recv := fmt.Sprintf("(%p", conn)
	var out []string
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if s := string(g); strings.Contains(s, "zk.(*Conn).") && strings.Contains(s, recv) {
			out = append(out, s)
		}
	}
	return out
}

// TestReviewCloseInBlackHoleEndsGoroutines: Close returns once every
// goroutine the Session started has ended, also when its connection gives
// nothing back (a partition). go-zookeeper's Close gives up on the
// closeSession reply after a second but closes no connection, so its
// goroutines (loop, recvLoop, sendLoop) and the TCP connection lived on
// until go-zookeeper's read deadline, two thirds of the session timeout.
func TestReviewCloseInBlackHoleEndsGoroutines(t *testing.T) {
	p := zktest.NewProxy(t, shared.Addr())
	s, err := Dial(context.Background(), []string{p.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	h := current(t, s)
	if _, _, err := h.Conn().Exists("/"); err != nil { // the connection is up and used
		t.Fatal(err)
	}
	conn := h.Conn()
	p.BlackHole()
	s.Close()
	if left := connGoroutines(conn); len(left) > 0 {
		t.Errorf("%d go-zookeeper goroutines of the closed Session still run:\n%s",
			len(left), strings.Join(left, "\n\n"))
	}
}

// failDial dials addr, which never answers, with a ctx that soon ends, and
// checks that Dial returns ctx's error within go-zookeeper's second past its
// deadline (its Close waits that long for a request it cannot send without a
// session, and a connection attempt under way ends at its connect timeout)
// with every goroutine it started ended.
func failDial(t *testing.T, addr string) {
	t.Helper()
	before := goleak.IgnoreCurrent()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	s, err := Dial(ctx, []string{addr})
	late := time.Since(mustDeadline(ctx))
	if err == nil {
		s.Close()
		t.Fatal("Dial of a server that never answers succeeded")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial = %v; want DeadlineExceeded", err)
	}
	if late > 2*time.Second {
		t.Errorf("Dial returned %v after its deadline", late)
	}
	if err := goleak.Find(before); err != nil {
		t.Errorf("goroutines left by a failed Dial: %v", err)
	}
}

// TestReviewDialFailureClosesConnection: a Dial that fails has released
// everything it started. Against a server that accepts TCP and never
// answers (a hung or stopped JVM: the kernel still accepts), go-zookeeper
// waits for the connect response until its read deadline (10 × two thirds
// of the session timeout), and its goroutine and the connection stayed that
// long after Dial returned: the server side saw no EOF.
func TestReviewDialFailureClosesConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 8)
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	defer func() {
		ln.Close()
		for c := range accepted {
			c.Close()
		}
	}()
	failDial(t, ln.Addr().String())
	var c net.Conn
	select {
	case c = <-accepted:
	default:
		t.Fatal("Dial never connected")
	}
	defer c.Close()
	// The server side reads the connect request, then EOF: the client
	// closed the connection. A read deadline turns a connection left open
	// into a failure rather than a hang.
	c.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Errorf("the connection the failed Dial opened is still open: %v", err)
	}
}

// TestReviewDialMidConnect: a Dial whose ctx ends while go-zookeeper's TCP
// connect is under way (a server that drops SYNs, as behind a firewall)
// returns once that attempt ends, at go-zookeeper's connect timeout (1s).
func TestReviewDialMidConnect(t *testing.T) {
	failDial(t, zktest.Unreachable(t))
}
