package zkconn

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// ValidateServers reports why Dial refuses servers before it looks up or
// dials any: none given, or one that is not "host:port" with a port number
// from 1 to 65535. A ZooKeeper connect string's chroot suffix
// ("host:port/app") is refused too, with an error that says so: a Session
// works in the whole namespace, so paths under a chroot are given in full
// ("/app/locks/x"). Taking "port/app" as a port would lock outside the
// chroot where a Curator peer given the same connect string locks.
func ValidateServers(servers []string) error {
	if len(servers) == 0 {
		return errors.New("zkconn: no servers")
	}
	for _, srv := range servers {
		if err := validateServer(srv); err != nil {
			return fmt.Errorf("zkconn: server %q: %w", srv, err)
		}
	}
	return nil
}

func validateServer(srv string) error {
	_, port, err := net.SplitHostPort(srv)
	if err != nil {
		return err
	}
	if i := strings.IndexByte(port, '/'); i >= 0 {
		return fmt.Errorf("a chroot (%s) is not supported: give paths under it in full", port[i:])
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return errors.New("the port must be a number from 1 to 65535")
	}
	return nil
}
