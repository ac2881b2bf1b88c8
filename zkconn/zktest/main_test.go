package zktest_test

import (
	"flag"
	"fmt"
	"testing"

	"go.uber.org/goleak"
)

// parallelTests is how many of the package's parallel tests run at once
// unless -parallel says otherwise: most start a server of their own and
// then wait on it, so more of them than the machine has cores keep its two
// cores busy.
//
// A test runs in parallel (after the serial ones) when it works on servers
// and sessions of its own and other tests' load cannot break a bound of its.
// One stays serial when it asserts how long a call took, needs a short
// session to stay alive, reads the process's goroutines, sets the
// environment or a package variable, or stops and restarts a server on its
// port (a parallel test's new server could take the port meanwhile).
const parallelTests = 4

func TestMain(m *testing.M) {
	// The default only: m.Run parses the command line after, and a
	// -parallel given there wins.
	flag.Set("test.parallel", fmt.Sprint(parallelTests))
	goleak.VerifyTestMain(m)
}
