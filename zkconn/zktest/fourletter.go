package zktest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// commandTimeout bounds a four-letter word whose context has no deadline, so
// that asking a paused server does not hang.
const commandTimeout = 10 * time.Second

// maxReply bounds the reply read from the server.
const maxReply = 64 << 20

// notServing is how ZooKeeper 3.8 answers srvr, stat and mntr when it has no
// running ZooKeeperServer (still starting, or an ensemble member without quorum).
const notServing = "This ZooKeeper instance is not currently serving requests"

// fourLetter sends word to the server at addr and returns its whole reply.
func fourLetter(ctx context.Context, addr, word string) (string, error) {
	if len(word) != 4 {
		return "", fmt.Errorf("zktest: %q is not a four-letter word", word)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, commandTimeout)
		defer cancel()
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("zktest: %s %s: %w", word, addr, err)
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	// Cancellation without a deadline change: wake the reads.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	if _, err := io.WriteString(conn, word); err != nil {
		return "", fmt.Errorf("zktest: %s %s: %w", word, addr, ctxErr(ctx, err))
	}
	reply, err := io.ReadAll(io.LimitReader(conn, maxReply))
	if err != nil {
		return "", fmt.Errorf("zktest: %s %s: %w", word, addr, ctxErr(ctx, err))
	}
	return string(reply), nil
}

// ctxErr prefers ctx's error to the I/O error it caused, so that callers can
// test for context.DeadlineExceeded with errors.Is.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return context.DeadlineExceeded
	}
	return err
}

// parseMntr parses mntr's reply: one "key<TAB>value" line per metric.
func parseMntr(reply string) (map[string]string, error) {
	if strings.Contains(reply, notServing) {
		return nil, ErrNotServing
	}
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(reply))
	sc.Buffer(nil, maxReply)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "\t")
		if !ok || k == "" {
			continue
		}
		m[k] = v
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("zktest: mntr: unexpected reply %q", reply)
	}
	return m, nil
}

// parseMode finds the "Mode: " line of srvr's (or stat's) reply.
func parseMode(reply string) (string, error) {
	if strings.Contains(reply, notServing) {
		return "", ErrNotServing
	}
	for line := range strings.Lines(reply) {
		if mode, ok := strings.CutPrefix(strings.TrimSpace(line), "Mode: "); ok {
			return mode, nil
		}
	}
	return "", fmt.Errorf("zktest: srvr: no mode in reply %q", reply)
}

// parseWchp parses the reply to wchp: each watched path on a line of its
// own, then the ids of the sessions watching it, one per line, each after a
// tab.
func parseWchp(reply string) (map[string][]int64, error) {
	m := map[string][]int64{}
	var path string
	for _, line := range strings.Split(reply, "\n") {
		switch {
		case strings.HasPrefix(line, "/"):
			path = line
		case strings.HasPrefix(line, "\t0x"):
			id, err := strconv.ParseUint(line[3:], 16, 64)
			if err != nil {
				return nil, fmt.Errorf("zktest: wchp line %q: %w", line, err)
			}
			m[path] = append(m[path], int64(id))
		}
	}
	return m, nil
}
