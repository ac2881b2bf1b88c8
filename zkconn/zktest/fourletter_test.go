package zktest

import (
	"errors"
	"testing"
)

func TestParseMntr(t *testing.T) {
	reply := "zk_version\t3.8.0-abc, built on 2024-12-29 17:54 UTC\n" +
		"zk_server_state\tleader\n" +
		"zk_synced_followers\t2\n" +
		"not a metric line\n"
	m, err := parseMntr(reply)
	if err != nil {
		t.Fatalf("parseMntr() error: %v", err)
	}
	for k, want := range map[string]string{
		"zk_version":          "3.8.0-abc, built on 2024-12-29 17:54 UTC",
		"zk_server_state":     "leader",
		"zk_synced_followers": "2",
	} {
		if got := m[k]; got != want {
			t.Errorf("parseMntr()[%s] = %q; want %q", k, got, want)
		}
	}
	if len(m) != 3 {
		t.Errorf("parseMntr() has %d keys; want 3: %v", len(m), m)
	}

	if _, err := parseMntr(notServing + "\n"); !errors.Is(err, ErrNotServing) {
		t.Errorf("parseMntr(not serving) error = %v; want ErrNotServing", err)
	}
	if _, err := parseMntr(""); err == nil {
		t.Errorf("parseMntr(\"\") error = nil; want an error")
	}
}

func TestParseMode(t *testing.T) {
	for _, tt := range []struct {
		reply   string
		want    string
		wantErr error
	}{
		{"Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nMode: standalone\nNode count: 5\n", "standalone", nil},
		{"Zxid: 0x200000000\nMode: follower\n", "follower", nil},
		{"Mode: leader", "leader", nil},
		{notServing + "\n", "", ErrNotServing},
	} {
		got, err := parseMode(tt.reply)
		if got != tt.want || !errors.Is(err, tt.wantErr) {
			t.Errorf("parseMode(%q) = %q, %v; want %q, %v", tt.reply, got, err, tt.want, tt.wantErr)
		}
	}
	if _, err := parseMode("imok"); err == nil {
		t.Errorf("parseMode(imok) error = nil; want an error")
	}
}

func TestLastLines(t *testing.T) {
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{
		{"a\nb\nc\n", 2, "b\nc"},
		{"a\nb\nc", 2, "b\nc"},
		{"a\nb\nc\n", 5, "a\nb\nc"},
		{"", 3, ""},
		{"only", 1, "only"},
	} {
		if got := lastLines(tt.s, tt.n); got != tt.want {
			t.Errorf("lastLines(%q, %d) = %q; want %q", tt.s, tt.n, got, tt.want)
		}
	}
}
