package syncbuf

import (
	"strings"
	"sync"
	"testing"
	"time"

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

// TestAwait: Await returns once a later write completes the text, and
// reports false when nothing does within its time.
func TestAwait(t *testing.T) {
	var b Buffer
	go func() {
		b.Write([]byte("lock "))
		b.Write([]byte("lost\n"))
	}()
	if !b.Await("lock lost", 10*time.Second) {
		t.Fatalf("Await missed %q in %q", "lock lost", b.String())
	}
	if b.Await("never", 10*time.Millisecond) {
		t.Fatal("Await found what was never written")
	}
}

// TestAwaitCount: AwaitCount waits for the n-th instance, not the first.
func TestAwaitCount(t *testing.T) {
	var b Buffer
	b.Write([]byte("hello\n"))
	if b.AwaitCount("hello", 2, 10*time.Millisecond) {
		t.Fatal("AwaitCount found two instances in one")
	}
	go b.Write([]byte("hello\n"))
	if !b.AwaitCount("hello", 2, 10*time.Second) {
		t.Fatalf("AwaitCount missed the second instance in %q", b.String())
	}
}
