package zkconn

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
)

// refWrote is wrote as it was before 886fd52: bytes.Contains per key.
func refWrote(keys map[string][]int32, b []byte) map[string]bool {
	out := map[string]bool{}
	if len(b) < 12 {
		return out
	}
	op := int32(binary.BigEndian.Uint32(b[8:12]))
	if op != opCreate && op != opDelete && op != opExists && op != opMulti {
		return out
	}
	for k, ops := range keys {
		if bytes.Contains(b[12:], []byte(k)) && slices.Contains(ops, op) {
			out[k] = true
		}
	}
	return out
}

// TestReviewR109WroteDifferential compares wrote with the bytes.Contains
// scan on random frames built of awaited keys, their prefixes and suffixes,
// lengths that coincide, multi-byte UTF-8 and random bytes.
func TestReviewR109WroteDifferential(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 109))
	paths := []string{"/", "/a", "/a/b", "/a/b/c", "/ab", "/é", "/é/ü", "/日本/語", "/a/lock-1", "/a/lock-10", "/a/lock-1.handoff", "/x", "/\u00ff", "/b/\u00e9\u00e9"}
	ops := [][]int32{{opDelete, opMulti}, {opCreate}, {opExists}, {opMulti}}
	for range 20000 {
		w := newWire(nil)
		keys := map[string][]int32{}
		chans := map[string][]<-chan struct{}{}
		for _, p := range paths {
			if r.IntN(2) == 0 {
				continue
			}
			o := ops[r.IntN(len(ops))]
			ch, _ := w.awaitWrite(p, o...)
			k := string(juteString(p))
			keys[k] = o
			chans[k] = append(chans[k], ch)
		}
		var body []byte
		for range r.IntN(6) {
			switch r.IntN(6) {
			case 0:
				body = append(body, juteString(paths[r.IntN(len(paths))])...)
			case 1:
				k := juteString(paths[r.IntN(len(paths))])
				body = append(body, k[:r.IntN(len(k)+1)]...)
			case 2:
				k := juteString(paths[r.IntN(len(paths))])
				body = append(body, k[r.IntN(len(k)+1):]...)
			case 3:
				body = binary.BigEndian.AppendUint32(body, uint32(r.IntN(8)))
			case 4:
				body = append(body, '/')
			default:
				for range r.IntN(5) {
					body = append(body, byte(r.IntN(256)))
				}
			}
		}
		opc := []int32{opCreate, opDelete, opExists, opMulti, 4, opSetWatches}[r.IntN(6)]
		f := wroteFrame(opc, body)
		if r.IntN(10) == 0 && len(f) > 12 {
			f = f[:12+r.IntN(len(f)-12)]
		}
		want := refWrote(keys, f)
		w.wrote(f)
		for k, cs := range chans {
			for _, ch := range cs {
				if isClosed(ch) != want[k] {
					t.Fatalf("frame %q key %q: closed %v, want %v", f, k, isClosed(ch), want[k])
				}
			}
		}
	}
}
