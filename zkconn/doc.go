// Package zkconn is the session layer dsync's primitives stand on: one
// ZooKeeper session at a time shared by many goroutines, its state fanned out
// over channels, and the few operations every lock recipe needs done right.
//
// A Session (Dial) owns a go-zookeeper *zk.Conn. It reports the session's
// state as Connected, Suspended (the connection dropped, or the server
// answered no request for two thirds of the session timeout, notifications
// arriving or not; the session may be alive), Reconnected, Lost (expired, or
// disconnected until shortly before the server could expire it) and Closed,
// to any number of subscribers, without ever blocking the client or dropping
// a transition. After a loss it carries on with a new ZooKeeper session, so
// values made at start-up keep working. Close ends it at once; Shutdown first
// waits (within its ctx) until the server can hear of the end, so that a
// release cut by a dropped connection goes out again rather than wait for the
// session to expire.
// It connects over plain TCP, or over TLS with WithTLS (ZooKeeper's
// secureClientPort; a handshake every server refuses fails Dial at once with
// ErrTLSHandshake).
//
// A Handle (Session.Current) names one ZooKeeper session. Nodes created
// through it belong to that session; its Lost and Suspended channels tell a
// holder when it can no longer prove it holds what it created. Its helpers:
//
//   - CreateProtected: EPHEMERAL_SEQUENTIAL create in Curator's protected
//     format (_c_<uuid>-<name><seq>), with CONTAINER parents, that recovers a
//     node whose create reply was lost to a dropped connection (its UUIDs
//     are version 8, so IsNative tells its nodes from Curator's);
//   - Delete: a guaranteed delete, retried in the background until done,
//     that can send signals (fire exists watches) in the same transaction;
//   - Wait: one select over a watch, a context and the loss of the session;
//   - Do: a repeatable request, retried across reconnects.
//
// ValidatePath checks a path against ZooKeeper's rules before anything is
// sent. Package zktest starts real ZooKeeper servers for tests.
package zkconn
