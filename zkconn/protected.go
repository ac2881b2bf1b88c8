package zkconn

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/go-zookeeper/zk"
)

// ProtectedPrefix starts every protected node name: "_c_", then a 36-char
// UUID and "-" (Curator's format, so that Curator and dsync can each find
// their own nodes after a lost reply).
const ProtectedPrefix = "_c_"

const uuidLen = 36

// uuidVersion is the version of the UUIDs CreateProtected writes: 8, the
// version RFC 9562 leaves to applications, with every other bit random.
// Curator writes random version 4 UUIDs; the version tells the nodes apart.
const uuidVersion = '8'

func newUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("zkconn: crypto/rand failed: " + err.Error())
	}
	b[6] = b[6]&0x0f | 0x80 // version 8
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	const hex = "0123456789abcdef"
	out := make([]byte, 0, uuidLen)
	for i, x := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hex[x>>4], hex[x&0xf])
	}
	return string(out)
}

// ProtectedName returns a new node name of CreateProtected's form for a node
// that is not sequential: _c_<a new UUID>-name.
func ProtectedName(name string) string { return ProtectedPrefix + newUUID() + "-" + name }

// kinLen is how much of a UUID nodes made together share (see
// CreateProtectedWhile): the first 48 bits, random; the rest of each UUID,
// random too, keeps it unique for CreateProtected's recovery.
const kinLen = len("01234567-89ab")

// Kin reports whether a and b (node names or paths) are nodes written by
// CreateProtected or CreateProtectedWhile from one another: their UUIDs begin
// alike.
func Kin(a, b string) bool {
	ka, oka := kinOf(a)
	kb, okb := kinOf(b)
	return oka && okb && ka == kb
}

// kinOf returns the shared part of the UUID of a node (name or path) that
// CreateProtected wrote.
func kinOf(node string) (string, bool) {
	name := node[strings.LastIndexByte(node, '/')+1:]
	uuid, _, ok := ParseProtected(name)
	if !ok || !IsNative(name) {
		return "", false
	}
	return uuid[:kinLen], true
}

// ParseProtected splits a node name of the form _c_<uuid>-<rest> into the
// UUID and rest. ok is false for any other name.
func ParseProtected(name string) (uuid, rest string, ok bool) {
	if len(name) < len(ProtectedPrefix)+uuidLen+1 || !strings.HasPrefix(name, ProtectedPrefix) {
		return "", "", false
	}
	uuid = name[len(ProtectedPrefix) : len(ProtectedPrefix)+uuidLen]
	for i := 0; i < uuidLen; i++ {
		c := uuid[i]
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if c != '-' {
				return "", "", false
			}
			continue
		}
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return "", "", false
		}
	}
	if name[len(ProtectedPrefix)+uuidLen] != '-' {
		return "", "", false
	}
	return uuid, name[len(ProtectedPrefix)+uuidLen+1:], true
}

// IsNative reports whether name is a protected node name written by
// CreateProtected (of this or another process), rather than by Curator or
// another client.
func IsNative(name string) bool {
	uuid, _, ok := ParseProtected(name)
	return ok && uuid[14] == uuidVersion
}

// CreateProtected creates an EPHEMERAL_SEQUENTIAL node named
// _c_<uuid>-<name><10-digit sequence> under parent, owned by h's session, with
// data and the Session's ACL, and returns its full path. Missing parents are
// created as CONTAINER nodes (the server removes them once empty).
//
// If the connection drops before the reply arrives, the node may or may not
// exist: after the reconnect CreateProtected has the server catch up with
// the leader (sync), looks for a child carrying its UUID, keeps it if its
// ephemeralOwner is h's session, deletes it otherwise, and creates again if
// none is kept.
//
// On success the node exists and ctx was not done when it was created. On
// failure (ctx.Err(), or an error wrapping ErrSessionLost, ErrClosed,
// ErrBadPath or go-zookeeper's error) no node is left behind: one that may
// exist is deleted in the background (see Delete), and Deleting counts it
// until then.
func (h Handle) CreateProtected(ctx context.Context, parent, name string, data []byte) (string, error) {
	return h.createProtected(ctx, parent, name, data, newUUID(), "")
}

