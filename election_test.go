package dsync_test

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// protectedName matches a Curator protected node name with marker.
func protectedName(marker string) *regexp.Regexp {
	return regexp.MustCompile(`^_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-` + marker + `\d{10}$`)
}

var latchNode = protectedName("latch-")

// sessionID returns the id of sess's current ZooKeeper session.
func sessionID(t testing.TB, sess *zkconn.Session) int64 {
	t.Helper()
	h, err := sess.Current(context.Background())
	if err != nil {
		t.Fatalf("Current = %v", err)
	}
	return h.ID()
}

// campaign runs Campaign on a goroutine; its result arrives on the channel.
func campaign(ctx context.Context, e *dsync.Election, id string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := e.Campaign(ctx, id)
		done <- err
	}()
	return done
}

func leaderID(t testing.TB, e *dsync.Election) string {
	t.Helper()
	p, err := e.Leader(context.Background())
	if err != nil {
		t.Fatalf("Leader = %v", err)
	}
	return string(p.Data)
}

func TestElectionCampaignResign(t *testing.T) {
	ctx := context.Background()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	a := dsync.NewElection(dial(t, []string{shared.Addr()}), path)
	b := dsync.NewElection(dial(t, []string{shared.Addr()}), path)

	if _, err := a.Leader(ctx); !errors.Is(err, dsync.ErrNoLeader) {
		t.Fatalf("Leader with no one campaigning = %v; want ErrNoLeader", err)
	}
	led, err := a.Campaign(ctx, "alpha")
	if err != nil {
		t.Fatalf("Campaign(alpha) = %v", err)
	}
	node := a.Key()
	if name := node[len(path)+1:]; !latchNode.MatchString(name) {
		t.Fatalf("leader node %q; want Curator LeaderLatch's _c_<uuid>-latch-<seq>", name)
	}
	if data, _, err := obs.Get(node); err != nil || string(data) != "alpha" {
		t.Fatalf("leader node data = %q, %v; want the id", data, err)
	}
	tokA := a.Token()
	if tokA == 0 {
		t.Fatal("Token = 0 while leading")
	}

	bDone := campaign(ctx, b, "beta")
	awaitChildren(t, obs, path, 2)
	select {
	case err := <-bDone:
		t.Fatalf("second Campaign returned %v while the first leads", err)
	default:
	}
	if got := leaderID(t, b); got != "alpha" {
		t.Fatalf("Leader = %q; want alpha", got)
	}
	ps, err := b.Participants(ctx)
	if err != nil || len(ps) != 2 || string(ps[0].Data) != "alpha" || string(ps[1].Data) != "beta" {
		t.Fatalf("Participants = %v, %v; want alpha then beta", ps, err)
	}

	if err := a.Resign(ctx); err != nil {
		t.Fatalf("Resign = %v", err)
	}
	if context.Cause(led) != context.Canceled {
		t.Fatalf("leadership context cause after Resign = %v; want context.Canceled", context.Cause(led))
	}
	if a.Key() != "" || a.Token() != 0 {
		t.Fatalf("after Resign: Key %q, Token %d; want none", a.Key(), a.Token())
	}
	if err := <-bDone; err != nil {
		t.Fatalf("second Campaign = %v", err)
	}
	if got := leaderID(t, a); got != "beta" {
		t.Fatalf("Leader after Resign = %q; want beta", got)
	}
	if b.Token() <= tokA {
		t.Fatalf("Token %d after %d; want it to grow", b.Token(), tokA)
	}
	if err := a.Resign(ctx); err != nil {
		t.Fatalf("Resign of a participant that does not lead = %v; want nil", err)
	}
	if err := b.Resign(ctx); err != nil {
		t.Fatalf("Resign = %v", err)
	}
	if kids := children(t, obs, path); len(kids) != 0 {
		t.Fatalf("nodes left: %v", kids)
	}
}

