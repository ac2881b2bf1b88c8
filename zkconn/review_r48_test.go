package zkconn

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// Review round 48b: the failure paths of zkconn that no other test reaches.

// endingCtx is a context that ends (canceled) at the first look at it (Err)
// after at closes: a caller's ctx that ends in the narrowest window there
// is, after a reply has come back and before the caller looks at ctx
// again, hit every time. Done and Err agree at every moment: ctx is
// canceled before Err reports it.
type endingCtx struct {
	context.Context
	cancel context.CancelFunc
	at     <-chan struct{}
}

// endAfter returns an endingCtx that ends after at closes, or a minute
// after the call.
func endAfter(t *testing.T, at <-chan struct{}) *endingCtx {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return &endingCtx{Context: ctx, cancel: cancel, at: at}
}

func (c *endingCtx) Err() error {
	select {
	case <-c.at:
		c.cancel()
	default:
	}
	return c.Context.Err()
}

// r48Setup dials a Session through a proxy to the shared server, and makes
// root.
func r48Setup(t *testing.T) (p *zktest.Proxy, s *Session, h Handle, obs *zk.Conn, root string) {
	t.Helper()
	p = zktest.NewProxy(t, shared.Addr())
	s = dial(t, []string{p.Addr()}, WithSessionTimeout(20*time.Second))
	h = current(t, s)
	obs = zktest.Observer(t, shared.Addr())
	root = testRoot(t)
	if err := h.CreateParents(context.Background(), root); err != nil {
		t.Fatal(err)
	}
	return p, s, h, obs, root
}

// settleDeletes waits, within 30s, for the deletes h's session has under
// way below parent.
func settleDeletes(t *testing.T, h Handle, parent string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for p, ch := range h.Deleting(parent) {
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("the delete of %s did not settle within 30s", p)
		}
	}
}

// noChildren fails the test unless parent has no children. A parent that
// is gone has none: ZooKeeper reaps an empty container once it has had a
// child, at a check every 60 s, which may land right after the test's last
// node under it was deleted.
func noChildren(t *testing.T, obs *zk.Conn, parent, what string) {
	t.Helper()
	if kids, _, err := obs.Children(parent); err != nil && !errors.Is(err, zk.ErrNoNode) || len(kids) != 0 {
		t.Fatalf("%s: children of %s = %v, %v; want none (orphaned)", what, parent, kids, err)
	}
}

// struck fails the test unless f has struck.
func struck(t *testing.T, f *zktest.Fault, what string) {
	t.Helper()
	select {
	case <-f.Struck():
	default:
		t.Fatalf("the fault on %s did not strike", what)
	}
}

// TestReviewR48RecoveredCtxEnded pins recoverProtected's end of ctx
// (protected.go, "if err := ctx.Err(); err != nil { h.Delete(p) ..."): the
// create's reply is lost (Lose), the recovery finds the node, ours, and
// ctx ends just as the read of it comes back. CreateProtected returns
// ctx's error, and the node is deleted: nothing orphaned. (That Delete has
// a second: createProtected's forgetProtected follows any error of the
// recovery. Without the check, the node is returned as made after ctx
// ended.)
func TestReviewR48RecoveredCtxEnded(t *testing.T) {
	t.Parallel()
	p, _, h, obs, root := r48Setup(t)
	lose := p.Strike(createMatch(root), zktest.Lose)
	defer lose.Disarm()
	read := p.Strike(zktest.Match{Op: zktest.OpGetData, Path: root + "/", Prefix: true}, zktest.Pass)
	defer read.Disarm()
	ctx := endAfter(t, read.Struck())
	node, err := h.CreateProtected(ctx, root, "lock-", nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("CreateProtected = %q, %v; want context.Canceled", node, err)
	}
	struck(t, lose, "the create")
	struck(t, read, "the recovery's read")
	settleDeletes(t, h, root)
	noChildren(t, obs, root, "after CreateProtected returned ctx's error")
}

