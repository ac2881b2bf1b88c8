package zktest

import (
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Unreachable returns an address of 127.0.0.1 where a TCP connect hangs
// until the dialer's timeout, as to a host that is down or behind a firewall
// that drops packets: a listener that never accepts and whose queue of
// connections is full, so that the kernel drops every further SYN. The
// listener closes when the test ends. Unreachable calls t.Fatal if it cannot
// make one, so it must be called from the goroutine running the test.
func Unreachable(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0) // no child process keeps it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
	// Fill the accept queue (a backlog of 0 holds one connection).
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// Check that the next connect hangs.
	if c2, err := net.DialTimeout("tcp", addr, 50*time.Millisecond); err == nil {
		c2.Close()
		t.Fatal("zktest: the listener still completes connections")
	}
	return addr
}
