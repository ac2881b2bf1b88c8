package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// openTTY opens a pseudo-terminal and returns its terminal side, and a
// channel that is closed once what is written there has been copied into out
// and the terminal is closed everywhere (every process that had it has
// exited, and the caller closed tty). The pty is closed when the test ends.
func openTTY(t *testing.T, out io.Writer) (tty *os.File, copied <-chan struct{}) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Not ptm.Fd(): it would make ptm blocking, and Close could not end the
	// Read of the copy below.
	rc, err := ptm.SyscallConn()
	if err != nil {
		ptm.Close()
		t.Fatal(err)
	}
	ioctl := func(req uintptr, arg unsafe.Pointer) {
		var errno syscall.Errno
		if err := rc.Control(func(fd uintptr) {
			_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, req, uintptr(arg))
		}); err != nil || errno != 0 {
			ptm.Close()
			t.Fatalf("ioctl %#x on /dev/ptmx: %v %v", req, err, errno)
		}
	}
	var unlock int32
	ioctl(syscall.TIOCSPTLCK, unsafe.Pointer(&unlock))
	var n uint32
	ioctl(syscall.TIOCGPTN, unsafe.Pointer(&n))
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		ptm.Close()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(out, ptm) // ends with EIO once the terminal side is closed everywhere
	}()
	t.Cleanup(func() {
		tty.Close()
		ptm.Close()
		<-done
	})
	return tty, done
}

// TestWaitingNoticeTerminal: "dsync lock" whose stderr is a terminal says
// once, after waitNoticeAfter in line, who holds the lock.
func TestWaitingNoticeTerminal(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	unlock := holdMutex(t, path)
	data, session := holderOf(t, observer(t), path, 1)
	var tty *os.File
	var copied <-chan struct{}
	p := startWith(t, func(p *proc) {
		tty, copied = openTTY(t, &p.stderr)
		p.cmd.Stderr = tty
	}, "lock", "-zk", shared.Addr(), path, "--", "true")
	tty.Close() // dsync has its own
	want := fmt.Sprintf("dsync: waiting for %s (held by %s, session 0x%x)", path, data, uint64(session))
	if !p.stderr.Await(want, 30*time.Second) {
		t.Fatalf("stderr = %q; want %q", &p.stderr, want)
	}
	unlock()
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("dsync lock exited %d; stderr:\n%s", code, &p.stderr)
	}
	<-copied
	if got := strings.Count(p.stderr.String(), "waiting for"); got != 1 {
		t.Errorf("stderr = %q: %d waiting lines; want 1", &p.stderr, got)
	}
}

func TestIsTerminal(t *testing.T) {
	t.Parallel()
	tty, _ := openTTY(t, io.Discard)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for _, tt := range []struct {
		name string
		w    io.Writer
		want bool
	}{
		{"pty", tty, true},
		{"pipe", w, false},
		{"pipe, read side", r, false},
		{"buffer", &bytes.Buffer{}, false},
	} {
		if got := isTerminal(tt.w); got != tt.want {
			t.Errorf("isTerminal(%s) = %v; want %v", tt.name, got, tt.want)
		}
	}
}
