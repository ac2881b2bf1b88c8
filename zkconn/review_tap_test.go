package zkconn

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	mrand "math/rand/v2"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// reviewStream makes a connect response then replies of random sizes
// around the tap's buffer size; it returns the stream, the greeting's end
// and the number of requests the replies answer.
func reviewStream(r *mrand.Rand) ([]byte, int64, int) {
	greeting := make([]byte, 36)
	binary.BigEndian.PutUint32(greeting[4:8], 4000)
	binary.BigEndian.PutUint64(greeting[8:16], 0x1234)
	stream := frameOf(greeting)
	greetEnd := int64(len(stream))
	sizes := []int{0, 1, 4076, 4077, 4078, 4079, 4080, 4081, 4092, 8176, 8180, 3 * 4096, 100000}
	requests := 0
	for range 1 + r.IntN(12) {
		var size int
		if r.IntN(2) == 0 {
			size = sizes[r.IntN(len(sizes))]
		} else {
			size = r.IntN(3 * tapReadSize)
		}
		xid := int32(requests + 1)
		if r.IntN(5) == 0 {
			xid = -1
		} else {
			requests++
		}
		b := make([]byte, 16+size)
		binary.BigEndian.PutUint32(b, uint32(xid))
		for i := 16; i < len(b); i++ {
			b[i] = byte(r.IntN(256))
		}
		stream = append(stream, frameOf(b)...)
	}
	return stream, greetEnd, requests
}

// reviewRequests returns n requests written, not yet answered: the connect
// request, then those of xids 1 to n-1.
func reviewRequests(n int) []request {
	rs := make([]request, n)
	for i := range rs {
		rs[i].xid = int32(i)
	}
	return rs
}

// reviewChunks cuts stream into segments of the sizes size returns, given
// how many bytes are left.
func reviewChunks(stream []byte, size func(rest int) int) [][]byte {
	var chunks [][]byte
	for rest := stream; len(rest) > 0; {
		n := min(size(len(rest)), len(rest))
		chunks, rest = append(chunks, rest[:n]), rest[n:]
	}
	return chunks
}

