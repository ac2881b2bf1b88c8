//go:build race

package zkconn

// raceEnabled: built with the race detector (see tap.hold).
const raceEnabled = true
