package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestGuardDsyncDiesGroupDies pins CMD's group running on without the lock
// once dsync died without ending it, killed or crashed (Go's runtime turns
// SIGABRT into a crash): Pdeathsig ended CMD's first process only, and a
// background child of it ran on.
func TestGuardDsyncDiesGroupDies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
	}{{"SIGKILL", syscall.SIGKILL}, {"SIGABRT", syscall.SIGABRT}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			p := start(t, "lock", "-zk", shared.Addr(), lockPath(t), "--", "sh", "-c", readyScript, "sh", dir)
			ps := pids(t, awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second))
			killGroupAtCleanup(t, ps[0])
			// No core file of dsync, whatever GOTRACEBACK says.
			if err := unix.Prlimit(p.cmd.Process.Pid, unix.RLIMIT_CORE, &unix.Rlimit{}, nil); err != nil {
				t.Fatal(err)
			}
			if err := p.cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			p.wait(t, 30*time.Second)
			for i, pid := range ps {
				if !awaitExit(t, pid, 30*time.Second) {
					t.Errorf("%s %d of CMD's group still runs 30s after dsync died of %s", []string{"CMD", "its background child"}[i], pid, tc.name)
				}
			}
		})
	}
}

// killGroupAtCleanup SIGKILLs the process group of pid when the test ends,
// in case the test failed with processes of it left.
func killGroupAtCleanup(t *testing.T, pid int) {
	t.Helper()
	pg, err := syscall.Getpgid(pid)
	if err != nil {
		t.Fatalf("getpgid(%d): %v", pid, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-pg, syscall.SIGKILL) })
}

// TestGuardSetuidCMDDiesWithDsync pins a set-user-ID CMD running on after
// dsync was SIGKILLed: the kernel clears Pdeathsig when a process execs
// such a program. CMD is a copy of sleep owned by nobody, mode 04755, run
// by root; setting it up takes root (CI runs as root).
func TestGuardSetuidCMDDiesWithDsync(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root, to make a set-user-ID program of another user (CI runs as root)")
	}
	dir := t.TempDir()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(dir, "setuid-sleep")
	if err := os.WriteFile(prog, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(prog, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(prog, 0o755|os.ModeSetuid); err != nil { // after the chown, which clears it
		t.Fatal(err)
	}
	p := start(t, "lock", "-zk", shared.Addr(), lockPath(t), "--",
		"sh", "-c", `echo "$$" > "$1/ready"; exec "$2" 60`, "sh", dir, prog)
	pid := pids(t, awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second))[0]
	killGroupAtCleanup(t, pid)
	awaitEuid(t, pid, 65534) // the exec is done, set-user-ID
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.wait(t, 30*time.Second)
	if !awaitExit(t, pid, 30*time.Second) {
		t.Errorf("the set-user-ID CMD %d still runs 30s after dsync was killed", pid)
	}
}

// awaitEuid waits until process pid has effective user id uid (see
// awaitProc); if it does not, the exec did not happen, or the file system
// ignores the set-user-ID bit (nosuid).
func awaitEuid(t *testing.T, pid, uid int) {
	t.Helper()
	status := func() string {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		return string(b)
	}
	awaitProc(t, func() bool {
		for line := range strings.Lines(status()) {
			// Uid: real effective saved fs
			if f := strings.Fields(line); len(f) == 5 && f[0] == "Uid:" && f[2] == strconv.Itoa(uid) {
				return true
			}
		}
		return false
	}, func() string {
		return fmt.Sprintf("process %d did not get effective uid %d within 30s (a nosuid file system?); status:\n%s", pid, uid, status())
	})
}

// TestGuardInvisibleStatus: with the guard between them, dsync still exits
// as CMD did (the guard takes a signal to the group and does nothing), and
// says what it said when CMD could not be started, once.
func TestGuardInvisibleStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		cmd    []string
		want   int
		stderr string
	}{
		{"exit 0", []string{"true"}, 0, ""},
		{"exit 3", []string{"sh", "-c", "exit 3"}, 3, ""},
		{"exit 42", []string{"sh", "-c", "exit 42"}, 42, ""},
		{"SIGTERM", []string{"sh", "-c", "kill -TERM $$"}, 128 + int(syscall.SIGTERM), ""},
		{"SIGUSR1", []string{"sh", "-c", "kill -USR1 $$"}, 128 + int(syscall.SIGUSR1), ""},
		{"SIGSEGV", []string{"sh", "-c", "ulimit -c 0; kill -SEGV $$"}, 128 + int(syscall.SIGSEGV), ""},
		{"SIGKILL", []string{"sh", "-c", "kill -KILL $$"}, 128 + int(syscall.SIGKILL), ""},
		{"SIGABRT to the group", []string{"sh", "-c", "ulimit -c 0; kill -ABRT 0"}, 128 + int(syscall.SIGABRT), ""},
		{"not found", []string{"dsync-test-no-such-command"}, exitNotFound,
			"dsync: exec: \"dsync-test-no-such-command\": executable file not found in $PATH\n"},
		{"not found by path", []string{"/nonexistent/cmd"}, exitNotFound, "dsync: exec: \"/nonexistent/cmd\": stat /nonexistent/cmd: no such file or directory\n"},
		{"not executable", []string{"/dev/null"}, exitNoExec, "dsync: exec: \"/dev/null\": permission denied\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, _, stderr := dsyncRun(t, slices.Concat([]string{"lock", "-zk", shared.Addr(), lockPath(t), "--"}, tc.cmd)...)
			if code != tc.want || stderr != tc.stderr {
				t.Errorf("dsync exited %d, stderr %q; want %d, %q", code, stderr, tc.want, tc.stderr)
			}
		})
	}
}

