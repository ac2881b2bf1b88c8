package zktest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestStartServerRemovesStaleDirs pins the directory of a program killed
// before it closed its server staying in the temporary directory for good:
// the next StartServer removes those of dead processes, and only those.
func TestStartServerRemovesStaleDirs(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(tmp, fmt.Sprintf("zktest-%d-123", gone.Process.Pid))
	live := filepath.Join(tmp, fmt.Sprintf("zktest-%d-456", os.Getppid()))
	other := filepath.Join(tmp, "zktest-notapid")
	for _, d := range []string{stale, live, other} {
		if err := os.MkdirAll(filepath.Join(d, "data"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s, err := StartServer()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for d, want := range map[string]bool{stale: false, live: true, other: true} {
		if _, err := os.Stat(d); (err == nil) != want {
			t.Errorf("%s exists = %v; want %v", d, err == nil, want)
		}
	}
	if got, want := filepath.Dir(s.layout.dir), tmp; got != want {
		t.Errorf("server dir %s; want it in %s", s.layout.dir, want)
	}
}
