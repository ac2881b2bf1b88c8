package dsync_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// Review round 51: what the root package makes of DoOnce's plain ErrClosed
// (a request never sent) after a write of its own whose outcome was not
// known.

// r51ClosingCtx is a context that can never be done (its Done is nil, so
// zkconn runs requests inline) whose first Done call after at has closed
// closes s: a Close that lands at an exact point between two requests.
type r51ClosingCtx struct {
	context.Context
	s    *zkconn.Session
	at   <-chan struct{}
	once sync.Once
}

func (c *r51ClosingCtx) Done() <-chan struct{} {
	select {
	case <-c.at:
		c.once.Do(func() { c.s.Close() })
	default:
	}
	return c.Context.Done()
}

// TestReviewR51RevokeClosedAfterUnknownWrite pins revoke.go's unknown(err)
// on DoOnce's plain ErrClosed (a request never sent, since round 48): the
// first write of the request is cut (its outcome not known to Revoke), the
// node is read again after the reconnect, and the Session is closed just
// before the second write goes out. That write was never sent, but the
// first may have been applied: Revoke must report ErrOutcomeUnknown (with
// ErrClosed), not a plain ErrClosed that says nothing was written.
func TestReviewR51RevokeClosedAfterUnknownWrite(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	obs := observer(t, shared.Addr())
	createRaw(t, obs, path, nil) // revocable: empty data
	defer obs.Delete(path, -1)
	p, s := r45Proxied(t)
	read := zktest.Match{Op: zktest.OpGetData, Path: path}
	p.Strike(read, zktest.Pass)
	cut := p.Strike(zktest.Match{Op: zktest.OpSetData, Path: path}, zktest.Cut)
	reread := p.Strike(read, zktest.Pass)
	set := p.Strike(zktest.Match{Op: zktest.OpSetData, Path: path}, zktest.Pass)
	defer set.Disarm()
	ctx := &r51ClosingCtx{Context: context.Background(), s: s, at: reread.Struck()}
	err := dsync.Revoke(ctx, s, path)
	struck := func(f *zktest.Fault) bool {
		select {
		case <-f.Struck():
			return true
		default:
			return false
		}
	}
	if !struck(cut) || !struck(reread) || struck(set) {
		t.Fatalf("Revoke = %v; want it to return after its write was cut, the node read again and the second write never sent (cut %v, read again %v, second write %v)",
			err, struck(cut), struck(reread), struck(set))
	}
	if !errors.Is(err, dsync.ErrOutcomeUnknown) || !errors.Is(err, dsync.ErrClosed) {
		t.Fatalf("Revoke closed after a cut write = %v; want an error wrapping ErrOutcomeUnknown and ErrClosed", err)
	}
	if got := nodeData(t, obs, path); got != "" {
		t.Fatalf("data of %s = %q; want none: the cut write was not applied", path, got)
	}
}
