package dsync_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
)

// TestReviewR79ClosedSessionErrorNamesPath: an acquisition on a closed
// Session fails with an error that names the lock's path, as acquire's doc
// says every error but ctx's and bad input's does.
func TestReviewR79ClosedSessionErrorNamesPath(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := dial(t, []string{shared.Addr()})
	path := lockPath(t)
	m := dsync.NewMutex(s, path)
	e := dsync.NewElection(s, path+"e")
	s.Close()
	if _, err := m.LockContext(ctx); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("LockContext on a closed session = %v; want an error naming %s", err, path)
	}
	if _, err := e.Campaign(ctx, "x"); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Campaign on a closed session = %v; want an error naming %s", err, path)
	}
	if _, err := e.Leader(ctx); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Leader on a closed session = %v; want an error naming %s", err, path)
	}
}