// TestReviewR48CreateTouchingCtxEnded pins CreateTouching's two ends of ctx
// after the node was made (protected.go, "h.Delete(path); return err"):
// ctx ends just as the transaction's reply comes back (replied), or just
// as the read that finds the node ours after a lost reply (Lose) comes
// back (recovered). CreateTouching returns ctx's error and the node is
// deleted: nothing orphaned.
func TestReviewR48CreateTouchingCtxEnded(t *testing.T) {
	t.Parallel()
	for _, recovered := range []bool{false, true} {
		t.Run(fmt.Sprintf("recovered=%v", recovered), func(t *testing.T) {
			p, _, h, obs, root := r48Setup(t)
			node := root + "/n"
			multi := zktest.Match{Op: zktest.OpMulti, Path: node}
			at := p.Strike(multi, zktest.Pass)
			if recovered {
				at.Disarm()
				lose := p.Strike(multi, zktest.Lose)
				defer lose.Disarm()
				at = p.Strike(zktest.Match{Op: zktest.OpExists, Path: node}, zktest.Pass)
			}
			defer at.Disarm()
			err := h.CreateTouching(endAfter(t, at.Struck()), node, nil, root, []byte("x"), -1)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("CreateTouching = %v; want context.Canceled", err)
			}
			struck(t, at, "the reply")
			settleDeletes(t, h, root)
			noChildren(t, obs, root, "after CreateTouching returned ctx's error")
		})
	}
}

// TestReviewR48RecoveryReadFails pins the two other outcomes of
// recoverProtected's read of a node it listed (protected.go, "case
// errors.Is(err, zk.ErrNoNode): continue" and "case err != nil: return
// \"\", err"). The create's reply is lost (Lose) and the read that follows
// the listing never reaches the server (BlackHole). Then either an operator
// deletes the node (gone): the read, sent again on the next connection,
// finds nothing, and CreateProtected makes the node again, once; or ctx
// ends: CreateProtected returns ctx's error and the node is deleted, also
// when that delete's first attempt is cut (delete.go forgetProtected's
// "if err := c.Delete(...); err != nil && !errors.Is(err, zk.ErrNoNode) {
// return err }": it is sent again on the next connection).
func TestReviewR48RecoveryReadFails(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		gone, cutDelete bool
	}{{true, false}, {false, false}, {false, true}} {
		gone := tc.gone
		t.Run(fmt.Sprintf("gone=%v/cutDelete=%v", tc.gone, tc.cutDelete), func(t *testing.T) {
			p, _, h, obs, root := r48Setup(t)
			if tc.cutDelete {
				del := p.Strike(zktest.Match{Op: zktest.OpDelete, Path: root + "/", Prefix: true}, zktest.Cut)
				defer func() { struck(t, del, "the delete") }()
			}
			lose := p.Strike(createMatch(root), zktest.Lose)
			defer lose.Disarm()
			read := p.Strike(zktest.Match{Op: zktest.OpGetData, Path: root + "/", Prefix: true}, zktest.BlackHole)
			defer read.Disarm()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			type result struct {
				node string
				err  error
			}
			res := make(chan result, 1)
			go func() {
				node, err := h.CreateProtected(ctx, root, "lock-", nil)
				res <- result{node, err}
			}()
			select {
			case <-read.Struck():
			case <-ctx.Done():
				t.Fatal("the recovery read no node within a minute")
			}
			if gone {
				kids, _, err := obs.Children(root)
				if err != nil || len(kids) != 1 {
					t.Fatalf("children of %s = %v, %v; want the node of the lost reply", root, kids, err)
				}
				if err := obs.Delete(root+"/"+kids[0], -1); err != nil {
					t.Fatal(err)
				}
				p.Heal()
				r := <-res
				if r.err != nil {
					t.Fatalf("CreateProtected = %v; want a node made again", r.err)
				}
				kids, _, err = obs.Children(root)
				if err != nil || len(kids) != 1 || root+"/"+kids[0] != r.node {
					t.Fatalf("children of %s = %v, %v; want exactly %s", root, kids, err, r.node)
				}
				<-settledOf(h.Delete(r.node))
				return
			}
			cancel()
			r := <-res
			if !errors.Is(r.err, context.Canceled) {
				t.Fatalf("CreateProtected = %q, %v; want context.Canceled", r.node, r.err)
			}
			p.Heal()
			settleDeletes(t, h, root)
			noChildren(t, obs, root, "after CreateProtected returned ctx's error")
		})
	}
}