// TestElectionCampaignCanceled: a Campaign whose ctx ends while it waits
// returns ctx.Err() and leaves no node; one whose ctx is done already sends
// nothing.
func TestElectionCampaignCanceled(t *testing.T) {
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	a := dsync.NewElection(dial(t, []string{shared.Addr()}), path)
	b := dsync.NewElection(dial(t, []string{shared.Addr()}), path)
	if _, err := a.Campaign(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	defer a.Resign(context.Background())

	ctx, cancel := context.WithCancel(context.Background())
	done := campaign(ctx, b, "b")
	awaitChildren(t, obs, path, 2)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Campaign after cancel = %v; want context.Canceled", err)
	}
	awaitChildren(t, obs, path, 1)
	if _, err := b.Campaign(ctx, "b"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Campaign with a done ctx = %v; want context.Canceled", err)
	}
	if kids := children(t, obs, path); len(kids) != 1 {
		t.Fatalf("children %v; want the leader's alone", kids)
	}
}

func TestElectionBadInput(t *testing.T) {
	ctx := context.Background()
	if _, err := dsync.NewElection(nil, "/x").Campaign(ctx, "a"); !errors.Is(err, dsync.ErrNilSession) {
		t.Fatalf("Campaign with nil session = %v; want ErrNilSession", err)
	}
	e := dsync.NewElection(dial(t, []string{shared.Addr()}), "relative")
	if _, err := e.Campaign(ctx, "a"); !errors.Is(err, dsync.ErrBadPath) {
		t.Fatalf("Campaign on a bad path = %v; want ErrBadPath", err)
	}
	if _, err := e.Leader(ctx); !errors.Is(err, dsync.ErrBadPath) {
		t.Fatalf("Leader on a bad path = %v; want ErrBadPath", err)
	}
	for _, err := range e.Observe(ctx) {
		if !errors.Is(err, dsync.ErrBadPath) {
			t.Fatalf("Observe on a bad path yields %v; want ErrBadPath", err)
		}
	}
}

// TestElectionLoss: leadership ends, with ErrLockLost, when the leader's
// node is deleted behind its back and when its connection drops; Resign
// after the loss lets the next participant lead.
func TestElectionLoss(t *testing.T) {
	ctx := context.Background()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	p := zktest.NewProxy(t, shared.Addr())
	a := dsync.NewElection(dial(t, []string{p.Addr()}, zkconn.WithSessionTimeout(4*time.Second)), path)
	b := dsync.NewElection(dial(t, []string{shared.Addr()}), path)

	led, err := a.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.Set(a.Key(), []byte("a"), -1); err != nil { // a write is no loss
		t.Fatal(err)
	}
	if err := obs.Delete(a.Key(), -1); err != nil {
		t.Fatal(err)
	}
	<-led.Done()
	if cause := context.Cause(led); !errors.Is(cause, dsync.ErrLockLost) {
		t.Fatalf("cause after the node's deletion = %v; want ErrLockLost", cause)
	}
	if err := a.Resign(ctx); err != nil {
		t.Fatalf("Resign after loss = %v", err)
	}

	if led, err = a.Campaign(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	done := campaign(ctx, b, "b")
	awaitChildren(t, obs, path, 2)
	p.Cut() // the connection drops: a cannot prove it leads
	<-led.Done()
	if cause := context.Cause(led); !errors.Is(cause, dsync.ErrLockLost) {
		t.Fatalf("cause after the connection dropped = %v; want ErrLockLost", cause)
	}
	select {
	case err := <-done:
		t.Fatalf("b's Campaign returned %v while a's node is still first", err)
	default:
	}
	if err := a.Resign(ctx); err != nil {
		t.Fatalf("Resign after suspension = %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("b's Campaign = %v", err)
	}
	b.Resign(ctx)
}

// TestElectionNoHerd: each participant in line watches only the one ahead
// of it, so a change of leader wakes one waiter; an observer keeps one
// watch.
func TestElectionNoHerd(t *testing.T) {
	ctx := context.Background()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	var (
		es   []*dsync.Election
		ids  []int64
		wait []<-chan error
	)
	for i := range 4 {
		s := dial(t, []string{shared.Addr()})
		es = append(es, dsync.NewElection(s, path))
		ids = append(ids, sessionID(t, s))
		if i == 0 {
			if _, err := es[0].Campaign(ctx, "p0"); err != nil {
				t.Fatal(err)
			}
			continue
		}
		wait = append(wait, campaign(ctx, es[i], "p"))
		awaitChildren(t, obs, path, i+1)
	}
	osess := dial(t, []string{shared.Addr()})
	oid := sessionID(t, osess)
	octx, stop := context.WithCancel(ctx)
	defer stop()
	leaders := make(chan string, 8)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for p, err := range dsync.NewElection(osess, path).Observe(octx) {
			if err != nil {
				t.Errorf("Observe: %v", err)
				return
			}
			leaders <- p.Node
		}
	}()
	line := zktest.AwaitChildren(t, obs, path, 4)
	ps, err := es[0].Participants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := <-leaders; got != ps[0].Node {
		t.Fatalf("Observe yields %s first; want the leader %s", got, ps[0].Node)
	}
	for i := 1; i < 4; i++ {
		awaitWatch(t, shared, ps[i-1].Path, ids[i])
	}
	awaitWatch(t, shared, ps[0].Path, oid)
	w := watches(t, shared)
	for i, p := range ps {
		want := []int64{}
		if i < 3 {
			want = append(want, ids[i+1])
		}
		if i == 0 {
			want = append(want, oid)
		}
		got := slices.DeleteFunc(slices.Clone(w[p.Path]), func(id int64) bool { return id == ids[i] })
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("watchers of participant %d: %#x; want %#x (its successor, and the observer on the leader)", i, got, want)
		}
	}
	if n := len(line); n != 4 {
		t.Fatalf("%d in line", n)
	}
	for i := range 3 {
		if err := es[i].Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-wait[i]; err != nil {
			t.Fatalf("Campaign %d = %v", i+1, err)
		}
		if got := <-leaders; got != ps[i+1].Node {
			t.Fatalf("Observe yields %s; want the new leader %s", got, ps[i+1].Node)
		}
		for j := i + 2; j < 4; j++ {
			select {
			case err := <-wait[j-1]:
				t.Fatalf("participant %d's Campaign returned %v before its turn", j, err)
			default:
			}
		}
	}
	stop()
	<-ended
	es[3].Resign(ctx)
}

