package zkconn

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// Delete removes the node at path (any version) in h's session: a guaranteed
// delete. It never waits for the network: the request goes out from a
// goroutine the Session owns, which carries on across dropped connections
// until the node is deleted, is found gone, or h's session is lost or the
// Session closed (either removes h's ephemeral nodes anyway).
//
// Each path in fire is a signal sent with the delete: in the same
// transaction, and only if the node at path still exists, a node is created
// there and deleted again. Nothing ever sees it, but exists watches set on
// it fire (zk.EventNodeCreated). If a signal cannot be sent (a node is
// already there, say) the node at path is deleted without signals.
//
// sent closes once the delete has gone out on a connection (or settled):
// whatever the process sends through the Session after that is applied after
// it (see AwaitSent). settled closes when the delete is settled. Reading them
// is optional. Close ends the session (so the server deletes its ephemeral
// nodes) and waits for these goroutines. Errors other than a lost connection
// (no permission, say) are logged, not retried.
func (h Handle) Delete(path string, fire ...string) (sent, settled <-chan struct{}) {
	return h.send(path, fire, nil)
}

// DeleteAfter is Delete, sent once wait has returned: for a node whose
// signals must reach the server after requests still out (those that set
// the watches they are to fire). wait runs on the delete's goroutine.
func (h Handle) DeleteAfter(wait func(), path string, fire ...string) (sent, settled <-chan struct{}) {
	return h.send(path, fire, wait)
}

// AwaitSent is the wait of a release, which Delete does not do: it returns
// once every one of sent (Delete's channels) has closed, that is once those
// deletes have gone out on h's connection (a write to a socket, not a round
// trip), or sooner if the connection is down, h's session lost, or the
// writes do not happen within 10ms in all (go-zookeeper holds
// requests back while it re-sends credentials after a reconnect, say).
// ZooKeeper applies a session's requests in the order they come on its
// connection, so whatever the process sends through the Session after
// AwaitSent returns is applied after the deletes, though nobody waited for
// their replies. (If a delete went out late, or the connection drops before
// its reply and it is sent again on the next one, a request made meanwhile
// may come first: the process then waits behind its own node until the
// delete lands.) A caller releasing many nodes deletes them all, then waits
// once; one that must come after a delete for sure (the next acquisition of
// the same lock) waits for its sent.
func (h Handle) AwaitSent(sent ...<-chan struct{}) {
	link := h.Refresh().link.done()
	t := time.NewTimer(releaseWait)
	defer t.Stop()
	for _, ch := range sent {
		select {
		case <-ch:
		case <-link:
			return
		case <-h.gen.lost.done():
			return
		case <-t.C:
			return
		}
	}
}

// Deleting returns the deletes of children of parent that h's session has
// under way (see Deletes). Such a node is still there only because its
// delete has not landed yet.
func (h Handle) Deleting(parent string) Deletes {
	w := h.gen.c.wire
	w.mu.Lock()
	defer w.mu.Unlock()
	var out Deletes
	for p, ch := range w.pending {
		if parentOf(p) == parent {
			if out == nil {
				out = make(Deletes)
			}
			out[p] = ch
		}
	}
	return out
}

// Deletes are the deletes a session has under way: of nodes (Delete,
// DeleteAfter), and of the nodes that protected creates given up may have made
// (CreateProtected and its kin, when ctx ends with the create's outcome not
// known): each channel closes when its delete is settled.
type Deletes map[string]<-chan struct{}

// Of returns the channel of the delete under way of the node at path, or nil
// if there is none.
func (d Deletes) Of(path string) <-chan struct{} {
	if ch := d[path]; ch != nil {
		return ch
	}
	i := strings.LastIndexByte(path, '/') + 1
	if _, _, ok := ParseProtected(path[i:]); ok {
		return d[path[:i+len(ProtectedPrefix)+uuidLen+1]] // a create given up
	}
	return nil
}

