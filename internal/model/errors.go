package model

import "errors"

// Errors of the data path that callers tell apart (with errors.Is).
var (
	ErrUnknownService = errors.New("unknown service")
	ErrUnknownRule    = errors.New("unknown rule")
	ErrExists         = errors.New("already registered")
	ErrNotSupported   = errors.New("not a socket santa can serve")
	// ErrCapacity: the host's rule or service capacity is used up.
	ErrCapacity = errors.New("capacity exhausted")
	// ErrSocketClosed: a socket to restore is gone.
	ErrSocketClosed = errors.New("socket closed")
	// ErrNotListener: a connection to adopt is not one the service's TCP
	// listener accepted (or the service is no TCP listener).
	ErrNotListener = errors.New("not a connection of a registered listening socket")
	// ErrBusy: a connection to adopt is not idle.
	ErrBusy = errors.New("connection is not idle")
)
