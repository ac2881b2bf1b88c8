package dsync_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/dsync-go/dsync"
	"github.com/dsync-go/dsync/zkconn"
)

// jsonValueCodec keeps a value of T in its node as JSON.
type jsonValueCodec[T any] struct{}

func (jsonValueCodec[T]) Encode(v T) ([]byte, error) { return json.Marshal(v) }

func (jsonValueCodec[T]) Decode(b []byte) (T, error) {
	var v T
	err := json.Unmarshal(b, &v)
	return v, err
}

// exampleLimits is configuration shared by a fleet of workers.
type exampleLimits struct {
	MaxJobs int `json:"max_jobs"`
}

func ExampleValue() {
	ctx := context.Background()
	sess, err := zkconn.Dial(ctx, []string{zkAddr()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()

	limits := dsync.NewValue(sess, "/examples/config/limits",
		jsonValueCodec[exampleLimits]{}, exampleLimits{MaxJobs: 4})
	if err := limits.Set(ctx, exampleLimits{MaxJobs: 4}); err != nil {
		fmt.Println(err)
		return
	}

	// Follow the configuration: the current value first, then every change.
	watch, stop := context.WithCancel(ctx)
	defer stop()
	for v, err := range limits.Watch(watch) {
		if err != nil {
			fmt.Println("cannot read limits:", err) // bad data: keep the old limits
			continue
		}
		fmt.Println("max jobs:", v.Value.MaxJobs)
		if v.Value.MaxJobs == 16 {
			break
		}
		// Any process may change it; here we do it ourselves.
		if err := limits.Set(ctx, exampleLimits{MaxJobs: 16}); err != nil {
			fmt.Println(err)
			return
		}
	}
	// Output:
	// max jobs: 4
	// max jobs: 16
}

func ExampleCount() {
	ctx := context.Background()
	sess, err := zkconn.Dial(ctx, []string{zkAddr()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()

	// The same node a Curator SharedCount on this path reads and writes.
	count := dsync.NewCount(sess, "/examples/counts/encoders", 8)
	if err := count.Set(ctx, 8); err != nil {
		fmt.Println(err)
		return
	}

	// Add one, even if other processes add at the same time: read, then
	// write only over what was read, and read again on a conflict.
	for {
		cur, err := count.Get(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		ok, err := count.CompareAndSet(ctx, cur, cur.Value+1)
		if err != nil {
			// With errors.Is(err, dsync.ErrOutcomeUnknown) the add may
			// or may not have happened: trying again could add twice.
			fmt.Println(err)
			return
		}
		if ok {
			fmt.Println("count:", cur.Value+1)
			break
		}
	}
	// Output: count: 9
}
