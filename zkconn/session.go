package zkconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// A Session carries one ZooKeeper session at a time for any number of
// goroutines. It owns the underlying *zk.Conn and its event stream, tracks
// the session's state (see State), and replaces a lost ZooKeeper session with
// a new one, so that long-lived users keep working across expiries.
//
// Work tied to one ZooKeeper session goes through a Handle (see Current).
//
// A Session is safe for concurrent use. Its zero value is not usable: make
// one with Dial, and Close it when done.
type Session struct {
	servers []string
	cfg     config

	closing   chan struct{}   // closed by Close
	ctx       context.Context // canceled by Close: bounds name lookups
	cancel    context.CancelFunc
	closeOnce sync.Once
	kick      chan struct{}  // wakes run to re-read the expiry deadline
	records   chan record    // for logs to log (see logf)
	bg        sync.WaitGroup // every goroutine of the Session but logs
	logsEnd   chan struct{}  // closed by Close once bg is done: logs logs the rest and ends
	logsDone  chan struct{}  // closed by logs as it ends

	mu       sync.Mutex
	state    State
	closed   bool
	cur      *client       // the zk.Conn in use
	gen      *generation   // the live ZooKeeper session; nil while none
	link     latch         // closes when the current connection drops
	changed  chan struct{} // closed and replaced at every transition
	refused  func(error)   // Dial's, while it waits: see connector
	expireAt time.Time     // when a suspended session is given up
	subs     map[*Subscription]struct{}
	// adopting, if set (by tests), is called by replace between starting
	// a *zk.Conn and adopting it.
	adopting func(*client)
}

// client is one *zk.Conn and what the Session knows of it.
type client struct {
	conn       *zk.Conn
	events     <-chan zk.Event // go-zookeeper's; closed once its goroutines have ended
	wire       *wire
	connector  *connector
	watches    watchSet      // the Watches set through this conn
	ready      chan struct{} // closed once conn is set and whether c is s.cur decided (see newClient)
	authed     bool          // WithDigestAuth credentials accepted (or none set); under s.mu
	hasSession bool          // the conn's last session event was HasSession
	missing    []string      // the servers whose names did not resolve when c was made (see refresh)
	unresolved error         // why they did not
}

// generation is one ZooKeeper session.
type generation struct {
	id    int64
	c     *client
	lost  latch // closes when the session is lost or the Session closed
	cause error // why lost was closed; set before closing it
}

