package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// closedAddr reserves a loopback port and closes it: nothing answers there
// (connections are refused) unless another process takes it meanwhile.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// TestDialTimeoutUnreachable: with no server at -zk, every subcommand that
// dials gives up after -dial-timeout, names the servers it tried and exits
// 1, without running CMD. It used to wait silently forever.
func TestDialTimeoutUnreachable(t *testing.T) {
	t.Parallel()
	a, b := closedAddr(t), closedAddr(t)
	zk := a + "," + b
	want := "dsync: no ZooKeeper server answered within 1s: " + a + ", " + b + "\n"
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	tests := [][]string{
		{"lock", "-dial-timeout", "1s", "-zk", zk, "/x", "--", "touch", marker},
		{"lock", "-try", "-dial-timeout", "1s", "-zk", zk, "/x", "--", "touch", marker},
		{"sem", "-max", "2", "-dial-timeout", "1s", "-zk", zk, "/x", "--", "touch", marker},
		{"ls", "-dial-timeout", "1s", "-zk", zk, "/x"},
		{"revoke", "-dial-timeout", "1s", "-zk", zk, "/x"},
	}
	procs := make([]*proc, len(tests))
	for i, args := range tests {
		procs[i] = start(t, args...)
	}
	for i, p := range procs {
		code := p.wait(t, 30*time.Second)
		if code != exitFail || p.stderr.String() != want || p.stdout.String() != "" {
			t.Errorf("dsync %q: exit %d, stdout %q, stderr %q; want 1, nothing, and %q",
				tests[i], code, &p.stdout, &p.stderr, want)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("CMD ran without the lock")
	}
}

// TestDialCutShortByTimeout: a -timeout shorter than -dial-timeout ends the
// dial as any wait, and the message says that no server answered.
func TestDialCutShortByTimeout(t *testing.T) {
	t.Parallel()
	a := closedAddr(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"lock", "-timeout", "500ms", "-zk", a, "/x", "--", "true"},
			"dsync: timed out waiting for /x (no ZooKeeper server answered: " + a + ")\n"},
		{[]string{"ls", "-timeout", "500ms", "-zk", a, "/x"},
			"dsync: timed out listing /x (no ZooKeeper server answered: " + a + ")\n"},
		{[]string{"revoke", "-timeout", "500ms", "-zk", a, "/x"},
			"dsync: timed out asking /x (no ZooKeeper server answered: " + a + ")\n"},
	}
	procs := make([]*proc, len(tests))
	for i, tt := range tests {
		procs[i] = start(t, tt.args...)
	}
	for i, p := range procs {
		if code := p.wait(t, 30*time.Second); code != exitFail || p.stderr.String() != tests[i].want {
			t.Errorf("dsync %q: exit %d, stderr %q; want 1 and %q", tests[i].args, code, &p.stderr, tests[i].want)
		}
	}
}

// TestDialTimeoutBadValues: a -dial-timeout that is not positive, or not a
// duration, is bad usage (exit 2) for every subcommand.
func TestDialTimeoutBadValues(t *testing.T) {
	t.Parallel()
	for _, cmd := range [][]string{
		{"lock", "/x", "--", "true"},
		{"sem", "-max", "1", "/x", "--", "true"},
		{"ls", "/x"},
		{"revoke", "/x"},
	} {
		for _, tt := range []struct{ value, want string }{
			{"0", "-dial-timeout must be positive"},
			{"-1s", "-dial-timeout must be positive"},
			{"soon", `invalid value "soon" for flag -dial-timeout`},
		} {
			args := append([]string{cmd[0], "-dial-timeout", tt.value}, cmd[1:]...)
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), args, &stdout, &stderr)
			if code != exitUsage || !strings.Contains(stderr.String(), tt.want) || !strings.Contains(stderr.String(), "usage: dsync "+cmd[0]) {
				t.Errorf("dsync %q: exit %d, stderr %q; want 2, %q and the usage", args, code, stderr.String(), tt.want)
			}
		}
	}
}

// TestDialTimeoutBadValueDialsNothing: the binary rejects a bad
// -dial-timeout before it connects to anything.
func TestDialTimeoutBadValueDialsNothing(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, v := range []string{"0", "soon"} {
		code, _, stderr := dsyncRun(t, "lock", "-dial-timeout", v, "-zk", ln.Addr().String(), "/x", "--", "true")
		if code != exitUsage {
			t.Errorf("dsync lock -dial-timeout %s: exit %d; want 2; stderr:\n%s", v, code, stderr)
		}
	}
	// dsync has exited: a connection it made would be in the backlog by now.
	if err := ln.(*net.TCPListener).SetDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	if c, err := ln.Accept(); err == nil {
		c.Close()
		t.Fatal("dsync connected to -zk despite a bad -dial-timeout")
	} else if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal(err)
	}
}

// TestDialTimeoutHelp: -h shows -dial-timeout and its default for every
// subcommand that dials.
func TestDialTimeoutHelp(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"lock", "sem", "ls", "revoke"} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{name, "-h"}, &stdout, &stderr)
		if code != 0 || !strings.Contains(stdout.String(), "-dial-timeout D") || !strings.Contains(stdout.String(), "(default 15s)") {
			t.Errorf("dsync %s -h: exit %d, stdout %q; want 0 and -dial-timeout D with its default 15s", name, code, stdout.String())
		}
	}
}
