package zkconn

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// multiDNS is a resolver answering for several fakeDNS names at once: each
// query goes to the fakeDNS of its name (NXDOMAIN for any other name).
type multiDNS []*fakeDNS

func (m multiDNS) resolver() *net.Resolver {
	return dnsResolver(func(q []byte) []byte {
		name, _, _, _ := dnsQuestion(q)
		for _, d := range m {
			if d.name == name {
				return d.answer(q)
			}
		}
		return m[0].answer(q) // NXDOMAIN
	})
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
	for _, tc := range withAndWithoutAuth {
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
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var start time.Time
			r := dialResolving(t, ctx, []string{"zk1.r18.test:" + hungPort, "zk2.r18.test:" + livePort}, dns.resolver(), tc.opts, func() {
				zk1.on.Store(false) // zk1 decommissioned
				zk2.on.Store(true)  // zk2 up
				start = time.Now()
			})
			if r.err != nil {
				t.Fatalf("Dial = %v after %v\nzk2.r18.test was looked up %d times since it resolves; want a session on %s (refresh looks the names up every second)",
					r.err, time.Since(start).Round(time.Millisecond), zk2.n.Load(), live.Addr())
			}
			t.Logf("connected %v after zk2 resolved", time.Since(start).Round(time.Millisecond))
			r.s.Close()
		})
	}
}
