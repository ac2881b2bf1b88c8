package zkconn

import (
	"context"
	"errors"
	"testing"

	"github.com/go-zookeeper/zk"
)

// Review round 50: createChecked's failures other than ErrKinGone.
//
// Of createChecked's four failures, the check's error other than zk.ErrNoNode
// is pinned here. The last, an error of the multi as a whole with both ops'
// results in (case err != nil), cannot happen: ZooKeeper reports a failed
// op in that op's result with a header error of 0, and go-zookeeper decodes
// no results from a reply whose header carries an error, so the multi's
// error then comes with no results (len(rs) != 2, the case of a lost reply,
// which TestReviewChecked* reach).

// TestReviewR50CheckedKinUnreadable pins createChecked's check failing
// other than with zk.ErrNoNode: an operator has taken the read permission
// off kin, which ZooKeeper's check asks for. CreateProtectedWhile must
// return that error (wrapping zk.ErrNoAuth), not ErrKinGone (kin is there)
// and not the create's result (a runtime inconsistency); nothing is
// created.
func TestReviewR50CheckedKinUnreadable(t *testing.T) {
	_, h, obs, root, kin := checkedSetup(t)
	if _, err := obs.SetACL(kin, zk.WorldACL(zk.PermAll&^zk.PermRead), -1); err != nil { // an operator
		t.Fatal(err)
	}
	node, err := h.CreateProtectedWhile(context.Background(), root+"/leases", "lease-", nil, kin)
	if !errors.Is(err, zk.ErrNoAuth) || errors.Is(err, ErrKinGone) {
		t.Fatalf("CreateProtectedWhile with kin unreadable = %q, %v; want an error wrapping zk.ErrNoAuth, not ErrKinGone", node, err)
	}
	settleDeletes(t, h, root+"/leases")
	noChildren(t, obs, root+"/leases", "after the check refused")
	<-settledOf(h.Delete(kin))
}
