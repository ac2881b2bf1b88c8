//go:build race

package zkconn

import (
	"net"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/go-zookeeper/zk"
)

// TestReviewR119StallInSendSetWatches: go-zookeeper's loop goroutine is kept
// from running on a reconnect, after it started its receiving goroutine and
// before sendSetWatches read lastZxid (the test holds go-zookeeper's
// watchersLock, which sendSetWatches takes first), past the hold's timer
// (called here as it would fire), while go-zookeeper holds a watch and a
// request queued during the disconnect goes out as soon as the send loop
// starts. The hold must keep that request's reply from go-zookeeper until
// setWatches is written: when the timer ended it (before), the receiving
// goroutine wrote lastZxid for the reply first, and the race detector
// reported go-zookeeper/zk#35 once the loop goroutine ran on (in CI; here
// the test fails as the timer ends the hold). Built with -race only, where
// alone there is a hold.
func TestReviewR119StallInSendSetWatches(t *testing.T) {
	type handed struct {
		conn *zk.Conn
		lock *sync.Mutex
	}
	hand := make(chan handed, 1)
	queued := make(chan error, 1)
	var dials atomic.Int32
	w := newWire(func(network, addr string, timeout time.Duration) (net.Conn, error) {
		if dials.Add(1) == 2 {
			// The reconnect: go-zookeeper has failed the requests it
			// had queued; the next one goes out on this connection.
			h := <-hand
			h.lock.Lock()
			go func() {
				_, _, err := h.conn.Exists("/")
				queued <- err
			}()
		}
		return net.DialTimeout(network, addr, timeout)
	})
	conn, events, err := zk.Connect([]string{shared.Addr()}, 10*time.Second, zk.WithDialer(w.dialer()), zk.WithLogger(quiet{}), zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		conn.Close()
		w.close()
		for range events {
		}
	}()
	lock := (*sync.Mutex)(unsafe.Pointer(reflect.ValueOf(conn).Elem().FieldByName("watchersLock").UnsafeAddr()))
	hand <- handed{conn, lock}
	deadline := time.After(30 * time.Second)
	await := func(s zk.State) {
		t.Helper()
		for {
			select {
			case ev := <-events:
				if ev.Type == zk.EventSession && ev.State == s {
					return
				}
			case <-deadline:
				t.Fatalf("no %v", s)
			}
		}
	}
	await(zk.StateHasSession)
	if _, _, _, err := conn.GetW("/"); err != nil {
		t.Fatal(err)
	}
	open := func() *tap { // the one connection open
		w.mu.Lock()
		defer w.mu.Unlock()
		for tp := range w.taps {
			return tp
		}
		return nil
	}
	open().Close()
	await(zk.StateHasSession) // the loop goroutine goes on to sendSetWatches, and waits there
	second := open()
	second.holdExpired()
	ended := isClosed(second.hold)
	lock.Unlock()
	if ended {
		t.Fatal("the timer ended the hold while go-zookeeper holds a watch and has not sent setWatches: the reply to the request queued goes to go-zookeeper, which writes lastZxid for it as its loop goroutine is about to read it (go-zookeeper/zk#35)")
	}
	// The read of lastZxid for setWatches comes before its Write, which
	// ends the hold: the race detector has seen both accesses once it is.
	select {
	case <-second.hold:
	case <-deadline:
		t.Fatal("the hold never ended")
	}
	select {
	case err := <-queued:
		if err != nil {
			t.Fatal(err)
		}
	case <-deadline:
		t.Fatal("the request queued during the disconnect got no reply")
	}
}
