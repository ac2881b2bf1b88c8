package zktest

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// r2Timerfds counts the process's open timerfds.
func r2Timerfds(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("the process's descriptors: %v", err)
	}
	n := 0
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && l == "anon_inode:[timerfd]" {
			n++
		}
	}
	return n
}

// r2Echo starts an echo server for the test.
func r2Echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

// TestReview2DelayedPacketsEndOnCutAndClose: packets held for an hour; Cut
// ends their connections at once (the client reads EOF, nothing delivered),
// Close returns at once with another waiting, and every timerfd the
// delivering goroutines opened is closed (goleak checks the goroutines).
func TestReview2DelayedPacketsEndOnCutAndClose(t *testing.T) {
	before := r2Timerfds(t)
	p, err := StartProxy(r2Echo(t))
	if err != nil {
		t.Fatal(err)
	}
	// Each connection makes a round trip first, undelayed: the proxy holds it
	// then. Then every packet waits an hour.
	dialHeld := func() net.Conn {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, "ping"); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, make([]byte, 4)); err != nil {
			t.Fatal(err)
		}
		return c
	}
	c1, c2, c3 := dialHeld(), dialHeld(), dialHeld()
	defer c1.Close()
	defer c2.Close()
	defer c3.Close()
	p.SetDelay(time.Hour)
	for _, c := range []net.Conn{c1, c2, c3} {
		if _, err := io.WriteString(c, "hello"); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	// One timerfd per direction with a packet waiting: the hellos, on their
	// way to the echo server (a direction opens one when it first sleeps,
	// on a goroutine of the proxy's: no event tells when).
	for r2Timerfds(t) < before+3 {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("%d timerfds open; want %d", r2Timerfds(t), before+3)
		}
		time.Sleep(time.Millisecond)
	}
	p.Cut()
	if n, err := c1.Read(make([]byte, 8)); n != 0 || err == nil || os.IsTimeout(err) {
		t.Fatalf("after Cut, read %d bytes, %v; want the connection closed, nothing delivered", n, err)
	}
	p.SetDelay(0)
	c4 := dialHeld() // held, with a packet waiting as Close comes
	defer c4.Close()
	p.SetDelay(time.Hour)
	if _, err := io.WriteString(c4, "hello"); err != nil {
		t.Fatal(err)
	}
	p.Close() // returns once every goroutine of the proxy has ended
	if n, err := c4.Read(make([]byte, 8)); n != 0 || err == nil || os.IsTimeout(err) {
		t.Fatalf("after Close, read %d bytes, %v; want the connection closed, nothing delivered", n, err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Cut and Close with packets delayed an hour took %v", took)
	}
	if after := r2Timerfds(t); after != before {
		t.Errorf("%d timerfds open after Close; %d before", after, before)
	}
}

// TestReview2DelayedInOrderNotEarly: a stream of small writes, each delayed
// d, comes back in order and no byte comes back before 2·d after it went.
func TestReview2DelayedInOrderNotEarly(t *testing.T) {
	t.Parallel()
	const d = 2 * time.Millisecond
	p := NewProxy(t, r2Echo(t))
	p.SetDelay(d)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	// Four bytes no ZooKeeper frame starts with: the proxy passes the
	// stream on as it comes (see framer).
	if _, err := io.WriteString(c, "ping"); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		b := []byte{byte('a' + i%26)}
		sent := time.Now()
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
		if rtt := time.Since(sent); rtt < 2*d {
			t.Fatalf("byte %d back after %v; want at least %v", i, rtt, 2*d)
		}
		if b[0] != byte('a'+i%26) {
			t.Fatalf("byte %d came back as %d", i, b[0])
		}
	}
}
