package zktest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Op is a ZooKeeper request opcode as it appears on the wire, one of the
// values of ZooKeeper's ZooDefs.OpCode.
type Op int32

// The opcodes of ZooKeeper 3.8. Create, Create2, CreateContainer and
// CreateTTL are different opcodes, and a Match names one: go-zookeeper's
// Create sends OpCreate (also inside a multi), its CreateContainer
// OpCreateContainer and its CreateTTL OpCreateTTL.
const (
	OpCreate               Op = 1
	OpDelete               Op = 2
	OpExists               Op = 3
	OpGetData              Op = 4
	OpSetData              Op = 5
	OpGetACL               Op = 6
	OpSetACL               Op = 7
	OpGetChildren          Op = 8
	OpSync                 Op = 9
	OpPing                 Op = 11
	OpGetChildren2         Op = 12
	OpCheck                Op = 13
	OpMulti                Op = 14
	OpCreate2              Op = 15
	OpReconfig             Op = 16
	OpCheckWatches         Op = 17
	OpRemoveWatches        Op = 18
	OpCreateContainer      Op = 19
	OpDeleteContainer      Op = 20
	OpCreateTTL            Op = 21
	OpMultiRead            Op = 22
	OpAuth                 Op = 100
	OpSetWatches           Op = 101
	OpSASL                 Op = 102
	OpGetEphemerals        Op = 103
	OpGetAllChildrenNumber Op = 104
	OpSetWatches2          Op = 105
	OpAddWatch             Op = 106
	OpWhoAmI               Op = 107
	OpCloseSession         Op = -11
)

var opNames = map[Op]string{
	OpCreate: "create", OpDelete: "delete", OpExists: "exists", OpGetData: "getData",
	OpSetData: "setData", OpGetACL: "getACL", OpSetACL: "setACL", OpGetChildren: "getChildren",
	OpSync: "sync", OpPing: "ping", OpGetChildren2: "getChildren2", OpCheck: "check",
	OpMulti: "multi", OpCreate2: "create2", OpReconfig: "reconfig", OpCheckWatches: "checkWatches",
	OpRemoveWatches: "removeWatches", OpCreateContainer: "createContainer",
	OpDeleteContainer: "deleteContainer", OpCreateTTL: "createTTL", OpMultiRead: "multiRead",
	OpAuth: "auth", OpSetWatches: "setWatches", OpSASL: "sasl", OpGetEphemerals: "getEphemerals",
	OpGetAllChildrenNumber: "getAllChildrenNumber", OpSetWatches2: "setWatches2",
	OpAddWatch: "addWatch", OpWhoAmI: "whoAmI", OpCloseSession: "closeSession",
}

// String returns the name ZooDefs.OpCode gives o, or "op(N)".
func (o Op) String() string {
	if s, ok := opNames[o]; ok {
		return s
	}
	return fmt.Sprintf("op(%d)", int32(o))
}

// A Match selects the requests a fault strikes, by opcode and path, as the
// client sends them (with a client-side chroot, the full path).
//
// Op 0 matches every opcode; pings never match, and neither does the connect
// request that opens a connection. Path "" matches every request, with a
// path or without one (setWatches, closeSession); any other Path matches only
// requests on that path, or with Prefix set, on a path that starts with it,
// as a string: "/locks" matches "/locks2" too, "/locks/" only what is below
// "/locks".
//
// A multi (or multiRead) matches if any of its ops matches: Match{Op:
// OpDelete, Path: "/a"} matches a multi that deletes "/a". With Op OpMulti it
// matches every multi, or with a Path, every multi with an op on that path.
// The zero Match matches every request.
type Match struct {
	Op     Op
	Path   string
	Prefix bool
}

// matches reports whether m selects r.
func (m Match) matches(r request) bool {
	if r.op == OpPing {
		return false
	}
	if (m.Op == 0 || m.Op == r.op) && m.Path == "" {
		return true
	}
	for _, t := range r.paths {
		if (m.Op == 0 || m.Op == t.op || m.Op == r.op) && m.matchesPath(t.path) {
			return true
		}
	}
	return false
}

func (m Match) matchesPath(path string) bool {
	if m.Prefix {
		return strings.HasPrefix(path, m.Path)
	}
	return m.Path == "" || path == m.Path
}

// An Action is what a fault does to the request it strikes and to the
// connection that sent it. Each leaves the request's outcome in a different
// state, which is what a test picks it for: Cut and BlackHole leave it not
// applied, Lose and Drop applied with the client not told, Pass answered as
// usual, Hold applied late, when the test says.
type Action int

