package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/dsync-go/dsync/zkconn"
)

// Exit statuses of dsync's own outcomes; otherwise dsync exits with CMD's.
const (
	exitFail     = 1   // lock or leadership not acquired (held, timed out, ZooKeeper failed), a run not recorded, ls or revoke failed
	exitUsage    = 2   // bad flags or arguments
	exitLost     = 3   // the lock (or leadership) was lost while CMD ran and CMD was terminated
	exitNoExec   = 126 // CMD was found but could not be run
	exitNotFound = 127 // CMD was not found
)

// defaultZK is the ZooKeeper address used when neither -zk nor $DSYNC_ZK is set.
const defaultZK = "127.0.0.1:2181"

// exitStatusHelp is the exit status help of lock and sem.
const exitStatusHelp = `
Exit status:
` + exitStatusBody

const exitStatusBody = `  CMD's status  CMD ran (128+N if it was killed by signal N)
  1             the lock was not acquired: held (-try), timed out (-timeout),
                no ZooKeeper server answered (-dial-timeout), or ZooKeeper
                failed; or, with -revocable, its revocation was requested
                before CMD started (CMD did not run)
  2             bad usage
  3             the lock was lost while CMD ran (-lost term: CMD was
                terminated), or before CMD started (CMD did not run)
                (-exit-lost sets this status)
  126, 127      CMD could not be run, or was not found
  128+N         dsync got signal N (SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1,
                SIGUSR2) while waiting
Whenever dsync ends CMD's processes (lock lost, CMD's leftovers) or
forwards a signal, a line on stderr says so.
`

const mainUsage = `usage: dsync <command> [flags] ...

dsync runs a command while holding a lock in ZooKeeper, compatible with
Apache Curator's InterProcessMutex, InterProcessSemaphoreV2 and LeaderLatch.

Commands:
  lock    run a command while holding the mutex at a path
  sem     run a command while holding leases of a semaphore at a path
  elect   run a command while leading the election at a path, or print
          its leaders (-listen)
  once    run a command once across every process that asks for it at a path
  ls      list the holders and waiters of a mutex, semaphore or election
  revoke  ask the holders of a lock to release it (revocable holders only)
  help    print help for a command: dsync help <command>

Run "dsync <command> -h" for the flags of a command.

Exit status of lock and sem:
` + exitStatusBody + `"dsync help elect" and "dsync help once" tell their exit statuses; ls and
revoke exit 0, or 1 when they fail.
`

const lockUsage = `usage: dsync lock [flags] PATH -- CMD [ARG...]

Run CMD while holding the mutex at the ZooKeeper path PATH (the layout of
Curator's InterProcessMutex), and release it once CMD's process group is
gone. Its environment gains DSYNC_PATH and DSYNC_TOKEN, the fencing token of
the hold.

What is covered: CMD runs in a process group of its own, and the lock is
held until no process of that group is left: when CMD exits, the processes
it left in its group get SIGTERM, then SIGKILL after -grace. A process that
leaves the group (setsid, setpgid) is not covered. SIGHUP, SIGINT, SIGQUIT,
SIGTERM, SIGUSR1 and SIGUSR2 are forwarded to the group. SIGTSTP, SIGTTIN
and SIGTTOU stop the group, then dsync; SIGCONT continues both. A stopped
dsync cannot answer ZooKeeper: after a stop longer than a quarter of the
session timeout, dsync takes the lock as lost and SIGKILLs the stopped
group instead of continuing it. If dsync dies without ending CMD (SIGKILL,
a crash), CMD's guard (dsync run again as CMD's parent) SIGKILLs the
group, set-user-ID programs included.

While dsync waits in line, after 3s it says once on stderr who holds the
lock, if stderr is a terminal.

With -revocable, the hold is revocable (Curator's makeRevocable): its node
has empty data, and when "dsync revoke" (or Curator's Revoker) asks for the
lock, CMD's process group gets SIGTERM, once, with a line on stderr. That
is all: CMD decides when to exit, and the lock is released as usual once
its group is gone; dsync exits with CMD's status. A request made before CMD
started (while dsync waited in line) keeps CMD from starting: dsync releases
the lock and exits 1.

If the lock is lost while CMD runs (the connection to ZooKeeper drops, the
session expires, the node is deleted), -lost term sends SIGTERM to the
group, then SIGKILL after -grace, and exits 3. The grace period must end
before the server can expire the session: -grace is at most a quarter of
the session timeout the server granted (default: that quarter); a longer
-grace is rejected with exit status 2 before the lock is taken. When the
session has expired, or the node was deleted, the next in line may hold
already: the group gets SIGKILL at once.

Flags:
`

