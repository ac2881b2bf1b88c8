package zktest_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

func TestEnsembleFailover(t *testing.T) {
	e := zktest.StartEnsemble(t, 3)
	ctx := testContext(t, 2*time.Minute)

	addrs := e.Addrs()
	if len(addrs) != 3 || e.Len() != 3 {
		t.Fatalf("Addrs() = %v, Len() = %d; want 3 members", addrs, e.Len())
	}
	seen := map[string]bool{}
	for i, a := range addrs {
		if seen[a] {
			t.Errorf("Addrs() = %v: %s twice", addrs, a)
		}
		seen[a] = true
		if got := e.Server(i).Addr(); got != a {
			t.Errorf("Server(%d).Addr() = %s; want %s", i, got, a)
		}
	}

	leader, err := e.Leader(ctx)
	if err != nil {
		t.Fatalf("Leader() error: %v", err)
	}
	for i := range e.Len() {
		want := "follower"
		if i == leader {
			want = "leader"
		}
		if mode, err := e.Server(i).Mode(ctx); err != nil || mode != want {
			t.Errorf("Server(%d).Mode() = %q, %v; want %q, nil", i, mode, err, want)
		}
	}

	c := connect(t, addrs, 4*time.Second)
	if _, err := c.Create("/e", []byte("replicated"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("Create(/e) error: %v", err)
	}

	// Lose the leader: the other two elect a new one and keep the data.
	if err := e.Server(leader).Stop(); err != nil {
		t.Fatalf("Server(%d).Stop() error: %v", leader, err)
	}
	if err := e.WaitQuorum(ctx); err != nil {
		t.Fatalf("WaitQuorum() without the old leader error: %v", err)
	}
	newLeader, err := e.Leader(ctx)
	if err != nil {
		t.Fatalf("Leader() after stopping the leader error: %v", err)
	}
	if newLeader == leader {
		t.Fatalf("Leader() = %d, the stopped member", newLeader)
	}
	err = retry(ctx, func() error {
		data, _, err := c.Get("/e")
		if err == nil && string(data) != "replicated" {
			t.Fatalf("Get(/e) = %q; want replicated", data)
		}
		return err
	})
	if err != nil {
		t.Fatalf("Get(/e) after failover error: %v", err)
	}

	// The old leader comes back as a follower and syncs.
	if err := e.Server(leader).Restart(); err != nil {
		t.Fatalf("Server(%d).Restart() error: %v", leader, err)
	}
	if err := e.WaitQuorum(ctx); err != nil {
		t.Fatalf("WaitQuorum() after restart error: %v", err)
	}
	if mode, err := e.Server(leader).Mode(ctx); err != nil || mode != "follower" {
		t.Errorf("restarted Server(%d).Mode() = %q, %v; want follower, nil", leader, mode, err)
	}
	m, err := e.Server(newLeader).Mntr(ctx)
	if err != nil {
		t.Fatalf("Server(%d).Mntr() error: %v", newLeader, err)
	}
	if got := m["zk_synced_followers"]; got != "2" {
		t.Errorf("leader's zk_synced_followers = %q; want 2", got)
	}
}

// TestEnsembleWithoutQuorum checks that a member without a majority does not
// serve, and that the quorum returns with the majority.
func TestEnsembleWithoutQuorum(t *testing.T) {
	e := zktest.StartEnsemble(t, 3)
	ctx := testContext(t, 2*time.Minute)

	for _, i := range []int{1, 2} {
		if err := e.Server(i).Stop(); err != nil {
			t.Fatalf("Server(%d).Stop() error: %v", i, err)
		}
	}
	// Alone, member 0 gives up leading or following and stops serving.
	err := retry(ctx, func() error {
		_, err := e.Server(0).Mode(ctx)
		if errors.Is(err, zktest.ErrNotServing) {
			return nil
		}
		return errors.New("still serving")
	})
	if err != nil {
		t.Fatalf("Server(0).Mode() without quorum: want ErrNotServing, got: %v", err)
	}
	if _, err := e.Server(0).Mntr(ctx); !errors.Is(err, zktest.ErrNotServing) {
		t.Errorf("Server(0).Mntr() without quorum error = %v; want ErrNotServing", err)
	}

	// A majority again: Restart returns once member 1 serves.
	if err := e.Server(1).Restart(); err != nil {
		t.Fatalf("Server(1).Restart() error: %v", err)
	}
	if err := e.WaitQuorum(ctx); err != nil {
		t.Fatalf("WaitQuorum() error: %v", err)
	}
	if _, err := e.Leader(ctx); err != nil {
		t.Errorf("Leader() error: %v", err)
	}
}
