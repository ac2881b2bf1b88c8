// Package dsync gives Go programs the primitives of sync and
// golang.org/x/sync across processes and machines, on Apache ZooKeeper. It
// speaks the node layout of Apache Curator's lock recipes, so Go processes
// and Java processes using Curator can share one lock.
//
//	Curator (Java)                   dsync (Go)
//	InterProcessMutex                Mutex (sync.Locker; LockContext re-enters)
//	InterProcessSemaphoreV2          Weighted (the Semaphore interface)
//	InterProcessSemaphoreMutex       SemaphoreMutex
//	InterProcessReadWriteLock        RWMutex (RLocker is a sync.Locker)
//	InterProcessMultiLock            MultiLock (all or none, deadlock-free)
//	Revoker, makeRevocable           Revoke, Revocable, Revoked
//	SharedCount                      Count (a Value[int32])
//	SharedValue                      Value[T], with a Codec
//	LeaderLatch                      Election (Campaign, Resign, Observe)
//	LeaderSelector                   Election with SelectorLayout
//	(none)                           Once (sync.Once across processes)
//
// Lock, TryLock, Acquire and TryAcquire keep the shapes of sync and x/sync;
// Election keeps the shape of etcd's concurrency.Election.
// Their context-aware counterparts (LockContext, TryLockContext,
// AcquireLeases, TryAcquireLeases) return what tells of a lost hold.
//
// Every primitive works through a zkconn.Session, which carries one
// ZooKeeper session at a time for the whole process and replaces it when it
// is lost; a primitive made at start-up keeps working across expiries.
//
// # Safety: a lock can be lost
//
// A distributed lock is a lease, not a fact. A hold ends when the holder can
// no longer prove it holds: when its connection to ZooKeeper drops (by
// default; see LossPolicy), when its session expires, or when its node is
// deleted by someone else. Another process may then take the lock, while the
// old holder is still running. It is NOT safe to assume the lock is held
// until Unlock. dsync makes the loss visible: LockContext returns a context
// that is canceled the moment the hold ends, with a cause that wraps
// ErrLockLost (see context.Cause; test it with errors.Is). Stop work when it
// is done. The same holds for a
// leader: Campaign's context ends the moment leadership can no longer be
// proved, and a Once's function gets the context of its run's lock.
//
// Even so, a holder can be paused (a long garbage collection, a stopped VM)
// between checking its context and acting. For work where that matters,
// pass the hold's fencing token (Mutex.Token, the lock node's czxid, which
// grows with every hold, across holders and sessions) to the resource the
// lock protects, and have it refuse tokens lower than the highest it has
// seen.
//
// # Cancellation and errors
//
// Blocking calls take a context that bounds the wait only, and return by its
// deadline even while the network is silent. On failure they return
// ctx.Err() (or the error that stopped them) and leave the primitive
// unchanged, with no node left in ZooKeeper (a request still in flight is
// undone in the background). Unlock and Release never wait for the network.
// A write whose reply was lost returns an error wrapping ErrOutcomeUnknown:
// it may or may not have been applied.
//
// Queue order follows the sequence numbers ZooKeeper appends, read as
// unsigned 32-bit numbers so that creation order holds across their wrap
// past 2^31. Curator compares them as strings, which does not: a path shared
// with Curator must not see 2^31 creates under one parent. Bad input (a path ZooKeeper
// would reject, a nil Session) is an error before anything is sent. Misuse
// (Unlock of an unlocked Mutex, a nil Option) panics, as it does in sync.
//
// # Read/write locks shared with Curator
//
// An RWMutex and Curator's InterProcessReadWriteLock on one path exclude each
// other as one lock would. Curator 5.4 grants the write holder's thread a read
// lock on a new node at the end of the line; once it lets the write lock go,
// writers queued meanwhile (dsync's or Curator's) take the lock while that
// read hold goes on. dsync's downgrade puts the read node in the write node's
// place instead, so a Java holder that downgrades is the one place where the
// two can overlap: avoid downgrades in Java on paths shared with writers.
package dsync