const semUsage = `usage: dsync sem [flags] -max N [-n W] PATH -- CMD [ARG...]

Run CMD while holding W leases of the semaphore of N leases at the ZooKeeper
path PATH (the layout of Curator's InterProcessSemaphoreV2), and release them
when CMD exits. All W leases are taken at once. Every process using PATH must
agree on N. CMD runs as with "dsync lock"; DSYNC_TOKEN is not set.

Flags:
`

const electUsage = `usage: dsync elect [flags] PATH -- CMD [ARG...]
       dsync elect -listen [flags] PATH

Campaign for leadership of the election at the ZooKeeper path PATH (the
layout of Curator's LeaderLatch; with -selector, of Curator's
LeaderSelector), run CMD once this process leads, and resign once CMD's
process group is gone. The participant's id (-id) is its node's data, as
"dsync ls" and Curator's getLeader show it. CMD's environment gains
DSYNC_PATH and DSYNC_TOKEN, the fencing token of the leadership (its node's
czxid, which grows with every term).

CMD runs as with "dsync lock" ("dsync help lock" says how: process group,
signals, leftover processes, -lost, -grace): leadership is held until no
process of CMD's group is left, and if it is lost while CMD runs (the
connection to ZooKeeper drops, the session expires, the node is deleted),
-lost term sends SIGTERM to the group, then SIGKILL after -grace, and
exits 3.

While dsync waits in line, after 3s it says once on stderr who leads, if
stderr is a terminal.

With -listen, dsync does not campaign: it prints the leader, "ID<TAB>NODE",
as it starts (once there is one) and at every change, one line each, until
SIGINT or SIGTERM. It rides out lost sessions; other ZooKeeper errors are
reported on stderr and listening goes on. -listen takes no CMD, and none of
-id, -timeout, -lost, -grace, -exit-lost.

The two layouts must not share a path: a LeaderLatch participant does not
wait for a LeaderSelector leader, nor the reverse.

Flags:
`

const onceUsage = `usage: dsync once [flags] PATH -- CMD [ARG...]
       dsync once -status [flags] PATH
       dsync once -reset [flags] PATH

Run CMD once across every process that runs "dsync once" on the ZooKeeper
path PATH (as sync.Once does across goroutines). Runs are one at a time,
under the mutex at PATH/lock (Curator's InterProcessMutex layout). If CMD
exits 0, the run's success is recorded in PATH/done ("host=... pid=...
at=<time>"), and every "dsync once" on PATH from then on, and every one
waiting meanwhile, exits 0 without running CMD (saying so on stderr only if
it is a terminal). If CMD fails, nothing is recorded, dsync exits with CMD's
status, and the next one in line runs CMD. CMD runs as with "dsync lock"
("dsync help lock" says how); its environment gains DSYNC_PATH, and
DSYNC_TOKEN, the fencing token of the run's lock.

If the lock is lost before CMD's process group is gone (-lost term: CMD is
terminated as "dsync lock" does), or (with -lost term) before the success
is recorded, nothing is recorded and dsync exits 3: the next "dsync once" runs CMD
again. Make CMD safe to run again after an interrupted run. (If it is lost
while the record's request is under way, dsync also exits 3, and says the
record may or may not be written.) A run needs write permission on PATH.

-status prints "done RECORD" or "not done". -reset deletes the record, so
that the next "dsync once" runs CMD again; a run under way is not stopped.
They take no CMD, and none of -lost, -grace, -exit-lost.

Flags:
`

const lsUsage = `usage: dsync ls [flags] PATH

List the holders, then the waiters in the order they will acquire, of the
mutex, the semaphore, the read/write lock or the election at PATH, with each
node's data (host and pid for dsync, an IP address for Curator, the id of
an election's participant), ZooKeeper session and age. An election
(Curator's LeaderLatch layout, "latch-" nodes) lists its leader first, then
the participants in the order they will lead. For a semaphore (PATH has a
"leases" or "locks" child): the lease nodes held, then the lease nodes of
the acquirer waiting for room (it holds the internal lock), then the nodes
queued at PATH/locks. For "dsync once" (PATH has a "lock" or "done" child):
the record of the run that succeeded, if any, then the nodes queued at
PATH/lock.
Exits 0 (with a message) when nobody holds or waits.

Flags:
`