// TestReviewTapRandomFraming: random replies (sizes around tapReadSize),
// random segments, data with an error, and a hold: go-zookeeper's reads
// (length then body, the greeting with a 256-byte buffer, the replies with
// a large one) get the stream, then the error; no byte after the greeting
// passes before the hold ends; every request is answered.
func TestReviewTapRandomFraming(t *testing.T) {
	t.Parallel()
	errEnd := errors.New("end")
	for seed := range uint64(600) {
		r := mrand.New(mrand.NewPCG(seed, 7))
		stream, greetEnd, requests := reviewStream(r)
		chunks := reviewChunks(stream, func(rest int) int {
			switch r.IntN(4) {
			case 0:
				return 1 + r.IntN(8)
			case 1:
				return 1 + r.IntN(2*tapReadSize)
			case 2:
				return tapReadSize - 4 + r.IntN(9)
			}
			return rest
		})
		held := r.IntN(2) == 0
		w := newWire(nil)
		tp := &tap{Conn: &chunkConn{chunks: chunks, err: errEnd}, w: w}
		if held {
			tp.hold, tp.holdFor = make(chan struct{}), time.Hour
		}
		tp.pending = reviewRequests(1 + requests)
		tp.wrote = true
		var got []byte
		// the greeting, as authenticate reads it
		buf := make([]byte, 256)
		if _, err := io.ReadFull(tp, buf[:4]); err != nil {
			t.Fatalf("seed %d: greeting length: %v", seed, err)
		}
		blen := int(binary.BigEndian.Uint32(buf))
		if _, err := io.ReadFull(tp, buf[:blen]); err != nil {
			t.Fatalf("seed %d: greeting body: %v", seed, err)
		}
		got = append(got, stream[:4]...) // checked below with the rest
		got = append(got, buf[:blen]...)
		if held {
			if tp.given != greetEnd {
				t.Fatalf("seed %d: %d bytes returned, the greeting ends at %d: the next read would not wait for the hold", seed, tp.given, greetEnd)
			}
			head := make([]byte, 4)
			var n int
			var err error
			done := make(chan struct{})
			go func() {
				defer close(done)
				n, err = tp.Read(head)
			}()
			tp.unhold()
			<-done
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			got = append(got, head[:n]...)
			if n < 4 {
				if _, err := io.ReadFull(tp, head[n:]); err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				got = append(got, head[n:]...)
			}
			blen := int(binary.BigEndian.Uint32(head))
			body := make([]byte, blen)
			if _, err := io.ReadFull(tp, body); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			got = append(got, body...)
		}
		big := make([]byte, 1536*1024) // go-zookeeper's recvLoop buffer
		var last error
		for {
			if _, err := io.ReadFull(tp, big[:4]); err != nil {
				last = err
				break
			}
			blen := int(binary.BigEndian.Uint32(big))
			if _, err := io.ReadFull(tp, big[:blen]); err != nil {
				t.Fatalf("seed %d: body of %d: %v", seed, blen, err)
			}
			got = slices.Concat(got, binary.BigEndian.AppendUint32(nil, uint32(blen)), big[:blen])
		}
		if !bytes.Equal(got, stream) {
			t.Fatalf("seed %d: read %d bytes, not the %d sent (or different)", seed, len(got), len(stream))
		}
		if !errors.Is(last, errEnd) {
			t.Fatalf("seed %d: last error %v; want %v", seed, last, errEnd)
		}
		if tp.greetEnd != greetEnd || tp.given != int64(len(stream)) || tp.rbase != int64(len(stream)) || len(tp.rbuf) != 0 {
			t.Fatalf("seed %d: greetEnd %d (want %d), given %d rbase %d rbuf %d (want %d)", seed, tp.greetEnd, greetEnd, tp.given, tp.rbase, len(tp.rbuf), len(stream))
		}
		if len(tp.pending) != 0 {
			t.Fatalf("seed %d: %d requests pending", seed, len(tp.pending))
		}
		if w.session.Load() != 0x1234 || w.Timeout() != 4*time.Second {
			t.Fatalf("seed %d: session %#x timeout %v", seed, w.session.Load(), w.Timeout())
		}
	}
}

// TestReviewTapStreamBytes checks byte-exactness with random reads of
// random sizes (any io.Reader use), and data+error ordering.
func TestReviewTapStreamBytes(t *testing.T) {
	t.Parallel()
	errEnd := errors.New("end")
	for seed := range uint64(600) {
		r := mrand.New(mrand.NewPCG(seed, 9))
		stream, _, requests := reviewStream(r)
		chunks := reviewChunks(stream, func(int) int { return 1 + r.IntN(2*tapReadSize) })
		tp := &tap{Conn: &chunkConn{chunks: chunks, err: errEnd}, w: newWire(nil)}
		tp.pending = reviewRequests(1 + requests)
		tp.wrote = true
		var got []byte
		var err error
		for err == nil {
			b := make([]byte, 1+r.IntN(3*tapReadSize))
			var n int
			n, err = tp.Read(b)
			got = append(got, b[:n]...)
		}
		if !errors.Is(err, errEnd) || !bytes.Equal(got, stream) || len(tp.pending) != 0 {
			t.Fatalf("seed %d: err %v, %d of %d bytes equal=%v, pending %d", seed, err, len(got), len(stream), bytes.Equal(got, stream), len(tp.pending))
		}
	}
}

// reviewTCPPair returns the two ends of a TCP connection on loopback.
func reviewTCPPair(t *testing.T) (client, server net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		ch <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-ch
	if s == nil {
		t.Fatal("accept failed")
	}
	return c, s
}

