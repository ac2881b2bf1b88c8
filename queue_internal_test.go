package dsync

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestSequence(t *testing.T) {
	for _, tc := range []struct {
		name string
		seq  int32
		ok   bool
	}{
		{"_c_8f2d6c1e-3b1a-4c55-9a43-0d5e6f7a8b9c-lock-0000000042", 42, true},
		{"_c_0123456789abcdef0123456789abcdef-lock-0000000007", 7, true}, // go-zookeeper's zk.Lock
		{"lock-lock-0000000003", 3, true},                                // the last marker counts
		{"x-lock-2147483647", 2147483647, true},
		{"x-lock--2147483648", -2147483648, true}, // wrapped past 2^31
		{"x-lock-2147483648", 0, false},
		{"x-lock-", 0, false},
		{"x-lock-12a", 0, false},
		{"no-marker-0000000001", 0, false},
	} {
		seq, _, ok := sequence(tc.name, lockMarker)
		if seq != tc.seq || ok != tc.ok {
			t.Errorf("sequence(%q) = %d, %v; want %d, %v", tc.name, seq, ok, tc.seq, tc.ok)
		}
	}
}

func TestOrder(t *testing.T) {
	got := order([]string{
		"_c_b-lock-0000000003", "other", "_c_a-lock--000000005", "_c_c-lock-0000000001", "another",
	}, lockMarker)
	var names []string
	for _, q := range got {
		names = append(names, q.name)
	}
	want := "_c_c-lock-0000000001 _c_b-lock-0000000003 _c_a-lock--000000005 another other"
	if strings.Join(names, " ") != want {
		t.Fatalf("order = %v; want %s", names, want)
	}
}

// TestOrderReadWrite: readers and writers share one order, by the digits
// after either marker; at one number (a downgrade's read node and its
// writer) the writer sorts first, whatever the UUIDs.
func TestOrderReadWrite(t *testing.T) {
	got := order([]string{
		"_c_0-__READ__0000000007", "_c_f-__WRIT__0000000007", "_c_a-__WRIT__0000000009",
		"_c_b-__READ__0000000002",
	}, readMarker, writeMarker)
	var names []string
	for _, q := range got {
		kind := "W"
		if q.reader {
			kind = "R"
		}
		names = append(names, fmt.Sprintf("%s%d", kind, q.seq))
	}
	if want := "R2 W7 R7 W9"; strings.Join(names, " ") != want {
		t.Fatalf("order = %v; want %s", names, want)
	}
}

// TestOrderAcrossWrap: ZooKeeper's sequence is a signed 32-bit counter; past
// 2^31 creates it goes on at -2147483648. Nodes created after the wrap must
// sort after those created before it (signed order put them first, letting
// a newcomer take the lock from its holder), in creation order.
func TestOrderAcrossWrap(t *testing.T) {
	created := []string{ // in creation order
		"_c_a-lock-2147483646", "_c_b-lock-2147483647", "_c_c-lock--2147483648",
		"_c_d-lock--2147483647", "_c_e-lock--000000001",
	}
	got := order([]string{created[3], created[0], created[4], created[2], created[1]}, lockMarker)
	for i, q := range got {
		if q.name != created[i] {
			t.Fatalf("order[%d] = %s; want %s (creation order %v)", i, q.name, created[i], created)
		}
	}
}

func FuzzSequence(f *testing.F) {
	f.Add("_c_x-lock-0000000042")
	f.Add("lock--1")
	f.Fuzz(func(t *testing.T, name string) {
		seq, _, ok := sequence(name, lockMarker)
		if !ok {
			return
		}
		// What parsed is the tail after the last marker, a decimal int32.
		tail := name[strings.LastIndex(name, lockMarker)+len(lockMarker):]
		var back int32
		if _, err := fmt.Sscanf(tail, "%d", &back); err != nil || back != seq {
			t.Fatalf("sequence(%q) = %d; the tail %q reads %d (%v)", name, seq, tail, back, err)
		}
	})
}

// TestBeforeMatchesOrder: the one-pass before (and nearest) agree with the
// sorted order on every node of a mixed read/write queue across the wrap.
func TestBeforeMatchesOrder(t *testing.T) {
	children := []string{
		"_c_0-__READ__0000000007", "_c_f-__WRIT__0000000007", "_c_a-__WRIT__0000000009",
		"_c_b-__READ__0000000002", "_c_c-__WRIT__-2147483648", "_c_d-__READ__2147483647", "stray",
	}
	q := &queue{rw: true, marker: writeMarker}
	line := q.line(children)
	for i, n := range line {
		got, ok := q.before(children, n.name)
		if !ok || len(got) != i {
			t.Fatalf("before(%s) = %d nodes, %v; want %d", n.name, len(got), ok, i)
		}
		for _, g := range got {
			if j := slices.IndexFunc(line, func(x queued) bool { return x.name == g.name }); j >= i {
				t.Fatalf("before(%s) holds %s, which sorts after it", n.name, g.name)
			}
		}
		if i > 0 && nearest(got).name != line[i-1].name {
			t.Fatalf("nearest(before(%s)) = %s; want %s", n.name, nearest(got).name, line[i-1].name)
		}
	}
	if _, ok := q.before(children, "missing"); ok {
		t.Fatal("before of a node not listed reports it listed")
	}
}
