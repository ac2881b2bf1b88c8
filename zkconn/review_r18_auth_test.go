package zkconn

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// multiDNS is a resolver answering for several fakeDNS names at once: each
// query goes to the fakeDNS of its name (NXDOMAIN for any other name).
type multiDNS []*fakeDNS

func (m multiDNS) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		client, server := net.Pipe()
		go m.serve(server)
		return client, nil
	}}
}

func (m multiDNS) serve(c net.Conn) {
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
		d := m[0]
		if len(q) > 12 {
			var labels []string
			for i := 12; i < len(q) && q[i] != 0 && i+1+int(q[i]) <= len(q); i += 1 + int(q[i]) {
				labels = append(labels, string(q[i+1:i+1+int(q[i])]))
			}
			name := strings.ToLower(strings.Join(labels, "."))
			for _, x := range m {
				if x.name == name {
					d = x
				}
			}
		}
		resp := d.answer(q)
		if resp == nil {
			return
		}
		out := binary.BigEndian.AppendUint16(nil, uint16(len(resp)))
		if _, err := c.Write(append(out, resp...)); err != nil {
			return
		}
	}
}

// TestReviewR18AuthBlocksRefresh: f62c846 lets run call refresh "between
// attempts to add credentials", but an attempt (AddAuth) does not end
// until go-zookeeper has finished a round of its servers: it waits in
// go-zookeeper's send queue while a connection attempt is under way. A
// server that accepts TCP but never answers the connect request (a hung
// JVM, a black hole behind a load balancer) keeps go-zookeeper's connect
// read going for ten times two thirds of the session timeout (200 s at the
// default 30 s); the wire's deaf check starts only once a session is
// granted. So with WithDigestAuth the names are not looked up again for
// that long, against WithResolver's "looked up again every second while
// there is no session, and once it resolves the Session starts a
// connection with it".
//
// Setting: two servers by name. zk1.r18.test resolves (to a black-holed
// proxy) when Dial resolves, zk2.r18.test does not (NXDOMAIN). Then the
// records are swapped (zk1 decommissioned, zk2 up: a migration). Without
// credentials refresh runs each second, sees zk2 resolve, retires the
// *zk.Conn stuck on zk1 and connects to zk2 at once. With credentials
// run sits in AddAuth; zk2 is never looked up again and Dial fails at its
// deadline.
func TestReviewR18AuthBlocksRefresh(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"NoAuth", nil},
		{"DigestAuth", []Option{WithDigestAuth("alice", "secret")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hung := zktest.NewProxy(t, shared.Addr())
			hung.BlackHole() // accepts connections, answers nothing
			live := zktest.NewProxy(t, shared.Addr())
			_, hungPort, _ := net.SplitHostPort(hung.Addr())
			_, livePort, _ := net.SplitHostPort(live.Addr())
			zk1 := &fakeDNS{name: "zk1.r18.test"}
			zk1.on.Store(true)
			zk2 := &fakeDNS{name: "zk2.r18.test"} // NXDOMAIN while Dial resolves
			dns := multiDNS{zk1, zk2}
			partial := newMsgSignal("zkconn: cannot resolve some servers")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			type result struct {
				s   *Session
				err error
			}
			done := make(chan result, 1)
			go func() {
				s, err := Dial(ctx, []string{"zk1.r18.test:" + hungPort, "zk2.r18.test:" + livePort},
					append(tc.opts, WithResolver(dns.resolver()), WithLogger(slog.New(partial)))...)
				done <- result{s, err}
			}()
			select { // Dial has resolved zk1 only, and started its *zk.Conn to hung alone
			case <-partial.seen:
			case r := <-done:
				t.Fatalf("Dial returned %v before logging the name left out", r.err)
			}
			zk1.on.Store(false) // zk1 decommissioned
			zk2.on.Store(true)  // zk2 up
			start := time.Now()
			r := <-done
			if r.err != nil {
				t.Fatalf("Dial = %v after %v\nzk2.r18.test was looked up %d times since it resolves; want a session on %s (refresh looks the names up every second)",
					r.err, time.Since(start).Round(time.Millisecond), zk2.n.Load(), live.Addr())
			}
			t.Logf("connected %v after zk2 resolved", time.Since(start).Round(time.Millisecond))
			r.s.Close()
		})
	}
}
