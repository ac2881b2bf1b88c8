package zktest

import (
	"errors"
	"os/exec"
	"testing"
)

// TestStopPausedIsGraceful pins that Stop lets a paused JVM handle SIGTERM
// (by also sending SIGCONT) instead of leaving it pending until the grace
// period ends in SIGKILL.
func TestStopPausedIsGraceful(t *testing.T) {
	s := Start(t)
	if err := s.Pause(); err != nil {
		t.Fatalf("Pause() error: %v", err)
	}
	p := s.proc.Load()
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop() of a paused server error: %v", err)
	}
	// The JVM exits with 128+SIGTERM when SIGTERM ends it; SIGKILL leaves no status.
	var exit *exec.ExitError
	if !errors.As(p.err, &exit) || exit.ExitCode() != 143 {
		t.Errorf("JVM ended with %v; want exit status 143 (SIGTERM handled)", p.err)
	}
	if err := s.Resume(); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Resume() of a stopped server error = %v; want ErrNotRunning", err)
	}
}