// CreateProtectedListing is CreateProtected that also lists parent's
// children in the same round trip: the listing is sent as soon as the
// create has gone out on the connection, so that ZooKeeper, which answers
// a session's requests in order, serves it after the create. children is
// nil when the listing failed, or did not show the node (the connection
// dropped between the two, say); the caller then lists again if it needs
// to. The node and the error are CreateProtected's.
//
// A listing served after the create shows every write applied before it,
// also on a server the session has just moved to: such a server may lag
// behind what the session was notified of (a notification does not count
// towards what a reconnect asks the server to have seen), but it applies
// the create, a write, only after everything committed before it.
func (h Handle) CreateProtectedListing(ctx context.Context, parent, name string, data []byte) (node string, children []string, err error) {
	return h.createListing(ctx, parent, name, data, newUUID(), "")
}

// CreateProtectedWhileListing is CreateProtectedWhile that also lists
// parent's children in the same round trip, as CreateProtectedListing does.
func (h Handle) CreateProtectedWhileListing(ctx context.Context, parent, name string, data []byte, kin string) (node string, children []string, err error) {
	if err := ValidatePath(kin); err != nil {
		return "", nil, err
	}
	return h.createListing(ctx, parent, name, data, kinUUID(kin), kin)
}

// createListing is CreateProtectedListing for createProtected's node.
func (h Handle) createListing(ctx context.Context, parent, name string, data []byte, uuid, check string) (node string, children []string, err error) {
	op := int32(opCreate)
	if check != "" {
		op = opMulti
	}
	sent, unblock := h.gen.c.wire.awaitWrite(protectedPath(parent, name, uuid), op)
	listed := make(chan []string, 1)
	var failed atomic.Bool
	go func() {
		defer close(listed)
		<-sent // or unblocked: below, once the create is done
		if failed.Load() {
			return
		}
		var cs []string
		if err := h.Do(ctx, func(c *zk.Conn) (err error) {
			cs, _, err = c.Children(parent)
			return err
		}); err == nil {
			listed <- cs
		}
	}()
	node, err = h.createProtected(ctx, parent, name, data, uuid, check)
	failed.Store(err != nil)
	unblock()
	children = <-listed
	if err != nil || !slices.Contains(children, node[len(parent)+1:]) {
		return node, nil, err
	}
	return node, children, nil
}

// CreateProtectedWhile is CreateProtected for a node made on behalf of kin,
// the full path of a node, and only while kin exists: one transaction checks
// that kin is there and creates the node. If kin is gone, nothing is created
// and the error wraps ErrKinGone. If CreateProtected made kin, Kin reports
// true for the two names, so that a reader of the tree can tell which nodes
// were made together. (A semaphore's acquirer makes its leases so, kin being
// its node in the internal lock's queue: an acquirer whose node was deleted
// makes none, whatever it believes.)
func (h Handle) CreateProtectedWhile(ctx context.Context, parent, name string, data []byte, kin string) (string, error) {
	if err := ValidatePath(kin); err != nil {
		return "", err
	}
	return h.createProtected(ctx, parent, name, data, kinUUID(kin), kin)
}

// kinUUID returns a new UUID for a node made on behalf of kin: one that
// begins as kin's does, if CreateProtected made kin.
func kinUUID(kin string) string {
	uuid := newUUID()
	if k, ok := kinOf(kin); ok {
		uuid = k + uuid[kinLen:]
	}
	return uuid
}