// deleting records ch under key (a node's path, or parent/prefix for the
// nodes named with a protected prefix) as a delete under way (see Deletes),
// and returns a func that forgets it again, unless something else was
// recorded under key since.
func (w *wire) deleting(key string, ch <-chan struct{}) (forget func()) {
	w.mu.Lock()
	w.recordLocked(key, ch)
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		w.forgetLocked(key, ch)
		w.mu.Unlock()
	}
}

// recordLocked and forgetLocked are deleting's two halves; the caller holds
// w.mu.
func (w *wire) recordLocked(key string, ch <-chan struct{}) {
	if w.pending == nil {
		w.pending = make(map[string]<-chan struct{})
	}
	w.pending[key] = ch
}

func (w *wire) forgetLocked(key string, ch <-chan struct{}) {
	if w.pending[key] == ch {
		delete(w.pending, key)
	}
}

// releaseWait bounds AwaitSent's wait for its request to be written: a write
// to a socket takes microseconds, unless go-zookeeper is not sending.
const releaseWait = 10 * time.Millisecond

// send starts a guaranteed delete (see Delete), once wait (if not nil) has
// returned. sent closes once it has gone out on a connection, or has
// settled.
func (h Handle) send(path string, fire []string, wait func()) (sent, settled <-chan struct{}) {
	w := h.gen.c.wire
	sent, written := w.awaitDelete(path)
	ch := make(chan struct{})
	forget := w.deleting(path, ch)
	done := func() {
		written()
		forget()
		close(ch)
	}
	settled = h.guarantee("delete "+path, done, func(c *zk.Conn) error {
		if wait != nil {
			wait()
		}
		if len(fire) > 0 {
			_, err := c.Multi(append(h.signals(fire), &zk.DeleteRequest{Path: path, Version: -1})...)
			if err == nil || transient(err) || ended(err) {
				return err
			}
			// The node is gone, or a signal could not be sent: delete alone.
		}
		if err := c.Delete(path, -1); !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		return nil
	})
	return sent, settled
}

// Signal sends the signals at paths (see Delete) in one transaction that
// first checks that the node at while exists; if it does not, it sends none
// and returns zk.ErrNoNode. Like Do, it honours ctx and sends the
// transaction again after a dropped connection, so a signal may be sent
// twice.
func (h Handle) Signal(ctx context.Context, while string, paths ...string) error {
	ops := append([]any{&zk.CheckVersionRequest{Path: while, Version: -1}}, h.signals(paths)...)
	return h.Do(ctx, func(c *zk.Conn) error {
		_, err := c.Multi(ops...)
		return err
	})
}

// signals returns the requests of a transaction that send a signal at each
// of paths: a node created there and deleted again.
func (h Handle) signals(paths []string) []any {
	ops := make([]any, 0, 2*len(paths)+1)
	for _, p := range paths {
		ops = append(ops, &zk.CreateRequest{Path: p, Acl: h.s.cfg.acl}, &zk.DeleteRequest{Path: p, Version: -1})
	}
	return ops
}

// A giveUp is the cleanup of a create given up while in flight (its
// caller's ctx ended): the create's request goes on, and whatever it made is
// deleted once it returns. From the give-up until that is settled, Deleting
// counts the node as being deleted: parent/name, where name is the node's,
// or a protected create's prefix, which stands for every node named with
// it (see Deletes). done closes under wire.mu, so a give-up recorded after
// the cleanup settled records nothing.
type giveUp struct {
	w            *wire
	parent, name string
	done         chan struct{}
}

// newGiveUp returns the giveUp of a create under ctx: none if ctx can never
// end (callOr then runs the create inline, and nothing is given up).
func (h Handle) newGiveUp(ctx context.Context, parent, name string) giveUp {
	if ctx.Done() == nil {
		return giveUp{}
	}
	return giveUp{w: h.gen.c.wire, parent: parent, name: name, done: make(chan struct{})}
}

