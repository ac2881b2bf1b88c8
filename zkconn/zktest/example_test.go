package zktest_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// StartServer runs a server outside a test, for TestMain or a program; the
// caller closes it.
func ExampleStartServer() {
	srv, err := zktest.StartServer()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	reply, err := srv.Command(context.Background(), "ruok")
	if err != nil {
		log.Fatal(err)
	}
	mode, err := srv.Mode(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(reply, mode)
	// Output: imok standalone
}

// Strike loses the reply to one create: the server creates the node, and
// the client sees its connection close instead of the reply, so it cannot
// tell whether the create was applied. Struck tells the test when the fault
// has happened, with no sleep.
func ExampleProxy_Strike() {
	srv, err := zktest.StartServer()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	p, err := zktest.StartProxy(srv.Addr())
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	// dial connects a quiet client to addr; hang up closes it and waits for
	// go-zookeeper's goroutines, which Close alone does not.
	dial := func(addr string) (conn *zk.Conn, hangUp func()) {
		conn, events, err := zk.Connect([]string{addr}, 4*time.Second, zk.WithLogger(log.New(io.Discard, "", 0)))
		if err != nil {
			log.Fatal(err)
		}
		return conn, func() {
			conn.Close()
			for range events { // closed when they end
			}
		}
	}
	client, hangUp := dial(p.Addr())
	defer hangUp()

	fault := p.Strike(zktest.Match{Op: zktest.OpCreate, Path: "/orders"}, zktest.Lose)
	_, err = client.Create("/orders", nil, 0, zk.WorldACL(zk.PermAll))
	fmt.Println("create:", err)
	<-fault.Struck()

	// A client connected straight to the server finds the node.
	observer, hangUpObserver := dial(srv.Addr())
	defer hangUpObserver()
	created, _, err := observer.Exists("/orders")
	fmt.Println("created:", created, err)
	// Output:
	// create: zk: connection closed
	// created: true <nil>
}
