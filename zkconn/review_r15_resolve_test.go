package zkconn

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// fakeDNS is a resolver (Go's, over an in-process stream "server") that
// answers A queries for one name with 127.0.0.1 while on is true, and
// NXDOMAIN for it (and everything else) otherwise: a DNS record that is
// removed, or a name server that says so. Given ips, it answers one of
// them at a time instead, taking turns (round-robin DNS).
type fakeDNS struct {
	name string    // lower case, no trailing dot
	ips  [][4]byte // the answers in turn; none: 127.0.0.1
	on   atomic.Bool
	n    atomic.Int64 // A queries for name answered
}

func (d *fakeDNS) resolver() *net.Resolver { return dnsResolver(d.answer) }

// dnsResolver is a resolver (Go's) whose name server is answer, over
// in-process stream connections.
func dnsResolver(answer func(q []byte) []byte) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		client, server := net.Pipe()
		go serveDNS(server, answer)
		return client, nil
	}}
}

// serveDNS answers the queries on one stream connection (2-byte length
// prefixed messages) until it is closed.
func serveDNS(c net.Conn, answer func(q []byte) []byte) {
	defer c.Close()
	for {
		var n [2]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return
		}
		q := make([]byte, binary.BigEndian.Uint16(n[:]))
		if _, err := io.ReadFull(c, q); err != nil {
			return
		}
		resp := answer(q)
		if resp == nil {
			return
		}
		out := binary.BigEndian.AppendUint16(nil, uint16(len(resp)))
		if _, err := c.Write(append(out, resp...)); err != nil {
			return
		}
	}
}

// dnsQuestion returns the name (lower case) and type a query asks for,
// and its question section; ok is false if q is malformed.
func dnsQuestion(q []byte) (name string, qtype uint16, question []byte, ok bool) {
	if len(q) < 12 {
		return "", 0, nil, false
	}
	// The question: labels up to the root, then type and class.
	i := 12
	var labels []string
	for i < len(q) && q[i] != 0 {
		l := int(q[i])
		if i+1+l > len(q) {
			return "", 0, nil, false
		}
		labels = append(labels, string(q[i+1:i+1+l]))
		i += 1 + l
	}
	i++ // the root
	if i+4 > len(q) {
		return "", 0, nil, false
	}
	return strings.ToLower(strings.Join(labels, ".")), binary.BigEndian.Uint16(q[i:]), q[12 : i+4], true
}

func (d *fakeDNS) answer(q []byte) []byte {
	name, qtype, question, ok := dnsQuestion(q)
	if !ok {
		return nil
	}
	known := name == d.name && d.on.Load()
	h := make([]byte, 12)
	copy(h, q[:2])                                     // ID
	flags := uint16(0x8000 | 0x0400 | 0x0100 | 0x0080) // QR AA RD RA
	if !known {
		flags |= 3 // NXDOMAIN
	}
	binary.BigEndian.PutUint16(h[2:], flags)
	binary.BigEndian.PutUint16(h[4:], 1) // QDCOUNT
	resp := append(h, question...)
	if known && qtype == 1 { // A
		ip := [4]byte{127, 0, 0, 1}
		if n := d.n.Add(1) - 1; len(d.ips) > 0 {
			ip = d.ips[int(n)%len(d.ips)]
		}
		binary.BigEndian.PutUint16(resp[6:], 1) // ANCOUNT
		resp = append(resp, 0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4)
		resp = append(resp, ip[:]...)
	}
	return resp
}

// TestReviewR15UnresolvableNameKeepsSessionDown: a Session is given two
// servers, one by IP address and one by a name that resolves when Dial
// runs. The name's record is then removed (the server it named is
// decommissioned, or its name server answers NXDOMAIN for a while). The
// Session's ZooKeeper session is lost (a partition longer than the session
// timeout) and the partition heals: the server at the IP address is up and
// reachable, and the Session's doc promises it "carries on with a new
// ZooKeeper session". It does not: run's replace resolves every server
// name, fails on the one, logs "cannot resolve the servers" and tries
// again each second, forever; no *zk.Conn is made at all. (Curator's
// ZooKeeper client, StaticHostProvider, skips an address it cannot
// resolve and connects to the others; so does go-zookeeper's own
// reconnection on a live *zk.Conn, which never resolves again.) Dial has
// the same rule: TestReviewR15DialOneUnresolvableName.
func TestReviewR15UnresolvableNameKeepsSessionDown(t *testing.T) {
	byIP := zktest.NewProxy(t, shared.Addr())
	byName := zktest.NewProxy(t, shared.Addr())
	_, port, err := net.SplitHostPort(byName.Addr())
	if err != nil {
		t.Fatal(err)
	}
	dns := &fakeDNS{name: "zk2.r15.test"}
	dns.on.Store(true)
	rec := newLogGate("") // records every line, blocks on none
	close(rec.release)
	s := dial(t, []string{byIP.Addr(), "zk2.r15.test:" + port}, WithResolver(dns.resolver()),
		WithSessionTimeout(2*time.Second), WithLogger(slog.New(rec)))
	sub := s.Subscribe()
	defer sub.Stop()
	await(t, sub, StateConnected, 10*time.Second)

	dns.on.Store(false) // the record of zk2 is removed
	byIP.BlackHole()
	byName.BlackHole()
	await(t, sub, StateLost, 30*time.Second)
	byIP.Heal() // 127.0.0.1 is back; zk2 stays gone
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := s.Current(ctx); err != nil {
		var lines []string
		for _, m := range rec.messages() {
			if strings.Contains(m, "resolve") {
				lines = append(lines, m)
			}
		}
		t.Fatalf("Current = %v: no new ZooKeeper session within 20s though %s (given by IP) is up; logged %d× %q",
			err, byIP.Addr(), len(lines), lines[:min(1, len(lines))])
	}
}

// TestReviewR15DialOneUnresolvableName: Dial's doc says it returns once a
// session is established, or ctx's error if ctx is done first. With one
// of two servers given by a name that does not resolve (NXDOMAIN), and the
// other, by IP address, up, it fails at once with the lookup's error
// instead of connecting to the one that is up.
func TestReviewR15DialOneUnresolvableName(t *testing.T) {
	dns := &fakeDNS{name: "zk2.r15.test"} // answers NXDOMAIN
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rec := newLogGate("") // records every line, blocks on none
	close(rec.release)
	s, err := Dial(ctx, []string{shared.Addr(), "zk2.r15.test:2181"}, WithResolver(dns.resolver()), WithLogger(slog.New(rec)))
	if err != nil {
		var dnsErr *net.DNSError
		t.Fatalf("Dial = %v (DNSError %v); want a session on %s, which is up", err, errors.As(err, &dnsErr), shared.Addr())
	}
	s.Close()
	if got := rec.messages(); !slices.Contains(got, "zkconn: cannot resolve some servers") {
		t.Errorf("logged %q; want the name left out said", got)
	}
}
