package zkconn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// A connector makes the connections of one *zk.Conn: it dials with the
// configured dialer and, with WithTLS, runs the TLS handshake over what it
// dialed, so that the wire taps the TLS connection and reads ZooKeeper's
// frames in the clear. It keeps how its attempts failed, so that Dial can
// say why it never connected, and tells refused (once) when every server
// refused the TLS handshake before any connection was accepted: a wrong
// certificate on either side is not fixed by trying again.
type connector struct {
	dial      zk.Dialer
	tls       *tls.Config                      // nil: plain TCP
	handshake time.Duration                    // the least time a handshake is given
	names     map[string]string                // resolved "ip:port" → the host given to Dial, for ServerName
	servers   []string                         // the distinct addresses go-zookeeper tries, in order
	refused   func(error)                      // called once when every server refused; may be nil
	logf      func(slog.Level, string, ...any) // queues a line for the Session's logger; never waits

	ctx    context.Context // canceled by close: ends handshakes under way
	cancel context.CancelFunc

	mu       sync.Mutex
	last     map[string]error     // how the last attempt on each server failed
	shaking  map[string]time.Time // handshakes under way, since when
	rejected map[string]bool      // servers that refused a handshake
	accepted bool                 // some connection got the server's first reply
	told     bool                 // refused was called
}

// errConnectorClosed is what the dialer of a closed connector or wire returns.
var errConnectorClosed = errors.New("zkconn: connection closed")

func newConnector(cfg *config, addrs []string, names map[string]string, refused func(error), logf func(slog.Level, string, ...any)) *connector {
	var servers []string
	for _, a := range addrs {
		if !slices.Contains(servers, a) {
			servers = append(servers, a)
		}
	}
	c := &connector{
		dial:      cfg.dialer,
		tls:       cfg.tls,
		handshake: cfg.sessionTimeout / 3,
		names:     names,
		servers:   servers,
		refused:   refused,
		logf:      logf,
		last:      map[string]error{},
		shaking:   map[string]time.Time{},
		rejected:  map[string]bool{},
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

// close ends the handshakes under way and fails later dials at once.
func (c *connector) close() { c.cancel() }

// dialer returns the zk.Dialer that makes c's connections. go-zookeeper
// gives it timeout for the TCP connection; a TLS handshake gets at least a
// third of the session timeout on top (go-zookeeper's own ping interval).
func (c *connector) dialer() zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		if err := c.ctx.Err(); err != nil {
			return nil, errConnectorClosed
		}
		raw, err := c.dial(network, address, timeout)
		if err != nil {
			c.failed(address, err)
			return nil, err
		}
		conn := raw
		if c.tls != nil {
			if conn, err = c.secure(raw, address, max(timeout, c.handshake)); err != nil {
				c.failed(address, err)
				return nil, err
			}
		}
		return &firstRead{Conn: conn, raw: raw, c: c, addr: address}, nil
	}
}

// secure runs the TLS handshake over conn, within d or until c closes. On
// failure it closes conn.
func (c *connector) secure(conn net.Conn, address string, d time.Duration) (net.Conn, error) {
	cfg := c.tls
	if cfg.ServerName == "" {
		cfg = cfg.Clone()
		cfg.ServerName = c.serverName(address)
	}
	tc := tls.Client(conn, cfg)
	ctx, cancel := context.WithTimeout(c.ctx, d)
	defer cancel()
	c.mu.Lock()
	c.shaking[address] = time.Now()
	c.mu.Unlock()
	err := tc.HandshakeContext(ctx)
	c.mu.Lock()
	delete(c.shaking, address)
	c.mu.Unlock()
	if err != nil {
		conn.Close()
		if c.ctx.Err() != nil {
			return nil, errConnectorClosed
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("TLS handshake with %s: no answer within %v: %w", address, d, err)
		}
		return nil, fmt.Errorf("TLS handshake with %s: %w", address, explain(err, cfg))
	}
	return tc, nil
}

