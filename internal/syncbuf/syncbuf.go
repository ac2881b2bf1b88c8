// Package syncbuf has a bytes.Buffer that one goroutine may write (a child
// process's output, say) while others read it.
package syncbuf

import (
	"bytes"
	"sync"
)

// A Buffer is a bytes.Buffer safe for one writer and concurrent readers. The
// zero value is an empty buffer ready to use; it must not be copied after
// first use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p to b.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what has been written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
