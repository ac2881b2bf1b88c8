package dsync

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"path"
	"sync"
	"time"

	"github.com/dsync-go/dsync/zkconn"
	"github.com/go-zookeeper/zk"
)

// A Codec turns values of T into node data and back. Decode must accept
// whatever Encode produces; it is given the node's data as ZooKeeper stores
// it, which anyone with access to the node may have written, and must return
// an error rather than panic on data it does not understand.
// Encode and Decode may be called from several goroutines at once.
type Codec[T any] interface {
	Encode(T) ([]byte, error)
	Decode([]byte) (T, error)
}

// Int32Codec is the encoding of Curator's SharedCount: a signed 32-bit
// integer in 4 bytes, big-endian (two's complement). Decode of data of any
// other length returns an error that names the length. Its zero value is
// ready to use.
type Int32Codec struct{}

// Encode returns n as 4 big-endian bytes. It never fails.
func (Int32Codec) Encode(n int32) ([]byte, error) {
	return binary.BigEndian.AppendUint32(nil, uint32(n)), nil
}

// Decode reads 4 big-endian bytes as a signed 32-bit integer.
func (Int32Codec) Decode(b []byte) (int32, error) {
	if len(b) != 4 {
		return 0, fmt.Errorf("dsync: int32 value has %d bytes; want 4", len(b))
	}
	return int32(binary.BigEndian.Uint32(b)), nil
}

// Versioned is a value read from ZooKeeper with the data version of its node
// (the znode's Stat.Version): 0 when the node is created, one more after
// every write. CompareAndSet uses it to write only over what was read.
//
// A node that is deleted and created again starts again at version 0, so a
// version alone cannot tell a value from one written before the deletion.
type Versioned[T any] struct {
	Value   T
	Version int32
}

// A Value is a value of type T kept in one persistent ZooKeeper node and
// shared by every process that uses the same path: Curator's SharedValue,
// typed by a Codec. NewCount gives the int32 Value that reads and writes
// Curator's SharedCount.
//
// The node is created with the seed value, and its missing parents as
// CONTAINER nodes, by the first call that finds it missing (Curator's
// SharedValue.start does the same). It is never deleted by dsync.
//
// A Value holds no state of its own beyond what NewValue was given and the
// one watch its Watch loops share: it is safe for concurrent use, and may be
// copied (copies share the watch). Reads and writes wait while the
// connection to ZooKeeper is down and carry on with the next ZooKeeper
// session if the current one is lost; but a write whose reply is lost is
// never sent again, nor reported as done or not done: its error wraps
// ErrOutcomeUnknown. Its zero value is not usable: make one with NewValue.
type Value[T any] struct {
	sess    *zkconn.Session
	path    string
	codec   Codec[T]
	seed    []byte          // the seed, encoded
	err     error           // bad input found by NewValue
	watched *watchedRead[T] // Watch's, shared by copies
}

// NewValue returns a Value of type T at path, encoded by codec, whose node is
// created holding seed when it is first found missing. Nothing is sent to
// ZooKeeper until the Value is used. Bad input — a nil sess (ErrNilSession),
// a path ZooKeeper would reject (ErrBadPath), a nil codec, a seed codec
// cannot encode — is returned by every method, before anything is sent.
func NewValue[T any](sess *zkconn.Session, path string, codec Codec[T], seed T) *Value[T] {
	v := &Value[T]{sess: sess, path: path, codec: codec, err: validate(sess, path), watched: new(watchedRead[T])}
	if v.err == nil && codec == nil {
		v.err = fmt.Errorf("dsync: value %s: nil codec", path)
	}
	if v.err == nil {
		b, err := codec.Encode(seed)
		if err != nil {
			v.err = fmt.Errorf("dsync: value %s: encode seed: %w", path, err)
		}
		v.seed = b
	}
	return v
}

