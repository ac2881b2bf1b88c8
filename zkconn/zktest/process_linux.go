package zktest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// sysProcAttr puts the JVM in its own process group, so that a Ctrl-C at the
// terminal reaches only the Go program, which then stops the server itself,
// and has the kernel kill the JVM if the Go program dies first (a test
// binary killed by its timeout leaves no server behind). The kernel sends
// that SIGKILL when the thread that started the JVM ends, not only the
// process: a goroutine that exits with its thread locked (LockOSThread)
// ends the thread, and kills whatever server that thread happened to start.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// waitStopped waits until every thread of process pid has stopped after
// SIGSTOP. The signal only starts the stop: on a busy machine the JVM's
// threads can go on serving for a while, and a test that pauses a server
// must not see it answer afterwards.
func waitStopped(pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for delay := 100 * time.Microsecond; ; delay = min(2*delay, 10*time.Millisecond) {
		stopped, err := allThreadsStopped(pid)
		if err != nil || stopped {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("zktest: JVM %d not stopped %v after SIGSTOP", pid, timeout)
		}
		time.Sleep(delay)
	}
}

// allThreadsStopped reads the state of each thread from /proc.
func allThreadsStopped(pid int) (bool, error) {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(stats) == 0 {
		return false, fmt.Errorf("zktest: threads of JVM %d: %v", pid, err)
	}
	for _, name := range stats {
		b, err := os.ReadFile(name)
		if err != nil {
			continue // the thread ended
		}
		// "tid (comm) S …": the state follows the last ')'.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) {
			return false, fmt.Errorf("zktest: cannot parse %s: %q", name, b)
		}
		switch b[i+2] {
		case 'T', 't', 'Z', 'X':
		default:
			return false, nil
		}
	}
	return true, nil
}
