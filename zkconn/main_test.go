package zkconn

import (
	"fmt"
	"os"
	"testing"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"go.uber.org/goleak"
)

// shared is one ZooKeeper server for the tests that need nothing special of
// it; tests that stop, pause or partition a server start their own.
var shared *zktest.Server

func TestMain(m *testing.M) {
	srv, err := zktest.StartServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared = srv
	code := m.Run()
	srv.Close()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