// TestReviewR48CreateTouchingTaken pins CreateTouching's answer when the
// node is another session's (protected.go, "return fmt.Errorf(\"zkconn:
// create %s: %w\", path, err)" and, after a lost reply, "case there:"):
// the node was there before (before), or the transaction never reached
// the server (BlackHole) and another session made the node before the
// recovery read it (recovered). Either way the error wraps
// zk.ErrNodeExists, the other session's node is kept, and the touched
// node is not written.
func TestReviewR48CreateTouchingTaken(t *testing.T) {
	t.Parallel()
	for _, recovered := range []bool{false, true} {
		t.Run(fmt.Sprintf("recovered=%v", recovered), func(t *testing.T) {
			p, _, h, obs, root := r48Setup(t)
			node := root + "/n"
			takeNode := func() {
				if _, err := obs.Create(node, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res := make(chan error, 1)
			if recovered {
				f := p.Strike(zktest.Match{Op: zktest.OpMulti, Path: node}, zktest.BlackHole)
				defer f.Disarm()
				go func() { res <- h.CreateTouching(ctx, node, nil, root, []byte("x"), -1) }()
				select {
				case <-f.Struck():
				case <-ctx.Done():
					t.Fatal("no transaction within a minute")
				}
				takeNode()
				p.Heal()
			} else {
				takeNode()
				res <- h.CreateTouching(ctx, node, nil, root, []byte("x"), -1)
			}
			if err := <-res; !errors.Is(err, zk.ErrNodeExists) {
				t.Fatalf("CreateTouching = %v; want zk.ErrNodeExists", err)
			}
			settleDeletes(t, h, root)
			if _, st, err := obs.Get(node); err != nil || st.EphemeralOwner != obs.SessionID() {
				t.Fatalf("Get(%s) = %v; want the other session's node, kept", node, err)
			}
			if data, _, err := obs.Get(root); err != nil || len(data) != 0 {
				t.Fatalf("Get(%s) = %q, %v; want it untouched", root, data, err)
			}
		})
	}
}

// TestReviewR48CloseWhileCreateInFlight pins the protected creates'
// mapping of an ended session (protected.go, "case !transient(err): if err
// := h.sessionError(err); errors.Is(err, ErrSessionLost) || errors.Is(err,
// ErrClosed)"): the create is applied and its reply swallowed (Drop), and
// the Session is closed while the caller waits for it. The caller returns
// an error wrapping ErrClosed, and no node is left once Close has
// returned. (go-zookeeper fails the create as soon as Close begins, with
// zk.ErrConnectionClosed: a caller that sees that before the loss, in
// some runs, goes through the recovery instead, which must end the same.)
func TestReviewR48CloseWhileCreateInFlight(t *testing.T) {
	for _, tc := range []struct {
		name   string
		match  func(root string) zktest.Match
		create func(ctx context.Context, h Handle, root string) error
	}{
		{"CreateProtected", createMatch, func(ctx context.Context, h Handle, root string) error {
			_, err := h.CreateProtected(ctx, root, "lock-", nil)
			return err
		}},
		{"CreateTouching", func(root string) zktest.Match { return zktest.Match{Op: zktest.OpMulti, Path: root + "/n"} },
			func(ctx context.Context, h Handle, root string) error {
				return h.CreateTouching(ctx, root+"/n", nil, root, []byte("x"), -1)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s, h, obs, root := r48Setup(t)
			f := p.Strike(tc.match(root), zktest.Drop)
			defer f.Disarm()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res := make(chan error, 1)
			go func() { res <- tc.create(ctx, h, root) }()
			select {
			case <-f.Struck():
			case <-ctx.Done():
				t.Fatal("no create within a minute")
			}
			closed := make(chan struct{})
			go func() {
				s.Close()
				close(closed)
			}()
			if err := <-res; !errors.Is(err, ErrClosed) {
				t.Fatalf("%s = %v; want ErrClosed", tc.name, err)
			}
			<-closed
			noChildren(t, obs, root, "after Close")
		})
	}
}

// TestReviewR48RefusedBeforeSending pins the calls that fail before they
// send anything (handle.go DoOnce's "if _, err := h.ready(ctx)";
// protected.go CreateTouching's ValidatePath and ready, CreateParents'
// "case errors.Is(err, ErrSessionLost), errors.Is(err, ErrClosed),
// ctx.Err() != nil" and its "/"): a ctx already done, a closed Session, a
// bad path. Each returns its error and no request reaches the server; a
// DoOnce never sent does not report an unknown outcome.
func TestReviewR48RefusedBeforeSending(t *testing.T) {
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, WithSessionTimeout(20*time.Second))
	h := current(t, s)
	root := testRoot(t)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	get := func(c *zk.Conn) error { _, _, err := c.Get("/"); return err }
	calls := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"DoOnce", func(ctx context.Context) error { return h.DoOnce(ctx, get) }},
		{"CreateTouching", func(ctx context.Context) error { return h.CreateTouching(ctx, root+"/n", nil, "/", nil, -1) }},
		{"CreateParents", func(ctx context.Context) error { return h.CreateParents(ctx, root+"/a") }},
	}
	check := func(what string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) || errors.Is(err, ErrUnknownOutcome) {
			t.Errorf("%s = %v; want %v, outcome known", what, err, want)
		}
	}
	before := p.Requests()
	if err := h.CreateParents(context.Background(), "/"); err != nil {
		t.Errorf(`CreateParents("/") = %v; want nil`, err)
	}
	check("CreateTouching(a relative path)", h.CreateTouching(context.Background(), "n", nil, "/", nil, -1), ErrBadPath)
	for _, c := range calls {
		check(c.name+" with a ctx already done", c.call(done), context.Canceled)
	}
	if n := p.Requests() - before; n != 0 {
		t.Errorf("%d requests sent; want none", n)
	}
	s.Close()
	for _, c := range calls {
		check(c.name+" after Close", c.call(context.Background()), ErrClosed)
	}
}

