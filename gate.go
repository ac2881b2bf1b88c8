package dsync

import "context"

// A gate lets one goroutine of this process at a time into a primitive's
// acquisition, so that goroutines sharing a primitive wait for each other
// here rather than each queuing a node in ZooKeeper.
type gate chan struct{}

func newGate() gate { return make(gate, 1) }

// enter takes the gate, waiting for it until ctx is done if wait is set,
// else failing at once with ErrWouldBlock.
func (g gate) enter(ctx context.Context, wait bool) error {
	if !wait {
		select {
		case g <- struct{}{}:
			return nil
		default:
			return ErrWouldBlock
		}
	}
	select {
	case g <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// leave gives the gate back.
func (g gate) leave() { <-g }
