package dsync

import "context"

// A gate lets one goroutine of this process at a time into a primitive's
// acquisition, so that goroutines sharing a primitive wait for each other
// here rather than each queuing a node in ZooKeeper.
//
// Its token is a channel that closes when the last holder's delete has gone
// out on the connection (see zkconn.Handle.AwaitSent; a create sent after it
// is applied after it), or, after a failed acquisition, when the nodes it
// gave up are deleted: whoever enters next waits for it before it creates
// a node, so a process does not queue behind its own released or abandoned
// node. Unlock returns once its delete has gone out, as a rule, and never
// waits for a reply.
type gate chan (<-chan struct{})

func newGate() gate {
	g := make(gate, 1)
	g <- closed
	return g
}

var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// enter takes the gate, waiting for it until ctx is done if wait is set,
// else failing at once with ErrWouldBlock; then it waits until ctx is done
// for the last release's delete to settle. On failure the gate is as it was.
func (g gate) enter(ctx context.Context, wait bool) error {
	var last <-chan struct{}
	if wait {
		select {
		case last = <-g:
		case <-ctx.Done():
			return ctx.Err()
		}
	} else {
		select {
		case last = <-g:
		default:
			return ErrWouldBlock
		}
	}
	select {
	case <-last:
		return nil
	case <-ctx.Done():
		g <- last
		return ctx.Err()
	}
}

// pass waits as enter does, and gives the gate back at once: for a reader,
// which comes after the last holder and any writer of this process waiting
// or holding, but excludes no one.
func (g gate) pass(ctx context.Context, wait bool) error {
	if err := g.enter(ctx, wait); err != nil {
		return err
	}
	g <- closed // enter waited for the token
	return nil
}

// leave gives the gate back; the next to enter waits for released to close
// (nil: nothing to wait for).
func (g gate) leave(released <-chan struct{}) {
	if released == nil {
		released = closed
	}
	g <- released
}

// settled returns a channel that closes once every channel in chs has (nil
// ones count as closed). For more than one it waits on a goroutine, which
// ends with them: channels from zkconn.Handle.Delete always close, by
// Session.Close at the latest.
func settled(chs []<-chan struct{}) <-chan struct{} {
	var open []<-chan struct{}
	for _, c := range chs {
		if c != nil {
			open = append(open, c)
		}
	}
	switch len(open) {
	case 0:
		return closed
	case 1:
		return open[0]
	}
	all := make(chan struct{})
	go func() {
		for _, c := range open {
			<-c
		}
		close(all)
	}()
	return all
}
