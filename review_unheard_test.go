package dsync_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestReviewUnheardHolder (review round 8): a one-way partition. A holder's
// Session (granted timeout 2s) holds a Mutex through LockContext, and
// another Session waits for it. Then the server hears nothing from the
// holder (zktest's Deafen), which still hears notifications: other watches
// of its Session fire every 300ms, as they do for a Session that serves
// other primitives too. go-zookeeper re-arms its read deadline (two thirds
// of the timeout) on every frame it reads, so it alone would keep the
// Session connected while the server expired the session and handed the
// lock on: two live holders under either LossPolicy. The wire closes a
// connection the server has not answered for two thirds of the timeout, so
// the hold ends first.
func TestReviewUnheardHolder(t *testing.T) {
	srv := zktest.Start(t, zktest.WithMaxSessionTimeout(2*time.Second))
	for name, pol := range map[string]dsync.LossPolicy{"LostOnSuspension": dsync.LostOnSuspension, "LostOnExpiry": dsync.LostOnExpiry} {
		t.Run(name, func(t *testing.T) {
			p := zktest.NewProxy(t, srv.Addr())
			path := lockPath(t)
			obs := observer(t, srv.Addr())
			s := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(2*time.Second))
			m := dsync.NewMutex(s, path, dsync.WithLossPolicy(pol))
			held, err := m.LockContext(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			h, err := s.Current(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			const k = 20 // 6s of notifications, three times the timeout
			paths := make([]string, k)
			for i := range paths {
				paths[i] = fmt.Sprintf("%s-w%d", path, i)
				if _, _, _, err := h.Conn().ExistsW(paths[i]); err != nil {
					t.Fatal(err)
				}
			}
			other := dsync.NewMutex(dial(t, []string{srv.Addr()}), path)
			got := make(chan error, 1)
			go func() {
				_, err := other.LockContext(context.Background())
				if err == nil && held.Err() == nil {
					err = errors.New("the waiter was granted while the first hold's context was alive")
				}
				if err == nil {
					other.Unlock()
				}
				got <- err
			}()
			awaitChildren(t, obs, path, 2)

			p.Deafen()
			// A notification every 300ms keeps go-zookeeper reading.
			stop := zktest.CreateEvery(t, obs, 300*time.Millisecond, paths...)
			select {
			case err = <-got:
			case <-time.After(30 * time.Second):
				err = errors.New("the waiter was not granted within 30s")
			}
			stop()
			for _, p := range paths {
				obs.Delete(p, -1)
			}
			if err != nil {
				t.Error(err)
			}
			if !errors.Is(context.Cause(held), dsync.ErrLockLost) {
				t.Errorf("the hold's cause = %v; want the lock lost", context.Cause(held))
			}
			m.Unlock()
		})
	}
}