// TestGuardForwardsOnce: a signal dsync forwards reaches CMD once (the
// guard, in CMD's group, takes it and does nothing with it). The sleep
// says it is ready once it ignores the signals: forked, it has them at
// the default action until then.
func TestGuardForwardsOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const script = `trap 'echo USR1 >> "$1/log"' USR1
trap 'echo USR2 >> "$1/log"; kill $s; exit 0' USR2
(trap '' USR1 USR2; echo ready > "$1/ready"; exec sleep 60) & s=$!
while kill -0 $s 2>/dev/null; do wait $s; done`
	p := start(t, "lock", "-zk", shared.Addr(), lockPath(t), "--", "sh", "-c", script, "sh", dir)
	awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second)
	if err := p.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	awaitFile(t, filepath.Join(dir, "log"), 30*time.Second)
	if err := p.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("dsync exited %d; want CMD's 0; stderr:\n%s", code, &p.stderr)
	}
	if got, want := readFile(t, filepath.Join(dir, "log")), "USR1\nUSR2\n"; got != want {
		t.Errorf("CMD's traps ran %q; want %q", got, want)
	}
}

// TestGuardSignalsIgnoredAtStart: a SIGHUP ignored when dsync starts
// (nohup) stays ignored for CMD, and the signals the guard catches start
// with the default action in CMD, as they did without a guard.
func TestGuardSignalsIgnoredAtStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setup string // run by the shell that execs dsync
		hup   bool   // SIGHUP ignored for CMD
	}{{"nohup", "trap '' HUP", true}, {"plain", ":", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := startWith(t, func(p *proc) {
				p.cmd.Path = "/bin/sh"
				p.cmd.Args = append([]string{"sh", "-c", tc.setup + `; exec "$0" "$@"`, bin}, p.cmd.Args[1:]...)
			}, "lock", "-zk", shared.Addr(), lockPath(t), "--", "grep", "^SigIgn:", "/proc/self/status")
			if code := p.wait(t, 30*time.Second); code != 0 {
				t.Fatalf("dsync exited %d; want 0; stderr:\n%s", code, &p.stderr)
			}
			f := strings.Fields(p.stdout.String())
			if len(f) != 2 {
				t.Fatalf("CMD printed %q; want its SigIgn line", &p.stdout)
			}
			ign, err := strconv.ParseUint(f[1], 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			bit := func(sig syscall.Signal) bool { return ign&(1<<(sig-1)) != 0 }
			if bit(syscall.SIGHUP) != tc.hup {
				t.Errorf("SIGHUP ignored for CMD: %v; want %v (SigIgn %s)", bit(syscall.SIGHUP), tc.hup, f[1])
			}
			for _, sig := range []syscall.Signal{syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE} {
				if bit(sig) {
					t.Errorf("%v ignored for CMD (SigIgn %s); want the default action", sig, f[1])
				}
			}
		})
	}
}

