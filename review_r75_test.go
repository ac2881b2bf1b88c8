package dsync_test

import (
	"context"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestReviewR75RWDowngradeStress: writers that downgrade and readers, on
// two sessions (one through a proxy whose connections are cut at random),
// several RWMutexes per session on one path: no writer's hold may overlap
// another hold (the nodes stay, a cut is no expiry).
func TestReviewR75RWDowngradeStress(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	p := zktest.NewProxy(t, shared.Addr())
	sa := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(20*time.Second))
	sb := dial(t, []string{shared.Addr()})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	var (
		mu      sync.Mutex
		writers int
		readers int
		bad     atomic.Int32
	)
	enter := func(w bool, who string) {
		mu.Lock()
		defer mu.Unlock()
		if w && (writers > 0 || readers > 0) || !w && writers > 0 {
			bad.Add(1)
			t.Errorf("%s enters (writer %v) with %d writers, %d readers", who, w, writers, readers)
		}
		if w {
			writers++
		} else {
			readers++
		}
	}
	leave := func(w bool) {
		mu.Lock()
		defer mu.Unlock()
		if w {
			writers--
		} else {
			readers--
		}
	}
	var wg sync.WaitGroup
	for i := range 6 {
		s := sa
		if i%2 == 1 {
			s = sb
		}
		wg.Go(func() {
			r := rand.New(rand.NewSource(int64(i)))
			rw := dsync.NewRWMutex(s, path)
			for j := 0; j < 40 && bad.Load() == 0 && ctx.Err() == nil; j++ {
				if r.Intn(3) == 0 {
					if _, err := rw.RLockContext(ctx); err != nil {
						continue
					}
					enter(false, "reader")
					leave(false)
					rw.RUnlock()
					continue
				}
				held, err := rw.LockContext(ctx)
				if err != nil {
					continue
				}
				enter(true, "writer")
				down := false
				if r.Intn(2) == 0 {
					if _, err := rw.RLockContext(held); err == nil {
						down = true
						mu.Lock()
						readers++
						mu.Unlock()
					}
				}
				leave(true)
				rw.Unlock()
				if down {
					leave(false)
					rw.RUnlock()
				}
			}
		})
	}
	stopCuts := r75Cut(p, 42, time.Millisecond, 40)
	wg.Wait()
	stopCuts()
	if ctx.Err() != nil {
		t.Fatal("did not finish in time")
	}
}

// TestReviewR75ObserveWithCampaignCuts: on session A (through a proxy cut
// at random) two Elections campaign and one observes; session B campaigns
// too. Leaders resign in turn until one is left; Observe on A must come to
// report that last leader (Observe and the campaigns share the watch on
// the leader's node through Handle.GetW).
func TestReviewR75ObserveWithCampaignCuts(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	p := zktest.NewProxy(t, shared.Addr())
	sa := dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(20*time.Second))
	sb := dial(t, []string{shared.Addr()})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	seen := make(chan dsync.Participant, 1000)
	octx, ocancel := context.WithCancel(ctx)
	defer ocancel()
	go func() {
		for pt, err := range dsync.NewElection(sa, path).Observe(octx) {
			if err == nil {
				seen <- pt
			}
		}
	}()
	stopCuts := r75Cut(p, 1, 2*time.Millisecond, 30)
	var (
		wg      sync.WaitGroup
		leaders atomic.Int32
	)
	const rounds = 30
	for i := range 3 {
		s := sa
		if i == 2 {
			s = sb
		}
		wg.Go(func() {
			e := dsync.NewElection(s, path)
			for j := 0; j < rounds && ctx.Err() == nil; j++ {
				if _, err := e.Campaign(ctx, string(rune('a'+i))); err != nil {
					continue
				}
				if n := leaders.Add(1); n != 1 {
					t.Errorf("%d leaders at once", n)
				}
				leaders.Add(-1)
				_ = e.Resign(ctx)
			}
		})
	}
	wg.Wait()
	stopCuts()
	final := dsync.NewElection(sb, path)
	if _, err := final.Campaign(ctx, "final"); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case pt := <-seen:
			if string(pt.Data) == "final" {
				return
			}
		case <-ctx.Done():
			t.Fatal("Observe never reported the last leader")
		}
	}
}

// r75Cut cuts p's connections at random, seeded with seed: at each tick of
// every, one chance in oneIn. The returned func stops it and returns once
// it has.
func r75Cut(p *zktest.Proxy, seed int64, every time.Duration, oneIn int) (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		r := rand.New(rand.NewSource(seed))
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
			}
			if r.Intn(oneIn) == 0 {
				p.Cut()
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}
