package zkconn

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
)

// TestReviewR14RefusedDialBlockedLogger (review round 14): Dial's early
// exit when every server refuses the TLS handshake, with a logger whose
// sink is cut off (it blocks on the refusal, the first line it gets).
// Dial's failure path closes the Session, which waits for its log
// goroutine (no goroutine outlives Dial), so Dial returns only once the
// logger does, past its ctx here (WithLogger and Dial say so). Then it
// must still report the refusal: a version decided its error after Close,
// found ctx done, and returned the internal wait's context.Canceled, which
// is neither ErrTLSHandshake nor ctx's error (the dsync command then said
// "no ZooKeeper server answered within -dial-timeout").
func TestReviewR14RefusedDialBlockedLogger(t *testing.T) {
	t.Parallel()
	srv := zktest.Start(t, zktest.WithTLS())
	noCert := srv.TLSConfig()
	noCert.Certificates = nil // the server (ssl.clientAuth=need) refuses the handshake
	g := newLogGate("zkconn: TLS handshake refused")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		s, err := Dial(ctx, []string{srv.SecureAddr()}, WithTLS(noCert), WithLogger(slog.New(g)))
		if err == nil {
			s.Close()
		}
		done <- err
	}()
	var once sync.Once
	release := func() { once.Do(func() { close(g.release) }) }
	defer release() // no goroutine outlives the test
	select {
	case <-g.blocked:
	case err := <-done:
		t.Fatalf("Dial returned %v before the logger got the refusal", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the refusal never reached the logger")
	}
	<-ctx.Done()
	select {
	case err := <-done:
		t.Fatalf("Dial returned %v while its logger was still in a line", err)
	default:
	}
	release()
	if err := <-done; !errors.Is(err, ErrTLSHandshake) {
		t.Errorf("Dial = %v\n(errors.Is: ErrTLSHandshake false, DeadlineExceeded %v, Canceled %v); want ErrTLSHandshake: every server refused before ctx was done",
			err, errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled))
	}
}

// refusalClock is a slog.Handler that notes when it got the TLS refusal,
// and returns from it only once back is closed.
type refusalClock struct {
	back <-chan struct{}
	at   chan time.Time // the refusal's arrival, once
}

func (c *refusalClock) Enabled(context.Context, slog.Level) bool { return true }
func (c *refusalClock) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *refusalClock) WithGroup(string) slog.Handler            { return c }
func (c *refusalClock) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "zkconn: TLS handshake refused" {
		select {
		case c.at <- time.Now():
		default:
		}
		<-c.back
	}
	return nil
}

// TestReviewR14RefusedDialMisreported (review round 14): every server
// refuses the handshake long before Dial's ctx is done, so Dial must fail
// with ErrTLSHandshake. Its failure path runs Close first, which waits for
// the logger to log what is queued (6a518e0), and only then checks ctx: if
// ctx's deadline passed meanwhile, Dial returns the internal wait's
// context.Canceled (and the attempts), not the refusal, nor ctx's error.
// Here the logger is slow on the refusal until ctx is done; it need not
// be blocked for good: any logger still busy with the queue at the
// deadline will do. (With a quick logger Dial fails in milliseconds and
// reports the refusal.)
func TestReviewR14RefusedDialMisreported(t *testing.T) {
	t.Parallel()
	srv := zktest.Start(t, zktest.WithTLS())
	noCert := srv.TLSConfig()
	noCert.Certificates = nil
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	clock := &refusalClock{back: ctx.Done(), at: make(chan time.Time, 1)}
	s, err := Dial(ctx, []string{srv.SecureAddr()}, WithTLS(noCert), WithLogger(slog.New(clock)))
	if err == nil {
		s.Close()
	}
	deadline, _ := ctx.Deadline()
	if refused := <-clock.at; !errors.Is(err, ErrTLSHandshake) {
		t.Errorf("the refusal reached the logger %v before ctx's deadline; Dial = %v\n(errors.Is: ErrTLSHandshake false, DeadlineExceeded %v, Canceled %v); want ErrTLSHandshake",
			deadline.Sub(refused).Round(time.Millisecond), err, errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled))
	}
}
