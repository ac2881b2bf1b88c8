package main

import "syscall"

// adoptOrphans makes this process a child subreaper (prctl(2)
// PR_SET_CHILD_SUBREAPER): the processes of CMD's group that a killed dsync
// leaves behind become its children, which groupMembers reaps.
func adoptOrphans() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, 36, 1, 0)
}
