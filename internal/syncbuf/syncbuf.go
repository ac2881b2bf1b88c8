// Package syncbuf has a bytes.Buffer that one goroutine may write (a child
// process's output, say) while others read it.
package syncbuf

import (
	"bytes"
	"strings"
	"sync"
	"time"
)

// A Buffer is a bytes.Buffer safe for one writer and concurrent readers. The
// zero value is an empty buffer ready to use; it must not be copied after
// first use.
type Buffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	written chan struct{} // closed and replaced by every Write; nil until waited on
}

// Write appends p to b.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.written != nil {
		close(b.written)
		b.written = nil
	}
	return b.buf.Write(p)
}

// Await waits until what has been written contains s, and reports whether
// it did within d.
func (b *Buffer) Await(s string, d time.Duration) bool { return b.AwaitCount(s, 1, d) }

// AwaitCount waits until what has been written contains n or more
// non-overlapping instances of s, and reports whether it did within d.
func (b *Buffer) AwaitCount(s string, n int, d time.Duration) bool {
	timeout := time.After(d)
	for {
		b.mu.Lock()
		if strings.Count(b.buf.String(), s) >= n {
			b.mu.Unlock()
			return true
		}
		if b.written == nil {
			b.written = make(chan struct{})
		}
		written := b.written
		b.mu.Unlock()
		select {
		case <-written:
		case <-timeout:
			return false
		}
	}
}

// String returns what has been written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
