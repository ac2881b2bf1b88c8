package zkconn

import (
	"encoding/binary"
	"slices"

	"github.com/go-zookeeper/zk"
)

// The watches carried across connections.
//
// ZooKeeper holds a session's watches on the connection that set them. On
// each new connection go-zookeeper sends every watch it holds again, in
// setWatches requests relative to a zxid: the server fires a data watch at
// once if its node was written after that zxid, and a child watch if its
// children changed after it (an exists watch fires if its node is there,
// whatever the zxid). So that zxid must be no later than the point up to
// which every watch carried has had its events: the last zxid go-zookeeper
// read on a connection where the server held them all. go-zookeeper takes
// its last zxid as it sends, which can be later:
//
//   - a reply read on the new connection before go-zookeeper reads its last
//     zxid for setWatches (it starts reading first);
//   - a setWatches lost with its connection after a later reply was read:
//     the next connection's is relative to that reply's zxid, and the write
//     between is never told.
//
// So a wire keeps a floor, in force while any data or child watch
// go-zookeeper holds is stale (not held by the server on the current
// connection), and a setWatches written then is rewritten to be relative
// to no later than it (an earlier zxid only brings events for writes a
// watch had already seen, and each makes its reader read again). A watch
// is held on a connection once a request that set it, or a setWatches that
// carried it, was answered there. At a connect, every watch is stale; the
// floor is the connect's last zxid (go-zookeeper's then) if none was stale
// on the connection before, and stays as it was otherwise. go-zookeeper
// sends its watches in parts, each once the one before it is answered, and
// stops at the first failure: a watch in a part lost, or never sent, keeps
// the floor in force until a later connection's setWatches carries it.
//
// Invariant: while any watch is stale, the floor is no later than the last
// zxid read on a connection where the server held them all.
//
// A request's watch counts only where go-zookeeper held none at that path
// and type: one go-zookeeper held before (one channel per caller, one watch
// at the server) may have missed a write that came before the request,
// which tells only its own caller. That watch stays stale until a
// setWatches carries it.

// A watchKind is a kind of watch of go-zookeeper's table, in the order in
// which setWatches lists them.
type watchKind uint8

const (
	dataWatch  watchKind = iota // set by a getData, or an exists that found the node
	existWatch                  // set by an exists that found no node
	childWatch
)

// A watchKey is one watch of go-zookeeper's table. setWatches carries data
// and child watches relative to a zxid, exists watches not.
type watchKey struct {
	path string
	kind watchKind
}

// carried is what a wire knows of go-zookeeper's data and child watches.
// Under wire.mu.
type carried struct {
	on    map[watchKey]int32 // each watch → the connection on which the server held it last
	cur   int32              // the connection last connected (tap.n)
	stale int                // watches of on not held on cur
	floor int64              // see above; in force while stale > 0
}

// The opcodes of the reads that can set a watch, besides opExists.
const (
	opGetData      = 4
	opGetChildren  = 8
	opGetChildren2 = 12
)

// connected records that connection n sends its connect request, carrying
// go-zookeeper's last zxid: no watch is held on it yet.
func (w *wire) connected(n int32, zxid int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := &w.carried
	if c.stale == 0 {
		// All held on the connection before: their events came up to
		// its last zxid. Else the floor set before stays.
		c.floor = zxid
	}
	c.cur, c.stale = n, len(c.on)
}

// holdsWatches reports whether go-zookeeper holds a watch, by the wire's
// records (which it makes as go-zookeeper reads the reply that sets one,
// before it adds it, and drops as it reads the event that fires one): it
// then sends setWatches on each new connection.
func (w *wire) holdsWatches() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.carried.on) > 0 {
		return true
	}
	for _, x := range w.exists {
		if x.armed {
			return true
		}
	}
	return false
}

// setLocked records that watch k, which go-zookeeper holds, is held on
// connection n.
func (w *wire) setLocked(k watchKey, n int32) {
	c := &w.carried
	old, ok := c.on[k]
	if !ok {
		return
	}
	c.on[k] = n
	switch {
	case old != c.cur && n == c.cur:
		c.stale--
	case old == c.cur && n != c.cur:
		c.stale++
	}
}

// watched records that a request that sets watch k was answered on
// connection n, as go-zookeeper reads the answer (before its recvFunc
// adds the watch).
func (w *wire) watched(k watchKey, n int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := &w.carried
	if _, ok := c.on[k]; ok {
		return // one held before stays as it was: see above
	}
	if c.on == nil {
		c.on = make(map[watchKey]int32)
	}
	c.on[k] = n
	if n != c.cur {
		c.stale++
	}
}