// TestReviewR48CreateParentsUnderEphemeral pins CreateParents' failure to
// make a missing ancestor (protected.go, "if err :=
// h.CreateParents(ctx, parentOf(p)); err != nil { return err }"): an
// operator's ephemeral node is in the way, which can have no children. The
// error wraps zk.ErrNoChildrenForEphemerals, and nothing is made under it.
func TestReviewR48CreateParentsUnderEphemeral(t *testing.T) {
	_, _, h, obs, root := r48Setup(t)
	eph := root + "/eph"
	if _, err := obs.Create(eph, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.CreateParents(ctx, eph+"/a/b"); !errors.Is(err, zk.ErrNoChildrenForEphemerals) {
		t.Fatalf("CreateParents under an ephemeral node = %v; want zk.ErrNoChildrenForEphemerals", err)
	}
	// eph is not a container, so noChildren's leave for a reaped parent
	// must not cover it: it is the operator's, and stays.
	if ok, _, err := obs.Exists(eph); err != nil || !ok {
		t.Fatalf("Exists(%s) = %v, %v after CreateParents failed; want the operator's node kept", eph, ok, err)
	}
	noChildren(t, obs, eph, "after CreateParents failed")
}

// closingCtx is a context whose first Done call closes s: a Close on
// another goroutine that lands after a call's wait for a connection and
// before its request is sent.
type closingCtx struct {
	context.Context
	s    *Session
	once sync.Once
}

func (c *closingCtx) Done() <-chan struct{} {
	c.once.Do(func() { c.s.Close() })
	return c.Context.Done()
}

// TestReviewR48CloseBeforeSend pins callOr's closed checks (handle.go,
// errNotSent): Close lands between DoOnce's wait for a connection and its
// request. The request is never sent, and DoOnce says so: ErrClosed, not an
// unknown outcome. With a ctx that can never be done (context.Background's
// kind) callOr runs op inline, and checks on that path too: without that
// check op runs on the closed *zk.Conn, which fails it with
// zk.ErrConnectionClosed, a dropped connection, which DoOnce reports as an
// unknown outcome.
func TestReviewR48CloseBeforeSend(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  func(t *testing.T) context.Context
	}{
		{"ctx can be done", func(t *testing.T) context.Context {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			t.Cleanup(cancel)
			return ctx
		}},
		{"ctx never done", func(*testing.T) context.Context { return context.Background() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := zktest.NewProxy(t, shared.Addr())
			s := dial(t, []string{p.Addr()}, WithSessionTimeout(20*time.Second))
			h := current(t, s)
			path := testRoot(t)
			sent := p.Strike(zktest.Match{Path: path}, zktest.Pass)
			defer sent.Disarm()
			err := h.DoOnce(&closingCtx{Context: tc.ctx(t), s: s}, func(c *zk.Conn) error {
				_, err := c.Create(path, nil, 0, zk.WorldACL(zk.PermAll))
				return err
			})
			if !errors.Is(err, ErrClosed) || errors.Is(err, ErrUnknownOutcome) {
				t.Fatalf("DoOnce = %v; want ErrClosed, the request never sent", err)
			}
			select {
			case <-sent.Struck():
				t.Fatal("the request was sent")
			default:
			}
			obs := zktest.Observer(t, shared.Addr())
			if ok, _, err := obs.Exists(path); err != nil || ok {
				t.Fatalf("Exists(%s) = %v, %v; want false: nothing sent", path, ok, err)
			}
		})
	}
}

