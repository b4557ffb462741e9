package model

// ServiceID names a registered socket.
type ServiceID uint32

// RuleID names an installed rule; it stays the same when the rule is replaced.
type RuleID uint32
