package zkconn

import (
	"fmt"

	"github.com/go-zookeeper/zk"
)

// maxRequest is the largest request, in bytes, a ZooKeeper server takes by
// default (jute.maxbuffer): it closes the connection of a client that sends
// a larger one.
const maxRequest = 1<<20 - 1

// CheckMulti returns an error wrapping ErrTooLarge if a transaction of ops
// (*zk.CreateRequest, *zk.CheckVersionRequest) would be larger than
// ZooKeeper takes in one request, for a caller that must know it fits
// before it does something else: a send of such a request fails the same
// way, but only then. It panics on any other op.
func CheckMulti(ops ...any) error {
	const (
		header = 4 + 4     // xid, opcode
		op     = 4 + 1 + 4 // each op's header (type, done, error), and the end's
	)
	n := header + op
	for _, o := range ops {
		n += op
		switch o := o.(type) {
		case *zk.CheckVersionRequest:
			n += 4 + len(o.Path) + 4
		case *zk.CreateRequest:
			n += 4 + len(o.Path) + 4 + len(o.Data) + 4 + 4
			for _, a := range o.Acl {
				n += 4 + 4 + len(a.Scheme) + 4 + len(a.ID)
			}
		default:
			panic(fmt.Sprintf("zkconn: CheckMulti of %T", o))
		}
	}
	if n > maxRequest {
		return fmt.Errorf("%w: a transaction of %d bytes", ErrTooLarge, n)
	}
	return nil
}
