package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// The Count's sequential specification, for porcupine: a register whose
// every write moves its version on by one, as ZooKeeper's setData does. Its
// node holds the seed (0) at version 0 before the first operation: the
// workers make it before they use it (see valueLoop), since a Get or Set
// that creates a missing node writes more than one version.
type (
	regState struct{ value, version int32 }
	regInput struct {
		op   string // get, set, cas
		arg  int32  // set and cas: the value written
		prev int32  // cas: the version expected
	}
	regOutput struct {
		unknown bool // a write whose outcome is unknown: its process died, or its reply was lost
		failed  bool // a write that failed and was not applied (the error says so)
		ok      bool // cas: written
		value   int32
		version int32
	}
)

var countModel = porcupine.Model{
	Init: func() any { return regState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(regState), input.(regInput), output.(regOutput)
		next := regState{value: in.arg, version: s.version + 1}
		switch {
		case in.op == "get":
			return out.value == s.value && out.version == s.version, s
		case out.failed:
			return true, s
		case in.op == "set":
			return true, next
		}
		match := s.version == in.prev // cas
		if !out.unknown && out.ok != match {
			return false, s
		}
		if match {
			return true, next
		}
		return true, s
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		var res string
		switch {
		case out.unknown:
			res = "unknown"
		case out.failed:
			res = "failed, not applied"
		case in.op == "get":
			res = fmt.Sprintf("%d @v%d", out.value, out.version)
		case in.op == "cas":
			res = fmt.Sprint(out.ok)
		default:
			res = "ok"
		}
		switch in.op {
		case "set":
			return fmt.Sprintf("set(%d) → %s", in.arg, res)
		case "cas":
			return fmt.Sprintf("cas(v%d, %d) → %s", in.prev, in.arg, res)
		}
		return "get() → " + res
	},
	DescribeState: func(state any) string {
		s := state.(regState)
		return fmt.Sprintf("%d @v%d", s.value, s.version)
	},
}

// valueResult is what the linearizability check found.
type valueResult struct {
	ops     int // operations checked
	unknown int // of which writes with an unknown outcome
	settled int // of those, the ones what was seen settled
	failed  int // and writes that failed, not applied
	result  porcupine.CheckResult
	took    time.Duration
	visual  string // a visualization of a history that is not linearizable
	// witnesses explain a history that is not linearizable
	witnesses []string
}

func (v valueResult) ok() bool { return v.result == porcupine.Ok }

// checkValue checks the Count's history for linearizability. A write whose
// outcome is unknown — the error wraps dsync.ErrOutcomeUnknown, or its
// process died with it in flight — may take effect at any moment after its
// call: its return is open (math.MaxInt64) and its output unknown, unless
// what was seen settles it (see sightings.settle). A read that failed is
// left out: it had no effect.
//
// Each epoch's Count (see countEpoch) is checked on its own; the result
// sums them, and is the worst of theirs.
func checkValue(recs []record, cfg config) valueResult {
	byPath := map[string][]record{}
	var paths []string
	for _, r := range recs {
		if r.Type == recInvoke || r.Type == recCall && r.ID != 0 {
			if _, ok := byPath[r.Path]; !ok {
				paths = append(paths, r.Path)
			}
			byPath[r.Path] = append(byPath[r.Path], r)
		}
	}
	sum := valueResult{result: porcupine.Ok}
	for _, p := range paths {
		v := checkCount(byPath[p], cfg)
		sum.ops += v.ops
		sum.unknown += v.unknown
		sum.settled += v.settled
		sum.failed += v.failed
		sum.took += v.took
		if worse(v.result, sum.result) {
			sum.result, sum.visual, sum.witnesses = v.result, v.visual, v.witnesses
		}
	}
	return sum
}

// worse reports whether a is a worse verdict than b: Illegal, then Unknown
// (undecided), then Ok.
func worse(a, b porcupine.CheckResult) bool {
	rank := map[porcupine.CheckResult]int{porcupine.Ok: 0, porcupine.Unknown: 1, porcupine.Illegal: 2}
	return rank[a] > rank[b]
}

// checkCount checks the history of one Count.
func checkCount(recs []record, cfg config) valueResult {
	type key struct {
		w  string
		id int
	}
	invokes := map[key]record{}
	var order []key
	done := map[key]record{}
	clients := map[string]int{}
	for _, r := range recs {
		k := key{incName(r.Worker, r.Inc), r.ID}
		switch {
		case r.Type == recInvoke:
			invokes[k] = r
			order = append(order, k)
			if _, ok := clients[k.w]; !ok {
				clients[k.w] = len(clients)
			}
		case r.Type == recCall && r.ID != 0:
			done[k] = r
		}
	}
	var v valueResult
	var ops []porcupine.Operation
	seen := sight(done)
	for _, k := range order {
		inv := invokes[k]
		in := regInput{op: inv.Op, arg: inv.Arg, prev: inv.Prev}
		var out regOutput
		ret := int64(math.MaxInt64)
		c, returned := done[k]
		switch {
		case inv.Op == "get" && (!returned || c.Err != ""):
			continue
		case !returned || c.Unknown:
			v.unknown++
			if out, ret = seen.settle(inv); !out.unknown {
				v.settled++
			}
		case c.Err != "":
			out.failed = true
			ret = c.Return
			v.failed++
		default:
			out = regOutput{ok: c.OK, value: c.Value, version: c.Version}
			ret = c.Return
		}
		ops = append(ops, porcupine.Operation{ClientId: clients[k.w], Input: in, Call: inv.Start, Output: out, Return: ret})
	}
	v.ops = len(ops)
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(countModel, ops, cfg.checkTimeout)
	v.result, v.took = res, time.Since(start)
	if res == porcupine.Illegal {
		path := filepath.Join(cfg.dir, "linearizability.html")
		if err := porcupine.VisualizePath(countModel, info, path); err == nil {
			v.visual = path
		}
		v.witnesses = witnesses(invokes, done, seen)
	}
	return v
}

