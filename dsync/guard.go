//go:build unix

package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The guard is dsync re-executed to start CMD: the leader of CMD's process
// group, and CMD's parent. Its invariant: no process of CMD's group
// outlives dsync: when dsync dies, the guard's read of its end of a socket
// pair ends and it SIGKILLs the group. dsync holds the pair's other end,
// close-on-exec, so the read ends however dsync dies (SIGKILL, a crash),
// and the group's SIGKILL takes set-user-ID programs too, which the kernel
// spares from Pdeathsig. Otherwise the guard is invisible: it ignores the
// signals sent to the group (by dsync, or anyone), which reach CMD
// directly, and exits as CMD did.
//
// The guard shuts down its end for writing once CMD has started, and dsync
// sends the group no signal but SIGKILL, SIGSTOP and SIGCONT before it
// reads that end of file (child.signal): sent earlier, a signal would
// reach the guard alone, which drops it or, before it handles signals,
// dies of it.
//
// The guard runs in the background of dsync's terminal, if dsync has one,
// where with tostop set a write sends the group SIGTTOU, which at its
// default action stops the writer. A write before the guard's main (the
// dynamic loader's warnings, a preloaded library's output) would stop the
// guard before it starts CMD, with dsync waiting for it. So on Linux dsync
// starts the guard with SIGTTOU blocked (blockTTOU), where a write goes
// through, and passes it its own signal mask, which the guard sets (setMask)
// before it starts CMD: CMD starts with dsync's mask, as it would without a
// guard. Elsewhere such output still stops the guard, as doc.go says.
//
// guardArg0 is the guard's argv[0], which main looks for before anything
// else; no one types it, and CMD sees neither it nor anything else of the
// guard (its environment is the one dsync gives it). The rest of the argv
// is the descriptor of the guard's end, dsync's signal mask (for setMask),
// CMD's path (resolved by dsync) and CMD's argv.
const guardArg0 = "dsync (guard)"

// guardHidden are the variables that make a program write of itself: the
// Go runtime's (GODEBUG's inittrace, gctrace), the race runtime's (a -race
// build) and the dynamic loader's. The guard must not write: its output
// would mix with CMD's, and a write after it unblocks SIGTTOU would stop
// it. So the guard gets each as guardHiddenPrefix and its name, and gives
// it back to CMD under its own name; a variable so named that dsync
// inherited reaches neither.
var guardHidden = []string{"GODEBUG", "GORACE", "LD_DEBUG", "LD_SHOW_AUXV"}

const guardHiddenPrefix = "DSYNC_GUARD_"

// hideFromGuard returns env with the variables of guardHidden renamed for
// the guard, and guardRuntimeEnv added; showToCMD returns the guard's env
// with them named back, and drops the added ones (hidden names named back
// replace them).
func hideFromGuard(env []string) []string {
	return append(renameVars(env, "", guardHiddenPrefix), guardRuntimeEnv...)
}
func showToCMD(env []string) []string { return renameVars(env, guardHiddenPrefix, "") }