// Dial connects to the ZooKeeper ensemble at servers ("host:port") and
// returns once a ZooKeeper session is established, or ctx's error (wrapped,
// and followed by how the last attempt on each server failed, if one did)
// if ctx is done first, having released everything it started. That takes
// up to a second past ctx's end: go-zookeeper waits that long for a
// connection attempt under way, and for a request to end a session it
// never got, and longer while the logger is behind (see WithLogger). With
// WithTLS it also fails, before ctx is done, when every server refused the
// TLS handshake (ErrTLSHandshake); and at once when no server's name
// resolves (see WithResolver), and before anything with servers that
// ValidateServers refuses.
func Dial(ctx context.Context, servers []string, opts ...Option) (*Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := ValidateServers(servers); err != nil {
		return nil, err
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	r := resolve(ctx, cfg.resolver, servers)
	if len(r.addrs) == 0 || ctx.Err() != nil {
		err := r.err
		if err == nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("zkconn: dial %v: %w", servers, err)
	}
	s := &Session{
		servers:  append([]string(nil), servers...),
		cfg:      cfg,
		closing:  make(chan struct{}),
		kick:     make(chan struct{}, 1),
		records:  make(chan record, recordsBuffer),
		logsEnd:  make(chan struct{}),
		logsDone: make(chan struct{}),
		link:     closedLatch,
		changed:  make(chan struct{}),
		subs:     make(map[*Subscription]struct{}),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if r.err != nil {
		s.logf(slog.LevelWarn, "zkconn: cannot resolve some servers", "err", r.err)
	}
	// refused ends the wait when every server of a *zk.Conn refuses the TLS
	// handshake: the first, or one that replaced it (see refresh).
	wait, refused := context.WithCancelCause(ctx)
	defer refused(nil)
	first, err := s.newClient(r, refused)
	if err != nil {
		s.cancel()
		return nil, err
	}
	s.mu.Lock()
	s.refused = refused
	s.cur = first
	close(first.ready)
	s.mu.Unlock()
	s.bg.Add(1)
	go s.run()
	go s.logs(s.Subscribe())
	_, err = s.Current(wait)
	s.mu.Lock()
	s.refused = nil
	c := s.cur
	s.mu.Unlock()
	if err != nil {
		if c == nil {
			c = first
		}
		// Decided before Close, which waits for the logger.
		if cause := context.Cause(wait); ctx.Err() == nil && errors.Is(cause, ErrTLSHandshake) {
			err = cause
		} else if attempts := c.connector.attempts(); attempts != nil { // before Close ends those under way
			err = fmt.Errorf("%w; connection attempts: %w", err, attempts)
		}
		if c.unresolved != nil {
			err = fmt.Errorf("%w; not resolved: %w", err, c.unresolved)
		}
		s.Close()
		return nil, fmt.Errorf("zkconn: dial %v: %w", servers, err)
	}
	return s, nil
}

// A resolution is what resolve found.
type resolution struct {
	addrs   []string          // the "ip:port" addresses to connect to
	names   map[string]string // the host name each address of a name came from, for TLS to verify
	missing []string          // the servers whose names did not resolve
	err     error             // why they did not
}

// resolve looks up the host names in servers (which ValidateServers
// accepts) within ctx, for the addresses to connect to and the host name
// each address of a name came from (the first, if several lead to one
// address). A name that does not resolve is left out; addrs is empty only
// if err is not nil. It runs without s.mu: a slow name server must not
// hold up Close or the event callback.
func resolve(ctx context.Context, r *net.Resolver, servers []string) resolution {
	res := resolution{names: map[string]string{}}
	var failed []error
	for _, srv := range servers {
		host, port, _ := net.SplitHostPort(srv) // ValidateServers passed it
		if net.ParseIP(host) != nil {
			res.addrs = append(res.addrs, srv)
			continue
		}
		// LookupIPAddr returns when ctx ends; LookupHost would wait for a
		// query under way (Go's own resolver).
		ips, err := r.LookupIPAddr(ctx, host)
		if err != nil {
			res.missing = append(res.missing, srv)
			failed = append(failed, err)
			continue
		}
		for _, ip := range ips {
			addr := net.JoinHostPort(ip.String(), port)
			res.addrs = append(res.addrs, addr)
			if _, ok := res.names[addr]; !ok {
				res.names[addr] = host
			}
		}
	}
	res.err = errors.Join(failed...)
	return res
}

// newClient starts a new *zk.Conn to r's addresses (go-zookeeper then
// looks nothing up).
// refused, if not nil, is told when every server refused the TLS handshake
// (see connector). It runs outside s.mu: zk.Connect allocates megabytes,
// and a process short of CPU would keep every caller of the Session waiting
// on the lock meanwhile. go-zookeeper calls onEvent from its own goroutines,
// and onEvent first waits for c.ready: the caller closes it under s.mu once
// c is s.cur, or once it knows c will not be and before it closes c, so
// that no event of c is judged against an s.cur that c is about to become.
func (s *Session) newClient(r resolution, refused func(error)) (*client, error) {
	cn := newConnector(&s.cfg, r.addrs, r.names, refused, s.logf)
	w := newWire(cn.dialer())
	w.requested, w.servers = s.cfg.sessionTimeout, len(cn.servers)
	c := &client{authed: s.cfg.authScheme == "", wire: w, connector: cn, missing: r.missing, unresolved: r.err, ready: make(chan struct{})}
	conn, events, err := zk.Connect(r.addrs, s.cfg.sessionTimeout,
		zk.WithEventCallback(func(ev zk.Event) { s.onEvent(c, ev) }),
		zk.WithDialer(c.wire.dialer()),
		zk.WithLogger(zkLogger{s}),
		// A request that does not fit fails with zk.ErrShortBuffer
		// before it is sent (see ErrTooLarge); 4 bytes hold its length.
		zk.WithMaxConnBufferSize(4+maxRequest),
	)
	if err != nil {
		cn.close()
		return nil, fmt.Errorf("zkconn: %w", err)
	}
	c.conn, c.events = conn, events
	return c, nil
}

// close closes c's *zk.Conn and returns once go-zookeeper's goroutines have
// ended. It ends a TLS handshake under way first (go-zookeeper's Close does
// not wait for one). With a session, go-zookeeper's Close asks the server to
// end it, waiting up to a second for the reply; then the wire closes c's
// connections, so that one that gives nothing back (a partition, a stopped
// server) does not keep go-zookeeper reading until its deadline (two thirds
// of the session timeout, ten times that before a session is granted).
// Without a session there is nothing to end, and the connections close
// first; go-zookeeper's Close then still waits its second, for a request it
// cannot send. It must not run under s.mu, which go-zookeeper's event
// callback takes.
func (c *client) close() {
	c.connector.close()
	if c.wire.session.Load() == 0 {
		c.wire.close()
	}
	c.conn.Close()
	c.wire.close()
	for range c.events {
	}
}

// onEvent runs on go-zookeeper's goroutine for every event of c and must not
// block, but for c.ready (see newClient): it fires c's Watches, or updates
// state under s.mu.
func (s *Session) onEvent(c *client, ev zk.Event) {
	<-c.ready
	if ev.Type != zk.EventSession {
		// The record first: a Watch added after it is set by a request
		// of its own (see Handle.GetW).
		c.wire.fired(ev.Path, ev.Type)
		c.watches.fire(ev)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.cur != c {
		return
	}
	switch ev.State {
	case zk.StateHasSession:
		c.hasSession = true
		if c.authed {
			s.upLocked(c)
		} else {
			s.wake() // run adds the credentials
		}
	case zk.StateDisconnected:
		c.hasSession = false
		s.suspendLocked()
	case zk.StateExpired:
		c.hasSession = false
		s.loseLocked(fmt.Errorf("%w: %w", ErrSessionLost, zk.ErrSessionExpired))
		s.retireLocked(c)
	case zk.StateAuthFailed:
		s.logf(slog.LevelError, "zkconn: authentication failed", "server", ev.Server)
	}
}

// upLocked records that c's session is usable: the same session back after a
// suspension, or a new one.
func (s *Session) upLocked(c *client) {
	id := c.conn.SessionID()
	if s.gen != nil && (s.gen.c != c || s.gen.id != id) {
		s.loseLocked(fmt.Errorf("%w: replaced by session %#x", ErrSessionLost, id))
	}
	s.link = newLatch()
	s.expireAt = time.Time{}
	if s.gen != nil {
		s.setStateLocked(StateReconnected, 0)
		return
	}
	s.gen = &generation{id: id, c: c, lost: newLatch()}
	s.setStateLocked(StateConnected, 0)
}

func (s *Session) suspendLocked() {
	if !s.state.connected() {
		return
	}
	s.link.close()
	s.expireAt = s.giveUpAtLocked()
	s.setStateLocked(StateSuspended, 0)
	s.wake()
}

// maxGiveUpMargin bounds giveUpMargin.
const maxGiveUpMargin = 250 * time.Millisecond

// giveUpMargin returns how long before the earliest moment the server can
// expire a session of timeout t the Session gives it up: a tenth of t, and
// no more than maxGiveUpMargin.
func giveUpMargin(t time.Duration) time.Duration { return min(t/10, maxGiveUpMargin) }

// giveUpAtLocked returns when run gives the current, suspended session up:
// giveUpMargin before the earliest moment the server can expire it (the
// wire's aliveUntil; the suspension plus the timeout asked for, if that is
// not known).
//
// Invariant: the Session declares a session lost before the server can
// expire it, so that no hold of it is believed once another client can take
// what it held. The give-up runs late by however long this process is not
// scheduled (run's timer, then the goroutines AfterLost starts), and the
// server expires a session no sooner than the timeout after it last heard
// from it; the margin keeps the loss first through delays up to its size.
// It is bounded because it costs a reconnect that comes back within it (a
// failover, see greetWait) its session: such delays do not grow with the
// timeout.
func (s *Session) giveUpAtLocked() time.Time {
	at := s.cur.wire.aliveUntil()
	if at.IsZero() {
		at = time.Now().Add(s.cfg.sessionTimeout)
	}
	return at.Add(-giveUpMargin(s.timeoutLocked()))
}

// loseLocked ends the current ZooKeeper session, if any, with cause.
func (s *Session) loseLocked(cause error) {
	s.expireAt = time.Time{}
	g := s.gen
	if g == nil {
		return
	}
	s.gen = nil
	g.cause = cause
	g.lost.close()
	s.link.close()
	if !s.closed {
		s.setStateLocked(StateLost, g.id)
	}
}

// eventLocked describes state st of the current session.
func (s *Session) eventLocked(st State) Event {
	ev := Event{State: st, Time: time.Now()}
	if s.gen != nil {
		ev.SessionID = s.gen.id
	}
	return ev
}

// setStateLocked moves to st and tells every subscriber. For StateLost, id
// names the session lost; otherwise it is ignored.
func (s *Session) setStateLocked(st State, id int64) {
	ev := s.eventLocked(st)
	if st == StateLost {
		ev.SessionID = id
	}
	s.state = st
	close(s.changed)
	s.changed = make(chan struct{})
	for sub := range s.subs {
		sub.push(ev)
	}
}

// logs is the one goroutine that calls the Session's logger: it logs the
// transitions sub delivers (the first, the state when it was made, only if
// it is one) and what logf queued. Nothing else of the Session, nor
// go-zookeeper (see zkLogger), nor the connector, waits for the logger: a
// slow one, whose sink the same outage may cut off, holds up no
// suspension, no loss and no reconnection.
//
// Close ends sub's channel early (its buffer holds 16), and closes logsEnd
// only once every other goroutine of the Session, and go-zookeeper's, have
// ended, so that nothing more is queued: logs then logs every transition
// sub still holds, beyond its channel too, and every queued record, and
// ends.
func (s *Session) logs(sub *Subscription) {
	defer close(s.logsDone)
	events := sub.C()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				events = nil
				s.logQueued(sub)
				continue
			}
			s.logEvent(ev)
		case r := <-s.records:
			s.log(r)
		case <-s.logsEnd:
			if events != nil {
				for ev := range events { // closed: its pump has ended
					s.logEvent(ev)
				}
				s.logQueued(sub)
			}
			for {
				select {
				case r := <-s.records:
					s.log(r)
				default:
					return
				}
			}
		}
	}
}