// reviewTLSPair returns the two ends of a TLS connection on loopback, its
// handshake done. The server presents a certificate the client does not
// check.
func reviewTLSPair(t *testing.T) (client, server net.Conn) {
	files, err := zktest.NewTLSFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := files.Config()
	if err != nil {
		t.Fatal(err)
	}
	c, s := reviewTCPPair(t)
	tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true})
	ts := tls.Server(s, &tls.Config{Certificates: cfg.Certificates})
	shook := make(chan error, 1)
	go func() { shook <- ts.Handshake() }()
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-shook; err != nil {
		t.Fatal(err)
	}
	return tc, ts
}

// TestReviewTapDeadlines: over TCP and TLS, beneath firstRead, reads as
// go-zookeeper's recvLoop makes them, each under a read deadline: whole
// frames pass, a frame larger than the buffer arrives whole, the tap never
// blocks while go-zookeeper's bytes are in its buffer, and a stalled body
// times out (a net.Error with Timeout).
func TestReviewTapDeadlines(t *testing.T) {
	t.Parallel()
	for name, pair := range map[string]func(*testing.T) (net.Conn, net.Conn){"tcp": reviewTCPPair, "tls": reviewTLSPair} {
		t.Run(name, func(t *testing.T) {
			c, s := pair(t)
			defer c.Close()
			defer s.Close()
			tp := &tap{Conn: &firstRead{Conn: c, raw: c, c: newConnector(&config{}, nil, nil, nil, nil), addr: "x"}, w: newWire(nil)}
			tp.wrote = true
			tp.pending = reviewRequests(10)
			greeting := make([]byte, 36)
			binary.BigEndian.PutUint32(greeting[4:8], 4000)
			binary.BigEndian.PutUint64(greeting[8:16], 0x99)
			reply := func(xid int32, size int) []byte {
				b := make([]byte, 16+size)
				binary.BigEndian.PutUint32(b, uint32(xid))
				for i := 16; i < len(b); i++ {
					b[i] = byte(i * 7)
				}
				return frameOf(b)
			}
			a, bg, cc := reply(1, 30), reply(2, 50000), reply(3, 10)
			// cc's body never comes: its read must time out.
			go s.Write(slices.Concat(frameOf(greeting), a, bg, cc[:6]))
			buf := make([]byte, 1536*1024)
			readFrame := func(d time.Duration) ([]byte, error) {
				tp.SetReadDeadline(time.Now().Add(d))
				if _, err := io.ReadFull(tp, buf[:4]); err != nil {
					return nil, err
				}
				n := int(binary.BigEndian.Uint32(buf))
				_, err := io.ReadFull(tp, buf[:n])
				tp.SetReadDeadline(time.Time{})
				return slices.Concat(binary.BigEndian.AppendUint32(nil, uint32(n)), buf[:n]), err
			}
			for i, want := range [][]byte{frameOf(greeting), a, bg} {
				got, err := readFrame(2 * time.Second)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("frame %d: %d bytes, %v; want %d bytes", i, len(got), err, len(want))
				}
			}
			_, err := readFrame(300 * time.Millisecond)
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("stalled body: %v; want a timeout", err)
			}
			if tp.w.session.Load() != 0x99 || len(tp.pending) != 10-3 {
				t.Fatalf("session %#x pending %d", tp.w.session.Load(), len(tp.pending))
			}
		})
	}
}

