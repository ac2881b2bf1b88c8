package zktest_test

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// tlsDialer is a go-zookeeper dialer that connects over TLS with cfg.
func tlsDialer(cfg *tls.Config) zk.Dialer {
	cfg = cfg.Clone()
	cfg.ServerName = "127.0.0.1"
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: cfg}
		return d.Dial(network, addr)
	}
}

// handshake makes a TLS connection to addr with cfg and closes it.
func handshake(addr string, cfg *tls.Config) error {
	cfg = cfg.Clone()
	cfg.ServerName = "127.0.0.1"
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: cfg}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// TestTLSServer: a server started WithTLS serves a go-zookeeper client with
// its client certificate on its secure port, the same tree as on its plain
// port, and again after a restart; it refuses a client without a
// certificate or with one from another CA, and a client trusting another CA
// refuses it.
func TestTLSServer(t *testing.T) {
	s := zktest.Start(t, zktest.WithTLS())
	if !strings.HasPrefix(s.SecureAddr(), "127.0.0.1:") || s.SecureAddr() == s.Addr() {
		t.Fatalf("SecureAddr() = %q (Addr() = %q); want another 127.0.0.1:port", s.SecureAddr(), s.Addr())
	}
	files := s.ClientTLS()
	for _, f := range []string{files.CA, files.Cert, files.Key} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("ClientTLS() names %q: %v", f, err)
		}
	}
	fromFiles, err := files.Config()
	if err != nil {
		t.Fatalf("ClientTLS().Config() error: %v", err)
	}

	for _, cfg := range []*tls.Config{s.TLSConfig(), fromFiles} {
		conn, _, err := zk.Connect([]string{s.SecureAddr()}, 10*time.Second,
			zk.WithDialer(tlsDialer(cfg)), zk.WithLogger(testLogger{t}))
		if err != nil {
			t.Fatal(err)
		}
		node := "/tls-" + strings.ReplaceAll(t.Name(), "/", "_")
		_, err = conn.Create(node, []byte("secure"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		conn.Close()
		if err != nil {
			t.Fatalf("Create over TLS: %v", err)
		}
	}
	plain := connect(t, []string{s.Addr()}, 10*time.Second)
	if _, _, err := plain.Get("/zookeeper"); err != nil {
		t.Errorf("Get on the plain port: %v", err)
	}

	misfits, err := zktest.MisfitTLSConfigs(s.TLSConfig(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range misfits {
		err := handshake(s.SecureAddr(), m.Config)
		var verify *tls.CertificateVerificationError
		var op *net.OpError
		if err == nil || !errors.As(err, &verify) && !(errors.As(err, &op) && op.Op == "remote error") {
			t.Errorf("%s: handshake = %v; want a refusal", m.Name, err)
		}
	}

	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := handshake(s.SecureAddr(), s.TLSConfig()); err != nil {
		t.Errorf("handshake after Restart: %v", err)
	}
}