// logQueued logs the transitions the ended sub's channel had no room for.
func (s *Session) logQueued(sub *Subscription) {
	for ev, ok := sub.next(); ok; ev, ok = sub.next() {
		sub.pop()
		s.logEvent(ev)
	}
}

// logEvent logs a transition (not the zero State): suspension and loss at
// Warn, the others at Debug.
func (s *Session) logEvent(ev Event) {
	if ev.State == 0 {
		return
	}
	level := slog.LevelDebug
	if ev.State == StateSuspended || ev.State == StateLost {
		level = slog.LevelWarn
	}
	s.log(record{level, "zkconn: session " + ev.State.String(), []any{"session", fmt.Sprintf("%#x", ev.SessionID)}})
}

// A record is a line for logs to log.
type record struct {
	level slog.Level
	msg   string
	args  []any
}

// log hands r to the logger; only logs calls it.
func (s *Session) log(r record) { s.cfg.logger.Log(context.Background(), r.level, r.msg, r.args...) }

// recordsBuffer is how many records logf queues for logs; it drops more,
// and drops those below Warn once half as many are queued, which keeps room
// for warnings and errors among go-zookeeper's Debug lines.
const recordsBuffer = 64

// logf queues a record for logs without waiting: when the logger is that
// far behind (see recordsBuffer), the record is dropped.
func (s *Session) logf(level slog.Level, msg string, args ...any) {
	if level < slog.LevelWarn && len(s.records) >= recordsBuffer/2 {
		return
	}
	select {
	case s.records <- record{level, msg, args}:
	default:
	}
}