// TestReviewTapReconnectsUnderLoad: through a proxy cut again and again,
// with watches set (go-zookeeper sends setWatches after each reconnect, so
// the race detector's hold is in play) and replies large and small in
// flight, every Get returns the bytes written, the session stays one, the
// granted timeout and the round trip are known, and aliveUntil never lies
// ahead of now + timeout. Under -race, a broken hold shows as
// go-zookeeper's lastZxid race.
func TestReviewTapReconnectsUnderLoad(t *testing.T) {
	t.Parallel()
	srv := zktest.Start(t)
	px := zktest.NewProxy(t, srv.Addr())
	s := dial(t, []string{px.Addr()}, WithSessionTimeout(20*time.Second))
	h := current(t, s)
	id := h.ID()
	conn := h.Conn()
	root := testRoot(t)
	obs := zktest.Observer(t, srv.Addr())
	plainRoot(t, obs, root, nil)
	datas := map[string][]byte{}
	for i, size := range []int{0, 10, 4060, 4080, 4092, 4100, 9000, 70000, 300000} {
		p := fmt.Sprintf("%s/n%d", root, i)
		d := bytes.Repeat([]byte{byte('a' + i)}, size)
		if _, err := obs.Create(p, d, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		datas[p] = d
	}
	for i := range 50 {
		if _, _, _, err := conn.ExistsW(fmt.Sprintf("%s/absent%d", root, i)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex // datas does not change
	g := startGets(conn, slices.Collect(maps.Keys(datas)), &mu, func(p string) []byte { return datas[p] })
	defer g.stop()
	sub := s.Subscribe()
	defer sub.Stop()
	for range 8 {
		g.await(ctx, t) // replies large and small on the connection about to be cut
		px.Cut()
		await(t, sub, StateSuspended, 10*time.Second)
		await(t, sub, StateReconnected, 10*time.Second)
		now := time.Now()
		w := s.cur.wire
		if au := w.aliveUntil(); au.IsZero() || au.After(now.Add(w.Timeout())) {
			t.Fatalf("aliveUntil %v, now + timeout %v", au, now.Add(w.Timeout()))
		}
		if w.Timeout() != 20*time.Second || w.session.Load() != id || w.RoundTrip() <= 0 {
			t.Fatalf("timeout %v session %#x (want %#x) rtt %v", w.Timeout(), w.session.Load(), id, w.RoundTrip())
		}
	}
	g.stop()
	select {
	case err := <-g.errs:
		t.Fatal(err)
	default:
	}
}

// gets Gets paths through one *zk.Conn again and again, a goroutine a
// path, through cuts and reconnects: a Get made while the connection is
// down waits in go-zookeeper's queue for the next one.
type gets struct {
	errs <-chan error    // a Get that returned other bytes than wanted, or ErrNoAuth
	got  <-chan struct{} // a Get came back whole (dropped when full)
	stop func()          // ends the goroutines and waits for them
}

// startGets starts gets of paths through conn. mu is held across want(p),
// the bytes the Get of p must return, and the Get.
func startGets(conn *zk.Conn, paths []string, mu *sync.Mutex, want func(p string) []byte) gets {
	quit := make(chan struct{})
	errs := make(chan error, len(paths))
	got := make(chan struct{}, len(paths))
	var wg sync.WaitGroup
	for _, p := range paths {
		wg.Go(func() {
			for {
				select {
				case <-quit:
					return
				default:
				}
				mu.Lock()
				d := want(p)
				data, _, err := conn.Get(p)
				mu.Unlock()
				if errors.Is(err, zk.ErrNoAuth) {
					errs <- fmt.Errorf("Get(%s): %w: a credential was not sent again before it", p, err)
					return
				}
				if err != nil {
					continue // the connection is down: queued again
				}
				if !bytes.Equal(data, d) {
					errs <- fmt.Errorf("Get(%s) = %d bytes; want %d", p, len(data), len(d))
					return
				}
				select {
				case got <- struct{}{}:
				default:
				}
			}
		})
	}
	var once sync.Once
	return gets{errs: errs, got: got, stop: func() {
		once.Do(func() { close(quit) })
		wg.Wait()
	}}
}

// await returns once a Get a path has come back whole since the last await,
// give or take; it fails the test on a wrong Get or the end of ctx.
func (g gets) await(ctx context.Context, t *testing.T) {
	t.Helper()
	for range cap(g.got) {
		select {
		case <-g.got:
		case err := <-g.errs:
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
}
