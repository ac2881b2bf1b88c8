package dsync

import (
	"context"
	"errors"
	"time"

	"github.com/dsync-go/dsync/zkconn"
	"github.com/go-zookeeper/zk"
)

// A Participant is one node queued on a lock path.
//
// The Participants methods read the line (one request), then each node (one
// request each, one after another), from the server the Session is
// connected to, without a sync: nodes that go away meanwhile are left out,
// and a follower may lag behind what another client already saw. They wait
// while the connection is down; a session lost meanwhile is an error
// wrapping zkconn.ErrSessionLost.
type Participant struct {
	Node     string    // node name, e.g. _c_<uuid>-lock-0000000007
	Path     string    // full path
	Session  int64     // ZooKeeper session owning the node (ephemeralOwner)
	Data     []byte    // node data: dsync writes "host=… pid=…", Curator an IP address
	Created  time.Time // server time of creation
	Sequence int32     // sequence number
	Token    int64     // czxid: the fencing token of a hold on this node
	// Waiting is set on the lease nodes of a semaphore acquirer that is
	// still waiting for room (see Weighted.Participants for the rule), and
	// on the nodes of an RWMutex that do not hold (see RWMutex.Participants).
	Waiting bool
	// Reader is set on an RWMutex reader's node (__READ__).
	Reader bool
}

// participants lists the queue in order, with each node's data and owner.
// Nodes that go away while it lists are left out.
func (q *queue) participants(ctx context.Context) ([]Participant, error) {
	return q.first(ctx, -1)
}

// first is participants limited to the first n nodes (all if n < 0): the
// others are not read.
func (q *queue) first(ctx context.Context, n int) ([]Participant, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h, err := q.sess.Current(ctx)
	if err != nil {
		return nil, err
	}
	var children []string
	err = h.Do(ctx, func(c *zk.Conn) (err error) {
		children, _, err = c.Children(q.path)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Participant
	for _, c := range q.line(children) {
		if len(out) == n {
			break
		}
		p, _, err := describe(ctx, h, q.path, c, false)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// describe reads the node n of parent's queue, setting a Watch on it if
// watch is set (see zkconn.Handle.GetW: while the session holds a watch
// there, none is added).
func describe(ctx context.Context, h zkconn.Handle, parent string, n queued, watch bool) (Participant, *zkconn.Watch, error) {
	path := parent + "/" + n.name
	var (
		data []byte
		st   *zk.Stat
		w    *zkconn.Watch
		err  error
	)
	if watch {
		data, st, w, err = h.GetW(ctx, path)
	} else {
		data, st, _, err = getNode(ctx, h, path, false)
	}
	if err != nil {
		return Participant{}, nil, err
	}
	return Participant{Node: n.name, Path: path, Sequence: n.seq, Data: data, Session: st.EphemeralOwner,
		Created: time.UnixMilli(st.Ctime), Token: st.Czxid, Reader: n.reader}, w, nil
}
