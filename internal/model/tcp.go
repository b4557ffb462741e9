package model

// Adopted says what AdoptConnections did with a listener's connections.
type Adopted struct {
	Adopted int     // now under the listener's rules
	Skipped []error // why each other one is the application's alone
}

// AnyUID makes AdoptConnections take connections of every owner.
const AnyUID = -1

// HandOver says what HandOverConnections did with an earlier process's
// connections.
type HandOver struct {
	Moved    int // now served by this data plane, with their state
	Released int // the applications' alone: their listener is not registered here, or they were passing
	Left     int // still busy at the last pass: they stay where they were and pass everything
}