// wake makes run look at the Session again.
func (s *Session) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// run authenticates new connections once they have a session (on a
// goroutine of their own), gives up a session that has stayed suspended
// until shortly before the server can expire it (replacing its *zk.Conn,
// so the client cannot quietly resume it later), starts a new *zk.Conn
// when there is none, and looks the server names up again every second
// while the *zk.Conn was made without some of them and there is no
// session.
func (s *Session) run() {
	defer s.bg.Done()
	type outcome struct {
		c  *client
		ok bool
	}
	var (
		authing   bool                    // an authenticate is under way
		authEnded = make(chan outcome, 1) // its outcome
		authAgain <-chan time.Time        // a second after a failure on failed
		failed    *client
		// The next lookup (replace while there is no *zk.Conn, else
		// refresh) is due a second after the last, for the same *zk.Conn:
		// turns of the loop in between (kicks, AddAuth outcomes) do not
		// put it off.
		lookup    <-chan time.Time
		lookupFor *client
		// refresh's lookups run on a goroutine of their own (a name
		// server can take seconds), at most one at a time.
		refreshing bool
		refreshed  = make(chan lookedUp, 1)
	)
	for {
		s.mu.Lock()
		c, at, closed, live := s.cur, s.expireAt, s.closed, s.gen != nil
		needAuth := c != nil && c.hasSession && !c.authed
		s.mu.Unlock()
		if closed { // replace, say, found it closed: nothing more to start
			return
		}
		if failed != c { // the wait was for another *zk.Conn
			authAgain, failed = nil, nil
		}
		if lookupFor != c {
			lookup, lookupFor = nil, c
		}
		if needAuth && !authing && authAgain == nil {
			// AddAuth can wait in go-zookeeper's queue for a later
			// connection, however long a stuck connect takes: the lookups
			// below go on meanwhile.
			authing = true
			s.bg.Add(1)
			go func() {
				defer s.bg.Done()
				authEnded <- outcome{c, s.authenticate(c)}
			}()
		}
		var fire <-chan time.Time
		then := func() {}
		switch {
		case c == nil:
			if lookup == nil {
				if s.replace(nil) {
					continue
				}
				lookup = time.After(time.Second) // the servers did not resolve: try again
			}
			fire, then = lookup, func() { lookup = nil }
		case !at.IsZero():
			fire, then = time.After(time.Until(at)), func() { s.giveUp(c) }
		case len(c.missing) > 0 && !live && !refreshing:
			if lookup == nil {
				lookup = time.After(time.Second)
			}
			fire, then = lookup, func() {
				lookup, refreshing = nil, true
				s.bg.Add(1)
				go func() {
					defer s.bg.Done()
					refreshed <- lookedUp{c, resolve(s.ctx, s.cfg.resolver, s.servers)}
				}()
			}
		}
		select {
		case <-s.kick:
		case o := <-authEnded:
			authing = false
			if !o.ok {
				authAgain, failed = time.After(time.Second), o.c
			}
		case <-authAgain:
			authAgain, failed = nil, nil
		case l := <-refreshed:
			refreshing = false
			s.refresh(l.c, l.r)
		case <-fire:
			then()
		case <-s.closing:
			return
		}
	}
}