// sessionKeys records the session id and password of the first connect
// response that the connections of its dialer read: what a client needs
// to take the session over.
type sessionKeys struct {
	mu     sync.Mutex
	id     int64
	passwd []byte
}

func (k *sessionKeys) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	return &keysConn{Conn: c, k: k}, nil
}

// get returns the id and password recorded, if any.
func (k *sessionKeys) get() (int64, []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.id, k.passwd
}

// keysConn hands the first frame it reads (the connect response) to its
// sessionKeys.
type keysConn struct {
	net.Conn
	k    *sessionKeys
	head []byte // the bytes read, until the first frame is whole
	done bool
}

func (c *keysConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if !c.done {
		c.head = append(c.head, b[:n]...)
		if len(c.head) >= 4 && len(c.head) >= 4+int(binary.BigEndian.Uint32(c.head)) {
			c.done = true
			// protocol version, timeout, session id, password (length-prefixed)
			f := c.head[4:]
			if len(f) >= 20 && binary.BigEndian.Uint64(f[8:16]) != 0 {
				if l := int(binary.BigEndian.Uint32(f[16:20])); len(f) >= 20+l {
					c.k.mu.Lock()
					if c.k.id == 0 {
						c.k.id, c.k.passwd = int64(binary.BigEndian.Uint64(f[8:16])), append([]byte(nil), f[20:20+l]...)
					}
					c.k.mu.Unlock()
				}
			}
		}
	}
	return n, err
}

// frameIO writes and reads length-prefixed frames on a raw connection.
func frameIO(c net.Conn, out []byte) ([]byte, error) {
	if _, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(out))), out...)); err != nil {
		return nil, err
	}
	var n [4]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return nil, err
	}
	in := make([]byte, binary.BigEndian.Uint32(n[:]))
	_, err := io.ReadFull(c, in)
	return in, err
}

// endSessionAs ends session id on the server at addr as a client holding
// its password can: it connects to the session (the server closes the
// session's other connections) and closes it. The server deletes the
// session's ephemeral nodes; its other clients learn on their next
// connect that it expired.
func endSessionAs(t *testing.T, addr string, id int64, passwd []byte) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	// connect request: protocol version, last zxid seen, timeout (ms),
	// session id, password
	req := binary.BigEndian.AppendUint32(nil, 0)
	req = binary.BigEndian.AppendUint64(req, 0)
	req = binary.BigEndian.AppendUint32(req, 20000)
	req = binary.BigEndian.AppendUint64(req, uint64(id))
	req = binary.BigEndian.AppendUint32(req, uint32(len(passwd)))
	req = append(req, passwd...)
	resp, err := frameIO(c, req)
	if err != nil || len(resp) < 16 || int64(binary.BigEndian.Uint64(resp[8:16])) != id {
		t.Fatalf("connecting to session %#x: %x, %v; want the session", id, resp, err)
	}
	// closeSession: xid 1, opcode -11; its reply: xid, zxid, error
	op := int32(zktest.OpCloseSession)
	resp, err = frameIO(c, binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 1), uint32(op)))
	if err != nil || len(resp) < 16 || binary.BigEndian.Uint32(resp[12:16]) != 0 {
		t.Fatalf("closing session %#x: %x, %v", id, resp, err)
	}
}