// explain adds to a handshake's error who refused it, and why if the
// client is the likely cause.
func explain(err error, cfg *tls.Config) error {
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%w (the server closed the connection: is this its secureClientPort?)", err)
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "remote error" {
		return err
	}
	if len(cfg.Certificates) == 0 && cfg.GetClientCertificate == nil {
		return fmt.Errorf("refused by the server: %w (the client presented no certificate; a server with ssl.clientAuth=need requires one)", err)
	}
	return fmt.Errorf("refused by the server: %w", err)
}

// serverName returns the name a server's certificate must bear: the host of
// address as given to Dial (a name, or an IP address).
func (c *connector) serverName(address string) string {
	if name, ok := c.names[address]; ok {
		return name
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return address
	}
	return host
}

// failed records a failed attempt on address.
func (c *connector) failed(address string, err error) {
	if c.ctx.Err() != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last[address] = err
	if c.tls == nil || !refusal(err) {
		return
	}
	if !c.rejected[address] {
		c.logf(slog.LevelWarn, "zkconn: TLS handshake refused", "server", address, "err", err)
	}
	c.rejected[address] = true
	if c.accepted || c.told || len(c.rejected) < len(c.servers) || c.refused == nil {
		return
	}
	c.told = true
	c.refused(fmt.Errorf("%w by every server: %w", ErrTLSHandshake, c.attemptsLocked()))
}

// attempts returns how the last attempt on each server failed, or is still
// under way, or nil if none did.
func (c *connector) attempts() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attemptsLocked()
}

func (c *connector) attemptsLocked() error {
	var errs attemptErrors
	for _, a := range c.servers {
		if since, ok := c.shaking[a]; ok {
			errs = append(errs, fmt.Errorf("TLS handshake with %s: no answer for %v", a, time.Since(since).Round(time.Millisecond)))
		} else if err := c.last[a]; err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errs
}

// attemptErrors are the failures of connection attempts, one a server.
type attemptErrors []error

func (e attemptErrors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (e attemptErrors) Unwrap() []error { return e }

// refusal reports whether err is a TLS handshake refused by either side: a
// certificate the client does not accept, an alert from the server (a
// certificate it does not accept, or none: ssl.clientAuth=need; or no
// protocol or cipher in common), or a server that does not speak TLS.
func refusal(err error) bool {
	var verify *tls.CertificateVerificationError
	var header tls.RecordHeaderError
	var alert tls.AlertError
	var op *net.OpError
	return errors.As(err, &verify) || errors.As(err, &header) || errors.As(err, &alert) ||
		errors.As(err, &op) && op.Op == "remote error"
}

// firstRead watches the first read of a connection: its error is how the
// attempt failed (with TLS 1.3 a server refuses a client certificate only
// after the client's side of the handshake is done), and its success means
// the server accepted the connection. go-zookeeper reads from one goroutine.
type firstRead struct {
	net.Conn
	raw  net.Conn // the TCP connection under Conn (Conn itself without TLS)
	c    *connector
	addr string
	done atomic.Bool
}

// unanswered records that the server sent nothing within d of the
// connect request: the tap closes the connection (see greetWait).
func (r *firstRead) unanswered(d time.Duration) {
	if r.done.CompareAndSwap(false, true) {
		r.c.failed(r.addr, fmt.Errorf("connection to %s: no connect response within %v", r.addr, d))
	}
}

// Close closes the TCP connection at once. A TLS connection's Close would
// first send its closing alert, and could wait seconds for a server that
// stopped reading; ZooKeeper needs no such alert.
func (r *firstRead) Close() error { return r.raw.Close() }

func (r *firstRead) Read(b []byte) (int, error) {
	n, err := r.Conn.Read(b)
	if !r.done.Load() {
		switch {
		case n > 0:
			r.done.Store(true)
			r.c.mu.Lock()
			r.c.accepted = true
			r.c.mu.Unlock()
		case err != nil && r.done.CompareAndSwap(false, true):
			cause := fmt.Errorf("connection to %s: %w", r.addr, err)
			if r.c.tls != nil {
				cause = fmt.Errorf("TLS connection to %s: %w", r.addr, err)
			}
			r.c.failed(r.addr, cause)
		}
	}
	return n, err
}
