package zktest

import (
	"reflect"
	"sync"
	"testing"
	"unsafe"

	"github.com/go-zookeeper/zk"
)

// ClientWatches returns how many watch channels go-zookeeper holds on c at
// the paths for which match reports true, of every kind: one per *W call
// whose watch has not fired. ZooKeeper's server counts a session's watches
// on a path once however often they are set, so a test that must see
// them pile up in the client reads go-zookeeper's unexported table
// (v1.0.4: Conn.watchers, keyed by path and kind, under
// Conn.watchersLock). It fails the test if the table is not there.
func ClientWatches(t testing.TB, c *zk.Conn, match func(path string) bool) int {
	t.Helper()
	v := reflect.ValueOf(c).Elem()
	table, lock := v.FieldByName("watchers"), v.FieldByName("watchersLock")
	if table.Kind() != reflect.Map || lock.Type() != reflect.TypeFor[sync.Mutex]() {
		t.Fatal("go-zookeeper's Conn has no watchers map under watchersLock: update ClientWatches")
	}
	mu := (*sync.Mutex)(unsafe.Pointer(lock.UnsafeAddr()))
	mu.Lock()
	defer mu.Unlock()
	n := 0
	for it := table.MapRange(); it.Next(); {
		if match(it.Key().FieldByName("path").String()) {
			n += it.Value().Len()
		}
	}
	return n
}
