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

// r130StaticCmd builds a static program (no dynamic loader, no race
// runtime) that prints, as printenv does, the values of the variables
// named in its arguments that are set: a CMD that never writes at start,
// whatever LD_DEBUG or GORACE say.
func r130StaticCmd(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := `package main

import (
	"fmt"
	"os"
)

func main() {
	for _, n := range os.Args[1:] {
		if v, ok := os.LookupEnv(n); ok {
			fmt.Println(v)
		}
	}
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module printenv\n\ngo 1.21\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "printenv")
	build := exec.Command("go", "build", "-o", exe, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return exe
}

// TestReviewR130GuardStartupQuietOnTostopTerminal: dsync in the
// foreground of a tostop terminal (its stderr), with a variable that makes
// a program's start-up write: the Go runtime's, the race runtime's (dsync
// built with -race), the dynamic loader's (dsync links it: cgo). CMD, a
// static program, gets the variable as dsync got it, and no variable named
// for the guard's use (one set by hand is dropped); dsync exits as CMD
// did. The guard, in the background, used to write at start, before its
// main, where SIGTTOU stops a process: it stopped for good before it
// started CMD, and dsync, waiting for it with SIGINT held back, never
// exited (GODEBUG: round 129; the others: round 130). LD_SHOW_AUXV also
// put the guard's auxiliary vector into CMD's output.
func TestReviewR130GuardStartupQuietOnTostopTerminal(t *testing.T) {
	t.Parallel()
	printenv := r130StaticCmd(t)
	race := raceBin(t)
	// GODEBUG's CMD is not a Go program, which inittrace would make
	// write (and stop, as any background job that writes); printenv exits
	// 1 when a variable is not set.
	shPrintenv := []string{"sh", "-c", `printenv "$@"; exit 0`, "sh"}
	for _, c := range []struct {
		name, value, exe string
		printenv         []string
	}{
		{"GODEBUG", "inittrace=1", bin, shPrintenv},
		{"GORACE", "verbosity=1", race, []string{printenv}},
		{"LD_DEBUG", "statistics", bin, []string{printenv}},
		{"LD_SHOW_AUXV", "1", bin, []string{printenv}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var tty *os.File
			p := startWith(t, func(p *proc) {
				p.cmd.Path, p.cmd.Args[0] = c.exe, c.exe
				tty = r128TostopTTY(t, p)
				p.cmd.Env = append(p.cmd.Env, c.name+"="+c.value, guardHiddenPrefix+c.name+"=by hand")
			}, slices.Concat([]string{"lock", "-zk", shared.Addr(), lockPath(t), "--"}, c.printenv, []string{c.name, guardHiddenPrefix + c.name})...)
			tty.Close() // dsync has its own
			if code := p.wait(t, 30*time.Second); code != 0 {
				t.Errorf("dsync exited %d; want CMD's 0; stderr:\n%s", code, &p.stderr)
			}
			// LD_SHOW_AUXV: dsync's own auxiliary vector comes first, on
			// the stdout it shares with CMD; the guard's must not follow.
			out := p.stdout.String()
			if n := strings.Count(out, "AT_EXECFN:"); n > 1 {
				t.Errorf("%d auxiliary vectors on stdout; want dsync's alone:\n%s", n, out)
			}
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if got, want := lines[len(lines)-1], c.value; got != want {
				t.Errorf("CMD printed %q; want %q: %s as dsync got it, and no variable for the guard's use", got, want, c.name)
			}
		})
	}
}
