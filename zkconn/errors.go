package zkconn

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/go-zookeeper/zk"
)

// ErrClosed is returned by every operation on a Session that has been closed,
// and by operations that were waiting when it closed.
var ErrClosed = errors.New("zkconn: session closed")

// ErrSessionLost is returned when the ZooKeeper session an operation belongs
// to has expired (or was given up locally after being disconnected until
// shortly before the server could expire it). Nodes that session created are
// gone or about to be; holds tied to it are no longer held. The Session
// itself carries on with a new ZooKeeper session.
var ErrSessionLost = errors.New("zkconn: zookeeper session lost")

// ErrTLSHandshake is wrapped by Dial's error when every server (whose name
// resolved) refused the TLS handshake (WithTLS) before any accepted a
// connection: a server did not accept the client's certificate, or the
// client presented none where the server requires one, or the client did
// not accept a server's certificate (signed by a CA it does not trust, or
// not naming the server). The wrapping error says which, server by server,
// and names the servers whose names did not resolve, which were not tried.
// Trying again with the same certificates does not help, unless one of
// those could be tried.
var ErrTLSHandshake = errors.New("zkconn: TLS handshake refused")

// ErrBadPath is wrapped by the error ValidatePath returns for a path
// ZooKeeper would reject, or that dsync refuses to use.
var ErrBadPath = errors.New("zkconn: bad path")

// ErrKinGone is wrapped by the error of CreateProtectedWhile when the node
// it may only be made with is gone: nothing was created.
var ErrKinGone = errors.New("zkconn: kin node gone")

// ErrTooLarge is wrapped by the error of a request larger than ZooKeeper
// takes in one (maxRequest: its jute.maxbuffer's default, about 1 MB), node
// data too large, say. Such a request is never sent, and the connection
// stays up: a server given one would close the connection, and the request
// sent again after the reconnect would close the next one.
var ErrTooLarge = errors.New("zkconn: request larger than ZooKeeper takes (jute.maxbuffer, 1 MB)")

// ErrUnknownOutcome is wrapped by the error of a write whose reply never
// came: the connection dropped, the caller's ctx ended or the session was
// lost while it was in flight. It may or may not have been applied.
var ErrUnknownOutcome = errors.New("zkconn: outcome unknown")

// transient reports whether err means only that the connection dropped while
// a request was in flight: the request may or may not have been applied, and
// the session may still be alive.
func transient(err error) bool {
	var opErr *net.OpError
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionMoved) ||
		// go-zookeeper hands a failed write's error to the request
		// as it is (write: broken pipe, say): the connection is going.
		errors.As(err, &opErr) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// ended reports whether err means that the session or the client is gone.
func ended(err error) bool {
	return errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrClosing) ||
		errors.Is(err, ErrSessionLost) || errors.Is(err, ErrClosed)
}

// sessionError maps the errors go-zookeeper returns when a session or the
// whole client is gone onto ErrSessionLost and ErrClosed, keeping the cause
// for errors.Is. Other errors are returned unchanged.
func (h Handle) sessionError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrClosed), errors.Is(err, ErrSessionLost):
		return err
	case errors.Is(err, zk.ErrSessionExpired):
		return fmt.Errorf("%w: %w", ErrSessionLost, err)
	case errors.Is(err, zk.ErrShortBuffer):
		// go-zookeeper's send buffer holds maxRequest (see
		// newClient): a request that does not fit is not sent.
		return fmt.Errorf("%w: %w", ErrTooLarge, err)
	case errors.Is(err, zk.ErrClosing):
		if h.s.isClosing() {
			return fmt.Errorf("%w: %w", ErrClosed, err)
		}
		return fmt.Errorf("%w: %w", ErrSessionLost, err)
	}
	return err
}