// A lookedUp is what a lookup for refresh found, for c.
type lookedUp struct {
	c *client
	r resolution
}

// refresh retires c, made while some server names did not resolve, if
// there is still no session and r (a lookup since) resolved one of those
// names: run then starts a *zk.Conn with every server that resolves. A
// *zk.Conn never looks names up again, and one that has no session is
// never given up, so without this a Session whose resolved servers are
// down would wait for good for servers it left out. A name that resolved
// for c and now leads elsewhere (round-robin DNS) does not count: c keeps
// its connect under way.
func (s *Session) refresh(c *client, r resolution) {
	if !slices.ContainsFunc(c.missing, func(srv string) bool { return !slices.Contains(r.missing, srv) }) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.cur != c || s.gen != nil {
		return
	}
	s.retireLocked(c)
}

// authenticate sends the digest credentials on c once, and reports whether
// they were accepted; then it reports c's session if it is up.
func (s *Session) authenticate(c *client) bool {
	if err := c.conn.AddAuth(s.cfg.authScheme, s.cfg.auth); err != nil {
		s.logf(slog.LevelWarn, "zkconn: adding credentials failed", "err", err)
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c.authed = true
	if c.hasSession && s.cur == c && !s.closed {
		s.upLocked(c)
	}
	return true
}

// giveUp declares c's session lost once it has stayed suspended until
// expireAt (see giveUpAtLocked), closes c and starts over on a new *zk.Conn.
func (s *Session) giveUp(c *client) {
	s.mu.Lock()
	if s.closed || s.cur != c || s.state != StateSuspended || time.Now().Before(s.expireAt) {
		s.mu.Unlock()
		return
	}
	s.loseLocked(fmt.Errorf("%w: no reply from the servers until shortly before the session may expire (timeout %v)", ErrSessionLost, s.timeoutLocked()))
	s.retireLocked(c)
	s.mu.Unlock()
}

// retireLocked stops using c, whose session is lost: it is closed on a
// goroutine (closing waits for the servers briefly), and run starts a new
// *zk.Conn. A *zk.Conn never carries a second session (see wire).
func (s *Session) retireLocked(c *client) {
	if s.cur != c {
		return
	}
	s.cur = nil
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		c.close()
	}()
	s.wake()
}

