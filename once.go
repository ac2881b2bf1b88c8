package dsync

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dsync-go/dsync/zkconn"
	"github.com/go-zookeeper/zk"
)

// A Once runs a function once across every process that uses the same
// ZooKeeper path, as sync.Once does across goroutines: a schema migration
// that every replica's start-up asks for, say. Runs are serialized by a
// Mutex at PATH/lock (Curator's InterProcessMutex layout); the first run
// that succeeds is recorded in a persistent node, PATH/done, whose data says
// who ran it and when ("host=… pid=… at=<RFC 3339 time>", or the WithData
// bytes and the time).
//
// Before f runs, a run advances the data version of PATH itself (it writes
// PATH's data back as it is, so a run needs write permission on PATH, and
// fails before f without it). Reset's delete checks that version, and
// advances it too, so that a delete cannot remove a record written after
// it read the one it aims at (see Reset). So PATH is no place for a Value or
// Count: its CompareAndSet would fail after each run and Reset, though the
// data had not changed.
//
// A run can lose its lock as a Mutex hold can; its function learns it from
// its context. A success is recorded only while the run's lock node still
// exists, which proves that no other run has started: a run whose node is
// gone (its session lost, or the node deleted) before its success could be
// recorded is not recorded (Do returns an error wrapping ErrLockLost), and
// another caller runs the function again. If the record's request was sent
// and the lock counted as lost before its reply came, the error wraps
// ErrOutcomeUnknown too: the record may still be written (while the server
// keeps the run's session, its node stays), and then no caller runs the
// function again. Make the function safe to run again after an
// interrupted run, as a migration must be anyway.
//
// A Once must be made with NewOnce and must not be copied after first use.
type Once struct {
	m    *Mutex
	path string
	done string // full path of the record, path/done
	who  []byte
	// big is the error of a record who makes too large (see NewOnce).
	big error
	// resetting, if set (by tests), is called by Reset between its read
	// and its delete.
	resetting func()
}

// NewOnce returns a Once at path. Nothing is sent to ZooKeeper until it is
// used; a nil sess or a bad path (one longer than 4091 bytes too: its lock
// at path/lock is a lock path) is reported by every call. WithData sets
// who the record names (Do refuses data too large for the record's request,
// about 1 MB, with an error wrapping zkconn.ErrTooLarge, before anything is
// sent), and WithLossPolicy when a run's lock counts as lost; other options
// do not apply.
func NewOnce(sess *zkconn.Session, path string, opts ...Option) *Once {
	o := newOptions(opts)
	m := NewMutex(sess, path+"/lock", WithLossPolicy(o.policy))
	m.err = validateUpTo(sess, path, maxPath-len("/lock")) // the error names the path given
	once := &Once{m: m, path: path, done: path + "/done", who: o.data}
	if m.err == nil {
		// A record too large to write would leave f to run at every Do.
		// No lock node's name is longer than this one: ZooKeeper writes
		// its sequence number with 10 digits, and a minus sign past 2^31.
		node := m.q.path + "/" + zkconn.ProtectedName(lockMarker+"-2147483648")
		if err := zkconn.CheckMulti(once.recordOps(node)...); err != nil {
			once.big = fmt.Errorf("dsync: %s: the record of a run (WithData): %w", once.done, err)
		}
	}
	return once
}

// Do calls f unless a run of it already succeeded at o's path, in this
// process or another. Runs are one at a time across every process: Do
// waits for its turn (or for a run under way to succeed) and then returns
// nil if a run has succeeded meanwhile, or runs f itself.
//
// f's context is the hold context of the run's lock (see Mutex.LockContext):
// it carries ctx's values and is canceled if the lock is lost mid-run. If f
// returns nil, its success is recorded in the same request that proves the
// lock still held, and Do returns nil. If f returns an error, nothing is
// recorded, Do returns that error, and the next caller runs f.
//
// As with sync.Once, a call of Do on the same Once from f waits for f (its
// turn comes after f's run), so f must not wait for it: it would wait until
// its ctx is done.
//
// ctx bounds the wait for a turn, not f, nor the record of f's success,
// which is written whatever ctx says by then (its send is bounded by the
// session timeout, and, if its reply is lost, the read that decides it by
// another: if the connection stays down longer, the lock counts as lost,
// the outcome unknown). On failure
// before f runs Do returns ctx.Err() or the error that stopped it; one
// wrapping ErrLockLost if the run's lock was taken and then lost (its
// session's loss included) before f could run. A ctx already done fails
// before anything is sent.
func (o *Once) Do(ctx context.Context, f func(context.Context) error) error {
	if err := cmp.Or(o.m.err, o.big); err != nil {
		return err
	}
	if done, err := o.Done(ctx); err != nil || done {
		return err
	}
	held, err := o.m.lock(ctx, true, true) // never re-entered: see above
	if err != nil {
		return err
	}
	defer o.m.unlock(held)
	// The lock may have come by a notification (the last run's lock node
	// deleted), which does not count towards what a reconnect asks the next
	// server to have seen: that server may lag behind the last run's
	// record. Catch up first, or f could run again after a success.
	if err := o.catchUp(ctx); err != nil {
		return lostOr(ctx, held, err)
	}
	done, st, err := o.state(ctx)
	if err != nil {
		return lostOr(ctx, held, err)
	}
	if done {
		return nil
	}
	version, err := o.advance(ctx, held.Value(holdKey{o.m}).(*hold), st)
	if err != nil {
		return lostOr(ctx, held, err)
	}
	if err := held.Err(); err != nil {
		return context.Cause(held)
	}
	if err := f(held); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.m.q.sess.SessionTimeout())
	defer cancel()
	return o.record(rctx, held, version)
}

