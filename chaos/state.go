package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"strconv"
	"sync"
	"time"
)

// state is the coordinator's view of the run: every record in order of
// arrival (streamed to the log file as well), and what the schedule needs to
// know at once — who holds, who acquired last when, who is armed or quiet.
// Waiters wait on changed, which is closed and replaced at every record.
type state struct {
	mu      sync.Mutex
	changed chan struct{}
	log     []record
	file    *bufio.Writer
	closer  io.Closer

	open   map[string]int    // worker → holds entered, not yet exited
	ok     map[string]int64  // worker → time of its last hold entered or Value operation done
	armed  map[string]record // worker → its last armed record
	quiet  map[string]int64  // worker → its session, if quiet since the last quiesce
	pids   map[int]string    // process id → "worker#inc"
	holds  int               // holds entered so far
	starts map[string]record // "worker#inc" → its start record
	cmdEnd map[string]record // dsync lock worker → its last recCmdEnd
}

func newState(path string) (*state, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &state{
		changed: make(chan struct{}),
		file:    bufio.NewWriter(f),
		closer:  f,
		open:    map[string]int{},
		ok:      map[string]int64{},
		armed:   map[string]record{},
		quiet:   map[string]int64{},
		pids:    map[int]string{},
		starts:  map[string]record{},
		cmdEnd:  map[string]record{},
	}, nil
}

// add appends r to the log and wakes the waiters.
func (s *state) add(r record) {
	b, _ := json.Marshal(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, r)
	s.file.Write(append(b, '\n'))
	switch r.Type {
	case recStart:
		s.pids[r.Pid] = incName(r.Worker, r.Inc)
		s.starts[incName(r.Worker, r.Inc)] = r
	case recEnter:
		s.open[r.Worker]++
		s.holds++
		s.ok[r.Worker] = max(s.ok[r.Worker], r.Enter)
	case recExit:
		s.open[r.Worker]--
	case recExitProc:
		s.open[r.Worker] = 0
	case recCmdStart:
		s.pids[r.Pid] = incName(r.Worker, r.Inc) + "'s dsync"
	case recCmdEnd:
		s.open[r.Worker] = 0
		s.cmdEnd[r.Worker] = r
	case recCall:
		if r.Err == "" && r.ID != 0 { // a Value operation
			s.ok[r.Worker] = max(s.ok[r.Worker], r.Return)
		}
	case recArmed:
		s.armed[r.Worker] = r
	case recQuiet:
		s.quiet[r.Worker] = r.Session
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// await calls cond, holding s's lock, until it reports true (then await does
// too) or deadline passes (then false). It wakes at every record, never on a
// timer of its own.
func (s *state) await(deadline time.Time, cond func() bool) bool {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for {
		s.mu.Lock()
		ok, changed := cond(), s.changed
		s.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-t.C:
			s.mu.Lock()
			defer s.mu.Unlock()
			return cond()
		}
	}
}

// do runs f holding s's lock.
func (s *state) do(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

// records returns the log so far.
func (s *state) records() []record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]record(nil), s.log...)
}

// close flushes and closes the log file.
func (s *state) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.file.Flush()
	if cerr := s.closer.Close(); err == nil {
		err = cerr
	}
	return err
}

// incName names one incarnation of a worker: "mutex-1#2".
func incName(worker string, inc int) string {
	return worker + "#" + strconv.Itoa(inc)
}