// record records g as a delete under way, unless it has settled.
func (g giveUp) record() {
	g.w.mu.Lock()
	defer g.w.mu.Unlock()
	select {
	case <-g.done:
	default:
		g.w.recordLocked(g.parent+"/"+g.name, g.done)
	}
}

// settle marks g settled, once the cleanup has (settled closed), and
// forgets it.
func (g giveUp) settle(settled <-chan struct{}) {
	if settled != nil {
		<-settled
	}
	g.w.mu.Lock()
	defer g.w.mu.Unlock()
	g.w.forgetLocked(g.parent+"/"+g.name, g.done)
	close(g.done)
}

// forgetProtected deletes, with Delete's guarantee, every child of parent
// whose name starts with prefix: the node a create whose reply was lost may
// have made. The returned channel closes when that is settled; until then
// Deleting counts those nodes as being deleted.
func (h Handle) forgetProtected(parent, prefix string) <-chan struct{} {
	ch := make(chan struct{})
	forget := h.gen.c.wire.deleting(parent+"/"+prefix, ch)
	h.guarantee("forget "+parent+"/"+prefix, func() { forget(); close(ch) }, func(c *zk.Conn) error {
		if err := CatchUp(c, parent); err != nil { // see recoverProtected
			return err
		}
		children, _, err := c.Children(parent)
		if err != nil {
			if errors.Is(err, zk.ErrNoNode) {
				return nil
			}
			return err
		}
		for _, child := range children {
			if !strings.HasPrefix(child, prefix) {
				continue
			}
			if err := c.Delete(parent+"/"+child, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return err
			}
		}
		return nil
	})
	return ch
}

// MarkUsed makes the node at path, or if it is not there its nearest
// ancestor that is, one that has had a child, in the background as Delete
// does: a child is created under it and deleted again in one transaction,
// which nobody can list. A container that never had a child, as
// CreateParents leaves one (or a chain of them) when its caller's node was
// then not created (see there), is never removed by the server; once
// marked, it is removed when it is empty, as every container that had a
// child (and then its parent, which had it as a child). MarkUsed deletes
// nothing and changes no data, nor any node's data version, so it does no
// harm wherever it lands, also late, on a node made since; it moves the
// node's cversion, which nobody may take for a sign that a child of its
// own was made, and wakes its children watchers for a listing that finds
// what they knew. A node that cannot have children is no error. It gives up
// when h's session is lost: the node then stays unmarked. settled closes
// when the mark is settled.
func (h Handle) MarkUsed(path string) (settled <-chan struct{}) {
	name := "/" + ProtectedPrefix + newUUID() + "-used"
	return h.guarantee("mark "+path+" used", nil, func(c *zk.Conn) error {
		for p := path; p != "/"; p = parentOf(p) {
			_, err := c.Multi(h.signals([]string{p + name})...)
			if !errors.Is(err, zk.ErrNoNode) {
				if errors.Is(err, zk.ErrNoChildrenForEphemerals) {
					return nil
				}
				return err
			}
		}
		return nil
	})
}

// guarantee runs op until it settles (see Delete) on a goroutine the
// Session owns, then calls after (if not nil).
func (h Handle) guarantee(what string, after func(), op func(*zk.Conn) error) <-chan struct{} {
	done := make(chan struct{})
	s := h.s
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		if after != nil {
			after()
		}
		close(done)
		return done
	}
	s.bg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.bg.Done()
		defer close(done)
		if after != nil {
			defer after()
		}
		h.report(what, h.Do(context.Background(), op))
	}()
	return done
}

// report logs a guaranteed operation that failed for a reason other than the
// end of its session.
func (h Handle) report(what string, err error) {
	if err = h.sessionError(err); err == nil || errors.Is(err, ErrSessionLost) || errors.Is(err, ErrClosed) {
		return
	}
	h.s.logf(slog.LevelError, "zkconn: "+what+" failed", "err", err)
}