const revokeUsage = `usage: dsync revoke [flags] PATH

Ask the holders of a lock to release it, as Curator's Revoker does: write
"__REVOKE__" into their nodes. PATH is a lock path (a mutex's, or a
semaphore's: every lease held is asked, waiters never), or the path of one
node (its last segment is a node name _c_<uuid>-..., as "dsync ls" shows
it), which is asked whether it holds or waits. Only revocable holders
("dsync lock -revocable", Curator's makeRevocable) act on a request, and
only they are asked: a node that is not revocable (its data is not empty)
is left as it is. Asking does not release anything: the holder decides.
Each node asked is printed on stdout.

Flags:
`

const revokeExitHelp = `
Exit status:
  0  every holder was asked (at least one)
  1  not every holder was asked: nobody holds PATH, the node does not exist,
     a holder is not revocable, no ZooKeeper server answered (-dial-timeout),
     ZooKeeper failed, or -timeout passed
  2  bad usage
`

const electExitHelp = `
Exit status:
  CMD's status  CMD ran while leading (128+N if it was killed by signal N)
  1             leadership was not won: timed out (-timeout), no ZooKeeper
                server answered (-dial-timeout), or ZooKeeper failed
  2             bad usage
  3             leadership was lost while CMD ran (-lost term: CMD was
                terminated), or before CMD started (CMD did not run)
                (-exit-lost sets this status)
  126, 127      CMD could not be run, or was not found
  128+N         dsync got signal N (SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1,
                SIGUSR2) while waiting
With -listen: 0 after SIGINT or SIGTERM; 1 if no ZooKeeper server answered
(-dial-timeout) or listening cannot go on.
`

const onceExitHelp = `
Exit status:
  0             the run is done: CMD ran, exited 0 and its success was
                recorded; or a run had succeeded already (CMD did not run)
  CMD's status  CMD ran and failed (128+N if it was killed by signal N);
                nothing was recorded
  1             the run's lock was not acquired: timed out (-timeout), no
                ZooKeeper server answered (-dial-timeout), or ZooKeeper
                failed; or CMD succeeded but its success could not be recorded
  2             bad usage
  3             the run's lock was lost before CMD started (CMD did not
                run), before CMD's process group was gone (-lost term: CMD
                was terminated) or before its success was recorded; nothing
                was recorded (-exit-lost sets this status)
  126, 127      CMD could not be run, or was not found (nothing recorded)
  128+N         dsync got signal N (SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1,
                SIGUSR2) while waiting
With -status or -reset: 0, or 1 if no ZooKeeper server answered
(-dial-timeout), ZooKeeper failed or -timeout passed.
`

// A badUsage is bad flags or arguments, reported with the command's usage.
type badUsage struct{ msg string }

func (e *badUsage) Error() string { return e.msg }

func usageError(format string, args ...any) error {
	return &badUsage{fmt.Sprintf(format, args...)}
}

// lossAction is the value of -lost.
type lossAction string

const (
	lossTerm   lossAction = "term"
	lossIgnore lossAction = "ignore"
)

func (a *lossAction) String() string { return string(*a) }

func (a *lossAction) Set(s string) error {
	switch lossAction(s) {
	case lossTerm, lossIgnore:
		*a = lossAction(s)
		return nil
	}
	return errors.New(`must be "term" or "ignore"`)
}

// settings are the parsed flags and arguments of a subcommand.
type settings struct {
	zk             string   // -zk as given
	servers        []string // -zk split
	timeout        time.Duration
	sessionTimeout time.Duration
	dialTimeout    time.Duration
	try            bool
	lost           lossAction
	grace          time.Duration // -grace, if graceSet; else graceFor decides
	graceSet       bool
	exitLost       int
	max            int64  // sem
	n              int64  // sem
	revocable      bool   // lock
	id             string // elect; "" for defaultID
	selector       bool   // elect
	listen         bool   // elect
	status         bool   // once
	reset          bool   // once
	path           string
	argv           []string // CMD and its arguments (lock, sem, elect, once)
	tls            tlsFlags // -tls-ca, -tls-cert, -tls-key
}

