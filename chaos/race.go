//go:build race

package main

// raceEnabled: this binary has the race detector, and so will the dsync
// binary it builds.
const raceEnabled = true
