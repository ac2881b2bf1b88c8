package zktest

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// An Option configures the servers started by Start, StartServer and
// StartEnsemble. Options apply in order; for the same setting the last wins.
// A nil Option is an error (a failed test for Start and StartEnsemble).
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// Defaults of the options.
const (
	DefaultTickTime          = 200 * time.Millisecond
	DefaultMinSessionTimeout = 400 * time.Millisecond
	DefaultMaxSessionTimeout = 30 * time.Second
)

// WithTickTime sets ZooKeeper's tickTime, its basic time unit: sessions expire
// in steps of one tick, and an ensemble's initLimit and syncLimit are counted
// in ticks. The default is DefaultTickTime (200ms; ZooKeeper's own default is
// 2s), so that expiry in tests is quick. It is truncated to whole
// milliseconds; less than 1ms makes the server fail to start with an error.
func WithTickTime(d time.Duration) Option {
	return optionFunc(func(c *config) { c.tickTime = d })
}

// WithMinSessionTimeout sets the smallest session timeout the server grants
// (minSessionTimeout); a client asking for less gets this. The default is
// DefaultMinSessionTimeout (400ms). It is truncated to whole milliseconds;
// less than 1ms, or more than the maximum session timeout, makes the server
// fail to start with an error.
func WithMinSessionTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.minSessionTimeout = d })
}

// WithMaxSessionTimeout sets the largest session timeout the server grants
// (maxSessionTimeout); a client asking for more gets this. The default is
// DefaultMaxSessionTimeout (30s). It is truncated to whole milliseconds; less
// than the minimum session timeout makes the server fail to start with an
// error.
func WithMaxSessionTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.maxSessionTimeout = d })
}

// WithSystemProperty passes -Dkey=value to the server's JVM, for ZooKeeper
// settings that are Java system properties (for example
// "zookeeper.forceSync", "zookeeper.snapCount", "zookeeper.maxCnxns").
// It overrides an earlier WithSystemProperty with the same key and the
// package's defaults, which are:
//
//	zookeeper.forceSync=no                             no fsync: fast; safe against killed processes, not power cuts
//	zookeeper.admin.enableServer=false                 no AdminServer (it would bind port 8080)
//	zookeeper.jmx.log4j.disable=true                   no log4j MBeans (remote JMX is never enabled)
//	zookeeper.fastleader.maxNotificationInterval=1000  elections retry at least every second
//	java.net.preferIPv4Stack=true
//	log4j.configuration, logback.configurationFile     zktest's logging configuration (see Server.Log)
//
// A key that is empty or holds '=' or white space, or a value holding a NUL
// byte, makes the server fail to start with an error.
func WithSystemProperty(key, value string) Option {
	return optionFunc(func(c *config) {
		c.props = append(c.props, property{key, value})
	})
}

// WithJVMFlags passes flags to the server's JVM after zktest's own, which
// keep it small and quick to start (a 192 MiB heap, the serial collector,
// only the quick JIT tier): HotSpot takes the last of a repeated flag, so
// these override them. For example "-XX:TieredStopAtLevel=4" gives the full
// JIT of a production server, for measurements that run long enough to
// repay its compiling. Each flag must start with '-' and hold no NUL byte
// or white space, or the server fails to start with an error; system
// properties go through WithSystemProperty.
func WithJVMFlags(flags ...string) Option {
	return optionFunc(func(c *config) { c.jvmFlags = append(c.jvmFlags, flags...) })
}

// WithTLS makes the server also serve clients over TLS, on a port of its own
// (Server.SecureAddr; Ensemble.SecureAddrs), as production ensembles do with
// ZooKeeper's secureClientPort: the Netty connection factory, client
// certificates required. zktest makes the certificates (ECDSA P-256, as PEM
// files, in the server's directory): a CA, a server certificate for
// 127.0.0.1 and localhost, and a client certificate the server accepts
// (Server.ClientTLS, Server.TLSConfig). The members of an ensemble share
// them. The plain client port (Server.Addr) serves as before. By default a
// server has no TLS port.
//
// ZooKeeper's TLS needs Netty, whose jars Debian's ZooKeeper package brings
// (libnetty-java); without them the server fails to start with an error
// wrapping ErrNotInstalled.
func WithTLS() Option {
	return optionFunc(func(c *config) { c.tls = true })
}

// property is a Java system property.
type property struct {
	key, value string
}

// config is the resolved options.
type config struct {
	tickTime          time.Duration
	minSessionTimeout time.Duration
	maxSessionTimeout time.Duration
	props             []property // in order; a later key overrides an earlier one
	jvmFlags          []string   // after zktest's own (WithJVMFlags)
	tls               bool       // also serve on a secure client port (WithTLS)
}

// newConfig applies opts to the defaults and checks the result.
func newConfig(opts []Option) (config, error) {
	c := config{
		tickTime:          DefaultTickTime,
		minSessionTimeout: DefaultMinSessionTimeout,
		maxSessionTimeout: DefaultMaxSessionTimeout,
	}
	for _, o := range opts {
		if o == nil {
			return c, errors.New("zktest: nil option")
		}
		o.apply(&c)
	}
	return c, c.validate()
}

func (c *config) validate() error {
	if c.tickTime < time.Millisecond {
		return fmt.Errorf("zktest: tick time %v is less than 1ms", c.tickTime)
	}
	if c.minSessionTimeout < time.Millisecond {
		return fmt.Errorf("zktest: min session timeout %v is less than 1ms", c.minSessionTimeout)
	}
	if c.maxSessionTimeout < c.minSessionTimeout {
		return fmt.Errorf("zktest: max session timeout %v is less than min session timeout %v",
			c.maxSessionTimeout, c.minSessionTimeout)
	}
	for _, f := range c.jvmFlags {
		switch {
		case !strings.HasPrefix(f, "-"):
			return fmt.Errorf("zktest: JVM flag %q does not start with '-'", f)
		case strings.HasPrefix(f, "-D"):
			return fmt.Errorf("zktest: JVM flag %q: pass system properties with WithSystemProperty", f)
		case strings.ContainsFunc(f, func(r rune) bool { return unicode.IsSpace(r) || r == 0 }):
			return fmt.Errorf("zktest: JVM flag %q holds white space or a NUL byte", f)
		}
	}
	for _, p := range c.props {
		if p.key == "" || strings.ContainsFunc(p.key, func(r rune) bool { return r == '=' || unicode.IsSpace(r) || r == 0 }) {
			return fmt.Errorf("zktest: invalid system property key %q", p.key)
		}
		if strings.ContainsRune(p.value, 0) {
			return fmt.Errorf("zktest: system property %s: value holds a NUL byte", p.key)
		}
	}
	return nil
}
