package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestLockForwardsSignals pins the signals that used to kill dsync (or make
// it dump its goroutines) and spare CMD.
func TestLockForwardsSignals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		sig  syscall.Signal
		name string // for the shell's trap
	}{
		{syscall.SIGHUP, "HUP"}, {syscall.SIGQUIT, "QUIT"}, {syscall.SIGUSR1, "USR1"}, {syscall.SIGUSR2, "USR2"},
	}
	for _, tt := range tests {
		sig, name := tt.sig, tt.name
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			script := `trap 'echo ` + name + ` > "$1/marker"; exit 0' ` + name + `
sleep 60 &
echo ready > "$1/ready"
wait`
			p := start(t, "lock", "-zk", shared.Addr(), "-grace", "200ms", lockPath(t), "--", "sh", "-c", script, "sh", dir)
			awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second)
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if code := p.wait(t, 30*time.Second); code != 0 {
				t.Fatalf("dsync exited %d; want CMD's 0; stderr:\n%s", code, &p.stderr)
			}
			if b, err := os.ReadFile(filepath.Join(dir, "marker")); err != nil || string(b) != name+"\n" {
				t.Fatalf("marker = %q, %v; want CMD's trap of %s to have run; stderr:\n%s", b, err, name, &p.stderr)
			}
		})
	}
}

// TestLockClosedStderr pins the SIGPIPE that killed dsync when it reported
// a lost lock on a closed stderr, leaving CMD running.
func TestLockClosedStderr(t *testing.T) {
	t.Parallel()
	proxy := zktest.NewProxy(t, shared.Addr())
	dir := t.TempDir()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "lock", "-zk", proxy.Addr(), "-session-timeout", "2s",
		lockPath(t), "--", "sh", "-c", readyScript, "sh", dir)
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	ps := pids(t, awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second))
	proxy.BlackHole()
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitLost {
		t.Errorf("dsync ended with %v; want exit status %d", cmd.ProcessState, exitLost)
	}
	for _, pid := range ps {
		if alive(pid) {
			t.Errorf("process %d of CMD outlived dsync", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
