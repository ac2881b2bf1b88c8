package dsync_test

import (
	"context"
	"fmt"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
)

// zkAddr is where the examples find ZooKeeper: the test server.
func zkAddr() string { return shared.Addr() }

func ExampleMutex() {
	ctx := context.Background()
	sess, err := zkconn.Dial(ctx, []string{zkAddr()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()

	mu := dsync.NewMutex(sess, "/examples/locks/orders")
	mu.Lock() // like sync.Mutex, across every process using this path
	fmt.Println("holding the lock")
	mu.Unlock()
	// Output: holding the lock
}

func ExampleMutex_LockContext() {
	ctx := context.Background()
	sess, err := zkconn.Dial(ctx, []string{zkAddr()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()

	mu := dsync.NewMutex(sess, "/examples/locks/report")
	wait, cancel := context.WithTimeout(ctx, 10*time.Second) // bounds the wait only
	defer cancel()
	held, err := mu.LockContext(wait)
	if err != nil {
		fmt.Println("not locked:", err)
		return
	}
	defer mu.Unlock()

	// Do the work under held: it is canceled if the lock is lost.
	select {
	case <-held.Done():
		fmt.Println("lost the lock:", context.Cause(held))
	default:
		fmt.Println("token > 0:", mu.Token() > 0)
	}
	// Output: token > 0: true
}

func ExampleMultiLock() {
	ctx := context.Background()
	sess, err := zkconn.Dial(ctx, []string{zkAddr()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()

	// A transfer needs both accounts: the MultiLock takes them in path
	// order, whatever order they are given in, so a transfer the other
	// way round cannot deadlock with this one.
	from := dsync.NewMutex(sess, "/examples/accounts/bob")
	to := dsync.NewMutex(sess, "/examples/accounts/alice")
	both := dsync.NewMultiLock(from, to)
	wait, cancel := context.WithTimeout(ctx, 10*time.Second) // bounds the wait only
	defer cancel()
	held, err := both.LockContext(wait)
	if err != nil {
		fmt.Println("not locked:", err) // and neither account is held
		return
	}
	defer both.Unlock()

	// held is canceled if either hold is lost.
	select {
	case <-held.Done():
		fmt.Println("lost a lock:", context.Cause(held))
	default:
		fmt.Println("holding both; tokens > 0:", from.Token() > 0 && to.Token() > 0)
	}
	// Output: holding both; tokens > 0: true
}
