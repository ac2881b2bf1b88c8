package dsync

import (
	"fmt"
	"os"
)

// An Option configures a primitive (NewMutex, and the others). A nil Option
// makes the constructor panic.
type Option interface {
	apply(*options)
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	data      []byte
	policy    LossPolicy
	revocable bool
	selector  bool // see SelectorLayout
}

func newOptions(opts []Option) options {
	o := options{data: defaultData(), policy: LostOnSuspension}
	for _, opt := range opts {
		if opt == nil {
			panic("dsync: nil Option")
		}
		opt.apply(&o)
	}
	return o
}

// defaultData says which process made a node: "host=<host name> pid=<pid>".
func defaultData() []byte {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return []byte(fmt.Sprintf("host=%s pid=%d", host, os.Getpid()))
}

// nodeData returns the data of the nodes of a primitive that honours
// Revocable: none for revocable holds (see Revocable), else o.data.
func (o options) nodeData() []byte {
	if o.revocable {
		return nil
	}
	return o.data
}

// WithData sets the data of the nodes the primitive creates, shown by
// Participants (and by Curator's tools). The default is "host=<host name>
// pid=<pid>"; nil or empty data is allowed. Revocable overrides it, given
// before or after it, on the primitives that honour Revocable. Data that
// makes a create larger than ZooKeeper takes in one request (about 1 MB)
// fails every acquisition with an error wrapping zkconn.ErrTooLarge; an
// RWMutex's downgrade carries it twice, and fails so with half as much.
func WithData(data []byte) Option {
	return optionFunc(func(o *options) { o.data = append([]byte(nil), data...) })
}

// A LossPolicy says when a hold counts as lost.
type LossPolicy int

const (
	// LostOnSuspension (the default) ends a hold as soon as the connection
	// to ZooKeeper drops (or the server stops answering: see
	// zkconn.StateSuspended): from then on nothing proves the node still exists,
	// and another process may hold the lock once the session expires on the
	// server. The hold context is canceled before that can happen.
	LostOnSuspension LossPolicy = iota
	// LostOnExpiry ends a hold only when its session may soon be lost:
	// expired by the server, or disconnected until shortly before the
	// earliest moment the server may expire it (the session timeout the
	// server granted, counted from when the last request it answered was
	// written: it heard it no sooner), by a tenth of that timeout and at
	// most 250ms, a margin for a process that is scheduled late. It rides
	// out short disconnections. Like LostOnSuspension it trusts the server
	// it talks to: a follower cut off from its leader answers for up to
	// syncLimit × tickTime while the others may expire the session.
	LostOnExpiry
)

// WithLossPolicy sets when a hold counts as lost. The default is
// LostOnSuspension; any other value than the two defined panics.
func WithLossPolicy(p LossPolicy) Option {
	if p != LostOnSuspension && p != LostOnExpiry {
		panic(fmt.Sprintf("dsync: unknown LossPolicy %d", int(p)))
	}
	return optionFunc(func(o *options) { o.policy = p })
}

// Revocable makes the holds of a Mutex, an RWMutex (read and write holds)
// or a SemaphoreMutex revocable, as Curator's makeRevocable does for its
// InterProcessMutex and the two locks of its InterProcessReadWriteLock (its
// InterProcessSemaphoreMutex has none: a revocable SemaphoreMutex is
// dsync's own, asked like the others): another process may ask the holder to
// release, by writing "__REVOKE__" into the hold's node (Revoke,
// RevokeHolders, Curator's Revoker), and the holder learns of it through
// Revoked. Revocation is cooperative: nothing is released, and the hold
// context is not canceled, until the holder unlocks. The default is not
// revocable.
//
// A revocable hold's node has empty data, as Curator's do, whatever WithData
// says (before or after Revocable): Revoke asks only nodes with empty data,
// so that it never overwrites what a node that is not revocable carries.
// A revocable hold watches its node even when taken by Lock or TryLock,
// which otherwise do not (see Mutex.Revoked), and reads its node once as it
// starts, one request more per hold: a request written while the node still
// waited in line is seen then.
//
// Weighted, Election and Once ignore it, and keep their nodes' data.
func Revocable() Option {
	return optionFunc(func(o *options) { o.revocable = true })
}
