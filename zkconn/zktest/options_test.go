package zktest

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	c, err := newConfig(nil)
	if err != nil {
		t.Fatalf("newConfig() error: %v", err)
	}
	if c.tickTime != 200*time.Millisecond || c.minSessionTimeout != 400*time.Millisecond || c.maxSessionTimeout != 30*time.Second {
		t.Errorf("defaults = %v/%v/%v; want 200ms/400ms/30s", c.tickTime, c.minSessionTimeout, c.maxSessionTimeout)
	}
}

func TestConfigInvalid(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []Option
	}{
		{"zero tick", []Option{WithTickTime(0)}},
		{"sub-millisecond tick", []Option{WithTickTime(time.Microsecond)}},
		{"zero min session timeout", []Option{WithMinSessionTimeout(0)}},
		{"max below min", []Option{WithMinSessionTimeout(2 * time.Second), WithMaxSessionTimeout(time.Second)}},
		{"empty property key", []Option{WithSystemProperty("", "x")}},
		{"property key with =", []Option{WithSystemProperty("a=b", "x")}},
		{"property key with space", []Option{WithSystemProperty("a b", "x")}},
		{"property value with NUL", []Option{WithSystemProperty("a", "x\x00")}},
		{"JVM flag without -", []Option{WithJVMFlags("Xmx1g")}},
		{"empty JVM flag", []Option{WithJVMFlags("")}},
		{"JVM flag with space", []Option{WithJVMFlags("-Xmx1g -Xms1g")}},
		{"JVM flag with NUL", []Option{WithJVMFlags("-Xmx1g\x00")}},
		{"system property as JVM flag", []Option{WithJVMFlags("-Dzookeeper.forceSync=yes")}},
		{"nil option", []Option{WithTickTime(time.Second), nil}},
	} {
		if _, err := newConfig(tt.opts); err == nil {
			t.Errorf("%s: newConfig() error = nil; want an error", tt.name)
		}
	}
	// Invalid options fail StartServer before anything starts.
	if s, err := StartServer(WithTickTime(-time.Second)); err == nil {
		s.Close()
		t.Errorf("StartServer(WithTickTime(-1s)) error = nil; want an error")
	}
}

func TestZooCfg(t *testing.T) {
	c, err := newConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	standalone := c.zooCfg(&layout{dir: "/x", clientPort: 12345})
	for _, want := range []string{
		"tickTime=200\n",
		"minSessionTimeout=400\n",
		"maxSessionTimeout=30000\n",
		"dataDir=/x/data\n",
		"clientPort=12345\n",
		"clientPortAddress=127.0.0.1\n",
		"4lw.commands.whitelist=*\n",
		"admin.enableServer=false\n",
		"standaloneEnabled=true\n",
	} {
		if !strings.Contains(standalone, want) {
			t.Errorf("standalone zoo.cfg lacks %q:\n%s", want, standalone)
		}
	}
	if strings.Contains(standalone, "server.") {
		t.Errorf("standalone zoo.cfg lists servers:\n%s", standalone)
	}

	members := []member{{1, 2001, 2002}, {2, 2004, 2005}, {3, 2007, 2008}}
	member2 := c.zooCfg(&layout{dir: "/y", clientPort: 2003, id: 2, members: members})
	for _, want := range []string{
		"standaloneEnabled=false\n",
		"initLimit=100\n", // 20s of 200ms ticks
		"syncLimit=25\n",  // 5s
		"server.1=127.0.0.1:2001:2002\n",
		"server.2=127.0.0.1:2004:2005\n",
		"server.3=127.0.0.1:2007:2008\n",
	} {
		if !strings.Contains(member2, want) {
			t.Errorf("member zoo.cfg lacks %q:\n%s", want, member2)
		}
	}
}

