package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The dsync lock workers loop running the real command,
//
//	dsync lock -zk PROXIES -session-timeout T -timeout D /chaos/cmdlock -- sh -c SCRIPT
//
// whose SCRIPT ignores SIGTERM (trap ” TERM), reports its process group,
// and runs two holders of its own in that group: one in the background and
// one in the foreground, each this binary again as "-worker cmdhold", which
// ignores SIGTERM too, writes an enter record, sleeps, and writes an exit
// record. dsync tells CMD nothing of a loss but by killing it, so these
// holds have no noticed loss: a hold ends at its exit record or, killed, at
// the latest when the worker saw CMD's process group gone (after dsync
// returned: dsync returns only once the group is gone). The checks join the
// two holds of one run of dsync into one hold.
const kindCmdHold = "cmdhold" // the holder CMD runs (not a worker of its own)

// cmdFlushType is a line the worker writes into CMD's stdout pipe itself:
// once it reads it back, every line CMD wrote before is read.
const cmdFlushType = "flush"

// cmdGroupType is the first line SCRIPT writes: its process group (its
// parent's pid, dsync's guard's), that of every process CMD starts.
const cmdGroupType = "cmdgroup"

// cmdScript is SCRIPT; $1 is this binary, $2 the run, $3 and $4 how long
// the foreground and background holders hold, $5 the lock path.
const cmdScript = `trap '' TERM
printf '{"type":"` + cmdGroupType + `","run":%d,"pid":%d}\n' "$2" "$(cut -d' ' -f5 /proc/$$/stat)"
"$1" -worker ` + kindCmdHold + ` -run "$2" -hold $(($2*2)) -for "$4" -path "$5" &
"$1" -worker ` + kindCmdHold + ` -run "$2" -hold $(($2*2-1)) -for "$3" -path "$5"
wait`

// killedWait bounds the wait for CMD's group to die once dsync was killed
// (dsync's guard SIGKILLs it).
const killedWait = time.Second

// cmdHoldMain is a holder CMD runs: it ignores SIGTERM (a SIGTERM before
// this line kills it before it entered), writes an enter record, holds, and
// writes an exit record. Killed, it simply stops.
func cmdHoldMain(args []string) int {
	signal.Ignore(syscall.SIGTERM)
	fs := flag.NewFlagSet("chaos -worker "+kindCmdHold, flag.ContinueOnError)
	run := fs.Int("run", 0, "run of dsync within the worker's incarnation")
	n := fs.Int("hold", 0, "hold number")
	d := fs.Duration("for", 0, "how long to hold")
	path := fs.String("path", "", "lock path")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	token, _ := strconv.ParseInt(os.Getenv("DSYNC_TOKEN"), 10, 64)
	out := &emitter{w: os.Stdout}
	r := record{Type: recEnter, Run: *run, Hold: *n, Path: *path, Pid: os.Getpid(), Enter: now(), Token: token}
	out.emit(r)
	time.Sleep(*d)
	r.Type, r.Exit = recExit, now()
	out.emit(r)
	return 0
}

// A cmdWorker is a dsync lock worker: the worker's loop, and the reader of
// the pipe every CMD writes its records to.
type cmdWorker struct {
	*worker
	pw *os.File // the write end of the pipe: stdout of dsync and CMD
	ew *os.File // the write end of their stderr, which the log gets with times

	mu       sync.Mutex
	groups   map[int]int // run → CMD's process group, once SCRIPT reported it
	flushed  map[int]chan struct{}
	exited   map[int]chan struct{} // holder's pid → closed at its exit record
	armHold  int                   // the run whose holders hold past the session timeout
	watchers sync.WaitGroup        // one per holder not yet exited or dead
}

// cmdLoop runs dsync lock again and again until ctx is done.
func (w *worker) cmdLoop(ctx context.Context) error {
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	defer pw.Close()
	er, ew, err := os.Pipe()
	if err != nil {
		return err
	}
	defer ew.Close()
	adoptOrphans()
	cw := &cmdWorker{worker: w, pw: pw, ew: ew, groups: map[int]int{}, flushed: map[int]chan struct{}{},
		exited: map[int]chan struct{}{}}
	go cw.read(pr) // ends when the process does
	go timestamp(er, os.Stderr)
	for run := 1; ; run++ {
		phase, ok := w.ctl.phase(ctx, w.out, &w.session)
		if !ok {
			return nil
		}
		for _, at := range []string{"acquire", "release"} {
			if w.ctl.armed(at) {
				w.ctl.wait(phase, at, w.out)
			}
		}
		hold := [2]time.Duration{w.holdFor(), w.holdFor()}
		if w.ctl.armed("hold") {
			hold = [2]time.Duration{armedHold, armedHold}
			cw.mu.Lock()
			cw.armHold = run
			cw.mu.Unlock()
		}
		cw.runOnce(ctx, phase, run, hold)
		w.pause(ctx, w.between(0, maxPause))
	}
}

