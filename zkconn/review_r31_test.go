package zkconn

import (
	"strings"
	"testing"
)

// Review round 31: ValidateServers (Dial, dsync -zk).

// TestReviewR31ValidateServersForms pins which server forms ValidateServers lets through (IPv6 literals, zones, names, ports 1-65535) and which it refuses.
func TestReviewR31ValidateServersForms(t *testing.T) {
	for _, srv := range []string{"[::1]:2181", "[fe80::1%eth0]:2181", "zk1.example.com:2181", "localhost:65535", "127.0.0.1:1", "zk1:02181"} {
		if err := ValidateServers([]string{srv}); err != nil {
			t.Errorf("ValidateServers(%q) = %v; want nil", srv, err)
		}
	}
	for srv, want := range map[string]string{
		"zk1:2181/app": "chroot",
		"zk1:2181/":    "chroot",
		"zk1:0":        "port",
		"zk1:65536":    "port",
		"zk1:-1":       "port",
		"zk1":          "missing port",
		"::1:2181":     "too many colons",
		// A service name: net.Dialer would look it up; ZooKeeper's and
		// Curator's connect-string parsers take only a number.
		"zk1:zookeeper": "port",
	} {
		err := ValidateServers([]string{srv})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateServers(%q) = %v; want an error about %q", srv, err, want)
		}
	}
}
