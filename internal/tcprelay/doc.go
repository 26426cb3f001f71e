// Package tcprelay is a diagnostic: two minimal TCP relays written in
// Go, to measure what Go's runtime costs a relay next to haproxy in
// front of the same server (`rdmagw bench -anchors`). They copy bytes
// and parse nothing; the gateway's data path does not use them.
//
//   - ModeNetpoll is the idiomatic design: one goroutine per direction
//     per connection, Read then Write on a net.Conn, parked on Go's
//     netpoller between messages. What any goroutine-per-socket Go
//     server pays per message is in its cost: the netpoller wake-up,
//     the hand-off of the ready goroutine to a P, an idle M parked and
//     woken (futex), a spinning M looking for work.
//   - ModeEpoll is haproxy's design in Go: Workers goroutines, each
//     locked to its own thread with its own epoll instance, on sockets
//     Go's netpoller never sees (unix.Socket/Accept4, non-blocking).
//     An event runs to completion on the thread that waited for it:
//     readable -> recv -> send to the peer; what the peer does not take
//     waits for EPOLLOUT while the reading side is off. epoll_wait is a
//     blocking system call on a locked thread, so no goroutine is
//     readied and no other thread is woken per message.
//
// Both use 64 KiB buffers per direction, allocated per connection, and
// nothing per message. A connection's two sockets close together when
// either side closes or fails (a half-close is not carried).
//
// Files:
//   - tcprelay.go: Config, Start, Relay; ModeNetpoll.
//   - epoll.go: ModeEpoll (workers, accept, run to completion, EPOLLOUT
//     back-pressure) and its raw sockets.
package tcprelay
