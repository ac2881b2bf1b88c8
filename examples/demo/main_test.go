package main

import (
	"context"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDemo runs the whole demo against a test server, as `make demo ZK=…`
// would: it builds the programs, and fails if any of them fails (a worker
// that sees the global bound broken exits non-zero).
func TestDemo(t *testing.T) {
	srv := zktest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := run(ctx, srv.Addr()); err != nil {
		t.Fatal(err)
	}
}
