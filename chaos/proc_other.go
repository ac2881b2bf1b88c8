//go:build !linux

package main

// adoptOrphans does nothing: only Linux has child subreapers.
func adoptOrphans() {}