// holdFor returns how long a hold lasts: most a few milliseconds, some up
// to longHold.
func (w *worker) holdFor() time.Duration {
	if w.rng.Float64() < longHolds {
		return w.between(maxHold, longHold)
	}
	return w.between(0, maxHold)
}

// runOnce runs dsync lock once, and then makes sure CMD's process group is
// gone, and records how the run ended (recCmdEnd). When phase ends (a
// quiesce) before CMD started, dsync gets SIGTERM, which ends its wait; a
// CMD already started runs to its end. When ctx ends (the shutdown hook),
// dsync gets SIGTERM at once. A "signal" command sends its signal to dsync.
func (cw *cmdWorker) runOnce(ctx, phase context.Context, run int, hold [2]time.Duration) {
	c := cw.cfg
	exe, err := os.Executable()
	if err != nil {
		cw.out.emit(record{Type: recProblem, At: now(), Detail: err.Error()})
		return
	}
	args := []string{"lock", "-zk", strings.Join(c.zk, ","), "-session-timeout", c.timeout.String(),
		"-timeout", cw.between(minWait, maxWait).String(), c.path, "--",
		"sh", "-c", cmdScript, "sh", exe, strconv.Itoa(run), hold[0].String(), hold[1].String(), c.path}
	cmd := exec.Command(c.dsync, args...)
	cmd.Stdout, cmd.Stderr = cw.pw, cw.ew
	// A program built with the race detector sleeps 1s as it exits, which
	// a holder would spend holding: not these.
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	start := now()
	if err := cmd.Start(); err != nil {
		cw.out.emit(record{Type: recProblem, At: now(), Detail: "start dsync: " + err.Error()})
		cw.pause(phase, time.Second)
		return
	}
	cw.out.emit(record{Type: recCmdStart, Run: run, Pid: cmd.Process.Pid, Start: start})
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var sent syscall.Signal
	phaseDone, ctxDone := phase.Done(), ctx.Done()
	var werr error
wait:
	for {
		select {
		case werr = <-waited:
			break wait
		case sig := <-cw.ctl.signals:
			if sent != syscall.SIGKILL {
				sent = sig
			}
			_ = cmd.Process.Signal(sig)
		case <-phaseDone:
			phaseDone = nil
			if cw.group(run) == 0 {
				_ = cmd.Process.Signal(syscall.SIGTERM) // still waiting for the lock
			}
		case <-ctxDone:
			ctxDone = nil
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	end := record{Type: recCmdEnd, Run: run, Pid: cmd.Process.Pid, Start: start, Return: now(), Status: "exit 0"}
	if werr != nil {
		end.Status = werr.Error()
	}
	if sent != 0 {
		end.Signal = sigName(sent)
	}
	cw.flush(run)
	if pgid := cw.group(run); pgid != 0 {
		cw.reap(&end, pgid, sent == syscall.SIGKILL)
	}
	if end.At == 0 {
		end.At = now()
	}
	cw.flush(run) // every record of the run is read: no process of it is left
	cw.watchers.Wait()
	if code := cmd.ProcessState.ExitCode(); code == exitUsage || code == 126 || code == 127 {
		cw.out.emit(record{Type: recProblem, At: now(), Detail: fmt.Sprintf("%s#%d: dsync lock (run %d) ended with %s (see %s.%d.log)",
			c.name, c.inc, run, end.Status, c.name, c.inc)})
	}
	cw.out.emit(end)
	cw.mu.Lock()
	delete(cw.groups, run)
	cw.mu.Unlock()
}

// exitUsage is dsync's exit status for bad usage.
const exitUsage = 2

// reap waits for CMD's process group pgid to be gone, and sets end.At to
// when it saw it gone. dsync returns only once the group is gone, unless it
// was killed: then dsync's guard kills the group, which reap waits for
// (end.Detail says how long it took); what is left after killedWait it
// kills itself, as a supervisor would, noting them in end.Survivors. A
// process left is a problem.
func (cw *cmdWorker) reap(end *record, pgid int, killed bool) {
	left := groupMembers(pgid)
	if len(left) == 0 {
		end.At = now()
		return
	}
	problem := ""
	if killed {
		deadline := time.Now().Add(killedWait)
		for len(left) > 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
			left = groupMembers(pgid)
		}
		took := time.Duration(now() - end.Return)
		end.Detail = fmt.Sprintf("CMD's group %d died within %v of dsync", pgid, took.Round(time.Millisecond))
		if len(left) > 0 {
			end.Survivors = len(left)
			problem = fmt.Sprintf("processes %v of CMD's group %d outlived the SIGKILL of dsync by %v", left, pgid, killedWait)
		}
	} else {
		problem = fmt.Sprintf("dsync returned with processes of CMD's group %d left: %v", pgid, left)
	}
	if problem != "" {
		cw.out.emit(record{Type: recProblem, At: now(), Detail: fmt.Sprintf("%s#%d run %d: %s", cw.cfg.name, cw.cfg.inc, end.Run, problem)})
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	for len(groupMembers(pgid)) > 0 {
		time.Sleep(time.Millisecond)
	}
	end.At = now()
}

// groupMembers reaps the processes of group pgid this process adopted, and
// returns the pids of those left that are not zombies.
func groupMembers(pgid int) []int {
	for {
		var ws syscall.WaitStatus
		if pid, err := syscall.Wait4(-pgid, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
			break
		}
	}
	if syscall.Kill(-pgid, 0) == syscall.ESRCH {
		return nil
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var pids []int
	for _, name := range stats {
		b, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp …: comm may hold anything but ')'
		// at its end.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[2] != strconv.Itoa(pgid) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(name)))
		pids = append(pids, pid)
	}
	return pids
}

// group returns CMD's process group in run, once SCRIPT reported it, or 0.
func (cw *cmdWorker) group(run int) int {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	return cw.groups[run]
}

// flush returns once every line written to the pipe before is read.
func (cw *cmdWorker) flush(run int) {
	ch := make(chan struct{})
	cw.mu.Lock()
	cw.flushed[run] = ch
	cw.mu.Unlock()
	b, _ := json.Marshal(record{Type: cmdFlushType, Run: run})
	if _, err := cw.pw.Write(append(b, '\n')); err != nil {
		return
	}
	<-ch
}

// read passes on the records CMD writes, one a line, stamped with the
// worker's name (by the emitter), and notes the process groups.
func (cw *cmdWorker) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var rec record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil || rec.Run == 0 {
			cw.out.emit(record{Type: recGarbage, At: now(), Detail: "CMD wrote: " + sc.Text()})
			continue
		}
		cw.mu.Lock()
		switch rec.Type {
		case cmdGroupType:
			cw.groups[rec.Run] = rec.Pid
		case recEnter:
			ch := make(chan struct{})
			cw.exited[rec.Pid] = ch
			cw.watchers.Add(1)
			go cw.watch(rec, ch)
		case recExit:
			if ch, ok := cw.exited[rec.Pid]; ok {
				close(ch)
				delete(cw.exited, rec.Pid)
			}
		case cmdFlushType:
			if ch, ok := cw.flushed[rec.Run]; ok {
				close(ch)
				delete(cw.flushed, rec.Run)
			}
		}
		armed := rec.Type == recEnter && cw.armHold == rec.Run
		if armed {
			cw.armHold = 0
		}
		cw.mu.Unlock()
		switch rec.Type {
		case recEnter, recExit:
			rec.Session = 0
			cw.out.emit(rec)
			if armed {
				cw.out.emit(record{Type: recArmed, Kind: "hold"})
			}
		}
	}
}

// deathPoll is how often the worker looks whether a holder still lives.
const deathPoll = 2 * time.Millisecond

// watch looks every deathPoll whether the holder that entered with enter
// still lives, until its exit record comes; the first time it is gone (or
// a zombie), it records recCmdDied: the holder ended by then. dsync itself
// returns later than the death of its CMD, after releasing the lock and
// closing its session (slow when cut off).
func (cw *cmdWorker) watch(enter record, exited <-chan struct{}) {
	defer cw.watchers.Done()
	stat := fmt.Sprintf("/proc/%d/stat", enter.Pid)
	t := time.NewTicker(deathPoll)
	defer t.Stop()
	for {
		select {
		case <-exited:
			return
		case <-t.C:
		}
		b, err := os.ReadFile(stat)
		if i := strings.LastIndexByte(string(b), ')'); err == nil && i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X' {
			continue
		}
		at := now()
		cw.mu.Lock()
		delete(cw.exited, enter.Pid)
		cw.mu.Unlock()
		cw.out.emit(record{Type: recCmdDied, Run: enter.Run, Hold: enter.Hold, Pid: enter.Pid, At: at})
		return
	}
}

// errNoDsync is the error of a dsync lock worker started without -dsync.
var errNoDsync = errors.New("no dsync binary (-dsync)")

// timestamp copies the lines of r to w, each after the time it was read
// (Unix nanoseconds, the records' clock): dsync's messages get times.
func timestamp(r io.Reader, w io.Writer) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fmt.Fprintf(w, "%d %s\n", now(), sc.Text())
	}
}
