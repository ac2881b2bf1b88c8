package dsync_test

import (
	"context"
	"testing"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// parentUse is the first use of a path under parent, which does not exist
// yet: a lock's node (made by a protected create) or a Value's.
type parentUse struct {
	name string
	use  func(ctx context.Context, s *zkconn.Session, parent string) error
}

var parentUses = []parentUse{
	{"Mutex", func(ctx context.Context, s *zkconn.Session, parent string) error {
		_, err := dsync.NewMutex(s, parent).LockContext(ctx)
		return err
	}},
	{"CountSet", func(ctx context.Context, s *zkconn.Session, parent string) error {
		return dsync.NewCount(s, parent+"/count", 0).Set(ctx, 1)
	}},
}

// giveUpAtParent runs use through a proxy, its ctx canceled once the
// parent's create has struck (struck with a), calling between (if not nil)
// before the cancel. It returns once the use has failed and the cleanup's
// mark of the parent has been answered.
func giveUpAtParent(t *testing.T, ctx context.Context, parent string, u parentUse, a zktest.Action, between func()) {
	t.Helper()
	proxy, s := r45Proxied(t)
	f := proxy.Strike(zktest.Match{Op: zktest.OpCreateContainer, Path: parent}, a)
	defer f.Disarm()
	mark := proxy.Strike(zktest.Match{Op: zktest.OpMulti, Path: parent + "/", Prefix: true}, zktest.Pass)
	defer mark.Disarm()
	uctx, cancel := context.WithCancel(ctx)
	res := make(chan error, 1)
	go func() { res <- u.use(uctx, s, parent) }()
	r38Struck(t, f, res)
	if between != nil {
		between()
	}
	cancel()
	if err := reviewRecv(t, "the use", res); err == nil {
		t.Fatal("the use = nil with its ctx canceled at the parent's create")
	}
	proxy.Heal()
	reviewRecv(t, "the cleanup's mark of the parent", mark.Struck())
}

// TestGivenUpCreateMarksItsParent: the first use of a path whose parent does
// not exist yet ends (its ctx canceled) while the parent's create is
// applied and its reply held back (Drop): the parent, a container that
// would never have a child, is marked as one that had one (the server
// removes only those, once empty), not left for good. (With the reply let
// through, the use's own create could go out before the cancel, as it did
// once in CI: a Count's node was made, the Set given up.)
func TestGivenUpCreateMarksItsParent(t *testing.T) {
	t.Parallel()
	for _, u := range parentUses {
		t.Run(u.name, func(t *testing.T) {
			t.Parallel()
			ctx, parent, obs := r45Start(t)
			giveUpAtParent(t, ctx, parent, u, zktest.Drop, nil)
			there, st, err := obs.Exists(parent)
			if err != nil || !there || st.Cversion == 0 || st.NumChildren != 0 {
				t.Fatalf("the parent after the given-up use: %v, %+v, %v; want there, cversion > 0, no children", there, st, err)
			}
		})
	}
}

// TestMarkUsedKeepsOthersNodes: as above, with the parent's create
// black-holed, and meanwhile someone else makes the parent: an operator (a
// persistent node, with data or without), or another process's Count or
// Value at that path (with data, or a seed that encodes to nothing). The
// cleanup leaves that node as it is. (Round 113: a delete of any childless
// node took it, data and all; round 114: a delete of a never-used one still
// took a dataless one, and, held in the network, one made there later.)
func TestMarkUsedKeepsOthersNodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		make func(ctx context.Context, t *testing.T, obs *zk.Conn, parent string)
	}{
		{"Operator", func(ctx context.Context, t *testing.T, obs *zk.Conn, parent string) {
			if _, err := obs.Create(parent, []byte("operator"), 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Error(err)
			}
		}},
		{"OperatorDataless", func(ctx context.Context, t *testing.T, obs *zk.Conn, parent string) {
			if _, err := obs.Create(parent, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Error(err)
			}
		}},
		{"OtherCount", func(ctx context.Context, t *testing.T, obs *zk.Conn, parent string) {
			if err := dsync.NewCount(dial(t, []string{shared.Addr()}), parent, 0).Set(ctx, 7); err != nil {
				t.Error(err)
			}
		}},
		{"OtherValueEmptySeed", func(ctx context.Context, t *testing.T, obs *zk.Conn, parent string) {
			if _, err := dsync.NewValue[[]byte](dial(t, []string{shared.Addr()}), parent, bytesCodec{}, nil).Get(ctx); err != nil {
				t.Error(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, parent, obs := r45Start(t)
			var data []byte
			giveUpAtParent(t, ctx, parent, parentUses[1], zktest.BlackHole, func() {
				tc.make(ctx, t, obs, parent)
				var err error
				if data, _, err = obs.Get(parent); err != nil {
					t.Fatal(err)
				}
			})
			if d, _, err := obs.Get(parent); err != nil || string(d) != string(data) {
				t.Fatalf("%s (data %q), made by someone else, after the given-up use's cleanup: %q, %v", parent, data, d, err)
			}
		})
	}
}
