package main

import (
	"os"
	"testing"
	"time"
)

// TestReviewR129GuardRuntimeWriteOnTostopTerminal: dsync in the foreground
// of a tostop terminal (its stderr), run with GODEBUG=inittrace=1, which
// makes a Go program print a line per package init. CMD gets GODEBUG as
// dsync got it, and runs; dsync exits as CMD did. The guard, a Go program
// too, in the background, used to print those lines before its main,
// where SIGTTOU stops a process: it stopped for good before it started
// CMD, and dsync, waiting for it with SIGINT held back, never exited.
func TestReviewR129GuardRuntimeWriteOnTostopTerminal(t *testing.T) {
	t.Parallel()
	var tty *os.File
	p := startWith(t, func(p *proc) {
		tty = r128TostopTTY(t, p)
		p.cmd.Env = append(p.cmd.Env, "GODEBUG=inittrace=1", "DSYNC_GUARD_GODEBUG=gctrace=1")
	}, "lock", "-zk", shared.Addr(), lockPath(t), "--", "sh", "-c", `echo "$GODEBUG|$DSYNC_GUARD_GODEBUG"`)
	tty.Close() // dsync has its own
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Errorf("dsync exited %d; want CMD's 0; stderr:\n%s", code, &p.stderr)
	}
	if got, want := p.stdout.String(), "inittrace=1|\n"; got != want {
		t.Errorf("CMD printed %q; want %q: GODEBUG as dsync got it, and no variable of the guard's", got, want)
	}
}