// createProtected creates the node of CreateProtected, named with uuid; if
// check is not empty, only while the node at check exists (see
// CreateProtectedWhile).
func (h Handle) createProtected(ctx context.Context, parent, name string, data []byte, uuid, check string) (_ string, err error) {
	if name == "" || strings.ContainsRune(name, '/') {
		return "", fmt.Errorf("%w: node name %q must be non-empty and free of /", ErrBadPath, name)
	}
	if err := ValidatePath(parent + "/" + name); err != nil { // and so parent too
		return "", err
	}
	parents := false // CreateParents was called for parent
	defer func() {
		if parents && err != nil {
			h.MarkUsed(parent)
		}
	}()
	prefix := ProtectedPrefix + uuid + "-"
	full := protectedPath(parent, name, uuid)
	for {
		link, err := h.ready(ctx)
		if err != nil {
			return "", err
		}
		var p string
		g := h.newGiveUp(ctx, parent, prefix)
		err = h.callOr(ctx, func(c *zk.Conn) (err error) {
			p, err = createChecked(c, full, data, h.s.cfg.acl, check)
			return err
		}, func(err error) {
			// ctx ended or the session was lost with the create in flight.
			var settled <-chan struct{}
			switch {
			case err == nil:
				_, settled = h.Delete(p)
			case transient(err):
				settled = h.forgetProtected(parent, prefix)
			}
			g.settle(settled)
		})
		switch {
		case err == nil:
			if err := ctx.Err(); err != nil {
				h.Delete(p)
				return "", err
			}
			return p, nil
		case errors.Is(err, zk.ErrNoNode):
			parents = true
			if err := h.CreateParents(ctx, parent); err != nil {
				return "", err
			}
			continue
		case ctx.Err() != nil && errors.Is(err, ctx.Err()):
			g.record() // abandoned: the request's goroutine cleans up
			return "", err
		case !transient(err):
			if err = h.sessionError(err); errors.Is(err, ErrSessionLost) || errors.Is(err, ErrClosed) {
				return "", err
			}
			return "", fmt.Errorf("zkconn: create %s: %w", full, err)
		}
		// The reply was lost: wait for the Session to see the drop, then
		// find out what became of the request.
		select {
		case <-link:
		case <-ctx.Done():
		case <-h.gen.lost.done():
		}
		p, err = h.recoverProtected(ctx, parent, prefix)
		if err != nil {
			if h.Err() == nil {
				h.forgetProtected(parent, prefix)
			}
			return "", err
		}
		if p != "" {
			return p, nil
		}
	}
}

// protectedPath is the path createProtected asks for: the node's, less the
// sequence number.
func protectedPath(parent, name, uuid string) string {
	return parent + "/" + ProtectedPrefix + uuid + "-" + name
}

// createChecked creates the EPHEMERAL_SEQUENTIAL node full: alone if check
// is empty, else in one transaction after a check that the node at check
// exists. A failed check is an error wrapping ErrKinGone; the create's own
// errors (zk.ErrNoNode for a missing parent, say) come as they are.
func createChecked(c *zk.Conn, full string, data []byte, acl []zk.ACL, check string) (string, error) {
	const flags = zk.FlagEphemeral | zk.FlagSequence
	if check == "" {
		return c.Create(full, data, flags, acl)
	}
	rs, err := c.Multi(
		&zk.CheckVersionRequest{Path: check, Version: -1},
		&zk.CreateRequest{Path: full, Data: data, Acl: acl, Flags: flags})
	if len(rs) != 2 {
		return "", err // no reply: the connection, the session
	}
	switch {
	case errors.Is(rs[0].Error, zk.ErrNoNode):
		return "", fmt.Errorf("%w: %s", ErrKinGone, check)
	case rs[0].Error != nil:
		return "", rs[0].Error
	case rs[1].Error != nil:
		return "", rs[1].Error
	case err != nil:
		return "", err
	}
	return rs[1].String, nil
}

