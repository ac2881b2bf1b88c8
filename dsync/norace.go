//go:build !race

package main

// guardRuntimeEnv is added to the guard's environment (see race.go): none
// without the race detector.
var guardRuntimeEnv []string