// TestGuardSignalMaskAsDsyncs: CMD starts with dsync's signal mask, and
// SIGTTOU at its default action, though dsync starts the guard with
// SIGTTOU blocked and the guard's runtime may need another mask (guard.go):
// with dsync started plainly; with SIGTTOU blocked (from this test's
// thread); with it ignored (which Go's runtime in dsync does not keep, as
// doc.go says); with SIGURG blocked and GODEBUG=asyncpreemptoff=1, with
// which dsync's runtime keeps SIGURG blocked, while the guard's, without
// GODEBUG (guardHidden), unblocks it (round 132); and with signals blocked
// beyond the first word of a 32-bit set and at the kernel's last, SIGUSR1,
// 35 and 64, which Go's runtime lets stay blocked (round 133).
func TestGuardSignalMaskAsDsyncs(t *testing.T) {
	t.Parallel()
	bit := func(sig syscall.Signal) uint64 { return 1 << (sig - 1) }
	for _, tc := range []struct {
		name  string
		setup string // run by the shell that execs dsync
		block []int  // blocked when dsync starts, and for CMD
		env   string
	}{
		{"plain", ":", nil, ""},
		{"ttou-blocked", ":", []int{int(syscall.SIGTTOU)}, ""},
		{"ttou-ignored", "trap '' TTOU", nil, ""},
		{"urg-blocked", ":", []int{int(syscall.SIGURG)}, "GODEBUG=asyncpreemptoff=1"},
		{"high-blocked", ":", []int{int(syscall.SIGUSR1), 35, 64}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runtime.LockOSThread() // dsync starts with this thread's mask
			defer runtime.UnlockOSThread()
			var set, orig, mask unix.Sigset_t
			for _, sig := range tc.block {
				addSignal(&set, sig)
			}
			if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, &orig); err != nil {
				t.Fatal(err)
			}
			defer func() { // the thread goes back to the pool as it was
				var now unix.Sigset_t
				_ = unix.PthreadSigmask(unix.SIG_SETMASK, &orig, nil)
				if err := unix.PthreadSigmask(unix.SIG_BLOCK, nil, &now); err != nil || now != orig {
					t.Fatalf("this test's thread has mask %x (%v) after restoring %x", now.Val[0], err, orig.Val[0])
				}
			}()
			if err := unix.PthreadSigmask(unix.SIG_BLOCK, nil, &mask); err != nil {
				t.Fatal(err)
			}
			p := startWith(t, func(p *proc) {
				p.cmd.Path = "/bin/sh"
				p.cmd.Args = append([]string{"sh", "-c", tc.setup + `; exec "$0" "$@"`, bin}, p.cmd.Args[1:]...)
				if tc.env != "" {
					p.cmd.Env = append(p.cmd.Env, tc.env)
				}
			}, "lock", "-zk", shared.Addr(), lockPath(t), "--", "grep", "-E", "^Sig(Blk|Ign):", "/proc/self/status")
			if code := p.wait(t, 30*time.Second); code != 0 {
				t.Fatalf("dsync exited %d; want 0; stderr:\n%s", code, &p.stderr)
			}
			f := strings.Fields(p.stdout.String())
			if len(f) != 4 || f[0] != "SigBlk:" || f[2] != "SigIgn:" {
				t.Fatalf("CMD printed %q; want its SigBlk and SigIgn lines", &p.stdout)
			}
			blk, err1 := strconv.ParseUint(f[1], 16, 64)
			ign, err2 := strconv.ParseUint(f[3], 16, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("CMD printed %q", &p.stdout)
			}
			if blk != uint64(mask.Val[0]) {
				t.Errorf("CMD's SigBlk %s; want dsync's, %x", f[1], mask.Val[0])
			}
			if ign&bit(syscall.SIGTTOU) != 0 {
				t.Errorf("SIGTTOU ignored for CMD (SigIgn %s); want the default action", f[3])
			}
		})
	}
}

// TestGuardEnvironment: CMD's environment is dsync's with DSYNC_PATH and
// DSYNC_TOKEN, and nothing of the guard.
func TestGuardEnvironment(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	p := start(t, "lock", "-zk", shared.Addr(), path, "--", "cat", "/proc/self/environ")
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("dsync exited %d; want 0; stderr:\n%s", code, &p.stderr)
	}
	envMap := func(env []string) map[string]string {
		m := map[string]string{}
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v // the last wins, as in os/exec
		}
		return m
	}
	got := envMap(strings.Split(strings.TrimSuffix(p.stdout.String(), "\x00"), "\x00"))
	want := envMap(p.cmd.Env)
	want["DSYNC_PATH"] = path
	if _, ok := got["DSYNC_TOKEN"]; !ok {
		t.Errorf("CMD has no DSYNC_TOKEN")
	}
	want["DSYNC_TOKEN"] = got["DSYNC_TOKEN"]
	if !maps.Equal(got, want) {
		for k := range maps.Keys(got) {
			if w, ok := want[k]; !ok || w != got[k] {
				t.Errorf("CMD has %s=%q; want %q (set: %v)", k, got[k], w, ok)
			}
		}
		for k := range maps.Keys(want) {
			if _, ok := got[k]; !ok {
				t.Errorf("CMD lacks %s=%q", k, want[k])
			}
		}
	}
}

// raceBuild builds dsync with the race detector, once for the package's
// tests: raceBin returns it.
var raceBuild = sync.OnceValues(func() (string, error) {
	exe := filepath.Join(filepath.Dir(bin), "dsync-race")
	if out, err := exec.Command("go", "build", "-race", "-o", exe, ".").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build -race: %v\n%s", err, out)
	}
	return exe, nil
})