// holdsCMD reports whether the subcommand name runs a CMD while it holds
// something (unless a flag says otherwise: see settings.runsCMD).
func holdsCMD(name string) bool {
	return name == "lock" || name == "sem" || name == "elect" || name == "once"
}

// runsCMD reports whether the subcommand name, with these settings, runs a
// CMD: not with -listen, -status or -reset.
func (s *settings) runsCMD(name string) bool {
	return holdsCMD(name) && s.mode() == ""
}

// mode returns the flag that makes elect or once do something else than run
// CMD (-listen, -status, -reset), or "".
func (s *settings) mode() string {
	switch {
	case s.listen:
		return "-listen"
	case s.status:
		return "-status"
	case s.reset:
		return "-reset"
	}
	return ""
}

// cmdOnly returns the flags of the subcommand name that apply only when it
// runs CMD.
func cmdOnly(name string) []string {
	if name == "elect" {
		return []string{"id", "timeout", "lost", "grace", "exit-lost"}
	}
	return []string{"lost", "grace", "exit-lost"}
}

// defaultID returns the participant id of "dsync elect" without -id, which
// is what dsync writes into its lock nodes: "host=<host name> pid=<pid>".
func defaultID() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return fmt.Sprintf("host=%s pid=%d", host, os.Getpid())
}

// newFlagSet returns the flag set of the subcommand name, bound to s. Its
// usage text goes to out.
func newFlagSet(name string, s *settings, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("dsync "+name, flag.ContinueOnError)
	fs.SetOutput(out)
	zk := os.Getenv("DSYNC_ZK")
	if zk == "" {
		zk = defaultZK
	}
	s.lost = lossTerm
	fs.StringVar(&s.zk, "zk", zk, "comma-separated ZooKeeper servers, `host:port,...`; $DSYNC_ZK sets the default")
	fs.DurationVar(&s.sessionTimeout, "session-timeout", 10*time.Second, "ZooKeeper session timeout `D` (the server may clamp it)")
	s.tls.register(fs)
	fs.DurationVar(&s.dialTimeout, "dial-timeout", defaultDialTimeout, "give up (exit 1) if no ZooKeeper server answers within `D`")
	switch name {
	case "ls":
		fs.DurationVar(&s.timeout, "timeout", 30*time.Second, "give up connecting and listing after `D`")
	case "revoke":
		fs.DurationVar(&s.timeout, "timeout", 30*time.Second, "give up connecting and asking after `D`")
	default:
		held, lost := "the lock", "the lock is lost"
		if name == "elect" {
			held, lost = "leadership", "leadership is lost"
		}
		timeout := "give up waiting for " + held + " after `D` (0: wait forever)"
		if name == "once" {
			timeout += "; with -status or -reset, give up after D"
		}
		fs.DurationVar(&s.timeout, "timeout", 0, timeout)
		if name == "lock" || name == "sem" {
			fs.BoolVar(&s.try, "try", false, "do not wait: fail at once if the lock is held")
		}
		fs.Var(&s.lost, "lost", "when "+lost+" while CMD runs: `term|ignore`\nterm: SIGTERM to CMD's group, SIGKILL after -grace, exit -exit-lost; ignore: warn only")
		fs.Func("grace", "time `D` between SIGTERM and SIGKILL when CMD's group is terminated\n(default and maximum: a quarter of the granted session timeout)", func(v string) error {
			d, err := time.ParseDuration(v)
			s.grace, s.graceSet = d, true
			return err
		})
		fs.IntVar(&s.exitLost, "exit-lost", exitLost, "exit status `N` when "+lost+" and CMD terminated (-lost term)")
	}
	switch name {
	case "lock":
		fs.BoolVar(&s.revocable, "revocable", false, "make the hold revocable: SIGTERM to CMD's group when \"dsync revoke\" asks for the lock")
	case "sem":
		fs.Int64Var(&s.max, "max", 0, "number of leases of the semaphore (required, `N` > 0)")
		fs.Int64Var(&s.n, "n", 1, "number of leases to hold, `W` (1 to N)")
	case "elect":
		fs.StringVar(&s.id, "id", "", "the participant's `ID`, written as its node's data (default \"host=<host name> pid=<pid>\")")
		fs.BoolVar(&s.selector, "selector", false, "take Curator LeaderSelector's layout (\"lock-\" nodes) instead of LeaderLatch's")
		fs.BoolVar(&s.listen, "listen", false, "do not campaign: print the leader at every change, until SIGINT or SIGTERM")
	case "once":
		fs.BoolVar(&s.status, "status", false, "print \"done RECORD\" or \"not done\", and run nothing")
		fs.BoolVar(&s.reset, "reset", false, "delete the record of the run that succeeded, so that CMD runs again")
	}
	fs.Usage = func() {
		usage := map[string]string{"lock": lockUsage, "sem": semUsage, "elect": electUsage, "once": onceUsage,
			"ls": lsUsage, "revoke": revokeUsage}[name]
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
		exits := map[string]string{"lock": exitStatusHelp, "sem": exitStatusHelp, "elect": electExitHelp,
			"once": onceExitHelp, "revoke": revokeExitHelp}[name]
		fmt.Fprint(fs.Output(), exits)
	}
	return fs
}

