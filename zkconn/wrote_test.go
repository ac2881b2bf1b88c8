package zkconn

import (
	"encoding/binary"
	"fmt"
	"testing"
)

// wroteFrame is a request frame as go-zookeeper writes it: length, xid,
// opcode, then body.
func wroteFrame(op int32, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(8+len(body)))
	b = binary.BigEndian.AppendUint32(b, 7)
	b = binary.BigEndian.AppendUint32(b, uint32(op))
	return append(b, body...)
}

// deleteBody is a delete request's body: its path, then version -1.
func deleteBody(path string) []byte {
	return binary.BigEndian.AppendUint32(juteString(path), 0xffffffff)
}

// multiBody is a multi request's body: a header (type, done, err) and a
// body per operation, then the closing header.
func multiBody(ops map[int32][]byte, order []int32) []byte {
	var b []byte
	header := func(op int32, done bool) {
		b = binary.BigEndian.AppendUint32(b, uint32(op))
		if done {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		b = binary.BigEndian.AppendUint32(b, 0xffffffff)
	}
	for _, op := range order {
		header(op, false)
		b = append(b, ops[op]...)
	}
	header(-1, true)
	return b
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestWireWroteMatchesPathAnywhere: wrote closes the channels of the
// requests a written frame answers, and only those: the path anywhere in
// the frame's body (a multi's second operation too), as a whole path (not
// the prefix of a longer one), for the opcodes awaited.
func TestWireWroteMatchesPathAnywhere(t *testing.T) {
	w := newWire(nil)
	del, _ := w.awaitDelete("/a/lock-1")
	exists, _ := w.awaitWrite("/a/lock-1", opExists)
	longer, _ := w.awaitDelete("/a/lock-10")
	signalled, _ := w.awaitDelete("/x")
	shown := func() string {
		return fmt.Sprintf("delete /a/lock-1 %v, exists /a/lock-1 %v, delete /a/lock-10 %v, delete /x %v",
			isClosed(del), isClosed(exists), isClosed(longer), isClosed(signalled))
	}

	w.wrote(wroteFrame(opDelete, deleteBody("/a/lock-1")))
	if !isClosed(del) || isClosed(exists) || isClosed(longer) || isClosed(signalled) {
		t.Fatalf("after the delete of /a/lock-1: %s; want only its delete closed", shown())
	}
	// A create of /a/lock-1.handoff, then the delete of /x.
	create := append(juteString("/a/lock-1.handoff"), 0, 0, 0, 0)
	w.wrote(wroteFrame(opMulti, multiBody(map[int32][]byte{opCreate: create, opDelete: deleteBody("/x")}, []int32{opCreate, opDelete})))
	if isClosed(exists) || isClosed(longer) || !isClosed(signalled) {
		t.Fatalf("after a multi deleting /x: %s; want /x's closed too", shown())
	}
	w.wrote(wroteFrame(opExists, append(juteString("/a/lock-1"), 1)))
	w.wrote(wroteFrame(opDelete, deleteBody("/a/lock-10")))
	if !isClosed(exists) || !isClosed(longer) {
		t.Fatalf("after an exists of /a/lock-1 and the delete of /a/lock-10: %s; want all closed", shown())
	}
	if len(w.writes) != 0 {
		t.Fatalf("%d paths still awaited", len(w.writes))
	}
}

// BenchmarkWireWrote: the cost of one written delete while n other
// requests are awaited (a release of many holds at once).
func BenchmarkWireWrote(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			w := newWire(nil)
			for i := range n {
				w.awaitDelete(fmt.Sprintf("/locks/job-%d/_c_0b5a4c52-3d5e-4f3a-8b8e-8d1e2a3b4c5d-lock-%010d", i, i))
			}
			path := "/locks/job/_c_0b5a4c52-3d5e-4f3a-8b8e-8d1e2a3b4c5d-lock-0000000001"
			frame := wroteFrame(opDelete, deleteBody(path))
			b.ResetTimer()
			for b.Loop() {
				w.awaitDelete(path)
				w.wrote(frame)
			}
		})
	}
}