// advance moves the data version of o's path on, under the run's lock
// before f runs, by writing its data back as it is, conditionally (an
// operator's write meanwhile is read again, not undone), and returns the
// version it wrote; st is the path's stat, read under the lock, hd the
// run's hold. The write is one transaction with a check that the run's
// lock node still exists, sent on the hold's session: a run whose lock is
// gone never moves the version under the next run's lock (record's
// argument), the write sent again after a lost reply included. With
// Reset's delete, which advances it too, this fences Reset's delete (see
// Reset).
func (o *Once) advance(ctx context.Context, hd *hold, st *zk.Stat) (int32, error) {
	var data []byte
	version := st.Version
	for read := st.DataLength > 0; ; read = true {
		if read {
			err := o.do(ctx, func(c *zk.Conn) (err error) {
				var pst *zk.Stat
				data, pst, err = c.Get(o.path)
				if err == nil {
					version = pst.Version
				}
				return err
			})
			if err != nil {
				return 0, err
			}
		}
		var wrote []zk.MultiResponse
		err := hd.h.Do(ctx, func(c *zk.Conn) (err error) {
			wrote, err = c.Multi(&zk.CheckVersionRequest{Path: hd.node, Version: -1},
				&zk.SetDataRequest{Path: o.path, Data: data, Version: version})
			return err
		})
		// A failed transaction's error is its failing op's: NoNode is the
		// check's (PATH cannot go while the lock node is in it). wrote is
		// read only after a reply: a call that ended early (ctx, the
		// session's loss) leaves its request to write it later.
		switch {
		case err == nil:
			return wrote[1].Stat.Version, nil
		case errors.Is(err, zk.ErrNoNode):
			return 0, fmt.Errorf("%w: node %s gone before the run started: %w", ErrLockLost, hd.node, err)
		case !errors.Is(err, zk.ErrBadVersion):
			return 0, withPath(o.done, err)
		}
	}
}

// record writes the record of a successful run whose lock's hold context is
// held, in one transaction with a check that the lock's node still exists:
// while it does, no other run can have started, so a record is written only
// for a run that was alone.
//
// version is the data version of o's path that the run wrote (advance):
// while the lock node exists, only a Reset's delete of a record changes it
// (an operator who writes the path's data meanwhile defeats this). A write
// whose reply was lost is thus decided, not guessed: the record is there
// (written), or, with the lock node still there, the path's version moved
// (written, then deleted by a Reset) or not (not applied: send it again).
// With the node gone and no record, the run is lost (ErrLockLost). It is
// never sent again blindly, which could bring back a record a Reset
// deleted.
func (o *Once) record(ctx context.Context, held context.Context, version int32) error {
	hd := held.Value(holdKey{o.m}).(*hold)
	ops := o.recordOps(hd.node)
	for {
		err := hd.h.DoOnce(ctx, func(c *zk.Conn) error {
			_, err := c.Multi(ops...)
			return err
		})
		switch {
		case err == nil, errors.Is(err, zk.ErrNodeExists): // NodeExists: an operator's record
			return nil
		case errors.Is(err, zkconn.ErrUnknownOutcome): // decided below
		case errors.Is(err, zk.ErrNoNode), errors.Is(err, zkconn.ErrSessionLost):
			return fmt.Errorf("%w: node %s gone before the run was recorded: %w", ErrLockLost, hd.node, err)
		default:
			return fmt.Errorf("dsync: %s: recording the run: %w", o.done, err)
		}
		written, derr := o.decide(ctx, hd, version)
		switch {
		case errors.Is(derr, errNodeGone), errors.Is(derr, zkconn.ErrSessionLost), errors.Is(derr, context.DeadlineExceeded):
			// Gone, or not known for a whole session timeout: the lock
			// counts as lost.
			return fmt.Errorf("%w: the run's record is not known to be written (%w): %w", ErrLockLost, derr, err)
		case derr != nil:
			return fmt.Errorf("dsync: %s: recording the run: %w (deciding it: %w)", o.done, err, derr)
		case written:
			return nil
		case ctx.Err() != nil: // not applied, and the record's time is spent: not sent again
			return fmt.Errorf("%w: the run's record was not written within the session timeout: %w", ErrLockLost, err)
		}
	}
}