// replace starts a new *zk.Conn if the Session is open and its current one
// is old. It reports false if no server resolved.
func (s *Session) replace(old *client) bool {
	r := resolve(s.ctx, s.cfg.resolver, s.servers)
	switch {
	case s.ctx.Err() != nil:
		return false // closed
	case len(r.addrs) == 0:
		s.logf(slog.LevelError, "zkconn: cannot resolve the servers", "servers", s.servers, "err", r.err)
		return false
	case r.err != nil:
		s.logf(slog.LevelWarn, "zkconn: cannot resolve some servers", "err", r.err)
	}
	s.mu.Lock()
	refused, adopting, stale := s.refused, s.adopting, s.closed || s.cur != old
	s.mu.Unlock()
	if stale {
		return true
	}
	next, err := s.newClient(r, refused)
	if err != nil {
		s.logf(slog.LevelError, "zkconn: cannot start a new connection", "err", err)
		return false
	}
	if adopting != nil {
		adopting(next)
	}
	s.mu.Lock()
	stale = s.closed || s.cur != old // only Close changes either meanwhile: run alone replaces
	if !stale {
		s.cur = next
	}
	close(next.ready)
	s.mu.Unlock()
	if stale {
		next.close()
	}
	return true
}

// Current returns a Handle on the live ZooKeeper session, waiting while
// there is none (suspended, or lost and not yet replaced). On failure it
// returns ctx's error, or ErrClosed once the Session is closed. A ctx already
// done fails at once.
func (s *Session) Current(ctx context.Context) (Handle, error) {
	for {
		if err := ctx.Err(); err != nil {
			return Handle{}, err
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return Handle{}, ErrClosed
		}
		if s.gen != nil && s.state.connected() {
			h := Handle{s: s, gen: s.gen, link: s.link}
			s.mu.Unlock()
			return h, nil
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
		}
	}
}

// State returns the Session's state now.
func (s *Session) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// SessionTimeout returns the session timeout of the current ZooKeeper
// session as the server granted it (servers clamp what a client asks for to
// their minSessionTimeout and maxSessionTimeout), or the timeout asked for
// (WithSessionTimeout) while no session has been granted yet. Every deadline
// the Session keeps is derived from the granted timeout.
func (s *Session) SessionTimeout() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.timeoutLocked()
}

