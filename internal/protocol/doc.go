// Package protocol encodes and decodes the messages santad and its clients
// exchange over the Unix socket, as docs/protocol.md specifies them.
//
// Every message is a Body: a Go type per request and per reply. Encode turns
// one into a datagram, Decode turns a datagram back into its Header and
// Body. Decode trusts nothing it reads: every length and count is checked
// against the bytes left before anything is allocated, and a failure is a
// *Error carrying the errno the daemon answers with, so a server can put the
// decode error straight into its ERROR reply.
package protocol
