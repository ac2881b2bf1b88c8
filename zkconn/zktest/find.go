package zktest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// EnvClasspath names the environment variable that tells zktest where
// ZooKeeper is: a Java classpath (entries separated by ':') holding ZooKeeper's
// jars and an SLF4J binding, for example "/opt/zookeeper/lib/*". When it is set
// and not empty it is used as is; otherwise zktest uses Debian's installation
// (package zookeeper).
const EnvClasspath = "DSYNC_ZOOKEEPER_CLASSPATH"

// What to do when something is missing.
const (
	installCmd  = "apt-get install zookeeper default-jdk-headless"
	javaHint    = "install Java and ZooKeeper with: " + installCmd + " (or set JAVA_HOME to a JDK)"
	installHint = "install ZooKeeper and Java with: " + installCmd +
		" (or set " + EnvClasspath + " to a Java classpath holding ZooKeeper's jars)"
)

// Debian's layout: its zookeeper.jar's manifest names its dependencies, except
// for an SLF4J binding, without which the server logs nothing at all.
const (
	debianConfDir = "/etc/zookeeper/conf"
	debianJar     = "/usr/share/java/zookeeper.jar"
)

// debianLogJars bind SLF4J to log4j 1.2, the logger Debian's ZooKeeper is
// configured for (its package depends on both).
var debianLogJars = []string{
	"/usr/share/java/slf4j-log4j12.jar",
	"/usr/share/java/log4j-1.2.jar",
}

// debianNettyJars complete the Netty that zookeeper.jar's manifest names
// (buffer, common, handler, transport, epoll) with the jars those need and
// the manifest leaves out: without them the Netty connection factory, which
// TLS needs (WithTLS), cannot load. They come with libnetty-java, which
// Debian's ZooKeeper depends on.
var debianNettyJars = []string{
	"/usr/share/java/netty-codec.jar",
	"/usr/share/java/netty-resolver.jar",
	"/usr/share/java/netty-transport-native-unix-common.jar",
}

// nettyHint says how to get Debian's Netty jars.
const nettyHint = "install Netty, which ZooKeeper's TLS needs, with: apt-get install libnetty-java" +
	" (or set " + EnvClasspath + " to a Java classpath holding ZooKeeper's jars and Netty's)"

// mainClass runs both standalone servers and quorum members.
const mainClass = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

// installation is what it takes to run a ZooKeeper server.
type installation struct {
	java      string // path of the java executable
	classpath string
}

// findInstallation locates java and ZooKeeper, and with tls Netty too, or
// says what to install.
func findInstallation(tls bool) (installation, error) {
	java, err := findJava()
	if err != nil {
		return installation{}, err
	}
	cp, err := findClasspath(tls)
	if err != nil {
		return installation{}, err
	}
	return installation{java: java, classpath: cp}, nil
}

// findJava returns $JAVA_HOME/bin/java if it is executable, else java from $PATH.
func findJava() (string, error) {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		p := filepath.Join(home, "bin", "java")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	p, err := exec.LookPath("java")
	if err != nil {
		return "", fmt.Errorf("%w: java not found in $JAVA_HOME/bin or $PATH; %s", ErrNotInstalled, javaHint)
	}
	return p, nil
}

// findClasspath returns $DSYNC_ZOOKEEPER_CLASSPATH, else Debian's classpath
// with the log4j binding appended, and with tls the rest of Netty.
func findClasspath(tls bool) (string, error) {
	if cp := os.Getenv(EnvClasspath); cp != "" {
		return cp, nil
	}
	if _, err := os.Stat(debianJar); err != nil {
		return "", fmt.Errorf("%w: ZooKeeper not found (%s: %v); %s", ErrNotInstalled, debianJar, err, installHint)
	}
	var parts []string
	if fi, err := os.Stat(debianConfDir); err == nil && fi.IsDir() {
		parts = append(parts, debianConfDir)
	}
	parts = append(parts, debianJar)
	if allExist(debianLogJars) {
		parts = append(parts, debianLogJars...)
	}
	if tls {
		if missing := firstMissing(debianNettyJars); missing != "" {
			return "", fmt.Errorf("%w: %s not found; %s", ErrNotInstalled, missing, nettyHint)
		}
		parts = append(parts, debianNettyJars...)
	}
	return strings.Join(parts, string(os.PathListSeparator)), nil
}

func allExist(paths []string) bool { return firstMissing(paths) == "" }

// firstMissing returns the first of paths that does not exist, or "".
func firstMissing(paths []string) string {
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return p
		}
	}
	return ""
}
