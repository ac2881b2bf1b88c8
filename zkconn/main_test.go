package zkconn

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"go.uber.org/goleak"
)

// shared is one ZooKeeper server for the tests that need nothing special of
// it; tests that stop, pause or partition a server start their own.
var shared *zktest.Server

// parallelTests is how many of the package's parallel tests run at once
// unless -parallel says otherwise: they wait on reconnects and timeouts far
// more than they compute, so more of them than the machine has cores (go
// test's default) keep its two cores busy.
//
// A test runs in parallel (after the serial ones) when it works on paths and
// sessions of its own and other tests' load cannot break a bound of its: one
// that asserts how long a call took, needs a short session to stay alive, or
// reads the process's goroutines stays serial.
const parallelTests = 4

func TestMain(m *testing.M) {
	// The default only: m.Run parses the command line after, and a
	// -parallel given there wins.
	flag.Set("test.parallel", fmt.Sprint(parallelTests))
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
