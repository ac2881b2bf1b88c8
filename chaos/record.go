package main

import (
	"encoding/json"
	"io"
	"sync"
	"time"
)

// A record is one line of the run's log, one JSON object: what a worker
// reports on its stdout, or what the coordinator notes itself (faults,
// signals, exits). Times are nanoseconds since the Unix epoch, read with
// time.Now on one machine, so that the records of all processes share one
// clock.
type record struct {
	Type   string `json:"type"`             // see the rec… constants
	Worker string `json:"worker,omitempty"` // "mutex-1"
	Inc    int    `json:"inc,omitempty"`    // incarnation of the worker, from 1
	Kind   string `json:"kind,omitempty"`   // worker kind (recStart), fault kind (recFault)
	Path   string `json:"path,omitempty"`   // lock or value path
	Pid    int    `json:"pid,omitempty"`

	// Session is the ZooKeeper session current when the record was made
	// (for a hold: when it was entered).
	Session int64 `json:"session,omitempty"`
	// Timeout is the session timeout asked for; Granted is the one the
	// Session reports once connected (recStart), in milliseconds.
	Timeout int64 `json:"timeout_ms,omitempty"`
	Granted int64 `json:"granted_ms,omitempty"`

	// A hold (recEnter, recExit): one Mutex or SemaphoreMutex hold, or one
	// lease of a Weighted.
	Hold  int    `json:"hold,omitempty"`  // number of the hold within its incarnation
	Enter int64  `json:"enter,omitempty"` // LockContext/AcquireLeases returned
	Exit  int64  `json:"exit,omitempty"`  // just before Unlock/Release
	Lost  int64  `json:"lost,omitempty"`  // the hold context was done with ErrLockLost
	Cause string `json:"cause,omitempty"` // context.Cause of a lost hold
	Token int64  `json:"token,omitempty"` // fencing token
	Node  string `json:"node,omitempty"`  // lease node (Weighted only)
	// Run is the run of dsync a dsync lock worker's hold was in (its
	// numbers run from 1 within an incarnation); Survivors, how many
	// processes of CMD's group outlived a killed dsync (recCmdEnd).
	Run       int `json:"run,omitempty"`
	Survivors int `json:"survivors,omitempty"`
	// Killed marks a hold the coordinator closed because its process died
	// (Exit is then when the coordinator saw it die).
	Killed bool `json:"killed,omitempty"`

	// A call (recCall), and a Value operation (recInvoke, then recCall).
	Op       string `json:"op,omitempty"` // lock, acquire, get, set, cas
	ID       int    `json:"id,omitempty"` // Value operation number within its incarnation
	Start    int64  `json:"start,omitempty"`
	Deadline int64  `json:"deadline,omitempty"`
	Return   int64  `json:"return,omitempty"`
	// Seen is when the worker itself saw the call's context done, if it was
	// before the call returned: the call's own lag is Return − Seen.
	Seen int64  `json:"seen,omitempty"`
	Err  string `json:"err,omitempty"`
	// Unknown marks a write whose outcome is unknown (it failed after the
	// request may have gone out).
	Unknown bool  `json:"unknown,omitempty"`
	Arg     int32 `json:"arg,omitempty"`  // value written by set and cas
	Prev    int32 `json:"prev,omitempty"` // version cas expects
	OK      bool  `json:"ok,omitempty"`   // cas wrote
	Value   int32 `json:"value,omitempty"`
	Version int32 `json:"version,omitempty"`

	// A fault (recFault) and a signal to a worker (recSignal).
	At     int64    `json:"at,omitempty"`     // struck
	Healed int64    `json:"healed,omitempty"` // over: the moment recovery is counted from
	Detail string   `json:"detail,omitempty"`
	Live   []string `json:"live,omitempty"` // workers expected to recover
	Signal string   `json:"signal,omitempty"`
	Status string   `json:"status,omitempty"` // how a process ended (recExitProc)
	Seed   uint64   `json:"seed,omitempty"`   // recRun
}

// Record types.
const (
	recStart    = "start"    // a worker is up, with its session
	recEnter    = "enter"    // a hold began
	recExit     = "exit"     // a hold ended
	recCall     = "call"     // a call with a deadline returned
	recInvoke   = "invoke"   // a Value operation is about to be sent
	recArmed    = "armed"    // a worker waits for "go" before an acquire or release
	recQuiet    = "quiet"    // a worker holds nothing and waits for "resume"
	recStop     = "stop"     // a worker is about to exit cleanly
	recStall    = "stall"    // a worker's process did not run from Start to Return
	recCmdStart = "cmdstart" // a dsync lock worker started dsync (Pid) at Start
	recCmdEnd   = "cmdend"   // dsync returned (Return), CMD's group seen gone (At)
	recCmdDied  = "cmddied"  // a holder of CMD (Pid) was seen dead at At, before its exit record
	recFault    = "fault"    // coordinator: a fault was struck and healed
	recSignal   = "signal"   // coordinator: a worker was sent a signal
	recExitProc = "procexit" // coordinator: a worker's process ended
	recGarbage  = "garbage"  // coordinator: a line that was not a record
	recOrphan   = "orphan"   // coordinator: a lock node outlived every holder and waiter
	recProblem  = "problem"  // coordinator: something else that must not happen
	recRun      = "run"      // coordinator: the run's seed, first
)

// now is the one clock of the run.
func now() int64 { return time.Now().UnixNano() }

// An emitter writes records as JSON lines, one Write each (a pipe takes
// writes of up to 4 KiB whole, so lines never interleave).
type emitter struct {
	mu   sync.Mutex
	w    io.Writer
	base record // Worker and Inc, set on every record
	err  error
}

func (e *emitter) emit(r record) {
	r.Worker, r.Inc = e.base.Worker, e.base.Inc
	b, err := json.Marshal(r)
	if err != nil {
		panic("chaos: " + err.Error()) // a record always marshals
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err == nil {
		_, e.err = e.w.Write(append(b, '\n'))
	}
}