// raceBin returns dsync built with the race detector.
func raceBin(t *testing.T) string {
	t.Helper()
	exe, err := raceBuild()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// TestGuardRaceRuntimeDoesNotSleep: in a -race build the guard gets
// GORACE=atexit_sleep_ms=0, so that its race runtime does not sleep a
// second as it exits after CMD, with the lock still held (the chaos run's
// dsync lock workers held it so after every CMD); CMD gets GORACE as dsync
// had it (here unset). Without the race detector the guard gets nothing
// added. CMD reads its parent's, the guard's, environment.
func TestGuardRaceRuntimeDoesNotSleep(t *testing.T) {
	t.Parallel()
	script := `tr '\0' '\n' < /proc/$PPID/environ | grep '^GORACE=' | sed 's/^/guard: /'; printenv GORACE | sed 's/^/CMD: /'; exit 0`
	for _, kv := range guardRuntimeEnv { // showToCMD drops only hidden names
		if name, _, _ := strings.Cut(kv, "="); !slices.Contains(guardHidden, name) {
			t.Errorf("guardRuntimeEnv sets %s, which is not in guardHidden: CMD would get it", name)
		}
	}
	for _, c := range []struct {
		name, want string
		exe        func(*testing.T) string
	}{
		{"race", "guard: GORACE=atexit_sleep_ms=0\n", raceBin},
		{"norace", "", func(*testing.T) string { return bin }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			exe := c.exe(t)
			p := startWith(t, func(p *proc) {
				p.cmd.Path, p.cmd.Args[0] = exe, exe
				p.cmd.Env = slices.DeleteFunc(p.cmd.Env, func(kv string) bool { return strings.HasPrefix(kv, "GORACE=") })
			}, "lock", "-zk", shared.Addr(), lockPath(t), "--", "sh", "-c", script)
			if code := p.wait(t, 30*time.Second); code != 0 {
				t.Fatalf("dsync exited %d; want 0; stderr:\n%s", code, &p.stderr)
			}
			if got := p.stdout.String(); got != c.want {
				t.Errorf("CMD printed %q; want %q", got, c.want)
			}
		})
	}
}

// TestGuardKilledCMDEnded: a guard killed by someone else leaves CMD
// orphaned in its group; dsync takes the guard's death for CMD's exit and
// ends the group as it ends what CMD leaves behind (SIGTERM, here ignored,
// then SIGKILL after -grace).
func TestGuardKilledCMDEnded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := start(t, "lock", "-zk", shared.Addr(), "-grace", "200ms", lockPath(t), "--",
		"sh", "-c", `trap '' TERM; sleep 60 & echo "$$ $!" > "$1/ready"; wait`, "sh", dir)
	ps := pids(t, awaitFile(t, filepath.Join(dir, "ready"), 30*time.Second))
	killGroupAtCleanup(t, ps[0])
	guardPid := parentOf(t, ps[0])
	if pg, err := syscall.Getpgid(ps[0]); err != nil || pg != guardPid {
		t.Fatalf("CMD's group is %d (%v); want its parent's pid %d, the guard's", pg, err, guardPid)
	}
	if err := syscall.Kill(guardPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code, want := p.wait(t, 30*time.Second), 128+int(syscall.SIGKILL); code != want {
		t.Errorf("dsync exited %d; want %d; stderr:\n%s", code, want, &p.stderr)
	}
	for _, want := range []string{"CMD exited, leaving processes in its process group", "SIGKILL"} {
		if !strings.Contains(p.stderr.String(), want) {
			t.Errorf("stderr = %q; want it to say %q", &p.stderr, want)
		}
	}
	for _, pid := range ps {
		if alive(pid) {
			t.Errorf("process %d of CMD's group outlived dsync", pid)
		}
	}
}

// TestGuardPassesInheritedDescriptors: a descriptor dsync inherited (3
// here, as make's jobserver or a shell's 3>file gives) reaches CMD at its
// number, as without a guard: the guard's socket takes another.
func TestGuardPassesInheritedDescriptors(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p := startWith(t, func(p *proc) { p.cmd.ExtraFiles = []*os.File{w} },
		"lock", "-zk", shared.Addr(), lockPath(t), "--", "sh", "-c", "echo fd3 >&3")
	w.Close()
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("dsync exited %d; want 0; stderr:\n%s", code, &p.stderr)
	}
	b, err := io.ReadAll(r) // every writer is gone
	if err != nil || string(b) != "fd3\n" {
		t.Errorf("CMD wrote %q, %v to descriptor 3; want %q", b, err, "fd3\n")
	}
}
