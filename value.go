package dsync

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"path"
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
// A Value holds no state of its own beyond what NewValue was given: it is
// safe for concurrent use, and may be copied. Reads and writes wait while the
// connection to ZooKeeper is down and carry on with the next ZooKeeper
// session if the current one is lost. Its zero value is not usable: make one
// with NewValue.
type Value[T any] struct {
	sess  *zkconn.Session
	path  string
	codec Codec[T]
	seed  []byte // the seed, encoded
	err   error  // bad input found by NewValue
}

// NewValue returns a Value of type T at path, encoded by codec, whose node is
// created holding seed when it is first found missing. Nothing is sent to
// ZooKeeper until the Value is used. Bad input — a nil sess (ErrNilSession),
// a path ZooKeeper would reject (ErrBadPath), a nil codec, a seed codec
// cannot encode — is returned by every method, before anything is sent.
func NewValue[T any](sess *zkconn.Session, path string, codec Codec[T], seed T) *Value[T] {
	v := &Value[T]{sess: sess, path: path, codec: codec, err: validate(sess, path)}
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
		got, _, _, err := v.read(ctx, h, false)
		if errors.Is(err, zkconn.ErrSessionLost) {
			continue // a read: try again on the next session
		}
		return got, err
	}
}

// Set writes x whatever the node holds (Curator's setValue), waiting while
// the connection to ZooKeeper is down; if the node does not exist, Set
// creates it holding x. On success it returns nil.
//
// On failure it returns ctx.Err(), or an error wrapping ErrClosed, the
// Codec's error, or ZooKeeper's. A ctx already done fails before anything is
// sent; a ctx done while the write is on its way leaves it unknown whether
// the write was applied.
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
		err = h.Do(ctx, func(c *zk.Conn) error {
			_, err := c.Set(v.path, data, -1)
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			err = v.create(ctx, h, data)
			if errors.Is(err, zk.ErrNodeExists) {
				continue // created by someone else meanwhile: write over it
			}
		}
		if errors.Is(err, zkconn.ErrSessionLost) {
			continue // writing the same data again is harmless
		}
		if err != nil {
			return v.fail(ctx, "set", err)
		}
		return nil
	}
}

// CompareAndSet writes x only if the node's version is still prev.Version
// (Curator's trySetValue), waiting while the connection to ZooKeeper is down.
// It reports true if it wrote x, and false with a nil error if the node was
// written (or deleted) since prev was read: read again with Get and retry if
// need be. prev usually comes from Get or Watch; a prev whose data could not
// be decoded still carries the version, so bad data can be replaced.
//
// On failure it returns false and ctx.Err(), or an error wrapping ErrClosed,
// the Codec's error, or ZooKeeper's. A prev.Version of -1 (ZooKeeper's "any
// version") is refused with an error. A ctx already done fails before
// anything is sent.
//
// When the connection drops while the write is on its way, the write may
// have been applied without a reply. CompareAndSet then sends it again; if
// that attempt finds the version moved on, it reports true only if the node
// now holds exactly x at version prev.Version+1. If yet another write
// followed, it reports false for a write that was applied; an update that
// must not be applied twice should carry its own identity in the value.
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
	attempts := 0
	for {
		h, err := v.sess.Current(ctx)
		if err != nil {
			return false, v.fail(ctx, "compare-and-set", err)
		}
		err = h.Do(ctx, func(c *zk.Conn) error {
			attempts++
			_, err := c.Set(v.path, data, prev.Version)
			return err
		})
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, zkconn.ErrSessionLost):
			continue
		case errors.Is(err, zk.ErrNoNode):
			return false, nil
		case errors.Is(err, zk.ErrBadVersion) && attempts > 1:
			return v.applied(ctx, h, prev.Version+1, data)
		case errors.Is(err, zk.ErrBadVersion):
			return false, nil
		}
		return false, v.fail(ctx, "compare-and-set", err)
	}
}

// applied reports whether the node holds data at version: whether a
// versioned write whose reply was lost took effect.
func (v *Value[T]) applied(ctx context.Context, h zkconn.Handle, version int32, data []byte) (bool, error) {
	var got []byte
	var st *zk.Stat
	err := h.Do(ctx, func(c *zk.Conn) (err error) {
		got, st, err = c.Get(v.path)
		return err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return false, nil
	case err != nil:
		return false, v.fail(ctx, "compare-and-set", err)
	}
	return st.Version == version && bytes.Equal(got, data), nil
}

// Watch returns an iterator over the value: it yields the current value
// first, then the value after every change, until ctx is done or the loop
// stops. Like Get, it creates the node holding the seed if it is missing —
// also when it is deleted while watched.
//
// Watch delivers the latest value, not every write: writes that land between
// two reads coalesce into the last of them, as they do for Curator's
// SharedValue listeners, so versions may skip. It runs in the caller's
// goroutine, one ZooKeeper watch at a time, and starts no goroutine; while
// the loop body runs, changes are noted by the watch and read when the body
// returns.
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
			got, st, watch, err := v.read(ctx, h, true)
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
		var (
			data []byte
			st   *zk.Stat
			w    <-chan zk.Event
		)
		err := h.Do(ctx, func(c *zk.Conn) (err error) {
			if watch {
				data, st, w, err = c.GetW(v.path)
			} else {
				data, st, err = c.Get(v.path)
			}
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			// ZooKeeper sets no watch on a missing node.
			err = v.create(ctx, h, v.seed)
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

// create makes the node, persistent, holding data, and its missing parents
// as CONTAINER nodes. It returns an error wrapping zk.ErrNodeExists if the
// node exists (also when a create of ours was applied but its reply lost).
func (v *Value[T]) create(ctx context.Context, h zkconn.Handle, data []byte) error {
	acl := h.Session().ACL()
	for {
		err := h.Do(ctx, func(c *zk.Conn) error {
			_, err := c.Create(v.path, data, 0, acl)
			return err
		})
		if !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		if err := h.CreateParents(ctx, path.Dir(v.path)); err != nil {
			return err
		}
	}
}

// fail returns the error of a failed op: ctx.Err() itself if ctx is done,
// else err with the op and path.
func (v *Value[T]) fail(ctx context.Context, op string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return ctxErr
	}
	return fmt.Errorf("dsync: %s %s: %w", op, v.path, err)
}
