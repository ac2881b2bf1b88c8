package zktest

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// stopGrace is how long Stop waits for the JVM to exit after SIGTERM before
// it sends SIGKILL.
const stopGrace = 5 * time.Second

// process is one run of a server's JVM. Its Wait runs in a goroutine that
// closes done; whoever stops the process waits for done, so the goroutine
// never outlives its owner.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the JVM has exited and err is set
	err  error         // cmd.Wait's result
}

// startProcess starts java with args in dir, its stdout and stderr appended to
// logPath.
func startProcess(java string, args []string, dir, logPath string) (*process, error) {
	out, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("zktest: %w", err)
	}
	defer out.Close() // the child has its own copy
	cmd := exec.Command(java, args...)
	cmd.Dir = dir
	cmd.Stdout = out // an *os.File: passed to the child as is, no copying goroutine
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("zktest: start %s: %w", java, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the JVM has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the JVM unless it has exited.
func (p *process) signal(sig syscall.Signal) error {
	if p.exited() {
		return ErrNotRunning
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("zktest: signal %v: %w", sig, err)
	}
	return nil
}

// stop ends the JVM: SIGTERM (and SIGCONT, in case it is paused), then SIGKILL
// after stopGrace. It returns when the JVM has exited. If the JVM had already
// exited on its own, stop says so in an error.
func (p *process) stop() error {
	if p.exited() {
		return fmt.Errorf("zktest: server exited on its own: %v", p.err)
	}
	// A stopped process keeps SIGTERM pending until SIGCONT; send both.
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	t := time.NewTimer(stopGrace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return nil
}

// kill ends the JVM at once and waits for it.
func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}