// Get returns the value and its version, waiting while the connection to
// ZooKeeper is down. If the node does not exist, Get creates it holding the
// seed (and returns the seed at version 0, unless another process created
// the node first: then it returns what that process wrote).
//
// Get is linearizable: it returns every write confirmed to anyone before it
// was called. ZooKeeper answers reads from the server a session is connected
// to, which may lag behind the leader, so Get first has that server catch up
// (ZooKeeper's sync): two round trips.
//
// On failure it returns ctx.Err(), or an error wrapping ErrClosed, or
// ZooKeeper's error (go-zookeeper's sentinel, for errors.Is). If the node's
// data cannot be decoded, it returns the node's version with the zero value
// of T, and an error wrapping ErrDecode. A ctx already done fails before
// anything is sent.
func (v *Value[T]) Get(ctx context.Context) (Versioned[T], error) {
	if v.err != nil {
		return Versioned[T]{}, v.err
	}
	if err := ctx.Err(); err != nil {
		return Versioned[T]{}, err
	}
	for {
		h, err := v.sess.Current(ctx)
		if err != nil {
			return Versioned[T]{}, v.fail(ctx, "get", err)
		}
		err = h.Do(ctx, func(c *zk.Conn) error { return zkconn.CatchUp(c, v.path) })
		if err == nil {
			var got Versioned[T]
			if got, _, _, err = v.read(ctx, h, false); err == nil || !errors.Is(err, zkconn.ErrSessionLost) {
				return got, err
			}
		}
		if !errors.Is(err, zkconn.ErrSessionLost) {
			return Versioned[T]{}, v.fail(ctx, "get", err)
		}
		// a read: try again on the next session
	}
}