const (
	// Cut closes the connection, both sides, before the request reaches the
	// server: the request is not applied. What the proxy forwarded before it
	// still arrives first. go-zookeeper fails the request and every other
	// one waiting for a reply on that connection with zk.ErrConnectionClosed
	// at once, and reconnects.
	Cut Action = iota

	// Lose forwards the request and, when its reply comes back, drops the
	// reply and closes the connection, both sides: the request is applied
	// and the client is never told. Replies the server sent before it still
	// arrive first. go-zookeeper fails the request with
	// zk.ErrConnectionClosed, as it does with Cut: the caller cannot tell
	// which of the two happened, which is what the fault is for.
	Lose

	// BlackHole partitions the connection at the request: from it on, the
	// proxy forwards nothing on that connection in either direction (the
	// request itself does not reach the server, so it is not applied) and
	// closes neither side, until Heal (or Proxy.Cut, or Close) closes it.
	// Other connections are not affected. The client notices only by its
	// own timeouts: go-zookeeper, when it has read nothing for two thirds of
	// the session timeout, fails the request and every other one waiting on
	// the connection with zk.ErrConnectionClosed, closes its side and
	// reconnects through the proxy, on a new connection that is forwarded.
	BlackHole

	// Drop forwards the request and swallows its reply, and only that: the
	// request is applied, and the connection stays up, forwarding the other
	// requests and their replies, pings and notifications. The client waits
	// for the reply until it gives up by itself. go-zookeeper has no timeout
	// for a request on a connection that answers pings: the call does not
	// return until the connection closes for another reason (Proxy.Cut, the
	// client's Close), and then fails with zk.ErrConnectionClosed. A
	// zkconn.Session closes the connection itself at the next reply, a
	// ping's at the latest, which comes out of turn.
	Drop

	// Pass forwards the request and its reply untouched: it only marks the
	// request, for a test to know when the server has answered it (Struck),
	// and so that whatever the client sends after that on the connection
	// is served after it.
	Pass

	// Hold keeps the request in the network, to be delivered late: it
	// partitions the connection from the request on, as BlackHole does (the
	// request does not reach the server, nothing comes back, and the client
	// notices only by its own timeouts), but keeps the connection to the
	// server open and pings the server on it, so that the session lives on
	// at the server after the client has given up on it. Fault.Release
	// then delivers the request on that connection: the server applies it
	// for that session, after whatever the client did meanwhile on other
	// connections. Heal and BlackHole leave the connection as it is, Cut
	// and Close end it (the request is then never applied).
	Hold
)

var actionNames = [...]string{Cut: "Cut", Lose: "Lose", BlackHole: "BlackHole", Drop: "Drop", Pass: "Pass", Hold: "Hold"}

// String returns the name of a, as in the source: "Cut", "Lose", ….
func (a Action) String() string {
	if a >= 0 && int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// A Fault is a one-shot fault armed by Proxy.Strike. Its methods may be
// called from several goroutines.
type Fault struct {
	match  Match
	action Action
	p      *Proxy

	struck chan struct{} // closed by strike
	once   sync.Once
	held   *held // with Hold, once struck
}

// Strike arms a one-shot fault: the first request matching m that any
// connection of p sends after Strike returns gets a, and the fault is spent;
// later requests pass. A request that matches several armed faults gets the
// one armed first; the others stay armed. Requests swallowed by a black hole
// (BlackHole, or a fault's) never reach the faults. Strike panics if a is not
// an Action or m.Op is OpPing (pings never match).
//
// With Strike a test breaks the network at the exact request its argument
// depends on, instead of at a moment chosen by a sleep: wait on the returned
// Fault's Struck to know it has happened.
func (p *Proxy) Strike(m Match, a Action) *Fault {
	if a < Cut || a > Hold {
		panic(fmt.Sprintf("zktest: Strike with unknown action %d", int(a)))
	}
	if m.Op == OpPing {
		panic("zktest: Strike on pings, which never match")
	}
	f := &Fault{match: m, action: a, p: p, struck: make(chan struct{})}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = append(p.faults, f)
	return f
}

// Struck returns a channel that is closed once the fault has fully happened:
//
//   - Cut: the connection is closing, both sides (see below).
//   - Lose: the reply has been dropped and the connection is closing, both
//     sides.
//   - BlackHole: the request has been swallowed and the connection is in
//     its black hole.
//   - Drop: the reply has been swallowed.
//   - Pass: the reply has come back from the server, on its way to the
//     client.
//   - Hold: the request is held and the connection is in its partition.
//
// If the connection ends before the reply to a Lose, Drop or Pass comes
// back (a Cut, Heal or Close of the proxy, or either end closing it), the
// reply can no longer arrive and the channel is closed as the connection
// ends. It is never closed for a fault that no request matched. A fault that
// strikes as its connection ends (a Cut, a Lose's dropped reply, or a reply
// that can no longer arrive) strikes after the proxy stops forwarding on the
// connection and before it closes it: a client that has seen that close
// finds the channel closed, and nothing the client sends once it finds the
// channel closed reaches the server. The channel belongs to f; the caller
// only receives from it.
func (f *Fault) Struck() <-chan struct{} { return f.struck }

// Disarm cancels f if no request has matched it yet. Once one has, the fault
// runs its course (see Struck) and Disarm does nothing. Disarm may be called
// more than once.
func (f *Fault) Disarm() {
	f.p.mu.Lock()
	defer f.p.mu.Unlock()
	f.p.faults = slices.DeleteFunc(f.p.faults, func(g *Fault) bool { return g == f })
}

// strike closes the Struck channel; it may be called more than once.
func (f *Fault) strike() {
	f.once.Do(func() { close(f.struck) })
}

// take returns the first armed fault that matches r, spent, or nil.
func (p *Proxy) take(r request) *Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, f := range p.faults {
		if f.match.matches(r) {
			p.faults = slices.Delete(p.faults, i, i+1)
			return f
		}
	}
	return nil
}
