package zktest_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// client is a go-zookeeper connection whose session events a test can wait for.
type client struct {
	*zk.Conn
	events chan zk.Event // session events, in order
}

// connect connects to addrs with the given session timeout. The test's
// cleanup closes the connection and waits until its goroutines have ended.
func connect(t *testing.T, addrs []string, sessionTimeout time.Duration) *client {
	t.Helper()
	events := make(chan zk.Event, 1024)
	conn, zkEvents, err := zk.Connect(addrs, sessionTimeout,
		zk.WithLogger(testLogger{t}),
		zk.WithDialer(zktest.HeldDialer()),
		zk.WithEventCallback(func(ev zk.Event) {
			if ev.Type != zk.EventSession {
				return
			}
			select {
			case events <- ev:
			default:
				// 1024 session events are more than any test here causes.
			}
		}))
	if err != nil {
		t.Fatalf("zk.Connect(%v): %v", addrs, err)
	}
	t.Cleanup(func() {
		conn.Close()
		for range zkEvents {
			// zk closes the channel when its last goroutine is done.
		}
	})
	return &client{Conn: conn, events: events}
}

// waitState waits for the session event with state want, skipping others.
func (c *client) waitState(ctx context.Context, t *testing.T, want zk.State) {
	t.Helper()
	for {
		select {
		case ev := <-c.events:
			if ev.State == want {
				return
			}
		case <-ctx.Done():
			t.Fatalf("waiting for session state %v: %v", want, ctx.Err())
		}
	}
}

// testLogger sends go-zookeeper's log to the test's log.
type testLogger struct{ t *testing.T }

func (l testLogger) Printf(format string, args ...any) {
	l.t.Helper()
	l.t.Logf("zk: "+format, args...)
}

// testContext returns a context that ends after d or with the test.
func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// retry calls f until it returns nil or ctx is done; it returns f's last error.
func retry(ctx context.Context, f func() error) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-tick.C:
		}
	}
}
