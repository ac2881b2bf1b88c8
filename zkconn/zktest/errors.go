package zktest

import "errors"

// ErrNotInstalled is wrapped by the error StartServer returns when Java or
// ZooKeeper cannot be found; Start and StartEnsemble fail the test with that
// error. The wrapping error names what is missing and
// how to install it.
var ErrNotInstalled = errors.New("zktest: ZooKeeper or Java not installed")

// ErrClosed is returned by the methods of a Server that has been closed.
var ErrClosed = errors.New("zktest: server closed")

// ErrNotRunning is wrapped by the errors of Pause and Resume when the
// server's process is not running: it was stopped, or it exited on its own.
var ErrNotRunning = errors.New("zktest: server not running")

// ErrNotServing is wrapped by the errors of Mode and Mntr when the server is up
// but does not serve requests: it is still starting, or, as an ensemble member,
// it has no quorum.
var ErrNotServing = errors.New("zktest: server not serving requests")
