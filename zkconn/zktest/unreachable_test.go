package zktest

import (
	"errors"
	"net"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestUnreachable: a dial to the address hangs until its timeout, and once
// the test that made it has ended, the address refuses connections, even
// with a child process started meanwhile (which must not inherit the
// listener).
func TestUnreachable(t *testing.T) {
	var addr string
	parent := t
	t.Run("hangs", func(t *testing.T) {
		addr = Unreachable(t)
		child := exec.Command("sleep", "60")
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		parent.Cleanup(func() {
			child.Process.Kill()
			child.Wait()
		})
		_, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("dial %s = %v; want a timeout", addr, err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s after its test ended = %v; want connection refused", addr, err)
	}
}
