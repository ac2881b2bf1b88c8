//go:build race

package main

// guardRuntimeEnv is added to the guard's environment, after the variables
// hidden from it (guardHidden). In a -race build the race runtime sleeps
// as a program exits (GORACE's atexit_sleep_ms, a second by default): the
// guard would spend that second after CMD's end, with the lock still held.
var guardRuntimeEnv = []string{"GORACE=atexit_sleep_ms=0"}
