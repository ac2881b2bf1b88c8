package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	if isGuard(os.Args) {
		os.Exit(guard(os.Args[1:]))
	}
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// run runs dsync with the command-line arguments args (without the program
// name) and returns the exit status. CMD's output goes to stdout and stderr
// (and its input comes from os.Stdin); so do dsync's own messages and usage.
// Canceling ctx ends a wait for a lock (or leadership), or terminates CMD as
// -lost term would, without exit status 3; it ends "elect -listen" too.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, mainUsage)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "lock", "sem", "elect", "once":
		s, code, ok := parseOrUsage(name, rest, stdout, stderr)
		if !ok {
			return code
		}
		switch {
		case s.listen:
			return runListen(ctx, s, stdout, stderr)
		case s.status || s.reset:
			return runOnceAdmin(ctx, s, stdout, stderr)
		}
		return runHeld(ctx, name, s, stdout, stderr)
	case "ls":
		s, code, ok := parseOrUsage(name, rest, stdout, stderr)
		if !ok {
			return code
		}
		return runLs(ctx, s, stdout, stderr)
	case "revoke":
		s, code, ok := parseOrUsage(name, rest, stdout, stderr)
		if !ok {
			return code
		}
		return runRevoke(ctx, s, stdout, stderr)
	case "help", "-h", "-help", "--help":
		if name == "help" && len(rest) > 0 {
			switch rest[0] {
			case "lock", "sem", "elect", "once", "ls", "revoke":
				newFlagSet(rest[0], &settings{}, stdout).Usage()
				return 0
			}
			fmt.Fprintf(stderr, "dsync: unknown command %q\n\n%s", rest[0], mainUsage)
			return exitUsage
		}
		fmt.Fprint(stdout, mainUsage)
		return 0
	}
	fmt.Fprintf(stderr, "dsync: unknown command %q\n\n%s", name, mainUsage)
	return exitUsage
}

// parseOrUsage parses the arguments of the subcommand name. When it returns
// ok false, the caller exits with code: 0 after -h (usage on stdout), 2 after
// bad usage (the problem and the usage on stderr).
func parseOrUsage(name string, args []string, stdout, stderr io.Writer) (s *settings, code int, ok bool) {
	s, err := parse(name, args)
	switch {
	case err == nil:
		return s, 0, true
	case errors.Is(err, flag.ErrHelp):
		newFlagSet(name, &settings{}, stdout).Usage()
		return nil, 0, false
	}
	fmt.Fprintf(stderr, "dsync %s: %v\n\n", name, err)
	newFlagSet(name, &settings{}, stderr).Usage()
	return nil, exitUsage, false
}
