package zktest

// HeldDialer is the zk.Dialer of zktest's own go-zookeeper connections
// (dialer), for the package's tests: under the race detector it keeps
// their clients clear of go-zookeeper's data race on a new connection (see
// heldConn).
var HeldDialer = dialer
