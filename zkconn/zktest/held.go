package zktest

import (
	"encoding/binary"
	"net"
	"time"

	"github.com/go-zookeeper/zk"
)

// A heldConn keeps go-zookeeper from reading replies on a connection, past
// the connect response, until holdFor after it was dialed. Observer uses it
// under the race detector only: go-zookeeper v1.0.4 reads Conn.lastZxid as
// it sends its watches again on a new connection (on the first too, if a
// reply set a watch by then) while its receiving goroutine may write it for
// a reply (go-zookeeper/zk#35). That data race of the dependency is
// harmless, and would fail whichever test struck it. Held back, the first
// replies come once go-zookeeper is past that point, unless its goroutine
// was kept from running for all of holdFor.
type heldConn struct {
	net.Conn
	head []byte        // the connect response's length, as read
	read int           // bytes of the connect response read so far
	held chan struct{} // closed holdFor after the dial
}

const holdFor = 100 * time.Millisecond

// dialer returns the zk.Dialer of zktest's own go-zookeeper connections:
// dialHeld under the race detector, net.DialTimeout otherwise.
func dialer() zk.Dialer {
	if raceEnabled {
		return dialHeld
	}
	return net.DialTimeout
}

// dialHeld is a zk.Dialer that returns heldConns.
func dialHeld(network, address string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	h := &heldConn{Conn: c, held: make(chan struct{})}
	time.AfterFunc(holdFor, func() { close(h.held) })
	return h, nil
}

// Read passes the connect response (go-zookeeper reads it first, its length
// then its body, from one goroutine), then waits for the hold to end.
func (h *heldConn) Read(b []byte) (int, error) {
	if len(h.head) == 4 && h.read >= 4+int(binary.BigEndian.Uint32(h.head)) {
		<-h.held
		return h.Conn.Read(b)
	}
	n, err := h.Conn.Read(b)
	if k := min(n, 4-len(h.head)); k > 0 {
		h.head = append(h.head, b[:k]...)
	}
	h.read += n
	return n, err
}
