package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestThreeProcesses runs three copies (each its own Session) under one
// global bound; run fails if it ever sees more holders than the bound.
func TestThreeProcesses(t *testing.T) {
	srv := zktest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, name := range []string{"A", "B", "C"} {
		wg.Go(func() {
			if err := run(ctx, []string{srv.Addr()}, "/workers-test", name, 6, 3, 2, 20*time.Millisecond); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("run: %v", err)
	}
}
