package zktest

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
)

func TestFindJavaMissing(t *testing.T) {
	t.Setenv("JAVA_HOME", "")
	t.Setenv("PATH", t.TempDir())
	_, err := StartServer()
	if !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("StartServer() without java error = %v; want ErrNotInstalled", err)
	}
	if !strings.Contains(err.Error(), "apt-get install zookeeper default-jdk-headless") {
		t.Errorf("error %q does not say what to install", err)
	}
}

func TestFindClasspathOverride(t *testing.T) {
	t.Setenv(EnvClasspath, "/opt/zookeeper/lib/*")
	for _, tls := range []bool{false, true} {
		cp, err := findClasspath(tls)
		if err != nil || cp != "/opt/zookeeper/lib/*" {
			t.Errorf("findClasspath(%v) = %q, %v; want the value of %s", tls, cp, err, EnvClasspath)
		}
	}
}

// TestStartBadClasspath checks that a JVM that cannot start is reported with
// the end of its log.
func TestStartBadClasspath(t *testing.T) {
	t.Setenv(EnvClasspath, t.TempDir()+"/no-such.jar")
	s, err := StartServer()
	if err == nil {
		s.Close()
		t.Fatalf("StartServer() with a bad classpath error = nil; want an error")
	}
	if !strings.Contains(err.Error(), "QuorumPeerMain") {
		t.Errorf("StartServer() error does not show the JVM's complaint: %v", err)
	}
}

func TestFreePorts(t *testing.T) {
	ports, err := freePorts(6)
	if err != nil {
		t.Fatalf("freePorts() error: %v", err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Errorf("freePorts() = %v: %d twice", ports, p)
		}
		seen[p] = true
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Errorf("port %d from freePorts() is not free: %v", p, err)
			continue
		}
		ln.Close()
	}
}