// recordOps returns the transaction that records a run now, under the lock
// node node (see record).
func (o *Once) recordOps(node string) []any {
	data := append([]byte(nil), o.who...)
	if len(data) > 0 {
		data = append(data, ' ')
	}
	data = fmt.Appendf(data, "at=%s", time.Now().UTC().Format(time.RFC3339))
	return []any{
		&zk.CheckVersionRequest{Path: node, Version: -1},
		&zk.CreateRequest{Path: o.done, Data: data, Acl: o.m.q.sess.ACL()},
	}
}

// decide reports whether the record whose reply was lost was written (see
// record), under a bound of its own (the session timeout): the send may have
// spent ctx's. The server it asks syncs with the leader first, so that a
// write applied elsewhere is seen. It returns errNodeGone if the run's lock
// node is gone and the record is not there.
func (o *Once) decide(ctx context.Context, hd *hold, version int32) (bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.m.q.sess.SessionTimeout())
	defer cancel()
	if err := o.catchUp(ctx); err != nil {
		return false, err
	}
	done, st, err := o.state(ctx)
	if err != nil || done {
		return done, err
	}
	// The version argument holds only while the lock node exists: one
	// there now was there at the listing too (a node's name never comes
	// back), and PATH/lock could not go meanwhile.
	if _, _, err := readNode(ctx, hd.h, hd.node); err != nil {
		return false, err
	}
	return st.Version != version, nil // moved: written, then deleted by a Reset
}

// catchUp has the server o's session talks to catch up with the leader
// (see zkconn.CatchUp).
func (o *Once) catchUp(ctx context.Context) error {
	return o.do(ctx, func(c *zk.Conn) error { return zkconn.CatchUp(c, o.path) })
}