func (s *Session) timeoutLocked() time.Duration {
	if s.cur != nil {
		if t := s.cur.wire.Timeout(); t > 0 {
			return t
		}
	}
	return s.cfg.sessionTimeout
}

// ACL returns the ACL the Session gives the nodes it creates.
func (s *Session) ACL() []zk.ACL { return s.cfg.acl }

func (s *Session) isClosing() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// Close ends the ZooKeeper session (the server deletes its ephemeral nodes),
// wakes every waiter with ErrClosed, and returns once every goroutine the
// Session started has ended, the one in its logger last (see WithLogger).
// It is idempotent and always returns nil.
//
// Close waits for no reconnection, and for no reply but the one to the end
// of the session, a second at most. Requests written before it, such as the
// deletes of releases, are applied before the session ends. But on a
// connection that is down, or dead and not yet known to be, the server
// cannot hear of the end: the session, and its nodes, then stay until the
// server expires it, holding up whoever waits behind them. Shutdown waits
// for a live connection first.
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.cancel()
		s.loseLocked(ErrClosed)
		s.setStateLocked(StateClosed, 0)
		close(s.closing)
		c := s.cur
		s.mu.Unlock()
		if c != nil {
			c.close()
		}
		s.bg.Wait()
		close(s.logsEnd)
		<-s.logsDone
	})
	return nil
}

// Shutdown closes the Session (see Close) once the server can hear of it:
// while the connection is down and the session may still be alive, it
// first waits for a reconnection or the session's end, then for the deletes
// under way (Delete, and those of creates given up) to settle, then for a
// round trip that proves the connection alive. So the nodes of releases
// whose deletes were cut, and the session's other ephemeral nodes, go now
// rather than when the server expires the session; unless the connection
// drops in the moment between that round trip and Close's end of the
// session. While no server can be reached, the wait lasts until the
// session's end: up to the session timeout.
//
// If ctx ends before the wait does, Shutdown closes the Session all the
// same (Close takes a second at most) and returns ctx's error; else nil.
func (s *Session) Shutdown(ctx context.Context) error {
	err := s.settle(ctx)
	s.Close()
	return err
}

// settle is Shutdown's wait: while the session is suspended, until it is up
// again or lost (run gives it up at expireAt); then until the deletes under
// way on its connection have settled, each by the session's end at the
// latest; then for a round trip, as the state lags a dead connection by up
// to two thirds of the session timeout (Do waits through its reconnection).
// If the connection dropped meanwhile, it starts over. It returns ctx's
// error if ctx ends first.
func (s *Session) settle(ctx context.Context) error {
	for {
		s.mu.Lock()
		for s.gen != nil && !s.state.connected() {
			changed := s.changed
			s.mu.Unlock()
			select {
			case <-changed:
			case <-ctx.Done():
				return ctx.Err()
			}
			s.mu.Lock()
		}
		h := Handle{s: s, gen: s.gen, link: s.link}
		s.mu.Unlock()
		if h.gen == nil {
			return nil // no session to end
		}
		w := h.gen.c.wire
		w.mu.Lock()
		pending := slices.Collect(maps.Values(w.pending))
		w.mu.Unlock()
		for _, ch := range pending {
			select {
			case <-ch:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		err := h.Do(ctx, func(c *zk.Conn) error { return CatchUp(c, "/") })
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			return nil // the session is lost, or the Session closed
		}
		s.mu.Lock()
		up := s.gen == h.gen && s.state.connected()
		s.mu.Unlock()
		if up {
			return nil
		}
	}
}

// zkLogger routes go-zookeeper's log lines into slog at Debug, through
// logf: go-zookeeper logs on the goroutines that report a connection down.
type zkLogger struct{ s *Session }

func (z zkLogger) Printf(format string, args ...any) {
	z.s.logf(slog.LevelDebug, "zk: "+fmt.Sprintf(format, args...))
}
