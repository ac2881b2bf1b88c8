package dsync_test

import (
	"context"
	"fmt"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
)

func ExampleElection() {
	ctx := context.Background()
	sess, err := zkconn.Dial(ctx, []string{zkAddr()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()

	e := dsync.NewElection(sess, "/examples/election/scheduler")
	led, err := e.Campaign(ctx, "replica-1") // blocks until this replica leads
	if err != nil {
		fmt.Println("not leading:", err)
		return
	}
	defer e.Resign(ctx)

	leader, err := e.Leader(ctx) // what every participant, Curator's too, sees
	if err != nil {
		fmt.Println(err)
		return
	}
	// Lead while led lasts: it is canceled if leadership is lost.
	select {
	case <-led.Done():
		fmt.Println("lost leadership:", context.Cause(led))
	default:
		fmt.Printf("leader: %s\n", leader.Data)
	}
	// Output: leader: replica-1
}

func ExampleOnce() {
	ctx := context.Background()
	sess, err := zkconn.Dial(ctx, []string{zkAddr()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()

	// Every replica runs this at start-up; the migration runs once.
	once := dsync.NewOnce(sess, "/examples/once/schema-v42")
	defer once.Reset(ctx) // for the example's next run; operators do this
	for replica := range 3 {
		err := once.Do(ctx, func(held context.Context) error {
			fmt.Println("migrating, by replica", replica)
			return nil // a failure lets the next caller try
		})
		fmt.Println("replica", replica, "ready:", err)
	}
	// Output:
	// migrating, by replica 0
	// replica 0 ready: <nil>
	// replica 1 ready: <nil>
	// replica 2 ready: <nil>
}
