package zktest

import (
	"reflect"
	"sync"
	"testing"
	"unsafe"

	"github.com/go-zookeeper/zk"
)

// A ClientWatch is one entry of go-zookeeper's watch table: a path, and the
// kind of watch.
type ClientWatch struct {
	Path string
	Kind WatchKind
}

// WatchKind is the kind of a ClientWatch, as go-zookeeper v1.0.4 numbers
// them.
type WatchKind int

// The kinds of watch: a data watch (a getData, or an exists that found the
// node), an exists watch (an exists that found none), a child watch.
const (
	DataWatch WatchKind = iota
	ExistWatch
	ChildWatch
)

// ClientWatchTable returns go-zookeeper's watch table on c: how many watch
// channels it holds for each path and kind, one per *W call whose watch
// has not fired. ZooKeeper's server counts a session's watches on a path
// once however often they are set, so a test that must see them pile up
// in the client, or compare the client's table with another record of it,
// reads go-zookeeper's unexported table (v1.0.4: Conn.watchers, keyed by
// path and kind, under Conn.watchersLock). It fails the test if the table
// is not there.
func ClientWatchTable(t testing.TB, c *zk.Conn) map[ClientWatch]int {
	t.Helper()
	v := reflect.ValueOf(c).Elem()
	table, lock := v.FieldByName("watchers"), v.FieldByName("watchersLock")
	if table.Kind() != reflect.Map || lock.Type() != reflect.TypeFor[sync.Mutex]() {
		t.Fatal("go-zookeeper's Conn has no watchers map under watchersLock: update ClientWatchTable")
	}
	mu := (*sync.Mutex)(unsafe.Pointer(lock.UnsafeAddr()))
	mu.Lock()
	defer mu.Unlock()
	out := make(map[ClientWatch]int)
	for it := table.MapRange(); it.Next(); {
		k := it.Key()
		out[ClientWatch{k.FieldByName("path").String(), WatchKind(k.FieldByName("wType").Int())}] += it.Value().Len()
	}
	return out
}

// ClientWatches returns how many watch channels go-zookeeper holds on c at
// the paths for which match reports true, of every kind (see
// ClientWatchTable).
func ClientWatches(t testing.TB, c *zk.Conn, match func(path string) bool) int {
	t.Helper()
	n := 0
	for w, k := range ClientWatchTable(t, c) {
		if match(w.Path) {
			n += k
		}
	}
	return n
}