// sightings are what the reads and compare-and-sets that succeeded saw.
type sightings struct {
	versions map[int32][]int32 // value → the versions it was seen at
	values   map[int32]int32   // version → the value seen at it
	// by version, with the earliest return of any operation that saw that
	// version or a later one
	from []sighting
}

type sighting struct {
	version int32
	ret     int64
}

func sight[K comparable](done map[K]record) *sightings {
	s := &sightings{versions: map[int32][]int32{}, values: map[int32]int32{}}
	saw := func(x, ver int32, ret int64) {
		if !slices.Contains(s.versions[x], ver) {
			s.versions[x] = append(s.versions[x], ver)
		}
		s.values[ver] = x
		s.from = append(s.from, sighting{ver, ret})
	}
	for _, c := range done {
		switch {
		case c.Err != "":
		case c.Op == "get":
			saw(c.Value, c.Version, c.Return)
		case c.Op == "cas" && c.OK:
			saw(c.Arg, c.Prev+1, c.Return)
		}
	}
	slices.SortFunc(s.from, func(a, b sighting) int { return cmp.Compare(a.version, b.version) })
	for i := len(s.from) - 2; i >= 0; i-- {
		s.from[i].ret = min(s.from[i].ret, s.from[i+1].ret)
	}
	return s
}

// firstFrom returns when the first operation that saw version v or a later
// one returned (math.MaxInt64 if none did).
func (s *sightings) firstFrom(v int32) int64 {
	i, _ := slices.BinarySearchFunc(s.from, v, func(a sighting, v int32) int { return cmp.Compare(a.version, v) })
	if i == len(s.from) {
		return math.MaxInt64
	}
	return s.from[i].ret
}

// settle decides what the sightings prove of a write whose outcome is
// unknown (inv), and returns its output and return for porcupine. Every
// value written is unique, and a write creates the version after the one it
// overwrites, so:
//
//   - if its value was seen at one version v (and, for a compare-and-set,
//     v is the version after the one it expected), it was applied, creating
//     v, before the first operation that saw v or a later version returned;
//   - a compare-and-set expecting version p can create only p+1: if p+1 was
//     seen holding another value, it was not applied.
//
// Anything else stays unknown, with an open return. Without this, each
// unknown write may be placed anywhere after its call, and the search for
// a linearization grows with every one pending.
func (s *sightings) settle(inv record) (regOutput, int64) {
	vs := s.versions[inv.Arg]
	switch {
	case len(vs) == 1 && (inv.Op == "set" || vs[0] == inv.Prev+1):
		return regOutput{ok: true}, max(inv.Start, s.firstFrom(vs[0]))
	case inv.Op == "cas" && len(vs) == 0:
		if x, ok := s.values[inv.Prev+1]; ok && x != inv.Arg {
			return regOutput{failed: true}, inv.Start
		}
	}
	return regOutput{unknown: true}, math.MaxInt64
}

// witnesses points at operations that no linearization can order, for a
// history porcupine found illegal (it does not say where): a read that saw
// an older version than a write that had returned before the read began; a
// read of a value whose write reported that it was not applied; a value
// found at two versions (a write applied twice). Each comes with the
// records of the operations.
func witnesses[K comparable](invokes, done map[K]record, seen *sightings) []string {
	type write struct{ inv, ret record }
	writes := map[int32]write{} // by value written
	for k, inv := range invokes {
		if inv.Op != "get" {
			writes[inv.Arg] = write{inv, done[k]}
		}
	}
	var reads []record
	for _, c := range done {
		if c.Err == "" && c.Op == "get" {
			reads = append(reads, c)
		}
	}
	// Writes whose version is known and which returned, by return time.
	type landed struct {
		ret     int64
		version int32
		rec     record
	}
	var known []landed
	for x, vs := range seen.versions {
		w, ok := writes[x]
		if ok && w.ret.Return != 0 && w.ret.Err == "" {
			known = append(known, landed{w.ret.Return, slices.Max(vs), w.ret})
		}
	}
	slices.SortFunc(known, func(a, b landed) int { return cmp.Compare(a.ret, b.ret) })
	js := func(r record) string {
		b, _ := json.Marshal(r)
		return string(b)
	}
	var out []string
	slices.SortFunc(reads, func(a, b record) int { return cmp.Compare(a.Start, b.Start) })
	top, i := landed{version: -1}, 0
	for _, r := range reads {
		for ; i < len(known) && known[i].ret < r.Start; i++ {
			if known[i].version > top.version {
				top = known[i]
			}
		}
		if r.Version < top.version {
			out = append(out, fmt.Sprintf("stale read: %s\n      began %v after this write (version %d) returned: %s",
				js(r), time.Duration(r.Start-top.ret), top.version, js(top.rec)))
		}
		if w, ok := writes[r.Value]; ok && r.Value != 0 && w.ret.Return != 0 && !w.ret.Unknown && (w.ret.Err != "" || w.ret.Op == "cas" && !w.ret.OK) {
			out = append(out, fmt.Sprintf("read of a write reported not applied: %s\n      %s", js(r), js(w.ret)))
		}
	}
	for x, vs := range seen.versions {
		if len(vs) > 1 && x != 0 {
			out = append(out, fmt.Sprintf("value %d found at versions %v: written more than once: %s", x, vs, js(writes[x].ret)))
		}
	}
	slices.Sort(out)
	return out
}