// parse parses args of the subcommand name into s. Flags may come before
// and after PATH; lock, sem, elect and once need "--" and CMD after them,
// unless elect has -listen, or once -status or -reset. It returns
// flag.ErrHelp for -h, and a *badUsage for anything else wrong.
func parse(name string, args []string) (*settings, error) {
	s := &settings{}
	fs := newFlagSet(name, s, io.Discard)
	head := args
	if holdsCMD(name) {
		i := slices.Index(args, "--")
		if i >= 0 {
			head, s.argv = args[:i], args[i+1:]
		}
	}
	var positional []string
	for {
		if err := fs.Parse(head); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError("%v", err)
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		head = fs.Args()[1:]
	}
	s.servers = splitServers(s.zk)
	if err := s.checkMode(name, fs); err != nil {
		return nil, err
	}
	switch {
	case len(positional) == 0:
		return nil, usageError("missing PATH")
	case len(positional) > 1 && !s.runsCMD(name):
		return nil, usageError("unexpected argument %q", positional[1])
	case len(positional) > 1:
		return nil, usageError("unexpected argument %q (CMD goes after --)", positional[1])
	}
	s.path = positional[0]
	if err := zkconn.ValidatePath(s.path); err != nil {
		return nil, usageError("%v", err)
	}
	if s.runsCMD(name) {
		if s.argv == nil {
			return nil, usageError("missing -- before CMD")
		}
		if len(s.argv) == 0 {
			return nil, usageError("missing CMD after --")
		}
	}
	if len(s.servers) == 0 {
		return nil, usageError("-zk: no servers")
	}
	if err := zkconn.ValidateServers(s.servers); err != nil {
		return nil, usageError("-zk: %v", err)
	}
	switch {
	case s.sessionTimeout <= 0:
		return nil, usageError("-session-timeout must be positive")
	case s.dialTimeout <= 0:
		return nil, usageError("-dial-timeout must be positive")
	case s.timeout < 0:
		return nil, usageError("-timeout must not be negative")
	case s.grace < 0:
		return nil, usageError("-grace must not be negative")
	case s.exitLost < 0 || s.exitLost > 255:
		return nil, usageError("-exit-lost must be between 0 and 255")
	}
	if err := s.tls.load(); err != nil {
		return nil, err
	}
	if s.runsCMD(name) {
		if _, err := graceFor(s, s.sessionTimeout); err != nil {
			return nil, err
		}
	}
	if name == "sem" {
		if s.max <= 0 {
			return nil, usageError("-max N is required and must be positive")
		}
		if s.n <= 0 || s.n > s.max {
			return nil, usageError("-n %d: must be between 1 and -max (%d)", s.n, s.max)
		}
	}
	return s, nil
}

// checkMode checks that a mode flag (-listen, -status, -reset) goes alone:
// without CMD, another mode or a flag that applies only to CMD (as parsed
// by fs).
func (s *settings) checkMode(name string, fs *flag.FlagSet) error {
	mode := s.mode()
	if mode == "" {
		return nil
	}
	if s.status && s.reset {
		return usageError("-status and -reset exclude each other")
	}
	var bad string
	fs.Visit(func(f *flag.Flag) {
		if bad == "" && slices.Contains(cmdOnly(name), f.Name) {
			bad = f.Name
		}
	})
	switch {
	case bad != "":
		return usageError("-%s does not go with %s", bad, mode)
	case s.argv != nil:
		return usageError("%s takes no CMD", mode)
	}
	return nil
}

// splitServers splits a -zk value into addresses, dropping empty ones.
func splitServers(v string) []string {
	var out []string
	for _, a := range strings.Split(v, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}
