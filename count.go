package dsync

import "github.com/dsync-go/dsync/zkconn"

// A Count is an int32 shared through ZooKeeper: Curator's SharedCount, in Go.
// Its node holds the count as 4 bytes, big-endian and signed (Int32Codec), so
// a Curator SharedCount and a dsync Count on one path read and write the
// same value, and CompareAndSet on one side fails after a write on the other
// (Curator's trySetCount and dsync's CompareAndSet are both versioned
// writes). The methods are Value's.
type Count = Value[int32]

// NewCount returns the Count at path, whose node is created holding seed when
// it is first found missing (as Curator's SharedCount.start does, with
// CONTAINER parents). Nothing is sent to ZooKeeper until the Count is used;
// a nil sess or a bad path is returned by every method (see NewValue).
func NewCount(sess *zkconn.Session, path string, seed int32) *Count {
	return NewValue[int32](sess, path, Int32Codec{}, seed)
}
