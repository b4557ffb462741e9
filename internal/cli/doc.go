// Package cli is santactl: the commands an operator runs against santad
// (docs/santactl.md). Run is the whole program behind main, with the
// command line, the socket and the output streams as arguments, so that
// tests can drive it against a fake daemon and integration tests against
// the real one.
package cli
