package zkconn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

// Review round 52: DoOnce's outcome for a write that was sent, and applied,
// when Close came.

// r52DroppedWrite returns a Session through a proxy, its Handle, an
// observer, a node at path holding "old", and a Drop armed on the first
// write of its data: applied, its reply swallowed.
func r52DroppedWrite(t *testing.T) (*Session, Handle, *zk.Conn, string, *zktest.Fault) {
	t.Helper()
	p := zktest.NewProxy(t, shared.Addr())
	s := dial(t, []string{p.Addr()}, WithSessionTimeout(20*time.Second))
	obs := zktest.Observer(t, shared.Addr())
	path := testRoot(t)
	plainRoot(t, obs, path, []byte("old"))
	t.Cleanup(func() { obs.Delete(path, -1) })
	dropped := p.Strike(zktest.Match{Op: zktest.OpSetData, Path: path}, zktest.Drop)
	t.Cleanup(dropped.Disarm)
	return s, current(t, s), obs, path, dropped
}

// TestReviewR52CloseWithWriteInFlight is the counterpart of the tests of a
// Close before the request is sent (TestReviewR48CloseBeforeSend, with a
// ctx that can be done and with one that cannot): the
// write is sent, the server applies it and its reply is swallowed (Drop,
// the connection stays up), and then the Session is closed. DoOnce must
// report an unknown outcome (ErrUnknownOutcome), never the plain ErrClosed
// of a request it did not send, which its callers take for "nothing was
// written" (Value.Set).
//
//   - ctx never done: callOr runs op inline, and go-zookeeper fails the
//     request with zk.ErrConnectionClosed once Close has begun (and
//     isClosing holds).
//   - ctx with a deadline: callOr returns at the session's loss (h.gen.cause,
//     ErrClosed), op still running on its goroutine: op holds on after its
//     request until DoOnce has returned, so that the loss, not op's error,
//     decides.
func TestReviewR52CloseWithWriteInFlight(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inline bool
	}{
		{"ctx never done", true},
		{"ctx with a deadline", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, h, obs, path, dropped := r52DroppedWrite(t)
			ctx := context.Background()
			var hold chan struct{} // closed once DoOnce has returned
			if !tc.inline {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Minute)
				defer cancel()
				hold = make(chan struct{})
			}
			res := make(chan error, 1)
			go func() {
				res <- h.DoOnce(ctx, func(c *zk.Conn) error {
					_, err := c.Set(path, []byte("new"), -1)
					if hold != nil {
						<-hold
					}
					return err
				})
			}()
			select {
			case <-dropped.Struck(): // applied, its reply swallowed
			case err := <-res:
				t.Fatalf("DoOnce returned %v before its write was applied", err)
			}
			closed := make(chan struct{})
			go func() {
				defer close(closed)
				s.Close() // waits for op's goroutine, if any
			}()
			var err error
			select {
			case err = <-res:
			case <-time.After(30 * time.Second):
				t.Fatal("DoOnce did not return within 30s of Close")
			}
			if hold != nil {
				close(hold)
			}
			<-closed
			if data, _, gerr := obs.Get(path); gerr != nil || string(data) != "new" {
				t.Fatalf("Get(%s) = %q, %v; want \"new\": the write was applied", path, data, gerr)
			}
			if !errors.Is(err, ErrUnknownOutcome) || !errors.Is(err, ErrClosed) && !errors.Is(err, zk.ErrConnectionClosed) {
				t.Fatalf("DoOnce of a write applied, its reply lost to Close = %v; want an error wrapping ErrUnknownOutcome (and the cause)", err)
			}
		})
	}
}

// TestReviewR52ClosingAfterSend pins DoOnce's reading of zk.ErrClosing:
// go-zookeeper fails the requests it has sent with it when its client is
// closed (flushRequests), and a caller whose goroutine reaches its select
// only after that sees it as often as ErrConnectionClosed (both are ready).
// Such a request may have been applied: DoOnce must say the outcome is
// unknown, not the ErrClosed of a request never sent. No fault makes
// go-zookeeper pick one of two ready channels, so op here sends the write
// (applied, its reply swallowed) and returns zk.ErrClosing itself, as
// go-zookeeper would in that window.
func TestReviewR52ClosingAfterSend(t *testing.T) {
	s, h, obs, path, dropped := r52DroppedWrite(t)
	set := make(chan error, 1)
	err := h.DoOnce(context.Background(), func(c *zk.Conn) error {
		go func() {
			_, err := c.Set(path, []byte("new"), -1)
			set <- err
		}()
		zktest.AwaitStruck(t, dropped) // applied, its reply swallowed
		return zk.ErrClosing
	})
	s.Close()
	<-set // the swallowed reply's request, failed by the close
	if data, _, gerr := obs.Get(path); gerr != nil || string(data) != "new" {
		t.Fatalf("Get(%s) = %q, %v; want \"new\": the write was applied", path, data, gerr)
	}
	if !errors.Is(err, ErrUnknownOutcome) || !errors.Is(err, zk.ErrClosing) {
		t.Fatalf("DoOnce of a write sent, failed with zk.ErrClosing = %v; want an error wrapping ErrUnknownOutcome and the cause", err)
	}
}
