package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userHZ is the unit of the times in /proc/PID/stat: clock ticks of 1/100 s
// (USER_HZ, what sysconf(_SC_CLK_TCK) returns; 100 on every architecture
// this runs on).
const userHZ = 100

// clockTick is one tick of /proc's times: the resolution of the server's and
// the JVM's CPU times.
const clockTick = time.Second / userHZ

// selfCPU returns the CPU time, user and system, this process has used so
// far (getrusage RUSAGE_SELF: every thread, microseconds).
func selfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	tv := func(t syscall.Timeval) time.Duration {
		return time.Duration(t.Sec)*time.Second + time.Duration(t.Usec)*time.Microsecond
	}
	return tv(ru.Utime) + tv(ru.Stime), nil
}

// procCPU returns the CPU time, user and system, that process pid has used
// so far, from /proc/PID/stat (all its threads, in clock ticks).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	ticks, err := statTicks(string(b))
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(ticks) * clockTick, nil
}

// statFields returns the fields of a /proc/PID/stat line after the command
// name, which may hold spaces and parentheses: fields[0] is the state (field
// 3 of proc(5)), fields[1] the parent's pid (field 4), fields[11] and
// fields[12] utime and stime (fields 14 and 15).
func statFields(stat string) ([]string, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return nil, fmt.Errorf("no command name in %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return nil, fmt.Errorf("%d fields after the command name; want at least 13", len(f))
	}
	return f, nil
}

// statTicks returns utime + stime of a /proc/PID/stat line, in clock ticks.
func statTicks(stat string) (int64, error) {
	f, err := statFields(stat)
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("utime/stime %q: %w", s, err)
		}
		sum += n
	}
	return sum, nil
}

// serverPid returns the pid of the process listening on the TCP port of
// addr ("host:port") among the children of this process: the ZooKeeper JVM
// that zktest started (zktest does not tell its pid).
func serverPid(addr string) (int, error) {
	_, portStr, ok := strings.Cut(addr, ":")
	port, err := strconv.ParseUint(portStr, 10, 16)
	if !ok || err != nil {
		return 0, fmt.Errorf("server address %q: no port", addr)
	}
	var inodes []string
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		inodes = append(inodes, listeners(string(b), uint16(port))...)
	}
	if len(inodes) == 0 {
		return 0, fmt.Errorf("no socket listens on port %d (/proc/net/tcp)", port)
	}
	for _, pid := range children(os.Getpid()) {
		fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
		for _, fd := range fds {
			link, err := os.Readlink(fd)
			if err != nil {
				continue
			}
			for _, inode := range inodes {
				if link == "socket:["+inode+"]" {
					return pid, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("no child of this process listens on port %d", port)
}

// listeners returns the inodes of the sockets in a /proc/net/tcp table that
// listen on port.
func listeners(table string, port uint16) []string {
	var inodes []string
	for _, line := range strings.Split(table, "\n")[1:] {
		f := strings.Fields(line)
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		if len(f) < 10 || f[3] != "0A" { // 0A: TCP_LISTEN
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		if p, err := strconv.ParseUint(hexPort, 16, 16); ok && err == nil && uint16(p) == port {
			inodes = append(inodes, f[9])
		}
	}
	return inodes
}

// children returns the pids of the processes whose parent is ppid.
func children(ppid int) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	var pids []int
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue // gone meanwhile
		}
		f, err := statFields(string(b))
		if err != nil || f[1] != strconv.Itoa(ppid) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(d))); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
