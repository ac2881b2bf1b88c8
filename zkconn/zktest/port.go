package zktest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
)

// Ports are picked at random below the kernel's ephemeral range and checked
// by binding them. A port the kernel hands out for ":0" would do, but the
// kernel also hands such ports to outgoing connections, which can take one in
// the time between our check and the JVM's bind; ports below the range are
// never given to outgoing connections. No port is handed out twice by one
// process, so servers started one after another cannot collide either.
const lowestPort = 10000

var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// freePorts returns n distinct ports that are free on 127.0.0.1 now.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for len(ports) < n {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports = append(ports, p)
	}
	return ports, nil
}

func freePort() (int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	if hi := ephemeralLow() - 1; hi-lowestPort >= 1000 {
		for range 200 {
			p := lowestPort + rand.IntN(hi-lowestPort+1)
			if !handedOut.ports[p] && canBind(p) {
				handedOut.ports[p] = true
				return p, nil
			}
		}
	}
	// Fall back to the kernel's choice.
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("zktest: no free port: %w", err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if !handedOut.ports[p] {
			handedOut.ports[p] = true
			return p, nil
		}
	}
	return 0, fmt.Errorf("zktest: no free port")
}

func canBind(port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// ephemeralLow returns the low end of Linux's ephemeral port range, or 32768
// (its default) where that cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil || lo <= 0 {
		return 32768
	}
	return lo
}