// TestReviewR48ExpiredOnReconnect pins the Session's handling of
// go-zookeeper's StateExpired (session.go, "case zk.StateExpired:"): the
// Session's connection is partitioned, the session ends on the server
// meanwhile (a client holding its password closes it; a server whose
// clock ran ahead of the client's does the same), and the partition heals:
// the reconnect is told the session expired. The Session reports the loss
// (StateLost, Lost closed, Err wrapping ErrSessionLost and
// zk.ErrSessionExpired), retires the *zk.Conn and carries on with a new
// session.
func TestReviewR48ExpiredOnReconnect(t *testing.T) {
	t.Parallel()
	var keys sessionKeys
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, WithSessionTimeout(20*time.Second), WithDialer(keys.dial))
	sub := s.Subscribe()
	defer sub.Stop()
	first := await(t, sub, StateConnected, 10*time.Second)
	h := current(t, s)
	obs := zktest.Observer(t, shared.Addr())
	root := testRoot(t)
	node, err := h.CreateProtected(context.Background(), root, "lock-", nil)
	if err != nil {
		t.Fatal(err)
	}
	id, passwd := keys.get()
	if id != h.ID() {
		t.Fatalf("recorded session %#x; want %#x", id, h.ID())
	}
	p.BlackHole()
	endSessionAs(t, shared.Addr(), id, passwd)
	if ok, _, err := obs.Exists(node); ok || err != nil {
		t.Fatalf("Exists(%s) after the session ended = %v, %v; want false", node, ok, err)
	}
	p.Heal()
	lost := await(t, sub, StateLost, 30*time.Second)
	if lost.SessionID != first.SessionID {
		t.Errorf("StateLost names session %#x; want %#x", lost.SessionID, first.SessionID)
	}
	select {
	case <-h.Lost():
	default:
		t.Fatal("Lost() not closed after StateLost")
	}
	if err := h.Err(); !errors.Is(err, ErrSessionLost) || !errors.Is(err, zk.ErrSessionExpired) {
		t.Fatalf("Err() = %v; want ErrSessionLost and zk.ErrSessionExpired", err)
	}
	next := await(t, sub, StateConnected, 30*time.Second)
	if next.SessionID == first.SessionID {
		t.Fatalf("StateConnected with the expired session %#x", next.SessionID)
	}
	h2 := current(t, s)
	n2, err := h2.CreateProtected(context.Background(), root, "lock-", nil)
	if err != nil {
		t.Fatalf("CreateProtected on the new session = %v", err)
	}
	<-settledOf(h2.Delete(n2))
}

// TestReviewR48DoMapsSessionErrors pins sessionError's mapping of
// go-zookeeper's own session errors (errors.go, "case errors.Is(err,
// zk.ErrSessionExpired)" and "case errors.Is(err, zk.ErrClosing)"), which
// Do promises ("go-zookeeper's session errors are wrapped, so errors.Is
// matches both"): an op that fails with zk.ErrSessionExpired gives
// ErrSessionLost; with zk.ErrClosing, ErrSessionLost while the Session is
// open and ErrClosed once it is closing. go-zookeeper v1.0.4 hands neither
// error to a request in flight (a request waiting when its *zk.Conn closes
// gets zk.ErrConnectionClosed; see the round's report), so the op returns
// them itself, on a real session.
func TestReviewR48DoMapsSessionErrors(t *testing.T) {
	s := dial(t, []string{shared.Addr()}, WithSessionTimeout(20*time.Second))
	h := current(t, s)
	for _, tc := range []struct {
		name  string
		close bool
		err   error
		want  error
	}{
		{"expired", false, zk.ErrSessionExpired, ErrSessionLost},
		{"closing, open", false, zk.ErrClosing, ErrSessionLost},
		{"closing, closed", true, zk.ErrClosing, ErrClosed},
	} {
		err := h.Do(context.Background(), func(*zk.Conn) error {
			if tc.close {
				s.Close()
			}
			return tc.err
		})
		if !errors.Is(err, tc.want) || !errors.Is(err, tc.err) {
			t.Errorf("%s: Do = %v; want %v wrapping %v", tc.name, err, tc.want, tc.err)
		}
	}
}

