package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
	"github.com/dsync-go/dsync/zkconn/zktest"
)

// tlsArgs returns -zk and the TLS flags for addr and files.
func tlsArgs(addr string, files zktest.TLSFiles) []string {
	return []string{"-zk", addr, "-tls-ca", files.CA, "-tls-cert", files.Cert, "-tls-key", files.Key}
}

// args joins flags and the rest of a command line.
func args(cmd string, flags []string, rest ...string) []string {
	return append(append([]string{cmd}, flags...), rest...)
}

// TestTLS runs the tests that need a server with a TLS port, on one.
func TestTLS(t *testing.T) {
	t.Parallel()
	srv := zktest.Start(t, zktest.WithTLS())
	t.Run("Lock", func(t *testing.T) { testTLSLock(t, srv) })
	t.Run("Refused", func(t *testing.T) { testTLSLockRefused(t, srv) })
}

// testTLSLock: over TLS, a dsync Mutex held by a zkconn Session excludes
// "dsync lock -tls-*", which "dsync ls -tls-*" shows; once it is unlocked
// dsync lock takes it, with a greater fencing token.
func testTLSLock(t *testing.T, srv *zktest.Server) {
	flags := tlsArgs(srv.SecureAddr(), srv.ClientTLS())
	path := lockPath(t)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sess, err := zkconn.Dial(ctx, []string{srv.SecureAddr()}, zkconn.WithTLS(srv.TLSConfig()))
	if err != nil {
		t.Fatalf("Dial over TLS: %v", err)
	}
	defer sess.Close()
	h, err := sess.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := dsync.NewMutex(sess, path)
	if _, err := m.LockContext(ctx); err != nil {
		t.Fatalf("LockContext over TLS: %v", err)
	}
	token := m.Token()

	marker := filepath.Join(t.TempDir(), "ran")
	code, _, stderr := dsyncRun(t, args("lock", flags, "-try", path, "--", "touch", marker)...)
	if code != exitFail || !strings.Contains(stderr, "dsync: "+path+" is held") {
		t.Fatalf("dsync lock -try -tls-* on a held lock: exit %d, stderr %q; want 1 and %q", code, stderr, path+" is held")
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("CMD ran without the lock")
	}
	code, stdout, stderr := dsyncRun(t, args("ls", flags, path)...)
	if session := fmt.Sprintf("0x%x", h.ID()); code != 0 || !strings.Contains(stdout, session) {
		t.Errorf("dsync ls -tls-*: exit %d, stdout %q, stderr %q; want 0 and the holder's session %s", code, stdout, stderr, session)
	}

	m.Unlock()
	code, stdout, stderr = dsyncRun(t, args("lock", flags, path, "--", "sh", "-c", `echo "$DSYNC_TOKEN"`)...)
	if code != 0 {
		t.Fatalf("dsync lock -tls-* on a free lock: exit %d; stderr:\n%s", code, stderr)
	}
	if got, err := strconv.ParseInt(strings.TrimSpace(stdout), 10, 64); err != nil || got <= token {
		t.Errorf("DSYNC_TOKEN = %q; want more than the Mutex's %d", stdout, token)
	}
}

// testTLSLockRefused: "dsync lock" whose TLS handshake every server
// refuses (no client certificate, one of another CA, or a server
// certificate it does not trust) exits 1 at once, saying why, long before
// -dial-timeout; without TLS flags on a secure port it gives up after
// -dial-timeout. CMD never runs.
func testTLSLockRefused(t *testing.T, srv *zktest.Server) {
	good := srv.ClientTLS()
	stranger, err := zktest.NewTLSFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	for _, tt := range []struct {
		name  string
		flags []string
		want  []string // in stderr
	}{
		{"no client certificate", []string{"-tls-ca", good.CA},
			[]string{"TLS handshake refused", "the client presented no certificate"}},
		{"client certificate of another CA", []string{"-tls-ca", good.CA, "-tls-cert", stranger.Cert, "-tls-key", stranger.Key},
			[]string{"TLS handshake refused", "refused by the server", "certificate"}},
		{"server certificate of another CA", []string{"-tls-ca", stranger.CA, "-tls-cert", good.Cert, "-tls-key", good.Key},
			[]string{"TLS handshake refused", "certificate signed by unknown authority"}},
	} {
		flags := append([]string{"-zk", srv.SecureAddr(), "-dial-timeout", "50s"}, tt.flags...)
		code, _, stderr := dsyncRun(t, args("lock", flags, lockPath(t), "--", "touch", marker)...)
		t.Logf("%s: %s", tt.name, stderr)
		if code != exitFail {
			t.Errorf("%s: exit %d; want 1 (stderr %q)", tt.name, code, stderr)
		}
		for _, w := range tt.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr %q; want it to contain %q", tt.name, stderr, w)
			}
		}
	}
	code, _, stderr := dsyncRun(t, "lock", "-zk", srv.SecureAddr(), "-dial-timeout", "1s", lockPath(t), "--", "touch", marker)
	if code != exitFail || !strings.Contains(stderr, "no ZooKeeper server answered within 1s") {
		t.Errorf("plain dsync lock on a secure port: exit %d, stderr %q; want 1 and no server answered", code, stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("CMD ran without the lock")
	}
}

// TestTLSFlagsBadUsage: TLS flags without their partner, and files that
// cannot be read or used, are bad usage (exit 2), found before any dial.
func TestTLSFlagsBadUsage(t *testing.T) {
	t.Parallel()
	a, err := zktest.NewTLSFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := zktest.NewTLSFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, tt := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"cert without key", []string{"-tls-cert", a.Cert}, "-tls-cert needs -tls-key"},
		{"key without cert", []string{"-tls-key", a.Key}, "-tls-key needs -tls-cert"},
		{"missing CA file", []string{"-tls-ca", missing}, "-tls-ca: open " + missing},
		{"CA file without a certificate", []string{"-tls-ca", a.Key}, "no PEM certificate"},
		{"missing cert file", []string{"-tls-cert", missing, "-tls-key", a.Key}, "no such file"},
		{"key of another cert", []string{"-tls-cert", a.Cert, "-tls-key", b.Key}, "private key does not match public key"},
	} {
		for _, cmd := range [][]string{{"lock", "/x", "--", "true"}, {"ls", "/x"}, {"revoke", "/x"}} {
			line := append(append([]string{cmd[0], "-zk", "127.0.0.1:1"}, tt.flags...), cmd[1:]...)
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), line, &stdout, &stderr)
			if code != exitUsage || !strings.Contains(stderr.String(), tt.want) || !strings.Contains(stderr.String(), "usage: dsync "+cmd[0]) {
				t.Errorf("%s: dsync %q: exit %d, stderr %q; want 2, %q and the usage", tt.name, line, code, stderr.String(), tt.want)
			}
		}
	}
}

// TestTLSHelp: every command that dials documents the TLS flags.
func TestTLSHelp(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"lock", "sem", "ls", "revoke"} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{cmd, "-h"}, &stdout, &stderr); code != 0 {
			t.Errorf("dsync %s -h exited %d", cmd, code)
		}
		for _, w := range []string{"-tls-ca FILE", "-tls-cert FILE", "-tls-key FILE"} {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("dsync %s -h lacks %q:\n%s", cmd, w, stdout.String())
			}
		}
	}
}
