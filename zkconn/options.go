package zkconn

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/go-zookeeper/zk"
)

// An Option configures Dial; Dial reports a nil Option as an error.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	sessionTimeout time.Duration
	logger         *slog.Logger
	authScheme     string
	auth           []byte
	acl            []zk.ACL
	dialer         zk.Dialer
	resolver       *net.Resolver
	tls            *tls.Config // nil: plain TCP
	tlsSet         bool        // WithTLS was given (with nil, Dial fails)
}

func newConfig(opts []Option) (config, error) {
	c := config{
		sessionTimeout: 30 * time.Second,
		logger:         slog.Default(),
		acl:            zk.WorldACL(zk.PermAll),
		dialer:         net.DialTimeout,
		resolver:       net.DefaultResolver,
	}
	for _, o := range opts {
		if o == nil {
			return c, errors.New("zkconn: nil option")
		}
		o.apply(&c)
	}
	switch {
	case c.sessionTimeout <= 0:
		return c, errors.New("zkconn: session timeout must be positive")
	case c.logger == nil:
		return c, errors.New("zkconn: nil logger")
	case len(c.acl) == 0:
		return c, errors.New("zkconn: empty ACL")
	case c.dialer == nil:
		return c, errors.New("zkconn: nil dialer")
	case c.resolver == nil:
		return c, errors.New("zkconn: nil resolver")
	case c.tlsSet && c.tls == nil:
		return c, errors.New("zkconn: nil TLS config")
	}
	if c.tls != nil {
		c.tls = c.tls.Clone()
	}
	return c, nil
}

// WithSessionTimeout sets the session timeout asked of the server (which
// clamps it to its own minimum and maximum, by default 2 and 20 ticks). The
// timeout the server granted (Session.SessionTimeout) also bounds how long a
// disconnected Session keeps its ZooKeeper session: it gives it up as lost
// shortly before that timeout has passed since the server last heard from
// it. The default is 30s; a value <= 0 makes Dial fail.
func WithSessionTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.sessionTimeout = d })
}

// WithLogger routes the Session's own messages (suspension and loss at Warn,
// other transitions at Debug, failures of its own at Warn or Error) and
// go-zookeeper's log lines (at Debug) into l. Only one goroutine of the
// Session calls l, so a slow l delays no suspension, no loss and no
// reconnection; while l is behind, transitions wait for it and other lines
// are dropped once 64 are queued (Debug lines once 32 are). Close, and a
// Dial that fails, return only once l has logged every transition and every
// line still queued, so they wait for a blocked l; l must not call Close.
// The default is slog.Default(); nil makes Dial fail.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) { c.logger = l })
}

// WithDigestAuth authenticates every ZooKeeper session of the Session with
// the digest scheme as user:password, before the session is reported
// connected. The default is no authentication.
func WithDigestAuth(user, password string) Option {
	return optionFunc(func(c *config) {
		c.authScheme = "digest"
		c.auth = []byte(user + ":" + password)
	})
}

// WithACL sets the ACL of every node the Session creates (lock nodes and
// their container parents). The default is zk.WorldACL(zk.PermAll); an empty
// ACL makes Dial fail.
func WithACL(acl ...zk.ACL) Option {
	return optionFunc(func(c *config) { c.acl = acl })
}

// WithDialer sets how connections to servers are made. The default is
// net.DialTimeout; nil makes Dial fail.
func WithDialer(d zk.Dialer) Option {
	return optionFunc(func(c *config) { c.dialer = d })
}

// WithResolver sets how server names are looked up, each time the Session
// starts a connection. A name that does not resolve is left out of that
// connection's servers (and logged at Warn), unless no server is left; it
// is looked up again every second while there is no session, and once it
// resolves the Session starts a connection with it. The default is
// net.DefaultResolver; nil makes Dial fail. Lookups are bounded by Dial's
// ctx, and later ones by Close: a query already sent then goes on in the
// net package, up to the resolver's timeout, without holding up Dial or
// Close.
func WithResolver(r *net.Resolver) Option {
	return optionFunc(func(c *config) { c.resolver = r })
}

// WithTLS makes the Session connect to every server over TLS with cfg, as
// ZooKeeper's secureClientPort (serverCnxnFactory NettyServerCnxnFactory)
// expects: give Dial the servers' secure ports. The default is plain TCP.
// A nil cfg makes Dial fail: a Session never falls back to plain TCP.
//
// Dial takes a copy of cfg (later changes to it do not count). For servers
// that require client certificates (ssl.clientAuth=need, their default), set
// Certificates; RootCAs says which CAs sign the servers' certificates
// (default: the system's). If ServerName is empty, each connection verifies
// the server's certificate against the host of its address as given to
// Dial, before any name is looked up: a host name (a DNS name in the
// certificate) or an IP address (an IP address in it).
//
// The handshake runs over the connection WithDialer makes, and gets at least
// a third of the session timeout. A server that refuses the handshake, or
// whose certificate cfg refuses, is tried again like one that is down; but
// when every server has refused it before any accepted a connection, Dial
// returns at once with an error wrapping ErrTLSHandshake that says why
// (every server whose name resolved; see ErrTLSHandshake).
func WithTLS(cfg *tls.Config) Option {
	return optionFunc(func(c *config) { c.tls, c.tlsSet = cfg, true })
}