// TestReviewR48ReplaceUnresolved pins run's replace when no server name
// resolves (session.go, "case len(r.addrs) == 0:"): the Session's only
// server is a name; its session is lost (a partition past the session
// timeout) while the name does not resolve. replace logs "cannot resolve
// the servers" and tries again; once the name resolves and the partition
// heals, the Session carries on with a new session.
func TestReviewR48ReplaceUnresolved(t *testing.T) {
	p := zktest.NewProxy(t, shared.Addr())
	_, port, err := net.SplitHostPort(p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	dns := &fakeDNS{name: "zk.r48.test"}
	dns.on.Store(true)
	unresolved := newMsgSignal("zkconn: cannot resolve the servers")
	s := dial(t, []string{"zk.r48.test:" + port}, WithResolver(dns.resolver()),
		WithSessionTimeout(time.Second), WithLogger(slog.New(unresolved)))
	sub := s.Subscribe()
	defer sub.Stop()
	first := await(t, sub, StateConnected, 10*time.Second)
	dns.on.Store(false)
	p.BlackHole()
	await(t, sub, StateLost, 30*time.Second)
	select {
	case <-unresolved.seen:
	case <-time.After(30 * time.Second):
		t.Fatal(`no "cannot resolve the servers" within 30s of the loss`)
	}
	dns.on.Store(true)
	p.Heal()
	if next := await(t, sub, StateConnected, 30*time.Second); next.SessionID == first.SessionID {
		t.Fatalf("StateConnected with the lost session %#x", next.SessionID)
	}
}

// TestReviewR48DialEndsWithoutClient pins Dial's end while the Session has
// no *zk.Conn (session.go, "if c == nil { c = first }"): a server name does
// not resolve when Dial starts, the other server takes the connection and
// never answers; a second later the name resolves, so the *zk.Conn is
// retired for one with every server, and while the name server hangs on
// that lookup Dial's ctx ends. Dial returns ctx's error, with the first
// *zk.Conn's story, within a second of ctx's end.
func TestReviewR48DialEndsWithoutClient(t *testing.T) {
	t.Parallel()
	p := zktest.NewProxy(t, shared.Addr())
	p.BlackHole() // accepts, never answers
	_, port, err := net.SplitHostPort(p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	dns := &fakeDNS{name: "zk.r48dial.test"}
	empty := &fakeDNS{name: dns.name} // its AAAA answers: none
	empty.on.Store(true)
	var lookups atomic.Int64
	hung, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	r := dnsResolver(func(q []byte) []byte {
		name, qtype, _, ok := dnsQuestion(q)
		if !ok || name != dns.name {
			return dns.answer(q)
		}
		if qtype != 1 {
			return empty.answer(q)
		}
		switch lookups.Add(1) {
		case 1: // Dial's: no such host
		case 2: // refresh's: it resolves now
			dns.on.Store(true)
		case 3: // replace's: the name server hangs
			close(hung)
			<-release
		default:
			<-release
		}
		return dns.answer(q)
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type dialed struct {
		s   *Session
		err error
	}
	res := make(chan dialed, 1)
	go func() {
		s, err := Dial(ctx, []string{dns.name + ":" + port, p.Addr()}, WithResolver(r), WithSessionTimeout(20*time.Second))
		res <- dialed{s, err}
	}()
	select {
	case <-hung:
	case d := <-res:
		if d.s != nil {
			d.s.Close()
		}
		t.Fatalf("Dial = %v before the *zk.Conn was replaced", d.err)
	}
	cancel()
	select {
	case d := <-res:
		if d.err == nil {
			d.s.Close()
			t.Fatal("Dial succeeded")
		}
		if !errors.Is(d.err, context.Canceled) {
			t.Fatalf("Dial = %v; want context.Canceled", d.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Dial did not return within 10s of its ctx's end")
	}
}