// recoverProtected looks under parent for the node whose name starts with
// prefix. It returns the path of the node if it is owned by h's session, ""
// if there is none (any stranger with the prefix is deleted).
//
// Invariant: a read that decides what became of a request whose reply was
// lost (here, in forgetProtected and in CreateTouching) is sent after a
// CatchUp on the same connection: the server the session moved to may not
// have applied the request yet, and would report the node missing; the
// node, made later, would be left behind.
func (h Handle) recoverProtected(ctx context.Context, parent, prefix string) (string, error) {
	var children []string
	err := h.Do(ctx, func(c *zk.Conn) (err error) {
		if err := CatchUp(c, parent); err != nil {
			return err
		}
		children, _, err = c.Children(parent)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for _, child := range children {
		if !strings.HasPrefix(child, prefix) {
			continue
		}
		p := parent + "/" + child
		var st *zk.Stat
		err := h.Do(ctx, func(c *zk.Conn) (err error) {
			_, st, err = c.Get(p)
			return err
		})
		switch {
		case errors.Is(err, zk.ErrNoNode):
			continue
		case err != nil:
			return "", err
		case st.EphemeralOwner != h.ID():
			h.Delete(p)
			continue
		}
		if err := ctx.Err(); err != nil {
			h.Delete(p)
			return "", err
		}
		return p, nil
	}
	return "", nil
}

// CreateParents creates p and any missing ancestor of it as CONTAINER
// nodes (the server removes them once they have had children and are empty
// again). A node already there is fine, whatever its kind. It is safe to
// repeat; it returns ctx.Err(), or an error wrapping ErrSessionLost,
// ErrClosed or go-zookeeper's error. A caller whose node under p is then
// not created (it fails, or gives up) calls MarkUsed(p): a container that
// never had a child stays, the server removes only those that had one
// (unless it is configured with znode.container.maxNeverUsedIntervalMs).
func (h Handle) CreateParents(ctx context.Context, p string) error {
	if p == "/" {
		return nil
	}
	err := h.Do(ctx, func(c *zk.Conn) error {
		_, err := c.CreateContainer(p, nil, zk.FlagContainer, h.s.cfg.acl)
		return err
	})
	switch {
	case err == nil, errors.Is(err, zk.ErrNodeExists):
		return nil
	case errors.Is(err, zk.ErrNoNode):
		if err := h.CreateParents(ctx, parentOf(p)); err != nil {
			return err
		}
		return h.CreateParents(ctx, p)
	case errors.Is(err, ErrSessionLost), errors.Is(err, ErrClosed), ctx.Err() != nil:
		return err
	}
	return fmt.Errorf("zkconn: create parent %s: %w", p, err)
}

// CreateTouching creates the EPHEMERAL node at path in h's session, with data
// and the Session's ACL, and in the same transaction writes touchData into
// the node at touch if its data version is still version: a getData watch on
// touch fires before anyone can list path's node. It creates nothing if
// touch does not exist (zk.ErrNoNode) or was written since (zk.ErrBadVersion),
// or path exists (zk.ErrNodeExists).
//
// If the connection drops before the reply arrives, it looks the node up
// after the reconnect, once the server has caught up with the leader: a node
// owned by h's session was created; none, and it tries again. On success the node exists and ctx was not done when it was
// created. On failure (ctx.Err(), or an error wrapping ErrSessionLost,
// ErrClosed, ErrBadPath or go-zookeeper's error) no node is left behind: one
// that may exist is deleted in the background (see Delete), and Deleting
// counts it until then.
func (h Handle) CreateTouching(ctx context.Context, path string, data []byte, touch string, touchData []byte, version int32) error {
	if err := ValidatePath(path); err != nil {
		return err
	}
	for {
		link, err := h.ready(ctx)
		if err != nil {
			return err
		}
		i := strings.LastIndexByte(path, '/')
		g := h.newGiveUp(ctx, path[:i], path[i+1:])
		err = h.callOr(ctx, func(c *zk.Conn) error {
			_, err := c.Multi(
				&zk.CreateRequest{Path: path, Data: data, Acl: h.s.cfg.acl, Flags: zk.FlagEphemeral},
				&zk.SetDataRequest{Path: touch, Data: touchData, Version: version})
			return err
		}, func(err error) {
			var settled <-chan struct{}
			if err == nil || transient(err) {
				_, settled = h.Delete(path)
			}
			g.settle(settled)
		})
		switch {
		case err == nil:
			if err := ctx.Err(); err != nil {
				h.Delete(path)
				return err
			}
			return nil
		case ctx.Err() != nil && errors.Is(err, ctx.Err()):
			g.record() // abandoned: the request's goroutine cleans up
			return err
		case !transient(err):
			if err = h.sessionError(err); errors.Is(err, ErrSessionLost) || errors.Is(err, ErrClosed) {
				return err
			}
			return fmt.Errorf("zkconn: create %s: %w", path, err)
		}
		select {
		case <-link:
		case <-ctx.Done():
		case <-h.gen.lost.done():
		}
		var st *zk.Stat
		var there bool
		err = h.Do(ctx, func(c *zk.Conn) (err error) {
			if err := CatchUp(c, path); err != nil {
				return err
			}
			there, st, err = c.Exists(path)
			return err
		})
		switch {
		case err != nil:
			if h.Err() == nil {
				h.Delete(path)
			}
			return err
		case there && st.EphemeralOwner == h.ID():
			if err := ctx.Err(); err != nil {
				h.Delete(path)
				return err
			}
			return nil
		case there:
			return fmt.Errorf("zkconn: create %s: %w", path, zk.ErrNodeExists)
		}
	}
}