func TestZooCfgTLS(t *testing.T) {
	c, err := newConfig([]Option{WithTLS()})
	if err != nil || !c.tls {
		t.Fatalf("newConfig(WithTLS()) = %+v, %v; want tls", c, err)
	}
	m := &tlsMaterial{keyStore: "/x/tls/server.pem", trustStore: "/x/tls/ca.pem"}
	cfg := c.zooCfg(&layout{dir: "/x", clientPort: 12345, securePort: 12346, tls: m})
	for _, want := range []string{
		"clientPort=12345\n",
		"secureClientPort=12346\n",
		"secureClientPortAddress=127.0.0.1\n",
		"serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n",
		"ssl.keyStore.location=/x/tls/server.pem\n",
		"ssl.keyStore.type=PEM\n",
		"ssl.trustStore.location=/x/tls/ca.pem\n",
		"ssl.trustStore.type=PEM\n",
		"ssl.clientAuth=need\n",
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("TLS zoo.cfg lacks %q:\n%s", want, cfg)
		}
	}
	if plain := c.zooCfg(&layout{dir: "/x", clientPort: 12345}); strings.Contains(plain, "secure") || strings.Contains(plain, "ssl.") {
		t.Errorf("zoo.cfg without TLS material has TLS lines:\n%s", plain)
	}
}

// TestTLSNeedsNetty: without Netty's jars, a server WithTLS fails to start
// with an error that says what to install; one without TLS does not need
// them.
func TestTLSNeedsNetty(t *testing.T) {
	t.Setenv(EnvClasspath, "")
	saved := debianNettyJars
	t.Cleanup(func() { debianNettyJars = saved })
	debianNettyJars = []string{t.TempDir() + "/netty-codec.jar"}
	if _, err := findClasspath(false); err != nil {
		t.Errorf("findClasspath(false) without Netty: %v", err)
	}
	_, err := findClasspath(true)
	if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "apt-get install libnetty-java") {
		t.Errorf("findClasspath(true) without Netty = %v; want ErrNotInstalled saying to install libnetty-java", err)
	}
	if s, err := StartServer(WithTLS()); !errors.Is(err, ErrNotInstalled) {
		if err == nil {
			s.Close()
		}
		t.Errorf("StartServer(WithTLS()) without Netty = %v; want ErrNotInstalled", err)
	}
}

func TestJVMArgs(t *testing.T) {
	c, err := newConfig([]Option{
		WithSystemProperty("zookeeper.forceSync", "yes"),
		WithSystemProperty("my.prop", "1"),
		WithSystemProperty("my.prop", "2"),
		WithJVMFlags("-XX:TieredStopAtLevel=4"),
		WithJVMFlags("-Xmx512m"),
	})
	if err != nil {
		t.Fatal(err)
	}
	args := c.jvmArgs(&layout{dir: "/z"}, "/cp.jar")
	// HotSpot takes the last of a repeated flag: the caller's come after
	// zktest's, in the order given.
	for _, pair := range [][2]string{
		{"-XX:TieredStopAtLevel=1", "-XX:TieredStopAtLevel=4"},
		{"-Xmx192m", "-Xmx512m"},
		{"-XX:TieredStopAtLevel=4", "-Xmx512m"},
	} {
		i, j := slices.Index(args, pair[0]), slices.Index(args, pair[1])
		if i < 0 || j < 0 || i > j {
			t.Errorf("jvmArgs(): %q at %d, %q at %d; want both, in that order: %q", pair[0], i, pair[1], j, args)
		}
	}
	joined := strings.Join(args, " ")
	for _, want := range []string{
		"-Xmx192m",
		"-Dzookeeper.forceSync=yes", // overrides the default
		"-Dmy.prop=2",
		"-Dlog4j.configuration=file:/z/log4j.properties",
		"-cp /cp.jar " + mainClass + " /z/zoo.cfg",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("jvmArgs() lacks %q: %s", want, joined)
		}
	}
	for _, unwanted := range []string{"-Dzookeeper.forceSync=no", "-Dmy.prop=1", "jmxremote"} {
		if strings.Contains(joined, unwanted) {
			t.Errorf("jvmArgs() has %q: %s", unwanted, joined)
		}
	}
}