// reset records that a setWatches carrying keys was answered without error
// on connection n, as go-zookeeper reads the answer. The events it fired
// came before it.
func (w *wire) reset(keys []watchKey, n int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range keys {
		w.setLocked(k, n)
	}
}

// share reports whether go-zookeeper holds watch k and the server holds it
// on the current connection, and returns that connection: until its event,
// a read there, written on that connection, sees every change after it
// through that watch, in order with the connection's other events, as a
// watch set with the read would. A data or child watch carried from an
// earlier connection that no setWatches answered on this one has set yet
// does not count: it would tell a write and a deletion made in between as
// the deletion alone (review round 73). An exists watch counts only if a
// request answered on the current connection that no node was there set
// it (see existsWatches.absent); share then marks it plain, so that
// setWatches carries it on until its event, as for the request that set it.
func (w *wire) share(k watchKey) (int32, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	cur := w.carried.cur
	if k.kind == existWatch {
		x := w.exists[k.path]
		if x == nil || x.absent != cur {
			return 0, false
		}
		x.plain = true
		return cur, true
	}
	n, ok := w.carried.on[k]
	return n, ok && n == cur
}

// connection returns the current connection (tap.n): the one whose connect
// request was written last.
func (w *wire) connection() int32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.carried.cur
}

// firedCarriedLocked records an event at path of type typ: go-zookeeper
// forgets the watches it fires.
func (w *wire) firedCarriedLocked(path string, typ zk.EventType) {
	c := &w.carried
	for _, k := range firedBy(path, typ) {
		if n, ok := c.on[k]; ok {
			delete(c.on, k)
			if n != c.cur {
				c.stale--
			}
		}
	}
}

// firedBy returns the watches at path that an event of type typ fires, as
// go-zookeeper fires them: a creation fires exists watches, a write data
// and exists watches, a change of children child watches, and a deletion,
// or the end of the session (zk.EventNotWatching), all three.
func firedBy(path string, typ zk.EventType) []watchKey {
	switch typ {
	case zk.EventNodeCreated:
		return []watchKey{{path, existWatch}}
	case zk.EventNodeDataChanged:
		return []watchKey{{path, dataWatch}, {path, existWatch}}
	case zk.EventNodeChildrenChanged:
		return []watchKey{{path, childWatch}}
	case zk.EventNodeDeleted, zk.EventNotWatching:
		return []watchKey{{path, dataWatch}, {path, existWatch}, {path, childWatch}}
	}
	return nil
}

// watchKeyOf returns the watch a read request sets if it is answered
// without error (for an exists, if the node is there), given its opcode
// and body (a path, then the watch flag), and whether it asks for one.
func watchKeyOf(op int32, body []byte) (watchKey, bool) {
	if op != opGetData && op != opExists && op != opGetChildren && op != opGetChildren2 || len(body) < 4 {
		return watchKey{}, false
	}
	l := int(int32(binary.BigEndian.Uint32(body)))
	if l < 0 || 4+l >= len(body) || body[4+l] == 0 {
		return watchKey{}, false
	}
	k := watchKey{path: string(body[4 : 4+l])}
	if op == opGetChildren || op == opGetChildren2 {
		k.kind = childWatch
	}
	return k, true
}

// setWatches returns setWatches frame b, written on connection n, as it is
// to go out: without the exists watches it is not to carry (keepWanted),
// and relative to no later than the floor. It returns too the data and
// child watches b carries.
func (w *wire) setWatches(b []byte, n int32) ([]byte, []watchKey) {
	out := w.keepWanted(b, n)
	var keys []watchKey
	if ends, ok := swLists(b); ok {
		for i, start := range [3]int{20, ends[0], ends[1]} {
			for off := start + 4; i != 1 && off < ends[i]; {
				l := int(binary.BigEndian.Uint32(b[off:]))
				keys = append(keys, watchKey{path: string(b[off+4 : off+4+l]), kind: watchKind(i)})
				off += 4 + l
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if c := &w.carried; c.stale > 0 && len(out) >= 20 && int64(binary.BigEndian.Uint64(out[12:20])) > c.floor {
		if &out[0] == &b[0] {
			out = slices.Clone(b) // b is go-zookeeper's buffer
		}
		binary.BigEndian.PutUint64(out[12:20], uint64(c.floor))
	}
	return out, keys
}
