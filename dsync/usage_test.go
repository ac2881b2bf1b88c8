package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestBadUsageExits2(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string // in stderr, besides the usage
	}{
		{"no command", nil, "usage: dsync <command>"},
		{"unknown command", []string{"frob", "/x"}, `unknown command "frob"`},
		{"help unknown", []string{"help", "frob"}, `unknown command "frob"`},
		{"lock missing PATH", []string{"lock"}, "missing PATH"},
		{"lock missing PATH before --", []string{"lock", "--", "true"}, "missing PATH"},
		{"lock missing --", []string{"lock", "/x"}, "missing -- before CMD"},
		{"lock CMD without --", []string{"lock", "/x", "true"}, `unexpected argument "true"`},
		{"lock missing CMD", []string{"lock", "/x", "--"}, "missing CMD"},
		{"lock unknown flag", []string{"lock", "-frob", "/x", "--", "true"}, "flag provided but not defined: -frob"},
		{"lock bad -lost", []string{"lock", "-lost", "maybe", "/x", "--", "true"}, `invalid value "maybe" for flag -lost`},
		{"lock bad -timeout", []string{"lock", "-timeout", "soon", "/x", "--", "true"}, "-timeout"},
		{"lock negative -timeout", []string{"lock", "-timeout", "-1s", "/x", "--", "true"}, "-timeout must not be negative"},
		{"lock zero -session-timeout", []string{"lock", "-session-timeout", "0", "/x", "--", "true"}, "-session-timeout must be positive"},
		{"lock -grace too long", []string{"lock", "-session-timeout", "2s", "-grace", "600ms", "/x", "--", "true"}, "-grace 600ms is too long for a session timeout of 2s"},
		{"lock -grace too long by default", []string{"lock", "-grace", "5s", "/x", "--", "true"}, "-grace must be at most 2.5s"},
		{"lock bad -exit-lost", []string{"lock", "-exit-lost", "256", "/x", "--", "true"}, "-exit-lost must be between 0 and 255"},
		{"lock relative PATH", []string{"lock", "x", "--", "true"}, "must start with /"},
		{"lock trailing slash", []string{"lock", "/x/", "--", "true"}, "must not end with /"},
		{"lock empty -zk", []string{"lock", "-zk", ",", "/x", "--", "true"}, "-zk: no servers"},
		{"lock -zk with a chroot", []string{"lock", "-zk", "zk1:2181,zk2:2181/app", "/x", "--", "true"}, `-zk: zkconn: server "zk2:2181/app": a chroot (/app) is not supported`},
		{"lock -zk port out of range", []string{"lock", "-zk", "zk1:99999", "/x", "--", "true"}, `-zk: zkconn: server "zk1:99999": the port must be a number from 1 to 65535`},
		{"sem missing -max", []string{"sem", "/x", "--", "true"}, "-max N is required"},
		{"sem zero -max", []string{"sem", "-max", "0", "/x", "--", "true"}, "-max N is required"},
		{"sem negative -max", []string{"sem", "-max", "-2", "/x", "--", "true"}, "-max N is required"},
		{"sem -n above -max", []string{"sem", "-max", "2", "-n", "3", "/x", "--", "true"}, "-n 3: must be between 1 and -max (2)"},
		{"sem zero -n", []string{"sem", "-max", "2", "-n", "0", "/x", "--", "true"}, "-n 0"},
		{"sem missing CMD", []string{"sem", "-max", "2", "/x", "--"}, "missing CMD"},
		{"ls missing PATH", []string{"ls"}, "missing PATH"},
		{"ls two paths", []string{"ls", "/x", "/y"}, `unexpected argument "/y"`},
		{"ls lock flag", []string{"ls", "-try", "/x"}, "flag provided but not defined: -try"},
		{"elect missing CMD", []string{"elect", "/x", "--"}, "missing CMD"},
		{"elect missing --", []string{"elect", "-id", "a", "/x"}, "missing -- before CMD"},
		{"elect -try", []string{"elect", "-try", "/x", "--", "true"}, "flag provided but not defined: -try"},
		{"elect -listen with CMD", []string{"elect", "-listen", "/x", "--", "true"}, "-listen takes no CMD"},
		{"elect -listen -id", []string{"elect", "-listen", "-id", "a", "/x"}, "-id does not go with -listen"},
		{"elect -listen -timeout", []string{"elect", "-listen", "-timeout", "1s", "/x"}, "-timeout does not go with -listen"},
		{"elect -listen two paths", []string{"elect", "-listen", "/x", "/y"}, `unexpected argument "/y"`},
		{"once missing CMD", []string{"once", "/x", "--"}, "missing CMD"},
		{"once -revocable", []string{"once", "-revocable", "/x", "--", "true"}, "flag provided but not defined: -revocable"},
		{"once -status with CMD", []string{"once", "-status", "/x", "--", "true"}, "-status takes no CMD"},
		{"once -status -reset", []string{"once", "-status", "-reset", "/x"}, "-status and -reset exclude each other"},
		{"once -reset -grace", []string{"once", "-reset", "-grace", "1s", "/x"}, "-grace does not go with -reset"},
		{"once -status missing PATH", []string{"once", "-status"}, "missing PATH"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tt.args, &stdout, &stderr)
		if code != exitUsage {
			t.Errorf("%s: dsync %q exited %d; want %d", tt.name, tt.args, code, exitUsage)
		}
		if !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("%s: stderr = %q; want it to contain %q", tt.name, stderr.String(), tt.want)
		}
		if !strings.Contains(stderr.String(), "usage: dsync") {
			t.Errorf("%s: stderr = %q; want the usage", tt.name, stderr.String())
		}
		if stdout.Len() != 0 {
			t.Errorf("%s: stdout = %q; want nothing", tt.name, stdout.String())
		}
	}
}

