package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestReviewR131EnvironmentExact: CMD's environment, entry for entry, is
// dsync's but for the entries for the guard's use (dropped) and DSYNC_PATH
// and DSYNC_TOKEN, with entries that look like the hidden variables but
// are not (no "=", a longer name, an empty name after the prefix, empty
// values, "=" in the value), directly and with dsync as CMD (nested).
// The loader's and the race runtime's variables are set empty (no output,
// but for LD_SHOW_AUXV, which prints whatever its value, on stdout: CMD
// copies its environment to a file).
func TestReviewR131EnvironmentExact(t *testing.T) {
	t.Parallel()
	extra := []string{
		"GODEBUG=madvdontneed=1,x=y=z",
		"GORACE=",
		"LD_DEBUG=",
		"LD_SHOW_AUXV=",
		"GODEBUGX=1",
		"XGODEBUG=1",
		"DSYNC_GUARD_=",
		"DSYNC_GUARD_GODEBUGX=2",
		"DSYNC_GUARD_DSYNC_GUARD_GORACE=3",
		"GODEBUG_",
		"LD_DEBUG",
		"DSYNC_GUARD_GORACE",
		"=GODEBUG=4",
	}
	dropped := []string{"DSYNC_GUARD_GODEBUG=by hand", "DSYNC_GUARD_LD_DEBUG="}
	for _, nested := range []bool{false, true} {
		name := "direct"
		if nested {
			name = "nested"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "environ")
			path := lockPath(t)
			args := []string{"lock", "-zk", shared.Addr(), path, "--"}
			if nested {
				path += "-inner"
				args = append(args, bin, "lock", "-zk", shared.Addr(), path, "--")
			}
			args = append(args, "cp", "/proc/self/environ", out)
			var env []string
			p := startWith(t, func(p *proc) {
				p.cmd.Env = slices.Concat(slices.DeleteFunc(p.cmd.Env, func(kv string) bool {
					k, _, _ := strings.Cut(kv, "=")
					return slices.Contains(guardHidden, k) || k == "DSYNC_PATH" || k == "DSYNC_TOKEN" ||
						strings.HasPrefix(k, guardHiddenPrefix)
				}), extra, dropped)
				env = p.cmd.Env
			}, args...)
			if code := p.wait(t, 30*time.Second); code != 0 {
				t.Fatalf("dsync exited %d; want 0; stderr:\n%s", code, &p.stderr)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
			var gotPath string
			got = slices.DeleteFunc(got, func(kv string) bool {
				if v, ok := strings.CutPrefix(kv, "DSYNC_PATH="); ok {
					gotPath = v
				}
				return strings.HasPrefix(kv, "DSYNC_PATH=") || strings.HasPrefix(kv, "DSYNC_TOKEN=")
			})
			if gotPath != path {
				t.Errorf("CMD has DSYNC_PATH=%q; want %q", gotPath, path)
			}
			want := slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return slices.Contains(dropped, kv) })
			if !slices.Equal(got, want) {
				for _, kv := range got {
					if !slices.Contains(want, kv) {
						t.Errorf("CMD has %q, which dsync had not", kv)
					}
				}
				for _, kv := range want {
					if !slices.Contains(got, kv) {
						t.Errorf("CMD lacks %q", kv)
					}
				}
				if !t.Failed() {
					t.Errorf("CMD's entries differ in order or count:\n got %q\nwant %q", got, want)
				}
			}
		})
	}
}
