package zktest_test

import (
	"context"
	"fmt"
	"log"

	"github.com/dsync-go/dsync/zkconn/zktest"
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
