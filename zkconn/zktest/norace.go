//go:build !race

package zktest

// raceEnabled: built with the race detector (see heldConn).
const raceEnabled = false