// state reports whether the record exists, with the stat of o's path (see
// record; a zero one if the path does not exist): one listing.
func (o *Once) state(ctx context.Context) (bool, *zk.Stat, error) {
	var (
		kids []string
		st   *zk.Stat
	)
	// The request's own variables, read only after its reply: a call that
	// ended early (ctx, the session's loss) leaves its request to write
	// them later.
	err := o.do(ctx, func(c *zk.Conn) (err error) {
		kids, st, err = c.Children(o.path)
		return err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return false, &zk.Stat{}, nil
	case err != nil:
		return false, nil, err
	}
	return slices.Contains(kids, "done"), st, nil
}

// Done reports whether a run has succeeded at o's path: whether its record
// exists. Like Record, it reads from the server the session is connected
// to, which may lag behind the ensemble's leader: a run that has just
// succeeded through another server may not show yet. Do decides under the
// lock, so it never runs f again after a run has succeeded.
func (o *Once) Done(ctx context.Context) (bool, error) {
	_, done, err := o.Record(ctx)
	return done, err
}

// A OnceRecord says which run of a Once's function succeeded.
type OnceRecord struct {
	Data    []byte    // who and when: "host=… pid=… at=<RFC 3339 time>", or the WithData bytes and the time
	Created time.Time // when the record was written, by the server's clock
	Path    string    // the record's full path, PATH/done
}

// Record returns the record of the run that succeeded at o's path, and
// whether there is one. It waits while the connection to ZooKeeper is down,
// and reads again on the next session if the session is lost meanwhile,
// until ctx ends.
func (o *Once) Record(ctx context.Context) (OnceRecord, bool, error) {
	var (
		data []byte
		st   *zk.Stat
	)
	err := o.read(ctx, func(c *zk.Conn) (err error) {
		data, st, err = c.Get(o.done)
		return err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return OnceRecord{}, false, nil
	case err != nil:
		return OnceRecord{}, false, err
	}
	return OnceRecord{Data: data, Created: time.UnixMilli(st.Ctime), Path: o.done}, true, nil
}

// Reset deletes the record of a successful run, if any, so that the next Do
// runs its function again: for operators. A run under way is not stopped,
// and records its success as usual.
//
// Reset waits while the connection to ZooKeeper is down, and goes on on the
// next session if the session is lost meanwhile, until ctx ends.
//
// Reset deletes only the record it read, never one written after it. Its
// delete is one transaction with a write of PATH's data, as it is, at the
// data version Reset read: the transaction fails if that version moved,
// and moves it. A run moves it too, before f. So a record written after
// Reset's read, which came after the record read was deleted (by a Reset,
// or by hand and then by a run), finds the version moved. Only a record
// made by hand after one deleted by hand is not told from it. This holds
// for a delete that the network delivers late too, after its session was
// given up, and after a lost reply: Reset reads the record again (after a
// sync) and sends its delete again only if the record it aimed at is still
// there. One case remains: PATH removed and made again between Reset's
// read and its delete (by hand, or by ZooKeeper, which removes an empty
// PATH at a check once a minute by default) counts its versions from 0
// again, so a delete that comes after that, until PATH's version came back
// to the one read, passes its check: a delete held in the network, or a
// Reset that is slow between the two. Reset, like a run, needs write
// permission on PATH. If ctx ends with the delete's outcome unknown, the
// error wraps ErrOutcomeUnknown and ctx.Err().
func (o *Once) Reset(ctx context.Context) error {
	var aimed int64  // czxid of the record a delete was sent for
	unknown := false // that delete may have been applied
	for {
		st, fence, data, err := o.resetRead(ctx)
		switch {
		case err != nil && unknown:
			return fmt.Errorf("%w: %w", ErrOutcomeUnknown, withPath(o.done, err))
		case err != nil:
			return err
		case st == nil, aimed != 0 && st.Czxid != aimed:
			return nil // the record aimed at is gone (by our delete or another's)
		}
		aimed, unknown = st.Czxid, false // still there: not applied
		if o.resetting != nil {
			o.resetting()
		}
		h, err := o.m.q.sess.Current(ctx)
		if err == nil {
			err = h.DoOnce(ctx, func(c *zk.Conn) error {
				if _, err := c.Multi(o.resetOps(fence, data)...); !errors.Is(err, zk.ErrNoNode) {
					return err
				}
				return nil
			})
		}
		switch {
		case err == nil:
			return nil
		case unsent(err), errors.Is(err, zk.ErrBadVersion):
			continue // decided by the next read
		case errors.Is(err, ErrOutcomeUnknown) && ctx.Err() == nil:
			unknown = true
			continue // decided by the next read
		}
		return withPath(o.done, err)
	}
}

// resetRead returns, after a sync, the record's stat (nil if there is none)
// and PATH's data and data version, read before it. A delete fenced by that
// version (resetOps) deletes that record, or nothing (see Reset).
func (o *Once) resetRead(ctx context.Context) (*zk.Stat, int32, []byte, error) {
	var (
		st    *zk.Stat
		fence int32
		data  []byte
	)
	// Read only after the reply (see state).
	err := o.read(ctx, func(c *zk.Conn) error {
		st = nil
		if err := zkconn.CatchUp(c, o.path); err != nil {
			return err
		}
		var (
			pst *zk.Stat
			err error
		)
		data, pst, err = c.Get(o.path)
		if errors.Is(err, zk.ErrNoNode) {
			return nil // no record either
		}
		if err != nil {
			return err
		}
		fence = pst.Version
		there, rst, err := c.Exists(o.done)
		if there {
			st = rst
		}
		return err
	})
	if err != nil {
		return nil, 0, nil, err
	}
	return st, fence, data, nil
}

// resetOps returns Reset's transaction: delete the record if PATH's data
// version is still fence, and move that version on, writing back PATH's
// data.
func (o *Once) resetOps(fence int32, data []byte) []any {
	return []any{
		&zk.SetDataRequest{Path: o.path, Data: data, Version: fence},
		&zk.DeleteRequest{Path: o.done, Version: -1},
	}
}

// do runs op on the current session (see zkconn.Handle.Do), for a request
// that is safe to repeat; errors other than ctx's name the path.
func (o *Once) do(ctx context.Context, op func(*zk.Conn) error) error {
	if o.m.err != nil {
		return o.m.err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	h, err := o.m.q.sess.Current(ctx)
	if err == nil {
		err = h.Do(ctx, op)
	}
	if err != nil {
		return withPath(o.done, err)
	}
	return nil
}

// read is do for a read made outside the run's lock: if the session is
// lost meanwhile, it reads again on the next one, until ctx ends.
func (o *Once) read(ctx context.Context, op func(*zk.Conn) error) error {
	for {
		err := o.do(ctx, op)
		if !errors.Is(err, zkconn.ErrSessionLost) || ctx.Err() != nil {
			return err
		}
	}
}

// lostOr returns err, a failure of a request made under the run's lock
// (hold context held) before f could run, or the lock's loss if that is
// what it was: held's cause, or err wrapped in ErrLockLost if err is the
// session's loss (held may not be canceled yet). ctx's end stays err.
func lostOr(ctx, held context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return err
	case held.Err() != nil:
		return context.Cause(held)
	case errors.Is(err, zkconn.ErrSessionLost):
		return fmt.Errorf("%w: %w", ErrLockLost, err)
	}
	return err
}
