package main

import (
	"os"
	"os/exec"
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
// values, "=" in the value), directly and with dsync as CMD (nested), and
// so with dsync built with -race (whose guard gets a GORACE of its own).
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
	for _, c := range []struct {
		name   string
		race   bool
		nested bool
	}{{"direct", false, false}, {"nested", false, true}, {"race direct", true, false}, {"race nested", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			exe := bin
			if c.race {
				exe = raceBin(t)
			}
			out := filepath.Join(t.TempDir(), "environ")
			path := lockPath(t)
			args := []string{"lock", "-zk", shared.Addr(), path, "--"}
			if c.nested {
				path += "-inner"
				args = append(args, exe, "lock", "-zk", shared.Addr(), path, "--")
			}
			args = append(args, "cp", "/proc/self/environ", out)
			var env []string
			p := startWith(t, func(p *proc) {
				p.cmd.Path, p.cmd.Args[0] = exe, exe
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

// TestReviewR131GuardStartupOutputOnTostopTerminal: dsync in the
// foreground of a tostop terminal (its stderr), with output at the start
// of every dynamically linked program that no variable of guardHidden asks
// for: the dynamic loader's warning for an LD_PRELOAD or LD_AUDIT library
// that is not there, and a preloaded library that prints. dsync and its
// guard both write it (CMD is static); the guard, in the background, used
// to stop there, before its main, for good, and dsync waited for it with
// SIGINT held back. Now the guard starts with SIGTTOU blocked, the write
// goes through, and dsync exits as CMD did.
func TestReviewR131GuardStartupOutputOnTostopTerminal(t *testing.T) {
	t.Parallel()
	printenv := r130StaticCmd(t)
	lib := r131Preload(t, `#include <unistd.h>
__attribute__((constructor)) static void hello(void) { write(2, "r131 hello\n", 11); }
`)
	missing := filepath.Join(t.TempDir(), "missing.so")
	for _, c := range []struct{ name, env, says string }{
		{"preload-missing", "LD_PRELOAD=" + missing, "cannot be preloaded"},
		{"audit-missing", "LD_AUDIT=" + missing, "cannot be loaded as audit interface"},
		{"preload-prints", "LD_PRELOAD=" + lib, "r131 hello"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var tty *os.File
			p := startWith(t, func(p *proc) {
				tty = r128TostopTTY(t, p)
				p.cmd.Env = append(p.cmd.Env, c.env, "R131=ran")
			}, "lock", "-zk", shared.Addr(), lockPath(t), "--", printenv, "R131")
			tty.Close() // dsync has its own
			if code := p.wait(t, 30*time.Second); code != 0 {
				t.Errorf("dsync exited %d; want CMD's 0; stderr:\n%s", code, &p.stderr)
			}
			if got := p.stdout.String(); got != "ran\n" {
				t.Errorf("CMD printed %q; want %q", got, "ran\n")
			}
			// Both dsync's start-up and the guard's wrote it, to the
			// terminal: the guard did write in the background.
			if !p.stderr.AwaitCount(c.says, 2, 10*time.Second) {
				t.Errorf("stderr has %q %d times; want 2 (dsync's start-up and the guard's):\n%s",
					c.says, strings.Count(p.stderr.String(), c.says), &p.stderr)
			}
		})
	}
}

// r131Preload builds a shared library from the C source code, for
// LD_PRELOAD, and returns its path.
func r131Preload(t *testing.T, code string) string {
	t.Helper()
	dir := t.TempDir()
	src, lib := filepath.Join(dir, "preload.c"), filepath.Join(dir, "preload.so")
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-shared", "-fPIC", "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return lib
}
