package zktest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The files of one server, under its directory.
const (
	cfgFile     = "zoo.cfg"
	log4jFile   = "log4j.properties"
	logbackFile = "logback.xml"
	logFile     = "zookeeper.log" // the JVM's stdout and stderr, where both logging configurations write
	dataSubdir  = "data"
)

// jvmFlags keep a server's JVM small and quick to start on a small machine:
// a little heap, the serial collector, only the quick JIT tier, the shared
// class archive, no perf-data file in /tmp.
var jvmFlags = []string{
	"-Xms16m",
	"-Xmx192m",
	"-XX:+UseSerialGC",
	"-XX:TieredStopAtLevel=1",
	"-Xshare:auto",
	"-XX:-UsePerfData",
	"-XX:+ExitOnOutOfMemoryError",
	"-Djava.awt.headless=true",
}

// Ensembles get initLimit and syncLimit of at least these, rounded up to
// whole ticks: generous, so that a busy two-core machine does not make
// followers miss the leader.
const (
	ensembleInitLimit = 20 * time.Second
	ensembleSyncLimit = 5 * time.Second
)

// member is one server of an ensemble as the ensemble's configuration lists it.
type member struct {
	id                     int // myid, from 1
	peerPort, electionPort int
}

// layout is where a server lives and whom it talks to.
type layout struct {
	dir        string
	clientPort int
	id         int          // myid of an ensemble member; 0 for a standalone server
	members    []member     // the ensemble; nil for a standalone server
	securePort int          // the TLS client port (WithTLS); 0 for none
	tls        *tlsMaterial // its certificates; nil for none
}

func (l *layout) dataDir() string { return filepath.Join(l.dir, dataSubdir) }

// writeFiles writes the server's configuration, logging configuration and,
// for an ensemble member, its myid file. It keeps the data directory's
// contents, so that a server started again finds its data.
func (c *config) writeFiles(l *layout) error {
	if err := os.MkdirAll(l.dataDir(), 0o755); err != nil {
		return fmt.Errorf("zktest: %w", err)
	}
	files := map[string]string{
		filepath.Join(l.dir, cfgFile):     c.zooCfg(l),
		filepath.Join(l.dir, log4jFile):   log4jConfig,
		filepath.Join(l.dir, logbackFile): logbackConfig,
	}
	if l.id != 0 {
		files[filepath.Join(l.dataDir(), "myid")] = fmt.Sprintf("%d\n", l.id)
	}
	for name, text := range files {
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			return fmt.Errorf("zktest: %w", err)
		}
	}
	return nil
}

// zooCfg renders zoo.cfg.
func (c *config) zooCfg(l *layout) string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("# written by zktest")
	line("tickTime=%d", c.tickTime.Milliseconds())
	line("minSessionTimeout=%d", c.minSessionTimeout.Milliseconds())
	line("maxSessionTimeout=%d", c.maxSessionTimeout.Milliseconds())
	line("dataDir=%s", l.dataDir())
	line("clientPort=%d", l.clientPort)
	line("clientPortAddress=127.0.0.1")
	line("maxClientCnxns=0") // every client comes from 127.0.0.1; ZooKeeper's default allows 60
	line("4lw.commands.whitelist=*")
	line("admin.enableServer=false")
	line("autopurge.purgeInterval=0")
	if l.tls != nil {
		// Keys ZooKeeper does not know become system properties with
		// "zookeeper." before them: serverCnxnFactory and ssl.* among them.
		line("secureClientPort=%d", l.securePort)
		line("secureClientPortAddress=127.0.0.1")
		line("serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory")
		line("ssl.keyStore.location=%s", l.tls.keyStore)
		line("ssl.keyStore.type=PEM")
		line("ssl.trustStore.location=%s", l.tls.trustStore)
		line("ssl.trustStore.type=PEM")
		line("ssl.clientAuth=need")
	}
	if len(l.members) == 0 {
		line("standaloneEnabled=true")
		return b.String()
	}
	line("standaloneEnabled=false")
	line("reconfigEnabled=false")
	line("initLimit=%d", ticks(ensembleInitLimit, c.tickTime))
	line("syncLimit=%d", ticks(ensembleSyncLimit, c.tickTime))
	for _, m := range l.members {
		line("server.%d=127.0.0.1:%d:%d", m.id, m.peerPort, m.electionPort)
	}
	return b.String()
}

// ticks returns d in ticks of length tick, rounded up, and at least 2.
func ticks(d, tick time.Duration) int64 {
	n := int64((d + tick - 1) / tick)
	return max(n, 2)
}

// jvmArgs returns the arguments of java that run the server of l.
func (c *config) jvmArgs(l *layout, classpath string) []string {
	defaults := []property{
		{"zookeeper.forceSync", "no"},
		{"zookeeper.admin.enableServer", "false"},
		{"zookeeper.jmx.log4j.disable", "true"},
		{"zookeeper.fastleader.maxNotificationInterval", "1000"},
		{"java.net.preferIPv4Stack", "true"},
		{"log4j.configuration", "file:" + filepath.Join(l.dir, log4jFile)},
		{"logback.configurationFile", filepath.Join(l.dir, logbackFile)},
	}
	props := mergeProps(defaults, c.props)
	args := append(append([]string(nil), jvmFlags...), c.jvmFlags...)
	for _, p := range props {
		args = append(args, "-D"+p.key+"="+p.value)
	}
	return append(args, "-cp", classpath, mainClass, filepath.Join(l.dir, cfgFile))
}

// mergeProps returns the properties of all lists, in order of first
// appearance, each with its last value.
func mergeProps(lists ...[]property) []property {
	var out []property
	index := map[string]int{}
	for _, list := range lists {
		for _, p := range list {
			if i, ok := index[p.key]; ok {
				out[i].value = p.value
				continue
			}
			index[p.key] = len(out)
			out = append(out, p)
		}
	}
	return out
}

// log4jConfig is for log4j 1.2, which Debian's ZooKeeper logs through; it
// writes to stdout, which zktest points at the server's log file.
const log4jConfig = `# written by zktest: the server log goes to stdout, which is the file zookeeper.log
log4j.rootLogger=INFO, OUT
log4j.appender.OUT=org.apache.log4j.ConsoleAppender
log4j.appender.OUT.Target=System.out
log4j.appender.OUT.layout=org.apache.log4j.PatternLayout
log4j.appender.OUT.layout.ConversionPattern=%d{ISO8601} [myid:%X{myid}] %-5p [%t:%c{1}] - %m%n
`

// logbackConfig is for logback, which upstream's ZooKeeper 3.8 logs through
// (when EnvClasspath points at an upstream release).
const logbackConfig = `<!-- written by zktest: the server log goes to stdout, which is the file zookeeper.log -->
<configuration>
  <appender name="OUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder>
      <pattern>%d{ISO8601} [myid:%X{myid}] %-5level [%thread:%logger{0}] - %msg%n</pattern>
    </encoder>
  </appender>
  <root level="INFO">
    <appender-ref ref="OUT"/>
  </root>
</configuration>
`
