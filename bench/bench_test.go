package main

import (
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// TestProxyProcess runs this test binary as the proxy, as the bench runs
	// itself, and TestLeaderProcess runs it as a dsync leader, as the
	// failover section does.
	if len(os.Args) == 4 && os.Args[1] == proxyCommand {
		if err := serveProxy(os.Args[2], os.Args[3]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if len(os.Args) == 6 && os.Args[1] == leaderCommand {
		if err := serveLeader(os.Args[2], os.Args[3], os.Args[4], os.Args[5]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50}, {0.99, 99}, {1, 100}, {0, 1}} {
		if got := percentile(d, tc.q); got != tc.want {
			t.Errorf("percentile(1..100, %v) = %v; want %v", tc.q, got, tc.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile(nil, 0.5) = %v; want 0", got)
	}
}

func TestParseJavaReport(t *testing.T) {
	r, err := parseJavaReport("ops=1234 seconds=5.002 p50_us=870 p99_us=4100")
	if err != nil {
		t.Fatal(err)
	}
	if r.ops != 1234 || r.seconds != 5.002 || r.p50 != 870*time.Microsecond || r.p99 != 4100*time.Microsecond {
		t.Errorf("parseJavaReport = %+v", r)
	}
	if _, err := parseJavaReport("ops=x seconds=1"); err == nil {
		t.Error("parseJavaReport(ops=x) succeeded; want an error")
	}
	// bench rw's line: the plain fields, then reads' and writes'.
	r, err = parseJavaReport("ops=100 seconds=2.000 p50_us=500 p99_us=9000 read_ops=90 read_p50_us=400 read_p99_us=800 " +
		"write_ops=10 write_p50_us=3000 write_p99_us=9500")
	if err != nil {
		t.Fatal(err)
	}
	want := result{ops: 100, seconds: 2, p50: 500 * time.Microsecond, p99: 9000 * time.Microsecond,
		read:  side{90, 400 * time.Microsecond, 800 * time.Microsecond},
		write: side{10, 3000 * time.Microsecond, 9500 * time.Microsecond}}
	if r != want {
		t.Errorf("parseJavaReport(rw) = %+v; want %+v", r, want)
	}
}

func TestMakePlan(t *testing.T) {
	keys := func(plan []planned) string {
		var ks []string
		for _, p := range plan {
			ks = append(ks, fmt.Sprint(p.key, p.sessions))
		}
		return strings.Join(ks, " ")
	}
	for _, tc := range []struct {
		only, want string
	}{
		{"", "mutex[1 8] sem[1 8] semmutex[1 8] rw90[8 32] rw50[8 32]"},
		{"rw", "rw90[8 32] rw50[8 32]"},
		{"mutex,rw50", "mutex[1 8] rw50[8 32]"},
	} {
		plan, err := makePlan([]int{1, 8}, []int{8, 32}, []int{90, 50}, tc.only)
		if err != nil {
			t.Errorf("makePlan(only %q): %v", tc.only, err)
			continue
		}
		if got := keys(plan); got != tc.want {
			t.Errorf("makePlan(only %q) = %s; want %s", tc.only, got, tc.want)
		}
	}
	if _, err := makePlan([]int{1}, []int{8}, []int{90}, "rw70"); err == nil {
		t.Error("makePlan(only rw70) without that mix succeeded; want an error")
	}
}

func TestPickKind(t *testing.T) {
	reads := 0
	for roll := range 100 {
		if pickKind(roll, 90) == kindRead {
			reads++
		}
	}
	if reads != 90 {
		t.Errorf("pickKind reads on %d of the 100 rolls at 90 %%; want 90", reads)
	}
	if pickKind(0, 0) != kindWrite || pickKind(99, 100) != kindRead {
		t.Error("pickKind: 0 % must always write, 100 % always read")
	}
}

func TestSplice(t *testing.T) {
	path := filepath.Join(t.TempDir(), "README.md")
	old := "intro\n" + beginMarker + "\nold table\n" + endMarker + "\nmiddle\n" +
		failoverBegin + "\nold failover\n" + failoverEnd + "\nrest\n"
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := splice(path, beginMarker, endMarker, "new table\n"); err != nil {
		t.Fatal(err)
	}
	if err := splice(path, failoverBegin, failoverEnd, "new failover\n"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "intro\n" + beginMarker + "\nnew table\n" + endMarker + "\nmiddle\n" +
		failoverBegin + "\nnew failover\n" + failoverEnd + "\nrest\n"; string(got) != want {
		t.Errorf("spliced file = %q; want %q", got, want)
	}
	if err := os.WriteFile(path, []byte("no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := splice(path, beginMarker, endMarker, "x"); err == nil {
		t.Error("splice into a file without markers succeeded; want an error")
	}
	// Markers out of order are no block either.
	if err := os.WriteFile(path, []byte(failoverEnd+"\n"+failoverBegin+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := splice(path, failoverBegin, failoverEnd, "x"); err == nil {
		t.Error("splice between markers out of order succeeded; want an error")
	}
}

func TestNiceScale(t *testing.T) {
	for _, tc := range []struct{ top, step, ymax float64 }{
		{1403, 500, 1500},
		{420, 100, 500},
		{96, 20, 100},
		{0, 1, 5},
	} {
		step, ymax := niceScale(tc.top)
		if step != tc.step || ymax != tc.ymax {
			t.Errorf("niceScale(%v) = %v, %v; want %v, %v", tc.top, step, ymax, tc.step, tc.ymax)
		}
	}
}

// fakeRuns returns made-up results of plan in the loopback and 1 ms
// profiles: the i-th implementation of a workload runs (i+1)×1000 cycles in
// 5 s in the loopback profile, a tenth of that at 1 ms.
func fakeRuns(plan []planned) []profileRun {
	var runs []profileRun
	for _, p := range []profile{{0}, {time.Millisecond}} {
		run := profileRun{profile: p, rtt: 100 * time.Microsecond, txn: 200 * time.Microsecond, hop: 300 * time.Microsecond}
		scale := int64(10)
		if p.delay > 0 {
			run.rtt, run.txn, run.hop, scale = 2500*time.Microsecond, 5*time.Millisecond, 10*time.Millisecond, 1
			run.rttLo, run.rttHi = 2400*time.Microsecond, 2700*time.Microsecond
		}
		for _, w := range plan {
			for _, n := range w.sessions {
				for i, im := range w.impls {
					k := int64(i+1) * scale
					r := result{
						ops: 100 * k, seconds: 5, p50: time.Millisecond, p99: 3 * time.Millisecond,
						reqs:      counters{packets: 400 * k, writes: 200 * k, reads: 200 * k},
						clientCPU: time.Duration(k) * 30 * time.Millisecond, serverCPU: time.Duration(k) * 10 * time.Millisecond,
					}
					if w.rw { // dsync's reads double from 8 to 32 sessions
						r.read = side{90 * k * int64(n) / 8, 2 * time.Millisecond, 4 * time.Millisecond}
						r.write = side{10 * k, 5 * time.Millisecond, 9 * time.Millisecond}
						if i == 0 && n == 32 {
							r.read.ops = 180 * k
						}
					}
					run.cells = append(run.cells, cell{w.key, n, im.name, r})
				}
			}
		}
		runs = append(runs, run)
	}
	return runs
}

func TestReport(t *testing.T) {
	plan, err := makePlan([]int{1, 8, 32}, []int{8, 32}, []int{90, 50}, "")
	if err != nil {
		t.Fatal(err)
	}
	runs := fakeRuns(plan)
	info := runInfo{sessionTimeout: 30 * time.Second, cpus: 2}
	md := report(info, plan, runs)
	for _, want := range []string{
		"## Loopback (round trip 0.10 ms)",
		"## 1 ms each way (round trip 2.50 ms)",
		// Loopback: 1000 cycles in 5 s; 300 ms of client CPU time, 100 ms of
		// the server's.
		"| Mutex | 8 | 200 | 1.00 | 3.00 | 4.00 | 300 | 100 | 400 | 1.00 | 3.00 | 4.00 | 300 | 100 | 600 | 1.00 | 3.00 | 4.00 | 300 | 100 | 0.50× | 0.33× |",
		"| Weighted (max 3) | 32 | 20 | 1.00 | 3.00 | 4.00 | 300 | 100 | — | — | — | — | — | — | 40 | 1.00 | 3.00 | 4.00 | 300 | 100 | — | 0.50× |",
		"| SemaphoreMutex | 1 | 2.00 + 2.00 | — | 2.00 + 2.00 |",
		"| 90 % reads | 8 | reads | 180 | 2.00 | 4.00 | 360 | 2.00 | 4.00 | 0.50× |",
		"| 50 % reads | 32 | writes | 2 | 5.00 | 9.00 | 4 | 5.00 | 9.00 | 0.50× |",
		"Reads per second at 90 % reads, 8 → 32 sessions: dsync 18 → 36 (×2.00); Curator 36 → 144 (×4.00).",
		// Handoffs: 20 ops/s × 2.5 ms.
		"| 1 ms each way | 2.50 | 5.00 | 10.00 | 32 | 20 | 0.05 | 0.10 | 0.20 | 40 | 0.10 | 0.20 | 0.40 | 60 | 0.15 | 0.30 | 0.60 |",
		"network profiles: loopback, 1 ms each way;",
		// A tick over 100 cycles.
		"in this run at most 100 µs per\n  cycle in any cell.",
		// Only the profile with batches of round trips has a spread.
		"(in this run it ranged over 1 ms each way 2.40–2.70 ms).",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "| loopback | 0.10 | 0.20 | 0.30 |") {
		t.Errorf("handoffs per round trip: want no loopback rows:\n%s", md)
	}
	readme := readmeTables(info, plan, runs)
	for _, want := range []string{
		"profile 1 ms each way. Every client",
		"The other profiles (loopback), the RWMutex tables",
		"round trip is 2.50 ms",
		"| Mutex | 1 | 20 | 1.00 | 3.00 | 4.00 | 300 | 100 | 40 |",
		"32 sessions: dsync 0.05 (× txn 0.10, × hop 0.20), zk.Lock 0.10 (× txn 0.20, × hop 0.40), Curator 0.15 (× txn 0.30, × hop 0.60).",
	} {
		if !strings.Contains(readme, want) {
			t.Errorf("README tables lack %q:\n%s", want, readme)
		}
	}
	if strings.Contains(readme, "## ") || strings.Contains(readme, "| Mutex | 1 | 200 |") || strings.Contains(readme, "| 90 % reads |") {
		t.Errorf("README tables: want the 1 ms profile's main table alone:\n%s", readme)
	}
}

func TestChart(t *testing.T) {
	plan, err := makePlan([]int{1, 8, 32}, []int{8, 32}, []int{90, 50}, "")
	if err != nil {
		t.Fatal(err)
	}
	c := makeChart(plan, fakeRuns(plan))
	if len(c.rows) != 2 {
		t.Fatalf("chart has %d rows; want one per profile, 2", len(c.rows))
	}
	for _, r := range c.rows {
		if len(r.panels) != 4 || len(r.panels[3].series) != 4 {
			t.Fatalf("row %q has %d panels; want 4, the last with the 4 RWMutex series", r.title, len(r.panels))
		}
	}
	if got := c.rows[1].panels[3].series[2]; !got.dashed || got.style != implDsync {
		t.Errorf("the second mix's dsync series = %+v; want it dashed, in dsync's style", got)
	}
	svg := c.svg()
	// Well-formed XML; count what was drawn, and collect the text.
	dec := xml.NewDecoder(strings.NewReader(svg))
	elems := map[string]int{}
	var texts []string
	inText := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("chart is not well-formed XML: %v\n%s", err, svg)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			elems[tok.Name.Local]++
			inText = tok.Name.Local == "text"
			for _, a := range tok.Attr {
				if strings.Contains(a.Value, "NaN") || strings.Contains(a.Value, "Inf") {
					t.Errorf("<%s %s=%q>", tok.Name.Local, a.Name.Local, a.Value)
				}
			}
		case xml.EndElement:
			inText = false
		case xml.CharData:
			if inText {
				texts = append(texts, string(tok))
			}
		}
	}
	// Per row: 3 + 2 + 2 + 4 series of 3, 3, 3 and 2 points.
	if got, want := elems["polyline"], 2*11; got != want {
		t.Errorf("chart has %d lines; want %d", got, want)
	}
	if got, want := elems["svg"], 1; got != want {
		t.Errorf("chart has %d svg elements; want %d", got, want)
	}
	all := strings.Join(texts, "|")
	for _, want := range []string{
		"Loopback (round trip 0.10 ms)", "1 ms each way (round trip 2.50 ms)",
		"Mutex", "Weighted (max 3)", "SemaphoreMutex", "RWMutex",
		"dsync", "go-zookeeper zk.Lock", "Curator 5.4", "RWMutex: solid 90 % reads; dashed 50 % reads",
		"|1|", "|8|", "|32|",
	} {
		if !strings.Contains("|"+all+"|", want) {
			t.Errorf("chart text lacks %q: %s", want, all)
		}
	}
	if w, h := c.size(); !strings.HasPrefix(svg, fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d"`, w, h)) {
		t.Errorf("chart starts %.80q; want its size %d×%d", svg, w, h)
	}
}

func TestSVGEscape(t *testing.T) {
	c := chart{title: `a <b> & "c"`}
	if err := xml.Unmarshal([]byte(c.svg()), new(struct{})); err != nil {
		t.Errorf("chart titled %q: %v", c.title, err)
	}
}

func TestParseProfiles(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []time.Duration
	}{
		{"0,1ms,5ms", []time.Duration{0, time.Millisecond, 5 * time.Millisecond}},
		{"5ms, 0", []time.Duration{0, 5 * time.Millisecond}},
		{"500us", []time.Duration{500 * time.Microsecond}},
	} {
		ps, err := parseProfiles(tc.in)
		if err != nil {
			t.Errorf("parseProfiles(%q): %v", tc.in, err)
			continue
		}
		var got []time.Duration
		for _, p := range ps {
			got = append(got, p.delay)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("parseProfiles(%q) = %v; want %v", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{"", "1", "-1ms", "1ms,1ms", "fast"} {
		if _, err := parseProfiles(bad); err == nil {
			t.Errorf("parseProfiles(%q) succeeded; want an error", bad)
		}
	}
	for _, tc := range []struct {
		p          profile
		key, title string
	}{
		{profile{0}, "loopback", "loopback"},
		{profile{time.Millisecond}, "1ms", "1 ms each way"},
		{profile{500 * time.Microsecond}, "500µs", "0.5 ms each way"},
	} {
		if k, ti := tc.p.key(), tc.p.title(); k != tc.key || ti != tc.title {
			t.Errorf("profile %v: key %q, title %q; want %q, %q", tc.p.delay, k, ti, tc.key, tc.title)
		}
	}
}

func TestSessionsIn(t *testing.T) {
	plan, err := makePlan([]int{1, 8, 32}, []int{8, 32}, []int{90}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p          profile
		delayedMax int
		want       string
	}{
		{profile{0}, 8, "mutex[1 8 32] sem[1 8 32] semmutex[1 8 32] rw90[8 32]"},
		{profile{time.Millisecond}, 8, "mutex[1 8 32] sem[1 8] semmutex[1 8] rw90[8]"},
		{profile{time.Millisecond}, 0, "mutex[1 8 32] sem[1 8 32] semmutex[1 8 32] rw90[8 32]"},
	} {
		var got []string
		for _, w := range plan {
			got = append(got, fmt.Sprint(w.key, sessionsIn(w, tc.p, tc.delayedMax)))
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("sessionsIn(%s, max %d) = %s; want %s", tc.p.title(), tc.delayedMax, g, tc.want)
		}
	}
}

func TestReadmeProfile(t *testing.T) {
	runs := []profileRun{{profile: profile{0}}, {profile: profile{5 * time.Millisecond}}, {profile: profile{time.Millisecond}}}
	if got := readmeProfile(runs).delay; got != time.Millisecond {
		t.Errorf("readmeProfile = %v; want the 1 ms profile", got)
	}
	if got := readmeProfile(runs[:2]).delay; got != 5*time.Millisecond {
		t.Errorf("readmeProfile without 1 ms = %v; want the first delayed one, 5ms", got)
	}
	if got := readmeProfile(runs[:1]).delay; got != 0 {
		t.Errorf("readmeProfile of loopback alone = %v; want loopback", got)
	}
}

func TestStatTicks(t *testing.T) {
	// A command name may hold spaces and parentheses; utime 1234, stime 56.
	line := "4242 (java (main) x) S 1 4242 17 0 -1 4194560 100 0 0 0 1234 56 0 0 20 0 30 0 99 1 2 3\n"
	got, err := statTicks(line)
	if err != nil || got != 1290 {
		t.Errorf("statTicks = %d, %v; want 1290", got, err)
	}
	f, err := statFields(line)
	if err != nil || f[0] != "S" || f[1] != "1" {
		t.Errorf("statFields = %q, %v; want state S, parent 1 first", f, err)
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 u s"} {
		if _, err := statTicks(bad); err == nil {
			t.Errorf("statTicks(%q) succeeded; want an error", bad)
		}
	}
}

func TestListeners(t *testing.T) {
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:87D7 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1025936 2 0000000 100 0 0 10 0
   1: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 412 1 0000000 100 0 0 10 0
   2: 0100007F:87D7 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 777 1 0000000 100 0 0 10 0
`
	if got := listeners(table, 0x87D7); !slices.Equal(got, []string{"1025936"}) {
		t.Errorf("listeners(port 0x87D7) = %q; want the listening socket's inode alone, 1025936", got)
	}
	if got := listeners(table, 2181); got != nil {
		t.Errorf("listeners(port 2181) = %q; want none", got)
	}
}

func TestChildren(t *testing.T) {
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	if got := children(os.Getpid()); !slices.Contains(got, cmd.Process.Pid) {
		t.Errorf("children = %v; want them to include sleep's pid %d", got, cmd.Process.Pid)
	}
	d, err := procCPU(cmd.Process.Pid)
	if err != nil || d < 0 {
		t.Errorf("procCPU(sleep) = %v, %v; want a time", d, err)
	}
}

func TestSelfCPU(t *testing.T) {
	before, err := selfCPU()
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(20 * time.Millisecond); time.Now().Before(end); {
	}
	after, err := selfCPU()
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Errorf("selfCPU went from %v to %v over 20 ms of spinning; want it to grow", before, after)
	}
}

// TestProxyProcess runs the proxy as the bench does, in a process of its
// own (this test binary: see TestMain), in front of an echo server, and
// times a round trip through it.
func TestProxyProcess(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()
	defer func() {
		ln.Close()
		<-done
	}()
	const delay = 5 * time.Millisecond
	p, err := startProxy(ln.Addr().String(), delay)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.close(); err != nil {
			t.Errorf("proxy exited: %v", err)
		}
	}()
	c, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t0 := time.Now()
	// A four-letter word: the proxy passes it on unframed.
	if _, err := c.Write([]byte("ruok")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ruok" {
		t.Fatalf("echo through the proxy: %q, %v", buf, err)
	}
	if rtt := time.Since(t0); rtt < 2*delay {
		t.Errorf("round trip through a proxy delaying %v each way took %v; want at least %v", delay, rtt, 2*delay)
	}
}

func TestMedian(t *testing.T) {
	r := func(ops int64) result { return result{ops: ops, seconds: 1} }
	for _, tc := range []struct {
		in   []int64
		want int64
	}{
		{[]int64{5}, 5},
		{[]int64{3, 1, 2}, 2},
		{[]int64{4, 1}, 1},
		{[]int64{9, 7, 8, 1, 2}, 7},
	} {
		var rs []result
		for _, o := range tc.in {
			rs = append(rs, r(o))
		}
		if got := median(rs); got.ops != tc.want {
			t.Errorf("median(%v) = %d ops; want %d", tc.in, got.ops, tc.want)
		}
	}
}

// TestRoundTrips times two batches through a real server, then checks that
// the medians and the spread are over every batch together.
func TestRoundTrips(t *testing.T) {
	srv := zktest.Start(t)
	var rt roundTrips
	for range 2 {
		if err := rt.time(t.Context(), srv.Addr(), 10*time.Second, 5); err != nil {
			t.Fatal(err)
		}
	}
	if len(rt.reads) != 10 || len(rt.txns) != 10 || len(rt.hops) != 8 || len(rt.batchReads) != 2 {
		t.Fatalf("two batches of 5: %d reads, %d transactions, %d hops, %d batches; want 10, 10, 8, 2",
			len(rt.reads), len(rt.txns), len(rt.hops), len(rt.batchReads))
	}
	for i := range rt.reads {
		if rt.reads[i] <= 0 || rt.txns[i] <= 0 {
			t.Fatalf("sample %d: read %v, transaction %v; want both above 0", i, rt.reads[i], rt.txns[i])
		}
	}
	for i, h := range rt.hops {
		if h <= 0 {
			t.Fatalf("hop %d: %v; want above 0 (each notification after the one before)", i, h)
		}
	}

	ms := func(ds ...int) []time.Duration {
		var out []time.Duration
		for _, d := range ds {
			out = append(out, time.Duration(d)*time.Millisecond)
		}
		return out
	}
	rt = roundTrips{reads: ms(3, 1, 2, 12, 10, 11), txns: ms(4, 5, 6, 30, 20, 40), hops: ms(7, 9, 8, 50, 60), batchReads: ms(2, 11)}
	if read, txn := rt.medians(); read != 3*time.Millisecond || txn != 6*time.Millisecond {
		t.Errorf("medians of two batches: %v, %v; want 3ms, 6ms (the lower middle of all six)", read, txn)
	}
	if hop := rt.hop(); hop != 26800*time.Microsecond {
		t.Errorf("mean hop of two batches: %v; want 26.8ms (134 ms over five hops)", hop)
	}
	if lo, hi := rt.spread(); lo != 2*time.Millisecond || hi != 11*time.Millisecond {
		t.Errorf("spread: %v–%v; want 2ms–11ms", lo, hi)
	}
	if !slices.Equal(rt.reads, ms(3, 1, 2, 12, 10, 11)) {
		t.Errorf("medians sorted the samples in place: %v", rt.reads)
	}
}