// Set writes x whatever the node holds (Curator's setValue), waiting while
// the connection to ZooKeeper is down; if the node does not exist, Set
// creates it holding x. It sends the write once. On success it returns nil:
// x was written, once.
//
// If the reply to the write is lost (the connection drops, the ZooKeeper
// session is lost or ctx is done while the write is on its way), the write
// may or may not have been applied, and Set does not send it again: a second
// write could land after another process's CompareAndSet and undo it. It
// returns an error wrapping ErrOutcomeUnknown and the cause (ctx.Err(), say,
// so that errors.Is(err, context.DeadlineExceeded) holds too); Get tells
// what the node holds now. The same goes for the create of a missing node.
//
// On any other failure nothing was written, and it returns ctx.Err(), or an
// error wrapping ErrClosed, the Codec's error, zkconn.ErrTooLarge (x encodes
// to more than ZooKeeper takes in one request, about 1 MB), or ZooKeeper's.
// A ctx already done fails before anything is sent.
func (v *Value[T]) Set(ctx context.Context, x T) error {
	if v.err != nil {
		return v.err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := v.codec.Encode(x)
	if err != nil {
		return fmt.Errorf("dsync: set %s: encode: %w", v.path, err)
	}
	for {
		h, err := v.sess.Current(ctx)
		if err != nil {
			return v.fail(ctx, "set", err)
		}
		err = h.DoOnce(ctx, func(c *zk.Conn) error {
			_, err := c.Set(v.path, data, -1)
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			err = v.create(ctx, h, data, h.DoOnce)
			if errors.Is(err, zk.ErrNodeExists) {
				continue // created by someone else meanwhile: write over it
			}
		}
		if unsent(err) {
			continue // never sent: send it on the next session
		}
		if err != nil {
			return v.fail(ctx, "set", err)
		}
		return nil
	}
}

// CompareAndSet writes x only if the node's version is still prev.Version
// (Curator's trySetValue), waiting while the connection to ZooKeeper is down.
// It sends the write once and reports what ZooKeeper answered: true if x was
// written, false with a nil error if the node was written (or deleted) since
// prev was read, and x was not written: read again with Get and retry if need
// be. prev usually comes from Get or Watch; a prev whose data could not be
// decoded still carries the version, so bad data can be replaced.
//
// If the reply is lost (the connection drops, the ZooKeeper session is lost
// or ctx is done while the write is on its way), the write may or may not
// have been applied, and CompareAndSet does not guess: it returns false and
// an error wrapping ErrOutcomeUnknown and the cause (ctx.Err(), say, so that
// errors.Is(err, context.DeadlineExceeded) holds too). Reading x at
// prev.Version+1 afterwards does not prove it either way: another process may
// have written the same x over prev. An update that must be recognised
// should carry its own identity in the value.
//
// On any other failure x was not written, and it returns false and ctx.Err(),
// or an error wrapping ErrClosed, the Codec's error, zkconn.ErrTooLarge (see
// Set), or ZooKeeper's. A prev.Version of -1 (ZooKeeper's "any version") is
// refused with an error. A ctx already done fails before anything is sent.
func (v *Value[T]) CompareAndSet(ctx context.Context, prev Versioned[T], x T) (bool, error) {
	if v.err != nil {
		return false, v.err
	}
	if prev.Version == -1 {
		return false, fmt.Errorf("dsync: compare-and-set %s: version -1 matches any version", v.path)
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	data, err := v.codec.Encode(x)
	if err != nil {
		return false, fmt.Errorf("dsync: compare-and-set %s: encode: %w", v.path, err)
	}
	for {
		h, err := v.sess.Current(ctx)
		if err != nil {
			return false, v.fail(ctx, "compare-and-set", err)
		}
		err = h.DoOnce(ctx, func(c *zk.Conn) error {
			_, err := c.Set(v.path, data, prev.Version)
			return err
		})
		switch {
		case err == nil:
			return true, nil
		case unsent(err):
			continue // never sent: send it on the next session
		case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode):
			return false, nil // ZooKeeper's answer to the one write sent
		}
		return false, v.fail(ctx, "compare-and-set", err)
	}
}

// unsent reports whether err is that of a write that was never sent because
// the ZooKeeper session it was meant for was lost first: it can be sent on
// the next one.
func unsent(err error) bool {
	return errors.Is(err, zkconn.ErrSessionLost) && !errors.Is(err, ErrOutcomeUnknown)
}

// Watch returns an iterator over the value: it yields the current value
// first, then the value after every change, until ctx is done or the loop
// stops. Like Get, it creates the node holding the seed if it is missing —
// also when it is deleted while watched.
//
// Watch delivers the latest value, not every write: writes that land between
// two reads coalesce into the last of them, as they do for Curator's
// SharedValue listeners, so versions may skip. It runs in the caller's
// goroutine and starts no goroutine; while the loop body runs, changes are
// noted by the watch and read when the body returns. All the Watch loops of
// a Value share one ZooKeeper watch per session, set again only after it
// fires: loops that end leave no watch behind beyond that one (which goes
// when the node next changes). A loop that starts while that watch is set
// yields first the value read when it was set: the latest this ZooKeeper
// session has been told of.
//
// Watch rides out trouble with the connection: while it is down, it waits;
// if the ZooKeeper session is lost, it reads and watches again on the next
// one (and yields the value only if it changed). A node whose data the Codec
// cannot decode is yielded as its version with an error wrapping ErrDecode,
// and watching goes on. Other errors ZooKeeper returns (no permission, say)
// are yielded too, and the read is retried after a pause that grows to 10s.
//
// Watch ends without an error when ctx is done (a ctx already done yields
// nothing) or the loop breaks. It ends after yielding an error only when the
// Session is closed (wrapping ErrClosed) or the Value was made with bad
// input.
func (v *Value[T]) Watch(ctx context.Context) iter.Seq2[Versioned[T], error] {
	return func(yield func(Versioned[T], error) bool) {
		if v.err != nil {
			yield(Versioned[T]{}, v.err)
			return
		}
		var (
			h     zkconn.Handle
			live  bool          // h is the session to watch on
			pause time.Duration // before retrying after an unexpected error
		)
		last := int64(-1) // mzxid of the data last yielded
		for ctx.Err() == nil {
			if !live {
				var err error
				if h, err = v.sess.Current(ctx); err != nil {
					if ctx.Err() == nil {
						yield(Versioned[T]{}, v.fail(ctx, "watch", err))
					}
					return
				}
				live = true
			}
			got, st, watch, err := v.readWatched(ctx, h, v.watched)
			switch {
			case ctx.Err() != nil:
				return
			case errors.Is(err, zkconn.ErrClosed):
				yield(Versioned[T]{}, err)
				return
			case errors.Is(err, zkconn.ErrSessionLost):
				live = false
				continue
			case watch == nil: // no watch set: an error other than ErrDecode
				if !yield(Versioned[T]{}, err) {
					return
				}
				pause = min(max(2*pause, 100*time.Millisecond), 10*time.Second)
				if !pauseOrDone(ctx, pause) {
					return
				}
				live = false
				continue
			}
			pause = 0
			if st.Mzxid != last {
				last = st.Mzxid
				if !yield(got, err) {
					return
				}
			}
			_, err = h.Wait(ctx, watch)
			if err == nil {
				// Only a watch that fired is dropped from v.watched: one
				// left set when this loop's ctx ended is shared on, or a
				// loop that ends so leaves a watch behind in go-zookeeper.
				v.watched.forget(watch)
			}
			switch {
			case ctx.Err() != nil:
				return
			case errors.Is(err, zkconn.ErrClosed):
				yield(Versioned[T]{}, v.fail(ctx, "watch", err))
				return
			case err != nil:
				live = false // the session is gone or going: start on the next
			}
		}
	}
}

// pauseOrDone waits for d or until ctx is done, and reports whether d passed.
func pauseOrDone(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// read gets the node's data on h's session (setting a getData watch if watch
// is true) and decodes it, creating the node holding the seed if it is
// missing. It does not move to another session: on ErrSessionLost the caller
// starts again with a new Handle. If the data cannot be decoded, it returns
// the version, the Stat, the watch (which is set) and an error wrapping
// ErrDecode; on any other error the Stat and the watch are nil and the error
// is ctx.Err() or one wrapping ErrSessionLost, ErrClosed or ZooKeeper's.
// The semaphore uses it (with the watch) to follow a shared maximum.
func (v *Value[T]) read(ctx context.Context, h zkconn.Handle, watch bool) (Versioned[T], *zk.Stat, <-chan zk.Event, error) {
	for {
		data, st, w, err := getNode(ctx, h, v.path, watch)
		if errors.Is(err, zk.ErrNoNode) {
			// ZooKeeper sets no watch on a missing node.
			err = v.create(ctx, h, v.seed, h.Do)
			if err == nil || errors.Is(err, zk.ErrNodeExists) {
				continue // read what is there now
			}
		}
		if err != nil {
			return Versioned[T]{}, nil, nil, v.fail(ctx, "get", err)
		}
		x, err := v.codec.Decode(data)
		if err != nil {
			return Versioned[T]{Version: st.Version}, st, w,
				fmt.Errorf("%w at %s, version %d: %w", ErrDecode, v.path, st.Version, err)
		}
		return Versioned[T]{Value: x, Version: st.Version}, st, w, nil
	}
}

// readWatched is read with a watch, sharing the last one set: while the
// watch w holds for h's session has not fired, it returns what w holds
// without sending anything; else it reads, setting a new watch, and keeps
// the result in w. Readers take turns, so that one watch is set per change;
// go-zookeeper keeps every watch channel it hands out until its watch fires.
// (A read that ctx abandons may still set one, which goes when the node next
// changes.)
func (v *Value[T]) readWatched(ctx context.Context, h zkconn.Handle, w *watchedRead[T]) (Versioned[T], *zk.Stat, <-chan zk.Event, error) {
	turn := w.turn()
	select {
	case turn <- struct{}{}:
	case <-ctx.Done():
		return Versioned[T]{}, nil, nil, ctx.Err()
	}
	defer func() { <-turn }()
	if r, ok := w.held(h); ok {
		return r.got, r.st, r.watch, r.err
	}
	got, st, watch, err := v.read(ctx, h, true)
	if watch != nil {
		// A read that set no watch leaves w as it is: what w holds may be
		// current in another session (h lost, a newer one's read kept).
		w.mu.Lock()
		w.r = watchedResult[T]{session: h.ID(), got: got, st: st, watch: watch, err: err}
		w.mu.Unlock()
	}
	return got, st, watch, err
}

// A watchedRead is a node as last read with a getData watch, in one
// ZooKeeper session: what readWatched shares while the watch has not fired.
// Its zero value holds nothing.
type watchedRead[T any] struct {
	mu    sync.Mutex
	turns chan struct{} // held by the reader in readWatched; made on first use
	r     watchedResult[T]
}

// A watchedResult is what read returned, in a session.
type watchedResult[T any] struct {
	session int64 // ID of the ZooKeeper session of the watch
	got     Versioned[T]
	st      *zk.Stat
	watch   <-chan zk.Event // nil: nothing held
	err     error           // the read's error (ErrDecode: the watch is set)
}

// turn returns the channel a reader sends on to take its turn.
func (w *watchedRead[T]) turn() chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.turns == nil {
		w.turns = make(chan struct{}, 1)
	}
	return w.turns
}

// held returns what w holds, if its watch is set in h's session and has not
// fired.
func (w *watchedRead[T]) held(h zkconn.Handle) (watchedResult[T], bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.r.watch == nil || w.r.session != h.ID() {
		return watchedResult[T]{}, false
	}
	select {
	case <-w.r.watch: // fired: go-zookeeper closes the channel after its event
		w.r = watchedResult[T]{}
		return watchedResult[T]{}, false
	default:
		return w.r, true
	}
}

// forget drops what w holds if watch, which has fired, is its watch. A reader
// that received the watch's event calls it, so that the next read does not
// take what w holds for current in the moment before go-zookeeper closes the
// channel.
func (w *watchedRead[T]) forget(watch <-chan zk.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.r.watch == watch {
		w.r = watchedResult[T]{}
	}
}

// create makes the node, persistent, holding data, and its missing parents
// as CONTAINER nodes, sending the create with send: h.Do, which sends it
// again after a lost reply (a create of the seed: it never overwrites, and a
// second try that finds the node tells nothing worse than the first), or
// h.DoOnce (a create that is a write of the caller's: after a lost reply the
// error wraps ErrOutcomeUnknown). It returns an error wrapping
// zk.ErrNodeExists if the node exists, also when with h.Do a create of ours
// was applied but its reply lost.
func (v *Value[T]) create(ctx context.Context, h zkconn.Handle, data []byte, send func(context.Context, func(*zk.Conn) error) error) (err error) {
	acl := h.Session().ACL()
	parents := false // CreateParents was called
	defer func() {
		if parents && err != nil && !errors.Is(err, zk.ErrNodeExists) {
			h.MarkUsed(path.Dir(v.path))
		}
	}()
	for {
		err := send(ctx, func(c *zk.Conn) error {
			_, err := c.Create(v.path, data, 0, acl)
			return err
		})
		if !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		parents = true
		if err := h.CreateParents(ctx, path.Dir(v.path)); err != nil {
			return err
		}
	}
}

// fail returns the error of a failed op: ctx.Err() itself if ctx is done
// and the op was not left with an unknown outcome, else err with the op and
// path.
func (v *Value[T]) fail(ctx context.Context, op string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ErrOutcomeUnknown) &&
		(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return ctxErr
	}
	return fmt.Errorf("dsync: %s %s: %w", op, v.path, err)
}