func TestHelpExits0(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"-h"}, []string{"usage: dsync <command>", "lock", "sem", "ls", "Exit status"}},
		{[]string{"help"}, []string{"usage: dsync <command>", "lock", "sem", "ls"}},
		{[]string{"help", "lock"}, []string{"usage: dsync lock [flags] PATH -- CMD", "-try", "-lost", "Exit status"}},
		{[]string{"help", "ls"}, []string{"usage: dsync ls [flags] PATH", "-zk"}},
		{[]string{"lock", "-h"}, []string{"usage: dsync lock", "-grace", "-session-timeout", "-timeout"}},
		{[]string{"sem", "-h"}, []string{"usage: dsync sem [flags] -max N [-n W] PATH -- CMD", "-max", "-n"}},
		{[]string{"ls", "-h"}, []string{"usage: dsync ls"}},
		{[]string{"-h"}, []string{"elect", "once", `"dsync help elect"`}},
		{[]string{"help", "elect"}, []string{"usage: dsync elect [flags] PATH -- CMD", "dsync elect -listen", "-id", "-selector", "-lost", "Exit status", "With -listen"}},
		{[]string{"elect", "-h"}, []string{"usage: dsync elect", "-grace", "-timeout"}},
		{[]string{"help", "once"}, []string{"usage: dsync once [flags] PATH -- CMD", "dsync once -status", "-reset", "-lost", "Exit status", "With -status"}},
		{[]string{"once", "-h"}, []string{"usage: dsync once", "-status"}},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), tt.args, &stdout, &stderr); code != 0 {
			t.Errorf("dsync %q exited %d; want 0 (stderr %q)", tt.args, code, stderr.String())
		}
		for _, w := range tt.want {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("dsync %q: stdout = %q; want it to contain %q", tt.args, stdout.String(), w)
			}
		}
	}
}

// TestBinaryBadUsage checks that main passes run's status on.
func TestBinaryBadUsage(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := dsyncRun(t, "lock", "/x")
	if code != exitUsage || !strings.Contains(stderr, "usage: dsync lock") || stdout != "" {
		t.Fatalf("dsync lock /x: exit %d, stdout %q, stderr %q; want exit 2 and the usage on stderr", code, stdout, stderr)
	}
}