// TestElectionObserveEmptyPath: Observe on a path that does not exist yet
// waits, with one watch, and yields the first leader.
func TestElectionObserveEmptyPath(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	path := lockPath(t) + "/deeper"
	osess := dial(t, []string{shared.Addr()})
	got := make(chan dsync.Participant, 1)
	go func() {
		for p, err := range dsync.NewElection(osess, path).Observe(ctx) {
			if err == nil {
				got <- p
				return
			}
		}
	}()
	awaitWatchOf(t, shared, path, osess)
	e := dsync.NewElection(dial(t, []string{shared.Addr()}), path)
	if _, err := e.Campaign(ctx, "first"); err != nil {
		t.Fatal(err)
	}
	defer e.Resign(ctx)
	if p := <-got; string(p.Data) != "first" || p.Path != e.Key() {
		t.Fatalf("Observe yields %s %q; want %s", p.Path, p.Data, e.Key())
	}
}

func TestElectionSelectorLayout(t *testing.T) {
	ctx := context.Background()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	e := dsync.NewElection(dial(t, []string{shared.Addr()}), path, dsync.SelectorLayout())
	if _, err := e.Campaign(ctx, "sel"); err != nil {
		t.Fatal(err)
	}
	name := e.Key()[len(path)+1:]
	if !protectedName("lock-").MatchString(name) {
		t.Fatalf("node %q; want LeaderSelector's (InterProcessMutex's) _c_<uuid>-lock-<seq>", name)
	}
	// A Mutex on the path is a LeaderSelector participant too.
	m := dsync.NewMutex(dial(t, []string{shared.Addr()}), path)
	if m.TryLock() {
		t.Fatal("a Mutex at a LeaderSelector path took the lock while an Election leads")
	}
	if data, _, _ := obs.Get(e.Key()); string(data) != "sel" {
		t.Fatalf("data %q; want the id", data)
	}
	e.Resign(ctx)
}
