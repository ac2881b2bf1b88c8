package dsync

import (
	"errors"

	"github.com/dsync-go/dsync/zkconn"
)

// ErrLockLost is wrapped by the cause (see context.Cause) of a hold context
// canceled because the hold was lost: its ZooKeeper session was suspended
// (under the default LossPolicy) or lost, or its node was deleted by someone
// else. The cause wraps what happened too (ErrClosed, zkconn.ErrSessionLost,
// …): test it with errors.Is, not ==.
var ErrLockLost = errors.New("dsync: lock lost")

// ErrNodeDeleted is wrapped, with ErrLockLost, by the cause of a hold lost
// because someone else deleted its node (an operator, say): unlike a
// dropped connection, this loss is final at once, and the next in line may
// hold already.
var ErrNodeDeleted = errors.New("dsync: node deleted")

// ErrWouldBlock is returned by the non-waiting acquisitions (TryLockContext
// of Mutex and RWMutex, TryRLockContext, TryAcquireLeases), and wrapped by
// MultiLock.TryLockContext's error, when others are ahead, there is no room,
// or another goroutine of this process is acquiring through the same
// primitive.
var ErrWouldBlock = errors.New("dsync: held by others")

// ErrNilSession is returned by every operation of a primitive made with a
// nil *zkconn.Session.
var ErrNilSession = errors.New("dsync: nil session")

// ErrBadPath is wrapped by the error returned for a path ZooKeeper would
// reject (see zkconn.ValidatePath), or a lock path longer than 4096 bytes
// (a node's, given to Revoke, may be 67 bytes longer; a Once's path, whose
// lock is PATH/lock, 5 bytes shorter). Nothing is sent to ZooKeeper.
var ErrBadPath = zkconn.ErrBadPath

// ErrClosed is wrapped by the error returned when the Session is closed.
var ErrClosed = zkconn.ErrClosed

// ErrWeight is wrapped by the error returned for a semaphore weight out of
// range: n <= 0, more than a fixed maximum, or a maximum <= 0. (More than a
// shared maximum, a Count, waits for the count to grow, as in Curator.)
// Nothing is sent to ZooKeeper.
var ErrWeight = errors.New("dsync: weight out of range")

// ErrDecode is wrapped by the error returned (or yielded by Watch) when a
// Value's node holds data its Codec cannot decode. The error also wraps the
// Codec's own error, and comes with the node's version, so that
// CompareAndSet can replace the bad data.
var ErrDecode = errors.New("dsync: cannot decode node data")

// ErrOutcomeUnknown is wrapped, with its cause, by the error of a write whose
// reply was lost: the connection dropped, the ZooKeeper session was lost or
// the caller's ctx ended while the write was on its way. The write may or may
// not have been applied; it is not sent again. It is zkconn.ErrUnknownOutcome.
var ErrOutcomeUnknown = zkconn.ErrUnknownOutcome

// ErrBadMember is wrapped by the error every call of a MultiLock made with
// bad members returns: no locks, a nil one, a sync.Locker that is not one of
// dsync's locks, or two locks on one path. Nothing is sent to ZooKeeper.
var ErrBadMember = errors.New("dsync: bad multilock member")
