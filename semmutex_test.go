package dsync_test

import (
	"context"
	"errors"
	"regexp"
	"runtime"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestSemaphoreMutexUnlockAfterLoss pins one goroutine's Unlock releasing
// another's lease: A's hold is lost (an operator deletes its node) while B
// waits in Lock. B must not get in before A's Unlock, A's Unlock must end
// A's hold only, and B must then hold, exclude other processes and unlock.
func TestSemaphoreMutexUnlockAfterLoss(t *testing.T) {
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	m := dsync.NewSemaphoreMutex(dial(t, []string{shared.Addr()}), path)
	held, err := m.LockContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	aNode := path + "/leases/" + children(t, obs, path+"/leases")[0]

	acquired, release := make(chan struct{}), make(chan struct{})
	unlocked := make(chan any, 1) // what B's Unlock panicked with
	go func() {
		m.Lock()
		close(acquired)
		<-release
		defer func() { unlocked <- recover() }()
		m.Unlock()
	}()
	if err := obs.Delete(aNode, -1); err != nil {
		t.Fatal(err)
	}
	<-held.Done()
	if cause := context.Cause(held); !errors.Is(cause, dsync.ErrLockLost) {
		t.Fatalf("cause = %v; want ErrLockLost", cause)
	}
	// B either got in (the bug) or waits for A in this process.
	for !waitsInSemaphoreMutexGate() {
		select {
		case <-acquired:
			t.Error("B locked while A, whose hold was lost, had not unlocked")
		case <-time.After(time.Millisecond): // poll the goroutine's state
			continue
		}
		break
	}
	m.Unlock() // A's reaction to the loss
	<-acquired
	other := dsync.NewSemaphoreMutex(dial(t, []string{shared.Addr()}), path)
	if other.TryLock() {
		t.Error("another process locked while B holds: A's Unlock released B's lease")
		other.Unlock()
	}
	close(release)
	if p := <-unlocked; p != nil {
		t.Errorf("B's Unlock panicked: %v", p)
	}
	assertEmpty(t, path)
}

// gateWait matches a goroutine waiting in a SemaphoreMutex's own gate.
var gateWait = regexp.MustCompile(`dsync\.gate\.enter\(.*\n.*\n.*dsync\.\(\*SemaphoreMutex\)\.lock\(`)

func waitsInSemaphoreMutexGate() bool {
	buf := make([]byte, 1<<20)
	return gateWait.Match(buf[:runtime.Stack(buf, true)])
}

// TestSemaphoreMutexTokenDoesNotHoldUnlock pins Token holding the mutex's
// lock across its round trip to ZooKeeper, which kept Unlock waiting: the
// reply to Token's read is dropped, and Unlock must return all the same.
func TestSemaphoreMutexTokenDoesNotHoldUnlock(t *testing.T) {
	srv := zktest.Start(t)
	p := zktest.NewProxy(t, srv.Addr())
	path := lockPath(t)
	m := dsync.NewSemaphoreMutex(dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(4*time.Second)), path)
	m.Lock() // not tracked: Token asks ZooKeeper
	obs := observer(t, srv.Addr())
	node := path + "/leases/" + children(t, obs, path+"/leases")[0]
	f := p.Strike(zktest.Match{Op: zktest.OpGetData, Path: node}, zktest.Drop)
	token := make(chan int64, 1)
	go func() { token <- m.Token() }()
	zktest.AwaitStruck(t, f)
	m.Unlock()
	select {
	case tk := <-token:
		t.Errorf("Unlock returned only after Token's request gave up (token %d)", tk)
	default:
		<-token
	}
	awaitChildren(t, obs, path+"/leases", 0)
}
