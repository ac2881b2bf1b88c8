package dsync

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/dsync-go/dsync/zkconn"
	"github.com/go-zookeeper/zk"
)

// lockMarker precedes the sequence number in a lock node's name
// (_c_<uuid>-lock-0000000042), as in Curator's InterProcessMutex.
const lockMarker = "lock-"

// sequence returns the sequence number of a node name: the digits after the
// last marker, read as ZooKeeper writes them (a signed 32-bit counter, so a
// parent that made more than 2^31 children shows negative numbers).
func sequence(name, marker string) (int32, bool) {
	i := strings.LastIndex(name, marker)
	if i < 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(name[i+len(marker):], 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(n), true
}

// queued is one child of a lock path, in queue order.
type queued struct {
	name   string
	seq    int32
	hasSeq bool
}

// order sorts the children of a lock path into queue order: by sequence
// number, with the children that carry none after them, by name.
func order(children []string, marker string) []queued {
	q := make([]queued, len(children))
	for i, c := range children {
		q[i].name = c
		q[i].seq, q[i].hasSeq = sequence(c, marker)
	}
	sort.Slice(q, func(i, j int) bool {
		a, b := q[i], q[j]
		if a.hasSeq != b.hasSeq {
			return a.hasSeq
		}
		if a.seq != b.seq {
			return a.seq < b.seq
		}
		return a.name < b.name
	})
	return q
}

// A queue is the sequential-node waiting line every primitive is built on:
// each contender creates a protected EPHEMERAL_SEQUENTIAL node under path and
// is first in line when no node with a lower sequence number is left. A
// waiter watches only the node just before its own, so one departure wakes
// one waiter.
type queue struct {
	sess   *zkconn.Session
	path   string
	marker string
	data   []byte
}

// entry is a node of ours that reached the head of the queue.
type entry struct {
	h     zkconn.Handle
	node  string // full path
	czxid int64
	own   <-chan zk.Event // watch on node (getData): fires when it is deleted or written
}

// errNodeGone means our node was deleted while we waited.
var errNodeGone = errors.New("dsync: node deleted while waiting")

// acquire puts a node of ours in the queue and, if wait is set, waits until
// it is first. With track set it also watches the node (for a hold that
// reports loss) and learns its czxid. If the session is lost on the way, it
// starts again on the next one. On failure (ctx.Err(), ErrWouldBlock, or
// another error, which names the path) no node is left behind.
func (q *queue) acquire(ctx context.Context, wait, track bool) (entry, error) {
	for {
		h, err := q.sess.Current(ctx)
		if err != nil {
			return entry{}, err
		}
		node, err := h.CreateProtected(ctx, q.path, q.marker, q.data)
		if err == nil {
			var e entry
			e, err = q.await(ctx, h, node, wait, track)
			if err == nil {
				return e, nil
			}
			h.Delete(node)
		}
		if ctx.Err() != nil {
			return entry{}, ctx.Err()
		}
		if !errors.Is(err, zkconn.ErrSessionLost) && !errors.Is(err, errNodeGone) {
			return entry{}, withPath(q.path, err)
		}
	}
}

// withPath adds path to an error of an acquisition, unless it is one the
// contracts return as is (ctx.Err(), ErrWouldBlock, bad input).
func withPath(path string, err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, ErrWouldBlock), errors.Is(err, ErrWeight), errors.Is(err, ErrBadPath):
		return err
	}
	return fmt.Errorf("dsync: %s: %w", path, err)
}

// await waits until node is first in line (see queue). It watches the node
// just ahead of its own; when that one goes and it was first in the last
// listing, node is first (a node created later sorts after node, so none
// can have come between): no second listing. Otherwise it lists again,
// since the nodes further ahead have most likely gone too.
func (q *queue) await(ctx context.Context, h zkconn.Handle, node string, wait, track bool) (entry, error) {
	e := entry{h: h, node: node}
	name := node[len(q.path)+1:]
	// Watch our own node (and learn its czxid, the fencing token) while the
	// children are listed: two requests in one round trip.
	ownc := make(chan error, 1)
	if track {
		go func() {
			var err error
			e.czxid, e.own, err = watchNode(ctx, h, node)
			ownc <- err
		}()
	} else {
		ownc <- nil
	}
	ahead, err := q.ahead(ctx, h, name)
	if ownErr := <-ownc; err == nil {
		err = ownErr
	}
	if err != nil {
		return entry{}, err
	}
	if len(ahead) > 0 && !wait {
		return entry{}, ErrWouldBlock
	}
	for len(ahead) > 0 {
		prev := q.path + "/" + ahead[len(ahead)-1].name
		var watch <-chan zk.Event
		err := h.Do(ctx, func(c *zk.Conn) (err error) {
			_, _, watch, err = c.GetW(prev)
			return err
		})
		gone := errors.Is(err, zk.ErrNoNode)
		if err != nil && !gone {
			return entry{}, err
		}
		if !gone {
			select {
			case ev := <-watch:
				gone = ev.Type == zk.EventNodeDeleted
			case ev := <-e.own:
				if ev.Type == zk.EventNodeDeleted {
					return entry{}, errNodeGone
				}
				if _, e.own, err = watchNode(ctx, h, node); err != nil {
					return entry{}, err
				}
			case <-ctx.Done():
				return entry{}, ctx.Err()
			case <-h.Lost():
				return entry{}, h.Err()
			}
		}
		switch {
		case !gone:
		case len(ahead) == 1:
			ahead = nil
		default:
			if ahead, err = q.ahead(ctx, h, name); err != nil {
				return entry{}, err
			}
		}
	}
	return e, nil
}

// ahead lists the queue and returns the nodes ahead of name, in order. It
// returns errNodeGone if name is not in the queue.
func (q *queue) ahead(ctx context.Context, h zkconn.Handle, name string) ([]queued, error) {
	var children []string
	err := h.Do(ctx, func(c *zk.Conn) (err error) {
		children, _, err = c.Children(q.path)
		return err
	})
	if err != nil {
		return nil, err
	}
	line := order(children, q.marker)
	i := indexOf(line, name)
	if i < 0 {
		return nil, errNodeGone
	}
	return line[:i], nil
}

func indexOf(line []queued, name string) int {
	for i, n := range line {
		if n.name == name {
			return i
		}
	}
	return -1
}

// watchNode sets a getData watch on node and returns it with the node's
// czxid. It returns errNodeGone if the node does not exist.
func watchNode(ctx context.Context, h zkconn.Handle, node string) (czxid int64, watch <-chan zk.Event, err error) {
	err = h.Do(ctx, func(c *zk.Conn) error {
		_, st, w, err := c.GetW(node)
		if err == nil {
			czxid, watch = st.Czxid, w
		}
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return 0, nil, errNodeGone
	}
	return czxid, watch, err
}

// validate checks what every primitive is given, before anything is sent.
func validate(sess *zkconn.Session, path string) error {
	if sess == nil {
		return ErrNilSession
	}
	if err := zkconn.ValidatePath(path); err != nil {
		return fmt.Errorf("dsync: %w", err)
	}
	return nil
}