// renameVars returns env with each variable of guardHidden, as named with
// prefix from, renamed with prefix to, and any variable that already bore
// such a new name dropped.
func renameVars(env []string, from, to string) []string {
	out := make([]string, 0, len(env))
next:
	for _, kv := range env {
		for _, name := range guardHidden {
			if v, ok := strings.CutPrefix(kv, from+name+"="); ok {
				out = append(out, to+name+"="+v)
				continue next
			}
			if strings.HasPrefix(kv, to+name+"=") {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}

// isGuard reports whether args, os.Args, are a guard's.
func isGuard(args []string) bool { return len(args) > 0 && args[0] == guardArg0 }

// guardArgs returns the argv of a guard with its end of the socket pair at
// descriptor fd that starts the program path with argv and signal mask
// mask.
func guardArgs(fd uintptr, mask, path string, argv []string) []string {
	return slices.Concat([]string{guardArg0, strconv.FormatUint(uint64(fd), 10), mask, path}, argv)
}

// startGuarded starts cmd, prepared by newChild, under a guard: cmd's
// Path and Args become the guard's. It returns dsync's end of the guard's
// socket pair, which dsync holds until the guard has exited; reading it
// returns end of file once the guard has started CMD, or is gone. A failure
// to start the guard itself is not CMD's: it is not fs.ErrNotExist.
func startGuarded(cmd *exec.Cmd) (link *os.File, err error) {
	if cmd.Err != nil {
		return nil, cmd.Start() // CMD not found, as without a guard
	}
	exe, err := executable()
	if err != nil {
		return nil, fmt.Errorf("cannot start CMD's guard: %v", err)
	}
	mine, theirs, err := socketPair()
	if err != nil {
		return nil, fmt.Errorf("cannot start CMD's guard: %v", err)
	}
	defer theirs.Close()
	mask, undo, err := blockTTOU()
	if err != nil {
		mine.Close()
		return nil, fmt.Errorf("cannot start CMD's guard: %v", err)
	}
	defer undo()
	cmd.Args = guardArgs(theirs.Fd(), mask, cmd.Path, cmd.Args)
	cmd.Path = exe
	cmd.Env = hideFromGuard(cmd.Env)
	if err := cmd.Start(); err != nil {
		mine.Close()
		return nil, fmt.Errorf("cannot start CMD's guard: %v", err)
	}
	return mine, nil
}

// socketPair returns the ends of a new Unix socket pair: dsync's,
// close-on-exec, and the guard's, which is not, so that the guard gets it at
// its own number, clear of the descriptors dsync inherited, which CMD
// inherits in turn.
func socketPair() (mine, theirs *os.File, err error) {
	syscall.ForkLock.RLock() // no fork before dsync's end is close-on-exec
	defer syscall.ForkLock.RUnlock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, nil, err
	}
	syscall.CloseOnExec(fds[0])
	return os.NewFile(uintptr(fds[0]), "guard"), os.NewFile(uintptr(fds[1]), "guard"), nil
}

// guard runs as the guard with args, os.Args without argv[0], and returns
// the exit status for os.Exit if it does not die as CMD did.
func guard(args []string) int {
	fd := -1
	if len(args) >= 4 {
		fd, _ = strconv.Atoi(args[0])
	}
	if pgid, err := unix.Getpgid(0); fd < 3 || err != nil || pgid != os.Getpid() {
		fmt.Fprintf(os.Stderr, "dsync: argv[0] %q is for dsync's own use\n", guardArg0)
		return exitUsage
	}
	// The signals sent to CMD's group (those dsync forwards, or anyone's)
	// reach CMD: the guard catches every one it can and does nothing, so as
	// to outlive CMD and report its end. Those ignored at start stay
	// ignored for CMD; caught ones go back to the default action in CMD
	// when it execs.
	caught := make(chan os.Signal, 1) // never read
	for sig := syscall.Signal(1); sig < 32; sig++ {
		if sig != syscall.SIGKILL && sig != syscall.SIGSTOP && !signal.Ignored(sig) {
			signal.Notify(caught, sig)
		}
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		return guardFailed(err)
	}
	go func() {
		var b [1]byte
		for {
			if _, err := syscall.Read(fd, b[:]); err != syscall.EINTR {
				break
			}
		}
		_ = syscall.Kill(0, syscall.SIGKILL) // dsync is gone
	}()
	if err := setMask(args[1]); err != nil {
		return guardFailed(err)
	}
	cmd := &exec.Cmd{Path: args[2], Args: args[3:], Env: showToCMD(os.Environ()),
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	if err := cmd.Start(); err != nil {
		writeFromBackground()
		return startFailed(os.Stderr, err)
	}
	_ = syscall.Shutdown(fd, syscall.SHUT_WR) // CMD runs: dsync may signal the group
	if err := cmd.Wait(); cmd.ProcessState == nil {
		writeFromBackground()
		fmt.Fprintf(os.Stderr, "dsync: %v\n", err) // as exitStatus says it
		return exitFail
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return cmd.ProcessState.ExitCode()
	}
	// Die of the same signal, without a core file; where that cannot be
	// (dieOf), exit as a shell reports the death, which dsync reads the
	// same way (exitStatus).
	sig := ws.Signal()
	_ = syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{})
	dieOf(sig)
	return 128 + int(sig)
}

// guardFailed says that the guard could not start CMD, for err, and
// returns the exit status.
func guardFailed(err error) int {
	writeFromBackground()
	fmt.Fprintf(os.Stderr, "dsync: guard: %v\n", err)
	return exitNoExec
}

// writeFromBackground readies the guard to write its own messages: its
// group is in the background of dsync's terminal, if dsync has one, where
// with tostop set a write sends the group SIGTTOU and, the signal caught,
// restarts, forever. Ignored, SIGTTOU lets the write through. Call it only
// once CMD has ended or never started: CMD inherits ignored signals.
func writeFromBackground() { signal.Ignore(syscall.SIGTTOU) }
