package syncbuf

import (
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestReadWhileWriting: String may be called while Write runs (go test
// -race checks it), and sees whole writes.
func TestReadWhileWriting(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 100 {
			b.Write([]byte("ab"))
		}
	})
	for range 100 {
		if s := b.String(); len(s)%2 != 0 || strings.Trim(s, "ab") != "" {
			t.Fatalf("String() = %q mid-write; want whole writes", s)
		}
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("ab", 100) {
		t.Fatalf("String() = %q; want 100 × ab", got)
	}
}
